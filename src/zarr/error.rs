//! Error types of the Zarr layer.
//!
//! [`CodecError`] is what codecs report: codecs know nothing of stores, array paths
//! or chunk keys. The array layer wraps it into [`ZarrError::Chunk`], which names the
//! array path and the chunk key. Every other [`ZarrError`] variant names the array or
//! group path (and the key, where one is involved).

use crate::zarr::chunk_key_encoding::ChunkKeyEncodingError;
use crate::zarr::store::StoreError;

/// An error raised while encoding or decoding one chunk (or shard index) by a codec.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The encoded bytes are not a valid encoding for this codec (corrupt, truncated,
    /// checksum mismatch, wrong size, ...).
    #[error("codec `{codec}`: invalid encoded data: {reason}")]
    InvalidData {
        /// The codec name, e.g. `gzip`.
        codec: String,
        /// What is wrong.
        reason: String,
    },
    /// The codec cannot be applied to this decoded representation (data type, shape).
    #[error("codec `{codec}`: unsupported representation: {reason}")]
    Unsupported {
        /// The codec name.
        codec: String,
        /// Why it cannot be applied.
        reason: String,
    },
    /// A compression library failed while encoding.
    #[error("codec `{codec}`: encoding failed: {reason}")]
    EncodeFailed {
        /// The codec name.
        codec: String,
        /// The library's message.
        reason: String,
    },
    /// Reading part of an encoded value (a shard) from its source failed.
    #[error("partial read failed: {0}")]
    Source(#[from] StoreError),
    /// A background decode/encode task panicked or was cancelled.
    #[error("codec task failed: {0}")]
    Task(String),
}

impl CodecError {
    /// Shorthand for [`CodecError::InvalidData`].
    pub fn invalid(codec: &str, reason: impl Into<String>) -> Self {
        CodecError::InvalidData {
            codec: codec.to_string(),
            reason: reason.into(),
        }
    }

    /// Shorthand for [`CodecError::Unsupported`].
    pub fn unsupported(codec: &str, reason: impl Into<String>) -> Self {
        CodecError::Unsupported {
            codec: codec.to_string(),
            reason: reason.into(),
        }
    }
}

