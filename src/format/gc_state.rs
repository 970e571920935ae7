//! floe's garbage-collection state (`floe/gc-state`, [`super::keys::GC_STATE`]): the
//! native chunk ids each manifest retained at the last collection references, so
//! that the next collection fetches only manifests it has not read before.
//!
//! A manifest never changes once written (its id is random and never reused), so
//! the ids recorded for it stay true for as long as it exists, whatever ran in
//! between (expiry, squash, or Icechunk's own garbage collection): the state can be
//! missing or old, never wrong. Icechunk does not read this object and its garbage
//! collection leaves it alone (it lists only the object directories).
//!
//! Layout: the 14 bytes `floe-gc-state\0`, a version byte (1), then one zstd frame
//! holding a little-endian `u64` count of manifests and, per manifest, its 12-byte
//! id, a `u32` count of chunk ids and the 12-byte chunk ids.

use std::collections::HashMap;
use std::io::Read;

use super::limits::MAX_OBJECT_BYTES;
use super::{ChunkId, FormatError, ManifestId};

/// The first bytes of the object.
const MAGIC: &[u8; 14] = b"floe-gc-state\0";
/// The layout version this module writes and reads.
const VERSION: u8 = 1;
/// What the errors call the object.
const WHAT: &str = "garbage-collection state";

/// The native chunk ids referenced by each of a set of manifests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcState {
    /// Manifest id to the native chunk ids its refs point into (each id once).
    pub manifests: HashMap<ManifestId, Vec<ChunkId>>,
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
        if version != VERSION {
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
        let count = r.u64()?;
        // Each manifest takes at least 16 bytes: a count past that is a lie.
        if count > (r.rest.len() / 16) as u64 {
            return Err(r.invalid("more manifests than bytes"));
        }
        let mut manifests = HashMap::with_capacity(usize::try_from(count).unwrap_or(0));
        for _ in 0..count {
            let id = ManifestId::new(r.id()?);
            let n = r.u32()? as usize;
            if n > r.rest.len() / 12 {
                return Err(r.invalid("more chunk ids than bytes"));
            }
            let mut chunks = Vec::with_capacity(n);
            for _ in 0..n {
                chunks.push(ChunkId::new(r.id()?));
            }
            if manifests.insert(id, chunks).is_some() {
                return Err(r.invalid("a manifest listed twice"));
            }
        }
        if !r.rest.is_empty() {
            return Err(r.invalid("bytes after the last manifest"));
        }
        Ok(GcState { manifests })
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
        s
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
        for cut in [MAGIC.len() + 1, MAGIC.len() + 5, bytes.len() - 3] {
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
    }
}
