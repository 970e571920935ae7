//! Codecs (the `codecs` extension point of the core spec, section "Codecs").
//!
//! There is one trait per codec kind — [`ArrayToArrayCodec`], [`ArrayToBytesCodec`],
//! [`BytesToBytesCodec`] — and [`CodecChain`] applies an ordered list of them
//! (core spec, "Encoding procedure" / "Decoding procedure"). Codecs know nothing of
//! stores: partial decoding reads through the small [`ByteSource`] trait, which the
//! array layer implements over a store key.
//!
//! Implemented codecs (one module each): `bytes`, `transpose`, `gzip`, `blosc`,
//! `crc32c`, `zstd`, `sharding_indexed`, `vlen-utf8`, and the numcodecs codecs
//! ([`numcodecs`]): `numcodecs.zlib`, `numcodecs.gzip`, `numcodecs.zstd`,
//! `numcodecs.blosc`, `numcodecs.shuffle`, `numcodecs.bz2`, `numcodecs.lzma`,
//! `numcodecs.lz4`, `numcodecs.crc32`, `numcodecs.crc32c`, `numcodecs.adler32`,
//! `numcodecs.fletcher32`, `numcodecs.delta`, `numcodecs.fixedscaleoffset`,
//! `numcodecs.quantize`, `numcodecs.bitround`, `numcodecs.packbits`,
//! `numcodecs.astype`.

// Calls c-blosc (`unsafe` FFI).
#[allow(unsafe_code)]
pub mod blosc;
mod bounded;
pub mod bytes;
pub mod crc32c;
pub mod gzip;
pub mod numcodecs;
pub mod sharding;
pub mod transpose;
pub mod vlen_utf8;
pub mod zstd;

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::zarr::array_bytes::ArrayBytes;
use crate::zarr::data_type::{DataType, FillValue};
use crate::zarr::error::{CodecError, ZarrError, ZarrResult};
use crate::zarr::store::ByteRange;
use crate::zarr::subset::ArraySubset;

mod chain;
mod config;
mod registry;
mod traits;

pub use chain::CodecChain;
pub(crate) use chain::{offloads, run_blocking};
pub(crate) use config::{name_and_config, Config};
pub use registry::codec_from_json;
pub(crate) use traits::check_data;
pub use traits::{
    ArrayToArrayCodec, ArrayToBytesCodec, ByteSource, BytesSource, BytesToBytesCodec, ChunkRepr,
    Codec,
};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn repr(dt: DataType, shape: Vec<u64>) -> ChunkRepr {
        let fill_value = dt.default_fill_value();
        ChunkRepr {
            shape,
            data_type: dt,
            fill_value,
        }
    }

    #[test]
    fn chain_order_rules() {
        let r = repr(DataType::Int32, vec![4]);
        let ok = [
            json!({"name": "bytes", "configuration": {"endian": "little"}}),
            json!({"name": "gzip", "configuration": {"level": 1}}),
        ];
        assert!(CodecChain::from_json(&ok, &r).is_ok());
        let bad = [
            json!({"name": "gzip", "configuration": {"level": 1}}),
            json!({"name": "bytes", "configuration": {"endian": "little"}}),
        ];
        assert!(matches!(
            CodecChain::from_json(&bad, &r),
            Err(ZarrError::InvalidCodec { .. })
        ));
        let two = [
            json!({"name": "bytes", "configuration": {"endian": "little"}}),
            json!({"name": "bytes", "configuration": {"endian": "little"}}),
        ];
        assert_err!(
            CodecChain::from_json(&two, &r),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
        assert_err!(
            CodecChain::from_json(&[], &r),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
        let no_endian = [json!({"name": "bytes"})];
        assert_err!(
            CodecChain::from_json(&no_endian, &r),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
        assert!(CodecChain::from_json(&no_endian, &repr(DataType::UInt8, vec![4])).is_ok());
        let unknown = [
            json!({"name": "bytes", "configuration": {"endian": "little"}}),
            json!({"name": "fancy"}),
        ];
        assert!(matches!(
            CodecChain::from_json(&unknown, &r),
            Err(ZarrError::UnsupportedExtension { .. })
        ));
        let ignorable = [
            json!({"name": "bytes", "configuration": {"endian": "little"}}),
            json!({"name": "fancy", "must_understand": false}),
        ];
        assert_eq!(
            CodecChain::from_json(&ignorable, &r)
                .unwrap()
                .to_json()
                .len(),
            1
        );
        let wrong_type = [json!({"name": "vlen-utf8"})];
        assert_err!(
            CodecChain::from_json(&wrong_type, &r),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
    }

    #[test]
    fn chain_roundtrip_transpose_bytes_gzip() {
        let r = repr(DataType::UInt16, vec![2, 3]);
        let codecs = [
            json!({"name": "transpose", "configuration": {"order": [1, 0]}}),
            json!({"name": "bytes", "configuration": {"endian": "big"}}),
            json!({"name": "gzip", "configuration": {"level": 5}}),
        ];
        let chain = CodecChain::from_json(&codecs, &r).unwrap();
        assert_eq!(chain.to_json(), codecs.to_vec());
        let data: Vec<u8> = (0u16..6).flat_map(|v| v.to_ne_bytes()).collect();
        let enc = chain.encode(ArrayBytes::Fixed(data.clone()), &r).unwrap();
        // Without gzip: transposed, big-endian.
        let plain = CodecChain::from_json(&codecs[..2], &r).unwrap();
        let enc_plain = plain.encode(ArrayBytes::Fixed(data.clone()), &r).unwrap();
        assert_eq!(enc_plain, vec![0, 0, 0, 3, 0, 1, 0, 4, 0, 2, 0, 5]);
        let dec = chain.decode(enc.into(), &r).unwrap();
        assert_eq!(dec, ArrayBytes::Fixed(data));
    }
}
