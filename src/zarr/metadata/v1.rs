//! Translation of Zarr v1 metadata (`../shared/specs/zarr/v1/v1.0.rst`) into Zarr v3
//! metadata. A v1 store is one array: JSON metadata at the key `meta`, attributes at
//! `attrs`, chunks at keys such as `0.0` (the indices joined by `.`, as Zarr v2's
//! default).
//!
//! The translation goes through the Zarr v2 one ([`crate::zarr::metadata::v2`]), as
//! zarr-python 2's `migrate_1to2` does: `compression` and `compression_opts` become
//! the v2 `compressor` — `"blosc"` with `{"cname", "clevel", "shuffle"}` options →
//! `blosc`, `"zlib"` with a level → `numcodecs.zlib`, `"bz2"` with a level →
//! `numcodecs.bz2`, `"none"` or `null` → no compressor — and `order`, `dtype` and
//! `fill_value` mean what they mean in v2. Python's `json` module wrote a NaN fill
//! value as a bare `NaN` (and infinities as `Infinity`, `-Infinity`), which is not
//! JSON; [`parse_v1_json`] accepts them.

use serde_json::{json, Map, Value};

use crate::zarr::error::{ZarrError, ZarrResult};
use crate::zarr::metadata::v2::translate_v2_array;
use crate::zarr::metadata::ArrayMetadata;

/// The key of a v1 array's metadata, relative to the array.
pub const V1_METADATA_KEY: &str = "meta";
/// The key of a v1 array's attributes, relative to the array.
pub const V1_ATTRIBUTES_KEY: &str = "attrs";

fn invalid(key: &str, reason: impl Into<String>) -> ZarrError {
    ZarrError::InvalidMetadata {
        path: String::new(),
        reason: format!("zarr v1 `{key}`: {}", reason.into()),
    }
}

