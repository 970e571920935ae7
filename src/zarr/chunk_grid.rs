//! Chunk grids (the `chunk_grid` extension point of the core spec).
//!
//! Implements the `regular` chunk grid (`../shared/specs/zarr/v3/chunk-grids/regular-grid`)
//! and parses the `rectilinear` chunk grid that zarr-python 3.4 writes when
//! `array.rectilinear_chunks` is on (zarr-extensions `chunk-grids/rectilinear`):
//! [`ChunkGridMetadata`] is either of the two.
//!
//! The rectilinear form, as zarr 3.4.2 writes and reads it:
//! `{"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": [...]}}`
//! with one entry per dimension: a bare integer (every chunk of the dimension has that
//! length, as in a regular grid) or a non-empty list whose items are edge lengths
//! (`3`) or run-length pairs `[length, count]` (`[3, 2]` is two chunks of 3). Lengths
//! and counts are integers of at least 1, and the edges of a dimension must cover
//! its extent: their sum is at least the array length (zarr keeps trailing edges past
//! the extent when an array shrinks). `kind` must be `"inline"`.
//!
//! Untrusted metadata is validated with bounded work and memory: runs are kept
//! run-length encoded (memory grows with the document, never with the chunk counts it
//! declares), sums use checked arithmetic, and a dimension may hold at most
//! [`MAX_RECTILINEAR_CHUNKS`] chunks, the most an Icechunk snapshot records.

use std::fmt::Debug;

use serde_json::{json, Value};

use crate::zarr::error::{ZarrError, ZarrResult};
use crate::zarr::subset::ArraySubset;

/// The most chunks a dimension of a rectilinear grid may hold: Icechunk records the
/// number of chunks of a dimension as a `uint32` (`DimensionShapeV2.num_chunks`), and
/// chunk coordinates in manifests are `uint32` too.
pub const MAX_RECTILINEAR_CHUNKS: u64 = u32::MAX as u64;

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

/// A run of equal chunk edges along one dimension of a rectilinear grid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeRun {
    /// Length of each chunk of the run (elements, at least 1).
    pub size: u64,
    /// Number of chunks in the run (at least 1).
    pub count: u64,
    /// Index of the run's first chunk along the dimension.
    pub first_chunk: u64,
    /// Offset of the run's first chunk along the dimension (elements).
    pub start: u64,
}

/// The chunks of one dimension of a rectilinear grid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RectilinearDimension {
    /// A bare integer: every chunk has this length (elements), as in a regular grid.
    Uniform(u64),
    /// Explicit chunk edges, kept run-length encoded.
    Edges {
        /// The runs, in order.
        runs: Vec<EdgeRun>,
        /// Number of chunks (the sum of the run counts).
        num_chunks: u64,
        /// Sum of the edges (elements); at least the array length.
        total: u64,
    },
}

impl RectilinearDimension {
    /// Number of chunks of the dimension for an array of `extent` elements along it:
    /// for explicit edges, every listed chunk (also those past the extent after a
    /// shrink, as Icechunk 2.3.0 counts them); for a bare integer `n`,
    /// `ceil(extent / n)`.
    pub fn num_chunks(&self, extent: u64) -> u64 {
        match self {
            RectilinearDimension::Uniform(n) => extent.div_ceil(*n),
            RectilinearDimension::Edges { num_chunks, .. } => *num_chunks,
        }
    }

    /// Offset (elements) and length of chunk `i`; `None` past the listed edges.
    /// A uniform dimension has chunks without end (offsets saturate).
    pub fn chunk(&self, i: u64) -> Option<(u64, u64)> {
        match self {
            RectilinearDimension::Uniform(n) => Some((i.saturating_mul(*n), *n)),
            RectilinearDimension::Edges { runs, .. } => {
                let r = runs
                    .partition_point(|r| r.first_chunk <= i)
                    .checked_sub(1)?;
                let run = &runs[r];
                let k = i - run.first_chunk;
                (k < run.count).then(|| (run.start + k * run.size, run.size))
            }
        }
    }

