//! The chunk changes of one array, stored compactly.
//!
//! A change set may hold tens of millions of chunk refs (a kerchunk import of 10^7
//! virtual refs), so a change costs about `8 × rank + 32` bytes instead of a B-tree
//! entry with its own heap-allocated index and its own copy of a URL:
//! - chunk indices are kept flat, `rank` coordinates per change in one `Vec<u64>`;
//! - a virtual ref names its location and checksum through an interned
//!   [`VirtualSource`], one `Arc` shared by every ref into the same object (the
//!   change set's [`Interner`] hands them out);
//! - changes live in one sorted run plus a small B-tree of recent writes to new
//!   indices, merged into the run in bulk once it holds an eighth of it (amortized
//!   constant moves per write, no B-tree node overhead for the bulk).
//!
//! Readers see [`ChunkPayloadRef`]s borrowed from the entries, which expand an
//! interned source into its location and checksum: interning is invisible to them.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use itertools::Itertools;

use crate::format::manifest::{Checksum, ChunkPayload, ChunkPayloadRef, NativeChunkRef};
use crate::format::{ChunkId, ChunkIndices};

/// An object virtual chunk refs point into: its location and checksum, shared by
/// every ref of a change set into it.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct VirtualSource {
    /// Absolute URL of the object.
    location: String,
    /// Checksum of the object, if recorded.
    checksum: Option<Checksum>,
}

/// One chunk change: 32 bytes (a native ref's fields are kept flat so that its
/// enum tag fits in the chunk id's padding; inline bytes are boxed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// The chunk is deleted.
    Deleted,
    /// Encoded bytes kept in the manifest.
    Inline(Box<Bytes>),
    /// `length` bytes at `offset` of chunk object `id`.
    Native {
        /// The chunk object.
        id: ChunkId,
        /// Start, in bytes.
        offset: u64,
        /// Length, in bytes.
        length: u64,
    },
    /// `length` bytes at `offset` of an external object.
    Virtual {
        /// The object (interned).
        source: Arc<VirtualSource>,
        /// Start, in bytes.
        offset: u64,
        /// Length, in bytes.
        length: u64,
    },
}

const _: () = assert!(std::mem::size_of::<Entry>() <= 32);

impl Entry {
    /// The chunk ref this entry sets, `None` for a deletion.
    pub(crate) fn payload(&self) -> Option<ChunkPayloadRef<'_>> {
        match self {
            Entry::Deleted => None,
            Entry::Inline(bytes) => Some(ChunkPayloadRef::Inline(bytes)),
            Entry::Native { id, offset, length } => Some(ChunkPayloadRef::Native(NativeChunkRef {
                id: *id,
                offset: *offset,
                length: *length,
            })),
            Entry::Virtual {
                source,
                offset,
                length,
            } => Some(ChunkPayloadRef::Virtual {
                location: &source.location,
                offset: *offset,
                length: *length,
                checksum: source.checksum.as_ref(),
            }),
        }
    }
}

/// Hands out one shared [`VirtualSource`] per (location, checksum). It only ever
/// grows (by the few objects a change set names); it takes no part in comparing
/// change sets, which compare the sources' values.
#[derive(Clone, Debug, Default)]
pub(crate) struct Interner {
    /// The sources by location (usually one checksum per location).
    sources: HashMap<String, Vec<Arc<VirtualSource>>>,
    /// The source handed out last: refs usually come in runs into one object.
    last: Option<Arc<VirtualSource>>,
}

impl PartialEq for Interner {
    /// Always equal: interning is invisible.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Interner {}

impl Interner {
    /// The shared source for `location` with `checksum`.
    fn intern(&mut self, location: String, checksum: Option<Checksum>) -> Arc<VirtualSource> {
        if let Some(last) = &self.last {
            if last.location == location && last.checksum == checksum {
                return Arc::clone(last);
            }
        }
        let found = self
            .sources
            .get(location.as_str())
            .and_then(|v| v.iter().find(|s| s.checksum == checksum))
            .cloned();
        let source = match found {
            Some(s) => s,
            None => {
                let s = Arc::new(VirtualSource {
                    location: location.clone(),
                    checksum,
                });
                self.sources
                    .entry(location)
                    .or_default()
                    .push(Arc::clone(&s));
                s
            }
        };
        self.last = Some(Arc::clone(&source));
        source
    }

