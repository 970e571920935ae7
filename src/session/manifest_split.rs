//! Splitting an array's chunk refs into manifests of bounded size.
//!
//! An array's chunk grid is cut into blocks of at most [`MAX_REFS_PER_MANIFEST`] chunk
//! positions (whole trailing dimensions first, so appending along the first dimension
//! keeps the layout), and each block's refs go to their own manifest. A commit then
//! rewrites only the manifests of blocks it changed: its cost grows with the change,
//! not with the size of the array. Manifests written by others with other extents
//! are kept when no changed block overlaps them, and split into blocks otherwise.
//!
//! Spec: Icechunk specification, "Chunk Manifest Files" (the refs of one array may be
//! spread over several manifests; `ManifestRef.extents` never overlap).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};

use crate::assets::AssetManager;
use crate::error::Result;
use crate::format::config::{ManifestSplittingConfig, RepositoryConfig};
use crate::format::envelope::FileType;
use crate::format::manifest::{Manifest, ManifestWriter};
use crate::format::snapshot::{ArrayData, DimensionShape, ManifestFileInfo, ManifestRef, Snapshot};
use crate::format::{ChunkIndices, FormatError, ManifestId, NodeId, NodePath, SpecVersion};

use super::change_set::ChangeSet;
use super::overlay::{index_in_bounds, merged_refs_from};

/// Largest number of chunk positions covered by one manifest floe writes: 50,000, so
/// that an append along the first dimension of an array of 10^6 chunks rewrites at
/// most a twentieth of its refs, while a full read of such an array fetches 20
/// manifests (and one of 10^8 chunks, 2,000).
pub const MAX_REFS_PER_MANIFEST: u64 = 50_000;

/// How an array's chunk grid is cut into blocks, one manifest per block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SplitLayout {
    /// Chunks per block along each dimension.
    block: Vec<u64>,
    /// Whether blocks follow chunk index order (a block's refs are one run of the
    /// sorted refs): true for floe's own layouts, false for configured ones.
    ordered: bool,
}

/// Which layout each array's manifests follow: the repository configuration's
/// `manifest.splitting` (Icechunk's rules: [`ManifestSplittingConfig::block_sizes`])
/// when it sets one, floe's own ([`SplitLayout::for_shape`]) otherwise.
#[derive(Clone, Debug)]
pub(crate) struct ManifestLayouts {
    splitting: Option<ManifestSplittingConfig>,
    /// Committed manifests of one array fetched at once when a commit rewrites them
    /// (`manifest.max_concurrent_manifest_fetches_during_commit`, default 1).
    fetch_concurrency: usize,
}

impl ManifestLayouts {
    /// The layouts a configuration asks for.
    pub(crate) fn new(config: &RepositoryConfig) -> Self {
        let manifest = config.manifest();
        ManifestLayouts {
            fetch_concurrency: usize::from(
                manifest.max_concurrent_manifest_fetches_during_commit(),
            ),
            splitting: manifest.splitting,
        }
    }

    /// The splitting configuration in force, as the JSON Icechunk records in the
    /// metadata of a `rewrite_manifests` commit (`__icechunk.splitting_config`): the
    /// configured `manifest.splitting`, or, when none is set, Icechunk's default (one
    /// rule: every path, dimensions never cut). floe's own layout, used then, agrees
    /// with it up to [`MAX_REFS_PER_MANIFEST`] chunks per array and cuts larger
    /// arrays' grids.
    pub(crate) fn splitting_json(&self) -> serde_json::Value {
        match &self.splitting {
            Some(s) => serde_json::to_value(s).unwrap_or(serde_json::Value::Null),
            None => serde_json::json!({
                "split_sizes": [[{"path_matches": {"regex": ".*"}},
                                 [{"num_chunks": u32::MAX, "condition": "Any"}]]]
            }),
        }
    }

    /// Committed manifests of one array fetched at once during a commit (at least 1).
    pub(crate) fn fetch_concurrency(&self) -> usize {
        self.fetch_concurrency.max(1)
    }

    /// The layout of the array at `path` with this shape and these dimension names.
    pub(crate) fn layout(&self, path: &NodePath, array: &ArrayData) -> SplitLayout {
        match &self.splitting {
            None => SplitLayout::for_shape(&array.shape),
            Some(splitting) => {
                let n: Vec<u64> = array.shape.iter().map(|d| d.num_chunks).collect();
                SplitLayout {
                    block: splitting.block_sizes(path, &n, array.dimension_names.as_deref()),
                    ordered: false,
                }
            }
        }
    }
}

