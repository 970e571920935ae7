//! The `blosc` codec (`../shared/specs/zarr/v3/codecs/blosc`): the Blosc container
//! format via c-blosc 1.x, compiled from the sources vendored in the `blosc-src` crate
//! (with its lz4, zlib and zstd compressors; no system library is linked).

use serde_json::{json, Value};

use crate::zarr::codec::{BytesToBytesCodec, Config};
use crate::zarr::data_type::DataType;
use crate::zarr::error::{CodecError, ZarrResult};

/// Blosc's internal compressor (`cname`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BloscCompressor {
    /// `blosclz`
    BloscLz,
    /// `lz4`
    Lz4,
    /// `lz4hc`
    Lz4hc,
    /// `zlib`
    Zlib,
    /// `zstd`
    Zstd,
    /// `snappy`: recognised, but floe's c-blosc is built without it, so compressing
    /// or decompressing with it fails with a typed codec error.
    Snappy,
}

impl BloscCompressor {
    /// Parses a `cname`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "blosclz" => BloscCompressor::BloscLz,
            "lz4" => BloscCompressor::Lz4,
            "lz4hc" => BloscCompressor::Lz4hc,
            "zlib" => BloscCompressor::Zlib,
            "zstd" => BloscCompressor::Zstd,
            "snappy" => BloscCompressor::Snappy,
            _ => return None,
        })
    }

    /// The `cname` string.
    pub fn as_str(self) -> &'static str {
        match self {
            BloscCompressor::BloscLz => "blosclz",
            BloscCompressor::Lz4 => "lz4",
            BloscCompressor::Lz4hc => "lz4hc",
            BloscCompressor::Zlib => "zlib",
            BloscCompressor::Zstd => "zstd",
            BloscCompressor::Snappy => "snappy",
        }
    }

    /// The NUL-terminated name c-blosc takes.
    fn c_name(self) -> &'static [u8] {
        match self {
            BloscCompressor::BloscLz => b"blosclz\0",
            BloscCompressor::Lz4 => b"lz4\0",
            BloscCompressor::Lz4hc => b"lz4hc\0",
            BloscCompressor::Zlib => b"zlib\0",
            BloscCompressor::Zstd => b"zstd\0",
            BloscCompressor::Snappy => b"snappy\0",
        }
    }
}

/// Blosc shuffle mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BloscShuffle {
    /// `noshuffle` (0 in Zarr v2)
    NoShuffle,
    /// `shuffle`: byte-wise (1 in Zarr v2)
    Shuffle,
    /// `bitshuffle`: bit-wise (2 in Zarr v2)
    BitShuffle,
}

impl BloscShuffle {
    /// The v3 string.
    pub fn as_str(self) -> &'static str {
        match self {
            BloscShuffle::NoShuffle => "noshuffle",
            BloscShuffle::Shuffle => "shuffle",
            BloscShuffle::BitShuffle => "bitshuffle",
        }
    }

    /// From the Zarr v2 / numcodecs integer (`-1` = automatic: bit-wise for 1-byte
    /// types, byte-wise otherwise).
    pub fn from_v2(v: i64, typesize: usize) -> Option<Self> {
        Some(match v {
            0 => BloscShuffle::NoShuffle,
            1 => BloscShuffle::Shuffle,
            2 => BloscShuffle::BitShuffle,
            -1 if typesize == 1 => BloscShuffle::BitShuffle,
            -1 => BloscShuffle::Shuffle,
            _ => return None,
        })
    }

    /// c-blosc's `doshuffle` value.
    fn c_mode(self) -> std::os::raw::c_int {
        match self {
            BloscShuffle::NoShuffle => 0,
            BloscShuffle::Shuffle => 1,
            BloscShuffle::BitShuffle => 2,
        }
    }
}

/// The `blosc` codec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BloscCodec {
    cname: BloscCompressor,
    clevel: u8,
    shuffle: BloscShuffle,
    typesize: usize,
    blocksize: usize,
}

impl BloscCodec {
    /// A blosc codec. `typesize` is the shuffle stride in bytes; `blocksize` 0 =
    /// automatic.
    ///
    /// # Errors
    /// [`crate::zarr::ZarrError::InvalidCodec`] for `clevel > 9` or `typesize == 0`
    /// with shuffling.
    pub fn new(
        cname: BloscCompressor,
        clevel: u8,
        shuffle: BloscShuffle,
        typesize: usize,
        blocksize: usize,
    ) -> ZarrResult<Self> {
        let m = serde_json::Map::new();
        let cfg = Config::new("blosc", &m);
        if clevel > 9 {
            return Err(cfg.err(format!("clevel {clevel} is not in 0..=9")));
        }
        if typesize == 0 && shuffle != BloscShuffle::NoShuffle {
            return Err(cfg.err("typesize must be positive when shuffling"));
        }
        Ok(BloscCodec {
            cname,
            clevel,
            shuffle,
            typesize: typesize.max(1),
            blocksize,
        })
    }

