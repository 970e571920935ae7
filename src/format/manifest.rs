//! Manifest files (`manifests/<id>`): chunk refs of one or more arrays.
//!
//! Spec: Icechunk specification, "Chunk Manifest Files"; field ids in
//! `../shared/docs/icechunk-format-v1.md`, tables `Manifest`, `ArrayManifest`, `ChunkRef`.

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;

use super::envelope::{self, FileType};
use super::fb::{self, gen};
use super::forward::Forward;
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
/// the manifest encoder (`ManifestWriter`) encodes. [`ChunkPayloadRef::to_payload`] makes the owned
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

    testing_pub! {
        /// Encodes into a full manifest file (envelope + zstd + flatbuffer).
        ///
        /// # Errors
        /// [`FormatError::Compression`]; [`FormatError::ChunkIndexTooLarge`].
        fn encode(&self) -> Result<Vec<u8>, FormatError> {
            let mut w = ManifestWriter::new(self.id, self.num_chunk_refs());
            for (node, refs) in &self.arrays {
                w.add_array(*node, refs.iter().map(|(k, v)| (k.as_slice(), v)))?;
            }
            Ok(w.finish()?.0)
        }
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
            let stored = a.refs();
            // Collected, then built in one pass (refs are stored sorted, and
            // `BTreeMap`'s bulk build is linear on sorted input; a later duplicate
            // index replaces an earlier one, as one insert after another would).
            let mut refs = Vec::with_capacity(stored.len());
            let mut rank = None;
            for r in stored {
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
                refs.push((index, payload));
            }
            arrays.insert(node, refs.into_iter().collect());
        }
        Ok(Manifest {
            id: fb::id12(root.id()),
            arrays,
        })
    }
}

/// Running chunk index extents: the smallest box holding every index added.
#[derive(Clone, Debug, Default)]
pub(crate) struct Extents {
    lo: Vec<u64>,
    hi: Vec<u64>,
    any: bool,
}

