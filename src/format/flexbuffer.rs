//! Checked FlexBuffers decoding for the values of a spec-2 repository: the
//! configuration inside the `repo` object and every metadata value (the `repo`
//! object's and a spec-2 snapshot's).
//!
//! The `flexbuffers` crate reads offsets and lengths from the buffer without bounds
//! checks in places (`read_usize` indexes past the end, `get_bool` and
//! `get_key_len` slice past it, a vector's length is trusted, an offset of 0 loops),
//! so a malformed buffer panics, loops or allocates without bound inside it.
//! [`check`] walks the buffer first exactly as `flexbuffers`' serde deserializer
//! (`deserialize_any`) will, with its own bounds checks, and refuses what that walk
//! could not do safely. A buffer it accepts is then decoded by `flexbuffers` itself,
//! so the values are the ones Icechunk (which uses the same crate) reads.
//!
//! What [`check`] refuses, beyond what `flexbuffers` refuses anyway:
//! - an offset, length, type byte, string, key or scalar outside the buffer, an offset
//!   pointing before the buffer's start, a length slot before its start;
//! - an unknown type byte, a width that is not 1, 2, 4 or 8 bytes, a float of 1 or 2
//!   bytes, a key without its terminating NUL, a string or key that is not UTF-8
//!   (`flexbuffers` would read it as an empty string);
//! - values nested deeper than [`MAX_DEPTH`];
//! - more values than `2 × len + 2` (a buffer of `len` bytes written by a
//!   FlexBuffers builder holds fewer; more means offsets are shared to amplify the
//!   decoded size);
//! - more than `64 × len + 4096` bytes of strings, keys and blobs in total (a builder
//!   shares keys between maps, never strings, so real data stays well below).
//!
//! Together: decoding a value of `len` bytes never panics, ends, and decodes at most
//! `2 × len + 2` values and `64 × len + 4096` bytes of text.

use flexbuffers::FlexBufferType as T;

/// Deepest nesting of vectors and maps accepted (serde_json's own limit for JSON
/// text): a metadata value or configuration nested deeper is refused.
pub(crate) const MAX_DEPTH: usize = 128;

/// Bytes of text allowed per byte of buffer (see the module documentation).
const TEXT_PER_BYTE: usize = 64;

/// Bytes of text allowed on top of `TEXT_PER_BYTE` per byte.
const TEXT_BASE: usize = 4096;

/// Decodes a FlexBuffers value with `flexbuffers`' serde deserializer after
/// [`check`] accepted the buffer.
///
/// # Errors
/// [`check`]'s reason, or the deserializer's message.
pub(crate) fn from_slice<'de, V: serde::Deserialize<'de>>(bytes: &'de [u8]) -> Result<V, String> {
    check(bytes)?;
    flexbuffers::from_slice(bytes).map_err(|e| e.to_string())
}

/// Walks the value in `bytes` as `flexbuffers`' `deserialize_any` does, checking
/// every read (see the module documentation for what is refused).
///
/// # Errors
/// Why the buffer is refused, with the byte offset where it went wrong.
pub(crate) fn check(bytes: &[u8]) -> Result<(), String> {
    let len = bytes.len();
    if len < 3 {
        return Err(format!("{len} bytes, too short for a FlexBuffers root"));
    }
    let mut walk = Walk {
        buf: bytes,
        values_left: len.saturating_mul(2).saturating_add(2),
        text_left: len.saturating_mul(TEXT_PER_BYTE).saturating_add(TEXT_BASE),
    };
    // The last byte is the root slot's width, the one before it the root's packed
    // type; the root slot ends where the type byte starts.
    let root_width = width(bytes[len - 1]).ok_or_else(|| {
        format!(
            "root width {} at byte {} is not 1, 2, 4 or 8",
            bytes[len - 1],
            len - 1
        )
    })?;
    let (ty, w) = walk.packed_type(len - 2)?;
    let slot = (len - 2)
        .checked_sub(root_width)
        .ok_or_else(|| "the root slot starts before the buffer".to_string())?;
    walk.value(slot, ty, w, root_width, 0)
}

/// The byte width a width byte (root width, map keys width) names.
fn width(n: u8) -> Option<usize> {
    matches!(n, 1 | 2 | 4 | 8).then_some(usize::from(n))
}

