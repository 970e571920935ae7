//! A flatbuffer writer that lays objects out front to back, for the files holding
//! millions of small tables: manifests (one `ChunkRef` per chunk) and transaction
//! logs (one `ChunkIndices` per changed chunk).
//!
//! The generic `flatbuffers` builder writes back to front and, for every table,
//! builds a vtable and searches the ones already written for a duplicate; for
//! 10^7 refs that was as much CPU as compressing the result. Here the caller knows
//! each table's layout: vtables are written once per field layout, and a table is
//! its `soffset` followed by its fields, written in place.
//!
//! Flatbuffers rules kept (FlatBuffers "Internals" document): a `uoffset` (`u32`)
//! points forward, to `its own position + value`; a table starts with an `soffset`
//! (`i32`) such that its vtable is at `table - soffset`; a vtable is
//! `[vtable bytes, table bytes, field offsets...]` of `u16`; every scalar sits at a
//! multiple of its size from the start of the buffer; a vector is a `u32` length
//! followed by its elements; a string is a byte vector followed by a NUL byte.
//!
//! Objects a table points to are written after it and the table's `uoffset` slot is
//! patched ([`Forward::point`]). Where a vector of offsets must come before objects
//! whose number is not known yet, the objects go into a second `Forward` (the
//! body) and the vector into the first (the head), which is then placed in front of
//! it: [`Forward::head_offset`] gives the distance. A body stays valid when moved by
//! a multiple of 8, since every offset inside it is relative.

use super::FormatError;

/// A reserved `uoffset` field, to be pointed at an object written later.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot(usize);

/// A growing flatbuffer, or the body part of one.
#[derive(Debug, Default)]
pub(crate) struct Forward {
    buf: Vec<u8>,
}

/// The error for a file past flatbuffers' 2 GiB limit.
fn too_large(what: &'static str) -> FormatError {
    FormatError::InvalidData {
        what,
        reason: "the file would exceed the 2 GiB a flatbuffer can address".into(),
    }
}

/// `n` as an `i32`/`u32` flatbuffers offset; offsets are at most 2 GiB.
fn offset(what: &'static str, n: usize) -> Result<u32, FormatError> {
    u32::try_from(n)
        .ok()
        .filter(|&n| n <= i32::MAX as u32)
        .ok_or_else(|| too_large(what))
}

/// A count or position that must fit a flatbuffers `u32` (at most 2 GiB).
///
/// # Errors
/// [`FormatError::InvalidData`] past 2 GiB.
pub(crate) fn count(what: &'static str, n: usize) -> Result<u32, FormatError> {
    offset(what, n)
}

