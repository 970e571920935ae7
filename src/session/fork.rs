//! Forks: cooperative writers that make one commit.
//!
//! [`Session::fork`] makes a writable session that is not on a branch. Its base is a
//! snapshot holding the forking session's base plus its uncommitted changes (written
//! to storage, like Icechunk's anonymous snapshot, but not reachable from any ref, so
//! garbage collection removes it once it is older than the cut-off); when there are
//! no uncommitted changes it is the forking session's base itself. A fork serializes
//! to bytes ([`Session::to_fork_bytes`]) holding only snapshot ids and its change set
//! — chunk refs, inline chunk bytes and node changes, never credentials — and a worker
//! re-opens it from its own repository handle
//! ([`Repository::fork_from_bytes`](crate::Repository::fork_from_bytes)). Chunks a
//! worker writes go to storage as they are set (small ones packed together, in packs
//! written before the fork is serialized, and by a merge of forks of one process),
//! so what travels back is refs. The
//! bytes carry a CRC-32C of their body, checked before anything is decoded, so a
//! fork damaged in transit is refused rather than merged.
//!
//! [`Session::merge`] brings forks back. A fork conflicts with what the session and
//! the forks merged before it changed *since the fork was made* (the same rules as a
//! rebase, [`super::commit::conflict::detect`]): changing one node's metadata, or one
//! deleting what another changed. A chunk written by several of them is no
//! conflict: as in Icechunk 2.3.0, the fork merged last wins (also over the
//! session's own write); a chunk a commit made since the fork also wrote still
//! conflicts. Any conflict fails the
//! whole merge with every conflict listed, and nothing is merged. Each fork's changes
//! carry an id minted at its first change after it was made or deserialized; a
//! session refuses an id it already merged, so the same fork returned twice is not
//! applied twice, while copies of one fork written by different workers are distinct.
//!
//! A fork names its repository only through snapshot ids, which a byte-for-byte copy
//! of the repository shares. So a session that can commit (not a fork) accepts a fork
//! only when every native chunk it refers to exists in the session's own storage and
//! holds the bytes its refs read: a fork written in a copy is refused with
//! [`Error::InvalidFork`] instead of committing refs to chunks that exist only there.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use crate::error::{Conflict, Error, Result};
use crate::format::manifest::ChunkPayloadRef;
use crate::format::snapshot::{NodeSnapshot, Snapshot};
use crate::format::{keys, ChunkId, NodeId, NodePath, SnapshotId};
use crate::storage::{Storage, StorageError};

use super::change_set::wire::Wire;
use super::change_set::ChangeSet;
use super::commit::conflict::{detect, paths_by_id, Either, Rules, TheirChanges, TheirTree};
use super::commit::flush;
use super::commit::rebase::{commits_since, CommitsSummary};
use super::context::SessionContext;
use super::overlay::{apply_node_changes, index_in_bounds};
use super::{Mode, Session};

/// The identity of one fork's changes (128 random bits), minted at the first change
/// made to a fork after it was made or deserialized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ForkId(pub u128);

impl fmt::Display for ForkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// Fork bookkeeping of a session.
#[derive(Debug, Default)]
pub(crate) struct ForkState {
    /// For a fork: the id of its changes, and whether it was minted in this process.
    own: Option<Own>,
    /// For a session that forked: its changes when it made each fork, by the fork's
    /// base snapshot id (absent: it had none).
    baselines: HashMap<SnapshotId, Arc<ChangeSet>>,
    /// Ids of the forks merged into this session.
    merged: HashSet<ForkId>,
}

#[derive(Debug, Default)]
struct Own {
    id: Option<ForkId>,
    minted: bool,
}

impl ForkState {
    /// Notes a change: a fork gets a fresh id at its first change here.
    pub(crate) fn changed(&mut self) {
        if let Some(own) = &mut self.own {
            if !own.minted {
                own.id = Some(ForkId(rand::random()));
                own.minted = true;
            }
        }
    }
}

/// Leading bytes of serialized forks (version 2: a CRC-32C of the body follows).
const MAGIC: &[u8] = b"floe-fork\x02";

/// Concurrent `HEAD` requests when a merge checks a fork's chunk objects.
const CHUNK_CHECK_CONCURRENCY: usize = 32;

#[derive(Serialize, Deserialize)]
struct ForkWire {
    origin: [u32; 3],
    base: [u32; 3],
    id: Option<(u64, u64)>,
    changes: Wire,
}

fn id_to_wire(id: &SnapshotId) -> [u32; 3] {
    let b = id.as_bytes();
    let word = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    [word(0), word(4), word(8)]
}

