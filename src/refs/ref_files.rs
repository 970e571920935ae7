//! Spec 1: branches and tags as ref files: branches (`refs/branch.<name>/ref.json`, moved by
//! compare-and-swap), tags (`refs/tag.<name>/ref.json`, create-if-not-exists only) and
//! tag tombstones (`refs/tag.<name>/ref.json.deleted`, an empty object marking a
//! deleted tag whose name can never be reused). The file content and name rules are
//! [`crate::format::refs`]; the keys are [`crate::format::keys`].
//!
//! Spec: Icechunk specification, "Reference Files", "Creating and Updating Branches",
//! "Tags"; tombstone naming as in `../shared/docs/icechunk-format-v1.md`.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::format::refs::ref_name_problem;
pub(crate) use crate::format::refs::RefData;
use crate::format::{keys, SnapshotId};
use crate::storage::{ObjectVersion, Storage, StorageError, WriteOutcome};

/// Checks a branch or tag name (`kind` is `branch` or `tag`, for the message), given
/// by a caller or read from storage (rules: [`ref_name_problem`]).
///
/// # Errors
/// [`Error::InvalidRefName`]: empty, longer than
/// [`crate::format::refs::MAX_REF_NAME_BYTES`], `.` or `..`, or holding `/` or
/// control characters.
pub(crate) fn validate_ref_name(kind: &'static str, name: &str) -> Result<()> {
    match ref_name_problem(name) {
        None => Ok(()),
        Some(reason) => Err(Error::InvalidRefName {
            kind,
            name: name.to_string(),
            reason,
        }),
    }
}

/// Reads branch `name`: its snapshot and the version of its ref file (for a later
/// compare-and-swap).
///
/// # Errors
/// [`Error::BranchNotFound`]; [`Error::Format`] for a corrupt ref file; storage errors.
pub(crate) async fn fetch_branch(
    storage: &dyn Storage,
    name: &str,
) -> Result<(SnapshotId, Option<ObjectVersion>)> {
    validate_ref_name("branch", name)?;
    let key = keys::branch(name);
    match storage.get(&key).await {
        Ok(v) => Ok((RefData::parse(&key, &v.bytes)?.snapshot, v.version)),
        Err(StorageError::NotFound { .. }) => Err(Error::BranchNotFound {
            name: name.to_string(),
        }),
        Err(e) => Err(e.into()),
    }
}

/// Reads tag `name`.
///
/// # Errors
/// [`Error::TagNotFound`]; [`Error::TagDeleted`] when it has a tombstone;
/// [`Error::Format`] for a corrupt ref file; storage errors.
pub(crate) async fn fetch_tag(storage: &dyn Storage, name: &str) -> Result<SnapshotId> {
    validate_ref_name("tag", name)?;
    let key = keys::tag(name);
    let data = match storage.get(&key).await {
        Ok(v) => RefData::parse(&key, &v.bytes)?,
        Err(StorageError::NotFound { .. }) => {
            return Err(Error::TagNotFound {
                name: name.to_string(),
            })
        }
        Err(e) => return Err(e.into()),
    };
    if tombstone_exists(storage, name).await? {
        return Err(Error::TagDeleted {
            name: name.to_string(),
        });
    }
    Ok(data.snapshot)
}

