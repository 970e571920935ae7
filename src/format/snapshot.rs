//! Snapshot files (`snapshots/<id>`): the node tree of one commit, its commit facts and
//! the manifest files it points to.
//!
//! Spec: Icechunk specification, "Snapshot Files"; field ids in
//! `../shared/docs/icechunk-format-v1.md`, table `Snapshot`.

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;
use chrono::{DateTime, TimeZone, Utc};
use flatbuffers::FlatBufferBuilder;

use super::envelope::{self, FileType};
use super::fb::{self, gen};
use super::limits;
pub use super::metadata_value::decode_metadata_value;
use super::metadata_value::encode_metadata_value;
use super::{FormatError, ManifestId, NodeId, NodePath, SnapshotId, SpecVersion};

/// Length of an array and its number of chunks along one dimension, as Icechunk
/// 2.3.0 records them (`DimensionShapeV2` of spec 2).
///
/// The number of chunks is the chunk grid's: `ceil(length / chunk length)` for a
/// regular grid; every listed edge for a rectilinear one (also edges past the length,
/// which zarr keeps when an array shrinks). It bounds the chunk indices a session
/// accepts. Spec 1 stores a chunk length instead: written as `ceil(length /
/// num_chunks)` ([`DimensionShape::spec1_chunk_length`], Icechunk 2.3.0's
/// back-computation, exact for regular grids' chunk counts) and read back as
/// `ceil(length / chunk length)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DimensionShape {
    /// Number of elements along the dimension.
    pub array_length: u64,
    /// Number of chunks along the dimension.
    pub num_chunks: u64,
}

impl DimensionShape {
    /// A dimension of `array_length` elements in `num_chunks` chunks.
    pub fn new(array_length: u64, num_chunks: u64) -> Self {
        DimensionShape {
            array_length,
            num_chunks,
        }
    }

    /// A dimension of a regular grid: `array_length` elements in chunks of
    /// `chunk_length` (`ceil(array_length / chunk_length)` chunks; none when
    /// `chunk_length` is 0).
    pub fn regular(array_length: u64, chunk_length: u64) -> Self {
        let num_chunks = if chunk_length == 0 {
            0
        } else {
            array_length.div_ceil(chunk_length)
        };
        DimensionShape::new(array_length, num_chunks)
    }

    /// The chunk length a spec-1 snapshot records: `ceil(array_length / num_chunks)`
    /// (0 with no chunks), as Icechunk 2.3.0 writes it. Reading it back gives the same
    /// number of chunks whenever every chunk but the last is full.
    pub fn spec1_chunk_length(&self) -> u64 {
        if self.num_chunks == 0 {
            0
        } else {
            self.array_length.div_ceil(self.num_chunks)
        }
    }
}

/// A pointer from an array to a manifest holding some of its chunk refs, with the chunk
/// index extents `[from, to)` (one per dimension) those refs lie in.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ManifestRef {
    /// The manifest's id.
    pub object_id: ManifestId,
    /// One half-open chunk index range per dimension.
    pub extents: Vec<Range<u32>>,
}

impl ManifestRef {
    /// Whether chunk `index` lies within the extents.
    pub fn contains(&self, index: &[u64]) -> bool {
        index.len() == self.extents.len()
            && index
                .iter()
                .zip(&self.extents)
                .all(|(&i, r)| u64::from(r.start) <= i && i < u64::from(r.end))
    }
}

/// Facts about one manifest file that a snapshot points to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ManifestFileInfo {
    /// The manifest's id.
    pub id: ManifestId,
    /// Size of the whole manifest file, in bytes.
    pub size_bytes: u64,
    /// Number of chunk refs it holds.
    pub num_chunk_refs: u32,
}

/// Array-specific node data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayData {
    /// Shape and chunk shape, one entry per dimension (empty for 0-d arrays).
    pub shape: Vec<DimensionShape>,
    /// Dimension names, `None` when the array has none; an inner `None` is an unnamed
    /// dimension.
    pub dimension_names: Option<Vec<Option<String>>>,
    /// Manifests holding the array's chunk refs; their extents never overlap.
    pub manifests: Vec<ManifestRef>,
}

/// The two kinds of node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// A group.
    Group,
    /// An array.
    Array,
}

impl std::fmt::Display for NodeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NodeKind::Group => "group",
            NodeKind::Array => "array",
        })
    }
}

/// Whether a node is a group or an array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeData {
    /// A group.
    Group,
    /// An array.
    Array(ArrayData),
}

/// One group or array of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSnapshot {
    /// The node id (stable across commits until the node is deleted).
    pub id: NodeId,
    /// The absolute path.
    pub path: NodePath,
    /// The node's `zarr.json` bytes.
    pub user_data: Bytes,
    /// Group or array data.
    pub node_data: NodeData,
}

impl NodeSnapshot {
    /// The array data, if this node is an array.
    pub fn array(&self) -> Option<&ArrayData> {
        match &self.node_data {
            NodeData::Array(a) => Some(a),
            NodeData::Group => None,
        }
    }

    /// Whether this node is a group.
    pub fn is_group(&self) -> bool {
        matches!(self.node_data, NodeData::Group)
    }

    /// Group or array.
    pub fn kind(&self) -> NodeKind {
        match self.node_data {
            NodeData::Group => NodeKind::Group,
            NodeData::Array(_) => NodeKind::Array,
        }
    }
}

/// A decoded snapshot.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// The format version of its file (a repository upgraded to spec 2 holds files of
    /// both versions).
    pub spec_version: SpecVersion,
    /// This snapshot's id (also its file name).
    pub id: SnapshotId,
    /// The previous snapshot on its branch; `None` only for the initial snapshot.
    /// Spec-2 files do not hold it: the repository fills it in from the `repo`
    /// object's parent links.
    pub parent_id: Option<SnapshotId>,
    /// Commit time, in microseconds since the Unix epoch.
    pub flushed_at: u64,
    /// Commit message.
    pub message: String,
    /// Commit metadata: JSON values by name.
    pub metadata: BTreeMap<String, serde_json::Value>,
    /// Every manifest file any node points to.
    pub manifest_files: Vec<ManifestFileInfo>,
    /// The node tree, keyed (and so sorted) by path.
    pub nodes: BTreeMap<NodePath, NodeSnapshot>,
}