fn id_from_wire(w: [u32; 3]) -> SnapshotId {
    let mut b = [0u8; 12];
    for (i, word) in w.iter().enumerate() {
        b[i * 4..i * 4 + 4].copy_from_slice(&word.to_be_bytes());
    }
    SnapshotId::new(b)
}

/// What the session and earlier forks changed since a fork was made: entries that
/// differ from the session's changes when it forked.
struct SinceFork<'a> {
    now: &'a ChangeSet,
    then: &'a ChangeSet,
    alive: &'a HashSet<NodeId>,
}

impl TheirChanges for SinceFork<'_> {
    fn changed_metadata(&self, id: &NodeId) -> bool {
        self.now.updated_group(id) != self.then.updated_group(id)
            || self.now.updated_array(id) != self.then.updated_array(id)
            || self.now.new_node_by_id(id) != self.then.new_node_by_id(id)
    }
    fn deleted(&self, id: &NodeId) -> bool {
        !self.alive.contains(id)
    }
    fn changed_chunk(&self, id: &NodeId, index: &[u64]) -> bool {
        self.now.chunk(id, index) != self.then.chunk(id, index)
    }
    fn changed_any_chunk(&self, id: &NodeId) -> bool {
        self.now
            .array_chunks(id)
            .into_iter()
            .flat_map(|c| c.iter())
            .any(|(k, v)| self.then.chunk(id, k) != Some(v))
    }
}

/// Everything a change set changed (the forks merged before, in one call).
struct AllOf<'a>(&'a ChangeSet);

impl TheirChanges for AllOf<'_> {
    fn changed_metadata(&self, id: &NodeId) -> bool {
        self.0.updated_group(id).is_some()
            || self.0.updated_array(id).is_some()
            || self.0.is_new(id)
    }
    fn deleted(&self, id: &NodeId) -> bool {
        self.0.is_deleted(id)
    }
    fn changed_chunk(&self, id: &NodeId, index: &[u64]) -> bool {
        self.0.chunk(id, index).is_some()
    }
    fn changed_any_chunk(&self, id: &NodeId) -> bool {
        self.0.array_chunks(id).is_some_and(|m| !m.is_empty())
    }
}

/// The session's and earlier forks' changes as a merge weighs them: a chunk they
/// wrote that the fork wrote too is no conflict, the fork's write wins (Icechunk
/// 2.3.0: the fork merged last wins, also over the session's own write). Metadata
/// changes and deletions still conflict.
struct LaterChunksWin<'a>(&'a dyn TheirChanges);

impl TheirChanges for LaterChunksWin<'_> {
    fn changed_metadata(&self, id: &NodeId) -> bool {
        self.0.changed_metadata(id)
    }
    fn deleted(&self, id: &NodeId) -> bool {
        self.0.deleted(id)
    }
    fn changed_chunk(&self, _id: &NodeId, _index: &[u64]) -> bool {
        false
    }
    fn changed_any_chunk(&self, id: &NodeId) -> bool {
        self.0.changed_any_chunk(id)
    }
}

/// A fork as a merge reads it.
struct Incoming {
    id: Option<ForkId>,
    origin: SnapshotId,
    base: Arc<Snapshot>,
    changes: Arc<ChangeSet>,
}

impl Incoming {
    /// The snapshot after which the merging session's commits count against this
    /// fork: none when the session reads the fork's own base (a fork merging a copy
    /// of itself, or a sibling made from the same session: the base already holds
    /// everything between the origin and it), the fork's origin otherwise.
    fn since(&self, our_base: SnapshotId) -> SnapshotId {
        if self.base.id == our_base {
            our_base
        } else {
            self.origin
        }
    }
}

/// Checks that every chunk change of `fork` is for an array of its tree and inside
/// that array's chunk grid (a fork's bytes come from another process).
fn check_fork_chunks(fork: &Incoming) -> Result<()> {
    let tree = apply_node_changes(&fork.base, &fork.changes);
    let shapes: HashMap<NodeId, &NodeSnapshot> = tree.values().map(|n| (n.id, n)).collect();
    for id in fork.changes.arrays_with_chunk_changes() {
        let Some(shape) = shapes.get(id).and_then(|n| n.array()).map(|a| &a.shape) else {
            return Err(Error::InvalidFork {
                reason: format!("chunk changes for node {id}, which is not an array of the fork"),
            });
        };
        let mut chunks = fork
            .changes
            .array_chunks(id)
            .into_iter()
            .flat_map(|c| c.keys());
        if let Some(bad) = chunks.find(|k| !index_in_bounds(shape, k)) {
            return Err(Error::InvalidFork {
                reason: format!("chunk index {bad:?} is outside the chunk grid of node {id}"),
            });
        }
    }
    Ok(())
}

