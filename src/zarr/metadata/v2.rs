//! Translation of Zarr v2 metadata (`.zarray`, `.zgroup`, `.zattrs`; spec
//! `../shared/specs/zarr/v2/v2.0.rst`) into Zarr v3 metadata.
//!
//! The translated array reads the v2 chunks in place:
//! - `dtype` (`<f4`, `>i2`, `|u1`, `|b1`, `<c8`, `<U5`, `|S4`, `|V3`, `|O` with a
//!   `vlen-utf8` filter) → data type + `bytes` codec endianness (or `vlen-utf8`);
//! - `order: "F"` → a leading `transpose` codec with order `[n-1, …, 0]`;
//! - `filters` → `numcodecs.<id>` `bytes -> bytes` codecs after the `bytes` codec
//!   (e.g. `numcodecs.shuffle`), `vlen-utf8` → the `vlen-utf8` codec;
//! - `compressor` → `blosc`, `gzip`, `zstd` where the v3 codec has the same format,
//!   `numcodecs.<id>` otherwise (e.g. `numcodecs.zlib`), as zarr-python names them;
//! - `fill_value` (`null`, numbers, `"NaN"`, `"Infinity"`, `"-Infinity"`, base64 for
//!   bytes) → the v3 fill value (`null` becomes the data type's default);
//! - `dimension_separator` → chunk key encoding `v2` with that separator;
//! - the `_ARRAY_DIMENSIONS` attribute (xarray) → `dimension_names`, removed from
//!   the attributes.

use serde_json::{json, Map, Value};

use crate::zarr::chunk_key_encoding::Separator;
use crate::zarr::codec::bytes::Endian;
use crate::zarr::data_type::DataType;
use crate::zarr::error::{ZarrError, ZarrResult};
use crate::zarr::metadata::{ArrayMetadata, ChunkKeyEncodingKind, GroupMetadata};

fn invalid(reason: impl Into<String>) -> ZarrError {
    ZarrError::InvalidMetadata {
        path: String::new(),
        reason: format!("zarr v2: {}", reason.into()),
    }
}

fn unsupported(kind: &str, name: impl Into<String>) -> ZarrError {
    ZarrError::UnsupportedExtension {
        path: String::new(),
        kind: kind.into(),
        name: name.into(),
    }
}

/// Parses a v2 `dtype` string (numpy array-interface typestr) into a data type and
/// the byte order its `bytes` codec needs (`None` when byte order does not apply).
/// `|O` (object) maps to [`DataType::String`]; the caller checks for a `vlen-utf8`
/// filter.
///
/// # Errors
/// [`ZarrError::UnsupportedExtension`] for unsupported types (datetimes, structured
/// types, other object codecs); [`ZarrError::InvalidMetadata`] for malformed strings.
pub fn parse_v2_dtype(dtype: &str) -> ZarrResult<(DataType, Option<Endian>)> {
    let bad = || invalid(format!("malformed dtype {dtype:?}"));
    let mut chars = dtype.chars();
    let order = chars.next().ok_or_else(bad)?;
    let endian = match order {
        '<' => Some(Endian::Little),
        '>' => Some(Endian::Big),
        '|' => None,
        '=' => Some(Endian::native()),
        _ => return Err(bad()),
    };
    let kind = chars.next().ok_or_else(bad)?;
    let size_str: String = chars.collect();
    if kind == 'O' && size_str.is_empty() {
        return Ok((DataType::String, None));
    }
    let size: usize = size_str.parse().map_err(|_| {
        if kind == 'M' || kind == 'm' {
            unsupported("data type", dtype)
        } else {
            bad()
        }
    })?;
    let dt = match (kind, size) {
        ('b', 1) => DataType::Bool,
        ('i', 1) => DataType::Int8,
        ('i', 2) => DataType::Int16,
        ('i', 4) => DataType::Int32,
        ('i', 8) => DataType::Int64,
        ('u', 1) => DataType::UInt8,
        ('u', 2) => DataType::UInt16,
        ('u', 4) => DataType::UInt32,
        ('u', 8) => DataType::UInt64,
        ('f', 2) => DataType::Float16,
        ('f', 4) => DataType::Float32,
        ('f', 8) => DataType::Float64,
        ('c', 8) => DataType::Complex64,
        ('c', 16) => DataType::Complex128,
        ('U', n) => DataType::FixedLengthUtf32 {
            length_bytes: n * 4,
        },
        ('S', n) => DataType::NullTerminatedBytes { length_bytes: n },
        ('V', n) if n > 0 => DataType::RawBytes { length_bytes: n },
        _ => return Err(unsupported("data type", dtype)),
    };
    let endian = if dt.needs_endian() {
        Some(endian.unwrap_or(Endian::Little))
    } else {
        None
    };
    Ok((dt, endian))
}

