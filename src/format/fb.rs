//! Shared helpers for the generated flatbuffers code: verified root access and id
//! conversions.

use flatbuffers::{Follow, Verifiable, VerifierOptions};

pub(crate) use super::generated::gen;
use super::ids::ObjectId;
use super::FormatError;

/// The file identifier every spec-1 flatbuffer carries.
pub(crate) const IDENTIFIER: &str = "Ichk";

/// Verifies `buf` (identifier `Ichk` and the whole table tree) and returns its root.
/// Limits scale with the buffer so large manifests (millions of refs) verify.
pub(crate) fn verified_root<'a, T>(
    what: &'static str,
    buf: &'a [u8],
) -> Result<T::Inner, FormatError>
where
    T: Follow<'a> + Verifiable + 'a,
{
    if buf.len() < 8 || !flatbuffers::buffer_has_identifier(buf, IDENTIFIER, false) {
        return Err(FormatError::InvalidFlatbuffer {
            what,
            reason: "missing the `Ichk` file identifier".into(),
        });
    }
    let opts = VerifierOptions {
        max_depth: 64,
        max_tables: buf.len() / 4 + 16,
        max_apparent_size: (buf.len() * 4).max(1 << 20),
        ignore_missing_null_terminator: false,
    };
    flatbuffers::root_with_opts::<T>(&opts, buf).map_err(|e| FormatError::InvalidFlatbuffer {
        what,
        reason: e.to_string(),
    })
}

pub(crate) fn id12<K>(id: &gen::ObjectId12) -> ObjectId<12, K> {
    ObjectId::new(<[u8; 12]>::from(id.bytes()))
}

pub(crate) fn id8<K>(id: &gen::ObjectId8) -> ObjectId<8, K> {
    ObjectId::new(<[u8; 8]>::from(id.bytes()))
}

pub(crate) fn fb12<K>(id: &ObjectId<12, K>) -> gen::ObjectId12 {
    gen::ObjectId12::new(&id.0)
}

pub(crate) fn fb8<K>(id: &ObjectId<8, K>) -> gen::ObjectId8 {
    gen::ObjectId8::new(&id.0)
}
