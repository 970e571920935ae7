//! Zarr v3 metadata documents (`zarr.json`) for arrays and groups (core spec,
//! section "Metadata"), and translation of Zarr v2 ([`v2`]) and Zarr v1 ([`v1`])
//! metadata.
//!
//! Parsing validates the whole document (data type, fill value, chunk grid, chunk
//! key encoding, codecs) so an opened array can always be read. Unknown top-level
//! members and storage transformers are rejected unless they are objects with
//! `"must_understand": false` (core spec, "Extension definition"); accepted unknown
//! members are kept and written back unchanged, as are all attributes.

pub mod v1;
pub mod v2;

use serde_json::{Map, Value};

use crate::zarr::chunk_grid::ChunkGridMetadata;
use crate::zarr::chunk_key_encoding::{
    chunk_key_encoding_from_json, ChunkKeyEncoding, DefaultChunkKeyEncoding, Separator,
    V2ChunkKeyEncoding,
};
use crate::zarr::codec::{ChunkRepr, CodecChain};
use crate::zarr::data_type::{DataType, FillValue};
use crate::zarr::error::{ZarrError, ZarrResult};

/// The chunk key encoding of an array (`default` or `v2`, with its separator).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChunkKeyEncodingKind {
    /// `default`: `c/0/1` (or `c.0.1`).
    Default(Separator),
    /// `v2`: `0.1` (or `0/1`).
    V2(Separator),
}

impl ChunkKeyEncodingKind {
    /// The encoding object.
    pub fn encoding(&self) -> Box<dyn ChunkKeyEncoding> {
        match *self {
            ChunkKeyEncodingKind::Default(separator) => {
                Box::new(DefaultChunkKeyEncoding { separator })
            }
            ChunkKeyEncodingKind::V2(separator) => Box::new(V2ChunkKeyEncoding { separator }),
        }
    }

    fn from_json(json: &Value) -> ZarrResult<Self> {
        let enc = chunk_key_encoding_from_json(json)?;
        // Re-derive the kind from the canonical JSON of the parsed encoding.
        let canon = enc.to_json();
        let sep = canon["configuration"]["separator"]
            .as_str()
            .map(Separator::parse)
            .transpose()?
            .unwrap_or(Separator::Slash);
        Ok(match canon["name"].as_str() {
            Some("v2") => ChunkKeyEncodingKind::V2(sep),
            _ => ChunkKeyEncodingKind::Default(sep),
        })
    }
}

fn invalid(reason: impl Into<String>) -> ZarrError {
    ZarrError::InvalidMetadata {
        path: String::new(),
        reason: reason.into(),
    }
}

/// Whether `v` is an extension object that implementations may ignore.
fn ignorable(v: &Value) -> bool {
    v.get("must_understand") == Some(&Value::Bool(false))
}

/// The metadata of a Zarr v3 array (`zarr.json` with `"node_type": "array"`).
#[derive(Clone, Debug, PartialEq)]
pub struct ArrayMetadata {
    /// Array shape in elements.
    pub shape: Vec<u64>,
    /// Element data type.
    pub data_type: DataType,
    /// Chunk shape of the `regular` chunk grid.
    pub chunk_shape: Vec<u64>,
    /// Chunk key encoding.
    pub chunk_key_encoding: ChunkKeyEncodingKind,
    /// The fill value as it appears in the JSON document (see
    /// [`ArrayMetadata::fill_value`] for the parsed value).
    pub fill_value: Value,
    /// The `codecs` list.
    pub codecs: Vec<Value>,
    /// User attributes.
    pub attributes: Map<String, Value>,
    /// Dimension names (`null` entries for unnamed dimensions).
    pub dimension_names: Option<Vec<Option<String>>>,
    /// Storage transformers; only ones marked `"must_understand": false` are
    /// accepted (and ignored).
    pub storage_transformers: Vec<Value>,
    /// Unknown top-level members marked `"must_understand": false`, kept verbatim.
    pub extra: Map<String, Value>,
}