/// Message of every repository's initial snapshot.
pub const INITIAL_MESSAGE: &str = "Repository initialized";

impl Snapshot {
    /// The initial snapshot of a new repository: id `1CECHNKREP0F1RSTCMT0`, no parent,
    /// no nodes, flushed now; metadata `{"__root": true}` in spec 1 (as Icechunk 1.x
    /// writes it), `{"__icechunk": {"is_root": true}}` in spec 2 (as Icechunk 2.x does).
    pub fn initial(spec: SpecVersion) -> Self {
        let metadata = match spec {
            SpecVersion::V1 => ("__root".to_string(), serde_json::Value::Bool(true)),
            SpecVersion::V2 => (
                "__icechunk".to_string(),
                serde_json::json!({ "is_root": true }),
            ),
        };
        Snapshot {
            spec_version: spec,
            id: SnapshotId::INITIAL,
            parent_id: None,
            flushed_at: now_micros(),
            message: INITIAL_MESSAGE.to_string(),
            metadata: BTreeMap::from([metadata]),
            manifest_files: Vec::new(),
            nodes: BTreeMap::new(),
        }
    }

    /// The commit time as a UTC date-time.
    pub fn flushed_at_time(&self) -> DateTime<Utc> {
        micros_to_time(self.flushed_at)
    }

    /// Looks up a node by path.
    pub fn node(&self, path: &NodePath) -> Option<&NodeSnapshot> {
        self.nodes.get(path)
    }

    /// The info of the manifest file `id`, if listed.
    pub fn manifest_info(&self, id: &ManifestId) -> Option<&ManifestFileInfo> {
        self.manifest_files.iter().find(|m| &m.id == id)
    }

    testing_pub! {
        /// Encodes into a full snapshot file (envelope + zstd + flatbuffer).
        ///
        /// # Errors
        /// [`FormatError::InvalidData`] when metadata cannot be encoded as MessagePack;
        /// [`FormatError::Compression`].
        fn encode(&self) -> Result<Vec<u8>, FormatError> {
            self.encode_at(envelope::DEFAULT_LEVEL)
        }
    }

    /// [`Snapshot::encode`] at zstd level `level` (the config's `compression.level`).
    ///
    /// # Errors
    /// As [`Snapshot::encode`].
    pub(crate) fn encode_at(&self, level: i32) -> Result<Vec<u8>, FormatError> {
        let spec = self.spec_version;
        let mut packed_metadata = Vec::with_capacity(self.metadata.len());
        for (name, value) in &self.metadata {
            limits::check_metadata_depth("snapshot", name, value)?;
            let packed =
                encode_metadata_value(spec, value).map_err(|e| FormatError::InvalidData {
                    what: "snapshot metadata",
                    reason: format!("cannot encode `{name}` for spec {spec}: {e}"),
                })?;
            packed_metadata.push((name, packed));
        }
        self.size_budget(&packed_metadata).check()?;
        let mut b = FlatBufferBuilder::with_capacity(1024 + self.nodes.len() * 256);
        let nodes: Vec<_> = self
            .nodes
            .values()
            .map(|n| write_node(&mut b, n, self.spec_version))
            .collect();
        let nodes = b.create_vector(&nodes);
        let message = b.create_string(&self.message);
        let mut items = Vec::with_capacity(packed_metadata.len());
        for (name, packed) in &packed_metadata {
            let name = b.create_string(name);
            let value = b.create_vector(packed);
            items.push(gen::MetadataItem::create(
                &mut b,
                &gen::MetadataItemArgs {
                    name: Some(name),
                    value: Some(value),
                },
            ));
        }
        let metadata = b.create_vector(&items);
        let mut files = self.manifest_files.clone();
        files.sort_by_key(|f| f.id);
        // Spec 2 lists manifest files in `manifest_files_v2`, leaves the old
        // (required) field empty, and keeps parent links in the `repo` object only.
        let (files, files_v2, parent) = match spec {
            SpecVersion::V1 => {
                let files: Vec<gen::ManifestFileInfo> = files
                    .iter()
                    .map(|f| {
                        gen::ManifestFileInfo::new(&fb::fb12(&f.id), f.size_bytes, f.num_chunk_refs)
                    })
                    .collect();
                (
                    b.create_vector(&files),
                    None,
                    self.parent_id.as_ref().map(fb::fb12),
                )
            }
            SpecVersion::V2 => {
                let v2: Vec<_> = files
                    .iter()
                    .map(|f| {
                        let id = fb::fb12(&f.id);
                        gen::ManifestFileInfoV2::create(
                            &mut b,
                            &gen::ManifestFileInfoV2Args {
                                id: Some(&id),
                                size_bytes: f.size_bytes,
                                num_chunk_refs: f.num_chunk_refs,
                                extra: None,
                            },
                        )
                    })
                    .collect();
                let v2 = b.create_vector(&v2);
                (
                    b.create_vector::<gen::ManifestFileInfo>(&[]),
                    Some(v2),
                    None,
                )
            }
        };
        let id = fb::fb12(&self.id);
        let root = gen::Snapshot::create(
            &mut b,
            &gen::SnapshotArgs {
                id: Some(&id),
                parent_id: parent.as_ref(),
                nodes: Some(nodes),
                flushed_at: self.flushed_at,
                message: Some(message),
                metadata: Some(metadata),
                manifest_files: Some(files),
                manifest_files_v2: files_v2,
                ..Default::default()
            },
        );
        b.finish(root, Some(fb::IDENTIFIER));
        envelope::seal_at(FileType::Snapshot, spec, level, b.finished_data())
    }

