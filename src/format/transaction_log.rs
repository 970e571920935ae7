//! Transaction log files (`transactions/<snapshot id>`): what one commit changed, by
//! node id. Used for conflict detection on rebase and for diffs.
//!
//! Spec: Icechunk specification, "Transaction logs"; field ids in
//! `../shared/docs/icechunk-format-v1.md`, table `TransactionLog`.

use std::collections::{BTreeMap, BTreeSet};

use flatbuffers::FlatBufferBuilder;

use super::envelope::{self, FileType};
use super::fb::{self, gen};
use super::snapshot::NodeKind;
use super::{ChunkIndices, FormatError, NodeId, NodePath, SnapshotId, SpecVersion};

/// One node's net move in a commit (spec 2, `MoveOperation`): every moved node is
/// listed, descendants of a moved group included.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MovedNode {
    /// The path before the commit.
    pub from: NodePath,
    /// The path after the commit.
    pub to: NodePath,
    /// The node's id (unchanged by the move).
    pub node_id: NodeId,
    /// Group or array.
    pub kind: NodeKind,
}

/// A decoded transaction log. Every set is sorted by node id bytes, as the format
/// requires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionLog {
    /// Equal to the id of the snapshot the commit created.
    pub id: SnapshotId,
    /// Groups created.
    pub new_groups: BTreeSet<NodeId>,
    /// Arrays created.
    pub new_arrays: BTreeSet<NodeId>,
    /// Groups deleted.
    pub deleted_groups: BTreeSet<NodeId>,
    /// Arrays deleted.
    pub deleted_arrays: BTreeSet<NodeId>,
    /// Arrays whose `zarr.json` (shape, attributes, ...) changed.
    pub updated_arrays: BTreeSet<NodeId>,
    /// Groups whose `zarr.json` changed.
    pub updated_groups: BTreeSet<NodeId>,
    /// Chunks written or deleted, by array.
    pub updated_chunks: BTreeMap<NodeId, BTreeSet<ChunkIndices>>,
    /// Nodes moved (spec 2; always empty in spec 1), sorted by destination.
    pub moved_nodes: Vec<MovedNode>,
}

impl TransactionLog {
    /// How many entries the log holds: node ids listed, chunk indices and moves.
    pub fn len(&self) -> usize {
        [
            &self.new_groups,
            &self.new_arrays,
            &self.deleted_groups,
            &self.deleted_arrays,
            &self.updated_arrays,
            &self.updated_groups,
        ]
        .iter()
        .map(|s| s.len())
        .sum::<usize>()
            + self
                .updated_chunks
                .values()
                .map(BTreeSet::len)
                .sum::<usize>()
            + self.moved_nodes.len()
    }

    /// An empty log for snapshot `id`.
    pub fn new(id: SnapshotId) -> Self {
        TransactionLog {
            id,
            new_groups: BTreeSet::new(),
            new_arrays: BTreeSet::new(),
            deleted_groups: BTreeSet::new(),
            deleted_arrays: BTreeSet::new(),
            updated_arrays: BTreeSet::new(),
            updated_groups: BTreeSet::new(),
            updated_chunks: BTreeMap::new(),
            moved_nodes: Vec::new(),
        }
    }

    /// This log followed by `later`, as one log: what an amended commit records (the
    /// changes of the commit it replaces plus the new ones). A node created here and
    /// deleted in `later` appears in neither list; a node deleted in `later` keeps no
    /// metadata or chunk updates.
    pub fn then(&self, later: &TransactionLog, id: SnapshotId) -> TransactionLog {
        let mut out = self.clone();
        out.id = id;
        let gone: BTreeSet<NodeId> = later
            .deleted_groups
            .iter()
            .chain(&later.deleted_arrays)
            .copied()
            .collect();
        for id in &gone {
            out.updated_groups.remove(id);
            out.updated_arrays.remove(id);
            out.updated_chunks.remove(id);
        }
        let mut deleted_groups = later.deleted_groups.clone();
        let mut deleted_arrays = later.deleted_arrays.clone();
        for (created, deleted) in [
            (&mut out.new_groups, &mut deleted_groups),
            (&mut out.new_arrays, &mut deleted_arrays),
        ] {
            let both: Vec<NodeId> = created.intersection(deleted).copied().collect();
            for id in &both {
                created.remove(id);
                deleted.remove(id);
            }
        }
        out.deleted_groups.extend(deleted_groups);
        out.deleted_arrays.extend(deleted_arrays);
        out.new_groups.extend(&later.new_groups);
        out.new_arrays.extend(&later.new_arrays);
        out.updated_groups.extend(&later.updated_groups);
        out.updated_arrays.extend(&later.updated_arrays);
        for (node, chunks) in &later.updated_chunks {
            out.updated_chunks
                .entry(*node)
                .or_default()
                .extend(chunks.iter().cloned());
        }
        out
    }

