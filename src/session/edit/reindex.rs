//! Moving chunks of an array within its chunk grid without copying their bytes
//! (Icechunk 2.3.0's `Session.shift_array` and `Session.reindex_array`), and
//! flushing a session to a snapshot no branch points to (`Session.flush`).
//!
//! A move re-points chunk refs: the ref (inline bytes, native object, virtual
//! range) at one grid index is recorded at another, as an uncommitted change of
//! the session; no chunk object is read or written. The whole plan is computed
//! from the session's current refs before anything is staged, so a mapping that
//! fails (or names an index outside the grid) leaves the session unchanged. Arrays
//! whose `zarr.json` declares no `regular` chunk grid (a `rectilinear` one) are
//! refused, as Icechunk 2.3.0 refuses them: their chunks differ in shape by position.

use crate::error::{Error, Result};
use crate::format::manifest::ChunkPayload;
use crate::format::{ChunkIndices, NodePath};
use std::collections::{BTreeMap, HashSet};

use crate::session::overlay::index_in_bounds;
use crate::session::Session;

/// A map from one chunk grid index to another; `Ok(None)`: no image (the chunk is
/// dropped, or for a backward map, the index is cleared). An error aborts the
/// whole operation before anything is staged.
pub type ChunkIndexMap<'a> = &'a (dyn Fn(&[u64]) -> Result<Option<ChunkIndices>> + Sync);

/// `index + offset`, when it lies in a grid of `grid` chunks per dimension.
fn shifted(index: &[u64], offset: &[i64], grid: &[u64]) -> Option<ChunkIndices> {
    index
        .iter()
        .zip(offset)
        .zip(grid)
        .map(|((&i, &o), &n)| {
            let moved = i128::from(i) + i128::from(o);
            u64::try_from(moved).ok().filter(|&m| m < n)
        })
        .collect()
}

/// Refuses to move chunks of an array whose `zarr.json` does not positively declare a
/// `regular` chunk grid (Icechunk 2.3.0's check: a rectilinear grid's chunks differ
/// in shape by position, and unreadable metadata is refused too).
///
/// # Errors
/// [`Error::UnsupportedChunkGridForReindex`] naming the grid (`unknown` when none can
/// be read).
fn check_regular_grid(path: &NodePath, user_data: &[u8]) -> Result<()> {
    match crate::session::store::chunk_grid_name(user_data) {
        Some(name) if name == "regular" => Ok(()),
        other => Err(Error::UnsupportedChunkGridForReindex {
            path: path.clone(),
            grid: other.unwrap_or_else(|| "unknown".to_string()),
        }),
    }
}

impl Session {
    /// Moves every chunk of the array at `path` by `offset` chunks along each
    /// dimension (Icechunk's `shift_array`): the chunk at index `i` is afterwards at
    /// `i + offset`; chunks moved past the grid's edge are dropped, and the
    /// positions nothing moved into read as the fill value. Refs move, bytes are not
    /// copied. A zero offset changes nothing.
    ///
    /// # Errors
    /// [`Error::ReadOnlySession`]; [`Error::NodeNotFound`], [`Error::NotAnArray`];
    /// [`Error::InvalidChunkIndex`] when `offset` has another rank than the array;
    /// [`Error::UnsupportedChunkGridForReindex`] for an array whose metadata declares no
    /// `regular` chunk grid (a rectilinear one), which a shift would corrupt; nothing is
    /// staged then; storage and format errors reading manifests.
    pub async fn shift_array(&self, path: &NodePath, offset: &[i64]) -> Result<()> {
        self.load().await?;
        self.check_writable()?;
        let node = self.get_node(path)?;
        let Some(array) = node.array() else {
            return Err(Error::NotAnArray { path: path.clone() });
        };
        check_regular_grid(path, &node.user_data)?;
        if offset.len() != array.shape.len() {
            return Err(Error::InvalidChunkIndex {
                path: path.clone(),
                index: offset.iter().map(|o| o.unsigned_abs()).collect(),
            });
        }
        if offset.iter().all(|&o| o == 0) {
            return Ok(());
        }
        let grid: Vec<u64> = array.shape.iter().map(|d| d.num_chunks).collect();
        let negated: Vec<i64> = offset.iter().map(|o| o.saturating_neg()).collect();
        let forward = |i: &[u64]| Ok(shifted(i, offset, &grid));
        let backward = |i: &[u64]| Ok(shifted(i, &negated, &grid));
        self.reindex_array(path, &forward, Some(&backward)).await
    }

    /// Re-indexes the chunks of the array at `path` (Icechunk's `reindex_array`):
    /// every chunk that has a ref at index `i` is recorded at `forward(i)` (dropped
    /// when `None`); refs move, bytes are not copied. Without `backward`, positions
    /// no chunk moved into keep what they held ("stale" chunks). With `backward`
    /// (the inverse map), each such vacated position `v` gets the chunk at
    /// `backward(v)`, or is cleared (reads as the fill value) when that is `None` or
    /// holds no chunk.
    ///
    /// # Errors
    /// As [`Session::shift_array`]; [`Error::InvalidChunkIndex`] when a map returns
    /// an index outside the grid; any error a map returns. On error nothing is
    /// staged.
    pub async fn reindex_array(
        &self,
        path: &NodePath,
        forward: ChunkIndexMap<'_>,
        backward: Option<ChunkIndexMap<'_>>,
    ) -> Result<()> {
        self.load().await?;
        self.check_writable()?;
        let node = self.get_node(path)?;
        let Some(array) = node.array() else {
            return Err(Error::NotAnArray { path: path.clone() });
        };
        check_regular_grid(path, &node.user_data)?;
        let shape = array.shape.clone();
        let refs: BTreeMap<ChunkIndices, ChunkPayload> =
            self.chunk_refs(path).await?.into_iter().collect();
        let check = |index: ChunkIndices| {
            if index_in_bounds(&shape, &index) {
                Ok(index)
            } else {
                Err(Error::InvalidChunkIndex {
                    path: path.clone(),
                    index,
                })
            }
        };
        let mut plan: BTreeMap<ChunkIndices, Option<ChunkPayload>> = BTreeMap::new();
        for (index, payload) in &refs {
            if let Some(target) = forward(index)? {
                plan.insert(check(target)?, Some(payload.clone()));
            }
        }
        if let Some(backward) = backward {
            let targets: HashSet<&ChunkIndices> = plan.keys().collect();
            let vacated: Vec<ChunkIndices> = refs
                .keys()
                .filter(|i| !targets.contains(i))
                .cloned()
                .collect();
            for index in vacated {
                let source = match backward(&index)? {
                    Some(source) => refs.get(&check(source)?).cloned(),
                    None => None,
                };
                plan.insert(index, source);
            }
        }
        self.set_chunk_refs(path, plan)
    }
}

#[cfg(test)]
mod tests {
    use super::shifted;

    #[test]
    fn shifted_stays_in_grid() {
        assert_eq!(shifted(&[3], &[-4], &[25]), None);
        assert_eq!(shifted(&[4], &[-4], &[25]), Some(vec![0]));
        assert_eq!(shifted(&[21], &[4], &[25]), None);
        assert_eq!(shifted(&[1, 2], &[1, -2], &[3, 3]), Some(vec![2, 0]));
    }
}