    /// An upper bound of the flatbuffer [`Snapshot::encode_at`] builds, given the
    /// packed metadata values: every string and vector with its length, alignment
    /// and table overhead (see `format::limits`).
    fn size_budget(&self, packed_metadata: &[(&String, Vec<u8>)]) -> limits::SizeBudget {
        let mut budget = limits::SizeBudget::new("snapshot", 4096);
        budget.add(self.message.len(), 16);
        for (name, packed) in packed_metadata {
            budget.add(name.len() + packed.len(), 64);
        }
        budget.add(0, 64u64.saturating_mul(self.manifest_files.len() as u64));
        for n in self.nodes.values() {
            budget.add(n.path.as_str().len() + n.user_data.len(), 256);
            if let NodeData::Array(a) = &n.node_data {
                for (i, _) in a.shape.iter().enumerate() {
                    let name = a
                        .dimension_names
                        .as_ref()
                        .and_then(|d| d.get(i))
                        .and_then(|d| d.as_ref())
                        .map_or(0, String::len);
                    budget.add(name, 96);
                }
                for m in &a.manifests {
                    budget.add(0, 64 + 8 * m.extents.len() as u64);
                }
            }
        }
        budget
    }

    /// Decodes a snapshot file.
    ///
    /// # Errors
    /// Envelope errors (bad magic, version, file type or compression); [`FormatError::InvalidFlatbuffer`] when
    /// the flatbuffer fails verification; [`FormatError::InvalidData`] for content that
    /// breaks a format rule (bad path, unknown node type, undecodable metadata).
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let (spec, buf) = envelope::open_versioned(FileType::Snapshot, bytes)?;
        let root = fb::verified_root::<gen::Snapshot>("snapshot", &buf)?;
        let mut nodes = BTreeMap::new();
        for n in root.nodes() {
            let node = read_node(&n)?;
            if nodes.insert(node.path.clone(), node).is_some() {
                return Err(invalid("two nodes share one path".into()));
            }
        }
        // A fully verified root is verified for the header fields too.
        let header = read_header(spec, &HeaderRoot(root))?;
        Ok(Snapshot::from_header(header, nodes))
    }

    /// The snapshot made of `header`'s commit facts and node tree `nodes`.
    pub fn from_header(header: SnapshotHeader, nodes: BTreeMap<NodePath, NodeSnapshot>) -> Self {
        Snapshot {
            spec_version: header.spec_version,
            id: header.id,
            parent_id: header.parent_id,
            flushed_at: header.flushed_at,
            message: header.message,
            metadata: header.metadata,
            manifest_files: header.manifest_files,
            nodes,
        }
    }

    /// This snapshot's commit facts (a copy, without the node tree).
    pub fn header(&self) -> SnapshotHeader {
        SnapshotHeader {
            spec_version: self.spec_version,
            id: self.id,
            parent_id: self.parent_id,
            flushed_at: self.flushed_at,
            message: self.message.clone(),
            metadata: self.metadata.clone(),
            manifest_files: self.manifest_files.clone(),
        }
    }
}

fn invalid(reason: String) -> FormatError {
    FormatError::InvalidData {
        what: "snapshot",
        reason,
    }
}

/// What a snapshot file says besides its node table: the commit facts an ancestry
/// listing (`log`), a time-travel lookup or a check that a snapshot exists needs.
/// [`SnapshotHeader::decode`] reads them without decoding, or verifying, the node
/// table, so its cost does not grow with the number of nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct SnapshotHeader {
    /// The format version of its file.
    pub spec_version: SpecVersion,
    /// The snapshot's id (also its file name).
    pub id: SnapshotId,
    /// The previous snapshot on its branch; `None` only for the initial snapshot.
    /// Spec-2 files do not hold it: the repository fills it in from the `repo`
    /// object's parent links.
    pub parent_id: Option<SnapshotId>,
    /// Commit time, in microseconds since the Unix epoch.
    pub flushed_at: u64,
    /// Commit message.
    pub message: String,
    /// Commit metadata: JSON values by name.
    pub metadata: BTreeMap<String, serde_json::Value>,
    /// Every manifest file any node points to.
    pub manifest_files: Vec<ManifestFileInfo>,
}

/// How much of a snapshot's payload [`SnapshotHeader::decode`] decompresses first,
/// in bytes (64 KiB); it decompresses 4 times more each time the header fields do
/// not lie within what it has.
const HEADER_PREFIX_BYTES: usize = 64 << 10;

