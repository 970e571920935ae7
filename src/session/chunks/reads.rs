//! Reading chunk bytes: one chunk (whole or by byte ranges) and many chunks at once,
//! with nearby byte ranges of one object read by one request
//! ([`crate::storage::coalesce`]): the inner chunks of a shard, the virtual chunks of
//! one NetCDF/HDF5 file.
//!
//! Chunks in a pack this session has not written yet (`packs`) are read from its
//! bytes in memory, on every path here and in the chunk port's fast paths.
//!
//! Coalescing never widens what is read beyond an object a chunk ref names: virtual
//! refs are grouped by their exact location (and checksum), and each group's location
//! is normalized, matched to its container and authorized before any request, as a
//! single chunk's is ([`crate::virtual_refs`]). Checksums stay per chunk: a request
//! serves only refs that carry the same checksum, under that checksum's precondition.

use std::collections::HashMap;
use std::ops::Range;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};

use crate::error::{Error, Result};
use crate::format::manifest::{Checksum, ChunkPayload};
use crate::format::{ChunkId, ChunkIndices, NodePath};
use crate::storage::coalesce::{self, CoalesceOptions};
use crate::storage::StorageError;
use crate::virtual_refs::fetch::worth_retrying_per_chunk;

use crate::session::Session;

/// Chunks whose refs are resolved and grouped together by [`Session::get_chunks`]:
/// only chunks of one window share a request.
const WINDOW: usize = 1024;

/// The outcome of one chunk of [`Session::get_chunks`]: its position in the request
/// and its encoded bytes (`None`: never written).
pub type ChunkOutcome = (usize, Result<Option<Bytes>>);

/// The object a chunk's bytes are read from, for grouping.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Source {
    /// A native chunk object.
    Native(ChunkId),
    /// A virtual chunk's object, by the ref's exact location text and checksum.
    Virtual {
        location: String,
        checksum: Option<Checksum>,
    },
}

/// One chunk of a group: where it is in the request, what it is, and its bytes'
/// range in the object (checked: no overflow).
struct Member {
    pos: usize,
    path: NodePath,
    index: ChunkIndices,
    payload: ChunkPayload,
    range: Range<u64>,
}

impl Session {
    /// The encoded bytes of a chunk, or of `range` (bytes, relative to the chunk) of
    /// it; `None` when the chunk was never written.
    ///
    /// # Errors
    /// [`Error::ChunkUnreadable`] when a native chunk object is missing or shorter than
    /// its ref, or `range` lies outside the chunk; [`Error::VirtualChunk`] for virtual
    /// chunk failures (unauthorized, checksum mismatch, missing source, short read);
    /// the errors of [`Session::get_chunk_ref`].
    pub async fn get_chunk(
        &self,
        path: &NodePath,
        index: &[u64],
        range: Option<Range<u64>>,
    ) -> Result<Option<Bytes>> {
        let Some(payload) = self.get_chunk_ref(path, index).await? else {
            return Ok(None);
        };
        let range = range.unwrap_or(0..payload_len(&payload));
        let mut parts = self.read_payload(path, index, &payload, &[range]).await?;
        Ok(Some(parts.pop().unwrap_or_default()))
    }

    /// Byte ranges (`start..end`, in bytes, relative to the chunk) of a chunk's
    /// encoded bytes: one `Bytes` per range, in the order of `ranges`; `None` when the
    /// chunk was never written. Nearby ranges are read with one request (for the
    /// inner chunks of a shard), see [`crate::storage::coalesce`].
    ///
    /// # Errors
    /// As [`Session::get_chunk`]; one failing range fails the call.
    pub async fn get_chunk_ranges(
        &self,
        path: &NodePath,
        index: &[u64],
        ranges: &[Range<u64>],
    ) -> Result<Option<Vec<Bytes>>> {
        let Some(payload) = self.get_chunk_ref(path, index).await? else {
            return Ok(None);
        };
        self.read_payload(path, index, &payload, ranges)
            .await
            .map(Some)
    }