/// A block of the layout: its position in units of blocks along each dimension.
pub(crate) type BlockId = Vec<u64>;

impl SplitLayout {
    /// The layout for a chunk grid of `num_chunks` chunks per dimension, with at most
    /// `max_refs` chunk positions per block (trailing dimensions are kept whole first).
    ///
    /// Only the last dimension not kept whole (if any) is cut in several blocks; the
    /// dimensions before it get blocks of one chunk. So the block of a chunk inside
    /// the grid is `(i0, .., i(k-1), ik / block_k, 0, .., 0)`, which never decreases
    /// along chunk indices in lexicographic order: a block's refs are one run of the
    /// sorted refs, and manifests can be encoded one after another from them.
    pub(crate) fn new(num_chunks: &[u64], max_refs: u64) -> Self {
        let mut budget = max_refs.max(1);
        let mut block = vec![1; num_chunks.len()];
        for d in (0..num_chunks.len()).rev() {
            block[d] = num_chunks[d].max(1).min(budget);
            budget = (budget / block[d]).max(1);
        }
        SplitLayout {
            block,
            ordered: true,
        }
    }

    /// The layout of an array of this shape.
    pub(crate) fn for_shape(shape: &[DimensionShape]) -> Self {
        let n: Vec<u64> = shape.iter().map(|d| d.num_chunks).collect();
        Self::new(&n, MAX_REFS_PER_MANIFEST)
    }

    /// The block holding chunk `index`.
    pub(crate) fn block_of(&self, index: &[u64]) -> BlockId {
        index
            .iter()
            .zip(&self.block)
            .map(|(&i, &b)| i / b)
            .collect()
    }

    /// Whether chunk `index` lies in `block` (an index of another rank never does).
    pub(crate) fn in_block(&self, index: &[u64], block: &[u64]) -> bool {
        index.len() == block.len()
            && index
                .iter()
                .zip(&self.block)
                .zip(block)
                .all(|((&i, &size), &b)| i / size == b)
    }

    /// Chunk positions per block (at most the `max_refs` of [`SplitLayout::new`]).
    pub(crate) fn block_positions(&self) -> usize {
        let n = self
            .block
            .iter()
            .try_fold(1u64, |acc, &b| acc.checked_mul(b));
        n.and_then(|n| usize::try_from(n).ok())
            .unwrap_or(usize::MAX)
    }

    /// Whether `block` overlaps a manifest's chunk index `extents`.
    pub(crate) fn overlaps(&self, block: &[u64], extents: &[Range<u32>]) -> bool {
        block
            .iter()
            .zip(&self.block)
            .zip(extents)
            .all(|((&b, &size), e)| {
                let (lo, hi) = (b * size, (b + 1) * size);
                u64::from(e.start) < hi && lo < u64::from(e.end)
            })
    }
}

/// The new manifests of one array.
#[derive(Clone, Debug, Default)]
pub(crate) struct ArrayManifests {
    /// The array's manifest refs after the commit (kept and new).
    pub(crate) refs: Vec<ManifestRef>,
    /// File infos of the manifests written, or to be written (`pending`).
    pub(crate) written: Vec<ManifestFileInfo>,
    /// Manifests encoded but not written yet: the array's last block (its only one
    /// in the usual small commit), left for the caller to write beside the snapshot
    /// that names them, so a commit does not wait one round trip for its manifests
    /// before it writes its snapshot.
    pub(crate) pending: Vec<PendingManifest>,
}

/// An encoded manifest whose write is left to the caller ([`write_pending`]).
#[derive(Clone, Debug)]
pub(crate) struct PendingManifest {
    id: ManifestId,
    bytes: Vec<u8>,
    count: u64,
}

impl PendingManifest {
    /// Its size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }
}

/// Writes manifests left pending, `concurrency` at a time.
///
/// # Errors
/// Storage errors.
pub(crate) async fn write_pending(
    assets: &AssetManager,
    pending: Vec<PendingManifest>,
    concurrency: usize,
) -> Result<()> {
    use futures::{StreamExt, TryStreamExt};
    futures::stream::iter(pending.into_iter().map(|p| async move {
        assets.write_manifest_bytes(p.id, p.bytes, p.count).await?;
        Ok::<_, crate::error::Error>(())
    }))
    .buffer_unordered(concurrency.max(1))
    .try_collect::<()>()
    .await
}