impl ArrayMetadata {
    /// Parses and validates an array `zarr.json` document.
    ///
    /// # Errors
    /// [`ZarrError::InvalidMetadata`] for malformed documents (wrong `zarr_format`
    /// or `node_type`, bad shape, dimension mismatch, bad dimension names);
    /// [`ZarrError::InvalidDataType`], [`ZarrError::InvalidFillValue`],
    /// [`ZarrError::InvalidCodec`] for bad members; [`ZarrError::UnsupportedExtension`]
    /// for unknown extensions that must be understood, and (kind `chunk grid`, name
    /// `rectilinear`) for a valid `rectilinear` chunk grid, which this type (a regular
    /// `chunk_shape`) and floe's array layer do not represent; a malformed rectilinear
    /// grid is [`ZarrError::InvalidMetadata`] (see
    /// [`crate::zarr::chunk_grid::RectilinearChunkGrid::from_json`]). Path fields are
    /// empty: callers that know the node path use [`ZarrError::at_path`].
    pub fn from_json(json: &Value) -> ZarrResult<Self> {
        let obj = json
            .as_object()
            .ok_or_else(|| invalid("metadata document must be a JSON object"))?;
        check_format_and_type(obj, "array")?;
        let shape = obj
            .get("shape")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid("`shape` must be an array of integers"))?
            .iter()
            .map(|v| {
                v.as_u64()
                    .ok_or_else(|| invalid("`shape` must hold non-negative integers"))
            })
            .collect::<ZarrResult<Vec<u64>>>()?;
        let data_type = DataType::from_json(
            obj.get("data_type")
                .ok_or_else(|| invalid("missing `data_type`"))?,
        )?;
        let grid = match ChunkGridMetadata::from_json(
            obj.get("chunk_grid")
                .ok_or_else(|| invalid("missing `chunk_grid`"))?,
            &shape,
        )? {
            ChunkGridMetadata::Regular(grid) => grid,
            // A valid rectilinear grid, which floe's array layer does not read or
            // write (zarr-python does, on a floe store): refused by name rather than
            // computing regions of a grid it does not implement.
            ChunkGridMetadata::Rectilinear(_) => {
                return Err(ZarrError::UnsupportedExtension {
                    path: String::new(),
                    kind: "chunk grid".into(),
                    name: "rectilinear".into(),
                })
            }
        };
        let chunk_key_encoding = ChunkKeyEncodingKind::from_json(
            obj.get("chunk_key_encoding")
                .ok_or_else(|| invalid("missing `chunk_key_encoding`"))?,
        )?;
        let fill_value = obj
            .get("fill_value")
            .cloned()
            .ok_or_else(|| invalid("missing `fill_value`"))?;
        let fill = data_type.fill_value_from_json(&fill_value)?;
        let codecs = obj
            .get("codecs")
            .and_then(Value::as_array)
            .cloned()
            .ok_or_else(|| invalid("`codecs` must be a list"))?;
        let repr = ChunkRepr {
            shape: grid.chunk_shape().to_vec(),
            data_type: data_type.clone(),
            fill_value: fill,
        };
        CodecChain::from_json(&codecs, &repr)?;
        let attributes = match obj.get("attributes") {
            None => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(invalid("`attributes` must be an object")),
        };
        let dimension_names = match obj.get("dimension_names") {
            None | Some(Value::Null) => None,
            Some(Value::Array(names)) => {
                if names.len() != shape.len() {
                    return Err(invalid(format!(
                        "`dimension_names` has {} entries for {} dimensions",
                        names.len(),
                        shape.len()
                    )));
                }
                Some(
                    names
                        .iter()
                        .map(|n| match n {
                            Value::Null => Ok(None),
                            Value::String(s) => Ok(Some(s.clone())),
                            _ => Err(invalid("`dimension_names` entries must be strings or null")),
                        })
                        .collect::<ZarrResult<Vec<_>>>()?,
                )
            }
            Some(_) => return Err(invalid("`dimension_names` must be a list")),
        };
        let storage_transformers = match obj.get("storage_transformers") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(list)) => {
                for t in list {
                    if !ignorable(t) {
                        let name = t
                            .get("name")
                            .and_then(Value::as_str)
                            .or_else(|| t.as_str())
                            .unwrap_or("<unnamed>");
                        return Err(ZarrError::UnsupportedExtension {
                            path: String::new(),
                            kind: "storage transformer".into(),
                            name: name.to_string(),
                        });
                    }
                }
                list.clone()
            }
            Some(_) => return Err(invalid("`storage_transformers` must be a list")),
        };
        let mut extra = Map::new();
        for (k, v) in obj {
            if matches!(
                k.as_str(),
                "zarr_format"
                    | "node_type"
                    | "shape"
                    | "data_type"
                    | "chunk_grid"
                    | "chunk_key_encoding"
                    | "fill_value"
                    | "codecs"
                    | "attributes"
                    | "dimension_names"
                    | "storage_transformers"
            ) {
                continue;
            }
            if !ignorable(v) {
                return Err(ZarrError::UnsupportedExtension {
                    path: String::new(),
                    kind: "metadata field".into(),
                    name: k.clone(),
                });
            }
            extra.insert(k.clone(), v.clone());
        }
        Ok(ArrayMetadata {
            shape,
            data_type,
            chunk_shape: grid.chunk_shape().to_vec(),
            chunk_key_encoding,
            fill_value,
            codecs,
            attributes,
            dimension_names,
            storage_transformers,
            extra,
        })
    }

    /// Parses `zarr.json` bytes.
    ///
    /// # Errors
    /// [`ZarrError::InvalidMetadata`] for invalid JSON; otherwise as
    /// [`ArrayMetadata::from_json`].
    pub fn from_bytes(bytes: &[u8]) -> ZarrResult<Self> {
        let v: Value =
            serde_json::from_slice(bytes).map_err(|e| invalid(format!("invalid JSON: {e}")))?;
        Self::from_json(&v)
    }

    /// The JSON document (members in the order of the core spec's example).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("zarr_format".into(), Value::from(3));
        m.insert("node_type".into(), Value::from("array"));
        m.insert("shape".into(), Value::from(self.shape.clone()));
        m.insert("data_type".into(), self.data_type.to_json());
        m.insert(
            "chunk_grid".into(),
            serde_json::json!({"name": "regular", "configuration": {"chunk_shape": self.chunk_shape}}),
        );
        m.insert(
            "chunk_key_encoding".into(),
            self.chunk_key_encoding.encoding().to_json(),
        );
        m.insert("fill_value".into(), self.fill_value.clone());
        m.insert("codecs".into(), Value::Array(self.codecs.clone()));
        m.insert("attributes".into(), Value::Object(self.attributes.clone()));
        if let Some(names) = &self.dimension_names {
            m.insert(
                "dimension_names".into(),
                Value::Array(
                    names
                        .iter()
                        .map(|n| n.clone().map_or(Value::Null, Value::String))
                        .collect(),
                ),
            );
        }
        m.insert(
            "storage_transformers".into(),
            Value::Array(self.storage_transformers.clone()),
        );
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m)
    }

    /// The document as pretty-printed JSON bytes (2-space indent, as zarr-python).
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(&self.to_json()).unwrap_or_default()
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The parsed fill value.
    ///
    /// # Errors
    /// [`ZarrError::InvalidFillValue`] when `fill_value` does not suit `data_type`.
    pub fn parsed_fill_value(&self) -> ZarrResult<FillValue> {
        self.data_type.fill_value_from_json(&self.fill_value)
    }

    /// The decoded representation of one chunk.
    ///
    /// # Errors
    /// As [`ArrayMetadata::parsed_fill_value`].
    pub fn chunk_repr(&self) -> ZarrResult<ChunkRepr> {
        Ok(ChunkRepr {
            shape: self.chunk_shape.clone(),
            data_type: self.data_type.clone(),
            fill_value: self.parsed_fill_value()?,
        })
    }

    /// The codec chain for this array's chunks.
    ///
    /// # Errors
    /// As [`CodecChain::from_json`].
    pub fn codec_chain(&self) -> ZarrResult<CodecChain> {
        CodecChain::from_json(&self.codecs, &self.chunk_repr()?)
    }
}

