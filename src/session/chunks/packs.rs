//! Chunk packs: small native chunks of a session written several to one chunk
//! object, so that a thousand 4 KiB chunks cost a request or two, not a thousand.
//!
//! The Icechunk format allows it as it is: a native chunk ref is (chunk object id,
//! offset, length), and Icechunk 2.3.0 reads a chunk at any offset of its object.
//! Garbage collection and expiry keep an object while any live ref names its id, so
//! a pack stays while any ref points into it.
//!
//! A chunk whose encoded length is above the inline threshold and at most the
//! packing threshold (`chunk_packing.threshold_bytes`) is appended to the session's
//! open pack, under a mutex, and its ref `Native { id: pack, offset, length }` is
//! returned at once. The pack is sealed when it reaches the target size
//! (`chunk_packing.target_size_bytes`) and written by the call that filled it. Every
//! pack still open or not yet written is written before anything refers to it
//! durably: by the commit's flush step (after the commit took its changes, so every
//! ref it holds points into a pack sealed by then), before a fork is serialized or
//! its changes are merged, and by [`Session::flush_packs`]. Until a pack is
//! written, reads of its chunks are served from its bytes in memory
//! ([`Packs::read`]): every native read path of the session checks the session's
//! packs before the storage (`reads.rs`, and the chunk port's fast paths).
//!
//! A pack whose write fails stays sealed in memory and is written again by the next
//! flush; the call that filled it fails (without recording its own chunk), and a
//! commit fails with the storage error, leaving the pack to the next try. Memory is
//! bounded by the target size times the packs open or in flight.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use crate::assets::{AssetManager, LocalChunks};
use crate::error::Result;
use crate::format::config::ChunkPackingConfig;
use crate::format::manifest::{ChunkPayload, NativeChunkRef};
use crate::format::ChunkId;
use crate::storage::StorageResult;

use crate::session::Session;

/// Packs written at once by a flush.
const FLUSH_CONCURRENCY: usize = 8;

/// The sizes that decide packing, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PackSettings {
    /// Chunks above this many encoded bytes are stored inline (never packed).
    pub(crate) inline_bytes: u64,
    /// Chunks of at most this many encoded bytes are packed.
    pub(crate) threshold_bytes: u64,
    /// A pack is sealed and written once it holds this many bytes.
    pub(crate) target_bytes: usize,
}

impl PackSettings {
    /// The settings of `config` for storage whose objects are local files or not;
    /// `None` when packing is off there.
    pub(crate) fn of(
        config: &ChunkPackingConfig,
        inline_bytes: u64,
        local_files: bool,
    ) -> Option<Self> {
        if !config.enabled_for(local_files) || u64::from(config.threshold_bytes()) <= inline_bytes {
            return None;
        }
        Some(PackSettings {
            inline_bytes,
            threshold_bytes: u64::from(config.threshold_bytes()),
            target_bytes: usize::try_from(config.target_size_bytes()).unwrap_or(usize::MAX),
        })
    }
}

/// A pack that is full (or flushed): its bytes, readable until written.
#[derive(Debug)]
pub(crate) struct SealedPack {
    id: ChunkId,
    bytes: Bytes,
    /// Held while the pack is written (so it is written once at a time), `true` once
    /// it was.
    written: tokio::sync::Mutex<bool>,
}

/// The pack chunks are appended to.
#[derive(Debug)]
struct OpenPack {
    id: ChunkId,
    bytes: Vec<u8>,
}

#[derive(Debug, Default)]
struct PackState {
    open: Option<OpenPack>,
    /// Sealed packs not written yet (being written, or whose write failed).
    sealed: HashMap<ChunkId, Arc<SealedPack>>,
}

impl PackState {
    /// Seals the open pack, if any, and returns it.
    fn seal(&mut self) -> Option<Arc<SealedPack>> {
        let open = self.open.take()?;
        let pack = Arc::new(SealedPack {
            id: open.id,
            bytes: Bytes::from(open.bytes),
            written: tokio::sync::Mutex::new(false),
        });
        self.sealed.insert(pack.id, Arc::clone(&pack));
        Some(pack)
    }
}

/// A session's packs (see the module documentation).
#[derive(Debug)]
pub(crate) struct Packs {
    settings: Option<PackSettings>,
    state: Mutex<PackState>,
}

/// The ref of a chunk appended to a pack, and the pack when the chunk filled it (the
/// caller writes it).
pub(crate) struct Appended {
    pub(crate) payload: ChunkPayload,
    pub(crate) full: Option<Arc<SealedPack>>,
}

