//! Spec 2: changing the `repo` object, the one mutable object of a spec-2 repository.
//!
//! Every change (a commit, a branch or tag operation, a configuration or metadata
//! change) is one [`update`]: take the object with its version (first as last read
//! or written, without a round trip; after a refused write, read anew), refuse unless the
//! repository is online, let the caller change a copy, save the object as read under
//! `overwritten/repo.<T>.<R>`, record the change on top of the ops log, and replace
//! the object with compare-and-swap on the version read. When another writer replaced
//! it first, the whole step runs again on the new object (the caller's checks too, so
//! a branch moved meanwhile is seen): five times at once, then with jittered
//! exponential backoff. Icechunk does the same (`asset_manager.rs`,
//! `update_repo_info`); unlike Icechunk on local disks, floe's local storage has a
//! real compare-and-swap, so concurrent writers never lose an update there either.
//!
//! A write whose response was lost may have landed: the request failed, or a retry of
//! it was refused because the first try had already replaced the object. Each attempt
//! saves its copy under a fresh random name, and the ops-log entry below the one it
//! records names that copy, so the object read afterwards tells whether the attempt
//! landed (then the update returns its result instead of failing or applying the
//! change twice). A copy is deleted only when the object shows another writer's
//! update in its place.
//!
//! Spec: `../shared/docs/icechunk-format-notes.md` §1.3 (backup naming), §2.5 (ops
//! log), §4.2 (the commit point).

use std::time::Duration;

use crate::assets::AssetManager;
use crate::error::{Error, Result};
use crate::format::config::RepoUpdateRetryConfig;
use crate::format::keys;
use crate::format::repo_info::{Availability, RepoInfo, UpdateKind};
use crate::format::snapshot::now_micros;
use crate::storage::{ObjectVersion, StorageError, WriteOutcome};

/// Attempts before [`Error::RepoObjectContention`], unless the configuration's
/// `repo_update_retries` says otherwise.
const MAX_ATTEMPTS: u32 = 100;
/// Attempts retried at once before backing off (when the configuration sets no
/// retries).
const IMMEDIATE_RETRIES: u32 = 5;
/// First and largest backoff delay (when the configuration sets no retries): each
/// delay is drawn up to twice the one before, from 40 ms to 5 s.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(40), Duration::from_secs(5));

/// How an update retries: tries in all, tries made at once, and the first and
/// largest backoff delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Retries {
    max_tries: u32,
    immediate: u32,
    backoff: (Duration, Duration),
}

impl Retries {
    /// From the configuration's `repo_update_retries`: unset, floe's own (100 tries,
    /// 5 at once, then jittered backoff from 40 ms to 5 s, measured on contended
    /// commits); set, its `max_tries`, `initial_backoff_ms` and `max_backoff_ms`
    /// with Icechunk's defaults (100, 50 ms, 30 s) for unset fields, backing off from
    /// the first retry.
    fn of(config: RepoUpdateRetryConfig) -> Self {
        match config.default {
            None => Retries {
                max_tries: MAX_ATTEMPTS,
                immediate: IMMEDIATE_RETRIES,
                backoff: BACKOFF,
            },
            Some(_) => {
                let (tries, first, max) = config.effective();
                Retries {
                    max_tries: u32::from(tries),
                    immediate: 0,
                    backoff: (
                        Duration::from_millis(u64::from(first)),
                        Duration::from_millis(u64::from(max.max(first))),
                    ),
                }
            }
        }
    }
}

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
/// [`Error::RepoObjectContention`] after 100 lost attempts (the configuration's
/// `repo_update_retries` may set another count); storage errors
/// (`NotFound` when the object is gone); format errors.
pub(crate) async fn update<T>(
    assets: &AssetManager,
    unchecked: bool,
    change: impl FnMut(&mut RepoInfo) -> Result<Change<T>>,
) -> Result<T> {
    update_with_copy(assets, unchecked, None, change).await
}

/// A copy of the `repo` object saved under `overwritten/` before the update that
/// replaces it is ready: a commit sends it beside its snapshot, transaction log and
/// manifest writes ([`save_copy_ahead`]), so the update itself is one round trip, the
/// compare-and-swap. It serves the update's first attempt when that attempt works on
/// the object it copies; otherwise nothing names it and it is deleted (best effort;
/// a copy left behind names no state and is never read).
#[derive(Debug)]
pub(crate) struct SavedCopy {
    /// Its name under `overwritten/` (as the ops log records it).
    name: String,
    /// The version of the `repo` object it copies.
    version: ObjectVersion,
}