    /// Index of the chunk holding element `pos`; `None` past the listed edges.
    pub fn chunk_of(&self, pos: u64) -> Option<u64> {
        match self {
            RectilinearDimension::Uniform(n) => Some(pos / n),
            RectilinearDimension::Edges { runs, total, .. } => {
                if pos >= *total {
                    return None;
                }
                let r = runs.partition_point(|r| r.start <= pos).checked_sub(1)?;
                let run = &runs[r];
                Some(run.first_chunk + (pos - run.start) / run.size)
            }
        }
    }

    /// The dimension's JSON entry: a bare integer, or edges with runs of more than
    /// one chunk as `[length, count]` pairs (zarr-python's run-length form).
    fn to_json(&self) -> Value {
        match self {
            RectilinearDimension::Uniform(n) => json!(n),
            RectilinearDimension::Edges { runs, .. } => Value::Array(
                runs.iter()
                    .map(|r| {
                        if r.count == 1 {
                            json!(r.size)
                        } else {
                            json!([r.size, r.count])
                        }
                    })
                    .collect(),
            ),
        }
    }
}

/// The `rectilinear` chunk grid: per dimension, chunks of listed (possibly unequal)
/// lengths, or of one length (a bare integer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RectilinearChunkGrid {
    dims: Vec<RectilinearDimension>,
}

impl RectilinearChunkGrid {
    /// Parses and validates the configuration of a `rectilinear` grid for an array of
    /// shape `shape` (elements).
    ///
    /// # Errors
    /// [`ZarrError::InvalidMetadata`] when `kind` is not `"inline"`, `chunk_shapes`
    /// does not have one entry per dimension, an entry is not a positive integer or a
    /// non-empty list of positive lengths and `[length, count]` pairs, a dimension's
    /// edges sum to less than its length, or a dimension holds more than
    /// [`MAX_RECTILINEAR_CHUNKS`] chunks or edges summing past `u64::MAX`.
    pub fn from_json(json: &Value, shape: &[u64]) -> ZarrResult<Self> {
        let bad = |reason: String| ZarrError::InvalidMetadata {
            path: String::new(),
            reason: format!("rectilinear chunk_grid: {reason}"),
        };
        let config = json
            .get("configuration")
            .and_then(Value::as_object)
            .ok_or_else(|| bad("missing configuration".into()))?;
        match config.get("kind") {
            Some(Value::String(k)) if k == "inline" => {}
            Some(k) => return Err(bad(format!("kind {k} is not \"inline\""))),
            None => return Err(bad("missing kind (\"inline\")".into())),
        }
        let shapes = config
            .get("chunk_shapes")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("configuration.chunk_shapes must be a list".into()))?;
        if shapes.len() != shape.len() {
            return Err(bad(format!(
                "chunk_shapes has {} entries for the {} dimensions of shape {shape:?}",
                shapes.len(),
                shape.len()
            )));
        }
        let positive = |v: &Value, what: &str, axis: usize| -> ZarrResult<u64> {
            v.as_u64().filter(|&n| n >= 1).ok_or_else(|| {
                bad(format!(
                    "dimension {axis}: {what} {v} is not an integer >= 1"
                ))
            })
        };
        let mut dims = Vec::with_capacity(shapes.len());
        for (axis, (entry, &extent)) in shapes.iter().zip(shape).enumerate() {
            let items = match entry {
                Value::Array(items) => items,
                other => {
                    dims.push(RectilinearDimension::Uniform(positive(
                        other,
                        "chunk length",
                        axis,
                    )?));
                    continue;
                }
            };
            if items.is_empty() {
                return Err(bad(format!("dimension {axis} lists no chunk edges")));
            }
            let mut runs: Vec<EdgeRun> = Vec::with_capacity(items.len());
            let (mut num_chunks, mut total) = (0u64, 0u64);
            for item in items {
                let (size, count) = match item {
                    Value::Array(pair) => match pair.as_slice() {
                        [size, count] => (
                            positive(size, "chunk length", axis)?,
                            positive(count, "run count", axis)?,
                        ),
                        _ => {
                            return Err(bad(format!(
                                "dimension {axis}: {item} is not a length or a [length, count] pair"
                            )))
                        }
                    },
                    other => (positive(other, "chunk length", axis)?, 1),
                };
                let first_chunk = num_chunks;
                num_chunks = num_chunks
                    .checked_add(count)
                    .filter(|&n| n <= MAX_RECTILINEAR_CHUNKS)
                    .ok_or_else(|| {
                        bad(format!(
                            "dimension {axis} has more than {MAX_RECTILINEAR_CHUNKS} chunks"
                        ))
                    })?;
                let start = total;
                total = size
                    .checked_mul(count)
                    .and_then(|len| total.checked_add(len))
                    .ok_or_else(|| bad(format!("dimension {axis}: edges sum past 2^64")))?;
                runs.push(EdgeRun {
                    size,
                    count,
                    first_chunk,
                    start,
                });
            }
            if total < extent {
                return Err(bad(format!(
                    "dimension {axis}: chunk edges sum to {total}, less than the array length {extent}"
                )));
            }
            dims.push(RectilinearDimension::Edges {
                runs,
                num_chunks,
                total,
            });
        }
        Ok(RectilinearChunkGrid { dims })
    }

    /// The dimensions.
    pub fn dimensions(&self) -> &[RectilinearDimension] {
        &self.dims
    }
}

