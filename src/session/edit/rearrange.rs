//! Rearrange sessions (spec 2): moving and renaming nodes, as Icechunk 2.x's
//! `Repository::rearrange_session` and `Session::move_node` do.
//!
//! A rearrange session only moves: each [`Session::move_node`] re-keys the session's
//! view of its base snapshot (a group moves with everything under it; node ids,
//! metadata and chunks stay), and the commit writes a snapshot of that view whose
//! transaction log lists every node whose path changed in `moved_nodes`, sorted by
//! destination. Moves cannot be rebased (Icechunk: `MoveOperationCannotBeRebased`):
//! when the branch moved, the commit fails with [`Conflict::MovesCannotBeRebased`],
//! and sessions rebasing over a commit that moved nodes fail the same way.
//!
//! Spec: `../shared/docs/icechunk-format-notes.md` §2.4 (`moved_nodes`), §5.1.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::error::{Conflict, Error, Result};
use crate::format::snapshot::{NodeSnapshot, Snapshot};
use crate::format::transaction_log::MovedNode;
use crate::format::{NodeId, NodePath, SnapshotId};
use crate::session::change_set::ChangeSet;
use crate::session::CommitOptions;
use crate::session::{commit::flush, Mode, Session};

/// `snapshot` with node `from` (and everything under it) moved to `to`.
///
/// # Errors
/// [`Error::NodeNotFound`] for a missing `from`; [`Error::MoveOverwrite`] when `to`
/// exists; [`Error::MoveParentNotGroup`] when `to`'s parent is missing or an array;
/// [`Error::InvalidMove`] for the root or a move into the node itself or below it.
fn moved_view(snapshot: &Snapshot, from: &NodePath, to: &NodePath) -> Result<Snapshot> {
    let invalid = |reason: &str| Error::InvalidMove {
        from: from.clone(),
        to: to.clone(),
        reason: reason.to_string(),
    };
    // Every node is under the root: moving it is a move into its own descendant,
    // as Icechunk words it.
    if from.is_root() || to.starts_with(from) {
        return Err(invalid(
            "a node cannot move into itself or its own descendant",
        ));
    }
    if !snapshot.nodes.contains_key(from) {
        return Err(Error::NodeNotFound { path: from.clone() });
    }
    if snapshot.nodes.contains_key(to) {
        return Err(Error::MoveOverwrite { path: to.clone() });
    }
    // `to` is not the root here (the root always exists).
    let parent = to.parent().unwrap_or_else(NodePath::root);
    match snapshot.nodes.get(&parent) {
        Some(n) if n.is_group() => {}
        found => {
            return Err(Error::MoveParentNotGroup {
                to: to.clone(),
                parent,
                missing: found.is_none(),
            })
        }
    }
    let mut nodes = BTreeMap::new();
    for (path, node) in &snapshot.nodes {
        let new_path = if path.starts_with(from) {
            let rest = &path.as_str()[from.as_str().len()..];
            NodePath::new(&format!("{}{rest}", to.as_str())).map_err(|e| invalid(&e.to_string()))?
        } else {
            path.clone()
        };
        let mut node = node.clone();
        node.path = new_path.clone();
        nodes.insert(new_path, node);
    }
    Ok(Snapshot {
        nodes,
        ..snapshot.clone()
    })
}

/// Every node whose path differs between `before` and `after` (matched by node
/// id), sorted by destination.
fn net_moves(before: &Snapshot, after: &Snapshot) -> Vec<MovedNode> {
    let old: HashMap<NodeId, &NodeSnapshot> = before.nodes.values().map(|n| (n.id, n)).collect();
    let mut moves: Vec<MovedNode> = after
        .nodes
        .values()
        .filter_map(|n| {
            let o = old.get(&n.id)?;
            (o.path != n.path).then(|| MovedNode {
                from: o.path.clone(),
                to: n.path.clone(),
                node_id: n.id,
                kind: n.kind(),
            })
        })
        .collect();
    moves.sort_by(|a, b| a.to.cmp(&b.to));
    moves
}

impl Session {
    /// A rearrange session on `branch`, whose tip is `base`.
    pub(crate) fn rearrange(
        ctx: Arc<crate::session::context::SessionContext>,
        base: Arc<Snapshot>,
        branch: String,
    ) -> Self {
        Self::with_mode(ctx, base, Mode::Rearrange(branch), ChangeSet::default())
    }

