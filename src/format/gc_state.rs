//! floe's garbage-collection state (`floe/gc-state`, [`super::keys::GC_STATE`]): what
//! the last collection learned from the objects it read, so that the next one reads
//! only what is new:
//! - the native chunk ids each retained manifest references;
//! - the manifests each retained snapshot lists.
//!
//! Manifests never change once written, and neither does the list of manifests of a
//! snapshot (their ids are random and never reused; spec-1 expiry rewrites a
//! snapshot in place with another parent but the same manifests), so what is
//! recorded for one stays true for as long as it exists, whatever ran in between
//! (expiry, squash, or Icechunk's own garbage collection): the state can be missing
//! or old, never wrong. Icechunk does not read this object and its
//! garbage collection leaves it alone (it lists only the object directories).
//!
//! Layout: the 14 bytes `floe-gc-state\0`, a version byte, then one zstd frame
//! holding, little-endian:
//! 1. a `u64` count of manifests and, per manifest, its 12-byte id, a `u32` count of
//!    chunk ids and the 12-byte chunk ids;
//! 2. (version 2 only) a `u32` count of manifest files and each one's 12-byte id,
//!    `u64` size in bytes and `u32` count of chunk refs; then a `u64` count of
//!    snapshots and, per snapshot, its 12-byte id, a `u32` count of manifests and
//!    that many `u32` indices into the manifest files (each file stored once).
//!
//! Version 1 objects (section 1 alone) are still read.

use std::collections::HashMap;
use std::io::Read;

use super::limits::MAX_OBJECT_BYTES;
use super::snapshot::ManifestFileInfo;
use super::{ChunkId, FormatError, ManifestId, SnapshotId};

/// The first bytes of the object.
const MAGIC: &[u8; 14] = b"floe-gc-state\0";
/// The layout version this module writes.
const VERSION: u8 = 2;
/// The layout version without snapshots, still read.
const VERSION_1: u8 = 1;
/// What the errors call the object.
const WHAT: &str = "garbage-collection state";

/// The native chunk ids referenced by each of a set of manifests, and the manifests
/// each of a set of snapshots lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcState {
    /// Manifest id to the native chunk ids its refs point into (each id once).
    pub manifests: HashMap<ManifestId, Vec<ChunkId>>,
    /// Snapshot id to the manifest files it lists, in its order.
    pub snapshots: HashMap<SnapshotId, Vec<ManifestFileInfo>>,
}