impl ChunkGrid for RectilinearChunkGrid {
    fn to_json(&self) -> Value {
        let shapes: Vec<Value> = self
            .dims
            .iter()
            .map(RectilinearDimension::to_json)
            .collect();
        json!({"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": shapes}})
    }

    fn ndim(&self) -> usize {
        self.dims.len()
    }

    fn grid_shape(&self, array_shape: &[u64]) -> Vec<u64> {
        self.dims
            .iter()
            .zip(array_shape)
            .map(|(d, &extent)| d.num_chunks(extent))
            .collect()
    }

    /// Past the listed edges of a dimension the region is empty (length 0) and
    /// starts at the end of the last edge.
    fn chunk_region(&self, chunk: &[u64]) -> ArraySubset {
        let (start, shape) = self
            .dims
            .iter()
            .zip(chunk)
            .map(|(d, &i)| match (d.chunk(i), d) {
                (Some(c), _) => c,
                (None, RectilinearDimension::Edges { total, .. }) => (*total, 0),
                (None, RectilinearDimension::Uniform(_)) => (u64::MAX, 0),
            })
            .unzip();
        ArraySubset::new(start, shape)
    }

    fn chunks_intersecting(&self, region: &ArraySubset) -> ArraySubset {
        let empty = || ArraySubset::new(vec![0; region.ndim()], vec![0; region.ndim()]);
        if region.shape.contains(&0) {
            return empty();
        }
        let mut start = Vec::with_capacity(self.dims.len());
        let mut shape = Vec::with_capacity(self.dims.len());
        for ((d, &s), e) in self.dims.iter().zip(&region.start).zip(region.end()) {
            let (Some(first), Some(last)) = (d.chunk_of(s), d.chunk_of(e - 1)) else {
                return empty();
            };
            start.push(first);
            shape.push(last - first + 1);
        }
        ArraySubset::new(start, shape)
    }
}

/// The chunk grid of an array: `regular` or `rectilinear`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkGridMetadata {
    /// Every chunk has the same shape.
    Regular(RegularChunkGrid),
    /// Chunks of listed lengths per dimension (zarr-python 3.4, experimental).
    Rectilinear(RectilinearChunkGrid),
}