impl SnapshotHeader {
    /// Decodes the commit facts of a snapshot file, without its node table.
    ///
    /// The flatbuffer's root table and the fields read (id, parent id, flush time,
    /// message, metadata, manifest files) are verified, the node table is not (only
    /// its presence is checked). Files floe writes hold these fields at the front of
    /// the payload, before the node table, and only the first 64 KiB of the payload
    /// are decompressed when they lie within it. Icechunk writes them at the back,
    /// after the nodes: then the payload is decompressed to its end but only its
    /// first 64 KiB and its back are kept (the nodes are dropped as they are
    /// decompressed). Otherwise more of the payload is decompressed, 4 times as
    /// much each time, up to the whole of it.
    ///
    /// # Errors
    /// As [`Snapshot::decode`], for the envelope and the fields read.
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let mut payload = envelope::PayloadPrefix::open(FileType::Snapshot, bytes)?;
        let spec = payload.spec_version();
        payload.fill(HEADER_PREFIX_BYTES)?;
        match HeaderRoot::verify(payload.data()) {
            Ok(root) => return read_header(spec, &root),
            Err(FormatError::InvalidFlatbuffer { .. }) if !payload.is_complete() => {}
            Err(e) => return Err(e),
        }
        // The fields lie further: at the back (Icechunk's layout), read the front
        // and the back only.
        if let Some(plan) = TailPlan::of(payload.data(), payload.declared_len()) {
            let mut sparse = payload.into_without(plan.keep, plan.from)?;
            if plan.patch(&mut sparse) {
                if let Ok(root) = HeaderRoot::verify(&sparse) {
                    return read_header(spec, &root);
                }
            }
            payload = envelope::PayloadPrefix::open(FileType::Snapshot, bytes)?;
        }
        let mut want = HEADER_PREFIX_BYTES.saturating_mul(4);
        loop {
            payload.fill(want)?;
            match HeaderRoot::verify(payload.data()) {
                Ok(root) => return read_header(spec, &root),
                // What is decompressed so far may end before a field does.
                Err(FormatError::InvalidFlatbuffer { .. }) if !payload.is_complete() => {
                    want = want.saturating_mul(4);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The commit time as a UTC date-time.
    pub fn flushed_at_time(&self) -> DateTime<Utc> {
        micros_to_time(self.flushed_at)
    }
}

/// How to read the header fields of a snapshot payload that lie past its first
/// bytes without the middle: Icechunk creates them before the nodes, so they lie at
/// the back of the flatbuffer and its root table at the front. The payload is read
/// without bytes `keep..from` (the nodes), and the root table's offsets to the
/// fields moved back by the bytes left out. The result is verified as any header:
/// a file laid out otherwise fails verification, and is then read from its start.
#[derive(Debug)]
struct TailPlan {
    keep: usize,
    from: usize,
    /// Positions (in the kept front) of the root table's offset fields to move
    /// back, with their new values.
    offsets: Vec<(usize, u32)>,
}

impl TailPlan {
    /// The plan for a payload whose first bytes are `front` and whose size the frame
    /// declares as `declared`; `None` when the root table or its offsets to the
    /// fields past `front` are not in `front`, or (with a declared size) when
    /// leaving out the middle would keep more than it leaves out: floe's own layout
    /// with a header longer than `front`, which is better read from the start.
    /// Frames without a declared size are Icechunk's (a streaming encoder), whose
    /// layout the plan is for.
    fn of(front: &[u8], declared: Option<u64>) -> Option<Self> {
        let u32_at = |pos: usize| -> Option<u32> {
            Some(u32::from_le_bytes(
                front.get(pos..pos.checked_add(4)?)?.try_into().ok()?,
            ))
        };
        let u16_at = |pos: usize| -> Option<u16> {
            Some(u16::from_le_bytes(
                front.get(pos..pos.checked_add(2)?)?.try_into().ok()?,
            ))
        };
        // Multiples of 8 keep every item's alignment.
        let keep = front.len() / 8 * 8;
        let root = usize::try_from(u32_at(0)?).ok()?;
        let soffset = i64::from(i32::from_le_bytes(u32_at(root)?.to_le_bytes()));
        let vtable = usize::try_from(i64::try_from(root).ok()?.checked_sub(soffset)?).ok()?;
        let vtable_len = usize::from(u16_at(vtable)?);
        let mut far = Vec::new();
        for field in [
            gen::Snapshot::VT_MESSAGE,
            gen::Snapshot::VT_METADATA,
            gen::Snapshot::VT_MANIFEST_FILES,
            gen::Snapshot::VT_MANIFEST_FILES_V2,
        ] {
            let field = usize::from(field);
            if field + 2 > vtable_len {
                continue;
            }
            let at = usize::from(u16_at(vtable.checked_add(field)?)?);
            if at == 0 {
                continue;
            }
            let pos = root.checked_add(at)?;
            let offset = u32_at(pos)?;
            let target = pos.checked_add(usize::try_from(offset).ok()?)?;
            if target >= keep {
                if pos + 4 > keep {
                    return None;
                }
                far.push((pos, offset, target));
            }
        }
        let from = far.iter().map(|f| f.2).min()? / 8 * 8;
        let left_out = from.checked_sub(keep)?;
        if let Some(total) = declared {
            let kept = total.checked_sub(u64::try_from(from).ok()?)?;
            if kept >= u64::try_from(left_out).ok()? {
                return None;
            }
        }
        let gap = u32::try_from(left_out).ok()?;
        let offsets = far
            .into_iter()
            .map(|(pos, offset, _)| Some((pos, offset.checked_sub(gap)?)))
            .collect::<Option<Vec<_>>>()?;
        Some(TailPlan {
            keep,
            from,
            offsets,
        })
    }

    /// Moves the offsets in `sparse` (the payload without `keep..from`); `false`
    /// when it is too short to hold them.
    fn patch(&self, sparse: &mut [u8]) -> bool {
        for &(pos, offset) in &self.offsets {
            match sparse.get_mut(pos..pos + 4) {
                Some(slot) => slot.copy_from_slice(&offset.to_le_bytes()),
                None => return false,
            }
        }
        true
    }
}

/// A snapshot flatbuffer's root table of which (at least) the header fields are
/// verified: its methods read only those.
struct HeaderRoot<'a>(gen::Snapshot<'a>);

impl<'a> HeaderRoot<'a> {
    /// Verifies the root table of `buf` (a whole snapshot flatbuffer or a prefix of
    /// one) and the fields [`SnapshotHeader`] reads, and that the node table is
    /// present, without reading the node table.
    ///
    /// # Errors
    /// [`FormatError::InvalidFlatbuffer`].
    fn verify(buf: &'a [u8]) -> Result<Self, FormatError> {
        use flatbuffers::{ForwardsUOffset as Off, InvalidFlatbuffer, Vector};
        type S<'b> = gen::Snapshot<'b>;
        let verify = |v: &mut flatbuffers::Verifier<'_, 'a>, pos: usize| {
            let mut table = v.visit_table(pos)?;
            if table.deref(S::VT_NODES)?.is_none() {
                return InvalidFlatbuffer::new_missing_required("nodes");
            }
            table
                .visit_field::<gen::ObjectId12>("id", S::VT_ID, true)?
                .visit_field::<gen::ObjectId12>("parent_id", S::VT_PARENT_ID, false)?
                .visit_field::<u64>("flushed_at", S::VT_FLUSHED_AT, false)?
                .visit_field::<Off<&str>>("message", S::VT_MESSAGE, true)?
                .visit_field::<Off<Vector<'_, Off<gen::MetadataItem>>>>(
                    "metadata",
                    S::VT_METADATA,
                    true,
                )?
                .visit_field::<Off<Vector<'_, gen::ManifestFileInfo>>>(
                    "manifest_files",
                    S::VT_MANIFEST_FILES,
                    true,
                )?
                .visit_field::<Off<Vector<'_, Off<gen::ManifestFileInfoV2>>>>(
                    "manifest_files_v2",
                    S::VT_MANIFEST_FILES_V2,
                    false,
                )?
                .finish();
            Ok(())
        };
        // SAFETY: `verify` visits the root table and every field the methods of
        // `HeaderRoot` read, and they read no other.
        let root = unsafe { fb::partly_verified_root::<gen::Snapshot>("snapshot", buf, verify)? };
        Ok(HeaderRoot(root))
    }
}