impl GcState {
    /// The encoded object (see the module documentation).
    ///
    /// # Errors
    /// [`FormatError::Compression`] when zstd fails.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        let ids: usize = self.manifests.values().map(Vec::len).sum();
        let mut raw = Vec::with_capacity(8 + self.manifests.len() * 16 + ids * 12);
        raw.extend_from_slice(&(self.manifests.len() as u64).to_le_bytes());
        let mut sorted: Vec<_> = self.manifests.iter().collect();
        sorted.sort_by_key(|(id, _)| **id);
        for (id, chunks) in sorted {
            raw.extend_from_slice(id.as_bytes());
            let n = u32::try_from(chunks.len()).map_err(|_| FormatError::InvalidData {
                what: WHAT,
                reason: format!("manifest {id} lists more than 2^32 chunk ids"),
            })?;
            raw.extend_from_slice(&n.to_le_bytes());
            for c in chunks {
                raw.extend_from_slice(c.as_bytes());
            }
        }
        self.encode_snapshots(&mut raw)?;
        let packed = zstd::bulk::compress(&raw, 3).map_err(|e| FormatError::Compression {
            what: WHAT,
            reason: e.to_string(),
        })?;
        let mut out = Vec::with_capacity(MAGIC.len() + 1 + packed.len());
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&packed);
        Ok(out)
    }

    /// Appends section 2 of the layout: the manifest files the snapshots list (each
    /// once), then the snapshots.
    fn encode_snapshots(&self, raw: &mut Vec<u8>) -> Result<(), FormatError> {
        let too_many = |what: &str| FormatError::InvalidData {
            what: WHAT,
            reason: format!("more than 2^32 {what}"),
        };
        let mut sorted: Vec<_> = self.snapshots.iter().collect();
        sorted.sort_by_key(|(id, _)| **id);
        let mut files: Vec<ManifestFileInfo> = Vec::new();
        let mut index: HashMap<ManifestFileInfo, u32> = HashMap::new();
        let mut lists = Vec::with_capacity(sorted.len());
        for (_, manifests) in &sorted {
            let mut list = Vec::with_capacity(manifests.len());
            for info in manifests.iter() {
                let i = match index.get(info) {
                    Some(i) => *i,
                    None => {
                        let i = u32::try_from(files.len()).map_err(|_| too_many("manifests"))?;
                        files.push(*info);
                        index.insert(*info, i);
                        i
                    }
                };
                list.push(i);
            }
            lists.push(list);
        }
        raw.extend_from_slice(&(files.len() as u32).to_le_bytes());
        for info in &files {
            raw.extend_from_slice(info.id.as_bytes());
            raw.extend_from_slice(&info.size_bytes.to_le_bytes());
            raw.extend_from_slice(&info.num_chunk_refs.to_le_bytes());
        }
        raw.extend_from_slice(&(sorted.len() as u64).to_le_bytes());
        for ((id, _), list) in sorted.iter().zip(lists) {
            raw.extend_from_slice(id.as_bytes());
            let n = u32::try_from(list.len()).map_err(|_| too_many("manifests in a snapshot"))?;
            raw.extend_from_slice(&n.to_le_bytes());
            for i in list {
                raw.extend_from_slice(&i.to_le_bytes());
            }
        }
        Ok(())
    }

    /// Decodes an object [`GcState::encode`] wrote; decompresses at most
    /// [`MAX_OBJECT_BYTES`] and checks every count against the bytes present.
    ///
    /// # Errors
    /// [`FormatError::BadMagic`], [`FormatError::UnsupportedSpecVersion`] for
    /// another layout version, [`FormatError::Compression`],
    /// [`FormatError::TooLarge`] and [`FormatError::InvalidData`] for a truncated
    /// or inconsistent payload.
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let body = bytes
            .strip_prefix(MAGIC.as_slice())
            .ok_or(FormatError::BadMagic { what: WHAT })?;
        let (&version, frame) = body
            .split_first()
            .ok_or(FormatError::BadMagic { what: WHAT })?;
        if version != VERSION && version != VERSION_1 {
            return Err(FormatError::UnsupportedSpecVersion { version });
        }
        let compression = |e: std::io::Error| FormatError::Compression {
            what: WHAT,
            reason: e.to_string(),
        };
        let mut raw = Vec::new();
        zstd::stream::Decoder::new(frame)
            .map_err(compression)?
            .take(MAX_OBJECT_BYTES + 1)
            .read_to_end(&mut raw)
            .map_err(compression)?;
        if raw.len() as u64 > MAX_OBJECT_BYTES {
            return Err(FormatError::TooLarge {
                what: WHAT,
                limit: MAX_OBJECT_BYTES,
            });
        }
        let mut r = Reader { rest: &raw };
        // Each manifest takes at least 16 bytes.
        let count = r.count64(16, "manifests")?;
        let mut manifests = HashMap::with_capacity(count);
        for _ in 0..count {
            let id = ManifestId::new(r.id()?);
            let n = r.count32(12, "chunk ids")?;
            let mut chunks = Vec::with_capacity(n);
            for _ in 0..n {
                chunks.push(ChunkId::new(r.id()?));
            }
            if manifests.insert(id, chunks).is_some() {
                return Err(r.invalid("a manifest listed twice"));
            }
        }
        let snapshots = if version == VERSION {
            r.snapshots()?
        } else {
            HashMap::new()
        };
        if !r.rest.is_empty() {
            return Err(r.invalid("bytes after the last section"));
        }
        Ok(GcState {
            manifests,
            snapshots,
        })
    }
}

/// A cursor over the decompressed payload.
struct Reader<'a> {
    rest: &'a [u8],
}

