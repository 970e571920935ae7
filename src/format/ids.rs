//! Object and node ids of the Icechunk format and their Crockford base32 text form.
//!
//! Spec: Icechunk specification, "Snapshot Files" / "Chunk Manifest Files" (ids are 12
//! random bytes for snapshots, manifests and chunks, 8 random bytes for nodes) and
//! "Initialize New Repository" (ids are encoded in paths with Crockford base 32).
//! Text form: upper case Crockford base32, no padding, zero bits appended on the right;
//! 12 bytes give 20 characters, 8 bytes give 13.

use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::str::FromStr;

use crate::format::FormatError;

/// Marker types naming what an [`ObjectId`] identifies.
pub mod kind {
    /// A snapshot (`snapshots/<id>`, `transactions/<id>`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub struct Snapshot;
    /// A manifest (`manifests/<id>`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub struct Manifest;
    /// A native chunk (`chunks/<id>`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub struct Chunk;
    /// A node (group or array) of a snapshot.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub struct Node;
}

/// An id of `N` random bytes identifying an object of kind `K`.
/// Ordering and equality are those of the raw bytes.
pub struct ObjectId<const N: usize, K>(pub [u8; N], PhantomData<K>);

/// Id of a snapshot (12 bytes).
pub type SnapshotId = ObjectId<12, kind::Snapshot>;
/// Id of a manifest (12 bytes).
pub type ManifestId = ObjectId<12, kind::Manifest>;
/// Id of a native chunk object (12 bytes).
pub type ChunkId = ObjectId<12, kind::Chunk>;
/// Id of a node (8 bytes).
pub type NodeId = ObjectId<8, kind::Node>;

impl<const N: usize, K> ObjectId<N, K> {
    /// The id with these raw bytes.
    pub const fn new(bytes: [u8; N]) -> Self {
        ObjectId(bytes, PhantomData)
    }

    /// A fresh id of `N` random bytes.
    pub fn random() -> Self {
        Self::new(rand::random())
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; N] {
        &self.0
    }
}

impl SnapshotId {
    /// The well-known id of every repository's first snapshot, `1CECHNKREP0F1RSTCMT0`.
    pub const INITIAL: SnapshotId = ObjectId::new([
        0x0b, 0x1c, 0xc8, 0xd6, 0x78, 0x75, 0x80, 0xf0, 0xe3, 0x3a, 0x65, 0x34,
    ]);
}

impl<const N: usize, K> Clone for ObjectId<N, K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<const N: usize, K> Copy for ObjectId<N, K> {}
impl<const N: usize, K> PartialEq for ObjectId<N, K> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl<const N: usize, K> Eq for ObjectId<N, K> {}
impl<const N: usize, K> Hash for ObjectId<N, K> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state)
    }
}
impl<const N: usize, K> PartialOrd for ObjectId<N, K> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<const N: usize, K> Ord for ObjectId<N, K> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

impl<const N: usize, K> fmt::Display for ObjectId<N, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&base32::encode(base32::Alphabet::Crockford, &self.0))
    }
}

impl<const N: usize, K> fmt::Debug for ObjectId<N, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// Number of Crockford base32 characters encoding `n` bytes.
const fn encoded_len(n: usize) -> usize {
    (n * 8).div_ceil(5)
}

impl<const N: usize, K> FromStr for ObjectId<N, K> {
    type Err = FormatError;

    /// Parses the Crockford base32 text form (either case).
    ///
    /// # Errors
    /// [`FormatError::InvalidId`] when the text has the wrong length, a character outside
    /// the alphabet, or non-zero padding bits.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || FormatError::InvalidId {
            text: s.to_string(),
            expected_bytes: N,
        };
        if s.len() != encoded_len(N) {
            return Err(invalid());
        }
        let bytes = base32::decode(base32::Alphabet::Crockford, s).ok_or_else(invalid)?;
        let arr: [u8; N] = bytes
            .get(..N)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(invalid)?;
        let id = ObjectId::new(arr);
        // Canonical form only: re-encoding must give back the text.
        if id.to_string() != s.to_ascii_uppercase() {
            return Err(invalid());
        }
        Ok(id)
    }
}

