//! Compaction: the small native chunks of a branch's arrays, written one per chunk
//! object, rewritten into packs ([`Repository::compact`]).
//!
//! A pack is an ordinary chunk object that several native chunk refs point into at
//! different offsets (see `docs/how-to/packing.md`). Sessions pack small chunks as
//! they write them when `chunk_packing` is on; compaction does the same afterwards
//! for chunks written one object each (by a repository with packing off, by
//! Icechunk, or before packing existed), so that reading them back costs a request
//! per pack instead of one per chunk.
//!
//! Which chunks: a native chunk ref of at most `chunk_packing.threshold_bytes`
//! encoded bytes (the configured value, or its default, whatever the packing mode)
//! that starts at offset 0 of its object and whose object no other ref of the
//! compacted arrays names. Those tests are free (the refs are read anyway) and
//! leave every chunk already in a pack (at an offset, or sharing its object); a chunk
//! whose pack-mates all live in arrays left out of the compaction may be copied,
//! which costs bytes, never correctness. Inline and virtual refs are left as they
//! are, and so are larger chunks.
//!
//! How: the chunks are grouped in the order of their array's path and chunk index
//! into packs of about `chunk_packing.target_size_bytes`, each pack's chunks are
//! read (their encoded bytes, copied byte for byte: no codec runs) and the pack is
//! written; once every pack is written, the refs are replaced in one writable
//! session and committed. The new commit has the same tree, metadata and values;
//! only chunk refs change.
//!
//! Safety: nothing refers to a pack until the commit, so a compaction that fails or
//! is killed leaves the branch as it was, and the packs it wrote are garbage that
//! [`Repository::garbage_collect`] deletes. The commit does not rebase: when the
//! branch moved while the chunks were copied, the compaction fails with
//! [`Error::Conflict`] and changes nothing (run it again). The single-chunk objects
//! the compaction replaced stay while older snapshots refer to them; expiry
//! ([`Repository::expire_snapshots`]) and garbage collection delete them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use crate::error::{Error, Result};
use crate::format::manifest::{ChunkPayload, NativeChunkRef};
use crate::format::{ChunkId, ChunkIndices, NodePath, SnapshotId};
use crate::session::{CommitOptions, Session};

use super::Repository;

/// Chunk reads in flight per pack being assembled.
const READ_CONCURRENCY: usize = 16;
/// Packs assembled and written at once (bounds memory to this many packs).
const PACK_CONCURRENCY: usize = 2;

/// Options of [`Repository::compact`].
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct CompactOptions {
    /// The arrays to compact: an array's path, or a group's for every array below
    /// it; empty (the default) for every array of the branch.
    pub paths: Vec<NodePath>,
    /// The new commit's message; default `compact: N chunks into M packs`.
    pub message: Option<String>,
    /// Say what would be rewritten; read and write nothing but the refs.
    pub dry_run: bool,
}

impl CompactOptions {
    /// These options compacting only `paths` (arrays, or groups for the arrays below
    /// them).
    pub fn paths(mut self, paths: impl IntoIterator<Item = NodePath>) -> Self {
        self.paths = paths.into_iter().collect();
        self
    }

    /// These options committing with `message`.
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    /// These options only saying what would be rewritten (`true`).
    pub fn dry_run(mut self, yes: bool) -> Self {
        self.dry_run = yes;
        self
    }
}

/// What a compaction did (with `dry_run`, would do).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactSummary {
    /// The branch.
    pub branch: String,
    /// The commit whose chunks were compacted (the branch's tip when it started).
    pub base: SnapshotId,
    /// The new commit; `None` with `dry_run`, and when there was nothing to rewrite
    /// (fewer than two chunks qualify), when no commit is made.
    pub snapshot: Option<SnapshotId>,
    /// The arrays examined.
    pub arrays: usize,
    /// Chunks rewritten into packs.
    pub chunks: u64,
    /// Their encoded bytes (what was copied).
    pub bytes: u64,
    /// Packs written.
    pub packs: u64,
    /// Native chunks left as they were: above the threshold, or already in a pack.
    pub chunks_left: u64,
    /// The packing threshold used, in bytes.
    pub threshold_bytes: u64,
    /// The pack size aimed at, in bytes.
    pub target_size_bytes: u64,
    /// Whether nothing was written.
    pub dry_run: bool,
}

