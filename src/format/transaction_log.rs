//! Transaction log files (`transactions/<snapshot id>`): what one commit changed, by
//! node id. Used for conflict detection on rebase and for diffs.
//!
//! Spec: Icechunk specification, "Transaction logs"; field ids in
//! `../shared/docs/icechunk-format-v1.md`, table `TransactionLog`.

use std::collections::{BTreeMap, BTreeSet};

use super::envelope::{self, FileType};
use super::fb::{self, gen};
use super::forward::{self, Forward};
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

/// The moves of two commits in a row as one: a node moved by both goes from its
/// first origin to its last destination, and is left out when it ended where it
/// started (Icechunk 2.3.0 collapses chained moves so on amend: `a -> b` then
/// `b -> c` is `a -> c`, `a -> b` then `b -> a` is nothing). Sorted by destination.
fn compose_moves(first: &[MovedNode], then: &[MovedNode]) -> Vec<MovedNode> {
    let mut by_node: BTreeMap<NodeId, MovedNode> =
        first.iter().map(|m| (m.node_id, m.clone())).collect();
    for m in then {
        by_node
            .entry(m.node_id)
            .and_modify(|earlier| earlier.to = m.to.clone())
            .or_insert_with(|| m.clone());
    }
    let mut moves: Vec<MovedNode> = by_node.into_values().filter(|m| m.from != m.to).collect();
    moves.sort_by(|a, b| a.to.cmp(&b.to));
    moves
}

/// How many bytes of a transaction log its chunk lists may take before
/// [`TransactionLog::fold_oversized_chunk_lists`] folds arrays: 1.75 GiB, leaving room
/// under flatbuffers' 2 GiB for the node ids and moves.
pub const CHUNK_LIST_BUDGET: usize = 7 << 28;

/// [`CHUNK_LIST_BUDGET`]; with the `testing` feature, the environment variable
/// `FLOE_TESTING_CHUNK_LIST_BUDGET` (bytes) instead when set, so that a test process
/// can fold logs of a few thousand chunks.
fn chunk_list_budget() -> usize {
    #[cfg(feature = "testing")]
    if let Some(b) = std::env::var("FLOE_TESTING_CHUNK_LIST_BUDGET")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return b;
    }
    CHUNK_LIST_BUDGET
}

/// Bytes one listed chunk takes in an encoded log: its `ChunkIndices` table (its own
/// vtable of 8 bytes, the table's 8, the coordinates' length and `ndim` u32s) and
/// the 4-byte offset to it.
fn chunk_entry_bytes(ndim: usize) -> usize {
    24usize.saturating_add(ndim.saturating_mul(4))
}