    /// Whether the log records no change at all.
    pub fn is_empty(&self) -> bool {
        self.new_groups.is_empty()
            && self.new_arrays.is_empty()
            && self.deleted_groups.is_empty()
            && self.deleted_arrays.is_empty()
            && self.updated_arrays.is_empty()
            && self.updated_groups.is_empty()
            && self.updated_chunks.values().all(BTreeSet::is_empty)
    }

    /// Encodes into a full spec-1 transaction log file.
    ///
    /// # Errors
    /// As [`TransactionLog::encode_as`].
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        self.encode_as(SpecVersion::V1)
    }

    /// Encodes into a full transaction log file of spec version `spec`: spec 2 always
    /// writes `moved_nodes` (empty when nothing moved), as Icechunk 2.x does; spec 1
    /// writes it only when a node moved (never, for logs floe makes).
    ///
    /// # Errors
    /// [`FormatError::ChunkIndexTooLarge`]; [`FormatError::Compression`].
    pub fn encode_as(&self, spec: SpecVersion) -> Result<Vec<u8>, FormatError> {
        let chunks = self
            .updated_chunks
            .iter()
            .map(|(node, chunks)| (*node, chunks.iter().map(Vec::as_slice)));
        self.encode_with_chunks(spec, chunks, self.len())
    }

    /// Encodes like [`TransactionLog::encode_as`], but with the updated chunks taken
    /// from `chunks` (arrays in node id order, each with its chunk indices sorted)
    /// instead of `self.updated_chunks`: a commit of millions of chunks encodes them
    /// straight from its change set, without a copy in a `TransactionLog`.
    /// `estimated_chunks` sizes the encoder (the number of chunk indices, about).
    ///
    /// # Errors
    /// [`FormatError::ChunkIndexTooLarge`]; [`FormatError::Compression`].
    pub fn encode_with_chunks<'c, I, J>(
        &self,
        spec: SpecVersion,
        chunks: I,
        estimated_chunks: usize,
    ) -> Result<Vec<u8>, FormatError>
    where
        I: IntoIterator<Item = (NodeId, J)>,
        J: IntoIterator<Item = &'c [u64]>,
    {
        fn ids<'a>(
            b: &mut FlatBufferBuilder<'a>,
            set: &BTreeSet<NodeId>,
        ) -> flatbuffers::WIPOffset<flatbuffers::Vector<'a, gen::ObjectId8>> {
            let v: Vec<gen::ObjectId8> = set.iter().map(fb::fb8).collect();
            b.create_vector(&v)
        }
        // About 24-32 bytes per chunk index (a table, its coordinates and an offset
        // to it): sized once, the builder does not grow (and copy) itself.
        let mut b = FlatBufferBuilder::with_capacity(
            estimated_chunks.saturating_mul(32).saturating_add(1024),
        );
        let new_groups = ids(&mut b, &self.new_groups);
        let new_arrays = ids(&mut b, &self.new_arrays);
        let deleted_groups = ids(&mut b, &self.deleted_groups);
        let deleted_arrays = ids(&mut b, &self.deleted_arrays);
        let updated_arrays = ids(&mut b, &self.updated_arrays);
        let updated_groups = ids(&mut b, &self.updated_groups);
        let mut updated = Vec::new();
        for (node, chunks) in chunks {
            let chunks = chunks
                .into_iter()
                .map(|c| {
                    let coords = super::write_coords(&mut b, c)?;
                    Ok(gen::ChunkIndices::create(
                        &mut b,
                        &gen::ChunkIndicesArgs {
                            coords: Some(coords),
                        },
                    ))
                })
                .collect::<Result<Vec<_>, FormatError>>()?;
            let chunks = b.create_vector(&chunks);
            let node_id = fb::fb8(&node);
            updated.push(gen::ArrayUpdatedChunks::create(
                &mut b,
                &gen::ArrayUpdatedChunksArgs {
                    node_id: Some(&node_id),
                    chunks: Some(chunks),
                },
            ));
        }
        let updated_chunks = b.create_vector(&updated);
        let moved_nodes = (spec == SpecVersion::V2 || !self.moved_nodes.is_empty()).then(|| {
            let moves: Vec<_> = self
                .moved_nodes
                .iter()
                .map(|m| {
                    let from = b.create_string(m.from.as_str());
                    let to = b.create_string(m.to.as_str());
                    let node_id = fb::fb8(&m.node_id);
                    gen::MoveOperation::create(
                        &mut b,
                        &gen::MoveOperationArgs {
                            from: Some(from),
                            to: Some(to),
                            node_id: Some(&node_id),
                            node_type: match m.kind {
                                NodeKind::Group => gen::NodeType::Group,
                                NodeKind::Array => gen::NodeType::Array,
                            },
                        },
                    )
                })
                .collect();
            b.create_vector(&moves)
        });
        let id = fb::fb12(&self.id);
        let root = gen::TransactionLog::create(
            &mut b,
            &gen::TransactionLogArgs {
                id: Some(&id),
                new_groups: Some(new_groups),
                new_arrays: Some(new_arrays),
                deleted_groups: Some(deleted_groups),
                deleted_arrays: Some(deleted_arrays),
                updated_arrays: Some(updated_arrays),
                updated_groups: Some(updated_groups),
                updated_chunks: Some(updated_chunks),
                moved_nodes,
                ..Default::default()
            },
        );
        b.finish(root, Some(fb::IDENTIFIER));
        envelope::seal_version(FileType::TransactionLog, spec, b.finished_data())
    }

    /// Decodes a transaction log file (spec 1 or 2).
    ///
    /// # Errors
    /// Envelope errors; [`FormatError::InvalidFlatbuffer`]; [`FormatError::InvalidData`]
    /// for a move with a missing field or an invalid path.
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let buf = envelope::open(FileType::TransactionLog, bytes)?;
        let root = fb::verified_root::<gen::TransactionLog>("transaction log", &buf)?;
        let ids = |v: flatbuffers::Vector<'_, gen::ObjectId8>| -> BTreeSet<NodeId> {
            v.iter().map(fb::id8).collect()
        };
        let mut updated_chunks = BTreeMap::new();
        for a in root.updated_chunks() {
            let chunks: BTreeSet<ChunkIndices> = a
                .chunks()
                .iter()
                .map(|c| c.coords().iter().map(u64::from).collect())
                .collect();
            updated_chunks.insert(fb::id8(a.node_id()), chunks);
        }
        let invalid = |reason: String| FormatError::InvalidData {
            what: "transaction log",
            reason,
        };
        let path = |p: Option<&str>| -> Result<NodePath, FormatError> {
            let p = p.ok_or_else(|| invalid("a move has no path".into()))?;
            NodePath::new(p).map_err(|e| invalid(e.to_string()))
        };
        let mut moved_nodes = Vec::new();
        for m in root.moved_nodes().iter().flatten() {
            let node_id = m
                .node_id()
                .map(fb::id8)
                .ok_or_else(|| invalid("a move has no node id".into()))?;
            let kind = match m.node_type() {
                gen::NodeType::Group => NodeKind::Group,
                gen::NodeType::Array => NodeKind::Array,
                other => return Err(invalid(format!("a move has node type {}", other.0))),
            };
            moved_nodes.push(MovedNode {
                from: path(m.from())?,
                to: path(m.to())?,
                node_id,
                kind,
            });
        }
        Ok(TransactionLog {
            id: fb::id12(root.id()),
            new_groups: ids(root.new_groups()),
            new_arrays: ids(root.new_arrays()),
            deleted_groups: ids(root.deleted_groups()),
            deleted_arrays: ids(root.deleted_arrays()),
            updated_arrays: ids(root.updated_arrays()),
            updated_groups: ids(root.updated_groups()),
            updated_chunks,
            moved_nodes,
        })
    }
}