    pub(crate) fn from_config(cfg: &Config, dt: &DataType) -> ZarrResult<Self> {
        cfg.only(&["cname", "clevel", "shuffle", "typesize", "blocksize"])?;
        let cname_s = cfg.str("cname")?.unwrap_or("zstd");
        let cname = BloscCompressor::parse(cname_s)
            .ok_or_else(|| cfg.err(format!("unknown cname {cname_s:?}")))?;
        let clevel = cfg.u64("clevel")?.unwrap_or(5);
        let typesize = match cfg.u64("typesize")? {
            Some(t) => t as usize,
            None => dt.fixed_size().unwrap_or(1).max(1),
        };
        let shuffle = match cfg.get("shuffle") {
            None => BloscShuffle::NoShuffle,
            Some(Value::String(s)) => match s.as_str() {
                "noshuffle" => BloscShuffle::NoShuffle,
                "shuffle" => BloscShuffle::Shuffle,
                "bitshuffle" => BloscShuffle::BitShuffle,
                other => return Err(cfg.err(format!("unknown shuffle {other:?}"))),
            },
            Some(v) => v
                .as_i64()
                .and_then(|i| BloscShuffle::from_v2(i, typesize))
                .ok_or_else(|| cfg.err(format!("invalid shuffle {v}")))?,
        };
        let blocksize = cfg.u64("blocksize")?.unwrap_or(0) as usize;
        BloscCodec::new(
            cname,
            u8::try_from(clevel).unwrap_or(u8::MAX),
            shuffle,
            typesize,
            blocksize,
        )
        .map_err(|e| cfg.err(e.to_string()))
    }

    pub(crate) fn config_json(&self) -> Value {
        json!({
            "typesize": self.typesize,
            "cname": self.cname.as_str(),
            "clevel": self.clevel,
            "shuffle": self.shuffle.as_str(),
            "blocksize": self.blocksize,
        })
    }

    pub(crate) fn compress(&self, name: &str, data: &[u8]) -> Result<Vec<u8>, CodecError> {
        let failed = |reason: String| CodecError::EncodeFailed {
            codec: name.to_string(),
            reason,
        };
        if self.cname == BloscCompressor::Snappy {
            return Err(failed(
                "compressor snappy is not available in this build of c-blosc".to_string(),
            ));
        }
        if data.len() > MAX_BUFFER_SIZE {
            return Err(failed(format!(
                "{} bytes is more than blosc's limit of {MAX_BUFFER_SIZE}",
                data.len()
            )));
        }
        let capacity = data.len() + MAX_OVERHEAD;
        let mut out = vec![0u8; capacity];
        // Typesizes above 255 are treated by c-blosc as 1 (no shuffle stride).
        // SAFETY: `data` is readable for `data.len()` bytes and `out` writable for
        // `capacity` bytes, which is what c-blosc asks of the destination
        // (`nbytes + BLOSC_MAX_OVERHEAD` always suffices); the compressor name is
        // NUL-terminated and `blosc_compress_ctx` needs no global state.
        let written = unsafe {
            blosc_src::blosc_compress_ctx(
                std::os::raw::c_int::from(self.clevel),
                self.shuffle.c_mode(),
                self.typesize,
                data.len(),
                data.as_ptr().cast(),
                out.as_mut_ptr().cast(),
                capacity,
                self.cname.c_name().as_ptr().cast(),
                self.blocksize,
                1,
            )
        };
        match usize::try_from(written) {
            Ok(n) if n > 0 => {
                out.truncate(n);
                Ok(out)
            }
            _ => Err(failed(format!("c-blosc returned {written}"))),
        }
    }
}

/// c-blosc's `BLOSC_MAX_OVERHEAD`: the header bytes a compressed buffer adds.
const MAX_OVERHEAD: usize = blosc_src::BLOSC_MAX_OVERHEAD as usize;
/// c-blosc's `BLOSC_MAX_BUFFERSIZE`: the largest buffer it compresses, in bytes.
const MAX_BUFFER_SIZE: usize = blosc_src::BLOSC_MAX_BUFFERSIZE as usize;

/// Decompresses a Blosc buffer after validating its header against its length.
///
/// The output is allocated from the size the header declares, which
/// `blosc_cbuffer_validate` bounds by c-blosc's buffer limit (2 GiB) and checks
/// against the compressed length.
pub(crate) fn blosc_decompress(name: &str, data: &[u8]) -> Result<Vec<u8>, CodecError> {
    blosc_decompress_bounded(name, data, usize::MAX)
}

