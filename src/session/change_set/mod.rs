//! The change set of a writable session: groups and arrays created, updated and
//! deleted, and chunk refs written or deleted, not yet committed.

mod chunks;
pub(crate) mod wire;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;

pub use chunks::ArrayChunks;
use chunks::Interner;

use crate::format::manifest::{ChunkPayload, ChunkPayloadRef};
use crate::format::snapshot::{ArrayData, DimensionShape, NodeData, NodeSnapshot};
use crate::format::transaction_log::TransactionLog;
use crate::format::{ChunkIndices, NodeId, NodePath, SnapshotId};

/// What defines an array besides its chunks: its `zarr.json` bytes plus the shape,
/// chunk shape and dimension names extracted from them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayDefinition {
    /// Array length (elements) and number of chunks per dimension.
    pub shape: Vec<DimensionShape>,
    /// Dimension names, if any.
    pub dimension_names: Option<Vec<Option<String>>>,
    /// The `zarr.json` bytes.
    pub user_data: Bytes,
}

/// A node created in this session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NewNode {
    /// A group with its `zarr.json` bytes.
    Group(Bytes),
    /// An array.
    Array(ArrayDefinition),
}

impl NewNode {
    /// The node snapshot of this new node with id `id` at `path` (no manifests yet).
    pub fn snapshot(&self, id: NodeId, path: &NodePath) -> NodeSnapshot {
        let (user_data, node_data) = match self {
            NewNode::Group(ud) => (ud.clone(), NodeData::Group),
            NewNode::Array(def) => (
                def.user_data.clone(),
                NodeData::Array(ArrayData {
                    shape: def.shape.clone(),
                    dimension_names: def.dimension_names.clone(),
                    manifests: Vec::new(),
                }),
            ),
        };
        NodeSnapshot {
            id,
            path: path.clone(),
            user_data,
            node_data,
        }
    }
}

/// Uncommitted changes, keyed by node id (and by path for new nodes).
///
/// Chunk changes are stored compactly ([`ArrayChunks`]): virtual refs into the same
/// object share one interned copy of its location and checksum, so a change set of
/// 10^7 virtual refs into a few files takes about `8 × rank + 32` bytes per ref.
/// Interning is invisible: refs read back as they were set, and change sets compare
/// by value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeSet {
    new_nodes: BTreeMap<NodePath, (NodeId, NewNode)>,
    /// Paths of `new_nodes` by id, for constant-time [`ChangeSet::is_new`].
    new_ids: HashMap<NodeId, NodePath>,
    updated_groups: HashMap<NodeId, Bytes>,
    updated_arrays: HashMap<NodeId, ArrayDefinition>,
    deleted_groups: BTreeMap<NodeId, NodePath>,
    deleted_arrays: BTreeMap<NodeId, NodePath>,
    chunks: BTreeMap<NodeId, ArrayChunks>,
    /// The shared locations of the virtual refs in `chunks`.
    sources: Interner,
}

