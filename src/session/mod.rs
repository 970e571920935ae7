//! Sessions: a view of one snapshot, read-only (at a branch, tag, snapshot id or time)
//! or writable (on a branch). A writable session records changes in a [`ChangeSet`],
//! reads its own uncommitted changes, and commits them as a new snapshot with
//! optimistic concurrency (rebase-and-retry when the branch moved).
//! [`Session::store`] gives the session as a Zarr store ([`SessionStore`]).
//!
//! Spec: Icechunk specification, "Read from Repository" and "Write New Snapshot".

pub mod change_set;
mod chunk_port;
mod chunk_reads;
pub(crate) mod commit;
pub(crate) mod conflict;
pub(crate) mod context;
pub mod diff;
mod fork;
mod landing;
pub(crate) mod manifest_split;
pub(crate) mod overlay;
mod rearrange;
mod rebase;
mod reindex;
mod solver;
mod store;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::format::config::RepositoryConfig;
use crate::format::manifest::{ChunkPayload, ChunkPayloadRef, NativeChunkRef};
use crate::format::snapshot::{NodeSnapshot, Snapshot};
use crate::format::{ChunkId, ChunkIndices, NodeId, NodePath, SnapshotId};
use crate::refs::RefUpdate;

pub use change_set::{ArrayDefinition, ChangeSet, NewNode};
pub use chunk_port::SessionChunks;
pub(crate) use chunk_reads::payload_len;
pub use chunk_reads::ChunkOutcome;
use context::SessionContext;
pub use diff::Diff;
pub use fork::ForkId;
pub use manifest_split::MAX_REFS_PER_MANIFEST;
use overlay::index_in_bounds;
pub use reindex::ChunkIndexMap;
pub use solver::{BasicConflictSolver, ConflictDetector, ConflictSolver, VersionSelection};
pub use store::{array_definition, SessionStore};

/// A committed change set with more chunk changes than this is freed on the compute
/// pool, after the commit returns.
const BACKGROUND_DROP_CHUNKS: usize = 100_000;

/// Options of [`Session::commit_with`]: whether and how a commit rebases when its
/// branch moved (Icechunk's `rebase_with` / `rebase_tries`), and the back-off between
/// attempts.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CommitOptions {
    /// Allow a commit with no change (default `false`).
    pub allow_empty: bool,
    /// Rebase onto the branch tip and retry when the branch moved (default `true`);
    /// when `false`, a moved branch is a conflict.
    pub rebase: bool,
    /// What a rebase does with conflicts (default [`ConflictDetector`]: any conflict
    /// fails the commit).
    pub solver: Arc<dyn ConflictSolver>,
    /// Largest number of attempts at the commit point (default 100).
    pub max_attempts: u32,
    /// First retry delay; doubles each attempt up to `max_backoff`, with full jitter.
    pub initial_backoff: Duration,
    /// Largest retry delay.
    pub max_backoff: Duration,
}

impl Default for CommitOptions {
    fn default() -> Self {
        CommitOptions {
            allow_empty: false,
            rebase: true,
            solver: Arc::new(ConflictDetector),
            max_attempts: 100,
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(500),
        }
    }
}

impl CommitOptions {
    /// These options allowing (`true`) or refusing empty commits.
    pub fn allow_empty(mut self, yes: bool) -> Self {
        self.allow_empty = yes;
        self
    }

    /// These options rebasing (`true`) or failing when the branch moved.
    pub fn rebase(mut self, yes: bool) -> Self {
        self.rebase = yes;
        self
    }

    /// These options rebasing with `solver`.
    pub fn solver(mut self, solver: impl ConflictSolver + 'static) -> Self {
        self.solver = Arc::new(solver);
        self
    }

    /// These options with at most `n` attempts at the commit point (at least 1).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// These options with back-off from `initial`, doubling up to `max`.
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max;
        self
    }
}

/// One change made while a commit is in flight, kept to be replayed on the change
/// set that remains after the commit.
type Mutation = Box<dyn FnOnce(&mut ChangeSet) + Send + Sync>;

struct State {
    base: Arc<Snapshot>,
    /// Shared with an in-flight commit, which then needs no deep copy; writes copy
    /// on write (`Arc::make_mut`).
    changes: Arc<ChangeSet>,
    /// While a commit is in flight: the changes made since it took `changes`. A
    /// commit that lands leaves exactly these (replayed on an empty change set over
    /// the new base), so writes made during a commit are never lost.
    replay: Option<Vec<Mutation>>,
    /// Forks and merges (see `fork.rs`).
    forks: fork::ForkState,
    /// Rearrange sessions: the base before the first move (`base` is then the moved
    /// view of it).
    rearranged_from: Option<Arc<Snapshot>>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("base", &self.base.id)
            .field("changes", &self.changes)
            .field("replay", &self.replay.as_ref().map(Vec::len))
            .finish()
    }
}