/// Decompresses a blosc buffer whose header states at most `limit` bytes (checked
/// before anything is allocated).
///
/// # Errors
/// [`CodecError::InvalidData`] for invalid buffers or a stated size above `limit`.
pub(crate) fn blosc_decompress_bounded(
    name: &str,
    data: &[u8],
    limit: usize,
) -> Result<Vec<u8>, CodecError> {
    let mut size = 0usize;
    // SAFETY: `data` is readable for `data.len()` bytes; validation reads only
    // within it.
    let valid =
        unsafe { blosc_src::blosc_cbuffer_validate(data.as_ptr().cast(), data.len(), &mut size) };
    if valid != 0 {
        return Err(CodecError::invalid(name, "not a valid blosc buffer"));
    }
    if size == 0 {
        return Ok(Vec::new());
    }
    if size > limit {
        return Err(crate::zarr::codec::bounded::too_large(name, limit));
    }
    let mut out = vec![0u8; size];
    // SAFETY: `blosc_cbuffer_validate` checked that the header is consistent with
    // the buffer's length, which is what makes decompressing untrusted input safe;
    // c-blosc never writes more than `size` bytes into `out`.
    let n = unsafe {
        blosc_src::blosc_decompress_ctx(data.as_ptr().cast(), out.as_mut_ptr().cast(), size, 1)
    };
    if usize::try_from(n).ok() != Some(size) {
        return Err(CodecError::invalid(
            name,
            format!("decompression failed (c-blosc returned {n}, header says {size} bytes)"),
        ));
    }
    Ok(out)
}

impl BytesToBytesCodec for BloscCodec {
    fn to_json(&self) -> Value {
        json!({"name": "blosc", "configuration": self.config_json()})
    }

    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>, CodecError> {
        self.compress("blosc", &bytes)
    }

    fn encode_slice(&self, bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
        self.compress("blosc", bytes)
    }

    fn decode(&self, bytes: ::bytes::Bytes) -> Result<::bytes::Bytes, CodecError> {
        blosc_decompress("blosc", &bytes).map(Into::into)
    }

    fn decode_bounded(
        &self,
        bytes: ::bytes::Bytes,
        limit: usize,
    ) -> Result<::bytes::Bytes, CodecError> {
        blosc_decompress_bounded("blosc", &bytes, limit).map(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::codec::gzip::tests::hex_bytes;

    #[test]
    fn numcodecs_bytes_decode() {
        // numcodecs.Blosc(cname='lz4', clevel=5, shuffle=1).encode(np.arange(8, dtype='<i4'))
        let py = hex_bytes("020133012000000020000000300000000000000001000000020000000300000004000000050000000600000007000000");
        let expected: Vec<u8> = (0i32..8).flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(blosc_decompress("blosc", &py).unwrap(), expected);
        assert_err!(
            blosc_decompress("blosc", b"nonsense"),
            crate::zarr::CodecError::InvalidData { .. }
        );
        let mut truncated = py.clone();
        truncated.truncate(20);
        assert_err!(
            blosc_decompress("blosc", &truncated),
            crate::zarr::CodecError::InvalidData { .. }
        );
    }

    #[test]
    fn every_cname_and_shuffle_roundtrips() {
        let data: Vec<u8> = (0u32..10_000).flat_map(|v| (v / 7).to_le_bytes()).collect();
        for cname in ["blosclz", "lz4", "lz4hc", "zlib", "zstd"] {
            for shuffle in [
                BloscShuffle::NoShuffle,
                BloscShuffle::Shuffle,
                BloscShuffle::BitShuffle,
            ] {
                let c = BloscCodec::new(BloscCompressor::parse(cname).unwrap(), 5, shuffle, 4, 0)
                    .unwrap();
                let enc = c.encode(data.clone()).unwrap();
                assert!(
                    enc.len() < data.len(),
                    "{cname} {shuffle:?} did not compress"
                );
                assert_eq!(c.decode(enc.into()).unwrap(), data);
            }
        }
        let c = BloscCodec::new(BloscCompressor::Lz4, 0, BloscShuffle::NoShuffle, 1, 0).unwrap();
        assert_eq!(
            c.decode(c.encode(Vec::new()).unwrap().into())
                .unwrap()
                .len(),
            0
        );
    }

    #[test]
    fn snappy_is_a_typed_error() {
        let c = BloscCodec::new(BloscCompressor::Snappy, 5, BloscShuffle::Shuffle, 4, 0).unwrap();
        let err = c.encode(vec![1u8; 1024]).unwrap_err();
        assert!(
            matches!(&err, CodecError::EncodeFailed { reason, .. } if reason.contains("snappy")),
            "{err:?}"
        );
    }

    #[test]
    fn config_parsing() {
        let m = serde_json::json!({"typesize": 2, "cname": "zstd", "clevel": 5, "shuffle": "shuffle", "blocksize": 0});
        let map = m.as_object().unwrap();
        let c = BloscCodec::from_config(&Config::new("blosc", map), &DataType::Float16).unwrap();
        assert_eq!(c.to_json()["configuration"], m);
        let bad = serde_json::json!({"cname": "brotli"});
        assert_err!(
            BloscCodec::from_config(
                &Config::new("blosc", bad.as_object().unwrap()),
                &DataType::Int8
            ),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
        let bad = serde_json::json!({"cname": "lz4", "clevel": 10});
        assert_err!(
            BloscCodec::from_config(
                &Config::new("blosc", bad.as_object().unwrap()),
                &DataType::Int8
            ),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
    }
}