/// Checks that every native chunk `forks` refer to exists in `storage` (the merging
/// repository's) and holds the bytes its refs point at. A fork carries snapshot ids
/// and chunk refs only: one written in another repository that shares those ids (a
/// byte-for-byte copy) would otherwise commit refs to chunk objects that exist only
/// there. One `HEAD` per chunk object, [`CHUNK_CHECK_CONCURRENCY`] at a time.
///
/// # Errors
/// [`Error::InvalidFork`] naming the first missing or short chunk object; storage
/// errors other than "not found".
async fn check_fork_chunk_objects(storage: &Arc<dyn Storage>, forks: &[Incoming]) -> Result<()> {
    let invalid = |reason: String| Error::InvalidFork { reason };
    // The end each chunk object must reach, by chunk id.
    let mut ends: HashMap<ChunkId, u64> = HashMap::new();
    for (fork, array) in forks
        .iter()
        .flat_map(|f| f.changes.arrays_with_chunk_changes().map(move |a| (f, a)))
    {
        let chunks = fork
            .changes
            .array_chunks(array)
            .into_iter()
            .flat_map(|c| c.iter());
        for (_, payload) in chunks {
            if let Some(ChunkPayloadRef::Native(n)) = payload {
                let end = n.offset.checked_add(n.length).ok_or_else(|| {
                    invalid(format!("a ref into chunk {} ends past 2^64 bytes", n.id))
                })?;
                let e = ends.entry(n.id).or_default();
                *e = (*e).max(end);
            }
        }
    }
    futures::stream::iter(ends)
        .map(|(id, end)| async move {
            let key = keys::chunk(&id);
            match storage.head(&key).await {
                Ok(info) if info.size >= end => Ok(()),
                Ok(info) => Err(invalid(format!(
                    "`{key}` holds {} bytes but a chunk ref of the fork reads up to byte {end}: \
                     the fork was not written in this repository",
                    info.size
                ))),
                Err(StorageError::NotFound { .. }) => Err(invalid(format!(
                    "`{key}`, a chunk the fork wrote, does not exist in this repository: the \
                     fork was written in another repository (a copy of this one?) or its \
                     chunks were deleted"
                ))),
                Err(e) => Err(e.into()),
            }
        })
        .buffer_unordered(CHUNK_CHECK_CONCURRENCY)
        .try_collect::<()>()
        .await
}

/// The session's tree with `merged` (forks merged earlier in this call) applied.
fn tree_with(
    base: &Snapshot,
    changes: &ChangeSet,
    merged: &ChangeSet,
) -> BTreeMap<NodePath, NodeSnapshot> {
    let mut c = changes.clone();
    c.absorb(merged);
    apply_node_changes(base, &c)
}

impl Session {
    /// A fork of this writable session: a writable session, not on a branch, that
    /// sees this session's committed and uncommitted state, can be serialized with
    /// [`Session::to_fork_bytes`] and written elsewhere, and is brought back with
    /// [`Session::merge`]. A fork cannot commit. Uncommitted changes of this session
    /// are written as an unreferenced snapshot the fork starts from.
    ///
    /// # Errors
    /// [`Error::ReadOnlySession`]; storage and format errors writing that snapshot.
    pub async fn fork(&self) -> Result<Session> {
        self.load().await?;
        if !self.is_writable() {
            return Err(Error::ReadOnlySession);
        }
        let (base, changes) = {
            let state = self.read();
            (Arc::clone(&state.base), Arc::clone(&state.changes))
        };
        let fork_base = if changes.is_empty() {
            Arc::clone(&base)
        } else {
            let snapshot = flush::flush(flush::FlushRequest {
                assets: &self.inner.ctx.assets,
                layouts: &self.inner.ctx.manifest_layouts,
                packs: self.packs(),
                base: &base,
                changes: &changes,
                new_id: SnapshotId::random(),
                message: "fork",
                metadata: BTreeMap::new(),
                method: flush::CommitMethod::NewCommit,
            })
            .await?;
            self.inner.ctx.refs.record_detached(&snapshot).await?;
            self.write()
                .forks
                .baselines
                .insert(snapshot.id, Arc::clone(&changes));
            snapshot
        };
        let fork = Session::with_mode(
            Arc::clone(&self.inner.ctx),
            fork_base,
            Mode::Fork { origin: base.id },
            ChangeSet::default(),
        );
        fork.write().forks.own = Some(Own::default());
        Ok(fork)
    }

