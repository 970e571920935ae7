//! Which spec version a repository's refs are kept in, read from what storage holds.

use crate::error::{Error, Result};
use crate::format::{keys, SpecVersion};
use crate::storage::{Storage, StorageError};

/// The spec version of the repository in `storage`, or `None` when there is none.
///
/// As Icechunk decides it: a `repo` object ([`keys::SPEC2_REPO`]) means spec 2 (even
/// beside spec-1 refs, an unfinished upgrade); else a `main` branch ref file means
/// spec 1. Two `head` requests, made concurrently.
///
/// # Errors
/// Storage errors other than a missing object.
pub async fn spec_version_of(storage: &dyn Storage) -> Result<Option<SpecVersion>> {
    let present = |key: String| async move {
        match storage.head(&key).await {
            Ok(_) => Ok(true),
            Err(StorageError::NotFound { .. }) => Ok(false),
            Err(e) => Err(Error::from(e)),
        }
    };
    let (repo, main) = futures::try_join!(
        present(keys::SPEC2_REPO.to_string()),
        present(keys::branch("main"))
    )?;
    Ok(if repo {
        Some(SpecVersion::V2)
    } else if main {
        Some(SpecVersion::V1)
    } else {
        None
    })
}