/// A chunk to rewrite.
struct Member {
    path: NodePath,
    index: ChunkIndices,
    length: u64,
    /// Where it goes in its pack, in bytes.
    offset: u64,
}

/// A pack to write: its id, size in bytes and chunks (at increasing offsets).
struct PackPlan {
    id: ChunkId,
    size: u64,
    members: Vec<Member>,
}

/// Every array `paths` name in `session` (all arrays when empty), sorted by path.
fn arrays_of(session: &Session, paths: &[NodePath]) -> Result<Vec<NodePath>> {
    let mut arrays = BTreeSet::new();
    if paths.is_empty() {
        arrays.extend(
            session
                .list_nodes()?
                .into_iter()
                .filter(|n| n.array().is_some())
                .map(|n| n.path),
        );
    }
    for path in paths {
        let node = session.get_node(path)?;
        if node.array().is_some() {
            arrays.insert(node.path);
        } else {
            arrays.extend(
                session
                    .list_nodes_under(path)?
                    .into_iter()
                    .filter(|n| n.array().is_some())
                    .map(|n| n.path),
            );
        }
    }
    Ok(arrays.into_iter().collect())
}

/// Reads the chunks of `plan` from `session`, checking each one's length, and
/// writes the pack.
async fn write_pack(repo: &Repository, session: &Session, plan: &PackPlan) -> Result<()> {
    let size = usize::try_from(plan.size).map_err(|_| Error::ChunkUnreadable {
        path: plan.members[0].path.clone(),
        index: plan.members[0].index.clone(),
        reason: format!("a pack of {} bytes does not fit in memory", plan.size),
    })?;
    let mut bytes = vec![0u8; size];
    let wanted = plan
        .members
        .iter()
        .map(|m| (m.path.clone(), m.index.clone()))
        .collect();
    let mut reads = session.get_chunks(wanted, READ_CONCURRENCY);
    while let Some((pos, outcome)) = reads.next().await {
        let m = &plan.members[pos];
        let unreadable = |reason: String| Error::ChunkUnreadable {
            path: m.path.clone(),
            index: m.index.clone(),
            reason,
        };
        let chunk = outcome?.ok_or_else(|| unreadable("its ref is gone".into()))?;
        if chunk.len() as u64 != m.length {
            return Err(unreadable(format!(
                "read {} bytes, its ref says {}",
                chunk.len(),
                m.length
            )));
        }
        // Offsets and lengths were summed into `size`, which fits a usize.
        let start = m.offset as usize;
        bytes[start..start + chunk.len()].copy_from_slice(&chunk);
    }
    drop(reads);
    repo.inner
        .assets
        .write_chunk(&plan.id, Bytes::from(bytes))
        .await
}

