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

use crate::assets::AssetManager;
use crate::error::Result;
use crate::format::manifest::{ChunkPayload, Manifest, ManifestWriter};
use crate::format::snapshot::{DimensionShape, ManifestFileInfo, ManifestRef, Snapshot};
use crate::format::{FormatError, ManifestId, NodeId};

use super::change_set::ChangeSet;
use super::commit::{index_in_bounds, merged_refs};

/// Largest number of chunk positions covered by one manifest floe writes.
pub const MAX_REFS_PER_MANIFEST: u64 = 100_000;

/// How an array's chunk grid is cut into blocks, one manifest per block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SplitLayout {
    /// Chunks per block along each dimension.
    block: Vec<u64>,
}

/// A block of the layout: its position in units of blocks along each dimension.
pub(crate) type BlockId = Vec<u64>;

/// The refs of one block, borrowed, in index order.
type BlockRefs<'a> = Vec<(&'a [u64], &'a ChunkPayload)>;

impl SplitLayout {
    /// The layout for a chunk grid of `num_chunks` chunks per dimension, with at most
    /// `max_refs` chunk positions per block (trailing dimensions are kept whole first).
    pub(crate) fn new(num_chunks: &[u64], max_refs: u64) -> Self {
        let mut budget = max_refs.max(1);
        let mut block = vec![1; num_chunks.len()];
        for d in (0..num_chunks.len()).rev() {
            block[d] = num_chunks[d].max(1).min(budget);
            budget = (budget / block[d]).max(1);
        }
        SplitLayout { block }
    }

    /// The layout of an array of this shape.
    pub(crate) fn for_shape(shape: &[DimensionShape]) -> Self {
        let n: Vec<u64> = shape.iter().map(DimensionShape::num_chunks).collect();
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

    /// Whether chunk `index` lies in `block` (no allocation, unlike comparing
    /// [`SplitLayout::block_of`]).
    pub(crate) fn in_block(&self, block: &[u64], index: &[u64]) -> bool {
        index.len() == block.len()
            && index
                .iter()
                .zip(&self.block)
                .zip(block)
                .all(|((&i, &size), &b)| i / size == b)
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
    /// File infos of the manifests written.
    pub(crate) written: Vec<ManifestFileInfo>,
}

/// Up to this many refs (committed plus changed) an array's manifests are merged and
/// encoded without a hop to the compute pool.
const INLINE_REFS_MAX: usize = 256;

/// Writes the manifests of array `node` for a commit: keeps the committed manifests
/// (`old`, from `base`) that no changed block overlaps, and rewrites the others as one
/// manifest per block, merging their refs with `changes` and dropping refs outside
/// `shape`. With `rewrite_all`, every committed manifest is rewritten (after a resize
/// that shrinks the array or changes the layout).
///
/// # Errors
/// Storage and format errors.
pub(crate) async fn write_array_manifests(
    assets: &AssetManager,
    base: &Snapshot,
    node: NodeId,
    old: &[ManifestRef],
    shape: &[DimensionShape],
    changes: &Arc<ChangeSet>,
    rewrite_all: bool,
) -> Result<ArrayManifests> {
    let layout = SplitLayout::for_shape(shape);
    let changed_blocks: BTreeSet<BlockId> = changes
        .array_chunks(&node)
        .into_iter()
        .flat_map(|c| c.keys())
        .map(|idx| layout.block_of(idx))
        .collect();
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
        for (i, m) in old.iter().enumerate() {
            if rewrite[i] && !fetched.contains_key(&i) {
                let size = base.manifest_info(&m.object_id).map(|f| f.size_bytes);
                let manifest = assets.fetch_manifest(&m.object_id, size).await?;
                if let Some(refs) = manifest.arrays.get(&node) {
                    blocks.extend(refs.keys().map(|idx| layout.block_of(idx)));
                }
                fetched.insert(i, manifest);
            }
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
    };

    // Merge, split by block and encode: CPU work, off the async executor.
    let manifests: Vec<Arc<Manifest>> = fetched.into_values().collect();
    let changes = Arc::clone(changes);
    let shape = shape.to_vec();
    let spec = assets.spec_version();
    // A few refs (the usual small commit) are encoded on the calling task: a hop to
    // the compute pool costs more than the work.
    let work: usize = manifests
        .iter()
        .filter_map(|m| m.arrays.get(&node))
        .map(|refs| refs.len())
        .sum::<usize>()
        + changes.array_chunks(&node).map_or(0, |c| c.len());
    let light = work <= INLINE_REFS_MAX;
    let encoded =
        crate::assets::maybe_blocking(light, move || -> std::result::Result<_, FormatError> {
            // Refs come in index (C) order, and a block's positions are one run of
            // that order (its trailing dimensions are whole), so refs are grouped run
            // by run: one block id per run, not per ref.
            let mut by_block: BTreeMap<BlockId, BlockRefs<'_>> = BTreeMap::new();
            let mut run: Option<(BlockId, BlockRefs<'_>)> = None;
            for (idx, payload) in merged_refs(&manifests, &changes, &node) {
                if !index_in_bounds(&shape, idx) {
                    continue;
                }
                match &mut run {
                    Some((block, refs)) if layout.in_block(block, idx) => refs.push((idx, payload)),
                    _ => {
                        if let Some((block, refs)) = run.take() {
                            by_block.entry(block).or_default().extend(refs);
                        }
                        run = Some((layout.block_of(idx), vec![(idx, payload)]));
                    }
                }
            }
            if let Some((block, refs)) = run {
                by_block.entry(block).or_default().extend(refs);
            }
            let mut files = Vec::with_capacity(by_block.len());
            for refs in by_block.into_values() {
                let id = ManifestId::random();
                let mut writer = ManifestWriter::new(id, refs.len()).spec_version(spec);
                let Some(extents) = writer.add_array(node, refs)? else {
                    continue;
                };
                let (bytes, count) = writer.finish()?;
                files.push((id, extents, bytes, count));
            }
            Ok(files)
        })
        .await?;
    for (id, extents, bytes, count) in encoded {
        let info = assets.write_manifest_bytes(id, bytes, count).await?;
        out.refs.push(ManifestRef {
            object_id: id,
            extents,
        });
        out.written.push(info);
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

    #[test]
    fn in_block_agrees_with_block_of() {
        let l = SplitLayout::new(&[1000, 1000], 100_000);
        for idx in [[0u64, 0], [99, 999], [100, 0], [250, 999], [999, 5]] {
            for block in [[0u64, 0], [1, 0], [2, 0], [9, 0]] {
                assert_eq!(l.in_block(&block, &idx), l.block_of(&idx) == block);
            }
        }
        assert!(!l.in_block(&[0], &[0, 0]), "dimensionality differs");
    }
}