    /// The entry recording `payload` (`None`: a deletion).
    pub(crate) fn entry(&mut self, payload: Option<ChunkPayload>) -> Entry {
        match payload {
            None => Entry::Deleted,
            Some(ChunkPayload::Inline(bytes)) => Entry::Inline(Box::new(bytes)),
            Some(ChunkPayload::Native(n)) => Entry::Native {
                id: n.id,
                offset: n.offset,
                length: n.length,
            },
            Some(ChunkPayload::Virtual(v)) => Entry::Virtual {
                source: self.intern(v.location, v.checksum),
                offset: v.offset,
                length: v.length,
            },
        }
    }

    /// `entry` (from another change set) with its source, if any, taken from this
    /// interner.
    pub(crate) fn adopt(&mut self, entry: &Entry) -> Entry {
        match entry {
            Entry::Virtual {
                source,
                offset,
                length,
            } => {
                let mine = self
                    .sources
                    .get(source.location.as_str())
                    .and_then(|v| v.iter().find(|s| s.checksum == source.checksum))
                    .cloned();
                let source = mine.unwrap_or_else(|| {
                    self.sources
                        .entry(source.location.clone())
                        .or_default()
                        .push(Arc::clone(source));
                    Arc::clone(source)
                });
                Entry::Virtual {
                    source,
                    offset: *offset,
                    length: *length,
                }
            }
            other => other.clone(),
        }
    }
}

/// Writes to new indices that [`ArrayChunks`] buffers in its B-tree before merging
/// them into its sorted run, at least.
const MIN_PENDING: usize = 1024;

/// The chunk changes (writes and deletions) of one array, sorted by chunk index.
#[derive(Clone, Default)]
pub struct ArrayChunks {
    /// Rank of the indices in the sorted run (that of the first index recorded).
    rank: Option<usize>,
    /// The sorted run's indices, `rank` coordinates each, flattened.
    coords: Vec<u64>,
    /// The sorted run's entries, in the order of `coords`.
    entries: Vec<Entry>,
    /// Recent changes of indices of rank `rank` not in the run.
    pending: BTreeMap<ChunkIndices, Entry>,
    /// Changes of indices of another rank (after a change of the array's rank):
    /// rare, never merged into the run.
    other: BTreeMap<ChunkIndices, Entry>,
}

impl std::fmt::Debug for ArrayChunks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl PartialEq for ArrayChunks {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.entries().eq(other.entries())
    }
}

impl Eq for ArrayChunks {}

impl ArrayChunks {
    /// Number of changes (writes and deletions).
    pub fn len(&self) -> usize {
        self.entries.len() + self.pending.len() + self.other.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The change at `index`: `Some(None)` for a deletion, `None` when the chunk did
    /// not change.
    pub fn get(&self, index: &[u64]) -> Option<Option<ChunkPayloadRef<'_>>> {
        self.entry(index).map(Entry::payload)
    }

    /// Every change, sorted by chunk index: `None` for a deletion.
    pub fn iter(&self) -> impl Iterator<Item = (&[u64], Option<ChunkPayloadRef<'_>>)> + '_ {
        self.entries().map(|(k, e)| (k, e.payload()))
    }

    /// The changed chunk indices, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &[u64]> + '_ {
        self.entries().map(|(k, _)| k)
    }

