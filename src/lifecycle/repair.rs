//! Spec 2: repairing a repository whose `repo` object cannot be read.
//!
//! The `repo` object holds every ref of a spec-2 repository, so when it cannot be
//! decoded (written by a faulty client, damaged in storage) no command can open the
//! repository, `branch reset` included. Every writer, floe and Icechunk alike, saves
//! the object it replaces under `overwritten/repo.<T>.<R>` before replacing it
//! (`icechunk-format-notes.md` §1.3), with `T` counting down so the newest copy sorts
//! first. [`repair_repo_object`] puts back the newest copy that decodes: the state
//! right before the last update, so that update is lost (the bad write itself, or,
//! when the object was damaged in storage, the last good update); its snapshots stay
//! in storage, unreferenced, until garbage collection.
//!
//! Spec-1 repositories need no such command: each ref is its own file, and
//! `branch reset` moves a branch without reading the snapshot it leaves.

use crate::error::{Error, Result};
use crate::format::keys;
use crate::format::repo_info::RepoInfo;
use crate::format::snapshot::now_micros;
use crate::storage::{Storage, WriteOutcome};

/// What [`repair_repo_object`] found and did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RepairOutcome {
    /// The `repo` object decodes: nothing to repair, nothing written.
    Healthy,
    /// The `repo` object does not decode; with `dry_run`, this copy would be put
    /// back (nothing written).
    WouldRestore {
        /// Why the object cannot be read.
        reason: String,
        /// The copy's name under `overwritten/`.
        from: String,
    },
    /// The `repo` object did not decode and was replaced by a copy.
    Restored {
        /// Why the object could not be read.
        reason: String,
        /// The copy put back (its name under `overwritten/`).
        from: String,
        /// Where the unreadable object was saved (a name under `overwritten/`).
        damaged_saved_as: String,
    },
}

/// Puts back the newest readable copy of the `repo` object when the object itself
/// cannot be decoded (spec 2). The unreadable object is first saved under
/// `overwritten/` (a new `repo.<T>.<R>` name), then replaced with compare-and-swap on
/// the version read, so a writer that repaired it meanwhile is not overwritten.
///
/// Works on storage alone: the repository cannot be opened while its `repo` object
/// is unreadable.
///
/// # Errors
/// [`Error::Storage`] (`NotFound` when there is no `repo` object: not a spec-2
/// repository); [`Error::NoReadableRepoBackup`] when no copy decodes;
/// [`Error::RepoObjectContention`] when the object changed while it was being
/// repaired.
pub async fn repair_repo_object(storage: &dyn Storage, dry_run: bool) -> Result<RepairOutcome> {
    let current = storage.get(keys::SPEC2_REPO).await?;
    let reason = match decode(current.bytes.clone()).await {
        Ok(_) => return Ok(RepairOutcome::Healthy),
        Err(e) => e.to_string(),
    };
    // Newest copy first: the names count down in time, in milliseconds. Copies
    // saved within the same millisecond sort by their random suffix, so among the
    // readable copies of the newest millisecond that has one, the one whose ops log
    // is newest (microseconds) is the latest state.
    let copies = storage.list(keys::OVERWRITTEN).await?;
    let mut tried = 0;
    let mut restore: Option<(String, bytes::Bytes, u64)> = None;
    let mut restore_ms: Option<String> = None;
    for info in &copies {
        let Some(name) = info.key.strip_prefix(keys::OVERWRITTEN) else {
            continue;
        };
        if !name.starts_with(keys::SPEC2_REPO) {
            continue;
        }
        let millis = name.split('.').nth(1).unwrap_or_default().to_string();
        if restore_ms.as_ref().is_some_and(|m| *m != millis) {
            break;
        }
        tried += 1;
        let Ok(copy) = storage.get(&info.key).await else {
            continue;
        };
        let Ok(top) = decode(copy.bytes.clone()).await else {
            continue;
        };
        if restore.as_ref().is_none_or(|(_, _, best)| top > *best) {
            restore = Some((name.to_string(), copy.bytes, top));
        }
        restore_ms = Some(millis);
    }
    let Some((from, bytes, _)) = restore else {
        return Err(Error::NoReadableRepoBackup { reason, tried });
    };
    if dry_run {
        return Ok(RepairOutcome::WouldRestore { reason, from });
    }
    let damaged_saved_as = keys::repo_backup_name(now_micros() / 1000);
    storage
        .put_if_absent(&keys::overwritten(&damaged_saved_as), current.bytes)
        .await?;
    let replaced = match &current.version {
        Some(version) => {
            storage
                .put_if_match(keys::SPEC2_REPO, bytes, version)
                .await?
        }
        None => {
            storage.put(keys::SPEC2_REPO, bytes).await?;
            WriteOutcome::Written(None)
        }
    };
    match replaced {
        WriteOutcome::Written(_) => Ok(RepairOutcome::Restored {
            reason,
            from,
            damaged_saved_as,
        }),
        WriteOutcome::PreconditionFailed => Err(Error::RepoObjectContention { attempts: 1 }),
    }
}

/// Decodes a `repo` object on the blocking pool: the time of its newest ops-log
/// entry (microseconds), or why it cannot be read.
async fn decode(bytes: bytes::Bytes) -> Result<u64> {
    crate::assets::blocking(move || RepoInfo::decode(&bytes).map(|i| i.last_updated_at())).await
}