/// Errors of the Zarr layer (metadata, arrays, groups, hierarchy).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ZarrError {
    /// A store operation failed (the store error names the key).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A metadata document is malformed or violates the specification.
    #[error("invalid metadata for node `{path}`: {reason}")]
    InvalidMetadata {
        /// Hierarchy path of the node (`""` for the root, or `<document>` when the
        /// document is parsed outside a hierarchy).
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The metadata uses an extension (data type, codec, chunk grid, chunk key encoding,
    /// storage transformer, unknown top-level field) that floe does not implement and
    /// that is not marked `"must_understand": false`.
    #[error("node `{path}`: unsupported {kind} `{name}`")]
    UnsupportedExtension {
        /// Hierarchy path of the node.
        path: String,
        /// Extension point, e.g. `codec`, `data type`, `storage transformer`.
        kind: String,
        /// The extension's name.
        name: String,
    },
    /// No array or group metadata exists at the path.
    #[error("no Zarr node at path `{path}`")]
    NodeNotFound {
        /// The path looked up.
        path: String,
    },
    /// A node already exists where a new one was to be created.
    #[error("a Zarr node already exists at path `{path}`")]
    NodeExists {
        /// The path.
        path: String,
    },
    /// The node exists but is not of the expected kind (array vs group).
    #[error("node `{path}` is a {found}, not a {expected}")]
    WrongNodeType {
        /// The path.
        path: String,
        /// `array` or `group`.
        expected: &'static str,
        /// `array` or `group`.
        found: &'static str,
    },
    /// A hierarchy path that is not valid (empty segment, `.`/`..`, leading `/` is
    /// tolerated, but not `//`).
    #[error("invalid node path `{path}`: {reason}")]
    InvalidPath {
        /// The path.
        path: String,
        /// Why it is invalid.
        reason: String,
    },
    /// Encoding or decoding one chunk failed.
    #[error("array `{path}`, chunk `{key}`: {source}")]
    Chunk {
        /// Hierarchy path of the array.
        path: String,
        /// The store key of the chunk.
        key: String,
        /// The codec failure.
        #[source]
        source: CodecError,
    },
    /// A decoded chunk does not have the size its shape and data type require.
    #[error(
        "array `{path}`, chunk `{key}`: decoded chunk has {got} elements, expected {expected}"
    )]
    ChunkSize {
        /// Hierarchy path of the array.
        path: String,
        /// The chunk key.
        key: String,
        /// Expected number of elements.
        expected: u64,
        /// Number of elements found.
        got: u64,
    },
    /// The Rust element type does not match the array's data type.
    #[error("array `{path}`: element type `{element}` does not match data type `{data_type}`")]
    ElementType {
        /// Hierarchy path of the array.
        path: String,
        /// The Rust type name.
        element: &'static str,
        /// The array's data type.
        data_type: String,
    },
    /// A region or chunk index does not fit the array (dimensionality or bounds).
    #[error("array `{path}`: {reason}")]
    InvalidRegion {
        /// Hierarchy path of the array.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The number of elements supplied does not match the region.
    #[error("array `{path}`: region has {expected} elements but {got} were supplied")]
    DataLength {
        /// Hierarchy path of the array.
        path: String,
        /// Elements in the region.
        expected: u64,
        /// Elements supplied.
        got: u64,
    },
    /// An element value that cannot be represented in the data type (e.g. a string
    /// longer than a `fixed_length_utf32` element, a raw value of the wrong length).
    #[error("value does not fit data type `{data_type}`: {reason}")]
    InvalidValue {
        /// The data type.
        data_type: String,
        /// What is wrong.
        reason: String,
    },
    /// A data type (from metadata or a builder) that is malformed.
    #[error("invalid data type {data_type}: {reason}")]
    InvalidDataType {
        /// The JSON (or name) given.
        data_type: String,
        /// What is wrong.
        reason: String,
    },
    /// A fill value that is not permitted for the data type (data types spec,
    /// "Permitted fill values").
    #[error("invalid fill value {value} for data type `{data_type}`: {reason}")]
    InvalidFillValue {
        /// The JSON fill value.
        value: String,
        /// The data type.
        data_type: String,
        /// What is wrong.
        reason: String,
    },
    /// A codec configuration that is malformed or incompatible with the array.
    #[error("invalid codec configuration `{codec}`: {reason}")]
    InvalidCodec {
        /// The codec name.
        codec: String,
        /// What is wrong.
        reason: String,
    },
    /// The store does not allow writes.
    #[error("store is read-only: cannot modify `{path}`")]
    ReadOnly {
        /// Hierarchy path of the node.
        path: String,
    },
    /// A background task (encoding/decoding on the blocking pool) panicked or was
    /// cancelled.
    #[error("array `{path}`: background task failed: {reason}")]
    Task {
        /// Hierarchy path of the array.
        path: String,
        /// The join error.
        reason: String,
    },
    /// A read or write whose size (elements of a region or chunk, bytes of a buffer)
    /// overflows `u64`/`usize` or exceeds what one buffer can hold. Metadata of such
    /// arrays is accepted; only reads and writes that would need the size fail.
    #[error("array `{path}`: too large: {reason}")]
    TooLarge {
        /// Hierarchy path of the array.
        path: String,
        /// Which size overflows, with the shape involved.
        reason: String,
    },
}

impl ZarrError {
    /// Attaches a node path to metadata errors raised without one (parsing a
    /// document outside a hierarchy); data type, fill value and codec errors become
    /// [`ZarrError::InvalidMetadata`] naming the path. Other errors are unchanged.
    pub fn at_path(self, node_path: &str) -> Self {
        match self {
            ZarrError::InvalidMetadata { path, reason } if path.is_empty() => {
                ZarrError::InvalidMetadata {
                    path: node_path.to_string(),
                    reason,
                }
            }
            ZarrError::UnsupportedExtension { path, kind, name } if path.is_empty() => {
                ZarrError::UnsupportedExtension {
                    path: node_path.to_string(),
                    kind,
                    name,
                }
            }
            e @ (ZarrError::InvalidDataType { .. }
            | ZarrError::InvalidFillValue { .. }
            | ZarrError::InvalidCodec { .. }) => ZarrError::InvalidMetadata {
                path: node_path.to_string(),
                reason: e.to_string(),
            },
            other => other,
        }
    }
}

/// Result alias of the Zarr layer.
pub type ZarrResult<T> = Result<T, ZarrError>;

impl From<ChunkKeyEncodingError> for ZarrError {
    /// A refused chunk key encoding, with no path yet (the array layer adds it with
    /// [`ZarrError::at_path`]).
    fn from(e: ChunkKeyEncodingError) -> Self {
        match e {
            ChunkKeyEncodingError::Invalid(reason) => ZarrError::InvalidMetadata {
                path: String::new(),
                reason,
            },
            ChunkKeyEncodingError::Unsupported(name) => ZarrError::UnsupportedExtension {
                path: String::new(),
                kind: "chunk key encoding".into(),
                name,
            },
        }
    }
}