    /// Like [`ArrayChunks::iter`], from the first index at or after `start`.
    pub fn iter_from<'a>(
        &'a self,
        start: &'a [u64],
    ) -> impl Iterator<Item = (&'a [u64], Option<ChunkPayloadRef<'a>>)> + 'a {
        let first = match self.search(start) {
            Ok(i) | Err(i) => i,
        };
        let from = (Bound::Included(start), Bound::Unbounded);
        let run = (first..self.entries.len()).map(move |i| (self.key(i), &self.entries[i]));
        let pending = self.pending.range::<[u64], _>(from).map(as_slice);
        let other = self.other.range::<[u64], _>(from).map(as_slice);
        run.merge_by(pending, |a, b| a.0 <= b.0)
            .merge_by(other, |a, b| a.0 <= b.0)
            .map(|(k, e)| (k, e.payload()))
    }

    /// Every entry, sorted by chunk index (the three stores hold disjoint indices).
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&[u64], &Entry)> + '_ {
        let run = (0..self.entries.len()).map(move |i| (self.key(i), &self.entries[i]));
        let pending = self.pending.iter().map(as_slice);
        let other = self.other.iter().map(as_slice);
        run.merge_by(pending, |a, b| a.0 <= b.0)
            .merge_by(other, |a, b| a.0 <= b.0)
    }

    /// The entry at `index`.
    fn entry(&self, index: &[u64]) -> Option<&Entry> {
        if Some(index.len()) != self.rank {
            return self.other.get(index);
        }
        match self.search(index) {
            Ok(i) => self.entries.get(i),
            Err(_) => self.pending.get(index),
        }
    }

    /// Records `entry` at `index`, replacing any change there.
    pub(crate) fn insert(&mut self, index: ChunkIndices, entry: Entry) {
        let rank = *self.rank.get_or_insert(index.len());
        if index.len() != rank {
            self.other.insert(index, entry);
            return;
        }
        // Indices arriving in order (an import, a whole array written) extend the
        // sorted run directly.
        let after_run = self.entries.is_empty() || self.key(self.entries.len() - 1) < &index[..];
        if after_run && self.pending.is_empty() {
            self.coords.extend_from_slice(&index);
            self.entries.push(entry);
            return;
        }
        match self.search(&index) {
            Ok(i) => self.entries[i] = entry,
            Err(_) => {
                self.pending.insert(index, entry);
                if self.pending.len() >= MIN_PENDING.max(self.entries.len() / 8) {
                    self.merge_pending();
                }
            }
        }
    }

    /// Forgets the changes at `indices`.
    pub(crate) fn remove_all(&mut self, indices: &[ChunkIndices]) {
        let mut gone: Vec<usize> = indices
            .iter()
            .filter(|k| Some(k.len()) == self.rank)
            .filter_map(|k| self.search(k).ok())
            .collect();
        gone.sort_unstable();
        gone.dedup();
        if !gone.is_empty() {
            let r = self.rank.unwrap_or(0);
            let mut gone = gone.into_iter().peekable();
            let mut kept = 0;
            for i in 0..self.entries.len() {
                if gone.peek() == Some(&i) {
                    gone.next();
                    continue;
                }
                if kept != i {
                    self.entries.swap(kept, i);
                    self.coords.copy_within(i * r..(i + 1) * r, kept * r);
                }
                kept += 1;
            }
            self.entries.truncate(kept);
            self.coords.truncate(kept * r);
        }
        for k in indices {
            self.pending.remove(k);
            self.other.remove(k);
        }
    }

    /// Index `i` of the sorted run.
    fn key(&self, i: usize) -> &[u64] {
        let r = self.rank.unwrap_or(0);
        &self.coords[i * r..(i + 1) * r]
    }

    /// Binary search of the sorted run (`index` of rank `rank`).
    fn search(&self, index: &[u64]) -> Result<usize, usize> {
        let (mut lo, mut hi) = (0, self.entries.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.key(mid).cmp(index) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    /// Merges the pending changes into the sorted run, in place from the back (the
    /// run's vectors grow once; only entries after the first insertion point move).
    fn merge_pending(&mut self) {
        let r = self.rank.unwrap_or(0);
        let pending = std::mem::take(&mut self.pending);
        let old = self.entries.len();
        let total = old + pending.len();
        self.entries.resize(total, Entry::Deleted);
        self.coords.resize(total * r, 0);
        // Entries [0, read) of the run are still in place; slots [write, total) are
        // final; the slots in between are free.
        let mut read = old;
        let mut write = total;
        for (index, entry) in pending.into_iter().rev() {
            while read > 0 && self.key(read - 1) > index.as_slice() {
                read -= 1;
                write -= 1;
                self.entries.swap(read, write);
                self.coords.copy_within(read * r..(read + 1) * r, write * r);
            }
            write -= 1;
            self.entries[write] = entry;
            self.coords[write * r..(write + 1) * r].copy_from_slice(&index);
        }
        debug_assert_eq!(read, write);
    }
}

fn as_slice<'a>((k, e): (&'a ChunkIndices, &'a Entry)) -> (&'a [u64], &'a Entry) {
    (k.as_slice(), e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::manifest::VirtualChunkRef;
    use proptest::prelude::*;

    fn virtual_ref(file: u8, offset: u64) -> ChunkPayload {
        ChunkPayload::Virtual(VirtualChunkRef {
            location: format!("s3://bucket/a/long/prefix/file_{file:04}.nc"),
            offset,
            length: 100 + offset % 7,
            checksum: file
                .is_multiple_of(2)
                .then(|| Checksum::ETag(format!("etag-{file}"))),
        })
    }

    #[test]
    fn entries_are_small_and_sources_shared() {
        assert!(std::mem::size_of::<Entry>() <= 32);
        let mut interner = Interner::default();
        let a = interner.entry(Some(virtual_ref(1, 0)));
        let b = interner.entry(Some(virtual_ref(2, 0)));
        let c = interner.entry(Some(virtual_ref(1, 10)));
        let (Entry::Virtual { source: sa, .. }, Entry::Virtual { source: sc, .. }) = (&a, &c)
        else {
            panic!("not virtual")
        };
        assert!(Arc::ptr_eq(sa, sc));
        // A source adopted from another interner is shared with this one's.
        let mut other = Interner::default();
        let adopted = other.adopt(&b);
        let again = other.entry(Some(virtual_ref(2, 5)));
        let (Entry::Virtual { source: s1, .. }, Entry::Virtual { source: s2, .. }) =
            (&adopted, &again)
        else {
            panic!("not virtual")
        };
        assert!(Arc::ptr_eq(s1, s2));
        assert_eq!(a.payload().map(|p| p.to_payload()), Some(virtual_ref(1, 0)));
    }

    #[test]
    fn merging_keeps_indices_sorted_and_unique() {
        let mut interner = Interner::default();
        let mut chunks = ArrayChunks::default();
        let mut model = BTreeMap::new();
        // Descending, then interleaved writes, overwrites and deletions: several merges.
        for i in (0..5000u64).rev() {
            let p = Some(virtual_ref((i % 5) as u8, i));
            chunks.insert(vec![i / 100, i % 100], interner.entry(p.clone()));
            model.insert(vec![i / 100, i % 100], p);
        }
        for i in (0..10_000u64).step_by(3) {
            let p = (i % 2 == 0).then(|| ChunkPayload::Inline(Bytes::from(vec![i as u8; 3])));
            chunks.insert(vec![i / 100, i % 100], interner.entry(p.clone()));
            model.insert(vec![i / 100, i % 100], p);
        }
        chunks.insert(vec![7], Entry::Deleted);
        model.insert(vec![7], None);
        assert!(chunks.entries.len() > 5000, "merged into the run");
        assert_eq!(chunks.len(), model.len());
        let got: Vec<_> = chunks
            .iter()
            .map(|(k, p)| (k.to_vec(), p.map(|p| p.to_payload())))
            .collect();
        let want: Vec<_> = model.clone().into_iter().collect();
        assert_eq!(got, want);
        for (k, v) in &model {
            assert_eq!(
                chunks.get(k).map(|p| p.map(|p| p.to_payload())),
                Some(v.clone())
            );
        }
        assert_eq!(chunks.get(&[999, 0]), None);
        let start = [42u64, 50];
        let from: Vec<_> = chunks.iter_from(&start).map(|(k, _)| k.to_vec()).collect();
        let want_from: Vec<_> = model
            .range(start.to_vec()..)
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(from, want_from);
        let gone: Vec<ChunkIndices> = vec![vec![0, 0], vec![7], vec![49, 99], vec![99, 0]];
        chunks.remove_all(&gone);
        for g in &gone {
            model.remove(g);
        }
        assert_eq!(
            chunks.keys().map(<[u64]>::to_vec).collect::<Vec<_>>(),
            model.keys().cloned().collect::<Vec<_>>()
        );
    }

    proptest! {
        #[test]
        fn behaves_like_a_sorted_map(ops in prop::collection::vec((0u64..40, 0u64..40, 0u8..4), 0..3000)) {
            let mut interner = Interner::default();
            let mut chunks = ArrayChunks::default();
            let mut model: BTreeMap<ChunkIndices, Option<ChunkPayload>> = BTreeMap::new();
            for (a, b, kind) in ops {
                let index = if kind == 3 && a == 0 { vec![b] } else { vec![a, b] };
                let p = match kind {
                    0 => None,
                    1 => Some(ChunkPayload::Native(NativeChunkRef { id: ChunkId::new([b as u8; 12]), offset: a, length: b })),
                    _ => Some(virtual_ref(b as u8 % 3, a)),
                };
                chunks.insert(index.clone(), interner.entry(p.clone()));
                model.insert(index, p);
            }
            let got: Vec<_> = chunks.iter().map(|(k, p)| (k.to_vec(), p.map(|p| p.to_payload()))).collect();
            let want: Vec<_> = model.into_iter().collect();
            prop_assert_eq!(got, want);
        }

        /// Runs of ascending indices (which extend the sorted run directly) mixed
        /// with indices anywhere, rewrites of earlier ones included.
        #[test]
        fn ascending_runs_and_stray_indices_behave_like_a_sorted_map(
            runs in prop::collection::vec((0u64..200, 0usize..80, prop::collection::vec(0u64..300, 0..5)), 0..40)
        ) {
            let mut interner = Interner::default();
            let mut chunks = ArrayChunks::default();
            let mut model: BTreeMap<ChunkIndices, Option<ChunkPayload>> = BTreeMap::new();
            let mut put = |i: u64, tag: u64| {
                let p = Some(ChunkPayload::Native(NativeChunkRef { id: ChunkId::new([tag as u8; 12]), offset: i, length: tag }));
                chunks.insert(vec![i / 16, i % 16], interner.entry(p.clone()));
                model.insert(vec![i / 16, i % 16], p);
            };
            for (n, (start, len, strays)) in runs.into_iter().enumerate() {
                for i in start..start + len as u64 {
                    put(i, n as u64);
                }
                for i in strays {
                    put(i, 1000 + n as u64);
                }
            }
            let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            let got: Vec<_> = chunks.iter().map(|(k, p)| (k.to_vec(), p.map(|p| p.to_payload()))).collect();
            prop_assert_eq!(got, want);
            for (k, v) in &model {
                prop_assert_eq!(chunks.get(k).map(|p| p.map(|p| p.to_payload())), Some(v.clone()));
            }
            let from: Vec<_> = chunks.iter_from(&[5, 0]).map(|(k, _)| k.to_vec()).collect();
            let want_from: Vec<_> = model.range(vec![5, 0]..).map(|(k, _)| k.clone()).collect();
            prop_assert_eq!(from, want_from);
        }
    }
}
