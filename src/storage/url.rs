//! Parsing repository locations: a filesystem path or `file://` URL, `memory://`,
//! `s3://bucket/prefix`, `gs://bucket/prefix` and `az://container/prefix`.

use std::path::PathBuf;

use super::{StorageError, StorageResult};

/// Where a repository lives, parsed from a URL or path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageLocation {
    /// A directory of the local filesystem.
    Local(PathBuf),
    /// A fresh in-memory store.
    Memory,
    /// An S3 bucket and key prefix (no leading or trailing `/`).
    S3 {
        /// Bucket name.
        bucket: String,
        /// Key prefix inside the bucket, possibly empty.
        prefix: String,
    },
    /// A Google Cloud Storage bucket and key prefix (credentials from the
    /// environment).
    Gcs {
        /// Bucket name.
        bucket: String,
        /// Key prefix inside the bucket, possibly empty.
        prefix: String,
    },
    /// An Azure Blob Storage container and key prefix (the account and credentials
    /// from the `AZURE_*` environment variables).
    Azure {
        /// Container name.
        container: String,
        /// Key prefix inside the container, possibly empty.
        prefix: String,
    },
}

/// Parses a repository location.
///
/// # Errors
/// [`StorageError::InvalidLocation`] for an unknown scheme, an `s3://` URL without a
/// bucket, or an empty path.
pub fn parse_storage_url(location: &str) -> StorageResult<StorageLocation> {
    let invalid = |reason: &str| StorageError::InvalidLocation {
        location: location.to_string(),
        reason: reason.to_string(),
    };
    if location.is_empty() {
        return Err(invalid("empty location"));
    }
    if let Some(rest) = location.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(invalid("an s3:// URL needs a bucket name"));
        }
        return Ok(StorageLocation::S3 {
            bucket: bucket.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
        });
    }
    for (scheme, azure) in [("gs://", false), ("az://", true)] {
        if let Some(rest) = location.strip_prefix(scheme) {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(invalid(&format!(
                    "a {scheme} URL needs a bucket or container name"
                )));
            }
            let (bucket, prefix) = (bucket.to_string(), prefix.trim_matches('/').to_string());
            return Ok(if azure {
                StorageLocation::Azure {
                    container: bucket,
                    prefix,
                }
            } else {
                StorageLocation::Gcs { bucket, prefix }
            });
        }
    }
    if location == "memory://" || location.starts_with("memory://") {
        return Ok(StorageLocation::Memory);
    }
    if let Some(rest) = location.strip_prefix("file://") {
        if rest.is_empty() {
            return Err(invalid("a file:// URL needs a path"));
        }
        return Ok(StorageLocation::Local(PathBuf::from(rest)));
    }
    if let Some((scheme, _)) = location.split_once("://") {
        if !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+')
        {
            return Err(invalid(&format!(
                "unsupported scheme `{scheme}://` (use a path, file://, memory://, s3://, gs:// or az://)"
            )));
        }
    }
    Ok(StorageLocation::Local(PathBuf::from(location)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        assert_eq!(
            parse_storage_url("/tmp/x").unwrap(),
            StorageLocation::Local("/tmp/x".into())
        );
        assert_eq!(
            parse_storage_url("file:///tmp/x").unwrap(),
            StorageLocation::Local("/tmp/x".into())
        );
        assert_eq!(
            parse_storage_url("memory://").unwrap(),
            StorageLocation::Memory
        );
        assert_eq!(
            parse_storage_url("s3://b/p/q/").unwrap(),
            StorageLocation::S3 {
                bucket: "b".into(),
                prefix: "p/q".into()
            }
        );
        assert_eq!(
            parse_storage_url("s3://b").unwrap(),
            StorageLocation::S3 {
                bucket: "b".into(),
                prefix: "".into()
            }
        );
        assert!(matches!(
            parse_storage_url("s3://"),
            Err(StorageError::InvalidLocation { .. })
        ));
        assert_eq!(
            parse_storage_url("gs://b/x/").unwrap(),
            StorageLocation::Gcs {
                bucket: "b".into(),
                prefix: "x".into()
            }
        );
        assert_eq!(
            parse_storage_url("az://c").unwrap(),
            StorageLocation::Azure {
                container: "c".into(),
                prefix: "".into()
            }
        );
        assert!(matches!(
            parse_storage_url("az:///x"),
            Err(StorageError::InvalidLocation { .. })
        ));
        assert!(matches!(
            parse_storage_url("ftp://b/x"),
            Err(StorageError::InvalidLocation { .. })
        ));
        assert_err!(
            parse_storage_url(""),
            crate::storage::StorageError::InvalidLocation { .. }
        );
    }
}