    /// The fork as bytes, to send to another thread, process or machine: its origin
    /// and base snapshot ids, the id of its changes, and its change set (chunk refs,
    /// inline chunk bytes, node changes). No storage location or credential is
    /// included: the receiver opens the repository from its own environment and
    /// calls [`Repository::fork_from_bytes`](crate::Repository::fork_from_bytes).
    ///
    /// Packs of small chunks the fork holds (`chunk_packing`) are written first
    /// ([`Session::flush_packs`]): the bytes carry refs into them.
    ///
    /// # Errors
    /// [`Error::NotAFork`] for any session that is not a fork; storage errors
    /// writing the fork's packs (they stay in memory; call again).
    pub async fn to_fork_bytes(&self) -> Result<Vec<u8>> {
        let Mode::Fork { origin } = &self.inner.mode else {
            return Err(Error::NotAFork);
        };
        self.flush_packs().await?;
        let state = self.read();
        let wire = ForkWire {
            origin: id_to_wire(origin),
            base: id_to_wire(&state.base.id),
            id: state
                .forks
                .own
                .as_ref()
                .and_then(|o| o.id)
                .map(|ForkId(id)| ((id >> 64) as u64, id as u64)),
            changes: Wire::from_change_set(&state.changes),
        };
        let body = rmp_serde::to_vec(&wire).map_err(|e| Error::InvalidFork {
            reason: format!("cannot encode: {e}"),
        })?;
        let mut out = Vec::with_capacity(MAGIC.len() + 4 + body.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// The fork serialized in `bytes`, on the repository of `ctx`.
    pub(crate) async fn from_fork_bytes(ctx: Arc<SessionContext>, bytes: &[u8]) -> Result<Session> {
        let invalid = |reason: String| Error::InvalidFork { reason };
        let framed = bytes
            .strip_prefix(MAGIC)
            .ok_or_else(|| invalid("not a floe fork (bad leading bytes or version)".into()))?;
        let (sum, body) = framed
            .split_first_chunk::<4>()
            .ok_or_else(|| invalid("truncated: no checksum".into()))?;
        if u32::from_le_bytes(*sum) != crc32c::crc32c(body) {
            return Err(invalid(
                "its checksum does not match: the bytes were damaged or truncated in transit"
                    .into(),
            ));
        }
        let wire: ForkWire =
            rmp_serde::from_slice(body).map_err(|e| invalid(format!("cannot decode: {e}")))?;
        let changes = wire.changes.into_change_set().map_err(invalid)?;
        let base = ctx.assets.fetch_snapshot(&id_from_wire(wire.base)).await?;
        let fork = Session::with_mode(
            ctx,
            base,
            Mode::Fork {
                origin: id_from_wire(wire.origin),
            },
            changes,
        );
        fork.write().forks.own = Some(Own {
            id: wire
                .id
                .map(|(hi, lo)| ForkId((u128::from(hi) << 64) | u128::from(lo))),
            minted: false,
        });
        Ok(fork)
    }

    /// The id of a fork's changes; `None` for a fork with no change yet, and for
    /// sessions that are not forks.
    pub fn fork_id(&self) -> Option<ForkId> {
        self.read().forks.own.as_ref().and_then(|o| o.id)
    }

    /// Merges `forks` (forks of this session, written elsewhere) into this session's
    /// changes, all or nothing; commit afterwards to make them one snapshot. Disjoint
    /// changes merge, including chunks written by one fork into an array another
    /// fork, or this session before forking, created. A chunk written by several
    /// forks, or by this session and a fork, takes the write of the fork merged last
    /// (in the order of `forks`, then later calls), as in Icechunk 2.3.0.
    ///
    /// # Errors
    /// [`Error::ReadOnlySession`]; [`Error::NotAFork`] when one of `forks` is not a
    /// fork; [`Error::ForkAlreadyMerged`]; storage errors writing a fork's chunk packs
    /// not written yet; [`Error::InvalidFork`] for chunk changes
    /// outside their arrays and, when this session is not itself a fork, for a native
    /// chunk that does not exist in this repository's storage (a fork written in a
    /// copy of the repository) or is shorter than its refs; storage errors of those
    /// checks (one `HEAD` per chunk object); [`Error::MergeConflict`] listing every conflict between
    /// the forks and with this session's changes since they were made (including
    /// [`Conflict::BaseNotAncestor`] when this session's branch was reset since);
    /// storage and format errors reading the commits this session made since.
    pub async fn merge(&self, forks: impl IntoIterator<Item = Session>) -> Result<()> {
        self.load().await?;
        if !self.is_writable() {
            return Err(Error::ReadOnlySession);
        }
        let forks: Vec<Session> = forks.into_iter().collect();
        for f in &forks {
            if !matches!(f.inner.mode, Mode::Fork { .. }) {
                return Err(Error::NotAFork);
            }
            // Forks of this process may hold packs not written yet: their refs are
            // about to become this session's.
            f.flush_packs().await?;
        }
        let mut incoming = Vec::new();
        for f in forks {
            let Mode::Fork { origin } = &f.inner.mode else {
                return Err(Error::NotAFork);
            };
            let state = f.read();
            let fork = Incoming {
                id: state.forks.own.as_ref().and_then(|o| o.id),
                origin: *origin,
                base: Arc::clone(&state.base),
                changes: Arc::clone(&state.changes),
            };
            check_fork_chunks(&fork)?;
            incoming.push(fork);
        }
        // A session that commits accepts only chunks its repository holds; forks
        // merging into forks leave that to the final merge (one check per chunk).
        if !matches!(self.inner.mode, Mode::Fork { .. }) {
            check_fork_chunk_objects(self.inner.ctx.assets.storage(), &incoming).await?;
        }
        loop {
            // Commits this session made since each fork's origin.
            let our_base = self.snapshot_id();
            let mut since: HashMap<SnapshotId, Option<CommitsSummary>> = HashMap::new();
            for origin in incoming.iter().map(|f| f.since(our_base)) {
                if origin == our_base || since.contains_key(&origin) {
                    continue;
                }
                let assets = &self.inner.ctx.assets;
                let summary = match commits_since(assets, origin, our_base).await? {
                    Some(commits) => Some(CommitsSummary::read_logs(assets, &commits).await?),
                    None => None,
                };
                since.insert(origin, summary);
            }
            let mut state = self.write();
            if state.base.id != our_base {
                continue; // a commit landed meanwhile: look again
            }
            let mut merged = ChangeSet::default();
            let mut merged_ids = Vec::new();
            let mut conflicts: Vec<Conflict> = Vec::new();
            let mut tree = apply_node_changes(&state.base, &state.changes);
            let mut alive: HashSet<NodeId> = tree.values().map(|n| n.id).collect();
            let empty = Arc::new(ChangeSet::default());
            for fork in &incoming {
                if let Some(id) = fork.id {
                    if state.forks.merged.contains(&id) || merged_ids.contains(&id) {
                        return Err(Error::ForkAlreadyMerged {
                            fork: id.to_string(),
                        });
                    }
                    merged_ids.push(id);
                }
                if fork.changes.is_empty() {
                    continue;
                }
                if let Some(None) = since.get(&fork.since(our_base)) {
                    conflicts.push(Conflict::BaseNotAncestor { base: fork.origin });
                    continue;
                }
                let baseline = state.forks.baselines.get(&fork.base.id).unwrap_or(&empty);
                let session_side = SinceFork {
                    now: &state.changes,
                    then: baseline,
                    alive: &alive,
                };
                let forks_side = AllOf(&merged);
                let both = Either(&session_side, &forks_side);
                let ours_and_forks = LaterChunksWin(&both);
                let with_commits;
                let theirs: &dyn TheirChanges =
                    match since.get(&fork.since(our_base)).and_then(Option::as_ref) {
                        Some(committed) => {
                            with_commits = Either(&ours_and_forks, committed);
                            &with_commits
                        }
                        None => &ours_and_forks,
                    };
                let paths = paths_by_id(fork.base.nodes.values());
                let path_of = |id: &NodeId| paths.get(id).cloned().unwrap_or_else(NodePath::root);
                let found = detect(
                    &fork.changes,
                    theirs,
                    &TheirTree { nodes: &tree },
                    &path_of,
                    Rules::Merge,
                );
                if !found.conflicts.is_empty() {
                    conflicts.extend(found.conflicts);
                    continue;
                }
                let node_changes = !fork.changes.new_nodes().is_empty()
                    || fork.changes.deleted_nodes().next().is_some()
                    || !found.same_new_groups.is_empty();
                if found.same_new_groups.is_empty() {
                    merged.absorb(&fork.changes);
                } else {
                    let mut c = ChangeSet::clone(&fork.changes);
                    for path in &found.same_new_groups {
                        c.forget_new_node(path);
                    }
                    merged.absorb(&c);
                }
                if node_changes {
                    tree = tree_with(&state.base, &state.changes, &merged);
                    alive = tree.values().map(|n| n.id).collect();
                }
            }
            if !conflicts.is_empty() {
                return Err(Error::MergeConflict { conflicts });
            }
            let merged = Arc::new(merged);
            state.change(move |c| c.absorb(&merged));
            state.forks.merged.extend(merged_ids);
            return Ok(());
        }
    }
}