/// Converts a v2 fill value into the v3 JSON form for `dt`.
fn translate_fill(fill: &Value, dt: &DataType) -> ZarrResult<Value> {
    let v3 = match (fill, dt) {
        (Value::Null, _) => return dt.fill_value_to_json(&dt.default_fill_value()),
        (Value::Number(n), DataType::Bool) => Value::Bool(n.as_f64().is_some_and(|x| x != 0.0)),
        (Value::Number(n), DataType::Complex64 | DataType::Complex128) => json!([n, 0.0]),
        (Value::Number(n), _) if dt.fixed_size().is_some() && !n.is_f64() => fill.clone(),
        (
            Value::Number(n),
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64,
        ) => {
            // Integral floats (e.g. `0.0`) as some writers produce them.
            match n.as_f64() {
                Some(x) if x.fract() == 0.0 && x >= 0.0 && x <= u64::MAX as f64 => {
                    json!(x as u64)
                }
                Some(x) if x.fract() == 0.0 && x < 0.0 && x >= i64::MIN as f64 => json!(x as i64),
                _ => fill.clone(),
            }
        }
        _ => fill.clone(),
    };
    // Validate and canonicalise through the v3 rules.
    let parsed = dt.fill_value_from_json(&v3)?;
    dt.fill_value_to_json(&parsed)
}

fn codec_id(c: &Value) -> ZarrResult<(String, Map<String, Value>)> {
    let obj = c
        .as_object()
        .ok_or_else(|| invalid(format!("codec {c} must be an object")))?;
    let id = obj
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("codec {c} has no string `id`")))?
        .to_string();
    let mut config = obj.clone();
    config.remove("id");
    Ok((id, config))
}

/// Filters that numcodecs applies to raw bytes (so they follow the `bytes` codec).
const BYTES_FILTERS: &[&str] = &[
    "shuffle",
    "zlib",
    "gzip",
    "zstd",
    "blosc",
    "lz4",
    "bz2",
    "lzma",
    "crc32",
    "crc32c",
    "adler32",
    "fletcher32",
    "jenkins_lookup3",
];

/// Filters that numcodecs applies to the chunk's elements (so they precede the
/// `bytes` codec as `array -> array` codecs).
const ARRAY_FILTERS: &[&str] = &[
    "delta",
    "fixedscaleoffset",
    "quantize",
    "bitround",
    "packbits",
    "astype",
];

/// Translates a v2 compressor into a v3 codec (same-format v3 codec when one exists).
fn translate_compressor(c: &Value, dt: &DataType) -> ZarrResult<Value> {
    let (id, config) = codec_id(c)?;
    let get_i = |k: &str, default: i64| config.get(k).and_then(Value::as_i64).unwrap_or(default);
    Ok(match id.as_str() {
        "blosc" => {
            let typesize = dt.fixed_size().unwrap_or(1).max(1);
            let shuffle =
                crate::zarr::codec::blosc::BloscShuffle::from_v2(get_i("shuffle", 1), typesize)
                    .ok_or_else(|| invalid(format!("blosc shuffle {:?}", config.get("shuffle"))))?;
            json!({"name": "blosc", "configuration": {
                "typesize": typesize,
                "cname": config.get("cname").and_then(Value::as_str).unwrap_or("lz4"),
                "clevel": get_i("clevel", 5),
                "shuffle": shuffle.as_str(),
                "blocksize": get_i("blocksize", 0),
            }})
        }
        "gzip" => json!({"name": "gzip", "configuration": {"level": get_i("level", 1)}}),
        "zstd" => json!({"name": "zstd", "configuration": {
            "level": get_i("level", 0),
            "checksum": config.get("checksum").and_then(Value::as_bool).unwrap_or(false),
        }}),
        _ => json!({"name": format!("numcodecs.{id}"), "configuration": config}),
    })
}

