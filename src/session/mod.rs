//! Sessions: a view of one snapshot, read-only (at a branch, tag, snapshot id or time)
//! or writable (on a branch). A writable session records changes in a [`ChangeSet`],
//! reads its own uncommitted changes, and commits them as a new snapshot with
//! optimistic concurrency (rebase-and-retry when the branch moved).
//! [`Session::store`] gives the session as a Zarr store ([`SessionStore`]).
//!
//! Spec: Icechunk specification, "Read from Repository" and "Write New Snapshot".
//!
//! This file holds the session's state, its modes and constructors; the rest is in
//! rooms by job, each public `Session` method in the room of its job:
//! - `commit/`: the commit loop (commit, amend, rewrite of manifests; rebase-and-retry),
//!   `flush` (a change set written as a snapshot), `detached` (`Session::flush`),
//!   `landing`, `rebase`, `conflict` (detection) and `solver` (conflict solvers). The
//!   commit point is `RefStore::commit` in `src/refs/store.rs`.
//! - `chunks/`: chunk refs (`refs`), chunk bytes written (`writes`) and read (`reads`),
//!   the chunk port of one array (`port`).
//! - `edit/`: nodes added, updated, deleted (`nodes`), moved (`rearrange`), chunk refs
//!   shifted or reindexed (`reindex`).
//! - beside them: `change_set/` (uncommitted changes), `overlay` (a snapshot with a
//!   change set applied), `manifest_split` (manifests of bounded size), `context` (what
//!   a session uses of its repository), `store` (the Zarr store view), `fork` (forks
//!   and merges), `diff`.

pub mod change_set;
pub(crate) mod chunks;
pub(crate) mod commit;
pub(crate) mod context;
pub mod diff;
pub(crate) mod edit;
mod fork;
pub(crate) mod manifest_split;
pub(crate) mod overlay;
mod store;

use std::sync::{Arc, RwLock};

use crate::error::{Error, Result};
use crate::format::config::RepositoryConfig;
use crate::format::snapshot::{NodeSnapshot, Snapshot};
use crate::format::SnapshotId;