impl State {
    /// Applies `m` to the change set, and keeps a copy to replay when a commit is in
    /// flight.
    fn change<M>(&mut self, m: M)
    where
        M: FnOnce(&mut ChangeSet) + Clone + Send + Sync + 'static,
    {
        // Only a commit in flight needs the copy (an importer's batch of refs is
        // not copied otherwise).
        if self.replay.is_some() {
            self.record(m.clone());
        } else {
            self.forks.changed();
        }
        m(Arc::make_mut(&mut self.changes));
    }

    /// Keeps `m` to replay after the commit in flight, if any; and, in a fork, marks
    /// the fork as changed.
    fn record<M>(&mut self, m: M)
    where
        M: FnOnce(&mut ChangeSet) + Send + Sync + 'static,
    {
        if let Some(replay) = &mut self.replay {
            replay.push(Box::new(m));
        }
        self.forks.changed();
    }
}

/// What a session may do.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Mode {
    /// Read only.
    ReadOnly,
    /// Write and commit to this branch.
    Branch(String),
    /// Write, then be merged into the session it was forked from; never commit.
    Fork {
        /// The forking session's base snapshot when the fork was made.
        origin: SnapshotId,
    },
    /// Spec 2: move and rename nodes, then commit to this branch (see
    /// `rearrange.rs`).
    Rearrange(String),
}

#[derive(Debug)]
struct Inner {
    ctx: Arc<SessionContext>,
    mode: Mode,
    state: RwLock<State>,
    /// Held by a commit from start to end, so commits of one session run one at a time.
    commit_lock: tokio::sync::Mutex<()>,
}

/// A session on a repository. Cheap to clone; clones share state.
///
/// Writes are only allowed on sessions from
/// [`Repository::writable_session`](crate::Repository::writable_session) and on their
/// forks ([`Session::fork`]). Many tasks may read and write chunks concurrently, also
/// while one of them commits: a commit takes the changes made before it started, and
/// the changes made while it was in flight stay in the session for the next commit.
#[derive(Clone, Debug)]
pub struct Session {
    inner: Arc<Inner>,
}

/// A node as a session sees it: committed state plus uncommitted changes.
pub type Node = NodeSnapshot;

impl Session {
    /// A read-only session at `base`.
    pub(crate) fn read_only(ctx: Arc<SessionContext>, base: Arc<Snapshot>) -> Self {
        Self::with_mode(ctx, base, Mode::ReadOnly, ChangeSet::default())
    }

    /// A writable session on `branch`, whose tip is `base`.
    pub(crate) fn on_branch(ctx: Arc<SessionContext>, base: Arc<Snapshot>, branch: String) -> Self {
        Self::with_mode(ctx, base, Mode::Branch(branch), ChangeSet::default())
    }

