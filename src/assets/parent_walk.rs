//! Walking a snapshot's history through its parent links, reading ahead.

#[allow(clippy::wildcard_imports)]
use super::*;
use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::keys;
use crate::format::snapshot::{Snapshot, SnapshotHeader};
use crate::format::{FormatError, SnapshotId, SpecVersion};
use crate::storage::{Storage, StorageError};

/// What a [`ParentWalk`] yields: whole snapshots ([`Snapshot`], for walks that
/// read nodes or rewrite snapshots) or only their commit facts ([`SnapshotHeader`],
/// for ancestry listings and time travel, whose memory then does not grow with the
/// number of nodes).
pub trait WalkItem: Sized + Send + Sync + std::fmt::Debug + 'static + sealed::Sealed {
    /// Decodes a snapshot file.
    ///
    /// # Errors
    /// Format errors.
    #[doc(hidden)]
    fn decode(bytes: &[u8]) -> std::result::Result<Self, FormatError>;

    /// The parent link.
    #[doc(hidden)]
    fn parent(&self) -> Option<SnapshotId>;

    /// About the bytes the item holds in memory (what bounds a read-ahead window).
    #[doc(hidden)]
    fn approx_bytes(&self) -> usize;

    /// The cached item for snapshot `id`.
    #[doc(hidden)]
    fn cached(assets: &AssetManager, id: &SnapshotId) -> Option<Arc<Self>>;

    /// Fetches the item for snapshot `id`.
    ///
    /// # Errors
    /// As [`AssetManager::fetch_snapshot`].
    #[doc(hidden)]
    fn fetch<'a>(
        assets: &'a AssetManager,
        id: &'a SnapshotId,
    ) -> futures::future::BoxFuture<'a, Result<Arc<Self>>>;

    /// Completes and caches an item read ahead.
    ///
    /// # Errors
    /// As [`AssetManager::fetch_snapshot`].
    #[doc(hidden)]
    fn admit<'a>(
        assets: &'a AssetManager,
        id: &'a SnapshotId,
        item: Self,
    ) -> futures::future::BoxFuture<'a, Result<Arc<Self>>>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::format::snapshot::Snapshot {}
    impl Sealed for crate::format::snapshot::SnapshotHeader {}
}

impl WalkItem for Snapshot {
    fn decode(bytes: &[u8]) -> std::result::Result<Self, FormatError> {
        Snapshot::decode(bytes)
    }

    fn parent(&self) -> Option<SnapshotId> {
        self.parent_id
    }

    fn approx_bytes(&self) -> usize {
        // A node: its path, id and Zarr metadata, a few hundred bytes.
        1024 + self.nodes.len() * 512 + self.manifest_files.len() * 64
    }

    fn cached(assets: &AssetManager, id: &SnapshotId) -> Option<Arc<Self>> {
        assets.snapshots.get(id)
    }

    fn fetch<'a>(
        assets: &'a AssetManager,
        id: &'a SnapshotId,
    ) -> futures::future::BoxFuture<'a, Result<Arc<Self>>> {
        Box::pin(assets.fetch_snapshot(id))
    }

    fn admit<'a>(
        assets: &'a AssetManager,
        id: &'a SnapshotId,
        item: Self,
    ) -> futures::future::BoxFuture<'a, Result<Arc<Self>>> {
        Box::pin(assets.admit_snapshot(id, item))
    }
}

impl WalkItem for SnapshotHeader {
    fn decode(bytes: &[u8]) -> std::result::Result<Self, FormatError> {
        SnapshotHeader::decode(bytes)
    }

    fn parent(&self) -> Option<SnapshotId> {
        self.parent_id
    }

    fn approx_bytes(&self) -> usize {
        super::cache::header_bytes(self)
    }

    fn cached(assets: &AssetManager, id: &SnapshotId) -> Option<Arc<Self>> {
        assets.cached_header(id)
    }

    fn fetch<'a>(
        assets: &'a AssetManager,
        id: &'a SnapshotId,
    ) -> futures::future::BoxFuture<'a, Result<Arc<Self>>> {
        Box::pin(assets.fetch_snapshot_header(id))
    }

    fn admit<'a>(
        assets: &'a AssetManager,
        id: &'a SnapshotId,
        item: Self,
    ) -> futures::future::BoxFuture<'a, Result<Arc<Self>>> {
        Box::pin(assets.admit_header(id, item))
    }
}