pub use change_set::{ArrayDefinition, ChangeSet, NewNode};
pub use chunks::port::SessionChunks;
pub(crate) use chunks::reads::payload_len;
pub use chunks::reads::ChunkOutcome;
use chunks::writes::native_payload;
pub use commit::commit_loop::CommitOptions;
pub use commit::solver::{BasicConflictSolver, ConflictDetector, ConflictSolver, VersionSelection};
use context::SessionContext;
pub use diff::Diff;
pub use edit::reindex::ChunkIndexMap;
pub use fork::ForkId;
pub use manifest_split::MAX_REFS_PER_MANIFEST;
use overlay::index_in_bounds;
pub use store::{array_definition, PreparedSet, SessionStore};

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
    /// Set once the base snapshot is read: from the start for sessions opened with
    /// it, by the first [`Session::load`] of one opened without it
    /// ([`Repository::writable_session_lazy`](crate::Repository::writable_session_lazy)).
    base_read: tokio::sync::OnceCell<()>,
    /// Small chunks written several to one chunk object (see `chunks/packs.rs`).
    packs: chunks::packs::Packs,
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

    /// A writable session on `branch`, whose tip is snapshot `id`, which is read on
    /// first use ([`Session::load`]); `spec` is the repository's spec version.
    pub(crate) fn on_branch_lazy(
        ctx: Arc<SessionContext>,
        id: SnapshotId,
        spec: crate::format::SpecVersion,
        branch: String,
    ) -> Self {
        // Never seen: every entry point that reads the base loads the real one first.
        let placeholder = Arc::new(Snapshot {
            id,
            ..Snapshot::initial(spec)
        });
        Self::assemble(
            ctx,
            placeholder,
            Mode::Branch(branch),
            ChangeSet::default(),
            tokio::sync::OnceCell::new(),
        )
    }

    /// A session of `mode` over `base`, read already, holding `changes`.
    fn with_mode(
        ctx: Arc<SessionContext>,
        base: Arc<Snapshot>,
        mode: Mode,
        changes: ChangeSet,
    ) -> Self {
        Self::assemble(
            ctx,
            base,
            mode,
            changes,
            tokio::sync::OnceCell::new_with(Some(())),
        )
    }

    fn assemble(
        ctx: Arc<SessionContext>,
        base: Arc<Snapshot>,
        mode: Mode,
        changes: ChangeSet,
        base_read: tokio::sync::OnceCell<()>,
    ) -> Self {
        let packs = chunks::packs::Packs::new(ctx.packing);
        Session {
            inner: Arc::new(Inner {
                packs,
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
                base_read,
            }),
        }
    }

    /// Reads the base snapshot of a session opened without it
    /// ([`Repository::writable_session_lazy`](crate::Repository::writable_session_lazy),
    /// as Icechunk 2.3.0 opens sessions); a no-op once read and for every other
    /// session. Every asynchronous method calls it first; call it before the
    /// synchronous node methods ([`Session::get_node`], [`Session::add_array`], ...),
    /// which otherwise fail with [`Error::SessionNotLoaded`]. Concurrent calls share
    /// one read; a failed read is tried again by the next call.
    ///
    /// # Errors
    /// [`Error::Storage`] (`NotFound`, naming the key `snapshots/{id}`) when the
    /// branch's tip snapshot is missing; other storage and format errors.
    pub async fn load(&self) -> Result<()> {
        self.inner
            .base_read
            .get_or_try_init(|| async {
                let id = self.read().base.id;
                let snap = match self.inner.ctx.assets.fetch_snapshot(&id).await {
                    Err(Error::SnapshotNotFound { id }) => {
                        return Err(Error::Storage(crate::storage::StorageError::NotFound {
                            key: crate::format::keys::snapshot(&id),
                        }))
                    }
                    other => other?,
                };
                self.inner.ctx.preload_manifests(&snap);
                self.write().base = snap;
                Ok(())
            })
            .await?;
        Ok(())
    }

    /// [`Session::load`] without I/O: loads the base snapshot when it is in the
    /// repository's cache (a session opened on a branch just committed or read);
    /// returns whether the session is loaded. `false` (nothing changed) when the
    /// snapshot must be read, or another task is loading it.
    pub fn load_now(&self) -> bool {
        if self.inner.base_read.initialized() {
            return true;
        }
        let id = self.read().base.id;
        let Some(snap) = self.inner.ctx.assets.cached_snapshot(&id) else {
            return false;
        };
        {
            let mut state = self.write();
            if self.inner.base_read.initialized() {
                return true;
            }
            // The same snapshot a concurrent `load` would set: harmless if one runs.
            state.base = Arc::clone(&snap);
        }
        if self.inner.base_read.set(()).is_err() {
            // Being loaded by another task meanwhile: it sets the same base.
            return self.inner.base_read.initialized();
        }
        self.inner.ctx.preload_manifests(&snap);
        true
    }

    /// Whether the base snapshot is read: [`Error::SessionNotLoaded`] before the
    /// first [`Session::load`] of a session opened without it.
    fn loaded(&self) -> Result<()> {
        if self.inner.base_read.initialized() {
            Ok(())
        } else {
            Err(Error::SessionNotLoaded)
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
    ///
    /// # Errors
    /// [`Error::SessionNotLoaded`] (see [`Session::load`]).
    pub fn snapshot(&self) -> Result<Arc<Snapshot>> {
        self.loaded()?;
        Ok(Arc::clone(&self.read().base))
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

    /// Forgets every uncommitted change. Chunk objects already written become
    /// garbage; the chunk packs not written yet (see [`Session::flush_packs`]) are
    /// dropped, not written, so refs from [`Session::prepare_chunk`] not flushed
    /// before this call must not be recorded after it. While a commit is in
    /// flight, its packs are kept for it. Do not discard while other tasks write to
    /// the session: their writes may be kept or dropped.
    pub fn discard_changes(&self) {
        let mut state = self.write();
        if state.replay.is_none() {
            self.inner.packs.discard();
        }
        state.change(|c| *c = ChangeSet::default());
    }

    fn check_writable(&self) -> Result<()> {
        if self.is_writable() {
            Ok(())
        } else {
            Err(Error::ReadOnlySession)
        }
    }

    /// What the uncommitted changes do, by path (nothing before the first
    /// [`Session::load`] of a session opened without its snapshot: no change can be
    /// made before).
    pub fn status(&self) -> Diff {
        let state = self.read();
        Diff::from_change_set(&state.base, &state.changes)
    }
}