impl Repository {
    /// Rewrites the small native chunks of `branch`'s arrays (all of them, or those
    /// `options.paths` name) into packs, in one new commit on `branch` with the same
    /// tree and values: only chunk refs change. A chunk qualifies when its ref is
    /// native, at most `chunk_packing.threshold_bytes` long (default 65,536 bytes),
    /// starts at offset 0 of its object and no other ref of those arrays names that
    /// object; packs are about `chunk_packing.target_size_bytes` (default 8 MiB).
    /// Both sizes come from the configuration whatever its packing mode, so a
    /// repository with packing disabled is compacted too. Chunk bytes are copied as
    /// stored (no decoding); inline and virtual refs are left as they are. With
    /// fewer than two qualifying chunks nothing is written and no commit is made.
    ///
    /// A compaction that fails or is killed leaves the branch unchanged (the packs
    /// it wrote are garbage for [`Repository::garbage_collect`]). The commit does not
    /// rebase: when another writer moved the branch meanwhile, it fails with
    /// [`Error::Conflict`]; run it again. After [`Repository::expire_snapshots`] and
    /// garbage collection, the replaced single-chunk objects are deleted.
    ///
    /// ```no_run
    /// # async fn example(repo: floe::Repository) -> floe::Result<()> {
    /// use floe::repository::CompactOptions;
    ///
    /// let done = repo.compact("main", &CompactOptions::default()).await?;
    /// println!(
    ///     "{} chunks ({} bytes) into {} packs: commit {:?}",
    ///     done.chunks, done.bytes, done.packs, done.snapshot
    /// );
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::BranchNotFound`]; [`Error::NodeNotFound`] for a path of
    /// `options.paths` that is not in the tree; [`Error::ChunkUnreadable`] when a
    /// chunk to rewrite cannot be read whole; [`Error::Conflict`] when the branch
    /// moved before the commit; [`Error::RepositoryReadOnly`]; storage and format
    /// errors (the branch is then unchanged).
    pub async fn compact(&self, branch: &str, options: &CompactOptions) -> Result<CompactSummary> {
        let session = self.writable_session(branch).await?;
        session.load().await?;
        let packing = self.config().chunk_packing();
        let threshold = u64::from(packing.threshold_bytes());
        let target = u64::from(packing.target_size_bytes()).max(1);
        let arrays = arrays_of(&session, &options.paths)?;

        // Every native ref of the arrays, and how many refs name each object.
        let mut native: Vec<(NodePath, ChunkIndices, NativeChunkRef)> = Vec::new();
        let mut named: HashMap<ChunkId, u32> = HashMap::new();
        for path in &arrays {
            for (index, payload) in session.chunk_refs(path).await? {
                if let ChunkPayload::Native(n) = payload {
                    *named.entry(n.id).or_default() += 1;
                    native.push((path.clone(), index, n));
                }
            }
        }
        let (chosen, left): (Vec<_>, Vec<_>) = native.into_iter().partition(|(_, _, n)| {
            n.offset == 0 && n.length > 0 && n.length <= threshold && named.get(&n.id) == Some(&1)
        });

        let mut summary = CompactSummary {
            branch: branch.to_string(),
            base: session.snapshot_id(),
            snapshot: None,
            arrays: arrays.len(),
            chunks: 0,
            bytes: 0,
            packs: 0,
            chunks_left: left.len() as u64,
            threshold_bytes: threshold,
            target_size_bytes: target,
            dry_run: options.dry_run,
        };
        if chosen.len() < 2 {
            summary.chunks_left += chosen.len() as u64;
            return Ok(summary);
        }

        // Packs in path and index order, each closed once it reaches the target.
        let mut plans: Vec<PackPlan> = Vec::new();
        for (path, index, n) in chosen {
            if plans.last().is_none_or(|p| p.size >= target) {
                plans.push(PackPlan {
                    id: ChunkId::random(),
                    size: 0,
                    members: Vec::new(),
                });
            }
            let Some(open) = plans.last_mut() else {
                continue;
            };
            open.members.push(Member {
                path,
                index,
                length: n.length,
                offset: open.size,
            });
            open.size += n.length;
            summary.chunks += 1;
            summary.bytes += n.length;
        }
        summary.packs = plans.len() as u64;
        if options.dry_run {
            return Ok(summary);
        }

        // The futures are made first: a closure over `plans` in the stream would
        // make this future not `Send` (a higher-ranked lifetime).
        let writes: Vec<_> = plans
            .iter()
            .map(|plan| write_pack(self, &session, plan))
            .collect();
        futures::stream::iter(writes)
            .buffer_unordered(PACK_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await?;

        // Every pack is written: the refs may point into them.
        let mut refs: BTreeMap<&NodePath, Vec<(ChunkIndices, Option<ChunkPayload>)>> =
            BTreeMap::new();
        for plan in &plans {
            for m in &plan.members {
                let payload = ChunkPayload::Native(NativeChunkRef {
                    id: plan.id,
                    offset: m.offset,
                    length: m.length,
                });
                refs.entry(&m.path)
                    .or_default()
                    .push((m.index.clone(), Some(payload)));
            }
        }
        for (path, refs) in refs {
            session.set_chunk_refs(path, refs)?;
        }
        let message = options.message.clone().unwrap_or_else(|| {
            format!(
                "compact: {} chunks into {} packs",
                summary.chunks, summary.packs
            )
        });
        let id = session
            .commit_with(
                &message,
                BTreeMap::new(),
                CommitOptions::default().rebase(false),
            )
            .await?;
        summary.snapshot = Some(id);
        Ok(summary)
    }
}