impl Extents {
    /// Adds one chunk index.
    pub(crate) fn add(&mut self, index: &[u64]) {
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
    pub(crate) fn finish(self) -> Option<Vec<Range<u32>>> {
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
///
/// The flatbuffer is laid out front to back (the crate-internal `format::forward`): the refs' tables
/// go into a body as they come; [`ManifestWriter::finish`] writes the `Manifest`
/// and `ArrayManifest` tables and the vectors of offsets to the refs into the room
/// left in front of the body, and compresses the whole in one zstd pass.
pub(crate) struct ManifestWriter {
    id: ManifestId,
    body: Forward,
    /// Each array's node id and the body positions of its refs' tables.
    arrays: Vec<(NodeId, Vec<u32>)>,
    /// The body position of the vtable for each field set of a `ChunkRef`.
    vtables: [Option<usize>; 256],
    count: u64,
    spec: SpecVersion,
    level: i32,
}

/// Bits of a `ChunkRef`'s field set, one per field, in vtable slot order.
mod field {
    pub(super) const INDEX: u8 = 1;
    pub(super) const INLINE: u8 = 1 << 1;
    pub(super) const OFFSET: u8 = 1 << 2;
    pub(super) const LENGTH: u8 = 1 << 3;
    pub(super) const CHUNK_ID: u8 = 1 << 4;
    pub(super) const LOCATION: u8 = 1 << 5;
    pub(super) const ETAG: u8 = 1 << 6;
    pub(super) const LAST_MODIFIED: u8 = 1 << 7;
}

/// Where each field of a `ChunkRef` with field set `mask` sits in its table (0:
/// absent), by vtable slot, and the table's length. The order is the order
/// [`write_ref`] writes them: the `u64`s right after the `soffset` (the table
/// starts 4 bytes past a multiple of 8, so they are aligned), then the 4-byte
/// offsets and scalar, then the 12-byte chunk id.
fn ref_layout(mask: u8) -> ([u16; 8], u16) {
    use field::*;
    let sizes: [(u8, usize, u16); 8] = [
        (OFFSET, 2, 8),
        (LENGTH, 3, 8),
        (INDEX, 0, 4),
        (INLINE, 1, 4),
        (LOCATION, 5, 4),
        (ETAG, 6, 4),
        (LAST_MODIFIED, 7, 4),
        (CHUNK_ID, 4, 12),
    ];
    let mut at = [0u16; 8];
    let mut pos = 4u16;
    for (bit, slot, size) in sizes {
        if mask & bit != 0 {
            at[slot] = pos;
            pos += size;
        }
    }
    (at, pos)
}

impl ManifestWriter {
    /// A writer for manifest `id`, sized for about `estimated_refs` refs.
    pub(crate) fn new(id: ManifestId, estimated_refs: usize) -> Self {
        ManifestWriter {
            id,
            // Room in front for the head: 4 bytes per ref and the tables of a few
            // dozen arrays.
            body: Forward::with_gap(
                estimated_refs.saturating_mul(4).saturating_add(1024),
                estimated_refs.saturating_mul(44).saturating_add(64),
            ),
            arrays: Vec::new(),
            vtables: [None; 256],
            count: 0,
            spec: SpecVersion::V1,
            level: envelope::default_level(FileType::Manifest),
        }
    }

    /// Writes a file of spec version `spec` (the table layout is the same in both;
    /// only the envelope's version byte differs). Spec 1 by default.
    #[must_use]
    pub(crate) fn spec_version(mut self, spec: SpecVersion) -> Self {
        self.spec = spec;
        self
    }

    /// Compresses at zstd level `level` (the repository config's
    /// `compression.level`; 3 by default, as Icechunk).
    #[must_use]
    pub(crate) fn compression_level(mut self, level: i32) -> Self {
        self.level = level;
        self
    }

    /// Adds the refs of array `node` (sorted by index; arrays added in node id order),
    /// given as `&ChunkPayload` or [`ChunkPayloadRef`]. Returns the extents of the refs
    /// added, `None` when there were none (and then the array is not recorded).
    ///
    /// # Errors
    /// [`FormatError::ChunkIndexTooLarge`] for an index Icechunk cannot store;
    /// [`FormatError::InvalidData`] when the file would pass 2 GiB.
    pub(crate) fn add_array<'r, P: Into<ChunkPayloadRef<'r>>>(
        &mut self,
        node: NodeId,
        refs: impl IntoIterator<Item = (&'r [u64], P)>,
    ) -> Result<Option<Vec<Range<u32>>>, FormatError> {
        let mut ext = Extents::default();
        let refs = refs.into_iter();
        let mut tables = Vec::with_capacity(refs.size_hint().0);
        for (index, payload) in refs {
            ext.add(index);
            tables.push(write_ref(
                &mut self.body,
                &mut self.vtables,
                index,
                payload.into(),
            )?);
        }
        if tables.is_empty() {
            return Ok(None);
        }
        self.count += tables.len() as u64;
        self.arrays.push((node, tables));
        Ok(ext.finish())
    }

    /// Finishes the file: returns its bytes and the number of refs.
    ///
    /// # Errors
    /// [`FormatError::Compression`]; [`FormatError::InvalidData`] past 2 GiB.
    pub(crate) fn finish(self) -> Result<(Vec<u8>, u64), FormatError> {
        const WHAT: &str = "manifest";
        let refs = usize::try_from(self.count).unwrap_or(usize::MAX);
        let mut head = Forward::root(
            fb::IDENTIFIER,
            refs.saturating_mul(4)
                .saturating_add(self.arrays.len().saturating_mul(24))
                .saturating_add(64),
        );
        // Manifest { id: ObjectId12 (slot 0), arrays: [ArrayManifest] (slot 1) }:
        // soffset, arrays, id.
        let manifest_vt = head.vtable(20, &[8, 4]);
        head.pad(4, 0);
        let root = head.table(WHAT, manifest_vt)?;
        let arrays_slot = head.slot();
        head.bytes(&self.id.0);
        head.finish_root(WHAT, root)?;
        head.array_tables_then_body(WHAT, arrays_slot, &self.arrays)?;
        let (buf, start) = self.body.behind(&head);
        let bytes = envelope::seal_at(FileType::Manifest, self.spec, self.level, &buf[start..])?;
        Ok((bytes, self.count))
    }
}

/// Writes one `ChunkRef` table and the objects it points to into `body`; returns the
/// table's position.
fn write_ref(
    body: &mut Forward,
    vtables: &mut [Option<usize>; 256],
    index: &[u64],
    payload: ChunkPayloadRef<'_>,
) -> Result<u32, FormatError> {
    use field::*;
    const WHAT: &str = "manifest";
    let coords = super::coords_u32(index)?;
    let nonzero = |v: u64, bit: u8| if v == 0 { 0 } else { bit };
    let mask = INDEX
        | match payload {
            ChunkPayloadRef::Inline(_) => INLINE,
            ChunkPayloadRef::Native(n) => {
                CHUNK_ID | nonzero(n.offset, OFFSET) | nonzero(n.length, LENGTH)
            }
            ChunkPayloadRef::Virtual {
                offset,
                length,
                checksum,
                ..
            } => {
                LOCATION
                    | nonzero(offset, OFFSET)
                    | nonzero(length, LENGTH)
                    | match checksum {
                        Some(Checksum::ETag(_)) => ETAG,
                        Some(Checksum::LastModified(t)) => nonzero(u64::from(*t), LAST_MODIFIED),
                        None => 0,
                    }
            }
        };
    let vt = match vtables[usize::from(mask)] {
        Some(vt) => vt,
        None => {
            let (at, len) = ref_layout(mask);
            let vt = body.vtable(len, &at);
            vtables[usize::from(mask)] = Some(vt);
            vt
        }
    };
    body.pad(8, 4);
    let table = body.table(WHAT, vt)?;
    let pos = super::forward::count(WHAT, table)?;
    // Fields in `ref_layout`'s order.
    let (offset, length) = match payload {
        ChunkPayloadRef::Native(n) => (n.offset, n.length),
        ChunkPayloadRef::Virtual { offset, length, .. } => (offset, length),
        ChunkPayloadRef::Inline(_) => (0, 0),
    };
    if mask & OFFSET != 0 {
        body.u64(offset);
    }
    if mask & LENGTH != 0 {
        body.u64(length);
    }
    let index_slot = body.slot();
    let inline_slot = (mask & INLINE != 0).then(|| body.slot());
    let location_slot = (mask & LOCATION != 0).then(|| body.slot());
    let etag_slot = (mask & ETAG != 0).then(|| body.slot());
    if let ChunkPayloadRef::Virtual {
        checksum: Some(Checksum::LastModified(t)),
        ..
    } = payload
    {
        if mask & LAST_MODIFIED != 0 {
            body.u32(*t);
        }
    }
    if let ChunkPayloadRef::Native(n) = payload {
        body.bytes(&n.id.0);
    }
    // The objects the table points to, in slot order.
    body.pad(4, 0);
    body.point(WHAT, index_slot)?;
    body.u32_vector(coords);
    match payload {
        ChunkPayloadRef::Inline(bytes) => {
            if let Some(s) = inline_slot {
                body.pad(4, 0);
                body.point(WHAT, s)?;
                body.byte_vector(WHAT, bytes, false)?;
            }
        }
        ChunkPayloadRef::Virtual {
            location, checksum, ..
        } => {
            if let Some(s) = location_slot {
                body.pad(4, 0);
                body.point(WHAT, s)?;
                body.byte_vector(WHAT, location.as_bytes(), true)?;
            }
            if let (Some(s), Some(Checksum::ETag(e))) = (etag_slot, checksum) {
                body.pad(4, 0);
                body.point(WHAT, s)?;
                body.byte_vector(WHAT, e.as_bytes(), true)?;
            }
        }
        ChunkPayloadRef::Native(_) => {}
    }
    Ok(pos)
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