fn check_format_and_type(obj: &Map<String, Value>, expected: &str) -> ZarrResult<()> {
    match obj.get("zarr_format") {
        Some(v) if v.as_u64() == Some(3) => {}
        Some(v) => return Err(invalid(format!("`zarr_format` must be 3, not {v}"))),
        None => return Err(invalid("missing `zarr_format`")),
    }
    match obj.get("node_type").and_then(Value::as_str) {
        Some(t) if t == expected => Ok(()),
        Some(t) => Err(invalid(format!(
            "`node_type` is {t:?}, expected {expected:?}"
        ))),
        None => Err(invalid("missing string member `node_type`")),
    }
}

/// The metadata of a Zarr v3 group (`zarr.json` with `"node_type": "group"`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupMetadata {
    /// User attributes.
    pub attributes: Map<String, Value>,
    /// Unknown members marked `"must_understand": false` (e.g. zarr-python's
    /// `consolidated_metadata`), kept verbatim.
    pub extra: Map<String, Value>,
}

impl GroupMetadata {
    /// A group with the given attributes.
    pub fn new(attributes: Map<String, Value>) -> Self {
        GroupMetadata {
            attributes,
            extra: Map::new(),
        }
    }

    /// Parses and validates a group `zarr.json` document.
    ///
    /// # Errors
    /// [`ZarrError::InvalidMetadata`] for malformed documents;
    /// [`ZarrError::UnsupportedExtension`] for unknown members that must be
    /// understood. (`"consolidated_metadata": null`, written by zarr-python, is
    /// accepted.)
    pub fn from_json(json: &Value) -> ZarrResult<Self> {
        let obj = json
            .as_object()
            .ok_or_else(|| invalid("metadata document must be a JSON object"))?;
        check_format_and_type(obj, "group")?;
        let attributes = match obj.get("attributes") {
            None => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(invalid("`attributes` must be an object")),
        };
        let mut extra = Map::new();
        for (k, v) in obj {
            match k.as_str() {
                "zarr_format" | "node_type" | "attributes" => {}
                "consolidated_metadata" if v.is_null() => {
                    extra.insert(k.clone(), v.clone());
                }
                _ if ignorable(v) => {
                    extra.insert(k.clone(), v.clone());
                }
                _ => {
                    return Err(ZarrError::UnsupportedExtension {
                        path: String::new(),
                        kind: "metadata field".into(),
                        name: k.clone(),
                    })
                }
            }
        }
        Ok(GroupMetadata { attributes, extra })
    }