/// The size of chunk lists for [`TransactionLog::encode_with_chunks`]: from each
/// array's `(chunks, ndim)`, the number of chunk indices and the bytes they take.
pub(crate) fn chunk_lists_size(arrays: impl IntoIterator<Item = (usize, usize)>) -> (usize, usize) {
    arrays
        .into_iter()
        .fold((0, 0), |(n, bytes), (chunks, ndim)| {
            (
                n.saturating_add(chunks),
                bytes.saturating_add(chunks.saturating_mul(chunk_entry_bytes(ndim))),
            )
        })
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
        self.id_sets().iter().map(|s| s.len()).sum::<usize>()
            + self
                .updated_chunks
                .values()
                .map(BTreeSet::len)
                .sum::<usize>()
            + self.moved_nodes.len()
    }

    /// The six sets of node ids, in the order the format stores them (slots 1-6).
    fn id_sets(&self) -> [&BTreeSet<NodeId>; 6] {
        [
            &self.new_groups,
            &self.new_arrays,
            &self.deleted_groups,
            &self.deleted_arrays,
            &self.updated_arrays,
            &self.updated_groups,
        ]
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
        out.moved_nodes = compose_moves(&self.moved_nodes, &later.moved_nodes);
        out
    }

    /// Makes the log fit the 2 GiB a flatbuffer can address when it would list too
    /// many chunk changes: `arrays` gives, for each array whose chunks the log would
    /// list, its number of changed chunks and its dimensionality. While the listed
    /// chunks would take more than [`CHUNK_LIST_BUDGET`] bytes, the array with the
    /// most changes is folded: its chunk list is left out and, unless the commit
    /// created it (`new_arrays`), it is recorded in `updated_arrays` instead, as a
    /// change of the whole array. Returns the folded arrays (the caller leaves their
    /// chunks out of the encoding); empty, and the log untouched, when it fits.
    ///
    /// The format lists every changed chunk, so no writer can list 10^8 of them in
    /// one commit (Icechunk 2.3.0 fails such a commit). Folding keeps conflict
    /// detection sound: a concurrent session that wrote chunks to a folded array sees
    /// its metadata changed (`ChunksWrittenWhileArrayChanged`, Icechunk's
    /// `ChunksUpdatedInUpdatedArray`) instead of no conflict, and nothing can have
    /// written to an array the commit created. A diff of that commit shows a folded
    /// array as changed (or added) without its chunks.
    pub fn fold_oversized_chunk_lists<I>(&mut self, arrays: I) -> BTreeSet<NodeId>
    where
        I: IntoIterator<Item = (NodeId, usize, usize)>,
    {
        let mut sized: Vec<(usize, NodeId)> = arrays
            .into_iter()
            .map(|(id, chunks, ndim)| (chunks.saturating_mul(chunk_entry_bytes(ndim)), id))
            .collect();
        let mut total = sized.iter().fold(0usize, |t, (b, _)| t.saturating_add(*b));
        let budget = chunk_list_budget();
        let mut folded = BTreeSet::new();
        // Largest first: the fewest arrays lose their chunk lists.
        sized.sort_unstable_by(|a, b| b.cmp(a));
        for (bytes, id) in sized {
            if total <= budget {
                break;
            }
            total -= bytes;
            folded.insert(id);
            self.updated_chunks.remove(&id);
            if !self.new_arrays.contains(&id) {
                self.updated_arrays.insert(id);
            }
        }
        folded
    }

    /// [`TransactionLog::fold_oversized_chunk_lists`] for a log that holds its chunk
    /// lists (an amended commit's).
    pub fn fold_own_oversized_chunk_lists(&mut self) -> BTreeSet<NodeId> {
        let arrays: Vec<(NodeId, usize, usize)> = self.chunk_list_sizes().collect();
        self.fold_oversized_chunk_lists(arrays)
    }

    /// Each array of `updated_chunks` with its number of chunks and dimensionality.
    fn chunk_list_sizes(&self) -> impl Iterator<Item = (NodeId, usize, usize)> + '_ {
        self.updated_chunks
            .iter()
            .map(|(id, c)| (*id, c.len(), c.first().map_or(0, Vec::len)))
    }

    /// Whether the log records no change at all.
    pub fn is_empty(&self) -> bool {
        self.id_sets().iter().all(|s| s.is_empty())
            && self.updated_chunks.values().all(BTreeSet::is_empty)
            && self.moved_nodes.is_empty()
    }

    testing_pub! {
        /// Encodes into a full spec-1 transaction log file.
        ///
        /// # Errors
        /// As [`TransactionLog::encode_as`].
        fn encode(&self) -> Result<Vec<u8>, FormatError> {
            self.encode_as(SpecVersion::V1)
        }
    }

    testing_pub! {
        /// Encodes into a full transaction log file of spec version `spec`: spec 2 always
        /// writes `moved_nodes` (empty when nothing moved), as Icechunk 2.x does; spec 1
        /// writes it only when a node moved (never, for logs floe makes).
        ///
        /// # Errors
        /// [`FormatError::ChunkIndexTooLarge`]; [`FormatError::Compression`].
        fn encode_as(&self, spec: SpecVersion) -> Result<Vec<u8>, FormatError> {
            self.encode_at(spec, envelope::default_level(FileType::TransactionLog))
        }
    }

    /// [`TransactionLog::encode_as`] at zstd level `level` (the config's
    /// `compression.level`).
    ///
    /// # Errors
    /// As [`TransactionLog::encode_as`].
    pub(crate) fn encode_at(&self, spec: SpecVersion, level: i32) -> Result<Vec<u8>, FormatError> {
        let chunks = self
            .updated_chunks
            .iter()
            .map(|(node, chunks)| (*node, chunks.iter().map(Vec::as_slice)));
        let (_, bytes) = chunk_lists_size(self.chunk_list_sizes().map(|(_, n, ndim)| (n, ndim)));
        self.encode_with_chunks(spec, level, chunks, (self.len(), bytes))
    }

    /// Encodes like [`TransactionLog::encode_as`], but with the updated chunks taken
    /// from `chunks` (arrays in node id order, each with its chunk indices sorted)
    /// instead of `self.updated_chunks`: a commit of millions of chunks encodes them
    /// straight from its change set, without a copy in a `TransactionLog`.
    /// `estimated` sizes the encoder: the number of chunk indices and the bytes they
    /// take ([`chunk_lists_size`]), about; `level` is
    /// the zstd level (the config's `compression.level`).
    ///
    /// # Errors
    /// [`FormatError::ChunkIndexTooLarge`]; [`FormatError::Compression`].
    pub(crate) fn encode_with_chunks<'c, I, J>(
        &self,
        spec: SpecVersion,
        level: i32,
        chunks: I,
        estimated: (usize, usize),
    ) -> Result<Vec<u8>, FormatError>
    where
        I: IntoIterator<Item = (NodeId, J)>,
        J: IntoIterator<Item = &'c [u64]>,
    {
        const WHAT: &str = "transaction log";
        let (estimated_chunks, estimated_bytes) = estimated;
        // The ChunkIndices tables go into the body as they come (a vtable, 8 bytes
        // and their coordinates, ~24 bytes each); everything else, with the vectors of
        // offsets to them, into the head written in front of it (see
        // `format::forward`).
        let id_sets = self.id_sets();
        let ids: usize = id_sets.iter().map(|s| s.len()).sum();
        let moved: usize = self
            .moved_nodes
            .iter()
            .map(|m| m.from.as_str().len() + m.to.as_str().len() + 48)
            .sum();
        // Room in front for the head: 4 bytes per chunk, the ids, the moves and the
        // tables of up to ~1,000 arrays.
        let gap = estimated_chunks
            .saturating_mul(4)
            .saturating_add(ids.saturating_mul(8))
            .saturating_add(moved)
            .saturating_add(32 * 1024);
        // The body holds all of each entry but its 4-byte offset in the head, plus
        // a little slack: a body buffer that has to grow doubles (2.8 GB for a log
        // of 1.4 GB).
        let body_bytes = estimated_bytes.saturating_sub(estimated_chunks.saturating_mul(4));
        let mut body = Forward::with_gap(gap, body_bytes.saturating_add(body_bytes / 64 + 64));
        let mut arrays: Vec<(NodeId, Vec<u32>)> = Vec::new();
        let mut total = 0usize;
        for (node, chunks) in chunks {
            let chunks = chunks.into_iter();
            let mut tables = Vec::with_capacity(chunks.size_hint().0);
            for c in chunks {
                let coords = super::coords_u32(c)?;
                // ChunkIndices { coords: [uint32] (slot 0) }: soffset, coords; each
                // with its own vtable, so that the tables repeat byte for byte.
                let t = body.table_with_own_vtable(WHAT, 8, &[4])?;
                tables.push(forward::count(WHAT, t)?);
                let slot = body.slot();
                body.point(WHAT, slot)?;
                body.u32_vector(coords);
            }
            total = total.saturating_add(tables.len());
            arrays.push((node, tables));
        }
        let moves = spec == SpecVersion::V2 || !self.moved_nodes.is_empty();
        let mut head = Forward::root(
            fb::IDENTIFIER,
            total
                .saturating_add(ids * 2)
                .saturating_add(moved)
                .saturating_mul(4)
                .saturating_add(arrays.len().saturating_mul(24))
                .saturating_add(256),
        );
        // TransactionLog { id: ObjectId12 (slot 0), six [ObjectId8] (slots 1-6),
        // updated_chunks (7), moved_nodes (8) }: soffset, the offsets, id.
        let vectors: u16 = if moves { 8 } else { 7 };
        let mut fields = vec![4 + 4 * vectors];
        fields.extend((0..vectors).map(|v| 4 + 4 * v));
        let log_vt = head.vtable(4 + 4 * vectors + 12, &fields);
        // MoveOperation { from, to: string (slots 0, 1), node_id: ObjectId8 (2),
        // node_type: ubyte (3) }: soffset, from, to, node_id, node_type, padding.
        let move_vt = moves.then(|| head.vtable(24, &[4, 8, 12, 20]));
        head.pad(4, 0);
        let root = head.table(WHAT, log_vt)?;
        let slots = head.slots(usize::from(vectors));
        head.bytes(&self.id.0);
        head.finish_root(WHAT, root)?;
        for (i, set) in id_sets.iter().enumerate() {
            head.point(WHAT, Forward::nth(slots, i))?;
            head.u32(forward::count(WHAT, set.len())?);
            for id in *set {
                head.bytes(&id.0);
            }
            head.pad(4, 0);
        }
        if let Some(move_vt) = move_vt {
            head.point(WHAT, Forward::nth(slots, 7))?;
            head.u32(forward::count(WHAT, self.moved_nodes.len())?);
            let move_slots = head.slots(self.moved_nodes.len());
            for (i, m) in self.moved_nodes.iter().enumerate() {
                head.point(WHAT, Forward::nth(move_slots, i))?;
                head.table(WHAT, move_vt)?;
                let from = head.slot();
                let to = head.slot();
                head.bytes(&m.node_id.0);
                let kind = match m.kind {
                    NodeKind::Group => gen::NodeType::Group,
                    NodeKind::Array => gen::NodeType::Array,
                };
                head.bytes(&[kind.0, 0, 0, 0]);
                head.point(WHAT, from)?;
                head.byte_vector(WHAT, m.from.as_str().as_bytes(), true)?;
                head.pad(4, 0);
                head.point(WHAT, to)?;
                head.byte_vector(WHAT, m.to.as_str().as_bytes(), true)?;
                head.pad(4, 0);
            }
        }
        // ArrayUpdatedChunks tables last: the body follows them.
        head.array_tables_then_body(WHAT, Forward::nth(slots, 6), &arrays)?;
        let (buf, start) = body.behind(&head);
        envelope::seal_at(FileType::TransactionLog, spec, level, &buf[start..])
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

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> NodeId {
        NodeId::new([n; 8])
    }

    /// Logs under the budget are left alone; over it, the largest arrays lose their
    /// chunk lists first, an existing array is recorded as updated and a new one
    /// only as new.
    #[test]
    fn oversized_chunk_lists_fold_largest_first() {
        let mut log = TransactionLog::new(SnapshotId::INITIAL);
        log.new_arrays.insert(id(2));
        let small = [(id(1), 1_000, 2), (id(2), 1_000, 2), (id(3), 10, 3)];
        assert!(log.fold_oversized_chunk_lists(small).is_empty());
        assert!(log.updated_arrays.is_empty());

        // 2-D entries take 32 bytes: 40M + 30M of them pass 1.75 GiB, 40M alone does not.
        let big = [
            (id(1), 40_000_000, 2),
            (id(2), 45_000_000, 2),
            (id(3), 10, 3),
        ];
        log.updated_chunks
            .insert(id(2), BTreeSet::from([vec![0, 0]]));
        log.updated_chunks
            .insert(id(3), BTreeSet::from([vec![0, 0, 0]]));
        let folded = log.fold_oversized_chunk_lists(big);
        assert_eq!(folded, BTreeSet::from([id(2)]));
        assert!(!log.updated_chunks.contains_key(&id(2)));
        assert!(log.updated_chunks.contains_key(&id(3)));
        // New: recorded as new only.
        assert!(log.updated_arrays.is_empty());

        let both = [(id(1), 60_000_000, 2), (id(4), 59_000_000, 1)];
        let folded = log.fold_oversized_chunk_lists(both);
        assert_eq!(folded, BTreeSet::from([id(1)]));
        assert_eq!(log.updated_arrays, BTreeSet::from([id(1)]));
    }
}