async fn tombstone_exists(storage: &dyn Storage, name: &str) -> Result<bool> {
    match storage.head(&keys::tag_tombstone(name)).await {
        Ok(_) => Ok(true),
        Err(StorageError::NotFound { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// All refs of a repository.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RefListing {
    /// Branch names (sorted).
    pub branches: Vec<String>,
    /// Live tag names (sorted); deleted tags are absent.
    pub tags: Vec<String>,
    /// Deleted tag names (sorted).
    pub deleted_tags: Vec<String>,
}

/// Lists branches and tags: lists `refs/` and takes each key's first segment
/// (`branch.X` / `tag.X`); tags with a tombstone are reported as deleted. Names are
/// as stored, unchecked (so that garbage collection keeps what every ref points to);
/// reading or changing a ref by one of them checks it ([`validate_ref_name`]), and
/// `Repository::list_branches` and friends leave invalid names out.
///
/// # Errors
/// Storage errors.
pub(crate) async fn list_refs(storage: &dyn Storage) -> Result<RefListing> {
    let mut branches = BTreeMap::new();
    let mut tags = BTreeMap::new();
    for info in storage.list(keys::REFS).await? {
        let Some(rest) = info.key.strip_prefix(keys::REFS) else {
            continue;
        };
        let Some((dir, file)) = rest.split_once('/') else {
            continue;
        };
        if let Some(name) = dir.strip_prefix(keys::BRANCH_DIR) {
            if file == keys::REF_FILE {
                branches.insert(name.to_string(), ());
            }
        } else if let Some(name) = dir.strip_prefix(keys::TAG_DIR) {
            let entry = tags.entry(name.to_string()).or_insert((false, false));
            match file {
                keys::REF_FILE => entry.0 = true,
                keys::TOMBSTONE_FILE => entry.1 = true,
                _ => {}
            }
        }
    }
    let mut out = RefListing {
        branches: branches.into_keys().collect(),
        ..Default::default()
    };
    for (name, (has_ref, deleted)) in tags {
        if deleted {
            out.deleted_tags.push(name);
        } else if has_ref {
            out.tags.push(name);
        }
    }
    Ok(out)
}

/// Creates branch `name` at `snapshot` (create-if-not-exists).
///
/// # Errors
/// [`Error::BranchExists`]; [`Error::InvalidRefName`]; storage errors.
pub(crate) async fn create_branch(
    storage: &dyn Storage,
    name: &str,
    snapshot: SnapshotId,
) -> Result<()> {
    validate_ref_name("branch", name)?;
    match storage
        .put_if_absent(&keys::branch(name), RefData { snapshot }.to_bytes())
        .await?
    {
        WriteOutcome::Written(_) => Ok(()),
        WriteOutcome::PreconditionFailed => Err(Error::BranchExists {
            name: name.to_string(),
        }),
    }
}

/// Moves branch `name` to `new` if its ref file is still at `expected_version`
/// (compare-and-swap; `None` = the branch must not exist yet). Returns whether the
/// update happened; `false` means another writer moved the branch first.
///
/// # Errors
/// Storage errors.
pub(crate) async fn update_branch(
    storage: &dyn Storage,
    name: &str,
    new: SnapshotId,
    expected_version: Option<&ObjectVersion>,
) -> Result<bool> {
    validate_ref_name("branch", name)?;
    let key = keys::branch(name);
    let bytes = RefData { snapshot: new }.to_bytes();
    let outcome = match expected_version {
        Some(v) => storage.put_if_match(&key, bytes, v).await?,
        None => storage.put_if_absent(&key, bytes).await?,
    };
    Ok(matches!(outcome, WriteOutcome::Written(_)))
}

/// Deletes branch `name` by removing its ref file.
///
/// # Errors
/// [`Error::BranchNotFound`]; [`Error::CannotDeleteMain`]; storage errors.
pub(crate) async fn delete_branch(storage: &dyn Storage, name: &str) -> Result<()> {
    if name == "main" {
        return Err(Error::CannotDeleteMain);
    }
    fetch_branch(storage, name).await?;
    storage.delete(&keys::branch(name)).await?;
    Ok(())
}

/// Deletes branch `name` only if its ref file is still at `expected_version` (the
/// version read when the branch was judged), by a conditional delete
/// ([`Storage::delete_if_match`]). Returns whether it was deleted; `false` means a
/// writer moved (or deleted) the branch since, and it was left as it is.
///
/// # Errors
/// [`Error::CannotDeleteMain`]; [`Error::InvalidRefName`]; storage errors
/// (including [`StorageError::Unsupported`] where the backend cannot delete
/// conditionally).
pub(crate) async fn delete_branch_if_unmoved(
    storage: &dyn Storage,
    name: &str,
    expected_version: &ObjectVersion,
) -> Result<bool> {
    if name == "main" {
        return Err(Error::CannotDeleteMain);
    }
    validate_ref_name("branch", name)?;
    let outcome = storage
        .delete_if_match(&keys::branch(name), expected_version)
        .await?;
    Ok(matches!(outcome, WriteOutcome::Written(_)))
}

/// Creates tag `name` at `snapshot` (create-if-not-exists; tags never move).
///
/// # Errors
/// [`Error::TagExists`]; [`Error::TagDeleted`] when the name belonged to a deleted
/// tag; [`Error::InvalidRefName`]; storage errors.
pub(crate) async fn create_tag(
    storage: &dyn Storage,
    name: &str,
    snapshot: SnapshotId,
) -> Result<()> {
    validate_ref_name("tag", name)?;
    if tombstone_exists(storage, name).await? {
        return Err(Error::TagDeleted {
            name: name.to_string(),
        });
    }
    match storage
        .put_if_absent(&keys::tag(name), RefData { snapshot }.to_bytes())
        .await?
    {
        WriteOutcome::Written(_) => Ok(()),
        WriteOutcome::PreconditionFailed => {
            if tombstone_exists(storage, name).await? {
                Err(Error::TagDeleted {
                    name: name.to_string(),
                })
            } else {
                Err(Error::TagExists {
                    name: name.to_string(),
                })
            }
        }
    }
}

/// Deletes tag `name` by writing its tombstone (create-if-not-exists); the ref file
/// stays, so the name can never be used again.
///
/// # Errors
/// [`Error::TagNotFound`]; [`Error::TagDeleted`] when already deleted; storage errors.
pub(crate) async fn delete_tag(storage: &dyn Storage, name: &str) -> Result<()> {
    fetch_tag(storage, name).await?;
    match storage
        .put_if_absent(&keys::tag_tombstone(name), Bytes::new())
        .await?
    {
        WriteOutcome::Written(_) => Ok(()),
        WriteOutcome::PreconditionFailed => Err(Error::TagDeleted {
            name: name.to_string(),
        }),
    }
}
