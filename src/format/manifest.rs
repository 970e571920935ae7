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
use super::{ChunkId, ChunkIndices, FormatError, ManifestId, NodeId, SpecVersion};

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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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

/// A chunk ref borrowed from wherever it is kept (a decoded manifest, a session's
/// change set, which shares one location string among many virtual refs): what
/// [`ManifestWriter`] encodes. [`ChunkPayloadRef::to_payload`] makes the owned
/// [`ChunkPayload`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkPayloadRef<'a> {
    /// Encoded bytes stored in the manifest itself.
    Inline(&'a Bytes),
    /// A chunk object in the repository.
    Native(NativeChunkRef),
    /// A byte range of an external object.
    Virtual {
        /// Absolute URL of the object.
        location: &'a str,
        /// Start within the object, in bytes.
        offset: u64,
        /// Length in bytes.
        length: u64,
        /// Optional checksum of the object.
        checksum: Option<&'a Checksum>,
    },
}

impl ChunkPayloadRef<'_> {
    /// The owned chunk ref (copies a virtual ref's location and checksum).
    pub fn to_payload(&self) -> ChunkPayload {
        match *self {
            ChunkPayloadRef::Inline(b) => ChunkPayload::Inline(b.clone()),
            ChunkPayloadRef::Native(n) => ChunkPayload::Native(n),
            ChunkPayloadRef::Virtual {
                location,
                offset,
                length,
                checksum,
            } => ChunkPayload::Virtual(VirtualChunkRef {
                location: location.to_string(),
                offset,
                length,
                checksum: checksum.cloned(),
            }),
        }
    }
}