impl<const N: usize, K> ObjectId<N, K> {
    /// Parses an id a user typed, as Icechunk 2.3.0 does (`ObjectId::try_from(&str)`):
    /// any text that Crockford base32 decodes to exactly `N` bytes. Unlike
    /// [`FromStr`], which takes only the canonical form (what floe and Icechunk
    /// write), it accepts Crockford's aliases (`O` for `0`, `I` and `L` for `1`) and
    /// drops non-zero padding bits, so `ZZZZZZZZZZZZZZZZZZZZ` names the snapshot
    /// `ZZZZZZZZZZZZZZZZZZZG`: an unknown snapshot, not malformed text. Used where a
    /// person names a snapshot (the Python bindings), never where floe reads a file.
    ///
    /// # Errors
    /// [`FormatError::InvalidId`] when the text does not decode to `N` bytes.
    pub fn parse_lenient(s: &str) -> Result<Self, FormatError> {
        base32::decode(base32::Alphabet::Crockford, s)
            .and_then(|bytes| <[u8; N]>::try_from(bytes).ok())
            .map(ObjectId::new)
            .ok_or_else(|| FormatError::InvalidId {
                text: s.to_string(),
                expected_bytes: N,
            })
    }
}

impl<const N: usize, K> serde::Serialize for ObjectId<N, K> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de, const N: usize, K> serde::Deserialize<'de> for ObjectId<N, K> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_encodings() {
        let id = ObjectId::<12, kind::Chunk>::new(std::array::from_fn(|i| i as u8));
        assert_eq!(id.to_string(), "000G40R40M30E209185G");
        assert_eq!(SnapshotId::INITIAL.to_string(), "1CECHNKREP0F1RSTCMT0");
        assert_eq!(NodeId::new([0; 8]).to_string().len(), 13);
    }

    #[test]
    fn parse_round_trip_and_errors() {
        for _ in 0..100 {
            let id = SnapshotId::random();
            assert_eq!(id.to_string().parse::<SnapshotId>().unwrap(), id);
            let node = NodeId::random();
            assert_eq!(node.to_string().parse::<NodeId>().unwrap(), node);
            assert_eq!(
                id.to_string().to_lowercase().parse::<SnapshotId>().unwrap(),
                id
            );
        }
        assert_err!(
            "1CECHNKREP0F1RSTCMT".parse::<SnapshotId>(),
            crate::format::FormatError::InvalidId { .. }
        );
        assert_err!(
            "1CECHNKREP0F1RSTCMTU".parse::<SnapshotId>(),
            crate::format::FormatError::InvalidId { .. }
        );
        // Last character carries 4 padding bits that must be zero.
        assert_err!(
            "1CECHNKREP0F1RSTCMT1".parse::<SnapshotId>(),
            crate::format::FormatError::InvalidId { .. }
        );
        assert_err!(
            "".parse::<NodeId>(),
            crate::format::FormatError::InvalidId { .. }
        );
    }

    #[test]
    fn lenient_parse_is_icechunks() {
        let initial = SnapshotId::INITIAL;
        for text in [
            "1CECHNKREP0F1RSTCMT0",
            "1cechnkrep0f1rstcmt0",
            "1CECHNKREP0F1RSTCMT1",
            "ICECHNKREPOFLRSTCMTO",
        ] {
            assert_eq!(SnapshotId::parse_lenient(text).unwrap(), initial, "{text}");
        }
        assert_eq!(
            SnapshotId::parse_lenient("ZZZZZZZZZZZZZZZZZZZZ")
                .unwrap()
                .to_string(),
            "ZZZZZZZZZZZZZZZZZZZG"
        );
        for text in [
            "",
            "ABC",
            "1CECHNKREP0F1RSTCMT",
            "1CECHNKREP0F1RSTCMT00",
            "1CECHNKREP0F1RSTCMTU",
            "1CECHNKREP-0F1RSTCMT",
            " 1CECHNKREP0F1RSTCMT",
            "1!1!1!1!1!1!1!1!1!1!",
        ] {
            assert_err!(
                SnapshotId::parse_lenient(text),
                crate::format::FormatError::InvalidId { .. }
            );
        }
    }
}
