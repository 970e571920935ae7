//! The codec registry: codec name to constructor, for every codec floe implements
//! (zarr-extensions names, including `numcodecs.*`).

use super::*;

/// Builds one codec from its metadata JSON, for chunks of data type `dt`.
/// Returns `Ok(None)` for an unknown codec marked `"must_understand": false` (which
/// the core spec allows implementations to ignore).
///
/// # Errors
/// [`ZarrError::UnsupportedExtension`] (empty path) for unknown codecs;
/// [`ZarrError::InvalidCodec`] for malformed configurations.
pub fn codec_from_json(json: &Value, dt: &DataType) -> ZarrResult<Option<Codec>> {
    let (name, map, must_understand) = name_and_config(json)?;
    let cfg = Config::new(&name, &map);
    let codec = match name.as_str() {
        "bytes" => Codec::ArrayToBytes(Arc::new(bytes::BytesCodec::from_config(&cfg)?)),
        "vlen-utf8" => Codec::ArrayToBytes(Arc::new(vlen_utf8::VlenUtf8Codec::from_config(&cfg)?)),
        "sharding_indexed" => {
            Codec::ArrayToBytes(Arc::new(sharding::ShardingCodec::from_config(&cfg, dt)?))
        }
        "transpose" => Codec::ArrayToArray(Arc::new(transpose::TransposeCodec::from_config(&cfg)?)),
        "gzip" => Codec::BytesToBytes(Arc::new(gzip::GzipCodec::from_config(&cfg)?)),
        "zstd" => Codec::BytesToBytes(Arc::new(zstd::ZstdCodec::from_config(&cfg)?)),
        "blosc" => Codec::BytesToBytes(Arc::new(blosc::BloscCodec::from_config(&cfg, dt)?)),
        "crc32c" => Codec::BytesToBytes(Arc::new(crc32c::Crc32cCodec::from_config(&cfg)?)),
        n if n.starts_with("numcodecs.") => match numcodecs::from_config(&cfg, dt)? {
            Some(c) => c,
            None if !must_understand => return Ok(None),
            None => {
                return Err(ZarrError::UnsupportedExtension {
                    path: String::new(),
                    kind: "codec".into(),
                    name,
                })
            }
        },
        _ if !must_understand => return Ok(None),
        _ => {
            return Err(ZarrError::UnsupportedExtension {
                path: String::new(),
                kind: "codec".into(),
                name,
            })
        }
    };
    Ok(Some(codec))
}
