//! [`ArrayBuilder`]: the metadata of a new array, and creating it in a store.

use super::*;

/// Builds the metadata of a new array and creates it in a store.
///
/// ```no_run
/// # async fn f(store: std::sync::Arc<dyn floe::zarr::Store>) -> floe::zarr::ZarrResult<()> {
/// use floe::zarr::{ArrayBuilder, ArraySubset, DataType};
/// let array = ArrayBuilder::new(vec![100, 100], vec![10, 10], DataType::Float32)
///     .fill_value(serde_json::json!("NaN"))
///     .dimension_names(vec![Some("y".into()), Some("x".into())])
///     .create(store, "group/temperature")
///     .await?;
/// array.write_region(&ArraySubset::new(vec![0, 0], vec![2, 2]), &[1.0f32, 2.0, 3.0, 4.0]).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ArrayBuilder {
    shape: Vec<u64>,
    chunk_shape: Vec<u64>,
    data_type: DataType,
    fill_value: Option<Value>,
    codecs: Option<Vec<Value>>,
    chunk_key_encoding: ChunkKeyEncodingKind,
    dimension_names: Option<Vec<Option<String>>>,
    attributes: Map<String, Value>,
    overwrite: bool,
    options: ArrayOptions,
}

impl ArrayBuilder {
    /// An array of `shape` elements in chunks of `chunk_shape` (regular grid), with
    /// the data type's default fill value, default chunk key encoding (`/`) and
    /// default codecs (`bytes` little-endian + `zstd` level 0, or `vlen-utf8` +
    /// `zstd` for strings — as zarr-python).
    pub fn new(shape: Vec<u64>, chunk_shape: Vec<u64>, data_type: DataType) -> Self {
        ArrayBuilder {
            shape,
            chunk_shape,
            data_type,
            fill_value: None,
            codecs: None,
            chunk_key_encoding: ChunkKeyEncodingKind::Default(Separator::Slash),
            dimension_names: None,
            attributes: Map::new(),
            overwrite: false,
            options: ArrayOptions::default(),
        }
    }

    /// The fill value in its JSON form (`0`, `"NaN"`, `[1, 0]`, `"0x7fc00000"`, ...).
    pub fn fill_value(mut self, fill: Value) -> Self {
        self.fill_value = Some(fill);
        self
    }

    /// The fill value as an element of `T` (must match the data type at build time).
    ///
    /// # Errors
    /// [`ZarrError::ElementType`] / [`ZarrError::InvalidValue`].
    pub fn fill_value_of<T: Element>(mut self, value: T) -> ZarrResult<Self> {
        if !T::matches(&self.data_type) {
            return Err(ZarrError::ElementType {
                path: String::new(),
                element: T::RUST_TYPE,
                data_type: self.data_type.to_string(),
            });
        }
        let fill = match T::to_array_bytes(&[value], &self.data_type)? {
            ArrayBytes::Fixed(b) => FillValue::Bytes(b),
            ArrayBytes::Strings(mut s) => FillValue::String(s.pop().unwrap_or_default()),
        };
        self.fill_value = Some(self.data_type.fill_value_to_json(&fill)?);
        Ok(self)
    }

    /// The `codecs` list in its JSON form (see [`crate::zarr::codec`]).
    pub fn codecs(mut self, codecs: Vec<Value>) -> Self {
        self.codecs = Some(codecs);
        self
    }

    /// The chunk key encoding.
    pub fn chunk_key_encoding(mut self, encoding: ChunkKeyEncodingKind) -> Self {
        self.chunk_key_encoding = encoding;
        self
    }

    /// Dimension names (one per dimension; `None` for unnamed).
    pub fn dimension_names(mut self, names: Vec<Option<String>>) -> Self {
        self.dimension_names = Some(names);
        self
    }

    /// User attributes.
    pub fn attributes(mut self, attributes: Map<String, Value>) -> Self {
        self.attributes = attributes;
        self
    }

    /// Replace an existing node at the path (erasing everything under it) instead of
    /// failing.
    pub fn overwrite(mut self, overwrite: bool) -> Self {
        self.overwrite = overwrite;
        self
    }

    /// Runtime options of the created array.
    pub fn options(mut self, options: ArrayOptions) -> Self {
        self.options = options;
        self
    }

    /// The default codecs for a data type.
    pub fn default_codecs(data_type: &DataType) -> Vec<Value> {
        let zstd =
            serde_json::json!({"name": "zstd", "configuration": {"level": 0, "checksum": false}});
        let first = if *data_type == DataType::String {
            serde_json::json!({"name": "vlen-utf8", "configuration": {}})
        } else {
            serde_json::json!({"name": "bytes", "configuration": {"endian": "little"}})
        };
        vec![first, zstd]
    }

    /// The validated metadata document.
    ///
    /// # Errors
    /// Any metadata error ([`ArrayMetadata::from_json`]): bad fill value, codecs that
    /// cannot encode the data type, dimension mismatches, zero chunk lengths.
    pub fn build_metadata(&self) -> ZarrResult<ArrayMetadata> {
        let fill = match &self.fill_value {
            Some(f) => f.clone(),
            None => self
                .data_type
                .fill_value_to_json(&self.data_type.default_fill_value())?,
        };
        let codecs = self
            .codecs
            .clone()
            .unwrap_or_else(|| Self::default_codecs(&self.data_type));
        let mut doc = serde_json::json!({
            "zarr_format": 3,
            "node_type": "array",
            "shape": self.shape,
            "data_type": self.data_type.to_json(),
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": self.chunk_shape}},
            "chunk_key_encoding": self.chunk_key_encoding.encoding().to_json(),
            "fill_value": fill,
            "codecs": codecs,
            "attributes": self.attributes,
        });
        if let Some(names) = &self.dimension_names {
            doc["dimension_names"] = serde_json::json!(names);
        }
        ArrayMetadata::from_json(&doc)
    }

    /// Creates the array at `path`: writes its `zarr.json` (and group metadata for
    /// missing parent groups).
    ///
    /// # Errors
    /// [`ZarrError::NodeExists`] when a node exists at `path` and `overwrite` is off;
    /// [`ZarrError::WrongNodeType`] when a parent is an array; metadata errors (see
    /// [`ArrayBuilder::build_metadata`]); [`ZarrError::ReadOnly`]; store errors.
    pub async fn create(self, store: Arc<dyn Store>, path: &str) -> ZarrResult<Array> {
        let path = normalize_path(path)?;
        let metadata = self.build_metadata().map_err(|e| e.at_path(&path))?;
        if !store.is_writable() {
            return Err(ZarrError::ReadOnly { path });
        }
        if node_exists(store.as_ref(), &path).await? {
            if !self.overwrite {
                return Err(ZarrError::NodeExists { path });
            }
            store.erase_prefix(&node_prefix(&path)).await?;
        }
        ensure_parent_groups(store.as_ref(), &path).await?;
        store
            .set(&metadata_key(&path), Bytes::from(metadata.to_bytes()))
            .await?;
        Ok(
            Array::from_metadata(store, &path, metadata, ZarrFormat::V3)?
                .with_options(self.options),
        )
    }
}