/// Parses v1 JSON as Python's `json` module wrote it: standard JSON plus the bare
/// tokens `NaN`, `Infinity` and `-Infinity`, which become the strings `"NaN"`,
/// `"Infinity"` and `"-Infinity"` (the fill value forms of Zarr v2 and v3).
///
/// # Errors
/// [`ZarrError::InvalidMetadata`] naming `key` for text that is not JSON (or not
/// ASCII/UTF-8).
pub fn parse_v1_json(key: &str, bytes: &[u8]) -> ZarrResult<Value> {
    let text = std::str::from_utf8(bytes).map_err(|e| invalid(key, format!("not UTF-8: {e}")))?;
    let mut out = String::with_capacity(text.len() + 16);
    let (mut in_string, mut escaped) = (false, false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let token = ["-Infinity", "Infinity", "NaN"]
            .into_iter()
            .find(|t| rest.starts_with(t));
        if let Some(t) = token {
            out.push('"');
            out.push_str(t);
            out.push('"');
            rest = &rest[t.len()..];
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    serde_json::from_str(&out).map_err(|e| invalid(key, format!("invalid JSON: {e}")))
}

/// The v2 `compressor` of a v1 `compression` and `compression_opts`.
///
/// # Errors
/// [`ZarrError::UnsupportedExtension`] for compressors other than `blosc`, `zlib`,
/// `bz2` and `none`; [`ZarrError::InvalidMetadata`] for malformed options.
fn compressor(compression: &Value, opts: Option<&Value>) -> ZarrResult<Value> {
    let opts = opts.filter(|v| !v.is_null());
    let level = |default: i64| -> ZarrResult<Value> {
        match opts {
            None => Ok(json!(default)),
            Some(v) if v.is_i64() => Ok(v.clone()),
            Some(v) => Err(invalid(
                V1_METADATA_KEY,
                format!("`compression_opts` {v} must be an integer level"),
            )),
        }
    };
    match compression {
        Value::Null => Ok(Value::Null),
        Value::String(s) => match s.as_str() {
            "none" => Ok(Value::Null),
            "zlib" => Ok(json!({"id": "zlib", "level": level(1)?})),
            "bz2" => Ok(json!({"id": "bz2", "level": level(1)?})),
            "blosc" => {
                let mut c = match opts {
                    None => Map::new(),
                    Some(Value::Object(m)) => m.clone(),
                    Some(v) => {
                        return Err(invalid(
                            V1_METADATA_KEY,
                            format!("blosc `compression_opts` {v} must be an object"),
                        ))
                    }
                };
                if let Some(k) = c
                    .keys()
                    .find(|k| !matches!(k.as_str(), "cname" | "clevel" | "shuffle"))
                {
                    return Err(invalid(
                        V1_METADATA_KEY,
                        format!("unknown blosc option `{k}`"),
                    ));
                }
                // zarr-python 1.x stored `shuffle` as a boolean or 0/1/2.
                if let Some(Value::Bool(b)) = c.get("shuffle") {
                    let v = i64::from(*b);
                    c.insert("shuffle".into(), v.into());
                }
                c.insert("id".into(), "blosc".into());
                Ok(Value::Object(c))
            }
            other => Err(ZarrError::UnsupportedExtension {
                path: String::new(),
                kind: "Zarr v1 compressor".into(),
                name: other.to_string(),
            }),
        },
        other => Err(invalid(
            V1_METADATA_KEY,
            format!("`compression` {other} must be a string"),
        )),
    }
}

/// Translates a v1 `meta` document (and the `attrs` document, `None` when absent)
/// into v3 array metadata that reads the v1 chunks in place (chunk key encoding
/// `v2` with separator `.`).
///
/// # Errors
/// [`ZarrError::InvalidMetadata`] for a document that is not an object, a
/// `zarr_format` other than 1, a missing required key or malformed values;
/// [`ZarrError::UnsupportedExtension`] for compressors and data types floe cannot
/// read (structured types); as [`translate_v2_array`] otherwise. Path fields are
/// empty (see [`ZarrError::at_path`]).
pub fn translate_v1_array(meta: &Value, attrs: Option<&Value>) -> ZarrResult<ArrayMetadata> {
    let obj = meta
        .as_object()
        .ok_or_else(|| invalid(V1_METADATA_KEY, "must be a JSON object"))?;
    match obj.get("zarr_format") {
        Some(v) if v.as_u64() == Some(1) => {}
        Some(v) => {
            return Err(invalid(
                V1_METADATA_KEY,
                format!("`zarr_format` is {v}, not 1"),
            ))
        }
        None => return Err(invalid(V1_METADATA_KEY, "`zarr_format` is missing")),
    }
    for key in [
        "shape",
        "chunks",
        "dtype",
        "compression",
        "fill_value",
        "order",
    ] {
        if !obj.contains_key(key) {
            return Err(invalid(V1_METADATA_KEY, format!("`{key}` is missing")));
        }
    }
    let compressor = compressor(&obj["compression"], obj.get("compression_opts"))?;
    if let Some(Value::Array(dims)) = obj.get("shape") {
        if dims.is_empty() {
            return Err(ZarrError::UnsupportedExtension {
                path: String::new(),
                kind: "Zarr v1 array".into(),
                name: "zero-dimensional".into(),
            });
        }
    }
    let v2 = json!({
        "zarr_format": 2,
        "shape": obj["shape"],
        "chunks": obj["chunks"],
        "dtype": obj["dtype"],
        "compressor": compressor,
        "fill_value": obj["fill_value"],
        "order": obj["order"],
        "filters": null,
    });
    let attrs = match attrs {
        None | Some(Value::Null) => None,
        Some(a @ Value::Object(_)) => Some(a),
        Some(_) => return Err(invalid(V1_ATTRIBUTES_KEY, "must be a JSON object")),
    };
    translate_v2_array(&v2, attrs).map_err(|e| match e {
        ZarrError::InvalidMetadata { path, reason } => ZarrError::InvalidMetadata {
            path,
            reason: reason.replacen("zarr v2", "zarr v1 `meta`", 1),
        },
        other => other,
    })
}

/// Translates the bytes of the `meta` and `attrs` keys; see [`translate_v1_array`]
/// and [`parse_v1_json`].
///
/// # Errors
/// As [`parse_v1_json`] and [`translate_v1_array`].
pub fn translate_v1_array_bytes(meta: &[u8], attrs: Option<&[u8]>) -> ZarrResult<ArrayMetadata> {
    let m = parse_v1_json(V1_METADATA_KEY, meta)?;
    let a = attrs
        .map(|b| parse_v1_json(V1_ATTRIBUTES_KEY, b))
        .transpose()?;
    translate_v1_array(&m, a.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::data_type::DataType;

    fn meta(compression: &str, opts: Value, dtype: &str, fill: &str, order: &str) -> Vec<u8> {
        format!(
            r#"{{"chunks": [10, 10], "compression": "{compression}", "compression_opts": {opts},
                "dtype": "{dtype}", "fill_value": {fill}, "order": "{order}",
                "shape": [20, 25], "zarr_format": 1}}"#
        )
        .into_bytes()
    }

    #[test]
    fn spec_examples_and_compressors() {
        let blosc = json!({"clevel": 5, "cname": "lz4", "shuffle": 1});
        let m = translate_v1_array_bytes(&meta("blosc", blosc, "<f8", "NaN", "C"), Some(b"{}"))
            .unwrap();
        assert_eq!(m.data_type, DataType::Float64);
        assert_eq!(m.shape, vec![20, 25]);
        assert_eq!(m.chunk_shape, vec![10, 10]);
        assert_eq!(m.codecs[1]["name"], "blosc");
        assert_eq!(m.codecs[1]["configuration"]["cname"], "lz4");
        assert_eq!(m.codecs[1]["configuration"]["shuffle"], "shuffle");
        assert_eq!(m.fill_value, json!("NaN"));

        let attrs = br#"{"foo": 42, "bar": "apples", "baz": [1, 2, 3, 4]}"#;
        let m = translate_v1_array_bytes(&meta("zlib", json!(1), "<i4", "42", "F"), Some(attrs))
            .unwrap();
        assert_eq!(m.codecs[0]["name"], "transpose");
        assert_eq!(
            m.codecs[2],
            json!({"name": "numcodecs.zlib", "configuration": {"level": 1}})
        );
        assert_eq!(m.attributes["bar"], "apples");

        let m = translate_v1_array_bytes(&meta("bz2", json!(9), ">u2", "0", "C"), None).unwrap();
        assert_eq!(m.codecs[0]["configuration"]["endian"], "big");
        assert_eq!(
            m.codecs[1],
            json!({"name": "numcodecs.bz2", "configuration": {"level": 9}})
        );
        let m = translate_v1_array_bytes(&meta("none", Value::Null, "|b1", "false", "C"), None)
            .unwrap();
        assert_eq!(m.codecs.len(), 1);
        let m = translate_v1_array_bytes(&meta("none", Value::Null, "<f4", "-Infinity", "C"), None)
            .unwrap();
        assert_eq!(m.fill_value, json!("-Infinity"));
    }

    #[test]
    fn bad_metadata_is_typed() {
        assert_err!(
            translate_v1_array_bytes(&meta("lzf", json!(1), "<i4", "0", "C"), None),
            ZarrError::UnsupportedExtension { .. }
        );
        let two = String::from_utf8(meta("zlib", json!(1), "<i4", "0", "C"))
            .unwrap()
            .replace("\"zarr_format\": 1", "\"zarr_format\": 2");
        let err = translate_v1_array_bytes(two.as_bytes(), None).unwrap_err();
        assert!(
            matches!(&err, ZarrError::InvalidMetadata { reason, .. } if reason.contains("`meta`") && reason.contains("not 1")),
            "{err}"
        );
        assert_err!(
            translate_v1_array_bytes(b"{\"zarr_format\": 1}", None),
            ZarrError::InvalidMetadata { .. }
        );
        assert_err!(
            translate_v1_array_bytes(b"not json", None),
            ZarrError::InvalidMetadata { .. }
        );
        assert_err!(
            translate_v1_array_bytes(&meta("zlib", json!("x"), "<i4", "0", "C"), None),
            ZarrError::InvalidMetadata { .. }
        );
        assert_err!(
            translate_v1_array_bytes(&meta("zlib", json!(1), "<i4", "0", "X"), None),
            ZarrError::InvalidMetadata { .. }
        );
        assert_err!(
            translate_v1_array_bytes(&meta("zlib", json!(1), "<i4", "0", "C"), Some(b"[1]")),
            ZarrError::InvalidMetadata { .. }
        );
        // NaN inside a string stays as it is.
        let v = parse_v1_json(
            "attrs",
            br#"{"a": "NaN \" NaN", "b": NaN, "c": [Infinity]}"#,
        )
        .unwrap();
        assert_eq!(v, json!({"a": "NaN \" NaN", "b": "NaN", "c": ["Infinity"]}));
    }
}
