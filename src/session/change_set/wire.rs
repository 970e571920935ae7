//! The serialized form of a change set, as forks carry it between processes.
//!
//! MessagePack (`rmp-serde`, positional fields) of plain integers, strings and byte
//! strings: ids are big-endian integers, chunk indices lists of integers, payloads
//! tagged by kind. A native chunk ref takes about 25–30 bytes. Decoding validates
//! what the types cannot: node paths, id lengths. What depends on the repository
//! (nodes existing, indices inside chunk grids) is checked where the change set is
//! merged.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use crate::format::manifest::{
    Checksum, ChunkPayload, ChunkPayloadRef, NativeChunkRef, VirtualChunkRef,
};
use crate::format::snapshot::DimensionShape;
use crate::format::{ChunkId, ChunkIndices, NodeId, NodePath};

use super::{ArrayDefinition, ChangeSet, NewNode};

type Node = u64;
type Chunk = (u64, u32);
/// The chunk changes of one array.
type ArrayChunks = (Node, Vec<(ChunkIndices, Option<Payload>)>);

#[derive(Serialize, Deserialize)]
enum Payload {
    Inline(ByteBuf),
    Native(Chunk, u64, u64),
    Virtual(String, u64, u64, Option<Sum>),
}

#[derive(Serialize, Deserialize)]
enum Sum {
    ETag(String),
    LastModified(u32),
}

#[derive(Serialize, Deserialize)]
struct Definition {
    /// `(array_length, num_chunks)` per dimension.
    shape: Vec<(u64, u64)>,
    dimension_names: Option<Vec<Option<String>>>,
    user_data: ByteBuf,
}

#[derive(Serialize, Deserialize)]
enum Created {
    Group(ByteBuf),
    Array(Definition),
}

/// Every field of a [`ChangeSet`], in wire types.
#[derive(Serialize, Deserialize)]
pub(crate) struct Wire {
    new_nodes: Vec<(String, Node, Created)>,
    updated_groups: Vec<(Node, ByteBuf)>,
    updated_arrays: Vec<(Node, Definition)>,
    deleted_groups: Vec<(Node, String)>,
    deleted_arrays: Vec<(Node, String)>,
    chunks: Vec<ArrayChunks>,
}

fn bin(b: &Bytes) -> ByteBuf {
    ByteBuf::from(b.to_vec())
}

fn node_to_wire(id: &NodeId) -> Node {
    u64::from_be_bytes(*id.as_bytes())
}

fn node_from_wire(n: Node) -> NodeId {
    NodeId::new(n.to_be_bytes())
}

fn chunk_to_wire(id: &ChunkId) -> Chunk {
    let b = id.as_bytes();
    let mut hi = [0u8; 8];
    let mut lo = [0u8; 4];
    hi.copy_from_slice(&b[..8]);
    lo.copy_from_slice(&b[8..]);
    (u64::from_be_bytes(hi), u32::from_be_bytes(lo))
}

fn chunk_from_wire((hi, lo): Chunk) -> ChunkId {
    let mut b = [0u8; 12];
    b[..8].copy_from_slice(&hi.to_be_bytes());
    b[8..].copy_from_slice(&lo.to_be_bytes());
    ChunkId::new(b)
}

fn definition_to_wire(d: &ArrayDefinition) -> Definition {
    Definition {
        shape: d
            .shape
            .iter()
            .map(|s| (s.array_length, s.num_chunks))
            .collect(),
        dimension_names: d.dimension_names.clone(),
        user_data: bin(&d.user_data),
    }
}

fn definition_from_wire(d: Definition) -> ArrayDefinition {
    ArrayDefinition {
        shape: d
            .shape
            .into_iter()
            .map(|(array_length, num_chunks)| DimensionShape::new(array_length, num_chunks))
            .collect(),
        dimension_names: d.dimension_names,
        user_data: Bytes::from(d.user_data.into_vec()),
    }
}