    /// The JSON document.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("zarr_format".into(), Value::from(3));
        m.insert("node_type".into(), Value::from("group"));
        m.insert("attributes".into(), Value::Object(self.attributes.clone()));
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m)
    }

    /// The document as pretty-printed JSON bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(&self.to_json()).unwrap_or_default()
    }
}

/// The metadata of an array or a group.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum NodeMetadata {
    /// An array.
    Array(ArrayMetadata),
    /// A group.
    Group(GroupMetadata),
}

impl NodeMetadata {
    /// Parses a `zarr.json` document, dispatching on `node_type`.
    ///
    /// # Errors
    /// As [`ArrayMetadata::from_json`] / [`GroupMetadata::from_json`].
    pub fn from_json(json: &Value) -> ZarrResult<Self> {
        match json.get("node_type").and_then(Value::as_str) {
            Some("array") => ArrayMetadata::from_json(json).map(NodeMetadata::Array),
            Some("group") => GroupMetadata::from_json(json).map(NodeMetadata::Group),
            Some(other) => Err(invalid(format!("unknown node_type {other:?}"))),
            None => Err(invalid("missing string member `node_type`")),
        }
    }

    /// Parses `zarr.json` bytes.
    ///
    /// # Errors
    /// [`ZarrError::InvalidMetadata`] for invalid JSON; otherwise as
    /// [`NodeMetadata::from_json`].
    pub fn from_bytes(bytes: &[u8]) -> ZarrResult<Self> {
        let v: Value =
            serde_json::from_slice(bytes).map_err(|e| invalid(format!("invalid JSON: {e}")))?;
        Self::from_json(&v)
    }