/// The commit facts of a verified root.
///
/// # Errors
/// [`FormatError::InvalidData`] for undecodable metadata or a manifest file entry
/// without id.
fn read_header(spec: SpecVersion, root: &HeaderRoot<'_>) -> Result<SnapshotHeader, FormatError> {
    let root = &root.0;
    let mut metadata = BTreeMap::new();
    for item in root.metadata() {
        let value = decode_metadata_value(spec, item.value().bytes())
            .map_err(|e| invalid(format!("metadata `{}`: {e}", item.name())))?;
        metadata.insert(item.name().to_string(), value);
    }
    // Spec 2 lists manifest files in `manifest_files_v2` (the old field empty).
    let manifest_files = match root.manifest_files_v2() {
        Some(files) => files
            .iter()
            .map(|f| {
                let id = f
                    .id()
                    .ok_or_else(|| invalid("a manifest file entry has no id".into()))?;
                Ok(ManifestFileInfo {
                    id: fb::id12(id),
                    size_bytes: f.size_bytes(),
                    num_chunk_refs: f.num_chunk_refs(),
                })
            })
            .collect::<Result<Vec<_>, FormatError>>()?,
        None => root
            .manifest_files()
            .iter()
            .map(|f| ManifestFileInfo {
                id: fb::id12(f.id()),
                size_bytes: f.size_bytes(),
                num_chunk_refs: f.num_chunk_refs(),
            })
            .collect(),
    };
    Ok(SnapshotHeader {
        spec_version: spec,
        id: fb::id12(root.id()),
        parent_id: root.parent_id().map(fb::id12),
        flushed_at: root.flushed_at(),
        message: root.message().to_string(),
        metadata,
        manifest_files,
    })
}

/// A snapshot file's node table, read one node at a time: `floe ls` lists a
/// snapshot of a million nodes holding the decompressed flatbuffer and one decoded
/// node at a time, not a decoded tree ([`Snapshot::nodes`]) beside it.
///
/// [`SnapshotNodes::decode`] verifies the whole flatbuffer once; nodes are decoded
/// (and their content checked as [`Snapshot::decode`] checks it) as they are read.
pub struct SnapshotNodes {
    spec: SpecVersion,
    /// The verified flatbuffer; never changed after verification.
    buf: Vec<u8>,
    /// The indices of the nodes in path order when the file does not list them in
    /// that order (files floe and Icechunk write do; `None` then).
    order: Option<Vec<u32>>,
}

impl std::fmt::Debug for SnapshotNodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotNodes")
            .field("spec", &self.spec)
            .field("id", &self.id())
            .field("nodes", &self.len())
            .finish()
    }
}

impl SnapshotNodes {
    /// Decompresses and verifies a snapshot file, and checks that no two nodes
    /// share a path.
    ///
    /// # Errors
    /// As [`Snapshot::decode`]: envelope errors, [`FormatError::InvalidFlatbuffer`],
    /// [`FormatError::InvalidData`] when two nodes share a path or a node has more
    /// than `u32::MAX` siblings.
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let (spec, buf) = envelope::open_versioned(FileType::Snapshot, bytes)?;
        let nodes = fb::verified_root::<gen::Snapshot>("snapshot", &buf)?.nodes();
        let mut sorted = true;
        for i in 1..nodes.len() {
            match nodes.get(i - 1).path().cmp(nodes.get(i).path()) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => {
                    return Err(invalid("two nodes share one path".into()))
                }
                std::cmp::Ordering::Greater => sorted = false,
            }
        }
        let order = if sorted {
            None
        } else {
            let n =
                u32::try_from(nodes.len()).map_err(|_| invalid("more than 2^32 nodes".into()))?;
            let mut order: Vec<u32> = (0..n).collect();
            order.sort_by(|&a, &b| {
                nodes
                    .get(a as usize)
                    .path()
                    .cmp(nodes.get(b as usize).path())
            });
            if order
                .windows(2)
                .any(|w| nodes.get(w[0] as usize).path() == nodes.get(w[1] as usize).path())
            {
                return Err(invalid("two nodes share one path".into()));
            }
            Some(order)
        };
        Ok(SnapshotNodes { spec, buf, order })
    }

    /// The verified root table.
    fn root(&self) -> gen::Snapshot<'_> {
        // SAFETY: `buf` passed `verified_root` (the whole flatbuffer) in `decode` and
        // has not changed since.
        unsafe { flatbuffers::root_unchecked::<gen::Snapshot>(&self.buf) }
    }

    /// The file's spec version.
    pub fn spec_version(&self) -> SpecVersion {
        self.spec
    }

    /// The id the file holds.
    pub fn id(&self) -> SnapshotId {
        fb::id12(self.root().id())
    }

    /// How many nodes the snapshot has.
    pub fn len(&self) -> usize {
        self.root().nodes().len()
    }

    /// Whether the snapshot has no nodes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The nodes at and below `path` (every node for the root), in path order,
    /// each decoded as it is read. A node breaking a format rule is an `Err` item.
    pub fn under(&self, path: &NodePath) -> NodesUnder<'_> {
        let nodes = self.root().nodes();
        let order = self.order.as_deref();
        let at = |k: usize| match order {
            Some(o) => o[k] as usize,
            None => k,
        };
        // The first node whose path is not below `path` in byte order.
        let (mut lo, mut hi) = (0, nodes.len());
        if !path.is_root() {
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if nodes.get(at(mid)).path() < path.as_str() {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
        }
        NodesUnder {
            nodes,
            order,
            next: lo,
            path: path.clone(),
        }
    }
}

