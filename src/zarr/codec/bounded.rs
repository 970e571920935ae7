//! Decompression with an output limit: what keeps a corrupt or hostile chunk (a
//! decompression bomb) from growing beyond the size its array declares.

use std::io::Read;

use crate::zarr::error::CodecError;

/// Reads all of `reader` (a decompressor), failing once more than `limit` bytes come
/// out. Memory stays within `limit` plus one read buffer.
///
/// # Errors
/// [`CodecError::InvalidData`] naming `codec` when the stream is corrupt or decodes
/// to more than `limit` bytes.
pub(crate) fn read_bounded(
    codec: &str,
    reader: impl Read,
    limit: usize,
    size_hint: usize,
) -> Result<Vec<u8>, CodecError> {
    let cap = size_hint.min(limit).min(64 << 20);
    let mut out = Vec::with_capacity(cap);
    let take = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(take)
        .read_to_end(&mut out)
        .map_err(|e| CodecError::invalid(codec, e.to_string()))?;
    if out.len() > limit {
        return Err(too_large(codec, limit));
    }
    Ok(out)
}

/// The error for a chunk that decodes to more than `limit` bytes.
pub(crate) fn too_large(codec: &str, limit: usize) -> CodecError {
    CodecError::invalid(
        codec,
        format!("decodes to more than {limit} bytes, the most a chunk of this array holds"),
    )
}
