//! Chunk grids (the `chunk_grid` extension point of the core spec).
//!
//! Implements the `regular` chunk grid (`../shared/specs/zarr/v3/chunk-grids/regular-grid`).

use std::fmt::Debug;

use serde_json::{json, Value};

use crate::zarr::error::{ZarrError, ZarrResult};
use crate::zarr::subset::ArraySubset;

/// A chunk grid: how the array's element space is divided into chunks.
pub trait ChunkGrid: Send + Sync + Debug {
    /// The metadata JSON (`{"name": ..., "configuration": ...}`).
    fn to_json(&self) -> Value;

    /// Number of dimensions of the grid.
    fn ndim(&self) -> usize;

    /// Number of chunks along each dimension for an array of shape `array_shape`.
    fn grid_shape(&self, array_shape: &[u64]) -> Vec<u64>;

    /// The region of the array space covered by chunk `chunk` (not clipped to the
    /// array shape: edge chunks overhang, see the regular grid spec). Coordinates
    /// saturate at `u64::MAX` (an edge chunk of a `[u64::MAX]` array ends past it).
    fn chunk_region(&self, chunk: &[u64]) -> ArraySubset;

    /// The box of chunk indices whose chunks intersect `region` (start and shape in
    /// chunk-index units); empty when `region` is empty.
    fn chunks_intersecting(&self, region: &ArraySubset) -> ArraySubset;
}

/// The `regular` chunk grid: every chunk has shape `chunk_shape`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegularChunkGrid {
    chunk_shape: Vec<u64>,
}

impl RegularChunkGrid {
    /// A regular grid with the given chunk shape.
    ///
    /// # Errors
    /// [`ZarrError::InvalidMetadata`] when a chunk length is 0.
    pub fn new(chunk_shape: Vec<u64>) -> ZarrResult<Self> {
        if chunk_shape.contains(&0) {
            return Err(ZarrError::InvalidMetadata {
                path: String::new(),
                reason: format!("chunk shape {chunk_shape:?} has a zero length"),
            });
        }
        Ok(RegularChunkGrid { chunk_shape })
    }

    /// Parses the `chunk_grid` metadata member.
    ///
    /// # Errors
    /// [`ZarrError::UnsupportedExtension`] for a grid other than `regular`;
    /// [`ZarrError::InvalidMetadata`] for a malformed configuration.
    pub fn from_json(json: &Value) -> ZarrResult<Self> {
        let bad = |reason: &str| ZarrError::InvalidMetadata {
            path: String::new(),
            reason: format!("chunk_grid {json}: {reason}"),
        };
        let name = match json {
            Value::Object(o) => o.get("name").and_then(Value::as_str),
            Value::String(s) => Some(s.as_str()),
            _ => None,
        }
        .ok_or_else(|| bad("missing name"))?;
        if name != "regular" {
            return Err(ZarrError::UnsupportedExtension {
                path: String::new(),
                kind: "chunk grid".into(),
                name: name.to_string(),
            });
        }
        let shape = json
            .get("configuration")
            .and_then(|c| c.get("chunk_shape"))
            .and_then(Value::as_array)
            .ok_or_else(|| bad("missing configuration.chunk_shape"))?;
        let shape = shape
            .iter()
            .map(|v| {
                v.as_u64()
                    .ok_or_else(|| bad("chunk_shape must hold non-negative integers"))
            })
            .collect::<ZarrResult<Vec<u64>>>()?;
        RegularChunkGrid::new(shape).map_err(|_| bad("chunk lengths must be positive"))
    }

    /// The chunk shape.
    pub fn chunk_shape(&self) -> &[u64] {
        &self.chunk_shape
    }
}

impl ChunkGrid for RegularChunkGrid {
    fn to_json(&self) -> Value {
        json!({"name": "regular", "configuration": {"chunk_shape": self.chunk_shape}})
    }

    fn ndim(&self) -> usize {
        self.chunk_shape.len()
    }

    fn grid_shape(&self, array_shape: &[u64]) -> Vec<u64> {
        array_shape
            .iter()
            .zip(&self.chunk_shape)
            .map(|(a, c)| a.div_ceil(*c))
            .collect()
    }

    fn chunk_region(&self, chunk: &[u64]) -> ArraySubset {
        ArraySubset::new(
            chunk
                .iter()
                .zip(&self.chunk_shape)
                .map(|(i, c)| i.saturating_mul(*c))
                .collect(),
            self.chunk_shape.clone(),
        )
    }

    fn chunks_intersecting(&self, region: &ArraySubset) -> ArraySubset {
        if region.shape.contains(&0) {
            return ArraySubset::new(vec![0; region.ndim()], vec![0; region.ndim()]);
        }
        let start: Vec<u64> = region
            .start
            .iter()
            .zip(&self.chunk_shape)
            .map(|(s, c)| s / c)
            .collect();
        let end: Vec<u64> = region
            .end()
            .iter()
            .zip(&self.chunk_shape)
            .map(|(e, c)| e.div_ceil(*c))
            .collect();
        let shape = start.iter().zip(&end).map(|(s, e)| e - s).collect();
        ArraySubset::new(start, shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_grid_spec_example() {
        let g = RegularChunkGrid::new(vec![5, 20, 400]).unwrap();
        assert_eq!(g.grid_shape(&[10, 200, 3000]), vec![2, 10, 8]);
        let c = g.chunks_intersecting(&ArraySubset::new(vec![7, 150, 900], vec![1, 1, 1]));
        assert_eq!(c.start, vec![1, 7, 2]);
        assert_eq!(c.shape, vec![1, 1, 1]);
        let c = g.chunks_intersecting(&ArraySubset::new(vec![4, 0, 399], vec![2, 20, 2]));
        assert_eq!(c.start, vec![0, 0, 0]);
        assert_eq!(c.shape, vec![2, 1, 2]);
        assert_eq!(g.chunk_region(&[1, 2, 3]).start, vec![5, 40, 1200]);
    }

    #[test]
    fn parse_grid() {
        let j = json!({"name": "regular", "configuration": {"chunk_shape": [2, 5]}});
        let g = RegularChunkGrid::from_json(&j).unwrap();
        assert_eq!(g.chunk_shape(), &[2, 5]);
        assert_eq!(g.to_json(), j);
        assert!(matches!(
            RegularChunkGrid::from_json(&json!({"name": "rectilinear", "configuration": {}})),
            Err(ZarrError::UnsupportedExtension { .. })
        ));
        assert_err!(
            RegularChunkGrid::from_json(
                &json!({"name": "regular", "configuration": {"chunk_shape": [0]}})
            ),
            crate::zarr::ZarrError::InvalidMetadata { .. }
        );
        assert_err!(
            RegularChunkGrid::from_json(&json!({"name": "regular"})),
            crate::zarr::ZarrError::InvalidMetadata { .. }
        );
    }
}
