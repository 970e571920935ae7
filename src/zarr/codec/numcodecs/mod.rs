//! `numcodecs.*` codecs (zarr-extensions `codecs/numcodecs.*`): numcodecs codecs
//! wrapped for Zarr v3 as zarr-python names them — `numcodecs.<codec_id>` with the
//! numcodecs configuration (minus `id`, which is accepted when it matches). They are
//! also what Zarr v2 compressors and filters (and Zarr v1 compressors) without a v3
//! equivalent translate to ([`crate::zarr::metadata::v2`]). Byte formats and
//! arithmetic follow numcodecs 0.15/0.16; each codec's module says what it does.
//!
//! `bytes -> bytes`: `numcodecs.zlib` (RFC 1950 zlib stream, `level`),
//! `numcodecs.gzip` (`level`), `numcodecs.zstd` (`level`, `checksum`),
//! `numcodecs.blosc` (v2-style integer `shuffle`), `numcodecs.shuffle`
//! (`elementsize`; byte shuffle: byte `j` of element `i` moves to position
//! `j * count + i`), [`numcodecs.bz2`](bz2), [`numcodecs.lzma`](lzma),
//! [`numcodecs.lz4`](lz4), and the checksums `numcodecs.crc32`, `numcodecs.crc32c`,
//! `numcodecs.adler32`, `numcodecs.fletcher32` ([`checksum32`]).
//!
//! `array -> array` (on the decoded chunk's elements, flattened in C order):
//! [`numcodecs.delta`](delta), [`numcodecs.fixedscaleoffset`](fixedscaleoffset),
//! [`numcodecs.quantize`](quantize), [`numcodecs.bitround`](bitround),
//! [`numcodecs.packbits`](packbits), [`numcodecs.astype`](astype).
//!
//! Decompressors bound their output ([`BytesToBytesCodec::decode_bounded`]): a
//! chunk that would decode to more than its array declares fails with
//! [`CodecError::InvalidData`] before using more memory than that.

pub mod astype;
pub mod bitround;
pub mod bz2;
pub mod checksum32;
pub mod delta;
pub mod fixedscaleoffset;
pub mod lz4;
pub mod lzma;
mod numeric;
pub mod packbits;
pub mod quantize;

use std::io::{Read, Write};
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::zarr::array_bytes::ArrayBytes;
use crate::zarr::codec::blosc::{blosc_decompress, BloscCodec};
use crate::zarr::codec::gzip::{gzip_compress, gzip_decompress};
use crate::zarr::codec::zstd::{zstd_compress, zstd_decompress};
use crate::zarr::codec::{BytesToBytesCodec, ChunkRepr, Codec, Config};
use crate::zarr::data_type::DataType;
use crate::zarr::error::{CodecError, ZarrResult};

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Zlib { level: u32 },
    Gzip { level: u32 },
    Zstd { level: i32, checksum: bool },
    Blosc(BloscCodec),
    Shuffle { elementsize: usize },
}

/// A `numcodecs.*` bytes-to-bytes codec; its metadata keeps the configuration as
/// given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumcodecsCodec {
    name: String,
    config: Map<String, Value>,
    kind: Kind,
}