/// A walk along a snapshot's parent chain, newest first: the snapshot itself, its
/// parent, and so on to the initial snapshot. Every ancestry walk (log, `--as-of`,
/// diff, rebase, expiry, garbage collection) goes through it, so a corrupt or hostile
/// repository whose parent chain loops ends the walk with [`Error::AncestryLoop`]
/// instead of running forever. Memory grows by one snapshot id (12 bytes) per step.
///
/// [`ParentWalk::new`] yields whole snapshots; [`ParentWalk::headers`] only their
/// commit facts ([`SnapshotHeader`]), read without decoding node tables.
///
/// On spec-1 repositories whose storage reads synchronously
/// ([`Storage::local_files`]: local disks) the walk reads ahead: one blocking task
/// reads and decodes a batch of parents, 1, then 2, 4, ... up to `READ_AHEAD_MAX`
/// snapshots or `READ_AHEAD_BYTES` of files, so the newest `n` cost about `2n`
/// reads at most and a long history one thread hop per batch.
///
/// On spec-2 repositories the `repo` object records every parent link, so once it
/// has been read the walk fetches a window of ancestors at once (1, then doubling up
/// to `READ_AHEAD_MAX`, at most about `READ_AHEAD_BYTES` in memory by the size of
/// the last snapshot), `PLANNED_IN_FLIGHT` (32) reads in flight: a history of `n` commits
/// costs about `n / PLANNED_IN_FLIGHT` round trips instead of `n`.
#[derive(Debug)]
pub struct ParentWalk<'a, T: WalkItem = Snapshot> {
    assets: &'a AssetManager,
    next: Option<SnapshotId>,
    seen: std::collections::HashSet<SnapshotId>,
    /// Snapshots read ahead along the chain, next first.
    ahead: std::collections::VecDeque<(SnapshotId, Result<T>)>,
    /// The size of the next read-ahead batch; 0 when the storage has no blocking read
    /// or the repository is not spec 1.
    batch: usize,
    /// Spec 1 on object storage: the walk lists `snapshots/` once and fetches many
    /// snapshots at once (see [`Listed`]).
    listed: Option<Box<Listed<T>>>,
    /// Spec 2: snapshots fetched ahead along the `repo` object's parent links, next
    /// first.
    planned: std::collections::VecDeque<(SnapshotId, Result<Arc<T>>)>,
    /// Spec 2: the size of the next window fetched ahead.
    window: usize,
}

/// Reads in flight while a spec-2 walk fetches a window of ancestors.
const PLANNED_IN_FLIGHT: usize = 32;

/// A spec-1 walk on storage without blocking reads (object storage): `snapshots/`
/// listed once (beside the first snapshot's read), then, whenever the next parent
/// is not at hand, a window of the snapshots listed as no newer than it (newest
/// first, `LISTED_WINDOW_MIN` doubling up to [`READ_AHEAD_MAX`], at most
/// [`READ_AHEAD_BYTES`] of files by their listed sizes) is fetched at once, and the
/// chain is followed through what came back. A history of `n` commits then costs
/// about `log2(n)` round trips plus the listing's pages instead of `n`; a snapshot
/// of another branch may be fetched along and is dropped once the chain is older.
#[derive(Debug)]
struct Listed<T> {
    /// Listed snapshots: modification time and size, by id.
    files: HashMap<SnapshotId, (chrono::DateTime<chrono::Utc>, u64)>,
    /// Snapshots fetched and not yet on the chain.
    pool: HashMap<SnapshotId, Result<T>>,
    /// Ids fetched so far (never fetched twice).
    fetched: std::collections::HashSet<SnapshotId>,
    /// The next window's size.
    window: usize,
}

/// The first window of a [`Listed`] walk.
const LISTED_WINDOW_MIN: usize = 32;

/// The most snapshots one read-ahead batch of a [`ParentWalk`] reads.
const READ_AHEAD_MAX: usize = 256;

/// A read-ahead batch of a [`ParentWalk`] ends once its files add up to this many
/// bytes (4 MiB): snapshots of many nodes are large, and the batch is held in memory.
const READ_AHEAD_BYTES: usize = 4 << 20;

impl<'a> ParentWalk<'a> {
    /// A walk starting at `start`, yielding whole snapshots.
    pub fn new(assets: &'a AssetManager, start: SnapshotId) -> Self {
        Self::starting(assets, start)
    }
}

impl<'a> ParentWalk<'a, SnapshotHeader> {
    /// A walk starting at `start`, yielding commit facts only
    /// ([`AssetManager::fetch_snapshot_header`]).
    pub fn headers(assets: &'a AssetManager, start: SnapshotId) -> Self {
        Self::starting(assets, start)
    }
}