/// Saves a copy of the `repo` object as this handle last read or wrote it under a
/// fresh name in `overwritten/`, for an update about to follow
/// ([`update_with_copy`]); `None` when no object was read yet (the update then saves
/// its own copy).
///
/// Safe to send at any time before the compare-and-swap: the copy is the object's
/// state at the version the swap expects, so when the swap lands the ops-log entry
/// below the new one names a true copy of what it replaced; when the swap is refused
/// the copy names nothing.
///
/// # Errors
/// Storage errors.
pub(crate) async fn save_copy_ahead(assets: &AssetManager) -> Result<Option<SavedCopy>> {
    let Some((bytes, _, version)) = assets.cached_repo_object() else {
        return Ok(None);
    };
    let name = keys::repo_backup_name(now_micros() / 1000);
    match assets
        .storage()
        .put_if_absent(&keys::overwritten(&name), bytes)
        .await?
    {
        WriteOutcome::Written(_) => Ok(Some(SavedCopy { name, version })),
        // A name collision (12 random bytes): the update saves its own.
        WriteOutcome::PreconditionFailed => Ok(None),
    }
}

/// Deletes a copy saved ahead that no update used (best effort).
pub(crate) async fn drop_unused_copy(assets: &AssetManager, copy: Option<SavedCopy>) {
    if let Some(copy) = copy {
        if let Err(e) = assets
            .storage()
            .delete(&keys::overwritten(&copy.name))
            .await
        {
            tracing::debug!("unused repo copy {} left behind: {e}", copy.name);
        }
    }
}

/// [`update`], whose first attempt uses `ahead`, a copy of the `repo` object saved
/// beforehand ([`save_copy_ahead`]), when it works on the object that copy holds:
/// then the attempt is one round trip (the compare-and-swap) instead of two.
///
/// # Errors
/// As [`update`].
pub(crate) async fn update_with_copy<T>(
    assets: &AssetManager,
    unchecked: bool,
    ahead: Option<SavedCopy>,
    change: impl FnMut(&mut RepoInfo) -> Result<Change<T>>,
) -> Result<T> {
    let mut ahead = ahead;
    let out = update_attempts(assets, unchecked, &mut ahead, change).await;
    drop_unused_copy(assets, ahead).await;
    out
}

