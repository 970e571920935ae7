//! URL normalization and the caller's authorization of virtual chunk containers.

use url::Url;

use super::VirtualChunkError;

/// Normalizes a virtual chunk URL: parses it (resolving `.` and `..` segments, also in
/// percent-encoded form), and turns a plain absolute path into a `file://` URL.
///
/// # Errors
/// [`VirtualChunkError::InvalidUrl`] for unparseable URLs, relative paths, and
/// `file://` URLs with a host.
pub fn normalize_url(url: &str) -> Result<String, VirtualChunkError> {
    let invalid = |reason: &str| VirtualChunkError::InvalidUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let parsed = if url.starts_with('/') {
        Url::from_file_path(url).map_err(|()| invalid("not an absolute path"))?
    } else {
        Url::parse(url).map_err(|e| invalid(&e.to_string()))?
    };
    match parsed.scheme() {
        "file" => {
            if parsed
                .host_str()
                .is_some_and(|h| !h.is_empty() && h != "localhost")
            {
                return Err(invalid("file:// URLs cannot name a host"));
            }
        }
        "s3" | "http" | "https" | "gs" | "gcs" | "az" | "abfs" => {}
        other => return Err(invalid(&format!("unsupported scheme `{other}`"))),
    }
    // The URL parser resolves dot segments for hierarchical URLs; `s3://` is not a
    // "special" scheme, so resolve its path here.
    let mut parsed = parsed;
    if parsed.scheme() == "s3" {
        let segs: Vec<String> = parsed
            .path_segments()
            .map(|s| s.map(str::to_string).collect())
            .unwrap_or_default();
        let mut out: Vec<String> = Vec::new();
        for s in segs {
            match s.as_str() {
                "." => {}
                ".." | "%2e%2e" | "%2E%2E" | ".%2e" | "%2e." => {
                    out.pop();
                }
                _ => out.push(s),
            }
        }
        parsed.set_path(&format!("/{}", out.join("/")));
    }
    Ok(parsed.to_string())
}

/// Normalizes a URL prefix like [`normalize_url`], keeping a trailing `/` (which
/// the URL parser may drop) so that the prefix still ends on a segment boundary.
///
/// # Errors
/// As [`normalize_url`].
pub fn normalize_prefix(prefix: &str) -> Result<String, VirtualChunkError> {
    let mut p = normalize_url(prefix)?;
    if prefix.ends_with('/') && !p.ends_with('/') {
        p.push('/');
    }
    Ok(p)
}

/// Which virtual chunk URL prefixes the caller trusts this repository to read.
/// Nothing is authorized by default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VirtualAccess {
    prefixes: Vec<String>,
}

impl VirtualAccess {
    /// No prefix authorized.
    pub fn none() -> Self {
        Self::default()
    }

    /// Authorizes the given URL prefixes (plain absolute paths are taken as `file://`).
    ///
    /// # Errors
    /// [`VirtualChunkError::InvalidUrl`] for an unparseable prefix.
    pub fn prefixes<I, S>(prefixes: I) -> Result<Self, VirtualChunkError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut out = VirtualAccess::default();
        for p in prefixes {
            out.authorize(p.as_ref())?;
        }
        Ok(out)
    }

    /// Adds one authorized URL prefix.
    ///
    /// # Errors
    /// [`VirtualChunkError::InvalidUrl`] for an unparseable prefix.
    pub fn authorize(&mut self, prefix: &str) -> Result<(), VirtualChunkError> {
        self.prefixes.push(normalize_prefix(prefix)?);
        Ok(())
    }

    /// The authorized prefixes, normalized.
    pub fn authorized(&self) -> &[String] {
        &self.prefixes
    }

    /// Whether a normalized URL lies under an authorized prefix.
    pub fn allows(&self, normalized_url: &str) -> bool {
        self.prefixes
            .iter()
            .any(|p| under_prefix(normalized_url, p))
    }
}

/// Whether `url` lies under `prefix`, respecting path segment boundaries
/// (`file:///data` covers `file:///data/x` but not `file:///database`).
pub fn under_prefix(url: &str, prefix: &str) -> bool {
    if !url.starts_with(prefix) {
        return false;
    }
    prefix.ends_with('/') || url.len() == prefix.len() || url.as_bytes()[prefix.len()] == b'/'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_segments_cannot_escape() {
        assert_eq!(
            normalize_url("file:///data/../etc/passwd").unwrap(),
            "file:///etc/passwd"
        );
        assert_eq!(
            normalize_url("file:///data/%2e%2e/etc/passwd").unwrap(),
            "file:///etc/passwd"
        );
        assert_eq!(
            normalize_url("s3://bucket/data/../secret/x").unwrap(),
            "s3://bucket/secret/x"
        );
        assert_eq!(normalize_url("/data/a.nc").unwrap(), "file:///data/a.nc");
        assert!(normalize_url("relative/path").is_err());
        assert!(normalize_url("ftp://x/y").is_err());
        assert!(normalize_url("file://evil.host/etc/passwd").is_err());
        let access = VirtualAccess::prefixes(["file:///data/"]).unwrap();
        assert!(access.allows(&normalize_url("file:///data/a.nc").unwrap()));
        assert!(!access.allows(&normalize_url("file:///data/../etc/passwd").unwrap()));
        assert!(!access.allows("file:///database/x"));
        let access = VirtualAccess::prefixes(["/data"]).unwrap();
        assert!(access.allows("file:///data/x"));
        assert!(!access.allows("file:///database/x"));
    }
}