struct Walk<'a> {
    buf: &'a [u8],
    /// Values still allowed.
    values_left: usize,
    /// Bytes of strings, keys and blobs still allowed.
    text_left: usize,
}

impl Walk<'_> {
    /// The unsigned integer of `w` bytes (little-endian) at `at`.
    fn uint(&self, at: usize, w: usize) -> Result<u64, String> {
        let bytes = at
            .checked_add(w)
            .and_then(|end| self.buf.get(at..end))
            .ok_or_else(|| {
                format!(
                    "{w} bytes at {at} run past the end ({} bytes)",
                    self.buf.len()
                )
            })?;
        Ok(bytes
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    /// [`Walk::uint`] as a byte count or offset.
    fn size(&self, at: usize, w: usize) -> Result<usize, String> {
        let n = self.uint(at, w)?;
        usize::try_from(n).map_err(|_| format!("size {n} at {at} does not fit in memory"))
    }

    /// The type and width packed into the byte at `at`.
    fn packed_type(&self, at: usize) -> Result<(T, usize), String> {
        let byte = *self
            .buf
            .get(at)
            .ok_or_else(|| format!("type byte {at} is past the end"))?;
        let ty = T::try_from(byte >> 2)
            .map_err(|_| format!("unknown FlexBuffers type {} at {at}", byte >> 2))?;
        Ok((ty, 1 << (byte & 3)))
    }

    /// The length stored in the `w`-byte slot right before `at` (strings, blobs and
    /// vectors).
    fn length_before(&self, at: usize, w: usize) -> Result<usize, String> {
        let slot = at
            .checked_sub(w)
            .ok_or_else(|| format!("the length of the value at {at} is before the buffer"))?;
        self.size(slot, w)
    }

    /// `count` slots of `w` bytes from `at`, plus `extra` bytes after them, inside
    /// the buffer; returns where the slots end.
    fn slots(&self, at: usize, count: usize, w: usize, extra: usize) -> Result<usize, String> {
        let end = count
            .checked_mul(w)
            .and_then(|n| at.checked_add(n))
            .filter(|&end| end.checked_add(extra).is_some_and(|e| e <= self.buf.len()));
        end.ok_or_else(|| {
            format!(
                "{count} slots of {w} bytes at {at} run past the end ({} bytes)",
                self.buf.len()
            )
        })
    }

    /// Counts `n` bytes of text against the budget.
    fn text(&mut self, n: usize, at: usize) -> Result<(), String> {
        self.text_left = self.text_left.checked_sub(n).ok_or_else(|| {
            format!("the text at {at} takes the decoded size past 64 times the buffer's")
        })?;
        Ok(())
    }

    /// One value whose slot (inline scalar, or offset to the value) is `w_slot`
    /// bytes at `slot`; `ty` and `w` are its packed type and width.
    fn value(
        &mut self,
        slot: usize,
        ty: T,
        w: usize,
        w_slot: usize,
        depth: usize,
    ) -> Result<(), String> {
        self.values_left = self.values_left.checked_sub(1).ok_or_else(|| {
            "more values than a FlexBuffers builder writes in this many bytes".to_string()
        })?;
        if depth > MAX_DEPTH {
            return Err(format!("values nested deeper than {MAX_DEPTH}"));
        }
        // As `Reader::new`: a reference is an unsigned offset back from its slot.
        let (at, ty) = if ty.is_reference() {
            let offset = self.size(slot, w_slot)?;
            let at = slot
                .checked_sub(offset)
                .ok_or_else(|| format!("offset {offset} at {slot} points before the buffer"))?;
            (at, ty.to_direct().unwrap_or(ty))
        } else {
            (slot, ty)
        };
        match ty {
            T::Null => Ok(()),
            T::Int | T::UInt | T::Bool => self.uint(at, w).map(drop),
            T::Float if w == 4 || w == 8 => self.uint(at, w).map(drop),
            T::Float => Err(format!("a float of {w} bytes at {at}")),
            T::String | T::Blob => {
                let n = self.length_before(at, w)?;
                let end = self.slots(at, n, 1, 0)?;
                self.text(n, at)?;
                if ty == T::String {
                    utf8(&self.buf[at..end], at)?;
                }
                Ok(())
            }
            T::Key => {
                let rest = self
                    .buf
                    .get(at..)
                    .ok_or_else(|| format!("key at {at} is past the end"))?;
                let n = rest
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or_else(|| format!("key at {at} has no terminating NUL"))?;
                self.text(n, at)?;
                utf8(&rest[..n], at)
            }
            T::Map => self.map(at, w, depth),
            t if t.is_vector() => self.vector(at, t, w, depth),
            // Indirect scalars were made direct above.
            other => Err(format!("unexpected FlexBuffers type {other:?} at {at}")),
        }
    }

    /// A map at `at` of width `w`: before it the keys vector's offset, the keys'
    /// width and the length; values, then their type bytes, from `at`.
    fn map(&mut self, at: usize, w: usize, depth: usize) -> Result<(), String> {
        let header = w * 3;
        if header >= at {
            return Err(format!("the map at {at} has no room for its header"));
        }
        let keys_slot = at - header;
        let keys_width = self.uint(at - 2 * w, w)?;
        let keys_width = u8::try_from(keys_width)
            .ok()
            .and_then(width)
            .ok_or_else(|| format!("map keys width {keys_width} at {at} is not 1, 2, 4 or 8"))?;
        let keys_offset = self.size(keys_slot, w)?;
        let keys_at = keys_slot
            .checked_sub(keys_offset)
            .ok_or_else(|| format!("the keys of the map at {at} start before the buffer"))?;
        let n = self.size(at - w, w)?;
        let types = self.slots(at, n, w, n)?;
        self.slots(keys_at, n, keys_width, 0)?;
        for i in 0..n {
            // Bounded by the two `slots` checks above.
            self.value(
                keys_at + keys_width * i,
                T::Key,
                keys_width,
                keys_width,
                depth + 1,
            )?;
            let (ty, vw) = self.packed_type(types + i)?;
            self.value(at + w * i, ty, vw, w, depth + 1)?;
        }
        Ok(())
    }

    /// A vector at `at` of width `w`: typed (elements of one type and width `w`),
    /// fixed-length typed, or untyped (a type byte per element after the slots).
    fn vector(&mut self, at: usize, ty: T, w: usize, depth: usize) -> Result<(), String> {
        let n = match ty.fixed_length_vector_length() {
            Some(n) => n,
            None => self.length_before(at, w)?,
        };
        match ty.typed_vector_type() {
            Some(element) => {
                self.slots(at, n, w, 0)?;
                for i in 0..n {
                    self.value(at + w * i, element, w, w, depth + 1)?;
                }
            }
            None => {
                let types = self.slots(at, n, w, n)?;
                for i in 0..n {
                    let (element, ew) = self.packed_type(types + i)?;
                    self.value(at + w * i, element, ew, w, depth + 1)?;
                }
            }
        }
        Ok(())
    }
}

fn utf8(bytes: &[u8], at: usize) -> Result<(), String> {
    std::str::from_utf8(bytes)
        .map(drop)
        .map_err(|e| format!("the string at {at} is not UTF-8: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// Root slot `off` (width 1) pointing back at a value of packed type `packed`.
    fn rooted(mut body: Vec<u8>, off_from_end: u8, packed: u8) -> Vec<u8> {
        body.extend([off_from_end, packed, 1]);
        body
    }

    #[test]
    fn values_a_builder_writes_decode_as_flexbuffers_decodes_them() {
        let nested = (0..MAX_DEPTH).fold(json!("leaf"), |v, _| json!([v]));
        for v in [
            json!(null),
            json!(true),
            json!(-7),
            json!(u64::MAX),
            json!(1.5),
            json!(""),
            json!("text ü"),
            json!([]),
            json!({}),
            json!([1, 2, 3]),
            json!([1.5, 2.5]),
            json!([true, false, true, false]),
            json!(["a", "b"]),
            json!([null, 1, "x", [2.5, {"k": [true]}]]),
            json!({"a": 1, "b": {"c": ["d", null]}, "": 0}),
            json!([{"same": 1, "keys": 2}, {"same": 3, "keys": 4}]),
            nested,
        ] {
            let bytes = flexbuffers::to_vec(&v).unwrap();
            check(&bytes).unwrap_or_else(|e| panic!("{v}: {e}"));
            let ours: Value = from_slice(&bytes).unwrap();
            let theirs: Value = flexbuffers::from_slice(&bytes).unwrap();
            assert_eq!(ours, theirs);
            assert_eq!(ours, v);
        }
        // Typed, fixed-length typed and indirect values, and a blob, which serde
        // does not write.
        let mut b = flexbuffers::Builder::default();
        let mut v = b.start_vector();
        v.push(&[1u8, 2, 3]);
        v.push(&[1i16, -2]);
        v.push(&[1.0f32, 2.0, 3.0, 4.0]);
        v.push(&[1u64, 2, 3, 4, 5]);
        v.push(&[true, false]);
        v.push(flexbuffers::IndirectUInt(5));
        v.push(flexbuffers::IndirectFloat(0.5));
        let mut m = v.start_map();
        m.push("k", -1i8);
        m.end_map();
        v.end_vector();
        let ours: Value = from_slice(b.view()).unwrap();
        let theirs: Value = flexbuffers::from_slice(b.view()).unwrap();
        assert_eq!(ours, theirs);
        assert_eq!(
            ours,
            json!([[1, 2, 3], [1, -2], [1.0, 2.0, 3.0, 4.0], [1, 2, 3, 4, 5], [true, false], 5, 0.5, {"k": -1}])
        );
        let mut b = flexbuffers::Builder::default();
        b.build_singleton(flexbuffers::Blob(&[1u8, 2][..]));
        check(b.view()).unwrap();
    }

    #[test]
    fn malformed_buffers_are_refused_not_read() {
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("short", vec![0, 1]),
            ("root width 3", vec![0, 0, 0, 3]),
            // A bool of 8 bytes in a 3-byte buffer (flexbuffers slices past the end).
            ("bool past the end", vec![1, (26 << 2) | 3, 1]),
            // Type 27 does not exist.
            ("unknown type", vec![0, 27 << 2, 1]),
            // An untyped vector claiming 2^32 - 1 elements.
            (
                "huge vector",
                rooted(vec![0xff, 0xff, 0xff, 0xff], 0, (10 << 2) | 2),
            ),
            // A string offset pointing 200 bytes back in a 4-byte buffer.
            ("offset before start", rooted(vec![0], 200, 5 << 2)),
            // A key without NUL.
            ("key without nul", rooted(vec![b'a', b'b'], 2, 4 << 2)),
            // A string that is not UTF-8.
            ("not utf-8", rooted(vec![2, 0xff, 0xfe, 0], 3, 5 << 2)),
            // A float of one byte.
            ("f8", vec![0, 3 << 2, 1]),
            // A map whose header runs before the buffer.
            ("map header", rooted(vec![0], 0, 9 << 2)),
        ];
        for (what, bytes) in cases {
            assert!(check(&bytes).is_err(), "{what} was accepted");
            assert!(from_slice::<Value>(&bytes).is_err(), "{what} decoded");
        }
    }

    #[test]
    fn nesting_past_the_limit_is_refused() {
        let deep = (0..=MAX_DEPTH).fold(json!(0), |v, _| json!([v]));
        let bytes = flexbuffers::to_vec(&deep).unwrap();
        assert!(check(&bytes).unwrap_err().contains("deeper"));
    }

    #[test]
    fn shared_offsets_cannot_amplify_the_decoded_size() {
        // A vector of 2 slots both pointing at the same 2-slot vector, 40 levels
        // deep: 2^40 values from a few hundred bytes.
        // Level 0: an untyped vector [null, null] of width 1 at address 1.
        let mut buf = vec![2u8, 0, 0, 0, 0];
        let mut at = 1usize;
        for _ in 0..40 {
            // Length 2, then two offsets back to `at`, then two type bytes (vector).
            let here = buf.len() + 1;
            buf.push(2);
            buf.push(u8::try_from(here - at).unwrap());
            buf.push(u8::try_from(here + 1 - at).unwrap());
            buf.extend([10 << 2, 10 << 2]);
            at = here;
        }
        let root_slot = buf.len();
        buf.push(u8::try_from(root_slot - at).unwrap());
        buf.extend([10 << 2, 1]);
        let err = check(&buf).unwrap_err();
        assert!(err.contains("more values"), "{err}");
    }
}