/// Builds a `numcodecs.*` codec, `Ok(None)` for an unsupported numcodecs id.
///
/// # Errors
/// [`crate::zarr::ZarrError::InvalidCodec`] for malformed configurations.
pub(crate) fn from_config(cfg: &Config, dt: &DataType) -> ZarrResult<Option<Codec>> {
    let id = cfg.name.trim_start_matches("numcodecs.");
    // zarr-python accepts (and may write) the numcodecs `id` inside the configuration.
    if let Some(v) = cfg.get("id") {
        if v.as_str() != Some(id) {
            return Err(cfg.err(format!("configuration id {v} does not match the name")));
        }
    }
    let level_u32 = |default: u64| -> ZarrResult<u32> {
        let l = cfg.i64("level")?.unwrap_or(default as i64);
        if !(0..=9).contains(&l) {
            return Err(cfg.err(format!("level {l} is not in 0..=9")));
        }
        Ok(l as u32)
    };
    let kind = match id {
        "zlib" => {
            cfg.only(&["id", "level"])?;
            Kind::Zlib {
                level: level_u32(1)?,
            }
        }
        "gzip" => {
            cfg.only(&["id", "level"])?;
            Kind::Gzip {
                level: level_u32(1)?,
            }
        }
        "zstd" => {
            cfg.only(&["id", "level", "checksum"])?;
            let level = cfg.i64("level")?.unwrap_or(0);
            if !(-131072..=22).contains(&level) {
                return Err(cfg.err(format!("level {level} is out of range")));
            }
            Kind::Zstd {
                level: level as i32,
                checksum: cfg.bool("checksum")?.unwrap_or(false),
            }
        }
        "blosc" => {
            let mut m = cfg.map.clone();
            m.remove("id");
            Kind::Blosc(BloscCodec::from_config(&Config::new(cfg.name, &m), dt)?)
        }
        "shuffle" => {
            cfg.only(&["id", "elementsize"])?;
            let e = cfg.u64("elementsize")?.unwrap_or(4);
            Kind::Shuffle {
                elementsize: e as usize,
            }
        }
        _ => return other_from_config(cfg, id),
    };
    let mut config = cfg.map.clone();
    config.remove("id");
    Ok(Some(Codec::BytesToBytes(Arc::new(NumcodecsCodec {
        name: cfg.name.to_string(),
        config,
        kind,
    }))))
}

/// The numcodecs codecs with a module of their own (`None` for unknown ids).
fn other_from_config(cfg: &Config, id: &str) -> ZarrResult<Option<Codec>> {
    use checksum32::{Checksum32, Checksum32Codec};
    let b2b = |c: Arc<dyn BytesToBytesCodec>| Ok(Some(Codec::BytesToBytes(c)));
    let a2a = |c: Arc<dyn crate::zarr::codec::ArrayToArrayCodec>| Ok(Some(Codec::ArrayToArray(c)));
    match id {
        "bz2" => b2b(Arc::new(bz2::Bz2Codec::from_config(cfg)?)),
        "lzma" => b2b(Arc::new(lzma::LzmaCodec::from_config(cfg)?)),
        "lz4" => b2b(Arc::new(lz4::Lz4Codec::from_config(cfg)?)),
        "crc32" => b2b(Arc::new(Checksum32Codec::from_config(
            cfg,
            Checksum32::Crc32,
        )?)),
        "crc32c" => b2b(Arc::new(Checksum32Codec::from_config(
            cfg,
            Checksum32::Crc32c,
        )?)),
        "adler32" => b2b(Arc::new(Checksum32Codec::from_config(
            cfg,
            Checksum32::Adler32,
        )?)),
        "fletcher32" => b2b(Arc::new(Checksum32Codec::from_config(
            cfg,
            Checksum32::Fletcher32,
        )?)),
        "delta" => a2a(Arc::new(delta::DeltaCodec::from_config(cfg)?)),
        "fixedscaleoffset" => a2a(Arc::new(
            fixedscaleoffset::FixedScaleOffsetCodec::from_config(cfg)?,
        )),
        "quantize" => a2a(Arc::new(quantize::QuantizeCodec::from_config(cfg)?)),
        "bitround" => a2a(Arc::new(bitround::BitRoundCodec::from_config(cfg)?)),
        "packbits" => a2a(Arc::new(packbits::PackBitsCodec::from_config(cfg)?)),
        "astype" => a2a(Arc::new(astype::AsTypeCodec::from_config(cfg)?)),
        _ => Ok(None),
    }
}

/// A codec's configuration without numcodecs' `id` (zarr-python writes none).
fn config_without_id(cfg: &Config) -> Map<String, Value> {
    let mut m = cfg.map.clone();
    m.remove("id");
    m
}