/// The nodes of a [`SnapshotNodes`] at and below a path; see
/// [`SnapshotNodes::under`].
pub struct NodesUnder<'a> {
    nodes: flatbuffers::Vector<'a, flatbuffers::ForwardsUOffset<gen::NodeSnapshot<'a>>>,
    order: Option<&'a [u32]>,
    /// The position, in path order, of the next node to look at.
    next: usize,
    path: NodePath,
}

impl std::fmt::Debug for NodesUnder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodesUnder")
            .field("path", &self.path)
            .field("next", &self.next)
            .finish()
    }
}

impl Iterator for NodesUnder<'_> {
    type Item = Result<NodeSnapshot, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        let prefix = self.path.as_str();
        while self.next < self.nodes.len() {
            let k = self.next;
            let n = self.nodes.get(match self.order {
                Some(o) => o[k] as usize,
                None => k,
            });
            let path = n.path();
            if self.path.is_root() {
                self.next += 1;
                return Some(read_node(&n));
            }
            // Paths below `/a` sort among those that start with `/a`, which come
            // together in byte order, after `/a` itself and mixed with `/a-b`.
            let Some(rest) = path.strip_prefix(prefix) else {
                self.next = self.nodes.len();
                return None;
            };
            self.next += 1;
            if rest.is_empty() || rest.starts_with('/') {
                return Some(read_node(&n));
            }
        }
        None
    }
}

fn write_node<'a>(
    b: &mut FlatBufferBuilder<'a>,
    n: &NodeSnapshot,
    spec: SpecVersion,
) -> flatbuffers::WIPOffset<gen::NodeSnapshot<'a>> {
    let path = b.create_string(n.path.as_str());
    let user_data = b.create_vector(&n.user_data[..]);
    let (kind, data) = match &n.node_data {
        NodeData::Group => (
            gen::NodeData::Group,
            gen::GroupNodeData::create(b, &gen::GroupNodeDataArgs {}).as_union_value(),
        ),
        NodeData::Array(a) => {
            let (shape, shape_v2) = match spec {
                SpecVersion::V1 => {
                    let shape: Vec<gen::DimensionShape> = a
                        .shape
                        .iter()
                        .map(|d| gen::DimensionShape::new(d.array_length, d.spec1_chunk_length()))
                        .collect();
                    (b.create_vector(&shape), None)
                }
                SpecVersion::V2 => {
                    let dims: Vec<_> = a
                        .shape
                        .iter()
                        .map(|d| {
                            gen::DimensionShapeV2::create(
                                b,
                                &gen::DimensionShapeV2Args {
                                    array_length: d.array_length,
                                    num_chunks: u32::try_from(d.num_chunks).unwrap_or(u32::MAX),
                                },
                            )
                        })
                        .collect();
                    let dims = b.create_vector(&dims);
                    (b.create_vector::<gen::DimensionShape>(&[]), Some(dims))
                }
            };
            let names = a.dimension_names.as_ref().map(|names| {
                let names: Vec<_> = names
                    .iter()
                    .map(|name| {
                        let name = name.as_ref().map(|s| b.create_string(s));
                        gen::DimensionName::create(b, &gen::DimensionNameArgs { name })
                    })
                    .collect();
                b.create_vector(&names)
            });
            let manifests: Vec<_> = a
                .manifests
                .iter()
                .map(|m| {
                    let extents: Vec<gen::ChunkIndexRange> = m
                        .extents
                        .iter()
                        .map(|r| gen::ChunkIndexRange::new(r.start, r.end))
                        .collect();
                    let extents = b.create_vector(&extents);
                    let oid = fb::fb12(&m.object_id);
                    gen::ManifestRef::create(
                        b,
                        &gen::ManifestRefArgs {
                            object_id: Some(&oid),
                            extents: Some(extents),
                        },
                    )
                })
                .collect();
            let manifests = b.create_vector(&manifests);
            (
                gen::NodeData::Array,
                gen::ArrayNodeData::create(
                    b,
                    &gen::ArrayNodeDataArgs {
                        shape: Some(shape),
                        shape_v2,
                        dimension_names: names,
                        manifests: Some(manifests),
                    },
                )
                .as_union_value(),
            )
        }
    };
    let id = fb::fb8(&n.id);
    gen::NodeSnapshot::create(
        b,
        &gen::NodeSnapshotArgs {
            id: Some(&id),
            path: Some(path),
            user_data: Some(user_data),
            node_data_type: kind,
            node_data: Some(data),
            ..Default::default()
        },
    )
}