/// Leaves encoded manifests `files` pending in `out`: their refs and file infos as
/// if written.
fn defer(out: &mut ArrayManifests, files: Vec<Encoded>) {
    for f in files {
        out.refs.push(ManifestRef {
            object_id: f.id,
            extents: f.extents,
        });
        out.written.push(ManifestFileInfo {
            id: f.id,
            size_bytes: f.bytes.len() as u64,
            num_chunk_refs: u32::try_from(f.count).unwrap_or(u32::MAX),
        });
        out.pending.push(PendingManifest {
            id: f.id,
            bytes: f.bytes,
            count: f.count,
        });
    }
}

/// Up to this many refs (committed plus changed) an array's manifests are merged and
/// encoded without a hop to the compute pool.
const INLINE_REFS_MAX: usize = 256;

/// One encoded manifest, not yet written.
struct Encoded {
    id: ManifestId,
    extents: Vec<Range<u32>>,
    bytes: Vec<u8>,
    count: u64,
}

/// Writes the manifests of array `node` for a commit: keeps the committed manifests
/// (`old`, from `base`) that no changed block overlaps, and rewrites the others as one
/// manifest per block, merging their refs with `changes` and dropping refs outside
/// `shape`. With `rewrite_all`, every committed manifest is rewritten (after a resize
/// that shrinks the array or changes the layout).
///
/// Manifests are encoded one block at a time, each written while the next is
/// encoded, straight from the committed manifests and the change set: the refs are
/// never copied, and at most two encoded manifests are held at once, however large
/// the array. The last block's manifests are not written but returned in
/// [`ArrayManifests::pending`], for the caller to write beside its snapshot. With a
/// configured layout (blocks out of index order) the blocks are gathered first,
/// encoded together and written at once.
///
/// # Errors
/// Storage and format errors.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn write_array_manifests(
    assets: &AssetManager,
    base: &Snapshot,
    node: NodeId,
    old: &[ManifestRef],
    shape: &[DimensionShape],
    layout: SplitLayout,
    fetch_concurrency: usize,
    changes: &Arc<ChangeSet>,
    rewrite_all: bool,
) -> Result<ArrayManifests> {
    let mut changed_blocks: BTreeSet<BlockId> = BTreeSet::new();
    let mut last: Option<BlockId> = None;
    for idx in changes
        .array_chunks(&node)
        .into_iter()
        .flat_map(|c| c.keys())
    {
        // Sorted indices: consecutive ones mostly fall in one block.
        if last.as_ref().is_some_and(|b| layout.in_block(idx, b)) {
            continue;
        }
        let block = layout.block_of(idx);
        changed_blocks.insert(block.clone());
        last = Some(block);
    }
    // Which committed manifests to rewrite: those overlapping a changed block, and then
    // (until nothing moves) those overlapping any block the rewritten ones fill.
    let mut rewrite: Vec<bool> = old
        .iter()
        .map(|m| {
            rewrite_all
                || changed_blocks
                    .iter()
                    .any(|b| layout.overlaps(b, &m.extents))
        })
        .collect();
    let mut fetched: BTreeMap<usize, Arc<Manifest>> = BTreeMap::new();
    let mut blocks = changed_blocks.clone();
    loop {
        // Up to `fetch_concurrency` at once, in order.
        let wanted: Vec<usize> = (0..old.len())
            .filter(|i| rewrite[*i] && !fetched.contains_key(i))
            .collect();
        let got: Vec<(usize, Arc<Manifest>)> =
            futures::stream::iter(wanted.into_iter().map(|i| async move {
                let id = &old[i].object_id;
                let size = base.manifest_info(id).map(|f| f.size_bytes);
                Ok::<_, crate::error::Error>((i, assets.fetch_manifest(id, size).await?))
            }))
            .buffered(fetch_concurrency.max(1))
            .try_collect()
            .await?;
        for (i, manifest) in got {
            if let Some(refs) = manifest.arrays.get(&node) {
                blocks.extend(refs.keys().map(|idx| layout.block_of(idx)));
            }
            fetched.insert(i, manifest);
        }
        let mut grew = false;
        for (i, m) in old.iter().enumerate() {
            if !rewrite[i] && blocks.iter().any(|b| layout.overlaps(b, &m.extents)) {
                rewrite[i] = true;
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    let mut out = ArrayManifests {
        refs: old
            .iter()
            .zip(&rewrite)
            .filter(|(_, r)| !**r)
            .map(|(m, _)| m.clone())
            .collect(),
        written: Vec::new(),
        pending: Vec::new(),
    };

    let manifests: Arc<Vec<Arc<Manifest>>> = Arc::new(fetched.into_values().collect());
    let (spec, level) = (
        assets.spec_version(),
        assets.compression_level(FileType::Manifest),
    );
    let work: usize = manifests
        .iter()
        .filter_map(|m| m.arrays.get(&node))
        .map(|refs| refs.len())
        .sum::<usize>()
        + changes.array_chunks(&node).map_or(0, |c| c.len());
    if !layout.ordered {
        let (manifests, changes) = (Arc::clone(&manifests), Arc::clone(changes));
        let shape = shape.to_vec();
        let files = crate::assets::maybe_blocking(work <= INLINE_REFS_MAX, move || {
            encode_grouped(&manifests, &changes, node, &shape, &layout, (spec, level))
        })
        .await?;
        for (r, info) in write_encoded(assets, files).await? {
            out.refs.push(r);
            out.written.push(info);
        }
        return Ok(out);
    }
    // A few refs (the usual small commit) are encoded on the calling task: a hop to
    // the compute pool costs more than the work.
    if work <= INLINE_REFS_MAX {
        let (files, _) = encode_blocks(
            &manifests,
            changes,
            node,
            shape,
            &layout,
            (spec, level),
            &[],
            usize::MAX,
            work,
        )?;
        defer(&mut out, files);
        return Ok(out);
    }
    // Otherwise one block per compute task: the next block is encoded (off the async
    // executor) while the last one is written.
    let mut next: Option<ChunkIndices> = Some(Vec::new());
    let mut ready: Vec<Encoded> = Vec::new();
    while next.is_some() || !ready.is_empty() {
        let encode = async {
            let Some(start) = next.take() else {
                return Ok((Vec::new(), None));
            };
            let (manifests, changes) = (Arc::clone(&manifests), Arc::clone(changes));
            let (shape, layout) = (shape.to_vec(), layout.clone());
            crate::assets::blocking(move || {
                encode_blocks(
                    &manifests,
                    &changes,
                    node,
                    &shape,
                    &layout,
                    (spec, level),
                    &start,
                    1,
                    work,
                )
            })
            .await
        };
        let (encoded, written) =
            futures::join!(encode, write_encoded(assets, std::mem::take(&mut ready)));
        for (r, info) in written? {
            out.refs.push(r);
            out.written.push(info);
        }
        (ready, next) = encoded?;
        if next.is_none() {
            // The last block: written beside the snapshot.
            defer(&mut out, std::mem::take(&mut ready));
        }
    }
    Ok(out)
}

/// Encodes the manifests of at most `max_blocks` blocks of array `node`, from its
/// first ref at or after `start`: the committed refs of `manifests` merged with
/// `changes`, without those outside `shape`. Returns them and the first index of the
/// next block, if any. `estimate` bounds the refs a block is expected to hold (to size
/// the encoder).
///
/// Blocks follow index order (a block's refs are a run of the sorted refs): see
/// [`SplitLayout::new`].
///
/// # Errors
/// [`FormatError::ChunkIndexTooLarge`]; [`FormatError::Compression`];
/// [`FormatError::InvalidData`] if blocks ever came out of order (a bug: two
/// manifests of one block would overlap).
#[allow(clippy::too_many_arguments)]
fn encode_blocks(
    manifests: &[Arc<Manifest>],
    changes: &ChangeSet,
    node: NodeId,
    shape: &[DimensionShape],
    layout: &SplitLayout,
    (spec, level): (SpecVersion, i32),
    start: &[u64],
    max_blocks: usize,
    estimate: usize,
) -> std::result::Result<(Vec<Encoded>, Option<ChunkIndices>), FormatError> {
    let mut refs = merged_refs_from(manifests, changes, &node, start)
        .filter(|(idx, _)| index_in_bounds(shape, idx))
        .peekable();
    let mut out = Vec::new();
    let mut previous: Option<BlockId> = None;
    while let Some(&(first, _)) = refs.peek() {
        if out.len() >= max_blocks {
            return Ok((out, Some(first.to_vec())));
        }
        let block = layout.block_of(first);
        if previous.as_ref().is_some_and(|p| *p >= block) {
            return Err(FormatError::InvalidData {
                what: "manifest",
                reason: format!(
                    "chunk refs of node {node} came out of block order at index {first:?}"
                ),
            });
        }
        let id = ManifestId::random();
        let mut writer = ManifestWriter::new(id, layout.block_positions().min(estimate))
            .spec_version(spec)
            .compression_level(level);
        let in_block = std::iter::from_fn(|| refs.next_if(|(idx, _)| layout.in_block(idx, &block)));
        if let Some(extents) = writer.add_array(node, in_block)? {
            let (bytes, count) = writer.finish()?;
            out.push(Encoded {
                id,
                extents,
                bytes,
                count,
            });
        }
        previous = Some(block);
    }
    Ok((out, None))
}

/// Encodes the manifests of every block of array `node` under a layout whose blocks
/// do not follow index order: the refs (committed ones of `manifests` merged with
/// `changes`, without those outside `shape`) are grouped by block, each group keeping
/// index order, then each block is encoded.
///
/// # Errors
/// [`FormatError::ChunkIndexTooLarge`]; [`FormatError::Compression`].
fn encode_grouped(
    manifests: &[Arc<Manifest>],
    changes: &ChangeSet,
    node: NodeId,
    shape: &[DimensionShape],
    layout: &SplitLayout,
    (spec, level): (SpecVersion, i32),
) -> std::result::Result<Vec<Encoded>, FormatError> {
    let mut blocks: BTreeMap<BlockId, Vec<_>> = BTreeMap::new();
    for (idx, payload) in merged_refs_from(manifests, changes, &node, &[])
        .filter(|(idx, _)| index_in_bounds(shape, idx))
    {
        blocks
            .entry(layout.block_of(idx))
            .or_default()
            .push((idx, payload));
    }
    let mut out = Vec::with_capacity(blocks.len());
    for refs in blocks.into_values() {
        let id = ManifestId::random();
        let mut writer = ManifestWriter::new(id, refs.len())
            .spec_version(spec)
            .compression_level(level);
        if let Some(extents) = writer.add_array(node, refs)? {
            let (bytes, count) = writer.finish()?;
            out.push(Encoded {
                id,
                extents,
                bytes,
                count,
            });
        }
    }
    Ok(out)
}

/// Writes encoded manifests; returns their refs and file infos.
///
/// # Errors
/// Storage errors.
async fn write_encoded(
    assets: &AssetManager,
    files: Vec<Encoded>,
) -> Result<Vec<(ManifestRef, ManifestFileInfo)>> {
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        let info = assets.write_manifest_bytes(f.id, f.bytes, f.count).await?;
        out.push((
            ManifestRef {
                object_id: f.id,
                extents: f.extents,
            },
            info,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_keep_trailing_dimensions_whole() {
        let l = SplitLayout::new(&[1000, 1000], 100_000);
        assert_eq!(l.block, vec![100, 1000]);
        assert_eq!(l.block_of(&[250, 999]), vec![2, 0]);
        // Appending along the first dimension keeps the layout.
        assert_eq!(SplitLayout::new(&[5000, 1000], 100_000), l);
        assert_eq!(
            SplitLayout::new(&[10, 200_000], 100_000).block,
            vec![1, 100_000]
        );
        assert_eq!(SplitLayout::new(&[3, 4], 100_000).block, vec![3, 4]);
        assert_eq!(
            SplitLayout::new(&[], 100_000).block_of(&[]),
            Vec::<u64>::new()
        );
        assert_eq!(SplitLayout::new(&[0, 7], 10).block, vec![1, 7]);
    }

    #[test]
    fn block_overlap() {
        let l = SplitLayout::new(&[1000, 1000], 100_000);
        assert!(l.overlaps(&[0, 0], &[0..1, 0..1]));
        assert!(l.overlaps(&[1, 0], &[50..150, 3..4]));
        assert!(!l.overlaps(&[2, 0], &[50..150, 3..4]));
        assert!(l.overlaps(&[], &[]));
    }
}
