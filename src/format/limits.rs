//! The size limits that readers and writers of format objects share, in one place.
//!
//! Every limit here is enforced twice with the same number: a writer refuses, before
//! anything is stored (so before any commit point), an object a reader would refuse,
//! and a reader accepts every object a writer (floe or Icechunk) can produce. What
//! Icechunk 2.3.0 does at these sizes:
//!
//! - It decompresses snapshot, manifest, transaction-log and `repo` files with no
//!   bound (`zstd::decode_all`) and verifies their flatbuffers with an apparent-size
//!   limit of 2 GiB, flatbuffers' own cap; its writer panics past that cap (the
//!   flatbuffers builder cannot grow beyond 2 GiB). So no Icechunk object is larger
//!   than [`MAX_OBJECT_BYTES`], and floe accepts every object up to it, whatever its
//!   compression ratio.
//! - Compressed virtual locations (spec 2 manifests) may expand to 1,024 bytes
//!   (`MAX_DECOMPRESSED_LOCATION_SIZE`); floe reads them with the same bound and never
//!   writes compressed locations.
//!
//! Memory: decoding one hostile object can cost up to [`MAX_OBJECT_BYTES`] (2 GiB) of
//! memory, since a legitimate object of that size may compress to a few hundred KiB;
//! buffers grow with the bytes actually decompressed, never from a size the file
//! merely declares.

use super::FormatError;

/// Largest flatbuffer (the decompressed payload of a snapshot, manifest, transaction
/// log or `repo` file) that floe writes and reads, in bytes: `2^31 - 1`, flatbuffers'
/// own limit (`FLATBUFFERS_MAX_BUFFER_SIZE` is `2^31`, and offsets are signed 32-bit).
pub const MAX_OBJECT_BYTES: u64 = (1 << 31) - 1;

/// Deepest nesting of a commit or repository metadata value (JSON arrays and
/// objects) that floe writes, counting the value itself as depth 1. Readers accept
/// more (MessagePack and FlexBuffers decoders allow 1,024 levels); JSON parsers of
/// Icechunk's Python API (serde_json) stop at 128, so nothing deeper can come from
/// there either.
pub const MAX_METADATA_DEPTH: usize = 128;

/// A running upper bound of the size of a flatbuffer an encoder is about to build,
/// checked against [`MAX_OBJECT_BYTES`] before the builder allocates anything (the
/// flatbuffers builder panics past 2 GiB).
#[derive(Debug)]
pub(crate) struct SizeBudget {
    what: &'static str,
    bytes: u64,
}

impl SizeBudget {
    /// A budget for a `what` object, starting with `fixed` bytes of overhead.
    pub(crate) fn new(what: &'static str, fixed: u64) -> Self {
        SizeBudget { what, bytes: fixed }
    }

    /// Adds `payload` bytes of content plus `overhead` bytes of tables, offsets and
    /// padding.
    pub(crate) fn add(&mut self, payload: usize, overhead: u64) {
        let payload = u64::try_from(payload).unwrap_or(u64::MAX);
        self.bytes = self.bytes.saturating_add(payload).saturating_add(overhead);
    }

    /// Checks the bound against [`MAX_OBJECT_BYTES`].
    ///
    /// # Errors
    /// [`FormatError::ObjectTooLarge`] when the object could pass the limit.
    pub(crate) fn check(&self) -> Result<(), FormatError> {
        check_object_size(self.what, self.bytes)
    }
}

/// Checks that a `what` object of `bytes` bytes (decompressed) is within
/// [`MAX_OBJECT_BYTES`].
///
/// # Errors
/// [`FormatError::ObjectTooLarge`] past the limit.
pub(crate) fn check_object_size(what: &'static str, bytes: u64) -> Result<(), FormatError> {
    if bytes > MAX_OBJECT_BYTES {
        return Err(FormatError::ObjectTooLarge {
            what,
            size: bytes,
            limit: MAX_OBJECT_BYTES,
        });
    }
    Ok(())
}

/// The nesting depth of a JSON value: 1 for a scalar, one more for each level of
/// arrays and objects. Iterative, so a deep value cannot overflow the stack.
pub(crate) fn json_depth(value: &serde_json::Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((v, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        match v {
            serde_json::Value::Array(items) => stack.extend(items.iter().map(|i| (i, depth + 1))),
            serde_json::Value::Object(map) => stack.extend(map.values().map(|i| (i, depth + 1))),
            _ => {}
        }
    }
    deepest
}

/// Checks one metadata value (named `name`, of a `what` object) against
/// [`MAX_METADATA_DEPTH`].
///
/// # Errors
/// [`FormatError::MetadataTooDeep`] past the limit.
pub(crate) fn check_metadata_depth(
    what: &'static str,
    name: &str,
    value: &serde_json::Value,
) -> Result<(), FormatError> {
    let depth = json_depth(value);
    if depth > MAX_METADATA_DEPTH {
        return Err(FormatError::MetadataTooDeep {
            what,
            name: name.to_string(),
            depth,
            limit: MAX_METADATA_DEPTH,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_levels() {
        assert_eq!(json_depth(&serde_json::json!(1)), 1);
        assert_eq!(json_depth(&serde_json::json!([1, {"a": [2]}])), 4);
        let mut v = serde_json::json!(0);
        for _ in 0..100_000 {
            v = serde_json::Value::Array(vec![v]);
        }
        assert_eq!(json_depth(&v), 100_001);
        assert!(matches!(
            check_metadata_depth("snapshot", "x", &v),
            Err(FormatError::MetadataTooDeep {
                depth: 100_001,
                limit: MAX_METADATA_DEPTH,
                ..
            })
        ));
        // Dropping a deep value recurses in serde_json; leak it instead of risking the
        // test thread's stack.
        std::mem::forget(v);
    }

    #[test]
    fn budget_refuses_past_the_limit() {
        let mut b = SizeBudget::new("snapshot", 1024);
        b.add(usize::try_from(MAX_OBJECT_BYTES).unwrap() - 2048, 0);
        assert!(b.check().is_ok());
        b.add(1024, 1);
        assert!(matches!(
            b.check(),
            Err(FormatError::ObjectTooLarge {
                what: "snapshot",
                limit: MAX_OBJECT_BYTES,
                ..
            })
        ));
    }
}