impl ChunkGridMetadata {
    /// Parses and validates the `chunk_grid` member of the metadata of an array of
    /// shape `shape` (elements): its name selects the grid, and the grid must have one
    /// entry per dimension.
    ///
    /// # Errors
    /// [`ZarrError::UnsupportedExtension`] for a grid other than `regular` and
    /// `rectilinear`; [`ZarrError::InvalidMetadata`] for a malformed configuration
    /// (see [`RegularChunkGrid::from_json`], [`RectilinearChunkGrid::from_json`]) or
    /// a regular chunk shape of another rank than `shape`.
    pub fn from_json(json: &Value, shape: &[u64]) -> ZarrResult<Self> {
        if json.get("name").and_then(Value::as_str) == Some("rectilinear") {
            return RectilinearChunkGrid::from_json(json, shape).map(Self::Rectilinear);
        }
        let grid = RegularChunkGrid::from_json(json)?;
        if grid.chunk_shape().len() != shape.len() {
            return Err(ZarrError::InvalidMetadata {
                path: String::new(),
                reason: format!(
                    "chunk shape {:?} does not have the {} dimensions of shape {shape:?}",
                    grid.chunk_shape(),
                    shape.len()
                ),
            });
        }
        Ok(Self::Regular(grid))
    }

    /// The grid's name, as in the metadata (`"regular"`, `"rectilinear"`).
    pub fn name(&self) -> &'static str {
        match self {
            ChunkGridMetadata::Regular(_) => "regular",
            ChunkGridMetadata::Rectilinear(_) => "rectilinear",
        }
    }

    /// The grid as a [`ChunkGrid`].
    pub fn as_grid(&self) -> &dyn ChunkGrid {
        match self {
            ChunkGridMetadata::Regular(g) => g,
            ChunkGridMetadata::Rectilinear(g) => g,
        }
    }

    /// Number of chunks per dimension that Icechunk records for an array of shape
    /// `shape` (its snapshot's `DimensionShapeV2.num_chunks`): `ceil(length /
    /// chunk length)` for a regular grid (0 chunks for a zero chunk length cannot
    /// occur: parsing refuses it); for a rectilinear grid, every listed edge.
    pub fn num_chunks(&self, shape: &[u64]) -> Vec<u64> {
        self.as_grid().grid_shape(shape)
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

    fn rect(shapes: Value, shape: &[u64]) -> ZarrResult<RectilinearChunkGrid> {
        RectilinearChunkGrid::from_json(
            &json!({"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": shapes}}),
            shape,
        )
    }

    #[test]
    fn rectilinear_forms_zarr_writes() {
        // chunks=((1, 2), (3, 3, 1)) as zarr-python 3.4.2 stores it.
        let g = rect(json!([[1, 2], [[3, 2], 1]]), &[3, 7]).unwrap();
        assert_eq!(g.grid_shape(&[3, 7]), vec![2, 3]);
        assert_eq!(
            g.chunk_region(&[1, 2]),
            ArraySubset::new(vec![1, 6], vec![2, 1])
        );
        assert_eq!(
            g.chunk_region(&[0, 1]),
            ArraySubset::new(vec![0, 3], vec![1, 3])
        );
        let c = g.chunks_intersecting(&ArraySubset::new(vec![0, 2], vec![2, 5]));
        assert_eq!((c.start, c.shape), (vec![0, 0], vec![2, 3]));
        let c = g.chunks_intersecting(&ArraySubset::new(vec![2, 6], vec![1, 1]));
        assert_eq!((c.start, c.shape), (vec![1, 2], vec![1, 1]));
        assert_eq!(
            g.to_json()["configuration"]["chunk_shapes"],
            json!([[1, 2], [[3, 2], 1]])
        );
        // After a shrinking resize zarr keeps the edges: they may sum past the length,
        // and every listed edge counts (as Icechunk 2.3.0 records it).
        let g = rect(json!([[1, [2, 2]], [[3, 2], 1, 2]]), &[2, 4]).unwrap();
        assert_eq!(g.grid_shape(&[2, 4]), vec![3, 4]);
        // A bare integer: chunks of that length along the whole dimension.
        let g = rect(json!([[1, 2], 3]), &[3, 7]).unwrap();
        assert_eq!(g.grid_shape(&[3, 7]), vec![2, 3]);
        assert_eq!(
            g.chunk_region(&[1, 2]),
            ArraySubset::new(vec![1, 6], vec![2, 3])
        );
        // Past the listed edges: an empty region; no chunk for positions past them.
        assert_eq!(g.chunk_region(&[5, 0]).shape, vec![0, 3]);
        // A scalar has no dimensions.
        let g = rect(json!([]), &[]).unwrap();
        assert_eq!(g.grid_shape(&[]), Vec::<u64>::new());
        let any = ChunkGridMetadata::from_json(
            &json!({"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": [[[5, 4]]]}}),
            &[20],
        )
        .unwrap();
        assert_eq!(any.name(), "rectilinear");
        assert_eq!(any.num_chunks(&[20]), vec![4]);
        let reg = ChunkGridMetadata::from_json(
            &json!({"name": "regular", "configuration": {"chunk_shape": [6]}}),
            &[10],
        )
        .unwrap();
        assert_eq!((reg.name(), reg.num_chunks(&[10])), ("regular", vec![2]));
    }

    #[test]
    fn rectilinear_hostile_metadata_is_refused_cheaply() {
        let invalid = |shapes: Value, shape: &[u64]| {
            assert_err!(rect(shapes, shape), ZarrError::InvalidMetadata { .. })
        };
        invalid(json!([[1, 1]]), &[3]); // edges short of the length
        invalid(json!([[0, 3]]), &[3]); // a zero length
        invalid(json!([[-1, 4]]), &[3]);
        invalid(json!([[1.5, 2]]), &[3]);
        invalid(json!([["1", 2]]), &[3]);
        invalid(json!([[true, 2]]), &[3]);
        invalid(json!([[]]), &[0]); // no edges
        invalid(json!([0]), &[3]); // a zero bare length
        invalid(json!([[[1, 2, 3]]]), &[3]); // not a pair
        invalid(json!([[[1, 0], 3]]), &[3]); // a zero count
        invalid(json!([[[1]]]), &[3]);
        invalid(json!([[1, 2], [3]]), &[3]); // rank
        invalid(json!([[3]]), &[3, 3]);
        invalid(json!({"a": 1}), &[3]);
        invalid(json!(null), &[3]);
        // Counts past what Icechunk records, and sums past 2^64, without allocating
        // per chunk.
        invalid(json!([[[1, u64::MAX]]]), &[3]);
        invalid(
            json!([[[1, 4_000_000_000u64], [1, 4_000_000_000u64]]]),
            &[3],
        );
        invalid(json!([[[u64::MAX, 2]]]), &[3]);
        invalid(json!([[u64::MAX, 1]]), &[3]);
        let g = rect(json!([[[1, 4_294_967_295u64]]]), &[3]).unwrap();
        assert_eq!(g.grid_shape(&[3]), vec![4_294_967_295]);
        assert_eq!(g.chunk_region(&[4_294_967_294]).start, vec![4_294_967_294]);
        let no_kind = |config: Value| {
            assert_err!(
                RectilinearChunkGrid::from_json(
                    &json!({"name": "rectilinear", "configuration": config}),
                    &[3]
                ),
                ZarrError::InvalidMetadata { .. }
            )
        };
        no_kind(json!({"chunk_shapes": [[1, 2]]}));
        no_kind(json!({"kind": "external", "chunk_shapes": [[1, 2]]}));
        no_kind(json!({"kind": "inline"}));
        assert_err!(
            RectilinearChunkGrid::from_json(&json!({"name": "rectilinear"}), &[3]),
            ZarrError::InvalidMetadata { .. }
        );
        assert!(matches!(
            ChunkGridMetadata::from_json(&json!({"name": "foo", "configuration": {}}), &[3]),
            Err(ZarrError::UnsupportedExtension { name, .. }) if name == "foo"
        ));
        assert_err!(
            ChunkGridMetadata::from_json(
                &json!({"name": "regular", "configuration": {"chunk_shape": [2]}}),
                &[3, 3]
            ),
            ZarrError::InvalidMetadata { .. }
        );
    }
}
