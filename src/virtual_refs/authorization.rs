//! URL normalization and the caller's authorization of virtual chunk containers.
//!
//! # What the authorization guarantees
//!
//! A virtual chunk URL comes from the repository, whose writer the reader need not
//! trust. floe reads it only when the *location actually read* lies under a prefix the
//! reader authorized ([`VirtualAccess`], the CLI's `--allow-virtual`):
//!
//! - URLs and prefixes are brought to one canonical text by [`normalize_url`] before
//!   any comparison, and that text is what is read: scheme and host lower-cased (not
//!   for `s3://` buckets, which are exact), default ports dropped, `.` and `..`
//!   segments resolved (also percent-encoded: `%2e%2e`, `.%2E`), percent-encoding
//!   made canonical. What could be read differently by different parsers is refused
//!   with [`VirtualChunkError::InvalidUrl`]: backslashes, encoded `/` or `\` (`%2f`,
//!   `%5c`), NUL, control characters, userinfo (`http://allowed@evil/`), queries and
//!   fragments, and `file://` URLs naming a host.
//! - Prefixes match whole path segments: `/data/a` authorizes `/data/a` and
//!   `/data/a/...`, never `/data/ab`.
//! - Object stores (S3, GCS, Azure, HTTP): what is checked is the URL of the exact
//!   object key requested, rebuilt from the key after object_store's own handling
//!   (it decodes percent-encoding and drops a trailing `/`); [`object_key`] produces
//!   both. A URL naming a prefix rather than an object (an empty last segment, as
//!   `PREFIX/x/..` normalizes to `PREFIX/`) is refused, for local files too.
//! - Local files: the target is resolved with [`std::fs::canonicalize`] (symbolic
//!   links and `..` followed) and checked against the canonicalized authorized
//!   prefixes; floe then opens the canonical path it checked. A symbolic link inside
//!   an authorized directory that points outside it is refused; an authorized prefix
//!   that does not exist authorizes nothing. A target that does not exist is judged
//!   by its deepest existing ancestor and never opened. (A local user who can swap a
//!   directory for a symbolic link between the check and the open can still race it;
//!   the repository's writer cannot.)
//! - HTTP(S): redirects are followed only when the new location, normalized the same
//!   way, is itself authorized; any other redirect (another host, port, scheme or
//!   path) fails with [`VirtualChunkError::RedirectRefused`] without contacting it.
//! - S3: no redirect is ever followed ([`VirtualChunkError::RedirectRefused`]). The
//!   server is the reader's: an endpoint (or a region, from which the AWS host is
//!   built) that only the repository's configuration names is not contacted
//!   ([`VirtualChunkError::UntrustedEndpoint`]); the reader chooses one by giving the
//!   container in its own configuration when opening, or as its own S3 endpoint
//!   (`AWS_ENDPOINT_URL`). So the reader's credentials only go where it sent them.
//!
//! Which *store* reads a URL is chosen by the repository's virtual chunk containers
//! (Icechunk spec 1, `config.yaml` `virtual_chunk_containers`); the authorization is
//! checked in addition to, and independently of, that choice.

use std::path::{Path, PathBuf};

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, CONTROLS};
use url::Url;

use super::VirtualChunkError;