    /// The encoded bytes of many whole chunks (`(array path, chunk index)` pairs),
    /// as a stream of `(position in chunks, outcome)` in completion order: `None` for
    /// a chunk never written, the error of [`Session::get_chunk`] for one that cannot
    /// be read. Chunks whose bytes lie close together in one object (virtual chunks
    /// of one file, chunks sharing a native chunk object) are read with one request
    /// per [`CoalesceOptions::default`] span; refs are resolved and grouped by windows
    /// of 1,024 chunks. At most `concurrency` requests are in flight, so at most
    /// `concurrency` × 16 MiB ([`coalesce::DEFAULT_MAX_SPAN`]), or `concurrency`
    /// chunks when a chunk is larger, are held by the stream at once.
    ///
    /// When a merged request fails in a way that may be one chunk's (a short read:
    /// one chunk past the end of its file does not fail its neighbours), its chunks
    /// are read again one by one, so each chunk reports its own outcome. A merged
    /// virtual request that fails for every chunk alike (missing object, refused
    /// access, checksum mismatch, read deadline, ...) is not repeated: each of its
    /// chunks reports that error.
    pub fn get_chunks<'a>(
        &'a self,
        chunks: Vec<(NodePath, ChunkIndices)>,
        concurrency: usize,
    ) -> BoxStream<'a, ChunkOutcome> {
        let concurrency = concurrency.max(1);
        let mut windows: Vec<Vec<(usize, NodePath, ChunkIndices)>> = Vec::new();
        for (pos, (path, index)) in chunks.into_iter().enumerate() {
            match windows.last_mut() {
                Some(w) if w.len() < WINDOW => w.push((pos, path, index)),
                _ => windows.push(vec![(pos, path, index)]),
            }
        }
        futures::stream::iter(windows)
            .then(move |window| self.plan_window(window, concurrency))
            .flat_map(futures::stream::iter)
            .buffer_unordered(concurrency)
            .flat_map(futures::stream::iter)
            .boxed()
    }

    /// Resolves the refs of one window of chunks and plans its reads: one job for
    /// the chunks that need no request (missing, inline, unresolvable), one per
    /// planned request of each group of chunks in one object.
    async fn plan_window<'a>(
        &'a self,
        window: Vec<(usize, NodePath, ChunkIndices)>,
        concurrency: usize,
    ) -> Vec<BoxFuture<'a, Vec<ChunkOutcome>>> {
        let refs: Vec<_> = futures::stream::iter(window)
            .map(|(pos, path, index)| async move {
                let r = self.get_chunk_ref(&path, &index).await;
                (pos, path, index, r)
            })
            .buffered(concurrency)
            .collect()
            .await;
        let mut ready: Vec<ChunkOutcome> = Vec::new();
        let mut groups: Vec<(Source, Vec<Member>)> = Vec::new();
        let mut group_of: HashMap<Source, usize> = HashMap::new();
        for (pos, path, index, r) in refs {
            let payload = match r {
                Err(e) => {
                    ready.push((pos, Err(e)));
                    continue;
                }
                Ok(None) => {
                    ready.push((pos, Ok(None)));
                    continue;
                }
                Ok(Some(ChunkPayload::Inline(b))) => {
                    ready.push((pos, Ok(Some(b))));
                    continue;
                }
                Ok(Some(p)) => p,
            };
            let (source, offset, length) = match &payload {
                ChunkPayload::Native(n) => (Source::Native(n.id), n.offset, n.length),
                ChunkPayload::Virtual(v) => (
                    Source::Virtual {
                        location: v.location.clone(),
                        checksum: v.checksum.clone(),
                    },
                    v.offset,
                    v.length,
                ),
                ChunkPayload::Inline(_) => continue,
            };
            let Some(end) = offset.checked_add(length) else {
                // Unreadable: the single-chunk read reports why.
                let whole = 0..length;
                let result = self
                    .read_payload(&path, &index, &payload, std::slice::from_ref(&whole))
                    .await
                    .map(|mut p| p.pop());
                ready.push((pos, result));
                continue;
            };
            let member = Member {
                pos,
                path,
                index,
                payload,
                range: offset..end,
            };
            let g = *group_of.entry(source.clone()).or_insert_with(|| {
                groups.push((source, Vec::new()));
                groups.len() - 1
            });
            groups[g].1.push(member);
        }
        let mut jobs: Vec<BoxFuture<'a, Vec<ChunkOutcome>>> = Vec::new();
        if !ready.is_empty() {
            jobs.push(futures::future::ready(ready).boxed());
        }
        for (source, members) in groups {
            let ranges: Vec<Range<u64>> = members.iter().map(|m| m.range.clone()).collect();
            let mut members: Vec<Option<Member>> = members.into_iter().map(Some).collect();
            for span in coalesce::plan(&ranges, CoalesceOptions::default()) {
                let of_span: Vec<Member> = span
                    .members
                    .iter()
                    .filter_map(|&i| members.get_mut(i).and_then(Option::take))
                    .collect();
                let source = source.clone();
                jobs.push(self.read_span(source, of_span).boxed());
            }
        }
        jobs
    }

    /// Reads the chunks of one planned request: with one request when there are
    /// several, falling back to one read per chunk when that request fails.
    async fn read_span(&self, source: Source, members: Vec<Member>) -> Vec<ChunkOutcome> {
        if members.len() > 1 {
            let ranges: Vec<Range<u64>> = members.iter().map(|m| m.range.clone()).collect();
            let read = match &source {
                Source::Native(id) => match self.packs().read(id, &ranges) {
                    // A pack not written yet: its bytes are in memory.
                    Some(parts) => Some(parts),
                    None => self
                        .inner
                        .ctx
                        .assets
                        .fetch_chunk_ranges(id, &ranges)
                        .await
                        .ok(),
                },
                Source::Virtual { location, checksum } => match self
                    .inner
                    .ctx
                    .virtual_resolver
                    .fetch_ranges(location, checksum.as_ref(), &ranges)
                    .await
                {
                    Ok(parts) => Some(parts),
                    Err(e) if worth_retrying_per_chunk(&e) => None,
                    // Would fail again for every chunk: not repeated.
                    Err(e) => {
                        let mut sources: Vec<_> =
                            members[1..].iter().map(|_| e.for_another_chunk()).collect();
                        sources.push(e);
                        return members
                            .iter()
                            .zip(sources)
                            .map(|(m, source)| {
                                let error = Error::VirtualChunk {
                                    path: m.path.clone(),
                                    index: m.index.clone(),
                                    source,
                                };
                                (m.pos, Err(error))
                            })
                            .collect();
                    }
                },
            };
            if let Some(parts) = read.filter(|p| p.len() == members.len()) {
                return members
                    .iter()
                    .zip(parts)
                    .map(|(m, b)| (m.pos, Ok(Some(b))))
                    .collect();
            }
        }
        futures::stream::iter(members)
            .map(|m| async move {
                let whole = 0..payload_len(&m.payload);
                let result = self
                    .read_payload(&m.path, &m.index, &m.payload, std::slice::from_ref(&whole))
                    .await
                    .map(|mut p| p.pop());
                (m.pos, result)
            })
            .buffer_unordered(coalesce::DEFAULT_CONCURRENCY)
            .collect()
            .await
    }

    /// Reads `ranges` (relative to the chunk, in bytes) of a chunk's `payload`.
    pub(in crate::session) async fn read_payload(
        &self,
        path: &NodePath,
        index: &[u64],
        payload: &ChunkPayload,
        ranges: &[Range<u64>],
    ) -> Result<Vec<Bytes>> {
        let unreadable = |reason: String| Error::ChunkUnreadable {
            path: path.clone(),
            index: index.to_vec(),
            reason,
        };
        match payload {
            ChunkPayload::Inline(b) => {
                let len = b.len() as u64;
                ranges
                    .iter()
                    .map(|r| {
                        coalesce::slice(b, 0, r).ok_or_else(|| {
                            unreadable(format!(
                                "byte range {r:?} is outside the {len}-byte inline chunk"
                            ))
                        })
                    })
                    .collect()
            }
            ChunkPayload::Native(n) => {
                let mut abs = Vec::with_capacity(ranges.len());
                for r in ranges {
                    if r.start > r.end || r.end > n.length {
                        return Err(unreadable(format!(
                            "byte range {r:?} is outside the {}-byte chunk",
                            n.length
                        )));
                    }
                    // Offsets come from a manifest: checked, never wrapped to an
                    // empty (or any other) range.
                    match (n.offset.checked_add(r.start), n.offset.checked_add(r.end)) {
                        (Some(start), Some(end)) => abs.push(start..end),
                        _ => {
                            return Err(unreadable(format!(
                                "the ref's offset {} plus byte range {r:?} overflows 64 bits",
                                n.offset
                            )))
                        }
                    }
                }
                // A pack this session has not written yet is read from memory.
                if let Some(parts) = self.packs().read(&n.id, &abs) {
                    return Ok(parts);
                }
                self.inner
                    .ctx
                    .assets
                    .fetch_chunk_ranges(&n.id, &abs)
                    .await
                    .map_err(|e| native_read_error(path, index, e))
            }
            ChunkPayload::Virtual(v) => {
                let mut abs = Vec::with_capacity(ranges.len());
                for r in ranges {
                    let start = v.offset.checked_add(r.start);
                    let end = v.offset.checked_add(r.end);
                    match (start, end) {
                        (Some(start), Some(end))
                            if r.start <= r.end
                                && r.end <= v.length
                                && v.offset.checked_add(v.length).is_some() =>
                        {
                            abs.push(start..end)
                        }
                        _ => {
                            return Err(unreadable(format!(
                                "byte range {r:?} of the virtual ref at offset {} with {} bytes \
                                 is outside it or overflows 64 bits",
                                v.offset, v.length
                            )))
                        }
                    }
                }
                self.inner
                    .ctx
                    .virtual_resolver
                    .fetch_ranges(&v.location, v.checksum.as_ref(), &abs)
                    .await
                    .map_err(|source| Error::VirtualChunk {
                        path: path.clone(),
                        index: index.to_vec(),
                        source,
                    })
            }
        }
    }
}

/// The error of a failed read of a native chunk object: [`Error::ChunkUnreadable`]
/// when the object is missing or shorter than the ref says, else the storage error.
pub(in crate::session) fn native_read_error(
    path: &NodePath,
    index: &[u64],
    e: StorageError,
) -> Error {
    let unreadable = |reason: String| Error::ChunkUnreadable {
        path: path.clone(),
        index: index.to_vec(),
        reason,
    };
    match e {
        StorageError::NotFound { key } => unreadable(format!("chunk object `{key}` is missing")),
        StorageError::ShortRead {
            key,
            size,
            requested,
        } => unreadable(format!(
            "chunk object `{key}` has {size} bytes, the ref needs bytes {requested:?}"
        )),
        e => e.into(),
    }
}

/// The length in bytes of a chunk's encoded bytes, as its ref records it.
pub(crate) fn payload_len(p: &ChunkPayload) -> u64 {
    match p {
        ChunkPayload::Inline(b) => b.len() as u64,
        ChunkPayload::Native(n) => n.length,
        ChunkPayload::Virtual(v) => v.length,
    }
}