/// A codec's metadata JSON.
fn codec_json(name: &str, config: &Map<String, Value>) -> Value {
    json!({"name": name, "configuration": config})
}

/// A NumPy data type configuration member (`None` when absent).
fn dtype_param(cfg: &Config, key: &str) -> ZarrResult<Option<DataType>> {
    match cfg.str(key)? {
        None => Ok(None),
        Some(s) => numeric::parse_numpy_dtype(s).map(Some).ok_or_else(|| {
            cfg.err(format!(
                "`{key}` {s:?} is not a boolean, integer or float type"
            ))
        }),
    }
}

/// Checks that the decoded chunk has the data type the codec is configured for.
fn expect_dtype(codec: &str, decoded: &ChunkRepr, dt: &DataType) -> Result<(), CodecError> {
    if &decoded.data_type == dt {
        Ok(())
    } else {
        Err(CodecError::unsupported(
            codec,
            format!("configured for {dt}, applied to {}", decoded.data_type),
        ))
    }
}

/// Checks that a decoded chunk of `decoded` has `n` elements.
fn expect_len(codec: &str, n: usize, decoded: &ChunkRepr) -> Result<(), CodecError> {
    if n as u64 == decoded.num_elements() {
        Ok(())
    } else {
        Err(CodecError::invalid(
            codec,
            format!(
                "{n} elements where the chunk has {}",
                decoded.num_elements()
            ),
        ))
    }
}

/// `decoded` with data type `dt` (and its default fill value).
fn repr_as(decoded: &ChunkRepr, dt: &DataType) -> ChunkRepr {
    ChunkRepr {
        shape: decoded.shape.clone(),
        data_type: dt.clone(),
        fill_value: dt.default_fill_value(),
    }
}

/// The bytes of fixed-size elements.
fn fixed<'a>(codec: &str, data: &'a ArrayBytes) -> Result<&'a [u8], CodecError> {
    match data {
        ArrayBytes::Fixed(b) => Ok(b),
        ArrayBytes::Strings(_) => Err(CodecError::unsupported(codec, "variable-size elements")),
    }
}

impl NumcodecsCodec {
    /// `numcodecs.zlib` with `level` (0..=9).
    pub fn zlib(level: u32) -> Self {
        NumcodecsCodec {
            name: "numcodecs.zlib".into(),
            config: json!({"level": level})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            kind: Kind::Zlib {
                level: level.min(9),
            },
        }
    }

    /// `numcodecs.shuffle` with `elementsize` bytes.
    pub fn shuffle(elementsize: usize) -> Self {
        NumcodecsCodec {
            name: "numcodecs.shuffle".into(),
            config: json!({"elementsize": elementsize})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            kind: Kind::Shuffle { elementsize },
        }
    }
}

/// Whether (un)shuffling `src` with element size `es` moves bytes (`es > 1`).
///
/// # Errors
/// [`CodecError`] when `src` is not a whole number of elements.
fn needs_shuffle(src: &[u8], es: usize) -> Result<bool, CodecError> {
    if es <= 1 {
        return Ok(false);
    }
    if !src.len().is_multiple_of(es) {
        return Err(CodecError::invalid(
            "numcodecs.shuffle",
            format!("{} bytes are not a multiple of elementsize {es}", src.len()),
        ));
    }
    Ok(true)
}

/// numcodecs byte shuffle: byte `j` of element `i` goes to `j * count + i`.
fn shuffle(src: &[u8], es: usize) -> Result<Vec<u8>, CodecError> {
    if !needs_shuffle(src, es)? {
        return Ok(src.to_vec());
    }
    let count = src.len() / es;
    let mut out = vec![0u8; src.len()];
    for (i, e) in src.chunks_exact(es).enumerate() {
        for (j, &b) in e.iter().enumerate() {
            out[j * count + i] = b;
        }
    }
    Ok(out)
}

