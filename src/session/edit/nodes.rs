//! The session's node tree: looking nodes up with uncommitted changes applied, and
//! editing it (adding, updating and deleting groups and arrays).

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::format::snapshot::NodeSnapshot;
use crate::format::{NodeId, NodePath};

use crate::session::change_set::{ArrayDefinition, NewNode};
use crate::session::{overlay, Node, Session, State};

impl Session {
    pub(in crate::session) fn node_in(state: &State, path: &NodePath) -> Option<NodeSnapshot> {
        match state.changes.new_node(path) {
            Some((id, new)) => Some(new.snapshot(*id, path)),
            None => state.changes.apply(state.base.nodes.get(path)?),
        }
    }

    /// The node at `path`, with uncommitted changes applied.
    ///
    /// # Errors
    /// [`Error::NodeNotFound`]; [`Error::SessionNotLoaded`] (see [`Session::load`]).
    pub fn get_node(&self, path: &NodePath) -> Result<Node> {
        self.loaded()?;
        Self::node_in(&self.read(), path).ok_or_else(|| Error::NodeNotFound { path: path.clone() })
    }

    /// Every node, sorted by path, with uncommitted changes applied.
    ///
    /// # Errors
    /// [`Error::SessionNotLoaded`] (see [`Session::load`]).
    pub fn list_nodes(&self) -> Result<Vec<Node>> {
        self.loaded()?;
        let state = self.read();
        Ok(overlay::apply_node_changes(&state.base, &state.changes)
            .into_values()
            .collect())
    }

    /// Nodes at or below `path`, sorted by path.
    ///
    /// # Errors
    /// As [`Session::list_nodes`].
    pub fn list_nodes_under(&self, path: &NodePath) -> Result<Vec<Node>> {
        Ok(self
            .list_nodes()?
            .into_iter()
            .filter(|n| n.path.starts_with(path))
            .collect())
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
        self.loaded()?;
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
        self.loaded()?;
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
        self.loaded()?;
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
        self.loaded()?;
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
        self.loaded()?;
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
}
