//! Shared helpers for the generated flatbuffers code: verified root access and id
//! conversions.

use flatbuffers::{Follow, InvalidFlatbuffer, Verifiable, Verifier, VerifierOptions};

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
    let opts = verifier_options(what, buf)?;
    flatbuffers::root_with_opts::<T>(&opts, buf).map_err(|e| invalid(what, &e))
}

/// Checks the `Ichk` identifier of `buf`; the verifier limits for it, which scale
/// with its length.
fn verifier_options(what: &'static str, buf: &[u8]) -> Result<VerifierOptions, FormatError> {
    if buf.len() < 8 || !flatbuffers::buffer_has_identifier(buf, IDENTIFIER, false) {
        return Err(FormatError::InvalidFlatbuffer {
            what,
            reason: "missing the `Ichk` file identifier".into(),
        });
    }
    Ok(VerifierOptions {
        max_depth: 64,
        max_tables: buf.len() / 4 + 16,
        max_apparent_size: (buf.len() * 4).max(1 << 20),
        ignore_missing_null_terminator: false,
    })
}

fn invalid(what: &'static str, e: &InvalidFlatbuffer) -> FormatError {
    FormatError::InvalidFlatbuffer {
        what,
        reason: e.to_string(),
    }
}

/// [`verified_root`] that verifies only what `verify` visits: the root table at the
/// position it is given, and below it only the fields the caller reads (a
/// snapshot's commit facts without its node table). `buf` may be a prefix of the
/// whole flatbuffer: whatever `verify` visits must then lie within it.
///
/// # Safety
/// `verify` must visit the root table and every field of it, with everything below
/// those fields, that the caller reads through the returned accessor; the caller must
/// read no other field.
///
/// # Errors
/// [`FormatError::InvalidFlatbuffer`] for a missing identifier or a failed
/// verification.
pub(crate) unsafe fn partly_verified_root<'a, T>(
    what: &'static str,
    buf: &'a [u8],
    verify: impl FnOnce(&mut Verifier<'_, 'a>, usize) -> Result<(), InvalidFlatbuffer>,
) -> Result<T::Inner, FormatError>
where
    T: Follow<'a> + 'a,
{
    let opts = verifier_options(what, buf)?;
    let mut v = Verifier::new(&opts, buf);
    let root = v.get_uoffset(0).map_err(|e| invalid(what, &e))?;
    let root = usize::try_from(root).map_err(|_| FormatError::InvalidFlatbuffer {
        what,
        reason: "root offset out of range".into(),
    })?;
    verify(&mut v, root).map_err(|e| invalid(what, &e))?;
    // SAFETY: the root offset is in the buffer, and the caller reads only what
    // `verify` verified (this function's contract).
    Ok(unsafe { flatbuffers::root_unchecked::<T>(buf) })
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