impl<'a, T: WalkItem> ParentWalk<'a, T> {
    fn starting(assets: &'a AssetManager, start: SnapshotId) -> Self {
        ParentWalk {
            assets,
            next: Some(start),
            seen: std::collections::HashSet::new(),
            ahead: std::collections::VecDeque::new(),
            batch: usize::from(assets.spec == SpecVersion::V1),
            listed: None,
            planned: std::collections::VecDeque::new(),
            window: 1,
        }
    }

    /// The next snapshot along the chain; `None` after the initial snapshot.
    ///
    /// # Errors
    /// [`Error::AncestryLoop`] when a snapshot id repeats; [`Error::SnapshotNotFound`]
    /// for a missing parent; storage and format errors.
    pub async fn next(&mut self) -> Result<Option<Arc<T>>> {
        let Some(id) = self.next.take() else {
            return Ok(None);
        };
        if !self.seen.insert(id) {
            return Err(Error::AncestryLoop { snapshot: id });
        }
        let snap = match (self.planned.pop_front(), self.ahead.pop_front()) {
            (Some((planned_id, fetched)), _) if planned_id == id => fetched?,
            (_, Some((ahead_id, read))) if ahead_id == id => {
                T::admit(self.assets, &id, read?).await?
            }
            _ => {
                self.planned.clear();
                self.ahead.clear();
                self.fetch(id).await?
            }
        };
        self.next = snap.parent();
        Ok(Some(snap))
    }

    /// Snapshot `id` from the cache, else read ahead from it, else fetched alone.
    async fn fetch(&mut self, id: SnapshotId) -> Result<Arc<T>> {
        if self.listed.is_some() {
            return self.fetch_listed(id).await;
        }
        if self.batch == 0 {
            return self.fetch_planned(id).await;
        }
        if let Some(s) = T::cached(self.assets, &id) {
            return Ok(s);
        }
        let storage = Arc::clone(&self.assets.storage);
        let max = self.batch;
        let read = tokio::task::spawn_blocking(move || read_chain::<T>(storage.as_ref(), id, max))
            .await
            .map_err(|e| {
                Error::Format(FormatError::InvalidData {
                    what: "snapshot",
                    reason: format!("reading ahead along the parent chain failed: {e}"),
                })
            })?;
        let Some(chain) = read else {
            // No blocking reads on this storage (object storage): list the snapshots
            // while the first one is read, then fetch many at once.
            self.batch = 0;
            let (first, listing) = futures::join!(
                T::fetch(self.assets, &id),
                self.assets.storage.list(keys::SNAPSHOTS)
            );
            match listing {
                Ok(listing) => {
                    let files = listing
                        .into_iter()
                        .filter_map(|o| {
                            let name = o.key.strip_prefix(keys::SNAPSHOTS)?;
                            let id = name.parse::<SnapshotId>().ok()?;
                            Some((id, (o.last_modified, o.size)))
                        })
                        .collect();
                    let mut fetched = std::collections::HashSet::new();
                    fetched.insert(id);
                    self.listed = Some(Box::new(Listed {
                        files,
                        pool: HashMap::new(),
                        fetched,
                        window: LISTED_WINDOW_MIN,
                    }));
                }
                Err(e) => tracing::debug!("listing snapshots failed, walking one by one: {e}"),
            }
            return first;
        };
        self.batch = (self.batch * 2).min(READ_AHEAD_MAX);
        self.ahead = chain.into();
        match self.ahead.pop_front() {
            Some((first, read)) if first == id => T::admit(self.assets, &id, read?).await,
            _ => T::fetch(self.assets, &id).await,
        }
    }
}