impl Packs {
    /// No pack yet, packing with `settings` (`None`: never).
    pub(crate) fn new(settings: Option<PackSettings>) -> Self {
        Packs {
            settings,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, PackState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a chunk of `len` encoded bytes goes to a pack.
    pub(crate) fn takes(&self, len: usize) -> bool {
        self.settings.is_some_and(|s| {
            let len = len as u64;
            len > s.inline_bytes && len <= s.threshold_bytes
        })
    }

    /// Appends `bytes` to the open pack (opening one when there is none) and returns
    /// the chunk's ref; when the pack reached its target size it is sealed and
    /// returned too, for the caller to write. Call only when [`Packs::takes`] the
    /// chunk.
    pub(crate) fn append(&self, bytes: &[u8]) -> Appended {
        let target = self.settings.map_or(usize::MAX, |s| s.target_bytes);
        let mut state = self.state();
        let open = state.open.get_or_insert_with(|| OpenPack {
            id: ChunkId::random(),
            bytes: Vec::with_capacity(target.min(64 << 20)),
        });
        let offset = open.bytes.len() as u64;
        open.bytes.extend_from_slice(bytes);
        let payload = ChunkPayload::Native(NativeChunkRef {
            id: open.id,
            offset,
            length: bytes.len() as u64,
        });
        let full = if open.bytes.len() >= target {
            state.seal()
        } else {
            None
        };
        Appended { payload, full }
    }

    /// Drops the open pack and the sealed packs not written yet, unwritten: every
    /// chunk in them belongs to changes being discarded. A pack another call is
    /// writing now is left to it.
    pub(crate) fn discard(&self) {
        let mut state = self.state();
        state.open = None;
        state.sealed.clear();
    }

    /// Whether every pack is written (none open, none sealed and unwritten).
    #[cfg(test)]
    pub(crate) fn all_written(&self) -> bool {
        let state = self.state();
        state.open.is_none() && state.sealed.is_empty()
    }

    /// Byte ranges (absolute, in bytes) of pack `id` when it is not written yet and
    /// so is in memory; `None` for every other chunk object, and when a range lies
    /// outside the pack (the storage read then reports it).
    pub(crate) fn read(&self, id: &ChunkId, ranges: &[Range<u64>]) -> Option<Vec<Bytes>> {
        let state = self.state();
        if let Some(open) = state.open.as_ref().filter(|o| o.id == *id) {
            return ranges
                .iter()
                .map(|r| {
                    let r = within(r, open.bytes.len())?;
                    Some(Bytes::copy_from_slice(&open.bytes[r]))
                })
                .collect();
        }
        let sealed = state.sealed.get(id)?;
        ranges
            .iter()
            .map(|r| Some(sealed.bytes.slice(within(r, sealed.bytes.len())?)))
            .collect()
    }

    /// Copies `dest.len()` bytes of pack `id` from byte `offset` into `dest` when
    /// the pack is in memory; `false` otherwise.
    pub(crate) fn read_into(&self, id: &ChunkId, offset: u64, dest: &mut [u8]) -> bool {
        let Some(end) = offset.checked_add(dest.len() as u64) else {
            return false;
        };
        match self.read(id, std::slice::from_ref(&(offset..end))) {
            Some(mut parts) => match parts.pop() {
                Some(b) if b.len() == dest.len() => {
                    dest.copy_from_slice(&b);
                    true
                }
                _ => false,
            },
            None => false,
        }
    }

    /// Writes the sealed `pack` (unless it was written meanwhile) and forgets its
    /// bytes.
    ///
    /// # Errors
    /// Storage errors; the pack stays sealed, to be written by the next flush.
    pub(crate) async fn write(&self, assets: &AssetManager, pack: &SealedPack) -> Result<()> {
        let mut written = pack.written.lock().await;
        if !*written {
            assets.write_chunk(&pack.id, pack.bytes.clone()).await?;
            *written = true;
        }
        drop(written);
        self.state().sealed.remove(&pack.id);
        Ok(())
    }

    /// [`Packs::write`] with a blocking write to local files (on a blocking or
    /// compute thread). A pack another call is writing now is left to it.
    ///
    /// # Errors
    /// Storage errors; the pack stays sealed, to be written by the next flush.
    pub(crate) fn write_local(&self, local: &LocalChunks, pack: &SealedPack) -> StorageResult<()> {
        let Ok(mut written) = pack.written.try_lock() else {
            return Ok(());
        };
        if !*written {
            local.write(&pack.id, &pack.bytes)?;
            *written = true;
        }
        drop(written);
        self.state().sealed.remove(&pack.id);
        Ok(())
    }

    /// Seals the open pack and writes every pack not written yet; waits for packs
    /// other calls are writing.
    ///
    /// # Errors
    /// Storage errors writing a pack; the packs not written stay in memory, to be
    /// written by the next flush.
    pub(crate) async fn flush(&self, assets: &AssetManager) -> Result<()> {
        let pending: Vec<Arc<SealedPack>> = {
            let mut state = self.state();
            state.seal();
            state.sealed.values().cloned().collect()
        };
        futures::stream::iter(pending)
            .map(|pack| async move { self.write(assets, &pack).await })
            .buffer_unordered(FLUSH_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }
}

/// `r` as a slice range of a buffer of `len` bytes, when it lies within.
fn within(r: &Range<u64>, len: usize) -> Option<Range<usize>> {
    let start = usize::try_from(r.start).ok()?;
    let end = usize::try_from(r.end).ok()?;
    (start <= end && end <= len).then_some(start..end)
}

impl Session {
    /// Writes every chunk pack of this session not written yet: the open pack
    /// (sealed first, however full) and packs whose write failed before. Commits,
    /// merges of forks and [`Session::to_fork_bytes`] do this themselves; call it to
    /// bound what a failure of this process loses (see
    /// [`crate::format::config::ChunkPackingConfig`]). A no-op when packing is off or
    /// nothing is pending.
    ///
    /// # Errors
    /// Storage errors writing a pack; the packs not written stay in memory and are
    /// written by the next call (or commit).
    pub async fn flush_packs(&self) -> Result<()> {
        self.inner.packs.flush(&self.inner.ctx.assets).await
    }

    /// The ref of a chunk's bytes appended to this session's open pack, writing the
    /// pack when they filled it; `None` when the chunk is not packed.
    ///
    /// # Errors
    /// Storage errors writing the filled pack (the chunk's ref is then not
    /// returned; the pack is written again by the next flush).
    pub(in crate::session) async fn packed_payload(
        &self,
        bytes: &[u8],
    ) -> Result<Option<ChunkPayload>> {
        let packs = &self.inner.packs;
        if !packs.takes(bytes.len()) {
            return Ok(None);
        }
        let appended = packs.append(bytes);
        if let Some(full) = appended.full {
            packs.write(&self.inner.ctx.assets, &full).await?;
        }
        Ok(Some(appended.payload))
    }

    /// This session's packs.
    pub(in crate::session) fn packs(&self) -> &Packs {
        &self.inner.packs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packs(target: usize) -> Packs {
        Packs::new(Some(PackSettings {
            inline_bytes: 4,
            threshold_bytes: 100,
            target_bytes: target,
        }))
    }

    #[test]
    fn takes_only_chunks_between_inline_and_threshold() {
        let p = packs(1000);
        assert!(!p.takes(4));
        assert!(p.takes(5));
        assert!(p.takes(100));
        assert!(!p.takes(101));
        assert!(!Packs::new(None).takes(50));
    }

    #[test]
    fn appends_at_offsets_and_seals_at_target() {
        let p = packs(20);
        let a = p.append(&[1; 10]);
        let b = p.append(&[2; 10]);
        let (ChunkPayload::Native(ra), ChunkPayload::Native(rb)) = (&a.payload, &b.payload) else {
            panic!("native refs expected");
        };
        assert_eq!(ra.id, rb.id);
        assert_eq!(
            (ra.offset, ra.length, rb.offset, rb.length),
            (0, 10, 10, 10)
        );
        assert!(a.full.is_none());
        let full = b.full.expect("the second chunk fills the pack");
        assert_eq!(full.bytes.len(), 20);
        // Readable from memory while sealed and unwritten.
        let parts = p.read(&ra.id, &[10..12, 0..1]).unwrap();
        assert_eq!(
            parts,
            vec![Bytes::from_static(&[2, 2]), Bytes::from_static(&[1])]
        );
        assert!(p.read(&ra.id, std::slice::from_ref(&(15..21))).is_none());
        // The next chunk opens a new pack.
        let c = p.append(&[3; 5]);
        let ChunkPayload::Native(rc) = &c.payload else {
            panic!("native ref expected");
        };
        assert_ne!(rc.id, ra.id);
        assert_eq!(rc.offset, 0);
        let mut dest = [0u8; 5];
        assert!(p.read_into(&rc.id, 0, &mut dest));
        assert_eq!(dest, [3; 5]);
        assert!(!p.read_into(&rc.id, 1, &mut dest));
        assert!(!p.all_written());
        // Discarding forgets both the sealed pack and the open one.
        p.discard();
        assert!(p.all_written());
        assert!(p.read(&rc.id, std::slice::from_ref(&(0..5))).is_none());
        assert!(p.read(&ra.id, std::slice::from_ref(&(0..5))).is_none());
    }
}