    /// Moves (or renames) node `from` to `to`, with everything under it: node ids,
    /// metadata and chunks stay. Only in a rearrange session
    /// ([`Repository::rearrange_session`](crate::Repository::rearrange_session)); the
    /// session reads the moved tree at once, and the commit records the moves.
    ///
    /// # Errors
    /// [`Error::NotARearrangeSession`]; [`Error::NodeNotFound`]; [`Error::MoveOverwrite`];
    /// [`Error::MoveParentNotGroup`] when `to`'s parent is missing or an array;
    /// [`Error::InvalidMove`] for the root or a move into the node itself or below it.
    pub fn move_node(&self, from: &NodePath, to: &NodePath) -> Result<()> {
        if !matches!(self.inner.mode, Mode::Rearrange(_)) {
            return Err(Error::NotARearrangeSession);
        }
        let mut state = self.write();
        let moved = moved_view(&state.base, from, to)?;
        if state.rearranged_from.is_none() {
            state.rearranged_from = Some(Arc::clone(&state.base));
        }
        state.base = Arc::new(moved);
        Ok(())
    }

    /// The moves a rearrange session made so far, sorted by destination.
    pub fn moves(&self) -> Vec<MovedNode> {
        let state = self.read();
        match &state.rearranged_from {
            Some(original) => net_moves(original, &state.base),
            None => Vec::new(),
        }
    }

    /// The commit of a rearrange session: a snapshot of the moved tree whose
    /// transaction log lists the moves, published only if `branch` still points at
    /// the session's base (moves are never rebased).
    pub(in crate::session) async fn commit_moves(
        &self,
        branch: &str,
        message: &str,
        metadata: BTreeMap<String, serde_json::Value>,
        options: CommitOptions,
    ) -> Result<SnapshotId> {
        let _one_at_a_time = self.inner.commit_lock.lock().await;
        let (view, original, moved) = self.rearranged();
        // Moves that cancel out still make a commit (with no moves), as in Icechunk.
        if !moved && !options.allow_empty {
            return Err(Error::NoChangesToCommit);
        }
        let moves = net_moves(&original, &view);
        let ctx = &self.inner.ctx;
        let tip = ctx.refs.branch(branch).await?;
        let refused = |now: SnapshotId| {
            Error::conflict(
                branch,
                original.id,
                now,
                vec![Conflict::MovesCannotBeRebased { snapshot: now }],
            )
        };
        if tip.snapshot != original.id {
            return Err(refused(tip.snapshot));
        }
        let landing = Landing {
            branch,
            tip: &tip,
            view: &view,
            amended: None,
        };
        self.land(
            landing,
            message,
            metadata,
            flush::CommitMethod::Moves(moves),
            refused,
        )
        .await
    }

    /// Writes the snapshot of the moved `view` with `method`, moves `branch` from
    /// `tip` to it (compare-and-swap; `amended` names the snapshot an amend
    /// replaces) and, once it landed, continues the session from it with no moves
    /// pending. `refused` makes the error for a branch that moved meanwhile.
    async fn land(
        &self,
        landing: Landing<'_>,
        message: &str,
        metadata: BTreeMap<String, serde_json::Value>,
        method: flush::CommitMethod<'_>,
        refused: impl Fn(SnapshotId) -> Error,
    ) -> Result<SnapshotId> {
        let ctx = &self.inner.ctx;
        let snapshot = flush::flush(flush::FlushRequest {
            assets: &ctx.assets,
            layouts: &ctx.manifest_layouts,
            packs: self.packs(),
            base: landing.view,
            changes: &Arc::new(ChangeSet::default()),
            new_id: SnapshotId::random(),
            message,
            metadata,
            method,
        })
        .await?;
        let update = ctx
            .refs
            .commit(
                landing.branch,
                landing.tip,
                &snapshot,
                landing.amended,
                None,
            )
            .await;
        let tried = crate::session::commit::landing::Attempt {
            snapshot,
            base: Arc::clone(landing.view),
        };
        let snapshot = tried
            .settle(&ctx.assets, &ctx.refs, landing.branch, update, refused)
            .await?;
        let mut state = self.write();
        state.base = Arc::clone(&snapshot);
        state.rearranged_from = None;
        Ok(snapshot.id)
    }

    /// The session's moved view, the snapshot before its first move (the view itself
    /// when nothing moved) and whether anything moved.
    fn rearranged(&self) -> (Arc<Snapshot>, Arc<Snapshot>, bool) {
        let state = self.read();
        let original = state.rearranged_from.clone();
        let moved = original.is_some();
        let view = Arc::clone(&state.base);
        (Arc::clone(&view), original.unwrap_or(view), moved)
    }