impl Forward {
    /// An empty buffer with room for `capacity` bytes.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Forward {
            buf: Vec::with_capacity(capacity),
        }
    }

    /// A buffer that starts with the root `uoffset` (patched by [`Forward::finish_root`])
    /// and the 4-byte file identifier.
    pub(crate) fn root(identifier: &str, capacity: usize) -> Self {
        let mut w = Forward::with_capacity(capacity.max(8));
        w.buf.extend_from_slice(&[0; 4]);
        let id = identifier.as_bytes();
        let mut ident = [0u8; 4];
        let n = id.len().min(4);
        ident[..n].copy_from_slice(&id[..n]);
        w.buf.extend_from_slice(&ident);
        w
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    /// The bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.buf
    }

    /// Pads with zeros until the length is `phase` modulo `align` (a power of two).
    pub(crate) fn pad(&mut self, align: usize, phase: usize) {
        while self.buf.len() & (align - 1) != phase {
            self.buf.push(0);
        }
    }

    /// Appends raw bytes (a struct field, or the bytes of a table laid out by the
    /// caller).
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// Appends a little-endian `u32`.
    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends a little-endian `u64`.
    pub(crate) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Reserves a `uoffset` field here (the length must be a multiple of 4).
    pub(crate) fn slot(&mut self) -> Slot {
        debug_assert_eq!(self.buf.len() % 4, 0);
        let s = Slot(self.buf.len());
        self.buf.extend_from_slice(&[0; 4]);
        s
    }

    /// Reserves `n` consecutive `uoffset` fields (a vector's elements); the first is
    /// returned, element `i` is `Slot(first + 4 i)` ([`Forward::nth`]).
    pub(crate) fn slots(&mut self, n: usize) -> Slot {
        debug_assert_eq!(self.buf.len() % 4, 0);
        let s = Slot(self.buf.len());
        self.buf.resize(self.buf.len() + 4 * n, 0);
        s
    }

    /// Element `i` of slots reserved together by [`Forward::slots`].
    pub(crate) fn nth(first: Slot, i: usize) -> Slot {
        Slot(first.0 + 4 * i)
    }

    /// Points `slot` at position `target` (after it) of this buffer.
    ///
    /// # Errors
    /// [`FormatError::InvalidData`] past 2 GiB.
    pub(crate) fn point_at(
        &mut self,
        what: &'static str,
        slot: Slot,
        target: usize,
    ) -> Result<(), FormatError> {
        debug_assert!(target >= slot.0);
        let v = offset(what, target - slot.0)?;
        self.buf[slot.0..slot.0 + 4].copy_from_slice(&v.to_le_bytes());
        Ok(())
    }

    /// Points `slot` at what is written next.
    ///
    /// # Errors
    /// [`FormatError::InvalidData`] past 2 GiB.
    pub(crate) fn point(&mut self, what: &'static str, slot: Slot) -> Result<(), FormatError> {
        self.point_at(what, slot, self.buf.len())
    }

    /// Points the root `uoffset` (see [`Forward::root`]) at the table at `table`.
    ///
    /// # Errors
    /// [`FormatError::InvalidData`] past 2 GiB.
    pub(crate) fn finish_root(
        &mut self,
        what: &'static str,
        table: usize,
    ) -> Result<(), FormatError> {
        self.point_at(what, Slot(0), table)
    }

    /// Writes a vtable for a table of `table_len` bytes (its `soffset` included)
    /// whose field `i` is at `fields[i]` from the table's start (0: absent); returns
    /// its position.
    pub(crate) fn vtable(&mut self, table_len: u16, fields: &[u16]) -> usize {
        self.pad(2, 0);
        let pos = self.buf.len();
        // 4 + 2 × at most a few dozen fields: always fits a u16.
        #[allow(clippy::cast_possible_truncation)]
        let vt_len = (4 + 2 * fields.len()) as u16;
        self.buf.extend_from_slice(&vt_len.to_le_bytes());
        self.buf.extend_from_slice(&table_len.to_le_bytes());
        for f in fields {
            self.buf.extend_from_slice(&f.to_le_bytes());
        }
        pos
    }

    /// Starts a table whose vtable is at `vtable` (written earlier in this buffer):
    /// writes its `soffset` and returns the table's position. The caller pads first
    /// so that the fields are aligned, and writes exactly the fields the vtable lays
    /// out.
    ///
    /// # Errors
    /// [`FormatError::InvalidData`] past 2 GiB.
    pub(crate) fn table(
        &mut self,
        what: &'static str,
        vtable: usize,
    ) -> Result<usize, FormatError> {
        debug_assert_eq!(self.buf.len() % 4, 0);
        let pos = self.buf.len();
        self.u32(offset(what, pos - vtable)?);
        Ok(pos)
    }

    /// Writes a vector of `u32` (aligned first).
    pub(crate) fn u32_vector(&mut self, values: impl ExactSizeIterator<Item = u32>) {
        self.pad(4, 0);
        // Vectors here hold a few coordinates: lengths fit.
        #[allow(clippy::cast_possible_truncation)]
        self.u32(values.len() as u32);
        for v in values {
            self.u32(v);
        }
    }

    /// Writes a byte vector (aligned first); with `nul`, as a string: one NUL byte
    /// after the bytes.
    ///
    /// # Errors
    /// [`FormatError::InvalidData`] past 2 GiB.
    pub(crate) fn byte_vector(
        &mut self,
        what: &'static str,
        b: &[u8],
        nul: bool,
    ) -> Result<(), FormatError> {
        self.pad(4, 0);
        self.u32(offset(what, b.len())?);
        self.buf.extend_from_slice(b);
        if nul {
            self.buf.push(0);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_point_forward_and_tables_back_to_their_vtable() {
        let mut w = Forward::root("Ichk", 64);
        let vt = w.vtable(8, &[4]);
        w.pad(4, 0);
        let t = w.table("test", vt).unwrap();
        let slot = w.slot();
        let s = slot.0;
        w.point("test", slot).unwrap();
        w.u32_vector([7u32, 9].into_iter());
        w.finish_root("test", t).unwrap();
        let b = w.as_slice();
        let rd = |p: usize| u32::from_le_bytes(b[p..p + 4].try_into().unwrap()) as usize;
        assert_eq!(&b[4..8], b"Ichk");
        assert_eq!(rd(0), t);
        assert_eq!(t - rd(t), vt, "soffset leads back to the vtable");
        let v = s + rd(s);
        assert_eq!((rd(v), rd(v + 4), rd(v + 8)), (2, 7, 9));
    }

    #[test]
    fn padding_reaches_the_phase_asked_for() {
        let mut w = Forward::with_capacity(16);
        w.bytes(&[1]);
        w.pad(8, 4);
        assert_eq!(w.len(), 4);
        w.pad(8, 4);
        assert_eq!(w.len(), 4, "already there: nothing added");
        w.pad(8, 0);
        assert_eq!(w.len(), 8);
    }
}