fn payload_to_wire(p: ChunkPayloadRef<'_>) -> Payload {
    match p {
        ChunkPayloadRef::Inline(b) => Payload::Inline(bin(b)),
        ChunkPayloadRef::Native(n) => Payload::Native(chunk_to_wire(&n.id), n.offset, n.length),
        ChunkPayloadRef::Virtual {
            location,
            offset,
            length,
            checksum,
        } => Payload::Virtual(
            location.to_string(),
            offset,
            length,
            checksum.map(|c| match c {
                Checksum::ETag(e) => Sum::ETag(e.clone()),
                Checksum::LastModified(t) => Sum::LastModified(*t),
            }),
        ),
    }
}

fn payload_from_wire(p: Payload) -> ChunkPayload {
    match p {
        Payload::Inline(b) => ChunkPayload::Inline(Bytes::from(b.into_vec())),
        Payload::Native(id, offset, length) => ChunkPayload::Native(NativeChunkRef {
            id: chunk_from_wire(id),
            offset,
            length,
        }),
        Payload::Virtual(location, offset, length, checksum) => {
            ChunkPayload::Virtual(VirtualChunkRef {
                location,
                offset,
                length,
                checksum: checksum.map(|c| match c {
                    Sum::ETag(e) => Checksum::ETag(e),
                    Sum::LastModified(t) => Checksum::LastModified(t),
                }),
            })
        }
    }
}

fn path(s: &str) -> Result<NodePath, String> {
    NodePath::new(s).map_err(|e| format!("node path `{s}`: {e}"))
}

impl Wire {
    /// The wire form of `c`.
    pub(crate) fn from_change_set(c: &ChangeSet) -> Self {
        Wire {
            new_nodes: c
                .new_nodes
                .iter()
                .map(|(p, (id, n))| {
                    let created = match n {
                        NewNode::Group(ud) => Created::Group(bin(ud)),
                        NewNode::Array(d) => Created::Array(definition_to_wire(d)),
                    };
                    (p.as_str().to_string(), node_to_wire(id), created)
                })
                .collect(),
            updated_groups: c
                .updated_groups
                .iter()
                .map(|(id, ud)| (node_to_wire(id), bin(ud)))
                .collect(),
            updated_arrays: c
                .updated_arrays
                .iter()
                .map(|(id, d)| (node_to_wire(id), definition_to_wire(d)))
                .collect(),
            deleted_groups: c
                .deleted_groups
                .iter()
                .map(|(id, p)| (node_to_wire(id), p.as_str().to_string()))
                .collect(),
            deleted_arrays: c
                .deleted_arrays
                .iter()
                .map(|(id, p)| (node_to_wire(id), p.as_str().to_string()))
                .collect(),
            chunks: c
                .chunks
                .iter()
                .filter(|(_, m)| !m.is_empty())
                .map(|(id, m)| {
                    let refs = m
                        .iter()
                        .map(|(idx, p)| (idx.to_vec(), p.map(payload_to_wire)))
                        .collect();
                    (node_to_wire(id), refs)
                })
                .collect(),
        }
    }

    /// The change set this wire form describes.
    ///
    /// # Errors
    /// A description of the first invalid value (a bad node path).
    pub(crate) fn into_change_set(self) -> Result<ChangeSet, String> {
        let mut c = ChangeSet::default();
        for (p, id, created) in self.new_nodes {
            let node = match created {
                Created::Group(ud) => NewNode::Group(Bytes::from(ud.into_vec())),
                Created::Array(d) => NewNode::Array(definition_from_wire(d)),
            };
            c.add_node(path(&p)?, node_from_wire(id), node);
        }
        c.updated_groups = self
            .updated_groups
            .into_iter()
            .map(|(id, ud)| (node_from_wire(id), Bytes::from(ud.into_vec())))
            .collect();
        c.updated_arrays = self
            .updated_arrays
            .into_iter()
            .map(|(id, d)| (node_from_wire(id), definition_from_wire(d)))
            .collect();
        for (id, p) in self.deleted_groups {
            c.deleted_groups.insert(node_from_wire(id), path(&p)?);
        }
        for (id, p) in self.deleted_arrays {
            c.deleted_arrays.insert(node_from_wire(id), path(&p)?);
        }
        for (id, refs) in self.chunks {
            let id = node_from_wire(id);
            for (idx, p) in refs {
                c.set_chunk(id, idx, p.map(payload_from_wire));
            }
        }
        Ok(c)
    }
}