impl ChangeSet {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.new_nodes.is_empty()
            && self.updated_groups.is_empty()
            && self.updated_arrays.is_empty()
            && self.deleted_groups.is_empty()
            && self.deleted_arrays.is_empty()
            && self.chunks.values().all(ArrayChunks::is_empty)
    }

    /// Records a new node.
    pub(crate) fn add_node(&mut self, path: NodePath, id: NodeId, node: NewNode) {
        if let Some((old, _)) = self.new_nodes.insert(path.clone(), (id, node)) {
            self.new_ids.remove(&old);
        }
        self.new_ids.insert(id, path);
    }

    /// The node created at `path` in this session, if any.
    pub fn new_node(&self, path: &NodePath) -> Option<&(NodeId, NewNode)> {
        self.new_nodes.get(path)
    }

    /// Forgets the node created at `path` (with its chunk changes), as if it had never
    /// been added; its children, if any, stay.
    pub(crate) fn forget_new_node(&mut self, path: &NodePath) {
        if let Some((id, _)) = self.new_nodes.remove(path) {
            self.new_ids.remove(&id);
            self.chunks.remove(&id);
        }
    }

    /// Nodes created in this session, by path.
    pub fn new_nodes(&self) -> &BTreeMap<NodePath, (NodeId, NewNode)> {
        &self.new_nodes
    }

    /// Whether node `id` was created in this session.
    pub fn is_new(&self, id: &NodeId) -> bool {
        self.new_ids.contains_key(id)
    }

    /// The node created in this session with id `id`, if any.
    pub fn new_node_by_id(&self, id: &NodeId) -> Option<&NewNode> {
        let path = self.new_ids.get(id)?;
        self.new_nodes.get(path).map(|(_, n)| n)
    }

    /// The new `zarr.json` of existing group `id`, if this session changed it.
    pub fn updated_group(&self, id: &NodeId) -> Option<&Bytes> {
        self.updated_groups.get(id)
    }

    /// The new definition of existing array `id`, if this session changed it.
    pub fn updated_array(&self, id: &NodeId) -> Option<&ArrayDefinition> {
        self.updated_arrays.get(id)
    }

    /// Forgets the chunk changes of array `id` at `chunks` (the committed refs stay).
    pub(crate) fn drop_chunk_changes(&mut self, id: &NodeId, chunks: &[ChunkIndices]) {
        if let Some(m) = self.chunks.get_mut(id) {
            m.remove_all(chunks);
        }
    }

    /// Applies `other`'s changes on top of these, as if they had been made here
    /// after these (how a fork's changes are merged into the session it came from):
    /// deletions, then new nodes, then metadata updates, then chunk changes.
    pub(crate) fn absorb(&mut self, other: &ChangeSet) {
        for (id, path, is_group) in other.deleted_nodes() {
            self.delete_node(path, *id, is_group);
        }
        for (path, (id, node)) in &other.new_nodes {
            self.add_node(path.clone(), *id, node.clone());
        }
        for (id, ud) in &other.updated_groups {
            match self.new_ids.get(id).cloned() {
                Some(path) => self.update_group(&path, *id, ud.clone()),
                None => {
                    self.updated_groups.insert(*id, ud.clone());
                }
            }
        }
        for (id, def) in &other.updated_arrays {
            match self.new_ids.get(id).cloned() {
                Some(path) => self.update_array(&path, *id, def.clone()),
                None => {
                    self.updated_arrays.insert(*id, def.clone());
                }
            }
        }
        for (id, chunks) in &other.chunks {
            let mine = self.chunks.entry(*id).or_default();
            for (index, entry) in chunks.entries() {
                mine.insert(index.to_vec(), self.sources.adopt(entry));
            }
        }
    }

    /// Number of chunk changes (writes and deletions) over all arrays.
    pub fn num_chunk_changes(&self) -> usize {
        self.chunks.values().map(ArrayChunks::len).sum()
    }

    /// Replaces a group's `zarr.json`.
    pub(crate) fn update_group(&mut self, path: &NodePath, id: NodeId, user_data: Bytes) {
        match self.new_nodes.get_mut(path) {
            Some((nid, NewNode::Group(g))) if *nid == id => *g = user_data,
            _ => {
                self.updated_groups.insert(id, user_data);
            }
        }
    }

    /// Replaces an array's definition.
    pub(crate) fn update_array(&mut self, path: &NodePath, id: NodeId, def: ArrayDefinition) {
        match self.new_nodes.get_mut(path) {
            Some((nid, NewNode::Array(a))) if *nid == id => *a = def,
            _ => {
                self.updated_arrays.insert(id, def);
            }
        }
    }

    /// The committed `node` as these changes leave it (new `zarr.json`, shape and
    /// dimension names applied); `None` when it was deleted.
    pub fn apply(&self, node: &NodeSnapshot) -> Option<NodeSnapshot> {
        if self.is_deleted(&node.id) {
            return None;
        }
        let mut node = node.clone();
        match &mut node.node_data {
            NodeData::Group => {
                if let Some(ud) = self.updated_groups.get(&node.id) {
                    node.user_data = ud.clone();
                }
            }
            NodeData::Array(a) => {
                if let Some(def) = self.updated_arrays.get(&node.id) {
                    node.user_data = def.user_data.clone();
                    a.shape = def.shape.clone();
                    a.dimension_names = def.dimension_names.clone();
                }
            }
        }
        Some(node)
    }

    /// Deletes a node (group or array) with its chunk changes. Deleting a node created
    /// in this session forgets it; deleting a committed node records the deletion.
    pub(crate) fn delete_node(&mut self, path: &NodePath, id: NodeId, is_group: bool) {
        self.chunks.remove(&id);
        self.updated_groups.remove(&id);
        self.updated_arrays.remove(&id);
        if matches!(self.new_nodes.get(path), Some((nid, _)) if *nid == id) {
            self.new_nodes.remove(path);
            self.new_ids.remove(&id);
            return;
        }
        if is_group {
            self.deleted_groups.insert(id, path.clone());
        } else {
            self.deleted_arrays.insert(id, path.clone());
        }
    }

    /// Whether committed node `id` was deleted in this session.
    pub fn is_deleted(&self, id: &NodeId) -> bool {
        self.deleted_groups.contains_key(id) || self.deleted_arrays.contains_key(id)
    }

    /// Sets (`Some`) or deletes (`None`) the chunk ref of array `id` at `index`.
    pub(crate) fn set_chunk(
        &mut self,
        id: NodeId,
        index: ChunkIndices,
        payload: Option<ChunkPayload>,
    ) {
        let entry = self.sources.entry(payload);
        self.chunks.entry(id).or_default().insert(index, entry);
    }

    /// The chunk change of array `id` at `index`: `Some(None)` means deleted.
    pub fn chunk(&self, id: &NodeId, index: &[u64]) -> Option<Option<ChunkPayloadRef<'_>>> {
        self.chunks.get(id).and_then(|m| m.get(index))
    }

    /// All chunk changes of array `id`, sorted by index.
    pub fn array_chunks(&self, id: &NodeId) -> Option<&ArrayChunks> {
        self.chunks.get(id)
    }

    /// Ids of arrays with chunk changes.
    pub fn arrays_with_chunk_changes(&self) -> impl Iterator<Item = &NodeId> {
        self.chunks
            .iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(id, _)| id)
    }

    /// Ids of existing groups with a new `zarr.json`.
    pub fn updated_group_ids(&self) -> impl Iterator<Item = &NodeId> {
        self.updated_groups.keys()
    }

    /// Ids of existing arrays with a new definition.
    pub fn updated_array_ids(&self) -> impl Iterator<Item = &NodeId> {
        self.updated_arrays.keys()
    }

    /// Deleted committed nodes: (id, path, is_group).
    pub fn deleted_nodes(&self) -> impl Iterator<Item = (&NodeId, &NodePath, bool)> {
        self.deleted_groups
            .iter()
            .map(|(id, p)| (id, p, true))
            .chain(self.deleted_arrays.iter().map(|(id, p)| (id, p, false)))
    }

    /// The transaction log recording these changes for snapshot `id`.
    pub fn transaction_log(&self, id: SnapshotId) -> TransactionLog {
        let mut log = self.transaction_log_of_nodes(id);
        for (nid, chunks) in &self.chunks {
            if !chunks.is_empty() {
                log.updated_chunks.insert(
                    *nid,
                    chunks.keys().map(<[u64]>::to_vec).collect::<BTreeSet<_>>(),
                );
            }
        }
        log
    }

    /// The chunk indices these changes write or delete, by array (node id order, each
    /// sorted; arrays without changes left out): the `updated_chunks` of
    /// [`ChangeSet::transaction_log`], without copying them.
    pub fn updated_chunks(&self) -> impl Iterator<Item = (NodeId, &ArrayChunks)> + '_ {
        self.chunks
            .iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(id, m)| (*id, m))
    }

    /// [`ChangeSet::transaction_log`] without its `updated_chunks` (see
    /// [`ChangeSet::updated_chunks`]).
    pub fn transaction_log_of_nodes(&self, id: SnapshotId) -> TransactionLog {
        let mut log = TransactionLog::new(id);
        for (nid, node) in self.new_nodes.values() {
            match node {
                NewNode::Group(_) => log.new_groups.insert(*nid),
                NewNode::Array(_) => log.new_arrays.insert(*nid),
            };
        }
        log.updated_groups = self.updated_groups.keys().copied().collect();
        log.updated_arrays = self.updated_arrays.keys().copied().collect();
        log.deleted_groups = self.deleted_groups.keys().copied().collect();
        log.deleted_arrays = self.deleted_arrays.keys().copied().collect();
        log
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::manifest::{Checksum, VirtualChunkRef};
    use crate::format::SpecVersion;

    /// Change sets compare by value, whatever order their chunk refs' locations
    /// were interned in.
    #[test]
    fn change_sets_compare_by_value_whatever_the_interning_order() {
        let id = NodeId::new([4; 8]);
        let refs: Vec<(ChunkIndices, Option<ChunkPayload>)> = (0..300u64)
            .map(|j| {
                let payload = (j % 7 != 0).then(|| {
                    ChunkPayload::Virtual(VirtualChunkRef {
                        location: format!("s3://bucket/file_{}.nc", j % 5),
                        offset: j * 9,
                        length: 9,
                        checksum: None,
                    })
                });
                (vec![0, j], payload)
            })
            .collect();
        let (mut forward, mut reversed) = (ChangeSet::default(), ChangeSet::default());
        for (idx, payload) in &refs {
            forward.set_chunk(id, idx.clone(), payload.clone());
        }
        for (idx, payload) in refs.iter().rev() {
            reversed.set_chunk(id, idx.clone(), payload.clone());
        }
        assert!(forward == reversed, "change sets differ by interning order");
        assert_eq!(forward.num_chunk_changes(), 300);
        reversed.set_chunk(id, vec![0, 1], None);
        assert!(
            forward != reversed,
            "a different ref is a different change set"
        );
    }

    #[test]
    fn a_log_encoded_from_the_change_set_is_the_same_file() {
        let mut c = ChangeSet::default();
        let (a, b) = (NodeId::new([1; 8]), NodeId::new([2; 8]));
        for i in (0..3000u64).rev() {
            let v = ChunkPayload::Virtual(VirtualChunkRef {
                location: format!("s3://bucket/prefix/file_{}.nc", i % 3),
                offset: i * 10,
                length: 10,
                checksum: Some(Checksum::ETag("e".into())),
            });
            c.set_chunk(a, vec![i / 50, i % 50], Some(v));
            c.set_chunk(
                b,
                vec![i],
                (i % 5 != 0).then(|| ChunkPayload::Inline(Bytes::new())),
            );
        }
        c.set_chunk(a, vec![7], None);
        c.deleted_arrays
            .insert(NodeId::new([3; 8]), NodePath::root());
        let id = SnapshotId::new([9; 12]);
        for spec in [SpecVersion::V1, SpecVersion::V2] {
            let full = c.transaction_log(id).encode_at(spec, 3).unwrap();
            let chunks = c.updated_chunks().map(|(id, m)| (id, m.keys()));
            let streamed = c
                .transaction_log_of_nodes(id)
                .encode_with_chunks(spec, 3, chunks, (10, 320))
                .unwrap();
            assert_eq!(full, streamed);
            let decoded = TransactionLog::decode(&streamed).unwrap();
            assert_eq!(decoded, c.transaction_log(id));
            assert_eq!(decoded.updated_chunks[&a].len(), 3001);
        }
    }
}
