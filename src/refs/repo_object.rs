//! Spec 2: changing the `repo` object, the one mutable object of a spec-2 repository.
//!
//! Every change (a commit, a branch or tag operation, a configuration or metadata
//! change) is one [`update`]: read the object with its version, refuse unless the
//! repository is online, let the caller change a copy, save the object as read under
//! `overwritten/repo.<T>.<R>`, record the change on top of the ops log, and replace
//! the object with compare-and-swap on the version read. When another writer replaced
//! it first, the whole step runs again on the new object (the caller's checks too, so
//! a branch moved meanwhile is seen): five times at once, then with jittered
//! exponential backoff. Icechunk does the same (`asset_manager.rs`,
//! `update_repo_info`); unlike Icechunk on local disks, floe's local storage has a
//! real compare-and-swap, so concurrent writers never lose an update there either.
//!
//! Spec: `../shared/docs/icechunk-format-notes.md` §1.3 (backup naming), §2.5 (ops
//! log), §4.2 (the commit point).

use std::time::Duration;

use crate::assets::AssetManager;
use crate::error::{Error, Result};
use crate::format::keys;
use crate::format::repo_info::{Availability, RepoInfo, UpdateKind};
use crate::format::snapshot::now_micros;
use crate::storage::{StorageError, WriteOutcome};

/// Attempts before [`Error::RepoObjectContention`].
const MAX_ATTEMPTS: u32 = 100;
/// Attempts retried at once before backing off.
const IMMEDIATE_RETRIES: u32 = 5;
/// First and largest backoff delay.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(20), Duration::from_secs(5));

/// What a change to the `repo` object decided.
pub(crate) enum Change<T> {
    /// Write the changed object, recording `kind` in the ops log; the update returns
    /// `T`.
    Write(UpdateKind, T),
    /// Write nothing; the update returns `T` (a check failed in a way the caller
    /// handles, such as a branch that moved).
    Skip(T),
}

/// Fails with [`Error::RepositoryReadOnly`] unless `info` accepts writes.
pub(crate) fn check_online(info: &RepoInfo) -> Result<()> {
    match info.status.availability {
        Availability::Online => Ok(()),
        availability => Err(Error::RepositoryReadOnly {
            availability,
            reason: info.status.reason.clone(),
        }),
    }
}

/// Reads the `repo` object, applies `change` to a copy and writes it back with
/// compare-and-swap, retrying on the newest object while other writers win.
/// `change` must be a pure function of the object it is given: it may run several
/// times. Status changes go through `unchecked` (they must work on a read-only
/// repository).
///
/// # Errors
/// What `change` returns; [`Error::RepositoryReadOnly`] (unless `unchecked`);
/// [`Error::RepoObjectContention`] after 100 lost attempts; storage errors
/// (`NotFound` when the object is gone); format errors.
pub(crate) async fn update<T>(
    assets: &AssetManager,
    unchecked: bool,
    mut change: impl FnMut(&mut RepoInfo) -> Result<Change<T>>,
) -> Result<T> {
    let storage = assets.storage();
    for attempt in 1..=MAX_ATTEMPTS {
        let (bytes, info, version) = assets.fetch_repo_object().await?;
        if !unchecked {
            check_online(&info)?;
        }
        let mut next = (*info).clone();
        let (kind, out) = match change(&mut next)? {
            Change::Skip(out) => return Ok(out),
            Change::Write(kind, out) => (kind, out),
        };
        let Some(version) = version else {
            return Err(Error::Storage(StorageError::Io {
                key: keys::SPEC2_REPO.to_string(),
                source: std::io::Error::other(
                    "the storage gave no version for the repo object, so it cannot be \
                     updated safely",
                ),
            }));
        };
        let now = now_micros();
        let backup = keys::repo_backup_name(now / 1000);
        let per_file = next.config.num_updates_per_repo_info_file();
        next.record(kind, now, &backup, per_file);
        let next = std::sync::Arc::new(next);
        let encoded = {
            let next = std::sync::Arc::clone(&next);
            crate::assets::blocking(move || next.encode()).await?
        };
        // A name collision (12 random bytes) would only repeat an attempt.
        if let WriteOutcome::Written(_) = storage
            .put_if_absent(&keys::overwritten(&backup), bytes)
            .await?
        {
            let encoded = bytes::Bytes::from(encoded);
            match storage
                .put_if_match(keys::SPEC2_REPO, encoded.clone(), &version)
                .await?
            {
                WriteOutcome::Written(new_version) => {
                    assets.learn_parents(&next);
                    if let Some(v) = new_version {
                        assets.remember_repo_object(v, encoded, next);
                    }
                    return Ok(out);
                }
                WriteOutcome::PreconditionFailed => {
                    // Another writer won: nothing refers to this copy. (After a lost
                    // response, where the write may have landed and its ops-log entry
                    // names the copy, the error above returns before this.)
                    if let Err(e) = storage.delete(&keys::overwritten(&backup)).await {
                        tracing::debug!("orphaned repo copy {backup} left behind: {e}");
                    }
                }
            }
        }
        if attempt > IMMEDIATE_RETRIES {
            tokio::time::sleep(backoff(attempt - IMMEDIATE_RETRIES)).await;
        }
    }
    Err(Error::RepoObjectContention {
        attempts: MAX_ATTEMPTS,
    })
}

/// Full-jitter exponential backoff for the `n`-th delayed retry (1-based).
fn backoff(n: u32) -> Duration {
    let (first, max) = BACKOFF;
    let exp = first.saturating_mul(1u32 << n.min(16)).min(max);
    let nanos = u64::try_from(exp.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rand::random_range(nanos / 4..=nanos))
}
