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
use super::{FormatError, ManifestId, NodeId, NodePath, SnapshotId, SpecVersion};

/// Length of an array and of its chunks along one dimension (elements).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DimensionShape {
    /// Number of elements along the dimension.
    pub array_length: u64,
    /// Number of elements of one chunk along the dimension.
    pub chunk_length: u64,
}

impl DimensionShape {
    /// Number of chunks along the dimension (`ceil(array_length / chunk_length)`).
    pub fn num_chunks(&self) -> u64 {
        if self.chunk_length == 0 {
            0
        } else {
            self.array_length.div_ceil(self.chunk_length)
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

    /// Encodes into a full snapshot file (envelope + zstd + flatbuffer).
    ///
    /// # Errors
    /// [`FormatError::InvalidData`] when metadata cannot be encoded as MessagePack;
    /// [`FormatError::Compression`].
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        self.encode_at(envelope::DEFAULT_LEVEL)
    }

    /// [`Snapshot::encode`] at zstd level `level` (the config's `compression.level`).
    ///
    /// # Errors
    /// As [`Snapshot::encode`].
    pub fn encode_at(&self, level: i32) -> Result<Vec<u8>, FormatError> {
        let mut b = FlatBufferBuilder::with_capacity(1024 + self.nodes.len() * 256);
        let nodes: Vec<_> = self
            .nodes
            .values()
            .map(|n| write_node(&mut b, n, self.spec_version))
            .collect();
        let nodes = b.create_vector(&nodes);
        let message = b.create_string(&self.message);
        let mut items = Vec::with_capacity(self.metadata.len());
        let spec = self.spec_version;
        for (name, value) in &self.metadata {
            let packed = match spec {
                SpecVersion::V1 => rmp_serde::to_vec(value).map_err(|e| e.to_string()),
                SpecVersion::V2 => super::repo_info::encode_metadata_value(value),
            }
            .map_err(|e| FormatError::InvalidData {
                what: "snapshot metadata",
                reason: format!("cannot encode `{name}` for spec {spec}: {e}"),
            })?;
            let name = b.create_string(name);
            let value = b.create_vector(&packed);
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

    /// Decodes a snapshot file.
    ///
    /// # Errors
    /// Envelope errors (bad magic, version, file type or compression); [`FormatError::InvalidFlatbuffer`] when
    /// the flatbuffer fails verification; [`FormatError::InvalidData`] for content that
    /// breaks a format rule (bad path, unknown node type, undecodable metadata).
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let (spec, buf) = envelope::open_versioned(FileType::Snapshot, bytes)?;
        let root = fb::verified_root::<gen::Snapshot>("snapshot", &buf)?;
        let invalid = |reason: String| FormatError::InvalidData {
            what: "snapshot",
            reason,
        };
        let mut nodes = BTreeMap::new();
        for n in root.nodes() {
            let node = read_node(&n)?;
            if nodes.insert(node.path.clone(), node).is_some() {
                return Err(invalid("two nodes share one path".into()));
            }
        }
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
        Ok(Snapshot {
            spec_version: spec,
            id: fb::id12(root.id()),
            parent_id: root.parent_id().map(fb::id12),
            flushed_at: root.flushed_at(),
            message: root.message().to_string(),
            metadata,
            manifest_files,
            nodes,
        })
    }
}

/// Decodes one metadata value: MessagePack in spec 1, FlexBuffers in spec 2 (both of
/// a JSON value), as Icechunk stores the metadata of commits and, in spec 2, of the
/// repository (`icechunk-format-notes.md` §2.5). A FlexBuffers value is checked
/// before it is read (bounds, nesting up to 128 levels, decoded size linear in its
/// length; see `format::repo_info::flexbuffer`), so no input panics, loops or
/// allocates without bound.
///
/// # Errors
/// The decoder's message, or why the FlexBuffers check refused the bytes, when they
/// are not such a value.
pub fn decode_metadata_value(spec: SpecVersion, bytes: &[u8]) -> Result<serde_json::Value, String> {
    match spec {
        SpecVersion::V1 => {
            rmp_serde::from_slice(bytes).map_err(|e| format!("not MessagePack: {e}"))
        }
        SpecVersion::V2 => super::repo_info::flexbuffer::from_slice(bytes)
            .map_err(|e| format!("not FlexBuffers: {e}")),
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
                        .map(|d| gen::DimensionShape::new(d.array_length, d.chunk_length))
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
                                    num_chunks: u32::try_from(d.num_chunks()).unwrap_or(u32::MAX),
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
                    .map(|d| DimensionShape {
                        array_length: d.array_length(),
                        chunk_length: d.chunk_length(),
                    })
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

/// A spec-2 dimension (length and number of chunks) as a spec-1 one (length and chunk
/// length `ceil(length / chunks)`). For a regular chunk grid, the one floe's Zarr
/// layer supports, this gives back the same number of chunks.
///
/// # Errors
/// [`FormatError::InvalidData`] for a non-empty dimension with no chunks.
fn shape_from_v2(
    path: &NodePath,
    array_length: u64,
    num_chunks: u32,
) -> Result<DimensionShape, FormatError> {
    let chunk_length = match (array_length, num_chunks) {
        (0, _) => 0,
        (_, 0) => {
            return Err(FormatError::InvalidData {
                what: "snapshot",
                reason: format!(
                    "array `{path}` has a dimension of {array_length} elements in 0 chunks"
                ),
            })
        }
        (len, n) => len.div_ceil(u64::from(n)),
    };
    Ok(DimensionShape {
        array_length,
        chunk_length,
    })
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