fn unshuffle(src: &[u8], es: usize) -> Result<Vec<u8>, CodecError> {
    if !needs_shuffle(src, es)? {
        return Ok(src.to_vec());
    }
    let count = src.len() / es;
    let mut out = vec![0u8; src.len()];
    for (i, e) in out.chunks_exact_mut(es).enumerate() {
        for (j, b) in e.iter_mut().enumerate() {
            *b = src[j * count + i];
        }
    }
    Ok(out)
}

impl BytesToBytesCodec for NumcodecsCodec {
    fn to_json(&self) -> Value {
        json!({"name": self.name, "configuration": self.config})
    }

    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>, CodecError> {
        let fail = |e: std::io::Error| CodecError::EncodeFailed {
            codec: self.name.clone(),
            reason: e.to_string(),
        };
        match &self.kind {
            Kind::Zlib { level } => {
                let mut enc = flate2::write::ZlibEncoder::new(
                    Vec::with_capacity(bytes.len() / 2 + 16),
                    flate2::Compression::new(*level),
                );
                enc.write_all(&bytes).map_err(fail)?;
                enc.finish().map_err(fail)
            }
            Kind::Gzip { level } => gzip_compress(&self.name, &bytes, *level),
            Kind::Zstd { level, checksum } => zstd_compress(&self.name, &bytes, *level, *checksum),
            Kind::Blosc(b) => b.compress(&self.name, &bytes),
            Kind::Shuffle { elementsize } => shuffle(&bytes, *elementsize),
        }
    }

    fn decode(&self, bytes: ::bytes::Bytes) -> Result<::bytes::Bytes, CodecError> {
        match &self.kind {
            Kind::Zlib { .. } => {
                let mut out = Vec::with_capacity(bytes.len() * 2);
                flate2::read::ZlibDecoder::new(&bytes[..])
                    .read_to_end(&mut out)
                    .map_err(|e| CodecError::invalid(&self.name, e.to_string()))?;
                Ok(out.into())
            }
            Kind::Gzip { .. } => gzip_decompress(&self.name, &bytes).map(Into::into),
            Kind::Zstd { .. } => zstd_decompress(&self.name, &bytes).map(Into::into),
            Kind::Blosc(_) => blosc_decompress(&self.name, &bytes).map(Into::into),
            Kind::Shuffle { elementsize } => unshuffle(&bytes, *elementsize).map(Into::into),
        }
    }

    fn decode_bounded(
        &self,
        bytes: ::bytes::Bytes,
        limit: usize,
    ) -> Result<::bytes::Bytes, CodecError> {
        let out = match &self.kind {
            Kind::Zlib { .. } => {
                let dec = flate2::read::ZlibDecoder::new(&bytes[..]);
                return crate::zarr::codec::bounded::read_bounded(
                    &self.name,
                    dec,
                    limit,
                    bytes.len() * 2,
                )
                .map(Into::into);
            }
            Kind::Gzip { .. } => {
                return crate::zarr::codec::gzip::gzip_decompress_bounded(&self.name, &bytes, limit)
                    .map(Into::into)
            }
            Kind::Zstd { .. } => {
                return crate::zarr::codec::zstd::zstd_decompress_bounded(&self.name, &bytes, limit)
                    .map(Into::into)
            }
            Kind::Blosc(_) => {
                return crate::zarr::codec::blosc::blosc_decompress_bounded(
                    &self.name, &bytes, limit,
                )
                .map(Into::into)
            }
            Kind::Shuffle { .. } => self.decode(bytes)?,
        };
        if out.len() > limit {
            return Err(crate::zarr::codec::bounded::too_large(&self.name, limit));
        }
        Ok(out)
    }