    fn with_mode(
        ctx: Arc<SessionContext>,
        base: Arc<Snapshot>,
        mode: Mode,
        changes: ChangeSet,
    ) -> Self {
        Session {
            inner: Arc::new(Inner {
                ctx,
                mode,
                state: RwLock::new(State {
                    base,
                    changes: Arc::new(changes),
                    replay: None,
                    forks: fork::ForkState::default(),
                    rearranged_from: None,
                }),
                commit_lock: tokio::sync::Mutex::new(()),
            }),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.inner.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.inner.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The repository configuration as it was when the session started.
    pub fn config(&self) -> &RepositoryConfig {
        &self.inner.ctx.config
    }

    /// The snapshot the session reads from (for a writable session, the base its
    /// changes apply to).
    pub fn snapshot_id(&self) -> SnapshotId {
        self.read().base.id
    }

    /// The base snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(&self.read().base)
    }

    /// The branch of a writable session; `None` for read-only sessions and forks.
    pub fn branch(&self) -> Option<&str> {
        match &self.inner.mode {
            Mode::Branch(b) | Mode::Rearrange(b) => Some(b),
            Mode::ReadOnly | Mode::Fork { .. } => None,
        }
    }

    /// Whether the session accepts writes (a session on a branch, or a fork; a
    /// rearrange session only moves nodes).
    pub fn is_writable(&self) -> bool {
        matches!(self.inner.mode, Mode::Branch(_) | Mode::Fork { .. })
    }

    /// Whether the session is a rearrange session (spec 2: it only moves nodes;
    /// [`crate::Repository::rearrange_session`]).
    pub fn is_rearrange(&self) -> bool {
        matches!(self.inner.mode, Mode::Rearrange(_))
    }

    /// Whether the session is a fork ([`Session::fork`]).
    pub fn is_fork(&self) -> bool {
        matches!(self.inner.mode, Mode::Fork { .. })
    }

    /// Whether the session has uncommitted changes.
    /// In a rearrange session, any move counts, even one that a later move undid
    /// (Icechunk 2.3.0).
    pub fn has_uncommitted_changes(&self) -> bool {
        let state = self.read();
        !state.changes.is_empty() || state.rearranged_from.is_some()
    }

    /// A copy of the uncommitted changes.
    pub fn change_set(&self) -> ChangeSet {
        self.read().changes.as_ref().clone()
    }

    /// Forgets every uncommitted change (chunks already written become garbage).
    pub fn discard_changes(&self) {
        self.write().change(|c| *c = ChangeSet::default());
    }

    fn check_writable(&self) -> Result<()> {
        if self.is_writable() {
            Ok(())
        } else {
            Err(Error::ReadOnlySession)
        }
    }

    fn node_in(state: &State, path: &NodePath) -> Option<NodeSnapshot> {
        match state.changes.new_node(path) {
            Some((id, new)) => Some(new.snapshot(*id, path)),
            None => state.changes.apply(state.base.nodes.get(path)?),
        }
    }

    /// The node at `path`, with uncommitted changes applied.
    ///
    /// # Errors
    /// [`Error::NodeNotFound`].
    pub fn get_node(&self, path: &NodePath) -> Result<Node> {
        Self::node_in(&self.read(), path).ok_or_else(|| Error::NodeNotFound { path: path.clone() })
    }

    /// Every node, sorted by path, with uncommitted changes applied.
    pub fn list_nodes(&self) -> Vec<Node> {
        let state = self.read();
        overlay::apply_node_changes(&state.base, &state.changes)
            .into_values()
            .collect()
    }

    /// Nodes at or below `path`, sorted by path.
    pub fn list_nodes_under(&self, path: &NodePath) -> Vec<Node> {
        self.list_nodes()
            .into_iter()
            .filter(|n| n.path.starts_with(path))
            .collect()
    }

    fn check_new_path(state: &State, path: &NodePath) -> Result<()> {
        if Self::node_in(state, path).is_some() {
            return Err(Error::NodeExists { path: path.clone() });
        }
        let mut p = path.parent();
        while let Some(parent) = p {
            if let Some(n) = Self::node_in(state, &parent) {
                if !n.is_group() {
                    return Err(Error::ParentNotGroup { path: path.clone() });
                }
            }
            p = parent.parent();
        }
        Ok(())
    }

    /// Creates a group at `path` with `zarr.json` bytes `user_data`.
    ///
    /// # Errors
    /// [`Error::ReadOnlySession`], [`Error::NodeExists`], [`Error::ParentNotGroup`]
    /// (an ancestor is an array).
    pub fn add_group(&self, path: &NodePath, user_data: Bytes) -> Result<NodeId> {
        self.check_writable()?;
        let mut state = self.write();
        Self::check_new_path(&state, path)?;
        let id = NodeId::random();
        let path = path.clone();
        state.change(move |c| c.add_node(path, id, NewNode::Group(user_data)));
        Ok(id)
    }

    /// Creates an array at `path`.
    ///
    /// # Errors
    /// As [`Session::add_group`].
    pub fn add_array(&self, path: &NodePath, def: ArrayDefinition) -> Result<NodeId> {
        self.check_writable()?;
        let mut state = self.write();
        Self::check_new_path(&state, path)?;
        let id = NodeId::random();
        let path = path.clone();
        state.change(move |c| c.add_node(path, id, NewNode::Array(def)));
        Ok(id)
    }

    /// Replaces the `zarr.json` of the group at `path`.
    ///
    /// # Errors
    /// [`Error::ReadOnlySession`], [`Error::NodeNotFound`], [`Error::NotAGroup`].
    pub fn update_group(&self, path: &NodePath, user_data: Bytes) -> Result<()> {
        self.check_writable()?;
        let mut state = self.write();
        let node = Self::node_in(&state, path)
            .ok_or_else(|| Error::NodeNotFound { path: path.clone() })?;
        if !node.is_group() {
            return Err(Error::NotAGroup { path: path.clone() });
        }
        let path = path.clone();
        state.change(move |c| c.update_group(&path, node.id, user_data));
        Ok(())
    }

    /// Replaces the definition (zarr.json, shape, dimension names) of the array at
    /// `path`. Chunks outside a smaller new shape are dropped at commit.
    ///
    /// # Errors
    /// [`Error::ReadOnlySession`], [`Error::NodeNotFound`], [`Error::NotAnArray`].
    pub fn update_array(&self, path: &NodePath, def: ArrayDefinition) -> Result<()> {
        self.check_writable()?;
        let mut state = self.write();
        let node = Self::node_in(&state, path)
            .ok_or_else(|| Error::NodeNotFound { path: path.clone() })?;
        if node.is_group() {
            return Err(Error::NotAnArray { path: path.clone() });
        }
        let path = path.clone();
        state.change(move |c| c.update_array(&path, node.id, def));
        Ok(())
    }

    /// Deletes the node at `path` and every node below it.
    ///
    /// # Errors
    /// [`Error::ReadOnlySession`], [`Error::NodeNotFound`].
    pub fn delete_node(&self, path: &NodePath) -> Result<()> {
        self.check_writable()?;
        let mut state = self.write();
        if Self::node_in(&state, path).is_none() {
            return Err(Error::NodeNotFound { path: path.clone() });
        }
        let doomed: Vec<(NodePath, NodeId, bool)> =
            overlay::apply_node_changes(&state.base, &state.changes)
                .into_values()
                .filter(|n| n.path.starts_with(path))
                .map(|n| (n.path.clone(), n.id, n.is_group()))
                .collect();
        state.change(move |c| {
            for (path, id, is_group) in doomed.iter().rev() {
                c.delete_node(path, *id, *is_group);
            }
        });
        Ok(())
    }

    fn array_node(&self, path: &NodePath, index: &[u64]) -> Result<NodeSnapshot> {
        let node = self.get_node(path)?;
        let Some(a) = node.array() else {
            return Err(Error::NotAnArray { path: path.clone() });
        };
        if !index_in_bounds(&a.shape, index) {
            return Err(Error::InvalidChunkIndex {
                path: path.clone(),
                index: index.to_vec(),
            });
        }
        Ok(node)
    }

    /// The chunk ref of the array at `path` at chunk `index`; `None` when the chunk
    /// was never written (it reads as the fill value).
    ///
    /// # Errors
    /// [`Error::NodeNotFound`], [`Error::NotAnArray`], [`Error::InvalidChunkIndex`];
    /// storage and format errors reading manifests.
    pub async fn get_chunk_ref(
        &self,
        path: &NodePath,
        index: &[u64],
    ) -> Result<Option<ChunkPayload>> {
        let node = self.array_node(path, index)?;
        self.chunk_ref_of(&node, index).await
    }

    /// [`Session::get_chunk_ref`] for an array node already resolved (and `index`
    /// already checked against its shape).
    async fn chunk_ref_of(
        &self,
        node: &NodeSnapshot,
        index: &[u64],
    ) -> Result<Option<ChunkPayload>> {
        let base = {
            let state = self.read();
            if let Some(change) = state.changes.chunk(&node.id, index) {
                return Ok(change.map(|p| p.to_payload()));
            }
            if state.changes.is_new(&node.id) {
                return Ok(None);
            }
            Arc::clone(&state.base)
        };
        let Some(mref) = node
            .array()
            .and_then(|a| a.manifests.iter().find(|m| m.contains(index)))
        else {
            return Ok(None);
        };
        let size = base.manifest_info(&mref.object_id).map(|i| i.size_bytes);
        let manifest = self
            .inner
            .ctx
            .assets
            .fetch_manifest(&mref.object_id, size)
            .await?;
        manifest.check_rank(&node.id, index.len())?;
        Ok(manifest.get(&node.id, index).cloned())
    }

    /// Stores the encoded bytes of a chunk: inline in the manifest when at most
    /// `inline_chunk_threshold_bytes` long, otherwise as a new native chunk object
    /// written now.
    ///
    /// # Errors
    /// [`Error::ReadOnlySession`], [`Error::NodeNotFound`], [`Error::NotAnArray`],
    /// [`Error::InvalidChunkIndex`]; storage errors writing the chunk.
    pub async fn set_chunk(&self, path: &NodePath, index: &[u64], bytes: Bytes) -> Result<()> {
        self.check_writable()?;
        let node = self.array_node(path, index)?;
        self.set_chunk_of(path, &node, index, bytes).await
    }

    /// [`Session::set_chunk`] for an array node already resolved (and `index`
    /// already checked against its shape), in a writable session.
    async fn set_chunk_of(
        &self,
        path: &NodePath,
        node: &NodeSnapshot,
        index: &[u64],
        bytes: Bytes,
    ) -> Result<()> {
        let payload = if self.is_inline(&bytes) {
            ChunkPayload::Inline(bytes)
        } else {
            let id = ChunkId::random();
            let length = bytes.len() as u64;
            self.inner.ctx.assets.write_chunk(&id, bytes).await?;
            native_payload(id, length)
        };
        self.record_chunk(path, node, index, Some(payload))
    }

    /// Whether `bytes` are kept inline in the manifest rather than written as a
    /// native chunk object (at most `inline_chunk_threshold_bytes` long).
    fn is_inline(&self, bytes: &[u8]) -> bool {
        (bytes.len() as u64) <= self.inner.ctx.inline_threshold_bytes
    }

    /// Sets a chunk ref directly (e.g. a virtual ref), or deletes the chunk with `None`.
    ///
    /// # Errors
    /// As [`Session::set_chunk`].
    pub fn set_chunk_ref(
        &self,
        path: &NodePath,
        index: &[u64],
        payload: Option<ChunkPayload>,
    ) -> Result<()> {
        self.check_writable()?;
        let node = self.array_node(path, index)?;
        self.record_chunk(path, &node, index, payload)
    }

    /// Sets (or with `None`, deletes) many chunk refs of the array at `path` under one
    /// lock: the fast path for importers writing millions of refs.
    ///
    /// # Errors
    /// As [`Session::set_chunk_ref`]; on an out-of-grid index nothing is recorded.
    pub fn set_chunk_refs(
        &self,
        path: &NodePath,
        refs: impl IntoIterator<Item = (ChunkIndices, Option<ChunkPayload>)>,
    ) -> Result<()> {
        self.check_writable()?;
        let mut state = self.write();
        let node = Self::node_in(&state, path)
            .ok_or_else(|| Error::NodeNotFound { path: path.clone() })?;
        let Some(shape) = node.array().map(|a| a.shape.clone()) else {
            return Err(Error::NotAnArray { path: path.clone() });
        };
        let refs: Vec<_> = refs.into_iter().collect();
        if let Some((bad, _)) = refs.iter().find(|(idx, _)| !index_in_bounds(&shape, idx)) {
            return Err(Error::InvalidChunkIndex {
                path: path.clone(),
                index: bad.clone(),
            });
        }
        state.change(move |c| {
            for (idx, payload) in refs {
                c.set_chunk(node.id, idx, payload);
            }
        });
        Ok(())
    }

    fn record_chunk(
        &self,
        path: &NodePath,
        node: &NodeSnapshot,
        index: &[u64],
        payload: Option<ChunkPayload>,
    ) -> Result<()> {
        let mut state = self.write();
        // The node may have been deleted or replaced while the chunk was written.
        match Self::node_in(&state, path) {
            Some(n) if n.id == node.id => {}
            _ => return Err(Error::NodeNotFound { path: path.clone() }),
        }
        let (id, index) = (node.id, index.to_vec());
        state.change(move |c| c.set_chunk(id, index, payload));
        Ok(())
    }

    /// Indices of every chunk of the array at `path` that has a ref, sorted.
    ///
    /// # Errors
    /// [`Error::NodeNotFound`], [`Error::NotAnArray`]; storage and format errors.
    pub async fn list_chunks(&self, path: &NodePath) -> Result<Vec<ChunkIndices>> {
        self.collect_refs(path, |idx, _| idx.to_vec()).await
    }

    /// Every chunk ref of the array at `path`, sorted by index.
    ///
    /// # Errors
    /// As [`Session::list_chunks`].
    pub async fn chunk_refs(&self, path: &NodePath) -> Result<Vec<(ChunkIndices, ChunkPayload)>> {
        self.collect_refs(path, |idx, p| (idx.to_vec(), p.to_payload()))
            .await
    }

    async fn collect_refs<T>(
        &self,
        path: &NodePath,
        f: impl Fn(&[u64], ChunkPayloadRef<'_>) -> T,
    ) -> Result<Vec<T>> {
        let node = self.get_node(path)?;
        let Some(a) = node.array() else {
            return Err(Error::NotAnArray { path: path.clone() });
        };
        let (base, changes) = {
            let state = self.read();
            (Arc::clone(&state.base), Arc::clone(&state.changes))
        };
        let manifests = overlay::committed_manifests(&self.inner.ctx.assets, &base, &node).await?;
        Ok(overlay::merged_refs(&manifests, &changes, &node.id)
            .filter(|(idx, _)| index_in_bounds(&a.shape, idx))
            .map(|(idx, p)| f(idx, p))
            .collect())
    }

    /// What the uncommitted changes do, by path.
    pub fn status(&self) -> Diff {
        let state = self.read();
        Diff::from_change_set(&state.base, &state.changes)
    }

    /// Commits the changes with `message` and default [`CommitOptions`]; returns the
    /// new snapshot id.
    ///
    /// # Errors
    /// As [`Session::commit_with`].
    pub async fn commit(&self, message: &str) -> Result<SnapshotId> {
        self.commit_with(message, BTreeMap::new(), CommitOptions::default())
            .await
    }

    /// The branch of a session that may commit.
    fn commit_branch(&self) -> Result<String> {
        match &self.inner.mode {
            Mode::Branch(b) => Ok(b.clone()),
            Mode::ReadOnly | Mode::Rearrange(_) => Err(Error::ReadOnlySession),
            Mode::Fork { .. } => Err(Error::ForkCannotCommit),
        }
    }

    /// Commits the changes: writes manifests, transaction log and snapshot, then moves
    /// the branch with compare-and-swap. When the branch moved, rebases (if allowed)
    /// with the options' [`ConflictSolver`] and retries with jittered exponential
    /// backoff. On success the session continues from the new snapshot, keeping only
    /// the changes made by other tasks while the commit was in flight. A commit that
    /// rebased `n` times (n >= 1) records `{"__icechunk": {"rebase_attempts": n}}` in
    /// its metadata, as Icechunk 2.x does.
    ///
    /// # Errors
    /// [`Error::ReadOnlySession`]; [`Error::ForkCannotCommit`];
    /// [`Error::NoChangesToCommit`] (unless `allow_empty`); [`Error::Conflict`] with
    /// every conflict the solver could not resolve and the winning snapshot;
    /// [`Error::BranchNotFound`] if the branch was deleted; storage and format errors.
    /// Nothing partial is ever visible.
    pub async fn commit_with(
        &self,
        message: &str,
        metadata: BTreeMap<String, serde_json::Value>,
        options: CommitOptions,
    ) -> Result<SnapshotId> {
        if let Mode::Rearrange(branch) = &self.inner.mode {
            return self.commit_moves(branch, message, metadata, options).await;
        }
        let branch = self.commit_branch()?;
        self.commit_guarded(|base, changes| async move {
            self.commit_changes(branch, base, changes, message, metadata, options)
                .await
        })
        .await
    }

    /// Replaces the branch tip (this session's base) with a snapshot holding its
    /// content plus this session's changes, whose parent is the tip's parent; the
    /// replaced snapshot leaves the branch's history. Its transaction log records the
    /// replaced commit's changes and the new ones. The branch moves with
    /// compare-and-swap from the tip this session started from, so a branch that
    /// moved meanwhile is a conflict, never a lost commit. Empty changes are allowed
    /// (to change only the message).
    ///
    /// Icechunk 2.3.0 offers amend on spec-2 repositories only (it records amends in
    /// its ops log); on spec 1 floe writes exactly what a spec-1 reader expects: a
    /// branch whose tip has the amended commit's parent.
    ///
    /// # Errors
    /// [`Error::ReadOnlySession`]; [`Error::ForkCannotCommit`];
    /// [`Error::NoAmendForInitialCommit`]; [`Error::Conflict`] (with no conflict
    /// listed) when the branch moved; storage and format errors.
    pub async fn amend(
        &self,
        message: &str,
        metadata: BTreeMap<String, serde_json::Value>,
    ) -> Result<SnapshotId> {
        if let Mode::Rearrange(branch) = &self.inner.mode {
            return self.amend_moves(branch, message, metadata).await;
        }
        let branch = self.commit_branch()?;
        self.commit_guarded(|base, changes| async move {
            if base.parent_id.is_none() {
                return Err(Error::NoAmendForInitialCommit);
            }
            let ctx = &self.inner.ctx;
            let tip = ctx.refs.branch(&branch).await?;
            let moved = |now| Error::conflict(&branch, base.id, now, Vec::new());
            if tip.snapshot != base.id {
                return Err(moved(tip.snapshot));
            }
            let previous = ctx.assets.fetch_transaction_log(&base.id).await?;
            let snapshot = commit::flush(
                &ctx.assets,
                &ctx.manifest_layouts,
                &base,
                &changes,
                SnapshotId::random(),
                message,
                metadata,
                commit::CommitMethod::Amend(&previous),
            )
            .await?;
            let tried = landing::Attempt {
                snapshot: Arc::clone(&snapshot),
                base: Arc::clone(&base),
            };
            let update = ctx
                .refs
                .commit(&branch, &tip, &snapshot, Some(base.id), None)
                .await;
            tried
                .settle(&ctx.assets, &ctx.refs, &branch, update, moved)
                .await
        })
        .await
    }

    /// Rewrites the manifests of every array of the branch tip (this session's base)
    /// in the layout the repository configuration's `manifest.splitting` gives now,
    /// and commits the result (Icechunk 2.3.0's `Repository.rewrite_manifests`): the
    /// chunk refs are unchanged, only how they are spread over manifest files. With
    /// `amend`, the new snapshot replaces the tip (as [`Session::amend`]), otherwise
    /// it is the tip's child. Uncommitted changes of this session go into the same
    /// commit. The metadata gets `{"__icechunk": {"splitting_config": ..}}` (the
    /// configuration applied, as Icechunk records it). The branch moves with
    /// compare-and-swap from this session's base; a branch that moved meanwhile is a
    /// conflict (no rebase, as in Icechunk).
    ///
    /// # Errors
    /// [`Error::ReadOnlySession`]; [`Error::ForkCannotCommit`];
    /// [`Error::NoAmendForInitialCommit`] (amend of the first commit);
    /// [`Error::Conflict`] (no conflict listed) when the branch moved; storage and
    /// format errors.
    pub async fn rewrite_manifests(
        &self,
        message: &str,
        mut metadata: BTreeMap<String, serde_json::Value>,
        amend: bool,
    ) -> Result<SnapshotId> {
        let branch = self.commit_branch()?;
        let ctx = &self.inner.ctx;
        let internal = metadata
            .entry("__icechunk".to_string())
            .or_insert_with(|| serde_json::json!({}));
        if !internal.is_object() {
            *internal = serde_json::json!({});
        }
        if let Some(obj) = internal.as_object_mut() {
            obj.insert(
                "splitting_config".to_string(),
                ctx.manifest_layouts.splitting_json(),
            );
        }
        self.commit_guarded(|base, changes| async move {
            if amend && base.parent_id.is_none() {
                return Err(Error::NoAmendForInitialCommit);
            }
            let tip = ctx.refs.branch(&branch).await?;
            let moved = |now| Error::conflict(&branch, base.id, now, Vec::new());
            if tip.snapshot != base.id {
                return Err(moved(tip.snapshot));
            }
            let previous = if amend {
                Some(ctx.assets.fetch_transaction_log(&base.id).await?)
            } else {
                None
            };
            let snapshot = commit::flush(
                &ctx.assets,
                &ctx.manifest_layouts,
                &base,
                &changes,
                SnapshotId::random(),
                message,
                metadata,
                commit::CommitMethod::RewriteManifests(previous.as_deref()),
            )
            .await?;
            let tried = landing::Attempt {
                snapshot: Arc::clone(&snapshot),
                base: Arc::clone(&base),
            };
            let amends = amend.then_some(base.id);
            let update = ctx
                .refs
                .commit(&branch, &tip, &snapshot, amends, None)
                .await;
            tried
                .settle(&ctx.assets, &ctx.refs, &branch, update, moved)
                .await
        })
        .await
    }

    /// Runs `commit` on the session's base and changes, one commit at a time; when it
    /// lands, continues from the snapshot it returns, keeping the changes made while
    /// it was in flight.
    async fn commit_guarded<'s, F, Fut>(&'s self, commit: F) -> Result<SnapshotId>
    where
        F: FnOnce(Arc<Snapshot>, Arc<ChangeSet>) -> Fut,
        Fut: std::future::Future<Output = Result<Arc<Snapshot>>> + 's,
    {
        let _one_at_a_time = self.inner.commit_lock.lock().await;
        let (base, changes) = {
            let mut state = self.write();
            state.replay = Some(Vec::new());
            (Arc::clone(&state.base), Arc::clone(&state.changes))
        };
        // Stops recording changes for replay however this ends (also when the commit's
        // future is dropped half-way): they are all in `changes` already.
        struct StopReplay<'a>(&'a Session);
        impl Drop for StopReplay<'_> {
            fn drop(&mut self) {
                self.0.write().replay = None;
            }
        }
        let _stop = StopReplay(self);
        let snapshot = commit(base, changes).await?;
        let mut state = self.write();
        let mut rest = ChangeSet::default();
        for m in state.replay.take().unwrap_or_default() {
            m(&mut rest);
        }
        state.base = Arc::clone(&snapshot);
        let committed = std::mem::replace(&mut state.changes, Arc::new(rest));
        drop(state);
        // Freeing millions of chunk refs takes a while; the caller need not wait.
        if committed.num_chunk_changes() > BACKGROUND_DROP_CHUNKS {
            crate::compute::spawn_detached(move || drop(committed));
        }
        Ok(snapshot.id)
    }

    /// The commit loop of [`Session::commit_with`]: flush, commit point, rebase and
    /// retry; returns the snapshot that the branch now points to.
    async fn commit_changes(
        &self,
        branch: String,
        mut base: Arc<Snapshot>,
        mut changes: Arc<ChangeSet>,
        message: &str,
        metadata: BTreeMap<String, serde_json::Value>,
        options: CommitOptions,
    ) -> Result<Arc<Snapshot>> {
        if changes.is_empty() && !options.allow_empty {
            return Err(Error::NoChangesToCommit);
        }
        let ctx = &self.inner.ctx;
        let assets = &ctx.assets;
        let mut attempt = 0u32;
        // The last attempt whose move of the branch was refused: it may have landed
        // all the same (a retried request that found its own earlier write), and the
        // next read of the branch tells (see `landing`).
        let mut refused: Option<landing::Attempt> = None;
        // Rebases done so far: a commit that rebased records their number in its
        // metadata as Icechunk does (`{"__icechunk": {"rebase_attempts": n}}`).
        let mut rebases = 0u32;
        let flush = |base: Arc<Snapshot>, changes: Arc<ChangeSet>, rebases: u32| {
            let mut metadata = metadata.clone();
            if rebases > 0 {
                record_rebase_attempts(&mut metadata, rebases);
            }
            async move {
                let snapshot = commit::flush(
                    assets,
                    &ctx.manifest_layouts,
                    &base,
                    &changes,
                    SnapshotId::random(),
                    message,
                    metadata,
                    commit::CommitMethod::NewCommit,
                )
                .await?;
                Ok::<_, Error>(landing::Attempt { snapshot, base })
            }
        };
        loop {
            attempt += 1;
            // The first attempt reads the tip and writes the new snapshot at once: the
            // tip is usually the base, and then that snapshot is the one to commit (one
            // round trip less per commit; when the branch moved, it is deleted unused).
            // Spec 2 takes the tip from the `repo` object as last read (no request: the
            // compare-and-swap refuses a stale one) and sends the copy of that object
            // the update saves under `overwritten/` beside the snapshot writes, so the
            // commit point is one round trip after them. What is written before the
            // swap lands is referenced by nothing until it does: garbage at worst,
            // never a lost commit.
            let (tip, speculative, mut ahead) = if attempt == 1 {
                let (tip, flushed, ahead) = futures::join!(
                    ctx.refs.branch_for_commit(&branch),
                    flush(Arc::clone(&base), Arc::clone(&changes), rebases),
                    ctx.refs.save_copy_ahead()
                );
                // A copy that failed to save is saved again by the update.
                let ahead = ahead.ok().flatten();
                let tip = match tip {
                    Ok(tip) => tip,
                    Err(e) => {
                        ctx.refs.drop_copy(ahead).await;
                        return Err(e);
                    }
                };
                let flushed = match flushed {
                    Ok(flushed) => flushed,
                    // An object of the base is gone: when the branch moved on,
                    // maintenance may have dropped it (expiry of the base, then
                    // garbage collection of a manifest only the base used). The next
                    // attempt reads the tip anew and rebases onto it when it moved;
                    // when it did not, its flush reports the missing object.
                    Err(Error::Storage(crate::storage::StorageError::NotFound { .. })) => {
                        ctx.refs.drop_copy(ahead).await;
                        continue;
                    }
                    Err(e) => {
                        ctx.refs.drop_copy(ahead).await;
                        return Err(e);
                    }
                };
                (tip, Some(flushed), ahead)
            } else {
                (ctx.refs.branch(&branch).await?, None, None)
            };
            if let Some(tried) = refused.take() {
                match tried.landed(assets, tip.snapshot).await {
                    Some(true) => return Ok(tried.snapshot),
                    Some(false) => tried.discard(assets).await,
                    None => {}
                }
            }
            let next = if tip.snapshot == base.id {
                match speculative {
                    Some(flushed) => flushed,
                    None => flush(Arc::clone(&base), Arc::clone(&changes), rebases).await?,
                }
            } else {
                // The copy saved ahead goes too: a rebase may fail, and the next
                // attempt's update saves its own.
                let unused_copy = ctx.refs.drop_copy(ahead.take());
                match speculative {
                    Some(unused) => futures::join!(unused.discard(assets), unused_copy).0,
                    None => unused_copy.await,
                }
                if !options.rebase {
                    return Err(Error::conflict(&branch, base.id, tip.snapshot, Vec::new()));
                }
                let rebased = rebase::rebase(
                    assets,
                    &branch,
                    &base,
                    &changes,
                    tip.snapshot,
                    options.solver.as_ref(),
                )
                .await?;
                base = rebased.tip;
                changes = rebased.changes;
                rebases += 1;
                flush(Arc::clone(&base), Arc::clone(&changes), rebases).await?
            };
            let update = ctx
                .refs
                .commit(&branch, &tip, &next.snapshot, None, ahead)
                .await;
            if matches!(update, Ok(RefUpdate::Lost)) && attempt < options.max_attempts {
                refused = Some(next);
                tokio::time::sleep(backoff(&options, attempt)).await;
                continue;
            }
            let base_id = base.id;
            return next
                .settle(assets, &ctx.refs, &branch, update, |now| {
                    Error::conflict(&branch, base_id, now, Vec::new())
                })
                .await;
        }
    }

    /// Moves a writable session's base to the tip of its branch, keeping its changes,
    /// when they do not conflict with the commits made since
    /// ([`Session::rebase_with`] a [`ConflictDetector`]).
    ///
    /// # Errors
    /// As [`Session::rebase_with`].
    pub async fn rebase(&self) -> Result<()> {
        self.rebase_with(&ConflictDetector).await
    }

    /// Moves a writable session's base to the tip of its branch, keeping its changes
    /// as `solver` resolves their conflicts with the commits made since.
    ///
    /// # Errors
    /// [`Error::ReadOnlySession`], [`Error::ForkCannotCommit`] (a fork has no branch);
    /// [`Error::Conflict`] with the conflicts `solver` left; storage and format errors.
    pub async fn rebase_with(&self, solver: &dyn ConflictSolver) -> Result<()> {
        let branch = self.commit_branch()?;
        let ctx = &self.inner.ctx;
        let tip = ctx.refs.branch(&branch).await?.snapshot;
        let (base, changes) = {
            let state = self.read();
            (Arc::clone(&state.base), Arc::clone(&state.changes))
        };
        if tip == base.id {
            return Ok(());
        }
        let rebased = rebase::rebase(&ctx.assets, &branch, &base, &changes, tip, solver).await?;
        let landed = {
            let mut state = self.write();
            let unchanged = Arc::ptr_eq(&state.changes, &changes);
            if unchanged {
                state.base = rebased.tip;
                state.changes = rebased.changes;
            }
            unchanged
        };
        if landed {
            Ok(())
        } else {
            // Changed meanwhile: the rebase was judged on other changes; try again.
            Box::pin(self.rebase_with(solver)).await
        }
    }
}

/// Records in commit metadata that the commit rebased `rebases` times, where Icechunk
/// 2.x does: `{"__icechunk": {"rebase_attempts": n}}`, keeping any other key the
/// caller put under `__icechunk` (a non-object value there is replaced).
fn record_rebase_attempts(metadata: &mut BTreeMap<String, serde_json::Value>, rebases: u32) {
    let entry = metadata
        .entry("__icechunk".to_string())
        .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
    if !entry.is_object() {
        *entry = serde_json::Value::Object(serde_json::Map::new());
    }
    if let serde_json::Value::Object(map) = entry {
        map.insert("rebase_attempts".to_string(), rebases.into());
    }
}

/// Exponential backoff with full jitter for attempt `n` (1-based).
fn backoff(options: &CommitOptions, attempt: u32) -> Duration {
    let exp = options
        .initial_backoff
        .saturating_mul(1u32 << attempt.min(16))
        .min(options.max_backoff);
    let nanos = u64::try_from(exp.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rand::random_range(0..=nanos))
}

/// The ref of a native chunk object `id` written whole (`length` bytes).
fn native_payload(id: ChunkId, length: u64) -> ChunkPayload {
    ChunkPayload::Native(NativeChunkRef {
        id,
        offset: 0,
        length,
    })
}
