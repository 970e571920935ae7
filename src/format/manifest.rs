//! Manifest files (`manifests/<id>`): chunk refs of one or more arrays.
//!
//! Spec: Icechunk specification, "Chunk Manifest Files"; field ids in
//! `../shared/docs/icechunk-format-v1.md`, tables `Manifest`, `ArrayManifest`, `ChunkRef`.

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;
use flatbuffers::FlatBufferBuilder;

use super::envelope::{self, FileType};
use super::fb::{self, gen};
use super::{ChunkId, ChunkIndices, FormatError, ManifestId, NodeId};

/// A checksum of the object a virtual chunk ref points into; reads fail when the object
/// no longer matches it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Checksum {
    /// The object's etag at the time the ref was made.
    ETag(String),
    /// The object's last-modified time, in seconds since the Unix epoch.
    LastModified(u32),
}

/// A chunk stored in the repository: bytes `offset..offset+length` of `chunks/<id>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NativeChunkRef {
    /// The chunk object's id.
    pub id: ChunkId,
    /// Start within the object, in bytes.
    pub offset: u64,
    /// Length in bytes.
    pub length: u64,
}

/// A chunk inside an object outside the repository (e.g. a NetCDF file).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VirtualChunkRef {
    /// Absolute URL of the object (`s3://...`, `file:///...`, `https://...`).
    pub location: String,
    /// Start within the object, in bytes.
    pub offset: u64,
    /// Length in bytes.
    pub length: u64,
    /// Optional checksum of the object.
    pub checksum: Option<Checksum>,
}

/// Where a chunk's encoded bytes are: the three kinds of chunk ref.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ChunkPayload {
    /// Encoded bytes stored in the manifest itself.
    Inline(Bytes),
    /// A chunk object in the repository.
    Native(NativeChunkRef),
    /// A byte range of an external object.
    Virtual(VirtualChunkRef),
}

/// A decoded manifest: chunk refs by array node id, then by chunk index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The manifest's id (also its file name).
    pub id: ManifestId,
    /// Chunk refs of each array, sorted by node id and chunk index.
    pub arrays: BTreeMap<NodeId, BTreeMap<ChunkIndices, ChunkPayload>>,
}

impl Manifest {
    /// Total number of chunk refs.
    pub fn num_chunk_refs(&self) -> usize {
        self.arrays.values().map(BTreeMap::len).sum()
    }

    /// The chunk ref of `node` at `index`.
    pub fn get(&self, node: &NodeId, index: &[u32]) -> Option<&ChunkPayload> {
        self.arrays.get(node).and_then(|refs| refs.get(index))
    }

    /// The half-open chunk index extents of `node`'s refs, one range per dimension;
    /// `None` when the manifest holds no refs of `node`.
    pub fn extents(&self, node: &NodeId) -> Option<Vec<Range<u32>>> {
        let refs = self.arrays.get(node)?;
        let ndim = refs.keys().next()?.len();
        let mut lo = vec![u32::MAX; ndim];
        let mut hi = vec![0u32; ndim];
        for idx in refs.keys() {
            for (d, &i) in idx.iter().enumerate().take(ndim) {
                lo[d] = lo[d].min(i);
                hi[d] = hi[d].max(i.saturating_add(1));
            }
        }
        Some(lo.into_iter().zip(hi).map(|(a, b)| a..b).collect())
    }

    /// Encodes into a full manifest file (envelope + zstd + flatbuffer).
    ///
    /// # Errors
    /// [`FormatError::Compression`].
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        let mut b = FlatBufferBuilder::with_capacity(1024 + self.num_chunk_refs() * 48);
        let mut arrays = Vec::with_capacity(self.arrays.len());
        for (node, refs) in &self.arrays {
            let refs: Vec<_> = refs
                .iter()
                .map(|(index, payload)| write_ref(&mut b, index, payload))
                .collect();
            let refs = b.create_vector(&refs);
            let node_id = fb::fb8(node);
            arrays.push(gen::ArrayManifest::create(
                &mut b,
                &gen::ArrayManifestArgs {
                    node_id: Some(&node_id),
                    refs: Some(refs),
                },
            ));
        }
        let arrays = b.create_vector(&arrays);
        let id = fb::fb12(&self.id);
        let root = gen::Manifest::create(
            &mut b,
            &gen::ManifestArgs {
                id: Some(&id),
                arrays: Some(arrays),
            },
        );
        b.finish(root, Some(fb::IDENTIFIER));
        envelope::seal(FileType::Manifest, b.finished_data())
    }

    /// Decodes a manifest file.
    ///
    /// # Errors
    /// Envelope errors; [`FormatError::InvalidFlatbuffer`];
    /// [`FormatError::InvalidData`] for a chunk ref that is none of the three kinds.
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let buf = envelope::open(FileType::Manifest, bytes)?;
        let root = fb::verified_root::<gen::Manifest>("manifest", &buf)?;
        let mut arrays = BTreeMap::new();
        for a in root.arrays() {
            let node: NodeId = fb::id8(a.node_id());
            let mut refs = BTreeMap::new();
            for r in a.refs() {
                let index: ChunkIndices = r.index().iter().collect();
                let payload = read_ref(&r).ok_or_else(|| FormatError::InvalidData {
                    what: "manifest",
                    reason: format!(
                        "chunk ref {index:?} of node {node} is neither inline, native nor virtual"
                    ),
                })?;
                refs.insert(index, payload);
            }
            arrays.insert(node, refs);
        }
        Ok(Manifest {
            id: fb::id12(root.id()),
            arrays,
        })
    }
}

fn write_ref<'a>(
    b: &mut FlatBufferBuilder<'a>,
    index: &[u32],
    payload: &ChunkPayload,
) -> flatbuffers::WIPOffset<gen::ChunkRef<'a>> {
    let index = b.create_vector(index);
    let mut args = gen::ChunkRefArgs {
        index: Some(index),
        ..Default::default()
    };
    let chunk_id;
    match payload {
        ChunkPayload::Inline(bytes) => args.inline = Some(b.create_vector(&bytes[..])),
        ChunkPayload::Native(n) => {
            chunk_id = fb::fb12(&n.id);
            args.chunk_id = Some(&chunk_id);
            args.offset = n.offset;
            args.length = n.length;
        }
        ChunkPayload::Virtual(v) => {
            args.location = Some(b.create_string(&v.location));
            args.offset = v.offset;
            args.length = v.length;
            match &v.checksum {
                Some(Checksum::ETag(e)) => args.checksum_etag = Some(b.create_string(e)),
                Some(Checksum::LastModified(t)) => args.checksum_last_modified = *t,
                None => {}
            }
        }
    }
    gen::ChunkRef::create(b, &args)
}

fn read_ref(r: &gen::ChunkRef<'_>) -> Option<ChunkPayload> {
    if let Some(inline) = r.inline() {
        return Some(ChunkPayload::Inline(Bytes::copy_from_slice(inline.bytes())));
    }
    if let Some(id) = r.chunk_id() {
        return Some(ChunkPayload::Native(NativeChunkRef {
            id: fb::id12(id),
            offset: r.offset(),
            length: r.length(),
        }));
    }
    if let Some(location) = r.location() {
        let checksum = match (r.checksum_etag(), r.checksum_last_modified()) {
            (Some(e), _) => Some(Checksum::ETag(e.to_string())),
            (None, 0) => None,
            (None, t) => Some(Checksum::LastModified(t)),
        };
        return Some(ChunkPayload::Virtual(VirtualChunkRef {
            location: location.to_string(),
            offset: r.offset(),
            length: r.length(),
            checksum,
        }));
    }
    None
}