fn read_node(n: &gen::NodeSnapshot<'_>) -> Result<NodeSnapshot, FormatError> {
    let path = NodePath::new(n.path()).map_err(|e| FormatError::InvalidData {
        what: "snapshot",
        reason: e.to_string(),
    })?;
    let node_data = match n.node_data_type() {
        gen::NodeData::Group => NodeData::Group,
        gen::NodeData::Array => {
            let a = n
                .node_data_as_array()
                .ok_or_else(|| FormatError::InvalidData {
                    what: "snapshot",
                    reason: format!("array node `{path}` has no array data"),
                })?;
            let shape = match a.shape_v2() {
                Some(v2) => v2
                    .iter()
                    .map(|d| shape_from_v2(&path, d.array_length(), d.num_chunks()))
                    .collect::<Result<Vec<_>, FormatError>>()?,
                None => a
                    .shape()
                    .iter()
                    .map(|d| DimensionShape::regular(d.array_length(), d.chunk_length()))
                    .collect(),
            };
            let data = ArrayData {
                shape,
                dimension_names: a
                    .dimension_names()
                    .map(|names| names.iter().map(|d| d.name().map(str::to_string)).collect()),
                manifests: a
                    .manifests()
                    .iter()
                    .map(|m| ManifestRef {
                        object_id: fb::id12(m.object_id()),
                        extents: m.extents().iter().map(|r| r.from()..r.to()).collect(),
                    })
                    .collect(),
            };
            if let Some(m) = data
                .manifests
                .iter()
                .find(|m| m.extents.len() != data.shape.len())
            {
                return Err(FormatError::InvalidData {
                    what: "snapshot",
                    reason: format!(
                        "array `{path}` has rank {} but its manifest {} has extents of rank {}",
                        data.shape.len(),
                        m.object_id,
                        m.extents.len()
                    ),
                });
            }
            NodeData::Array(data)
        }
        other => {
            return Err(FormatError::InvalidData {
                what: "snapshot",
                reason: format!("node `{path}` has unknown node data type {}", other.0),
            })
        }
    };
    Ok(NodeSnapshot {
        id: fb::id8(n.id()),
        path,
        user_data: Bytes::copy_from_slice(n.user_data().bytes()),
        node_data,
    })
}

/// A spec-2 dimension (length and number of chunks).
///
/// # Errors
/// [`FormatError::InvalidData`] for a non-empty dimension with no chunks.
fn shape_from_v2(
    path: &NodePath,
    array_length: u64,
    num_chunks: u32,
) -> Result<DimensionShape, FormatError> {
    if array_length != 0 && num_chunks == 0 {
        return Err(FormatError::InvalidData {
            what: "snapshot",
            reason: format!(
                "array `{path}` has a dimension of {array_length} elements in 0 chunks"
            ),
        });
    }
    Ok(DimensionShape::new(array_length, u64::from(num_chunks)))
}

/// The current time in microseconds since the Unix epoch.
pub fn now_micros() -> u64 {
    u64::try_from(Utc::now().timestamp_micros()).unwrap_or(0)
}

