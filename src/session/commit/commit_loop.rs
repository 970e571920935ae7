//! Committing a session: [`CommitOptions`], the commit loop of
//! [`Session::commit_with`] (flush, commit point, rebase and retry with back-off),
//! [`Session::amend`], [`Session::rewrite_manifests`], and [`Session::rebase_with`]
//! (moving the session's base to its branch tip without committing).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::format::snapshot::Snapshot;
use crate::format::SnapshotId;
use crate::refs::RefUpdate;

use crate::session::change_set::ChangeSet;
use crate::session::{
    commit::flush, commit::landing, commit::rebase, ConflictDetector, ConflictSolver, Mode, Session,
};

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

impl Session {
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
    pub(in crate::session) fn commit_branch(&self) -> Result<String> {
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
        self.load().await?;
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
        self.load().await?;
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
            let snapshot = flush::flush(flush::FlushRequest {
                assets: &ctx.assets,
                layouts: &ctx.manifest_layouts,
                packs: self.packs(),
                base: &base,
                changes: &changes,
                new_id: SnapshotId::random(),
                message,
                metadata,
                method: flush::CommitMethod::Amend(&previous),
            })
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
        self.load().await?;
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
            let snapshot = flush::flush(flush::FlushRequest {
                assets: &ctx.assets,
                layouts: &ctx.manifest_layouts,
                packs: self.packs(),
                base: &base,
                changes: &changes,
                new_id: SnapshotId::random(),
                message,
                metadata,
                method: flush::CommitMethod::RewriteManifests(previous.as_deref()),
            })
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
    pub(in crate::session) async fn commit_guarded<'s, F, Fut>(
        &'s self,
        commit: F,
    ) -> Result<SnapshotId>
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
                let snapshot = flush::flush(flush::FlushRequest {
                    assets,
                    layouts: &ctx.manifest_layouts,
                    packs: self.packs(),
                    base: &base,
                    changes: &changes,
                    new_id: SnapshotId::random(),
                    message,
                    metadata,
                    method: flush::CommitMethod::NewCommit,
                })
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
                // The `repo` object as last read is known stale (its compare-and-swap
                // was refused): one GET, no re-validating HEAD first.
                (ctx.refs.branch_fresh(&branch).await?, None, None)
            };
            // Objects of attempts that will never land, and copies no update will use,
            // are deleted beside this attempt's commit point, not before it.
            let mut garbage: Vec<landing::Attempt> = Vec::new();
            let mut unused_copies = Vec::new();
            if let Some(tried) = refused.take() {
                match tried.landed(assets, tip.snapshot).await {
                    Some(true) => return Ok(tried.snapshot),
                    Some(false) => garbage.push(tried),
                    None => {}
                }
            }
            let next = if tip.snapshot == base.id {
                match speculative {
                    Some(flushed) => Ok(flushed),
                    None => flush(Arc::clone(&base), Arc::clone(&changes), rebases).await,
                }
            } else {
                // The copy saved ahead goes too: a rebase may fail, and the next
                // attempt's update saves its own.
                unused_copies.push(ahead.take());
                garbage.extend(speculative);
                let rebased = if options.rebase {
                    rebase::rebase(
                        assets,
                        &branch,
                        &base,
                        &changes,
                        tip.snapshot,
                        options.solver.as_ref(),
                    )
                    .await
                } else {
                    Err(Error::conflict(&branch, base.id, tip.snapshot, Vec::new()))
                };
                match rebased {
                    Err(e) => Err(e),
                    Ok(rebased) => {
                        base = rebased.tip;
                        changes = rebased.changes;
                        rebases += 1;
                        // As on the first attempt, the copy of the `repo` object just
                        // read goes out beside the snapshot writes (one round trip less
                        // per retry).
                        let (flushed, copy) = futures::join!(
                            flush(Arc::clone(&base), Arc::clone(&changes), rebases),
                            ctx.refs.save_copy_ahead()
                        );
                        ahead = copy.ok().flatten();
                        flushed
                    }
                }
            };
            let next = match next {
                Ok(next) => next,
                Err(e) => {
                    unused_copies.push(ahead.take());
                    collect_garbage(ctx, garbage, unused_copies).await;
                    return Err(e);
                }
            };
            let (update, ()) = futures::join!(
                ctx.refs.commit(&branch, &tip, &next.snapshot, None, ahead),
                collect_garbage(ctx, garbage, unused_copies)
            );
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
        self.load().await?;
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

/// Deletes the objects of commit attempts that will never land and the `repo`
/// copies no update will use (best effort, all at once).
async fn collect_garbage(
    ctx: &crate::session::context::SessionContext,
    attempts: Vec<landing::Attempt>,
    copies: Vec<Option<crate::refs::repo_object::SavedCopy>>,
) {
    let assets = &ctx.assets;
    futures::join!(
        futures::future::join_all(attempts.into_iter().map(|a| a.discard(assets))),
        futures::future::join_all(copies.into_iter().map(|c| ctx.refs.drop_copy(c)))
    );
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