    /// The amend of a rearrange session (Icechunk 2.3.0's `amend` after moves): the
    /// moved tree replaces the branch tip, whose parent becomes the new snapshot's
    /// parent, and the transaction log holds the tip's changes with its moves and
    /// the session's composed (`a -> b` amended by `b -> c` records `a -> c`; a move
    /// undone records nothing). Published only if `branch` still points at the
    /// session's base. Moves that cancel out still amend (to change the message).
    pub(in crate::session) async fn amend_moves(
        &self,
        branch: &str,
        message: &str,
        metadata: BTreeMap<String, serde_json::Value>,
    ) -> Result<SnapshotId> {
        let _one_at_a_time = self.inner.commit_lock.lock().await;
        let (view, original, _) = self.rearranged();
        if original.parent_id.is_none() {
            return Err(Error::NoAmendForInitialCommit);
        }
        let ctx = &self.inner.ctx;
        let tip = ctx.refs.branch(branch).await?;
        let branch_moved = |now| Error::conflict(branch, original.id, now, Vec::new());
        if tip.snapshot != original.id {
            return Err(branch_moved(tip.snapshot));
        }
        let previous = ctx.assets.fetch_transaction_log(&original.id).await?;
        let method = flush::CommitMethod::AmendMoves(&previous, net_moves(&original, &view));
        let landing = Landing {
            branch,
            tip: &tip,
            view: &view,
            amended: Some(original.id),
        };
        self.land(landing, message, metadata, method, branch_moved)
            .await
    }
}

/// Where [`Session::land`] puts a rearrange session's snapshot.
struct Landing<'a> {
    branch: &'a str,
    /// The branch as read before the commit (what the compare-and-swap expects).
    tip: &'a crate::refs::BranchTip,
    /// The moved tree.
    view: &'a Arc<Snapshot>,
    /// For an amend, the snapshot it replaces.
    amended: Option<SnapshotId>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::snapshot::NodeData;

    fn node(path: &str, group: bool) -> (NodePath, NodeSnapshot) {
        let path = NodePath::new(path).unwrap();
        let node = NodeSnapshot {
            id: NodeId::random(),
            path: path.clone(),
            user_data: bytes::Bytes::new(),
            node_data: if group {
                NodeData::Group
            } else {
                NodeData::Array(crate::format::snapshot::ArrayData {
                    shape: Vec::new(),
                    dimension_names: None,
                    manifests: Vec::new(),
                })
            },
        };
        (path, node)
    }

    #[test]
    fn a_group_moves_with_its_subtree_and_moves_are_listed_by_destination() {
        let mut snap = Snapshot::initial(crate::format::SpecVersion::V2);
        snap.nodes = [
            node("/", true),
            node("/a", true),
            node("/a/x", false),
            node("/a/b", true),
            node("/a/b/y", false),
            node("/z", true),
        ]
        .into_iter()
        .collect();
        let p = |s: &str| NodePath::new(s).unwrap();
        let moved = moved_view(&snap, &p("/a"), &p("/z/a2")).unwrap();
        let paths: Vec<&str> = moved.nodes.keys().map(NodePath::as_str).collect();
        assert_eq!(
            paths,
            vec!["/", "/z", "/z/a2", "/z/a2/b", "/z/a2/b/y", "/z/a2/x"]
        );
        let moves = net_moves(&snap, &moved);
        let pairs: Vec<(&str, &str)> = moves
            .iter()
            .map(|m| (m.from.as_str(), m.to.as_str()))
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("/a", "/z/a2"),
                ("/a/b", "/z/a2/b"),
                ("/a/b/y", "/z/a2/b/y"),
                ("/a/x", "/z/a2/x")
            ]
        );
        for (from, to) in [("/a", "/a/b/c"), ("/", "/q")] {
            assert!(matches!(
                moved_view(&snap, &p(from), &p(to)),
                Err(Error::InvalidMove { .. })
            ));
        }
        assert!(matches!(
            moved_view(&snap, &p("/a"), &p("/z")),
            Err(Error::MoveOverwrite { .. })
        ));
        assert!(matches!(
            moved_view(&snap, &p("/a"), &p("/a/x/q")),
            Err(Error::InvalidMove { .. })
        ));
        assert!(matches!(
            moved_view(&snap, &p("/z"), &p("/a/x/q")),
            Err(Error::MoveParentNotGroup { missing: false, .. })
        ));
        assert!(matches!(
            moved_view(&snap, &p("/z"), &p("/nope/q")),
            Err(Error::MoveParentNotGroup { missing: true, .. })
        ));
        assert!(matches!(
            moved_view(&snap, &p("/nope"), &p("/q")),
            Err(Error::NodeNotFound { .. })
        ));
    }
}