/// The data type an `array -> array` numcodecs filter `codec` encodes chunks of
/// `dt` (shape `chunks`) to.
///
/// # Errors
/// [`ZarrError::InvalidCodec`] for malformed filters or filters that do not apply
/// to `dt`; [`ZarrError::UnsupportedExtension`] for unknown ones.
fn array_filter_output(codec: &Value, dt: &DataType, chunks: &[u64]) -> ZarrResult<DataType> {
    let Some(crate::zarr::codec::Codec::ArrayToArray(c)) =
        crate::zarr::codec::codec_from_json(codec, dt)?
    else {
        return Err(unsupported("codec", codec.to_string()));
    };
    let repr = crate::zarr::codec::ChunkRepr {
        shape: chunks.to_vec(),
        data_type: dt.clone(),
        fill_value: dt.default_fill_value(),
    };
    c.encoded_repr(&repr)
        .map(|r| r.data_type)
        .map_err(|e| ZarrError::InvalidCodec {
            codec: codec.to_string(),
            reason: e.to_string(),
        })
}

/// Translates a v2 `.zarray` document (and optional `.zattrs`) into v3 array
/// metadata that reads the v2 chunks in place (chunk key encoding `v2`).
///
/// # Errors
/// [`ZarrError::InvalidMetadata`] for malformed documents;
/// [`ZarrError::UnsupportedExtension`] for data types, filters or compressors floe
/// cannot decode; [`ZarrError::InvalidFillValue`] for a fill value that does not suit
/// the data type. Path fields are empty (see [`ZarrError::at_path`]).
pub fn translate_v2_array(zarray: &Value, zattrs: Option<&Value>) -> ZarrResult<ArrayMetadata> {
    let obj = zarray
        .as_object()
        .ok_or_else(|| invalid(".zarray must be a JSON object"))?;
    if obj.get("zarr_format").and_then(Value::as_u64) != Some(2) {
        return Err(invalid("`zarr_format` must be 2"));
    }
    let dims = |key: &str| -> ZarrResult<Vec<u64>> {
        obj.get(key)
            .and_then(Value::as_array)
            .ok_or_else(|| invalid(format!("`{key}` must be an array of integers")))?
            .iter()
            .map(|v| {
                v.as_u64()
                    .ok_or_else(|| invalid(format!("`{key}` must hold non-negative integers")))
            })
            .collect()
    };
    let shape = dims("shape")?;
    let chunks = dims("chunks")?;
    if chunks.len() != shape.len() {
        return Err(invalid("`chunks` and `shape` differ in length"));
    }
    let dtype = match obj.get("dtype") {
        Some(Value::String(s)) => s.as_str(),
        Some(Value::Array(_)) => return Err(unsupported("data type", "structured dtype")),
        _ => return Err(invalid("`dtype` must be a string")),
    };
    let (data_type, endian) = parse_v2_dtype(dtype)?;
    let order = obj.get("order").and_then(Value::as_str).unwrap_or("C");
    if order != "C" && order != "F" {
        return Err(invalid(format!(
            "`order` must be \"C\" or \"F\", not {order:?}"
        )));
    }
    let separator = match obj.get("dimension_separator") {
        None | Some(Value::Null) => Separator::Dot,
        Some(Value::String(s)) => Separator::parse(s)?,
        Some(other) => return Err(invalid(format!("bad dimension_separator {other}"))),
    };

    let mut codecs = Vec::new();
    if order == "F" && shape.len() > 1 {
        let order: Vec<usize> = (0..shape.len()).rev().collect();
        codecs.push(json!({"name": "transpose", "configuration": {"order": order}}));
    }
    let filters = match obj.get("filters") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(f)) => f.clone(),
        Some(_) => return Err(invalid("`filters` must be a list or null")),
    };
    let mut object_codec = None;
    let mut bytes_filters = Vec::new();
    let mut encoded_type = data_type.clone();
    for f in &filters {
        let (id, config) = codec_id(f)?;
        if id == "vlen-utf8" {
            if object_codec.is_some() || !bytes_filters.is_empty() {
                return Err(unsupported("codec", "vlen-utf8 after another filter"));
            }
            object_codec = Some(json!({"name": "vlen-utf8", "configuration": {}}));
        } else if ARRAY_FILTERS.contains(&id.as_str()) {
            if object_codec.is_some() || !bytes_filters.is_empty() {
                return Err(unsupported(
                    "codec",
                    format!("numcodecs.{id} after a filter on bytes"),
                ));
            }
            let codec = json!({"name": format!("numcodecs.{id}"), "configuration": config});
            encoded_type = array_filter_output(&codec, &encoded_type, &chunks)?;
            codecs.push(codec);
        } else if BYTES_FILTERS.contains(&id.as_str()) {
            bytes_filters.push(json!({"name": format!("numcodecs.{id}"), "configuration": config}));
        } else {
            return Err(unsupported("codec", format!("numcodecs.{id}")));
        }
    }
    match (&data_type, object_codec) {
        (DataType::String, Some(c)) => codecs.push(c),
        (DataType::String, None) => {
            return Err(unsupported("data type", "|O without a vlen-utf8 filter"))
        }
        (_, Some(_)) => return Err(invalid("vlen-utf8 filter on a non-object dtype")),
        (_, None) => codecs.push(match endian.filter(|_| encoded_type.needs_endian()) {
            Some(Endian::Little) => json!({"name": "bytes", "configuration": {"endian": "little"}}),
            Some(Endian::Big) => json!({"name": "bytes", "configuration": {"endian": "big"}}),
            None if encoded_type.needs_endian() => {
                json!({"name": "bytes", "configuration": {"endian": "little"}})
            }
            None => json!({"name": "bytes"}),
        }),
    }
    codecs.extend(bytes_filters);
    match obj.get("compressor") {
        None | Some(Value::Null) => {}
        Some(c) => codecs.push(translate_compressor(c, &data_type)?),
    }

    let fill_value = translate_fill(obj.get("fill_value").unwrap_or(&Value::Null), &data_type)?;

    let mut attributes = match zattrs {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(invalid(".zattrs must be a JSON object")),
    };
    let mut dimension_names = None;
    if let Some(Value::Array(names)) = attributes.get("_ARRAY_DIMENSIONS") {
        if names.len() == shape.len() && names.iter().all(|n| n.is_string() || n.is_null()) {
            dimension_names = Some(
                names
                    .iter()
                    .map(|n| n.as_str().map(str::to_string))
                    .collect(),
            );
        }
    }
    if dimension_names.is_some() {
        attributes.remove("_ARRAY_DIMENSIONS");
    }

    let doc = json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": data_type.to_json(),
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": ChunkKeyEncodingKind::V2(separator).encoding().to_json(),
        "fill_value": fill_value,
        "codecs": codecs,
        "attributes": attributes,
    });
    let mut meta = ArrayMetadata::from_json(&doc)?;
    meta.dimension_names = dimension_names;
    Ok(meta)
}