/// Converts microseconds since the Unix epoch to a UTC date-time.
pub fn micros_to_time(micros: u64) -> DateTime<Utc> {
    Utc.timestamp_micros(i64::try_from(micros).unwrap_or(i64::MAX))
        .single()
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spec-1 snapshot of the given node paths (groups), with a message of
    /// `message_len` bytes, metadata and a manifest file.
    fn sample(paths: &[String], message_len: usize) -> Snapshot {
        let mut s = Snapshot::initial(SpecVersion::V1);
        s.id = SnapshotId::random();
        s.parent_id = Some(SnapshotId::INITIAL);
        s.message = "m".repeat(message_len);
        s.metadata.insert(
            "author".into(),
            serde_json::json!({"name": "x", "n": [1, 2]}),
        );
        s.manifest_files.push(ManifestFileInfo {
            id: ManifestId::random(),
            size_bytes: 1234,
            num_chunk_refs: 7,
        });
        for p in paths {
            let path = NodePath::new(p).unwrap();
            s.nodes.insert(
                path.clone(),
                NodeSnapshot {
                    id: NodeId::random(),
                    path,
                    user_data: Bytes::from(format!(r#"{{"node_type":"group","p":"{p}"}}"#)),
                    node_data: NodeData::Group,
                },
            );
        }
        s
    }

    /// A spec-1 file of `s` laid out as floe does not write it: the commit facts
    /// created first (so they lie at the back of the flatbuffer, after the nodes),
    /// and the nodes in `order` (indices into `s.nodes` in path order).
    fn encode_other_layout(s: &Snapshot, order: &[usize]) -> Vec<u8> {
        let mut b = FlatBufferBuilder::new();
        let message = b.create_string(&s.message);
        let items: Vec<_> = s
            .metadata
            .iter()
            .map(|(k, v)| {
                let name = b.create_string(k);
                let value = b.create_vector(&rmp_serde::to_vec(v).unwrap());
                gen::MetadataItem::create(
                    &mut b,
                    &gen::MetadataItemArgs {
                        name: Some(name),
                        value: Some(value),
                    },
                )
            })
            .collect();
        let metadata = b.create_vector(&items);
        let files: Vec<gen::ManifestFileInfo> = s
            .manifest_files
            .iter()
            .map(|f| gen::ManifestFileInfo::new(&fb::fb12(&f.id), f.size_bytes, f.num_chunk_refs))
            .collect();
        let files = b.create_vector(&files);
        let all: Vec<&NodeSnapshot> = s.nodes.values().collect();
        let nodes: Vec<_> = order
            .iter()
            .map(|&i| write_node(&mut b, all[i], SpecVersion::V1))
            .collect();
        let nodes = b.create_vector(&nodes);
        let id = fb::fb12(&s.id);
        let parent = s.parent_id.as_ref().map(fb::fb12);
        let root = gen::Snapshot::create(
            &mut b,
            &gen::SnapshotArgs {
                id: Some(&id),
                parent_id: parent.as_ref(),
                nodes: Some(nodes),
                flushed_at: s.flushed_at,
                message: Some(message),
                metadata: Some(metadata),
                manifest_files: Some(files),
                ..Default::default()
            },
        );
        b.finish(root, Some(fb::IDENTIFIER));
        envelope::seal_at(FileType::Snapshot, SpecVersion::V1, 3, b.finished_data()).unwrap()
    }

    fn paths(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("/n{i:05}")).collect()
    }

    #[test]
    fn header_reads_files_of_any_layout() {
        // Commit facts after 5,000 nodes (far past the first 64 KiB); a message
        // longer than the first prefix; the floe layout.
        let s = sample(&paths(5_000), 10);
        let order: Vec<usize> = (0..s.nodes.len()).collect();
        let other = encode_other_layout(&s, &order);
        let long = sample(&paths(100), 300 << 10);
        for (bytes, s) in [
            (other, &s),
            (long.encode().unwrap(), &long),
            (s.encode().unwrap(), &s),
        ] {
            let header = SnapshotHeader::decode(&bytes).unwrap();
            assert_eq!(header, s.header());
            assert_eq!(header, Snapshot::decode(&bytes).unwrap().header());
        }
    }

    #[test]
    fn header_past_the_nodes_is_read_without_them() {
        let s = sample(&paths(5_000), 10);
        let order: Vec<usize> = (0..s.nodes.len()).collect();
        let bytes = encode_other_layout(&s, &order);
        let mut payload = envelope::PayloadPrefix::open(FileType::Snapshot, &bytes).unwrap();
        payload.fill(HEADER_PREFIX_BYTES).unwrap();
        assert!(HeaderRoot::verify(payload.data()).is_err());
        let plan = TailPlan::of(payload.data(), payload.declared_len()).unwrap();
        let whole = usize::try_from(payload.declared_len().unwrap()).unwrap();
        let mut sparse = payload.into_without(plan.keep, plan.from).unwrap();
        assert!(
            sparse.len() < HEADER_PREFIX_BYTES + 4096,
            "{}",
            sparse.len()
        );
        assert!(whole > 4 * HEADER_PREFIX_BYTES, "{whole}");
        assert!(plan.patch(&mut sparse));
        let root = HeaderRoot::verify(&sparse).unwrap();
        assert_eq!(read_header(SpecVersion::V1, &root).unwrap(), s.header());
        // floe's layout: the fields are in the first bytes, no plan is needed; with
        // a message longer than those, none is made (it starts at the front).
        // Without a declared size (Icechunk's streaming encoder): the same plan.
        let flatbuffer = envelope::open(FileType::Snapshot, &bytes).unwrap();
        let mut streamed = bytes[..envelope::HEADER_LEN].to_vec();
        let mut enc = zstd::stream::write::Encoder::new(&mut streamed, 3).unwrap();
        enc.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut enc, &flatbuffer).unwrap();
        enc.finish().unwrap();
        let mut payload = envelope::PayloadPrefix::open(FileType::Snapshot, &streamed).unwrap();
        assert_eq!(payload.declared_len(), None);
        payload.fill(HEADER_PREFIX_BYTES).unwrap();
        let plan = TailPlan::of(payload.data(), None).unwrap();
        assert!(
            payload.into_without(plan.keep, plan.from).unwrap().len() < HEADER_PREFIX_BYTES + 4096
        );
        assert_eq!(SnapshotHeader::decode(&streamed).unwrap(), s.header());
        let long = sample(&paths(10), 300 << 10).encode().unwrap();
        let mut payload = envelope::PayloadPrefix::open(FileType::Snapshot, &long).unwrap();
        payload.fill(HEADER_PREFIX_BYTES).unwrap();
        assert!(TailPlan::of(payload.data(), payload.declared_len()).is_none());
    }

    /// Mutated files of Icechunk's layout (header fields at the back): reading the
    /// header returns it or a typed error, never panics.
    #[test]
    fn mutated_back_headers_fail_cleanly() {
        use rand::{Rng, SeedableRng};
        let s = sample(&paths(3_000), 10);
        let order: Vec<usize> = (0..s.nodes.len()).collect();
        let payload = envelope::open(FileType::Snapshot, &encode_other_layout(&s, &order)).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(6);
        let hot = [0..64, payload.len() - 512..payload.len()];
        for round in 0..2_000 {
            let mut p = payload.clone();
            for _ in 0..rng.random_range(1..4) {
                // Mostly the root table and the fields at the back.
                let range = hot[round % 2].clone();
                let i = rng.random_range(range);
                p[i] = rng.random();
            }
            let sealed = envelope::seal(FileType::Snapshot, &p).unwrap();
            let _ = SnapshotHeader::decode(&sealed);
        }
    }

    #[test]
    fn node_listing_sorts_unsorted_files_and_refuses_shared_paths() {
        let s = sample(&paths(300), 10);
        let reversed: Vec<usize> = (0..s.nodes.len()).rev().collect();
        let bytes = encode_other_layout(&s, &reversed);
        assert_eq!(Snapshot::decode(&bytes).unwrap(), s);
        let nodes = SnapshotNodes::decode(&bytes).unwrap();
        let listed: Vec<_> = nodes
            .under(&NodePath::root())
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(listed, s.nodes.values().cloned().collect::<Vec<_>>());
        let one: Vec<_> = nodes
            .under(&NodePath::new("/n00123").unwrap())
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            one,
            vec![s.nodes[&NodePath::new("/n00123").unwrap()].clone()]
        );
        for order in [vec![0, 1, 1, 2], vec![2, 1, 1, 0]] {
            let shared = encode_other_layout(&s, &order);
            assert!(matches!(
                Snapshot::decode(&shared),
                Err(FormatError::InvalidData { .. })
            ));
            assert!(matches!(
                SnapshotNodes::decode(&shared),
                Err(FormatError::InvalidData { .. })
            ));
        }
    }
}