impl<T: WalkItem> ParentWalk<'_, T> {
    /// Snapshot `id`, with (spec 2) the window of ancestors the `repo` object's
    /// parent links name fetched at once into `planned`; alone when none is known.
    async fn fetch_planned(&mut self, id: SnapshotId) -> Result<Arc<T>> {
        use futures::StreamExt;
        let assets = self.assets;
        if assets.spec == SpecVersion::V1 {
            return T::fetch(assets, &id).await;
        }
        let chain = assets.ancestors_by_known_parents(id, self.window);
        let mut fetched: std::collections::VecDeque<(SnapshotId, Result<Arc<T>>)> =
            futures::stream::iter(chain)
                .map(|wanted| async move { (wanted, T::fetch(assets, &wanted).await) })
                .buffered(PLANNED_IN_FLIGHT)
                .collect()
                .await;
        // The next window: twice as long, within the byte budget by the size of
        // this one's newest snapshot.
        if let Some(each) = fetched
            .iter()
            .find_map(|(_, r)| r.as_ref().ok().map(|s| s.approx_bytes()))
        {
            self.window = (self.window * 2)
                .min(READ_AHEAD_MAX)
                .min(READ_AHEAD_BYTES / each.max(1))
                .max(1);
        }
        let first = fetched.pop_front();
        self.planned = fetched;
        match first {
            Some((first, read)) if first == id => read,
            _ => T::fetch(assets, &id).await,
        }
    }

    /// [`ParentWalk::fetch`] on a listed walk (see [`Listed`]).
    async fn fetch_listed(&mut self, id: SnapshotId) -> Result<Arc<T>> {
        use futures::StreamExt;
        let assets = self.assets;
        let Some(listed) = self.listed.as_mut() else {
            return T::fetch(assets, &id).await;
        };
        if !listed.pool.contains_key(&id) {
            if let Some(cached) = T::cached(assets, &id) {
                return Ok(cached);
            }
            let Some(&(newest, _)) = listed.files.get(&id) else {
                // Not listed (written after the listing): alone.
                return T::fetch(assets, &id).await;
            };
            // The window: `id`, then the listed snapshots no newer than it and not
            // fetched yet, newest first, within the byte budget.
            let mut candidates: Vec<(chrono::DateTime<chrono::Utc>, SnapshotId, u64)> = listed
                .files
                .iter()
                .filter(|(other, (t, _))| {
                    **other != id && *t <= newest && !listed.fetched.contains(other)
                })
                .map(|(other, (t, size))| (*t, *other, *size))
                .collect();
            candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let mut window = vec![id];
            let mut bytes = listed.files.get(&id).map_or(0, |f| f.1);
            for (_, other, size) in candidates {
                if window.len() >= listed.window || bytes >= READ_AHEAD_BYTES as u64 {
                    break;
                }
                bytes = bytes.saturating_add(size);
                window.push(other);
            }
            listed.window = (listed.window * 2).min(READ_AHEAD_MAX);
            listed.fetched.extend(window.iter().copied());
            let concurrency = window.len();
            let read: Vec<(SnapshotId, Result<T>)> = futures::stream::iter(window)
                .map(|wanted| async move {
                    let read = match assets.storage.get(&keys::snapshot(&wanted)).await {
                        Ok(v) => decode_object(v.bytes, T::decode).await,
                        Err(StorageError::NotFound { .. }) => {
                            Err(Error::SnapshotNotFound { id: wanted })
                        }
                        Err(e) => Err(e.into()),
                    };
                    (wanted, read)
                })
                .buffer_unordered(concurrency.max(1))
                .collect()
                .await;
            listed.pool.extend(read);
        }
        // The chain through what is at hand.
        let mut next = Some(id);
        while let Some(at) = next {
            let Some(read) = listed.pool.remove(&at) else {
                break;
            };
            next = read.as_ref().ok().and_then(WalkItem::parent);
            self.ahead.push_back((at, read));
        }
        // What is newer than the chain's end is on no later part of it.
        if let Some((end, _)) = self.ahead.back() {
            if let Some(&(oldest, _)) = listed.files.get(end) {
                listed
                    .pool
                    .retain(|other, _| listed.files.get(other).is_some_and(|f| f.0 <= oldest));
            }
        }
        match self.ahead.pop_front() {
            Some((first, read)) if first == id => T::admit(assets, &id, read?).await,
            _ => T::fetch(assets, &id).await,
        }
    }
}

/// Reads and decodes, with [`Storage::local_files`], the chain of snapshots (or
/// their commit facts) from `start` along parent links in the files: up to `max` of
/// them and about [`READ_AHEAD_BYTES`] of files, ending at the initial snapshot or
/// the first error (which is the last item). `None` when the storage has no
/// blocking reads.
fn read_chain<T: WalkItem>(
    storage: &dyn Storage,
    start: SnapshotId,
    max: usize,
) -> Option<Vec<(SnapshotId, Result<T>)>> {
    let files = storage.local_files()?;
    let mut chain = Vec::new();
    let mut bytes_read = 0usize;
    let mut id = start;
    while chain.len() < max && bytes_read < READ_AHEAD_BYTES {
        let read = match files.get(&keys::snapshot(&id)) {
            Ok(v) => {
                bytes_read = bytes_read.saturating_add(v.bytes.len());
                T::decode(&v.bytes).map_err(Error::from)
            }
            Err(StorageError::NotFound { .. }) => Err(Error::SnapshotNotFound { id }),
            Err(e) => Err(e.into()),
        };
        let parent = read.as_ref().ok().and_then(WalkItem::parent);
        chain.push((id, read));
        match parent {
            Some(p) => id = p,
            None => break,
        }
    }
    Some(chain)
}