/// The characters percent-encoded in a normalized path segment (plus every non-ASCII
/// byte). `%` is among them, so a decoded segment always re-encodes the same way.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// Normalizes a virtual chunk URL to the canonical text floe checks and reads (see
/// the module documentation): parses it, turns a plain absolute path into a `file://`
/// URL, lower-cases scheme and (for `http`, `https`, `file`) host, drops default
/// ports, resolves `.` and `..` segments (also percent-encoded) and re-encodes every
/// path segment canonically. Normalizing twice gives the same text.
///
/// # Errors
/// [`VirtualChunkError::InvalidUrl`] for unparseable URLs, relative paths, unsupported
/// schemes, backslashes, control characters, encoded `/`, `\` or NUL in a segment,
/// segments that are not UTF-8, userinfo, queries, fragments, `file://` URLs with a
/// host and object-store URLs without a bucket.
pub fn normalize_url(url: &str) -> Result<String, VirtualChunkError> {
    let invalid = |reason: &str| VirtualChunkError::InvalidUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    if url.contains('\\') {
        return Err(invalid("backslashes are not allowed"));
    }
    if url.chars().any(char::is_control) {
        return Err(invalid("control characters are not allowed"));
    }
    let mut parsed = if url.starts_with('/') {
        Url::from_file_path(url).map_err(|()| invalid("not an absolute path"))?
    } else {
        Url::parse(url).map_err(|e| invalid(&e.to_string()))?
    };
    if parsed.cannot_be_a_base() {
        return Err(invalid("not a hierarchical URL"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(invalid("credentials (userinfo) are not allowed in URLs"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(invalid("queries and fragments are not allowed"));
    }
    let has_host = parsed.host_str().is_some_and(|h| !h.is_empty());
    match parsed.scheme() {
        // The URL parser maps `file://localhost/` to an empty host.
        "file" if has_host => return Err(invalid("file:// URLs cannot name a host")),
        "file" | "http" | "https" => {}
        "s3" | "gs" | "gcs" | "az" | "azure" | "abfs" if !has_host => {
            return Err(invalid("the URL names no bucket"))
        }
        "s3" | "gs" | "gcs" | "az" | "azure" | "abfs" => {}
        other => return Err(invalid(&format!("unsupported scheme `{other}`"))),
    }
    if parsed.path().is_empty() {
        return Ok(parsed.to_string());
    }
    // Resolve dot segments ourselves (the parser leaves `..` in paths built from file
    // paths and in non-special schemes such as `s3://`), on decoded segments so that
    // every encoding of `..` is caught, and re-encode each segment canonically.
    let mut out: Vec<String> = Vec::new();
    for seg in parsed.path().split('/').skip(1) {
        let decoded = percent_decode_str(seg)
            .decode_utf8()
            .map_err(|_| invalid("a path segment is not UTF-8 once decoded"))?;
        if decoded.contains(['/', '\\', '\0']) {
            return Err(invalid(
                "encoded `/`, `\\` or NUL in a path segment are not allowed",
            ));
        }
        match &*decoded {
            "." => {}
            ".." => {
                out.pop();
            }
            _ => out.push(utf8_percent_encode(&decoded, SEGMENT).to_string()),
        }
    }
    // A trailing `.` or `..` leaves a directory: keep the segment boundary.
    let last = parsed.path().rsplit('/').next().unwrap_or("");
    let last = percent_decode_str(last).decode_utf8_lossy();
    if matches!(&*last, "." | "..") {
        out.push(String::new());
    }
    parsed.set_path(&format!("/{}", out.join("/")));
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

/// The object key a read of the normalized, non-local URL `url` requests from its
/// object store (`s3://`, `gs://`, `az://`, `http(s)://`), and the URL text of that
/// exact key, which is what the authorization checks. One function produces both, so
/// the text checked is the key fetched: object_store drops a trailing `/` and decodes
/// percent-encoding, and the returned URL is rebuilt from the key after that.
///
/// # Errors
/// [`VirtualChunkError::InvalidUrl`] when the URL names no object: its path is empty
/// or ends with `/` (`PREFIX/x/..` normalizes to `PREFIX/`, which would otherwise be
/// requested as the object named like the prefix without its slash), or object_store
/// refuses the key (empty or `.`/`..` segments).
pub fn object_key(url: &Url) -> Result<(object_store::path::Path, String), VirtualChunkError> {
    let invalid = |reason: String| VirtualChunkError::InvalidUrl {
        url: url.to_string(),
        reason,
    };
    if url.path().is_empty() || url.path().ends_with('/') {
        return Err(invalid(
            "the URL names a prefix (its last path segment is empty), not an object".into(),
        ));
    }
    let key = object_store::path::Path::from_url_path(url.path())
        .map_err(|e| invalid(format!("not an object key: {e}")))?;
    let mut text = format!("{}://{}", url.scheme(), url.authority());
    for part in key.parts() {
        text.push('/');
        text.extend(utf8_percent_encode(part.as_ref(), SEGMENT));
    }
    Ok((key, text))
}

/// A local virtual chunk target after resolving symbolic links and `..`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LocalTarget {
    /// The file exists; its canonical path (no symbolic links, no `.` or `..`).
    Existing(PathBuf),
    /// The file does not exist: the canonical path of its deepest existing ancestor
    /// joined with the missing components. Never opened.
    Missing(PathBuf),
}

impl LocalTarget {
    /// The resolved path, existing or not.
    pub fn path(&self) -> &Path {
        match self {
            LocalTarget::Existing(p) | LocalTarget::Missing(p) => p,
        }
    }
}

/// Resolves a local absolute path (symbolic links and `..` followed) to the location
/// that opening it would read. A missing path (or a dangling symbolic link) resolves
/// to [`LocalTarget::Missing`].
///
/// # Errors
/// I/O errors other than "not found" (permission denied, symbolic link loops...).
pub fn resolve_local(path: &Path) -> std::io::Result<LocalTarget> {
    let not_found = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    match std::fs::canonicalize(path) {
        Ok(p) => return Ok(LocalTarget::Existing(p)),
        Err(e) if not_found(&e) => {}
        Err(e) => return Err(e),
    }
    // Bounded by the number of components: each step removes one.
    let mut missing = Vec::new();
    let mut cur = path;
    loop {
        let (Some(name), Some(parent)) = (cur.file_name(), cur.parent()) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no ancestor of the path exists",
            ));
        };
        missing.push(name);
        cur = parent;
        match std::fs::canonicalize(cur) {
            Ok(mut p) => {
                p.extend(missing.iter().rev());
                return Ok(LocalTarget::Missing(p));
            }
            Err(e) if not_found(&e) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Which virtual chunk URL prefixes the caller trusts this repository to read.
/// Nothing is authorized by default. See the module documentation for what an
/// authorization guarantees.
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
    /// [`VirtualChunkError::InvalidUrl`] for a prefix [`normalize_url`] refuses.
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

    /// Adds one authorized URL prefix. A local prefix is resolved (symbolic links
    /// followed) each time it is checked; while it does not exist it authorizes
    /// nothing.
    ///
    /// # Errors
    /// [`VirtualChunkError::InvalidUrl`] for a prefix [`normalize_url`] refuses.
    pub fn authorize(&mut self, prefix: &str) -> Result<(), VirtualChunkError> {
        self.prefixes.push(normalize_prefix(prefix)?);
        Ok(())
    }

    /// The authorized prefixes, normalized.
    pub fn authorized(&self) -> &[String] {
        &self.prefixes
    }

    /// Whether a URL normalized by [`normalize_url`] lies under an authorized prefix.
    /// A `file://` URL is resolved first ([`resolve_local`]) and its resolved path
    /// checked with [`VirtualAccess::allows_local`]; it is refused when it cannot be
    /// resolved.
    pub fn allows(&self, normalized_url: &str) -> bool {
        if normalized_url.starts_with("file:") {
            let Some(path) = Url::parse(normalized_url)
                .ok()
                .and_then(|u| u.to_file_path().ok())
            else {
                return false;
            };
            return resolve_local(&path).is_ok_and(|t| self.allows_local(t.path()));
        }
        self.prefixes
            .iter()
            .filter(|p| !p.starts_with("file:"))
            .any(|p| under_prefix(normalized_url, p))
    }

    /// Whether a resolved local path ([`resolve_local`]) lies under one of the
    /// authorized `file://` prefixes, each canonicalized now (symbolic links
    /// followed), compared by whole path components. Prefixes that do not exist
    /// authorize nothing.
    pub fn allows_local(&self, resolved: &Path) -> bool {
        self.prefixes
            .iter()
            .filter(|p| p.starts_with("file:"))
            .filter_map(|p| Url::parse(p).ok()?.to_file_path().ok())
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .any(|prefix| resolved.starts_with(prefix))
    }
}

/// Whether `url` lies under `prefix`, respecting path segment boundaries
/// (`file:///data` covers `file:///data/x` but not `file:///database`). Both must be
/// normalized ([`normalize_url`], [`normalize_prefix`]); this compares text only.
pub fn under_prefix(url: &str, prefix: &str) -> bool {
    let Some(rest) = url.strip_prefix(prefix) else {
        return false;
    };
    prefix.ends_with('/') || rest.is_empty() || rest.starts_with('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(url: &str) -> bool {
        matches!(
            normalize_url(url),
            Err(VirtualChunkError::InvalidUrl { .. })
        )
    }

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
        assert!(invalid("relative/path"));
        assert!(invalid("ftp://x/y"));
        assert!(invalid("file://evil.host/etc/passwd"));
        let access = VirtualAccess::prefixes(["https://h/data/"]).unwrap();
        assert!(access.allows(&normalize_url("https://h/data/a.nc").unwrap()));
        assert!(!access.allows(&normalize_url("https://h/data/../etc/passwd").unwrap()));
        assert!(!access.allows("https://h/database/x"));
        let access = VirtualAccess::prefixes(["https://h/data"]).unwrap();
        assert!(access.allows("https://h/data/x"));
        assert!(!access.allows("https://h/database/x"));
    }

    #[test]
    fn plain_paths_resolve_dot_segments() {
        // `Url::from_file_path` keeps `..`: the old check compared this unresolved
        // text while the read went to the resolved path.
        assert_eq!(
            normalize_url("/data/../etc/passwd").unwrap(),
            "file:///etc/passwd"
        );
        assert_eq!(normalize_url("/data/./x/..").unwrap(), "file:///data/");
        assert_eq!(normalize_url("/../../x").unwrap(), "file:///x");
        // A literal `%2e%2e` file name is a file name, not a dot segment.
        assert_eq!(
            normalize_url("/data/%2e%2e").unwrap(),
            "file:///data/%252e%252e"
        );
    }

    #[test]
    fn every_encoding_of_dot_dot_is_resolved() {
        for enc in ["..", "%2e%2e", "%2E%2E", "%2e%2E", ".%2e", "%2E."] {
            for scheme in ["file://", "s3://bucket", "http://h", "gs://b"] {
                let url = format!("{scheme}/data/{enc}/secret");
                let n = normalize_url(&url).unwrap();
                assert_eq!(n, format!("{scheme}/secret"), "{url}");
            }
        }
    }

    #[test]
    fn ambiguous_urls_are_refused() {
        for url in [
            "file:///data\\..\\secret",
            "/data\\..\\secret",
            "s3://bucket/data/..%2fsecret",
            "s3://bucket/data/..%2Fsecret",
            "http://h/data/..%5csecret",
            "http://h/data/x%00",
            "http://h/data/x%ff",
            "http://h/data/\nx",
            "http://allowed.host@evil.host/data/x",
            "http://user:pw@h/data/x",
            "s3://user@bucket/x",
            "http://h/data/x?y",
            "http://h/data/x#y",
            "s3:///x",
            "s3:bucket/x",
            "file://otherhost/x",
            "file://127.0.0.1/x",
        ] {
            assert!(invalid(url), "{url}");
        }
    }

    #[test]
    fn case_ports_and_encoding_are_canonical() {
        assert_eq!(
            normalize_url("HTTP://Example.COM:80/Data/x").unwrap(),
            "http://example.com/Data/x"
        );
        assert_eq!(
            normalize_url("https://example.com:443/a").unwrap(),
            "https://example.com/a"
        );
        assert_eq!(
            normalize_url("http://example.com:8080/a").unwrap(),
            "http://example.com:8080/a"
        );
        assert_eq!(
            normalize_url("FILE://LOCALHOST/data/x").unwrap(),
            "file:///data/x"
        );
        // Unreserved characters decoded, hex digits of the rest upper-cased.
        assert_eq!(
            normalize_url("http://h/d%61ta/a%2a%3fb%20c").unwrap(),
            "http://h/data/a*%3Fb%20c"
        );
        // Buckets are exact.
        assert_eq!(normalize_url("S3://Bucket/x").unwrap(), "s3://Bucket/x");
        // Normalizing twice changes nothing.
        for url in [
            "http://h/d%61ta/a%2a%3fb%20c",
            "/data/%2e%2e",
            "/data/sp ace/ü",
            "s3://b/x/../y/",
        ] {
            let once = normalize_url(url).unwrap();
            assert_eq!(normalize_url(&once).unwrap(), once, "{url}");
        }
    }

    #[test]
    fn object_keys_are_what_is_checked() {
        let key = |u: &str| object_key(&Url::parse(&normalize_url(u).unwrap()).unwrap());
        let (path, text) = key("s3://b/data/a%20b/c.nc").unwrap();
        assert_eq!(path.as_ref(), "data/a b/c.nc");
        assert_eq!(text, "s3://b/data/a%20b/c.nc");
        let (path, text) = key("http://h:8080/data/x").unwrap();
        assert_eq!(path.as_ref(), "data/x");
        assert_eq!(text, "http://h:8080/data/x");
        for prefix in [
            "s3://b/data/x/..",
            "gs://b/data/",
            "http://h/data/.",
            "az://c/",
            "s3://b",
        ] {
            assert!(
                matches!(key(prefix), Err(VirtualChunkError::InvalidUrl { .. })),
                "{prefix}"
            );
        }
        // Empty segments would be dropped by the key: refused.
        assert!(matches!(
            key("s3://b/data//x"),
            Err(VirtualChunkError::InvalidUrl { .. })
        ));
    }

    #[test]
    fn prefixes_match_whole_segments() {
        assert!(under_prefix("s3://b/data/x", "s3://b/data"));
        assert!(under_prefix("s3://b/data", "s3://b/data"));
        assert!(!under_prefix("s3://b/database", "s3://b/data"));
        assert!(!under_prefix("s3://b.evil/x", "s3://b"));
        assert!(under_prefix("s3://b/data/x", "s3://b/data/"));
        let access = VirtualAccess::prefixes(["s3://b/data"]).unwrap();
        assert!(!access.allows("s3://b/data%2Fx/y"));
        // A file:// prefix never authorizes other schemes and vice versa.
        let access = VirtualAccess::prefixes(["file:///", "http://h/"]).unwrap();
        assert!(!access.allows("s3://h/x"));
    }

    #[test]
    fn local_targets_resolve_symlinks_and_missing_tails() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("data")).unwrap();
        std::fs::write(root.join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink(root.join("secret"), root.join("data/link")).unwrap();
        assert_eq!(
            resolve_local(&root.join("data/link")).unwrap(),
            LocalTarget::Existing(root.join("secret"))
        );
        assert_eq!(
            resolve_local(&root.join("data/a/b")).unwrap(),
            LocalTarget::Missing(root.join("data/a/b"))
        );
        let access = VirtualAccess::prefixes([root.join("data").display().to_string()]).unwrap();
        assert!(!access.allows_local(&root.join("secret")));
        assert!(access.allows_local(&root.join("data/a/b")));
        assert!(
            !access.allows(&normalize_url(&root.join("data/link").display().to_string()).unwrap())
        );
    }
}
