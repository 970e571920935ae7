//! Spec 2: repairing a repository whose `repo` object cannot be read.
//!
//! The `repo` object holds every ref of a spec-2 repository, so when it cannot be
//! decoded (written by a faulty client, damaged in storage) no command can open the
//! repository, `branch reset` included. Every writer, floe and Icechunk alike, saves
//! the object it replaces under `overwritten/repo.<T>.<R>` before replacing it
//! (`icechunk-format-notes.md` §1.3). [`repair_repo_object`] puts back the newest
//! copy that decodes: the state right before the last update, so that update is lost
//! (the bad write itself, or, when the object was damaged in storage, the last good
//! update); its snapshots stay in storage, unreferenced, until garbage collection.
//!
//! *Newest* is decided by the copies' ops logs, not by clocks: each state's log lists
//! every update that led to it, newest first, so a copy whose log holds another
//! copy's newest update descends from it. The time `T` in a copy's name is the saving
//! writer's clock, which may be behind the others'; it only breaks a tie the logs
//! cannot decide (copies whose logs do not reach each other's updates, such as states
//! older than the last `num_updates_per_repo_info_file` updates).
//!
//! Spec-1 repositories need no such command: each ref is its own file, and
//! `branch reset` moves a branch without reading the snapshot it leaves.

use std::collections::HashSet;

use crate::error::{Error, Result};
use crate::format::keys;
use crate::format::repo_info::{RepoInfo, RepoUpdate};
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
/// The newest copy is the one whose ops log holds the newest update of every other
/// readable copy (see the module documentation); the times in the copies' names,
/// which come from the writers' clocks, only break a tie the logs cannot decide.
/// Copies that a readable copy's log names as its predecessors are older by
/// construction and are not read.
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
    // Listed in name order: newest by the writers' clocks first.
    let copies = storage.list(keys::OVERWRITTEN).await?;
    let mut tried = 0;
    let mut readable: Vec<Candidate> = Vec::new();
    // Names of copies some readable copy descends from: older, never read.
    let mut older: HashSet<String> = HashSet::new();
    for info in &copies {
        let Some(name) = info.key.strip_prefix(keys::OVERWRITTEN) else {
            continue;
        };
        if !name.starts_with(&format!("{}.", keys::SPEC2_REPO)) || older.contains(name) {
            continue;
        }
        tried += 1;
        let Ok(copy) = storage.get(&info.key).await else {
            continue;
        };
        let Ok(log) = decode(copy.bytes.clone()).await else {
            continue;
        };
        older.extend(log.predecessors.iter().cloned());
        readable.push(Candidate {
            name: name.to_string(),
            bytes: copy.bytes,
            log,
        });
    }
    let Some(newest) = newest(&readable) else {
        return Err(Error::NoReadableRepoBackup { reason, tried });
    };
    let Candidate {
        name: from, bytes, ..
    } = readable.swap_remove(newest);
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

/// A readable copy of the `repo` object.
struct Candidate {
    /// Its name under `overwritten/`.
    name: String,
    bytes: bytes::Bytes,
    log: OpsLog,
}

/// What ordering copies needs of a `repo` object's ops log.
#[derive(Debug, Default)]
struct OpsLog {
    /// Its newest update, as [`update_key`] names it (`None`: an empty log).
    top: Option<String>,
    /// Every update it holds, as [`update_key`] names them.
    updates: HashSet<String>,
    /// The `overwritten/` names of the states it descends from: the copies its
    /// updates' backup paths name, and the object holding its older updates.
    predecessors: Vec<String>,
}

impl OpsLog {
    fn of(info: &RepoInfo) -> Self {
        let updates: Vec<String> = info.latest_updates.iter().map(update_key).collect();
        OpsLog {
            top: updates.first().cloned(),
            updates: updates.into_iter().collect(),
            predecessors: info
                .latest_updates
                .iter()
                .filter_map(|u| u.backup_path.clone())
                .chain(info.repo_before_updates.clone())
                .collect(),
        }
    }

    /// Whether this state descends from (or is) the state whose log is `other`: its
    /// log holds `other`'s newest update.
    fn reaches(&self, other: &OpsLog) -> bool {
        other.top.as_ref().is_none_or(|t| self.updates.contains(t))
    }
}

/// An ops-log entry's identity across copies: its time and what it did. (Its
/// backup path is not part of it: a writer sets it on the entry below its own when
/// it updates.)
fn update_key(u: &RepoUpdate) -> String {
    let kind = serde_json::to_string(&u.kind).unwrap_or_default();
    format!("{}:{kind}", u.updated_at)
}

/// The index of the newest of `copies` (given newest name first): the first whose
/// log reaches every other copy's; when none does, the first that no other copy
/// strictly descends from. `None` when there is no copy.
fn newest(copies: &[Candidate]) -> Option<usize> {
    let reaches_all = |i: usize| {
        copies
            .iter()
            .enumerate()
            .all(|(j, c)| i == j || copies[i].log.reaches(&c.log))
    };
    let superseded = |i: usize| {
        copies
            .iter()
            .enumerate()
            .any(|(j, c)| i != j && c.log.reaches(&copies[i].log) && !copies[i].log.reaches(&c.log))
    };
    (0..copies.len())
        .find(|&i| reaches_all(i))
        .or_else(|| (0..copies.len()).find(|&i| !superseded(i)))
}

/// Decodes a `repo` object on the blocking pool: its ops log, or why it cannot be
/// read.
async fn decode(bytes: bytes::Bytes) -> Result<OpsLog> {
    crate::assets::blocking(move || RepoInfo::decode(&bytes).map(|i| OpsLog::of(&i))).await
}