/// The attempts of [`update_with_copy`]; takes `ahead` when it uses it.
async fn update_attempts<T>(
    assets: &AssetManager,
    unchecked: bool,
    ahead: &mut Option<SavedCopy>,
    mut change: impl FnMut(&mut RepoInfo) -> Result<Change<T>>,
) -> Result<T> {
    let storage = assets.storage();
    let retries = Retries::of(assets.repo_update_retries());
    // An attempt refused after it may have landed: a retried request can find the
    // object already replaced by its own first try.
    let mut refused: Option<Attempt<T>> = None;
    for attempt in 1..=retries.max_tries {
        // The first attempt works on the object as last read or written, without a
        // round trip to re-validate it: the compare-and-swap refuses it when stale,
        // and the next attempt reads the object anew.
        let (bytes, info, version, cached) = match (attempt, assets.cached_repo_object()) {
            (1, Some((bytes, info, version))) => (bytes, info, Some(version), true),
            (1, None) => {
                let (bytes, info, version) = assets.fetch_repo_object().await?;
                (bytes, info, version, false)
            }
            _ => {
                let (bytes, info, version) = assets.refetch_repo_object().await?;
                (bytes, info, version, false)
            }
        };
        if let Some(tried) = refused.take() {
            if let Some(out) = tried.settle(assets, &info).await {
                return Ok(out);
            }
        }
        let mut next = (*info).clone();
        let checked = if unchecked {
            change(&mut next)
        } else {
            check_online(&info).and_then(|()| change(&mut next))
        };
        let (kind, out) = match checked {
            Ok(Change::Skip(out)) => return Ok(out),
            Ok(Change::Write(kind, out)) => (kind, out),
            // A check failed on the object as last read or written, which may be
            // stale: the failure stands only on the object read anew.
            Err(_) if cached => continue,
            Err(e) => return Err(e),
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
        // The copy saved ahead serves when it holds the object this attempt replaces.
        let saved = match ahead.take() {
            Some(copy) if copy.version == version => Some(copy.name),
            other => {
                *ahead = other;
                None
            }
        };
        let backup = saved
            .clone()
            .unwrap_or_else(|| keys::repo_backup_name(now / 1000));
        let per_file = next.config.num_updates_per_repo_info_file();
        let replaced_top = info.last_updated_at();
        next.record(kind, now, &backup, per_file);
        let next = std::sync::Arc::new(next);
        let encoded = {
            let next = std::sync::Arc::clone(&next);
            crate::assets::blocking(move || next.encode()).await?
        };
        let copied = match saved {
            Some(_) => true,
            // A name collision (12 random bytes) would only repeat an attempt.
            None => matches!(
                storage
                    .put_if_absent(&keys::overwritten(&backup), bytes)
                    .await?,
                WriteOutcome::Written(_)
            ),
        };
        if copied {
            let encoded = bytes::Bytes::from(encoded);
            let tried = Attempt {
                backup,
                replaced_top,
                next: std::sync::Arc::clone(&next),
                out,
            };
            match storage
                .put_if_match(keys::SPEC2_REPO, encoded.clone(), &version)
                .await
            {
                Ok(WriteOutcome::Written(new_version)) => {
                    assets.learn_parents(&next);
                    if let Some(v) = new_version {
                        assets.remember_repo_object(v, encoded, next);
                    }
                    return Ok(tried.out);
                }
                // Settled on the next attempt's object.
                Ok(WriteOutcome::PreconditionFailed) => refused = Some(tried),
                Err(e) => {
                    // The response was lost: the write may have landed (an error
                    // is only returned when it did not, or cannot be told).
                    let landed = match assets.fetch_repo_info().await {
                        Ok((now, _)) => tried.landed_on(&now),
                        Err(_) => false,
                    };
                    if landed {
                        assets.learn_parents(&tried.next);
                        return Ok(tried.out);
                    }
                    return Err(e.into());
                }
            }
        }
        if attempt > retries.immediate && attempt < retries.max_tries {
            let n = attempt - retries.immediate;
            tokio::time::sleep(backoff(retries.backoff, n)).await;
        }
    }
    if let Some(tried) = refused {
        if let Ok((info, _)) = assets.fetch_repo_info().await {
            if let Some(out) = tried.settle(assets, &info).await {
                return Ok(out);
            }
        }
    }
    Err(Error::RepoObjectContention {
        attempts: retries.max_tries,
    })
}

/// One write of the `repo` object whose outcome is not known yet.
struct Attempt<T> {
    /// The copy it saved under `overwritten/` (a unique name per attempt).
    backup: String,
    /// The time of the newest ops-log entry of the object it replaces (µs).
    replaced_top: u64,
    /// The object it wrote.
    next: std::sync::Arc<RepoInfo>,
    /// What the update returns when it landed.
    out: T,
}

impl<T> Attempt<T> {
    /// Whether `now`, an object read after the attempt, shows the attempt: `Some(true)`
    /// when its ops log names the attempt's copy (the write id: 12 random bytes in
    /// the name), `Some(false)` when it shows that another update replaced the object
    /// the attempt read, `None` when it no longer tells (the entries went to an older
    /// copy) or nothing replaced that object yet.
    fn seen_in(&self, now: &RepoInfo) -> Option<bool> {
        let ours = Some(self.backup.as_str());
        if now.repo_before_updates.as_deref() == ours
            || now
                .latest_updates
                .iter()
                .any(|u| u.backup_path.as_deref() == ours)
        {
            return Some(true);
        }
        // Entry times are strictly increasing, so `replaced_top` names one entry.
        now.latest_updates
            .iter()
            .find(|u| u.updated_at == self.replaced_top)
            .and_then(|u| u.backup_path.as_ref())
            .map(|_| false)
    }

    /// Whether `now` proves that the attempt landed.
    fn landed_on(&self, now: &RepoInfo) -> bool {
        self.seen_in(now) == Some(true)
    }

    /// Settles an attempt refused with `PreconditionFailed`, judged on `now`: its
    /// result when it landed after all; otherwise `None`, after deleting its copy
    /// when `now` shows that another writer replaced that object (nothing names the
    /// copy then). When `now` no longer tells, the copy is left for garbage
    /// collection.
    async fn settle(self, assets: &AssetManager, now: &RepoInfo) -> Option<T> {
        match self.seen_in(now) {
            Some(true) => {
                assets.learn_parents(&self.next);
                return Some(self.out);
            }
            Some(false) => {
                let copy = keys::overwritten(&self.backup);
                if let Err(e) = assets.storage().delete(&copy).await {
                    tracing::debug!("orphaned repo copy {} left behind: {e}", self.backup);
                }
            }
            None => tracing::debug!("repo copy {} left for garbage collection", self.backup),
        }
        None
    }
}

/// Full-jitter exponential backoff for the `n`-th delayed retry (1-based), between
/// `first` and `max`.
fn backoff((first, max): (Duration, Duration), n: u32) -> Duration {
    let exp = first
        .saturating_mul(1u32 << n.saturating_sub(1).min(16))
        .min(max);
    let nanos = u64::try_from(exp.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rand::random_range(nanos / 4..=nanos))
}