    /// The JSON document.
    pub fn to_json(&self) -> Value {
        match self {
            NodeMetadata::Array(a) => a.to_json(),
            NodeMetadata::Group(g) => g.to_json(),
        }
    }

    /// `"array"` or `"group"`.
    pub fn node_type(&self) -> &'static str {
        match self {
            NodeMetadata::Array(_) => "array",
            NodeMetadata::Group(_) => "group",
        }
    }

    /// The node's attributes.
    pub fn attributes(&self) -> &Map<String, Value> {
        match self {
            NodeMetadata::Array(a) => &a.attributes,
            NodeMetadata::Group(g) => &g.attributes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec_example() -> Value {
        json!({
            "zarr_format": 3,
            "node_type": "array",
            "shape": [10000, 1000],
            "dimension_names": ["rows", "columns"],
            "data_type": "float64",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1000, 100]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "fill_value": "NaN",
            "attributes": {"foo": 42, "bar": "apples", "baz": [1, 2, 3, 4]}
        })
    }

    #[test]
    fn parses_spec_example_and_roundtrips() {
        let m = ArrayMetadata::from_json(&spec_example()).unwrap();
        assert_eq!(m.shape, vec![10000, 1000]);
        assert_eq!(m.chunk_shape, vec![1000, 100]);
        assert_eq!(m.data_type, DataType::Float64);
        assert_eq!(
            m.dimension_names,
            Some(vec![Some("rows".into()), Some("columns".into())])
        );
        assert!(f64::from_ne_bytes(
            m.parsed_fill_value()
                .unwrap()
                .as_bytes()
                .try_into()
                .unwrap()
        )
        .is_nan());
        let again = ArrayMetadata::from_json(&m.to_json()).unwrap();
        assert_eq!(again, m);
        // every member of the example survives
        let out = m.to_json();
        for (k, v) in spec_example().as_object().unwrap() {
            assert_eq!(&out[k], v, "member {k}");
        }
    }

    #[test]
    fn fill_value_forms_in_documents() {
        for (dt, fill) in [
            (json!("float32"), json!("Infinity")),
            (json!("float32"), json!("-Infinity")),
            (json!("float32"), json!("0x7fc00000")),
            (json!("float16"), json!(1.5)),
            (json!("complex128"), json!([1.0, "NaN"])),
            (json!("r16"), json!([0, 255])),
            (json!("int64"), json!(-5)),
            (json!("bool"), json!(true)),
            (json!("string"), json!("")),
        ] {
            let mut doc = spec_example();
            doc["data_type"] = dt.clone();
            doc["fill_value"] = fill.clone();
            if dt == json!("string") {
                doc["codecs"] = json!([{"name": "vlen-utf8"}]);
            }
            if dt == json!("r16") {
                doc["codecs"] = json!([{"name": "bytes"}]);
            }
            let m = ArrayMetadata::from_json(&doc).unwrap_or_else(|e| panic!("{dt} {fill}: {e}"));
            assert_eq!(m.to_json()["fill_value"], fill);
        }
    }

    #[test]
    fn rejects_bad_documents() {
        type Mutation = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(&str, Mutation)> = vec![
            ("format", Box::new(|d| d["zarr_format"] = json!(2))),
            ("node type", Box::new(|d| d["node_type"] = json!("group"))),
            ("shape", Box::new(|d| d["shape"] = json!([-1, 3]))),
            ("ndim", Box::new(|d| d["shape"] = json!([10]))),
            ("fill", Box::new(|d| d["fill_value"] = json!("nan"))),
            ("fill null", Box::new(|d| d["fill_value"] = json!(null))),
            ("codecs", Box::new(|d| d["codecs"] = json!([]))),
            (
                "grid",
                Box::new(|d| d["chunk_grid"] = json!({"name": "rectilinear", "configuration": {}})),
            ),
            (
                "dimnames",
                Box::new(|d| d["dimension_names"] = json!(["x"])),
            ),
            ("attrs", Box::new(|d| d["attributes"] = json!([1]))),
            (
                "transformer",
                Box::new(|d| d["storage_transformers"] = json!([{"name": "sharding"}])),
            ),
            (
                "unknown field",
                Box::new(|d| d["foo"] = json!({"name": "x"})),
            ),
            ("unknown field scalar", Box::new(|d| d["foo"] = json!(1))),
            ("dtype", Box::new(|d| d["data_type"] = json!("float8"))),
        ];
        for (name, f) in cases {
            let mut d = spec_example();
            f(&mut d);
            let e = ArrayMetadata::from_json(&d).map(|_| ()).unwrap_err();
            assert!(
                matches!(
                    e,
                    ZarrError::InvalidMetadata { .. }
                        | ZarrError::InvalidDataType { .. }
                        | ZarrError::InvalidFillValue { .. }
                        | ZarrError::InvalidCodec { .. }
                        | ZarrError::UnsupportedExtension { .. }
                ),
                "{name}: {e:?}"
            );
        }
        assert!(matches!(
            ArrayMetadata::from_bytes(b"{not json"),
            Err(ZarrError::InvalidMetadata { .. })
        ));
    }

    #[test]
    fn keeps_ignorable_extensions() {
        let mut d = spec_example();
        d["storage_transformers"] = json!([]);
        d["my_ext"] = json!({"must_understand": false, "x": 1});
        let m = ArrayMetadata::from_json(&d).unwrap();
        assert_eq!(
            m.to_json()["my_ext"],
            json!({"must_understand": false, "x": 1})
        );
        d["storage_transformers"] = json!([{"name": "foo", "must_understand": false}]);
        assert!(ArrayMetadata::from_json(&d).is_ok());
    }

    #[test]
    fn group_documents() {
        let g = GroupMetadata::from_json(&json!({
            "zarr_format": 3, "node_type": "group", "attributes": {"a": 1},
            "consolidated_metadata": null
        }))
        .unwrap();
        assert_eq!(g.attributes["a"], json!(1));
        assert_eq!(GroupMetadata::from_json(&g.to_json()).unwrap(), g);
        assert_err!(
            GroupMetadata::from_json(&json!({"zarr_format": 3, "node_type": "group", "x": 1})),
            ZarrError::UnsupportedExtension { .. }
        );
        assert_err!(
            GroupMetadata::from_json(&json!({"zarr_format": 3})),
            crate::zarr::ZarrError::InvalidMetadata { .. }
        );
        let n = NodeMetadata::from_json(&json!({"zarr_format": 3, "node_type": "group"})).unwrap();
        assert_eq!(n.node_type(), "group");
    }

    #[test]
    fn a_rectilinear_grid_is_refused_by_name_once_valid() {
        let doc = json!({
            "zarr_format": 3, "node_type": "array", "shape": [3, 7], "data_type": "int32",
            "chunk_grid": {"name": "rectilinear",
                           "configuration": {"kind": "inline", "chunk_shapes": [[1, 2], [[3, 2], 1]]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]
        });
        assert!(matches!(
            ArrayMetadata::from_json(&doc),
            Err(ZarrError::UnsupportedExtension { kind, name, .. })
                if kind == "chunk grid" && name == "rectilinear"
        ));
        let mut short = doc.clone();
        short["chunk_grid"]["configuration"]["chunk_shapes"] = json!([[1, 1], [[3, 2], 1]]);
        assert_err!(
            ArrayMetadata::from_json(&short),
            ZarrError::InvalidMetadata { .. }
        );
    }
}