impl<'a> From<&'a ChunkPayload> for ChunkPayloadRef<'a> {
    fn from(p: &'a ChunkPayload) -> Self {
        match p {
            ChunkPayload::Inline(b) => ChunkPayloadRef::Inline(b),
            ChunkPayload::Native(n) => ChunkPayloadRef::Native(*n),
            ChunkPayload::Virtual(v) => ChunkPayloadRef::Virtual {
                location: &v.location,
                offset: v.offset,
                length: v.length,
                checksum: v.checksum.as_ref(),
            },
        }
    }
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
    pub fn get(&self, node: &NodeId, index: &[u64]) -> Option<&ChunkPayload> {
        self.arrays.get(node).and_then(|refs| refs.get(index))
    }

    /// Checks that `node`'s chunk refs (all of one rank, as decoding ensures) have
    /// rank `rank`, the number of dimensions of the array they belong to.
    ///
    /// # Errors
    /// [`FormatError::InvalidData`] when they do not: such refs would never be found
    /// and the chunks would silently read as fill values.
    pub fn check_rank(&self, node: &NodeId, rank: usize) -> Result<(), FormatError> {
        match self.arrays.get(node).and_then(|refs| refs.keys().next()) {
            Some(index) if index.len() != rank => Err(FormatError::InvalidData {
                what: "manifest",
                reason: format!(
                    "manifest {} holds chunk indices of rank {} for node {node}, an array of \
                     rank {rank}",
                    self.id,
                    index.len()
                ),
            }),
            _ => Ok(()),
        }
    }

    /// The half-open chunk index extents of `node`'s refs, one range per dimension;
    /// `None` when the manifest holds no refs of `node`.
    pub fn extents(&self, node: &NodeId) -> Option<Vec<Range<u32>>> {
        let mut ext = Extents::default();
        for idx in self.arrays.get(node)?.keys() {
            ext.add(idx);
        }
        ext.finish()
    }

    /// Encodes into a full manifest file (envelope + zstd + flatbuffer).
    ///
    /// # Errors
    /// [`FormatError::Compression`]; [`FormatError::ChunkIndexTooLarge`].
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        let mut w = ManifestWriter::new(self.id, self.num_chunk_refs());
        for (node, refs) in &self.arrays {
            w.add_array(*node, refs.iter().map(|(k, v)| (k.as_slice(), v)))?;
        }
        Ok(w.finish()?.0)
    }

    /// Decodes a manifest file.
    ///
    /// # Errors
    /// Envelope errors; [`FormatError::InvalidFlatbuffer`];
    /// [`FormatError::InvalidData`] for a chunk ref that is none of the three kinds, or
    /// an array whose chunk indices are not all of one rank.
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let buf = envelope::open(FileType::Manifest, bytes)?;
        let root = fb::verified_root::<gen::Manifest>("manifest", &buf)?;
        // Spec 2: virtual locations may be compressed with a zstd dictionary.
        let mut locations = match (root.location_dictionary(), root.compression_algorithm()) {
            (Some(dict), 1) => Some(
                zstd::bulk::Decompressor::with_dictionary(dict.bytes()).map_err(|e| {
                    FormatError::InvalidData {
                        what: "manifest",
                        reason: format!("invalid location dictionary: {e}"),
                    }
                })?,
            ),
            _ => None,
        };
        let mut arrays = BTreeMap::new();
        for a in root.arrays() {
            let node: NodeId = fb::id8(a.node_id());
            let mut refs = BTreeMap::new();
            let mut rank = None;
            for r in a.refs() {
                let index: ChunkIndices = r.index().iter().map(u64::from).collect();
                if *rank.get_or_insert(index.len()) != index.len() {
                    return Err(FormatError::InvalidData {
                        what: "manifest",
                        reason: format!(
                            "chunk refs of node {node} mix indices of rank {} and {}",
                            rank.unwrap_or_default(),
                            index.len()
                        ),
                    });
                }
                let payload =
                    read_ref(&r, locations.as_mut())?.ok_or_else(|| FormatError::InvalidData {
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

/// Running chunk index extents: the smallest box holding every index added.
#[derive(Clone, Debug, Default)]
pub struct Extents {
    lo: Vec<u64>,
    hi: Vec<u64>,
    any: bool,
}

impl Extents {
    /// Adds one chunk index.
    pub fn add(&mut self, index: &[u64]) {
        if !self.any {
            self.lo = index.to_vec();
            self.hi = index.iter().map(|i| i.saturating_add(1)).collect();
            self.any = true;
            return;
        }
        for (d, &i) in index.iter().enumerate().take(self.lo.len()) {
            self.lo[d] = self.lo[d].min(i);
            self.hi[d] = self.hi[d].max(i.saturating_add(1));
        }
    }

    /// One half-open range per dimension, as stored (`u32`; coordinates above
    /// [`super::MAX_CHUNK_COORDINATE`] are refused before this is written, so the
    /// narrowing never saturates); `None` when nothing was added.
    pub fn finish(self) -> Option<Vec<Range<u32>>> {
        let narrow = |i: u64| u32::try_from(i).unwrap_or(u32::MAX);
        self.any.then(|| {
            self.lo
                .into_iter()
                .zip(self.hi)
                .map(|(a, b)| narrow(a)..narrow(b))
                .collect()
        })
    }
}

/// Streams chunk refs into a manifest file without materializing a [`Manifest`]:
/// arrays are added in node id order, each with its refs sorted by chunk index.
pub struct ManifestWriter {
    id: ManifestId,
    builder: FlatBufferBuilder<'static>,
    arrays: Vec<flatbuffers::WIPOffset<gen::ArrayManifest<'static>>>,
    count: u64,
    spec: SpecVersion,
}

impl ManifestWriter {
    /// A writer for manifest `id`, sized for about `estimated_refs` refs.
    pub fn new(id: ManifestId, estimated_refs: usize) -> Self {
        ManifestWriter {
            id,
            builder: FlatBufferBuilder::with_capacity(1024 + estimated_refs.saturating_mul(48)),
            arrays: Vec::new(),
            count: 0,
            spec: SpecVersion::V1,
        }
    }

    /// Writes a file of spec version `spec` (the table layout is the same in both;
    /// only the envelope's version byte differs). Spec 1 by default.
    #[must_use]
    pub fn spec_version(mut self, spec: SpecVersion) -> Self {
        self.spec = spec;
        self
    }

    /// Adds the refs of array `node` (sorted by index; arrays added in node id order),
    /// given as `&ChunkPayload` or [`ChunkPayloadRef`]. Returns the extents of the refs
    /// added, `None` when there were none (and then the array is not recorded).
    ///
    /// # Errors
    /// [`FormatError::ChunkIndexTooLarge`] for an index Icechunk cannot store.
    pub fn add_array<'r, P: Into<ChunkPayloadRef<'r>>>(
        &mut self,
        node: NodeId,
        refs: impl IntoIterator<Item = (&'r [u64], P)>,
    ) -> Result<Option<Vec<Range<u32>>>, FormatError> {
        let b = &mut self.builder;
        let mut ext = Extents::default();
        let offsets = refs
            .into_iter()
            .map(|(index, payload)| {
                ext.add(index);
                write_ref(b, index, payload.into())
            })
            .collect::<Result<Vec<_>, FormatError>>()?;
        if offsets.is_empty() {
            return Ok(None);
        }
        self.count += offsets.len() as u64;
        let refs = b.create_vector(&offsets);
        let node_id = fb::fb8(&node);
        self.arrays.push(gen::ArrayManifest::create(
            b,
            &gen::ArrayManifestArgs {
                node_id: Some(&node_id),
                refs: Some(refs),
                ..Default::default()
            },
        ));
        Ok(ext.finish())
    }

    /// Number of refs added so far.
    pub fn num_chunk_refs(&self) -> u64 {
        self.count
    }

    /// Finishes the file: returns its bytes and the number of refs.
    ///
    /// # Errors
    /// [`FormatError::Compression`].
    pub fn finish(mut self) -> Result<(Vec<u8>, u64), FormatError> {
        let arrays = self.builder.create_vector(&self.arrays);
        let id = fb::fb12(&self.id);
        let root = gen::Manifest::create(
            &mut self.builder,
            &gen::ManifestArgs {
                id: Some(&id),
                arrays: Some(arrays),
                ..Default::default()
            },
        );
        self.builder.finish(root, Some(fb::IDENTIFIER));
        Ok((
            envelope::seal_version(FileType::Manifest, self.spec, self.builder.finished_data())?,
            self.count,
        ))
    }
}

fn write_ref<'a>(
    b: &mut FlatBufferBuilder<'a>,
    index: &[u64],
    payload: ChunkPayloadRef<'_>,
) -> Result<flatbuffers::WIPOffset<gen::ChunkRef<'a>>, FormatError> {
    let index = super::write_coords(b, index)?;
    let mut args = gen::ChunkRefArgs {
        index: Some(index),
        ..Default::default()
    };
    let chunk_id;
    match payload {
        ChunkPayloadRef::Inline(bytes) => args.inline = Some(b.create_vector(&bytes[..])),
        ChunkPayloadRef::Native(n) => {
            chunk_id = fb::fb12(&n.id);
            args.chunk_id = Some(&chunk_id);
            args.offset = n.offset;
            args.length = n.length;
        }
        ChunkPayloadRef::Virtual {
            location,
            offset,
            length,
            checksum,
        } => {
            // Written in full for every ref, as Icechunk writes spec-1 manifests.
            args.location = Some(b.create_string(location));
            args.offset = offset;
            args.length = length;
            match checksum {
                Some(Checksum::ETag(e)) => args.checksum_etag = Some(b.create_string(e)),
                Some(Checksum::LastModified(t)) => args.checksum_last_modified = *t,
                None => {}
            }
        }
    }
    Ok(gen::ChunkRef::create(b, &args))
}

/// Longest virtual location a compressed location may expand to, in bytes (as
/// Icechunk bounds it).
const MAX_LOCATION_LEN: usize = 1024;

/// The payload of one ref: native when it has a chunk id, else virtual when it has a
/// (compressed) location, else inline; `None` when it has none of them.
///
/// # Errors
/// [`FormatError::InvalidData`] for a compressed location without a dictionary, or
/// one that does not decompress to UTF-8 of at most [`MAX_LOCATION_LEN`] bytes.
fn read_ref(
    r: &gen::ChunkRef<'_>,
    dictionary: Option<&mut zstd::bulk::Decompressor<'_>>,
) -> Result<Option<ChunkPayload>, FormatError> {
    let invalid = |reason: String| FormatError::InvalidData {
        what: "manifest",
        reason,
    };
    if let Some(id) = r.chunk_id() {
        return Ok(Some(ChunkPayload::Native(NativeChunkRef {
            id: fb::id12(id),
            offset: r.offset(),
            length: r.length(),
        })));
    }
    let location = match (r.compressed_location(), r.location()) {
        (Some(packed), _) => {
            let d = dictionary.ok_or_else(|| {
                invalid("a compressed virtual location but no location dictionary".into())
            })?;
            let raw = d
                .decompress(packed.bytes(), MAX_LOCATION_LEN)
                .map_err(|e| invalid(format!("a compressed virtual location: {e}")))?;
            Some(
                String::from_utf8(raw)
                    .map_err(|_| invalid("a compressed virtual location is not UTF-8".into()))?,
            )
        }
        (None, Some(l)) => Some(l.to_string()),
        (None, None) => None,
    };
    if let Some(inline) = r.inline().filter(|_| location.is_none()) {
        return Ok(Some(ChunkPayload::Inline(Bytes::copy_from_slice(
            inline.bytes(),
        ))));
    }
    if let Some(location) = location {
        let checksum = match (r.checksum_etag(), r.checksum_last_modified()) {
            (Some(e), _) => Some(Checksum::ETag(e.to_string())),
            (None, 0) => None,
            (None, t) => Some(Checksum::LastModified(t)),
        };
        return Ok(Some(ChunkPayload::Virtual(VirtualChunkRef {
            location,
            offset: r.offset(),
            length: r.length(),
            checksum,
        })));
    }
    Ok(None)
}