    fn encoded_size(&self, decoded_size: u64) -> Option<u64> {
        match self.kind {
            Kind::Shuffle { .. } => Some(decoded_size),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::codec::gzip::tests::hex_bytes;

    #[test]
    fn numcodecs_known_bytes() {
        // numcodecs.Shuffle(elementsize=4).encode(np.arange(4, dtype='<i4'))
        let src: Vec<u8> = (0i32..4).flat_map(|v| v.to_le_bytes()).collect();
        let s = NumcodecsCodec::shuffle(4);
        let enc = s.encode(src.clone()).unwrap();
        assert_eq!(enc, hex_bytes("00010203000000000000000000000000"));
        assert_eq!(s.decode(enc.into()).unwrap(), src);
        assert_err!(
            s.encode(vec![1, 2, 3]),
            crate::zarr::CodecError::InvalidData { .. }
        );
        // zlib.compress(b'abc', 1)
        let z = NumcodecsCodec::zlib(1);
        assert_eq!(
            z.decode(hex_bytes("78014b4c4a0600024d0127").into())
                .unwrap(),
            &b"abc"[..]
        );
        assert_eq!(
            z.decode(z.encode(b"xyz".to_vec()).unwrap().into()).unwrap(),
            &b"xyz"[..]
        );
        assert_err!(
            z.decode(b"nope".to_vec().into()),
            crate::zarr::CodecError::InvalidData { .. }
        );
    }

    fn chain(
        codecs: Value,
        dt: DataType,
        shape: Vec<u64>,
    ) -> (crate::zarr::codec::CodecChain, ChunkRepr) {
        let repr = ChunkRepr {
            shape,
            fill_value: dt.default_fill_value(),
            data_type: dt,
        };
        let list = codecs.as_array().unwrap().clone();
        (
            crate::zarr::codec::CodecChain::from_json(&list, &repr).unwrap(),
            repr,
        )
    }

    fn le<T: Copy>(v: &[T], f: fn(T) -> Vec<u8>) -> Vec<u8> {
        v.iter().flat_map(|&x| f(x)).collect()
    }

    /// Each element filter against the bytes numcodecs 0.15 (NumPy 2.2) encodes,
    /// through a chain ending in `bytes` (little-endian), then decoded back.
    #[test]
    fn element_filters_match_numcodecs() {
        let bytes_le = json!({"name": "bytes", "configuration": {"endian": "little"}});
        let f8 = |v: f64| v.to_le_bytes().to_vec();
        let f4 = |v: f32| v.to_le_bytes().to_vec();
        let xf = [1000.0, 1000.04, 1000.05, 1000.15, 1025.5];
        let q = [0.1234f32, -1.987, 2.5031, 100.55];
        #[allow(clippy::type_complexity)]
        let cases: Vec<(Value, DataType, Vec<u8>, &str, Option<Vec<u8>>)> = vec![
            (
                json!({"name": "numcodecs.delta", "configuration": {"dtype": "<i2", "astype": "<i1"}}),
                DataType::Int16,
                le(&(0..10).map(|i| 100 + 2 * i).collect::<Vec<i16>>(), |v| {
                    v.to_le_bytes().to_vec()
                }),
                "64020202020202020202",
                None,
            ),
            (
                json!({"name": "numcodecs.fixedscaleoffset", "configuration":
                    {"offset": 1000, "scale": 10, "dtype": "<f8", "astype": "|u1"}}),
                DataType::Float64,
                le(&xf, f8),
                "00000001ff",
                Some(le(&[1000.0, 1000.0, 1000.0, 1000.1, 1025.5], f8)),
            ),
            (
                json!({"name": "numcodecs.quantize", "configuration": {"digits": 1, "dtype": "<f4", "astype": "<f4"}}),
                DataType::Float32,
                le(&q, f4),
                "0000003e000000c0000020400020c942",
                None,
            ),
            (
                json!({"name": "numcodecs.bitround", "configuration": {"keepbits": 3}}),
                DataType::Float32,
                le(&q, f4),
                "0000003e000000c0000020400000d042",
                None,
            ),
            (
                json!({"name": "numcodecs.astype", "configuration": {"encode_dtype": "<f4", "decode_dtype": "<f8"}}),
                DataType::Float64,
                le(&xf, f8),
                "00007a448f027a4433037a449a097a4400308044",
                None,
            ),
            (
                json!({"name": "numcodecs.packbits", "configuration": {}}),
                DataType::Bool,
                vec![1, 0, 1, 1, 0, 0, 0, 1, 1, 1],
                "06b1c0",
                None,
            ),
        ];
        for (codec, dt, input, hex, decoded) in cases {
            let n = (input.len() / dt.fixed_size().unwrap()) as u64;
            let (c, r) = chain(json!([codec.clone(), bytes_le.clone()]), dt, vec![n]);
            let enc = match codec["name"].as_str() {
                Some("numcodecs.packbits") => {
                    let (c2, r2) = chain(
                        json!([codec.clone(), {"name": "bytes"}]),
                        DataType::Bool,
                        vec![n],
                    );
                    let e = c2.encode(ArrayBytes::Fixed(input.clone()), &r2).unwrap();
                    assert_eq!(
                        c2.decode(e.clone().into(), &r2).unwrap(),
                        ArrayBytes::Fixed(input.clone())
                    );
                    e
                }
                _ => c.encode(ArrayBytes::Fixed(input.clone()), &r).unwrap(),
            };
            assert_eq!(enc, hex_bytes(hex), "{codec}");
            if codec["name"] == "numcodecs.packbits" {
                continue;
            }
            let dec = c.decode(enc.into(), &r).unwrap();
            let want = match codec["name"].as_str() {
                // Lossy: the decoded values are the encoded ones widened back.
                Some("numcodecs.quantize" | "numcodecs.bitround") => hex_bytes(hex),
                Some("numcodecs.astype") => le(&xf.map(|v| f64::from(v as f32)), f8),
                _ => decoded.unwrap_or(input),
            };
            assert_eq!(dec, ArrayBytes::Fixed(want), "{codec}");
        }
        // Wrong data type, wrong element count, a bad packbits header.
        let delta =
            json!([{"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}}, bytes_le]);
        let repr = ChunkRepr {
            shape: vec![2],
            data_type: DataType::Int16,
            fill_value: DataType::Int16.default_fill_value(),
        };
        assert_err!(
            crate::zarr::codec::CodecChain::from_json(delta.as_array().unwrap(), &repr),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
        let (c, r) = chain(delta, DataType::Int32, vec![2]);
        assert_err!(
            c.decode(vec![0u8; 12].into(), &r),
            CodecError::InvalidData { .. }
        );
        let (c, r) = chain(
            json!([{"name": "numcodecs.packbits"}, {"name": "bytes"}]),
            DataType::Bool,
            vec![10],
        );
        assert_err!(
            c.decode(hex_bytes("05b1c0").into(), &r),
            CodecError::InvalidData { .. }
        );
    }

    /// The compressors decode what Python's `bz2`, `lzma` and numcodecs' `LZ4` wrote.
    #[test]
    fn compressors_read_python_bytes() {
        let cases = [
            (json!({"name": "numcodecs.bz2", "configuration": {"level": 1}}),
             "425a68313141592653594ef0997300000101003800200021b106621238bb9229c284827784cb98"),
            (json!({"name": "numcodecs.lzma", "configuration": {"format": 1, "check": -1, "preset": null, "filters": null}}),
             "fd377a585a000004e6d6b4460200210116000000742fe5a3010008616263616263616263000000001ce9d888c7a98ab8000121096c18c5d51fb6f37d010000000004595a"),
            (json!({"name": "numcodecs.lzma", "configuration": {"format": 2, "check": -1, "preset": null, "filters": null}}),
             "5d00008000ffffffffffffffff00309888a61dfe81a3ffff61640000"),
            (json!({"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}),
             "24000000cf68656c6c6f20776f726c64210c0000506f726c6421"),
        ];
        for (j, hex) in cases {
            let Some(Codec::BytesToBytes(c)) =
                crate::zarr::codec::codec_from_json(&j, &DataType::UInt8).unwrap()
            else {
                panic!("{j} is not bytes -> bytes");
            };
            assert_eq!(c.to_json(), j);
            let dec = c.decode(hex_bytes(hex).into()).unwrap();
            let want: &[u8] = if j["name"] == "numcodecs.lz4" {
                b"hello world!hello world!hello world!"
            } else {
                b"abcabcabc"
            };
            assert_eq!(&dec[..], want, "{j}");
            let data = b"floe floe floe floe floe floe".repeat(50);
            let enc = c.encode(data.clone()).unwrap();
            assert_eq!(c.decode(enc.clone().into()).unwrap(), data, "{j}");
            assert_err!(
                c.decode_bounded(enc.into(), data.len() - 1),
                CodecError::InvalidData { .. }
            );
            let mut corrupt = hex_bytes(hex);
            let mid = corrupt.len() / 2;
            corrupt.truncate(mid);
            assert_err!(c.decode(corrupt.into()), CodecError::InvalidData { .. });
        }
        let j = json!({"name": "numcodecs.lzma", "configuration": {"format": 3, "filters": [{"id": 33}]}});
        assert_err!(
            crate::zarr::codec::codec_from_json(&j, &DataType::UInt8),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
        let j = json!({"name": "numcodecs.bz2", "configuration": {"level": 0}});
        assert_err!(
            crate::zarr::codec::codec_from_json(&j, &DataType::UInt8),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
    }

    /// A chunk that decompresses past its array's chunk size fails before using
    /// more memory (a decompression bomb); one that decodes short fails too.
    #[test]
    fn decompression_bombs_and_wrong_sizes() {
        let bytes_le = json!({"name": "bytes", "configuration": {"endian": "little"}});
        for comp in [
            json!({"name": "numcodecs.bz2", "configuration": {"level": 9}}),
            json!({"name": "numcodecs.lzma", "configuration": {}}),
            json!({"name": "numcodecs.lz4", "configuration": {}}),
            json!({"name": "numcodecs.zlib", "configuration": {"level": 9}}),
            json!({"name": "gzip", "configuration": {"level": 9}}),
            json!({"name": "zstd", "configuration": {"level": 3, "checksum": false}}),
            json!({"name": "numcodecs.zstd", "configuration": {"level": 3}}),
            json!({"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
                   "shuffle": "noshuffle", "typesize": 1, "blocksize": 0}}),
            json!({"name": "numcodecs.blosc", "configuration": {"cname": "zstd", "clevel": 5,
                   "shuffle": 0, "blocksize": 0}}),
        ] {
            let (big, big_r) = chain(json!([bytes_le, comp]), DataType::UInt8, vec![10_000_000]);
            let bomb = big
                .encode(ArrayBytes::Fixed(vec![0; 10_000_000]), &big_r)
                .unwrap();
            assert!(bomb.len() < 100_000, "{comp}: {}", bomb.len());
            let (small, r) = chain(json!([bytes_le, comp]), DataType::UInt8, vec![1000]);
            let err = small.decode(bomb.clone().into(), &r).unwrap_err();
            assert!(
                matches!(&err, CodecError::InvalidData { reason, .. } if reason.contains("more than")),
                "{comp}: {err}"
            );
            let mut dest = vec![0u8; 1000];
            assert_err!(
                small.decode_into(bomb.into(), &r, &mut dest),
                CodecError::InvalidData { .. }
            );
            let (c999, r999) = chain(json!([bytes_le, comp]), DataType::UInt8, vec![999]);
            let enc999 = c999.encode(ArrayBytes::Fixed(vec![7; 999]), &r999).unwrap();
            assert_err!(
                small.decode(enc999.into(), &r),
                CodecError::InvalidData { .. }
            );
        }
    }

    /// Corrupt input — random bytes, and valid encodings with bytes flipped or cut —
    /// never panics in any numcodecs codec: each decode either succeeds with one
    /// chunk's bytes or fails with a codec error.
    #[test]
    fn corrupt_input_never_panics() {
        let le = json!({"name": "bytes", "configuration": {"endian": "little"}});
        let chains = [
            (
                json!([le, {"name": "numcodecs.bz2", "configuration": {"level": 1}}]),
                DataType::Int32,
            ),
            (
                json!([le, {"name": "numcodecs.lzma", "configuration": {}}]),
                DataType::Int32,
            ),
            (
                json!([le, {"name": "numcodecs.lz4", "configuration": {}}]),
                DataType::Int32,
            ),
            (json!([le, {"name": "numcodecs.adler32"}]), DataType::Int32),
            (
                json!([le, {"name": "numcodecs.fletcher32"}]),
                DataType::Int32,
            ),
            (json!([le, {"name": "numcodecs.crc32"}]), DataType::Int32),
            (
                json!([{"name": "numcodecs.delta", "configuration": {"dtype": "<i4", "astype": "<i1"}}, le]),
                DataType::Int32,
            ),
            (
                json!([{"name": "numcodecs.fixedscaleoffset", "configuration":
                {"offset": 5, "scale": 3, "dtype": "<i4", "astype": "<u1"}}, le]),
                DataType::Int32,
            ),
            (
                json!([{"name": "numcodecs.quantize", "configuration": {"digits": 300, "dtype": "<f4"}}, le]),
                DataType::Float32,
            ),
            (
                json!([{"name": "numcodecs.bitround", "configuration": {"keepbits": 0}}, le]),
                DataType::Float32,
            ),
            (
                json!([{"name": "numcodecs.astype", "configuration": {"encode_dtype": "<f2", "decode_dtype": "<i4"}}, le]),
                DataType::Int32,
            ),
            (
                json!([{"name": "numcodecs.packbits"}, {"name": "bytes"}]),
                DataType::Bool,
            ),
        ];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for (codecs, dt) in chains {
            let (c, r) = chain(codecs.clone(), dt.clone(), vec![3, 5]);
            let size = 15 * dt.fixed_size().unwrap();
            let data: Vec<u8> = (0..size).map(|_| next() as u8).collect();
            let data = if dt == DataType::Bool {
                data.iter().map(|b| b & 1).collect()
            } else {
                data
            };
            let enc = c.encode(ArrayBytes::Fixed(data), &r).unwrap();
            for round in 0..200 {
                let input: Vec<u8> = match round % 3 {
                    0 => (0..next() % 64).map(|_| next() as u8).collect(),
                    1 => {
                        let mut e = enc.clone();
                        let i = next() as usize % e.len();
                        e[i] ^= 1 << (next() % 8);
                        e
                    }
                    _ => enc[..next() as usize % enc.len()].to_vec(),
                };
                match c.decode(input.into(), &r) {
                    Ok(ArrayBytes::Fixed(b)) => assert_eq!(b.len(), size, "{codecs}"),
                    Ok(other) => panic!("{codecs}: {other:?}"),
                    Err(CodecError::InvalidData { .. } | CodecError::Unsupported { .. }) => {}
                    Err(e) => panic!("{codecs}: {e}"),
                }
            }
        }
    }

    #[test]
    fn config_names_roundtrip() {
        let j = json!({"name": "numcodecs.zstd", "configuration": {"level": 1}});
        let c = crate::zarr::codec::codec_from_json(&j, &DataType::Int32)
            .unwrap()
            .unwrap();
        assert_eq!(c.to_json(), j);
        let j = json!({"name": "numcodecs.zfpy", "configuration": {}});
        assert_err!(
            crate::zarr::codec::codec_from_json(&j, &DataType::Int32),
            crate::zarr::ZarrError::UnsupportedExtension { .. }
        );
        let j = json!({"name": "numcodecs.zlib", "configuration": {"level": 12}});
        assert_err!(
            crate::zarr::codec::codec_from_json(&j, &DataType::Int32),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
    }
}