impl Reader<'_> {
    fn invalid(&self, reason: &str) -> FormatError {
        FormatError::InvalidData {
            what: WHAT,
            reason: reason.to_string(),
        }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], FormatError> {
        let (head, rest) = self
            .rest
            .split_first_chunk::<N>()
            .ok_or_else(|| self.invalid("truncated"))?;
        self.rest = rest;
        Ok(*head)
    }

    fn u64(&mut self) -> Result<u64, FormatError> {
        self.take::<8>().map(u64::from_le_bytes)
    }

    fn u32(&mut self) -> Result<u32, FormatError> {
        self.take::<4>().map(u32::from_le_bytes)
    }

    fn id(&mut self) -> Result<[u8; 12], FormatError> {
        self.take::<12>()
    }

    /// A `u32` count of items of at least `each` bytes; a count the bytes left
    /// cannot hold is a lie ("more `what` than bytes").
    fn count32(&mut self, each: usize, what: &str) -> Result<usize, FormatError> {
        let n = self.u32()?;
        self.checked_count(u64::from(n), each, what)
    }

    /// [`Reader::count32`] for a `u64` count.
    fn count64(&mut self, each: usize, what: &str) -> Result<usize, FormatError> {
        let n = self.u64()?;
        self.checked_count(n, each, what)
    }

    fn checked_count(&self, n: u64, each: usize, what: &str) -> Result<usize, FormatError> {
        match usize::try_from(n) {
            Ok(n) if n <= self.rest.len() / each => Ok(n),
            _ => Err(self.invalid(&format!("more {what} than bytes"))),
        }
    }

    /// Section 2: the manifest files, then the snapshots listing them.
    fn snapshots(&mut self) -> Result<HashMap<SnapshotId, Vec<ManifestFileInfo>>, FormatError> {
        // Each manifest file takes 24 bytes, each snapshot at least 16.
        let n = self.count32(24, "manifest files")?;
        let mut files = Vec::with_capacity(n);
        for _ in 0..n {
            files.push(ManifestFileInfo {
                id: ManifestId::new(self.id()?),
                size_bytes: self.u64()?,
                num_chunk_refs: self.u32()?,
            });
        }
        let count = self.count64(16, "snapshots")?;
        let mut snapshots = HashMap::with_capacity(count);
        for _ in 0..count {
            let id = SnapshotId::new(self.id()?);
            let m = self.count32(4, "manifest indices")?;
            let mut manifests = Vec::with_capacity(m);
            for _ in 0..m {
                let i = self.u32()? as usize;
                manifests.push(
                    *files
                        .get(i)
                        .ok_or_else(|| self.invalid("a manifest index past the table"))?,
                );
            }
            if snapshots.insert(id, manifests).is_some() {
                return Err(self.invalid("a snapshot listed twice"));
            }
        }
        Ok(snapshots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> GcState {
        let mut s = GcState::default();
        s.manifests.insert(ManifestId::random(), vec![]);
        s.manifests.insert(
            ManifestId::random(),
            (0..1000).map(|_| ChunkId::random()).collect(),
        );
        let shared = ManifestFileInfo {
            id: ManifestId::random(),
            size_bytes: 1 << 40,
            num_chunk_refs: 100_000,
        };
        s.snapshots.insert(SnapshotId::random(), vec![shared]);
        s.snapshots.insert(SnapshotId::random(), vec![]);
        s.snapshots.insert(
            SnapshotId::random(),
            vec![
                ManifestFileInfo {
                    id: ManifestId::random(),
                    size_bytes: 7,
                    num_chunk_refs: 1,
                },
                shared,
            ],
        );
        s
    }

    #[test]
    fn version_1_objects_are_read_without_snapshots() {
        let mut raw = 1u64.to_le_bytes().to_vec();
        let (m, c) = (ManifestId::random(), ChunkId::random());
        raw.extend_from_slice(m.as_bytes());
        raw.extend_from_slice(&1u32.to_le_bytes());
        raw.extend_from_slice(c.as_bytes());
        let mut v1 = MAGIC.to_vec();
        v1.push(VERSION_1);
        v1.extend(zstd::bulk::compress(&raw, 1).unwrap());
        let s = GcState::decode(&v1).unwrap();
        assert_eq!(s.manifests, HashMap::from([(m, vec![c])]));
        assert!(s.snapshots.is_empty());
    }

    #[test]
    fn round_trips() {
        let s = sample();
        assert_eq!(GcState::decode(&s.encode().unwrap()).unwrap(), s);
        let empty = GcState::default();
        assert_eq!(GcState::decode(&empty.encode().unwrap()).unwrap(), empty);
    }

    #[test]
    fn damaged_objects_are_typed_errors() {
        let bytes = sample().encode().unwrap();
        assert!(matches!(
            GcState::decode(b"not a state"),
            Err(FormatError::BadMagic { .. })
        ));
        let mut other = bytes.clone();
        other[MAGIC.len()] = 9;
        assert!(matches!(
            GcState::decode(&other),
            Err(FormatError::UnsupportedSpecVersion { version: 9 })
        ));
        for cut in [
            MAGIC.len() + 1,
            MAGIC.len() + 5,
            bytes.len() - 3,
            bytes.len() - 1,
        ] {
            assert!(
                matches!(
                    GcState::decode(&bytes[..cut]),
                    Err(FormatError::Compression { .. } | FormatError::InvalidData { .. })
                ),
                "cut at {cut}"
            );
        }
        // A payload whose counts promise more than it holds.
        let mut raw = u64::MAX.to_le_bytes().to_vec();
        raw.extend_from_slice(&[0; 16]);
        let mut lying = MAGIC.to_vec();
        lying.push(VERSION);
        lying.extend(zstd::bulk::compress(&raw, 1).unwrap());
        assert!(matches!(
            GcState::decode(&lying),
            Err(FormatError::InvalidData { .. })
        ));
        // A snapshot naming a manifest past the table.
        let mut raw = 0u64.to_le_bytes().to_vec();
        raw.extend_from_slice(&0u32.to_le_bytes());
        raw.extend_from_slice(&1u64.to_le_bytes());
        raw.extend_from_slice(&[0; 12]);
        raw.extend_from_slice(&1u32.to_le_bytes());
        raw.extend_from_slice(&5u32.to_le_bytes());
        let mut past = MAGIC.to_vec();
        past.push(VERSION);
        past.extend(zstd::bulk::compress(&raw, 1).unwrap());
        assert!(matches!(
            GcState::decode(&past),
            Err(FormatError::InvalidData { reason, .. }) if reason.contains("past the table")
        ));
    }
}
