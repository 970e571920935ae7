//! Property tests: random shapes, chunk shapes and regions round-trip through every
//! codec chain on the memory store, compared with an in-memory `ndarray` model.

use std::sync::Arc;

use floe::zarr::{Array, ArrayBuilder, ArraySubset, DataType, MemoryStore, Store};
use ndarray::{ArrayD, IxDyn, SliceInfoElem};
use proptest::prelude::*;
use serde_json::{json, Value};

#[derive(Clone, Copy, Debug)]
enum Chain {
    Bytes,
    BytesGzip,
    TransposeBytesZstd,
    Blosc,
    Crc32c,
    Sharding,
}

const CHAINS: [Chain; 6] = [
    Chain::Bytes,
    Chain::BytesGzip,
    Chain::TransposeBytesZstd,
    Chain::Blosc,
    Chain::Crc32c,
    Chain::Sharding,
];

fn codecs(chain: Chain, ndim: usize, inner: &[u64]) -> Vec<Value> {
    let b = json!({"name": "bytes", "configuration": {"endian": "little"}});
    match chain {
        Chain::Bytes => vec![b],
        Chain::BytesGzip => vec![b, json!({"name": "gzip", "configuration": {"level": 1}})],
        Chain::TransposeBytesZstd => {
            let order: Vec<usize> = (0..ndim).rev().collect();
            vec![
                json!({"name": "transpose", "configuration": {"order": order}}),
                json!({"name": "bytes", "configuration": {"endian": "big"}}),
                json!({"name": "zstd", "configuration": {"level": 1, "checksum": true}}),
            ]
        }
        Chain::Blosc => vec![
            b,
            json!({"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}),
        ],
        Chain::Crc32c => vec![b, json!({"name": "crc32c"})],
        Chain::Sharding => vec![json!({"name": "sharding_indexed", "configuration": {
            "chunk_shape": inner,
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 1}}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
            "index_location": "end",
        }})],
    }
}

#[derive(Clone, Debug)]
struct Case {
    shape: Vec<u64>,
    /// Inner chunk shape; the array chunk (shard) shape is `inner * factor`.
    inner: Vec<u64>,
    factor: Vec<u64>,
    writes: Vec<(ArraySubset, i32)>,
    read: ArraySubset,
    fill: i32,
}

fn region_in(shape: Vec<u64>) -> impl Strategy<Value = ArraySubset> {
    let dims: Vec<_> = shape
        .iter()
        .map(|&d| (0..d).prop_flat_map(move |s| (Just(s), 1..=d - s)))
        .collect();
    dims.prop_map(|v| {
        ArraySubset::new(
            v.iter().map(|x| x.0).collect(),
            v.iter().map(|x| x.1).collect(),
        )
    })
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=3)
        .prop_flat_map(|ndim| {
            (
                proptest::collection::vec(1u64..=9, ndim),
                proptest::collection::vec(1u64..=4, ndim),
                proptest::collection::vec(1u64..=3, ndim),
                -5i32..5,
            )
        })
        .prop_flat_map(|(shape, inner, factor, fill)| {
            let writes = proptest::collection::vec((region_in(shape.clone()), any::<i32>()), 1..=3);
            (
                Just(shape.clone()),
                Just(inner),
                Just(factor),
                writes,
                region_in(shape),
                Just(fill),
            )
        })
        .prop_map(|(shape, inner, factor, writes, read, fill)| Case {
            shape,
            inner,
            factor,
            writes,
            read,
            fill,
        })
}

fn slice_of(r: &ArraySubset) -> Vec<SliceInfoElem> {
    r.start
        .iter()
        .zip(&r.shape)
        .map(|(&s, &n)| SliceInfoElem::Slice {
            start: s as isize,
            end: Some((s + n) as isize),
            step: 1,
        })
        .collect()
}

fn values(region: &ArraySubset, seed: i32) -> Vec<i32> {
    // Mostly distinct values, with runs of the fill-like value 0 to exercise
    // empty-chunk elision.
    (0..region.num_elements() as i32)
        .map(|i| {
            if (seed ^ i) % 7 == 0 {
                0
            } else {
                seed.wrapping_mul(31).wrapping_add(i)
            }
        })
        .collect()
}

async fn run(chain: Chain, c: Case) -> Result<(), TestCaseError> {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let ndim = c.shape.len();
    let chunk: Vec<u64> = match chain {
        Chain::Sharding => c.inner.iter().zip(&c.factor).map(|(a, b)| a * b).collect(),
        _ => c.inner.clone(),
    };
    let a = ArrayBuilder::new(c.shape.clone(), chunk, DataType::Int32)
        .fill_value(json!(c.fill))
        .codecs(codecs(chain, ndim, &c.inner))
        .create(store.clone(), "a")
        .await
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let dims: Vec<usize> = c.shape.iter().map(|&d| d as usize).collect();
    let mut model = ArrayD::<i32>::from_elem(IxDyn(&dims), c.fill);
    for (region, seed) in &c.writes {
        let v = values(region, *seed);
        a.write_region(region, &v)
            .await
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let shape: Vec<usize> = region.shape.iter().map(|&d| d as usize).collect();
        model
            .slice_mut(slice_of(region).as_slice())
            .assign(&ArrayD::from_shape_vec(IxDyn(&shape), v).unwrap());
    }
    let reopened = Array::open(store.clone(), "a")
        .await
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let full = reopened
        .read_region_ndarray::<i32>(&ArraySubset::full(&c.shape))
        .await
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&full, &model);
    let part = reopened
        .read_region_ndarray::<i32>(&c.read)
        .await
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let expected = model.slice(slice_of(&c.read).as_slice()).to_owned();
    prop_assert_eq!(part, expected);
    // No stored chunk is entirely the fill value.
    for key in store.list_prefix("a/c/").await.unwrap() {
        let idx: Vec<u64> = key["a/c/".len()..]
            .split('/')
            .map(|p| p.parse().unwrap())
            .collect();
        let data: Vec<i32> = reopened.read_chunk(&idx).await.unwrap();
        prop_assert!(
            data.iter().any(|&x| x != c.fill),
            "chunk {} is all fill but stored",
            key
        );
    }
    Ok(())
}

fn block_on(chain: Chain, c: Case) -> Result<(), TestCaseError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(chain, c))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn roundtrip_bytes(c in case()) { block_on(CHAINS[0], c)?; }

    #[test]
    fn roundtrip_bytes_gzip(c in case()) { block_on(CHAINS[1], c)?; }

    #[test]
    fn roundtrip_transpose_bytes_zstd(c in case()) { block_on(CHAINS[2], c)?; }

    #[test]
    fn roundtrip_blosc(c in case()) { block_on(CHAINS[3], c)?; }

    #[test]
    fn roundtrip_crc32c(c in case()) { block_on(CHAINS[4], c)?; }

    #[test]
    fn roundtrip_sharding(c in case()) { block_on(CHAINS[5], c)?; }
}