/// Translates `.zarray` / `.zattrs` JSON bytes; see [`translate_v2_array`].
///
/// # Errors
/// [`ZarrError::InvalidMetadata`] for invalid JSON; otherwise as
/// [`translate_v2_array`].
pub fn translate_v2_array_bytes(zarray: &[u8], zattrs: Option<&[u8]>) -> ZarrResult<ArrayMetadata> {
    let za: Value = serde_json::from_slice(zarray)
        .map_err(|e| invalid(format!(".zarray: invalid JSON: {e}")))?;
    let attrs: Option<Value> = zattrs
        .map(|b| {
            serde_json::from_slice(b).map_err(|e| invalid(format!(".zattrs: invalid JSON: {e}")))
        })
        .transpose()?;
    translate_v2_array(&za, attrs.as_ref())
}

/// Translates a v2 `.zgroup` document (and optional `.zattrs`) into v3 group
/// metadata.
///
/// # Errors
/// [`ZarrError::InvalidMetadata`] when `zarr_format` is not 2 or `.zattrs` is not
/// an object.
pub fn translate_v2_group(zgroup: &Value, zattrs: Option<&Value>) -> ZarrResult<GroupMetadata> {
    if zgroup.get("zarr_format").and_then(Value::as_u64) != Some(2) {
        return Err(invalid(".zgroup `zarr_format` must be 2"));
    }
    let attributes = match zattrs {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(invalid(".zattrs must be a JSON object")),
    };
    Ok(GroupMetadata::new(attributes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtypes() {
        assert_eq!(
            parse_v2_dtype("<f4").unwrap(),
            (DataType::Float32, Some(Endian::Little))
        );
        assert_eq!(
            parse_v2_dtype(">i2").unwrap(),
            (DataType::Int16, Some(Endian::Big))
        );
        assert_eq!(parse_v2_dtype("|u1").unwrap(), (DataType::UInt8, None));
        assert_eq!(parse_v2_dtype("|b1").unwrap(), (DataType::Bool, None));
        assert_eq!(
            parse_v2_dtype("<c8").unwrap(),
            (DataType::Complex64, Some(Endian::Little))
        );
        assert_eq!(
            parse_v2_dtype(">U5").unwrap(),
            (
                DataType::FixedLengthUtf32 { length_bytes: 20 },
                Some(Endian::Big)
            )
        );
        assert_eq!(
            parse_v2_dtype("|S4").unwrap(),
            (DataType::NullTerminatedBytes { length_bytes: 4 }, None)
        );
        assert_eq!(parse_v2_dtype("|O").unwrap().0, DataType::String);
        assert!(matches!(
            parse_v2_dtype("<M8[ns]"),
            Err(ZarrError::UnsupportedExtension { .. })
        ));
        assert_err!(
            parse_v2_dtype("f4"),
            crate::zarr::ZarrError::InvalidMetadata { .. }
        );
        assert_err!(
            parse_v2_dtype("<f3"),
            crate::zarr::ZarrError::UnsupportedExtension { .. }
        );
    }

    #[test]
    fn zarr_python_v2_array() {
        // As written by zarr-python 3.1 with zarr_format=2 (see tests/python).
        let zarray = json!({
            "shape": [5, 3], "chunks": [2, 2], "dtype": ">i2", "fill_value": 7, "order": "F",
            "filters": [{"id": "shuffle", "elementsize": 4}],
            "dimension_separator": ".", "compressor": {"id": "zlib", "level": 1},
            "zarr_format": 2
        });
        let zattrs = json!({"_ARRAY_DIMENSIONS": ["y", "x"], "units": "m"});
        let m = translate_v2_array(&zarray, Some(&zattrs)).unwrap();
        assert_eq!(m.data_type, DataType::Int16);
        assert_eq!(m.fill_value, json!(7));
        assert_eq!(
            m.chunk_key_encoding,
            ChunkKeyEncodingKind::V2(Separator::Dot)
        );
        assert_eq!(
            m.codecs,
            vec![
                json!({"name": "transpose", "configuration": {"order": [1, 0]}}),
                json!({"name": "bytes", "configuration": {"endian": "big"}}),
                json!({"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}}),
                json!({"name": "numcodecs.zlib", "configuration": {"level": 1}}),
            ]
        );
        assert_eq!(
            m.dimension_names,
            Some(vec![Some("y".into()), Some("x".into())])
        );
        assert_eq!(m.attributes.get("units"), Some(&json!("m")));
        assert!(!m.attributes.contains_key("_ARRAY_DIMENSIONS"));
    }

    #[test]
    fn compressors_and_fill_values() {
        let base = |dtype: &str, fill: Value, compressor: Value| {
            json!({"shape": [4], "chunks": [2], "dtype": dtype, "fill_value": fill,
                   "order": "C", "filters": null, "compressor": compressor, "zarr_format": 2})
        };
        let m = translate_v2_array(
            &base(
                "<f8",
                json!("NaN"),
                json!({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}),
            ),
            None,
        )
        .unwrap();
        assert_eq!(m.fill_value, json!("NaN"));
        assert_eq!(
            m.codecs[1],
            json!({"name": "blosc", "configuration": {"typesize": 8, "cname": "lz4", "clevel": 5, "shuffle": "shuffle", "blocksize": 0}})
        );
        let m = translate_v2_array(
            &base("<f4", json!("-Infinity"), json!({"id": "gzip", "level": 3})),
            None,
        )
        .unwrap();
        assert_eq!(m.fill_value, json!("-Infinity"));
        assert_eq!(
            m.codecs[1],
            json!({"name": "gzip", "configuration": {"level": 3}})
        );
        let m = translate_v2_array(
            &base("<i4", json!(null), json!({"id": "zstd", "level": 0})),
            None,
        )
        .unwrap();
        assert_eq!(m.fill_value, json!(0));
        assert_eq!(
            m.codecs[1],
            json!({"name": "zstd", "configuration": {"level": 0, "checksum": false}})
        );
        let m = translate_v2_array(&base("<i4", json!(3.0), Value::Null), None).unwrap();
        assert_eq!(m.fill_value, json!(3));
        assert_eq!(m.codecs.len(), 1);
        let m = translate_v2_array(&base("|b1", json!(false), Value::Null), None).unwrap();
        assert_eq!(m.fill_value, json!(false));
        assert_eq!(m.codecs[0], json!({"name": "bytes"}));
        let m = translate_v2_array(&base("<U3", json!(""), Value::Null), None).unwrap();
        assert_eq!(m.data_type, DataType::FixedLengthUtf32 { length_bytes: 12 });
        let mut s = base("|O", json!(""), json!({"id": "zstd", "level": 0}));
        s["filters"] = json!([{"id": "vlen-utf8"}]);
        let m = translate_v2_array(&s, None).unwrap();
        assert_eq!(m.data_type, DataType::String);
        assert_eq!(m.codecs[0]["name"], json!("vlen-utf8"));
        // errors
        assert_err!(
            translate_v2_array(&base("|O", json!(""), Value::Null), None),
            crate::zarr::ZarrError::UnsupportedExtension { .. }
        );
        assert_err!(
            translate_v2_array(&base("<i4", json!("x"), Value::Null), None),
            crate::zarr::ZarrError::InvalidFillValue { .. }
        );
        assert_err!(
            translate_v2_array(&base("<i4", json!(0), json!({"id": "zfpy"})), None),
            crate::zarr::ZarrError::UnsupportedExtension { .. }
        );
        let mut f = base("<i4", json!(0), Value::Null);
        f["filters"] = json!([{"id": "categorize", "labels": ["a"], "dtype": "<U1"}]);
        assert!(matches!(
            translate_v2_array(&f, None),
            Err(ZarrError::UnsupportedExtension { .. })
        ));
        // Element filters precede `bytes`, which then serialises their output type.
        f["filters"] = json!([{"id": "delta", "dtype": "<i4", "astype": "|u1"},
                              {"id": "adler32"}]);
        let m = translate_v2_array(&f, None).unwrap();
        assert_eq!(
            m.codecs,
            vec![
                json!({"name": "numcodecs.delta", "configuration": {"dtype": "<i4", "astype": "|u1"}}),
                json!({"name": "bytes"}),
                json!({"name": "numcodecs.adler32", "configuration": {}}),
            ]
        );
        f["filters"] = json!([{"id": "adler32"}, {"id": "delta", "dtype": "<i4"}]);
        assert_err!(
            translate_v2_array(&f, None),
            crate::zarr::ZarrError::UnsupportedExtension { .. }
        );
        f["filters"] = json!([{"id": "delta", "dtype": "<f8"}]);
        assert_err!(
            translate_v2_array(&f, None),
            crate::zarr::ZarrError::InvalidCodec { .. }
        );
        let mut bad = base("<i4", json!(0), Value::Null);
        bad["zarr_format"] = json!(3);
        assert_err!(
            translate_v2_array(&bad, None),
            crate::zarr::ZarrError::InvalidMetadata { .. }
        );
        // 0-d array
        let mut z = base("<i8", json!(5), Value::Null);
        z["shape"] = json!([]);
        z["chunks"] = json!([]);
        let m = translate_v2_array(&z, None).unwrap();
        assert!(m.shape.is_empty());
    }

    #[test]
    fn groups() {
        let g = translate_v2_group(&json!({"zarr_format": 2}), Some(&json!({"a": 1}))).unwrap();
        assert_eq!(g.attributes["a"], json!(1));
        assert_err!(
            translate_v2_group(&json!({"zarr_format": 3}), None),
            crate::zarr::ZarrError::InvalidMetadata { .. }
        );
    }
}
