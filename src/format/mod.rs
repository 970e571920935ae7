//! The Icechunk on-disk format, spec 1 and 2: ids, the file envelope, snapshots,
//! manifests, transaction logs, refs (spec-1 ref files, tags and tag tombstones),
//! `config.yaml`, the spec-2 `repo` object, and the size limits readers and writers
//! share ([`limits`]).
//!
//! Binary facts: `../shared/docs/icechunk-format-v1.md` and
//! `../shared/docs/icechunk-format-notes.md` (spec 2); prose:
//! `../shared/specs/icechunk-spec.txt`. This module does no I/O and knows nothing of
//! sessions.
//!
//! Decoding is public (to inspect a repository's objects); encoding is the crate's
//! own (the repository writes objects), public only with the `testing` feature, for
//! tests that build fixtures.

/// Declares a method or item `pub` with the `testing` feature and `pub(crate)`
/// otherwise: encoding format objects is the repository's job, not library API, and
/// integration and fuzz tests build their fixtures with it (the crate's own
/// dev-dependency enables `testing`).
macro_rules! testing_pub {
    ($(#[$meta:meta])* fn $($rest:tt)*) => {
        #[cfg(feature = "testing")]
        $(#[$meta])*
        pub fn $($rest)*
        #[cfg(not(feature = "testing"))]
        #[allow(dead_code)] // some are for tests only
        $(#[$meta])*
        pub(crate) fn $($rest)*
    };
}

pub mod config;
/// Envelope encoding is internal; the `testing` feature exposes it for building
/// hostile fixtures.
#[cfg(feature = "testing")]
pub mod envelope;
#[cfg(not(feature = "testing"))]
#[allow(unreachable_pub)]
pub(crate) mod envelope;
pub mod gc_state;
#[allow(
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    unused_imports,
    dead_code,
    missing_docs,
    unsafe_op_in_unsafe_fn,
    non_camel_case_types,
    mismatched_lifetime_syntaxes,
    unreachable_pub,
    unsafe_code,
    clippy::undocumented_unsafe_blocks
)]
#[rustfmt::skip]
mod generated;
// Reads flatbuffers whose verification covered only what is read (`unsafe`).
#[allow(unsafe_code)]
mod fb;
pub(crate) mod flexbuffer;
mod forward;
pub mod ids;
pub mod keys;
pub mod limits;
pub mod manifest;
pub mod metadata_value;
pub mod path;
pub mod refs;
pub mod repo_info;
// Reads a snapshot's verified flatbuffer root without verifying it again (`unsafe`).
#[allow(unsafe_code)]
pub mod snapshot;
pub mod transaction_log;

pub use ids::{ChunkId, ManifestId, NodeId, ObjectId, SnapshotId};
pub use path::NodePath;

/// An Icechunk on-disk format version: the spec version byte of every file's header
/// (`icechunk-format-notes.md` §1.1). Spec 2.1 only adds an optional field to spec
/// 2 and shares its byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[repr(u8)]
#[non_exhaustive]
pub enum SpecVersion {
    /// Spec 1 (Icechunk 1.x): refs in `refs/`, configuration in `config.yaml`,
    /// MessagePack metadata, parents in snapshot files.
    V1 = 1,
    /// Spec 2 / 2.1 (Icechunk 2.x): one `repo` object holds refs, snapshot
    /// summaries and parents, configuration, status and the ops log; FlexBuffers
    /// metadata.
    V2 = 2,
}

impl SpecVersion {
    /// The version of a header's version byte.
    ///
    /// # Errors
    /// [`FormatError::UnsupportedSpecVersion`] for any byte but 1 and 2.
    pub fn from_byte(byte: u8) -> Result<Self, FormatError> {
        match byte {
            1 => Ok(SpecVersion::V1),
            2 => Ok(SpecVersion::V2),
            version => Err(FormatError::UnsupportedSpecVersion { version }),
        }
    }
}

impl std::fmt::Display for SpecVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", *self as u8)
    }
}

/// Chunk grid coordinates of one chunk: one index per array dimension, counted in
/// chunks from the grid's origin.
///
/// Every floe API (session, change set, diff, conflicts, Zarr arrays) uses `u64`
/// coordinates, as Zarr does. Icechunk files store each coordinate as a `u32`
/// (spec 1, `ChunkIndices.coords: [uint32]`), so a session refuses a chunk whose
/// coordinate exceeds [`MAX_CHUNK_COORDINATE`] when it is set
/// (`Error::InvalidChunkIndex`), and encoding one fails with
/// [`FormatError::ChunkIndexTooLarge`].
pub type ChunkIndices = Vec<u64>;

/// The largest chunk coordinate an Icechunk file can hold: `u32::MAX - 1`, since a
/// snapshot records each manifest's extent as a half-open `u32` range whose end is
/// one past the largest coordinate.
pub const MAX_CHUNK_COORDINATE: u64 = u32::MAX as u64 - 1;

/// A chunk index as stored: its coordinates as `u32`s, checked first.
///
/// # Errors
/// [`FormatError::ChunkIndexTooLarge`] when a coordinate exceeds
/// [`MAX_CHUNK_COORDINATE`].
pub(crate) fn coords_u32(
    index: &[u64],
) -> Result<impl ExactSizeIterator<Item = u32> + '_, FormatError> {
    if index.iter().any(|&i| i > MAX_CHUNK_COORDINATE) {
        return Err(FormatError::ChunkIndexTooLarge {
            index: index.to_vec(),
        });
    }
    // Checked above: every coordinate fits.
    #[allow(clippy::cast_possible_truncation)]
    Ok(index.iter().map(|&i| i as u32))
}

/// Errors decoding or validating format objects. Corrupt or truncated input always
/// gives one of these, never a panic.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// An id's text form is not valid Crockford base32 of the right length.
    #[error("invalid id `{text}`: expected the Crockford base32 form of {expected_bytes} bytes")]
    InvalidId {
        /// The text given.
        text: String,
        /// Expected number of raw bytes (12 or 8).
        expected_bytes: usize,
    },
    /// The file is shorter than the 39-byte envelope header.
    #[error("truncated {what} file: {len} bytes, shorter than the 39-byte header")]
    Truncated {
        /// Which file type.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// The file does not start with the Icechunk magic bytes.
    #[error("not an Icechunk {what} file: bad magic bytes")]
    BadMagic {
        /// Which file type was expected.
        what: &'static str,
    },
    /// A spec version other than 1.
    #[error("Icechunk spec version {version} is not supported (floe reads spec 1 and 2)")]
    UnsupportedSpecVersion {
        /// The version byte found.
        version: u8,
    },
    /// The header's file type byte is not the expected one.
    #[error("expected a {expected} file, found file type {found}")]
    WrongFileType {
        /// The expected type.
        expected: &'static str,
        /// The type byte found.
        found: u8,
    },
    /// A compression byte other than zstd.
    #[error("{what} file uses unsupported compression {code} (only zstd = 1)")]
    UnsupportedCompression {
        /// Which file type.
        what: &'static str,
        /// The compression byte found.
        code: u8,
    },
    /// zstd failed (corrupt or truncated frame).
    #[error("{what} file: zstd error: {reason}")]
    Compression {
        /// Which file type.
        what: &'static str,
        /// zstd's message.
        reason: String,
    },
    /// The flatbuffer fails verification or lacks the `Ichk` identifier.
    #[error("invalid {what} flatbuffer: {reason}")]
    InvalidFlatbuffer {
        /// Which file type.
        what: &'static str,
        /// What the verifier reported.
        reason: String,
    },
    /// The flatbuffer is well formed but its content breaks a format rule.
    #[error("invalid {what}: {reason}")]
    InvalidData {
        /// Which object.
        what: &'static str,
        /// The broken rule.
        reason: String,
    },
    /// A chunk index with a coordinate above [`MAX_CHUNK_COORDINATE`], which
    /// Icechunk files cannot store.
    #[error("chunk index {index:?} has a coordinate above {MAX_CHUNK_COORDINATE}, the largest Icechunk stores")]
    ChunkIndexTooLarge {
        /// The chunk index.
        index: ChunkIndices,
    },
    /// A ref file (`ref.json`) that is not `{"snapshot": "<id>"}`.
    #[error("invalid ref file `{key}`: {reason}")]
    InvalidRef {
        /// The ref's key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A `config.yaml` that cannot be parsed.
    #[error("invalid config.yaml: {reason}")]
    InvalidConfig {
        /// The parser's message.
        reason: String,
    },
    /// A compressed object that decompresses to more than
    /// [`limits::MAX_OBJECT_BYTES`] (2 GiB − 1, flatbuffers' own cap, which no
    /// Icechunk or floe writer can pass), or to more than its frame declares.
    #[error("{what} file decompresses to more than {limit} bytes")]
    TooLarge {
        /// Which file type.
        what: &'static str,
        /// The limit it exceeds, in bytes.
        limit: u64,
    },
    /// A node path that is not absolute, has empty segments or a trailing `/`.
    #[error("invalid node path `{path}`: {reason}")]
    InvalidPath {
        /// The path given.
        path: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// An object floe was about to write is larger than readers accept
    /// ([`limits::MAX_OBJECT_BYTES`]): refused before anything is stored. Split the
    /// data (smaller attributes, a shorter message, smaller inline chunks, fewer
    /// arrays per commit).
    #[error(
        "the {what} would hold about {size} bytes, more than the {limit}-byte limit of \
         an Icechunk object (format::limits::MAX_OBJECT_BYTES); nothing was written"
    )]
    ObjectTooLarge {
        /// Which object.
        what: &'static str,
        /// Its size (an upper bound), in bytes.
        size: u64,
        /// The limit, in bytes.
        limit: u64,
    },
    /// A metadata value nested deeper than [`limits::MAX_METADATA_DEPTH`]: refused
    /// before anything is stored.
    #[error(
        "{what} metadata `{name}` is nested {depth} levels deep, more than the \
         {limit} floe writes (format::limits::MAX_METADATA_DEPTH); nothing was written"
    )]
    MetadataTooDeep {
        /// Which object.
        what: &'static str,
        /// The metadata key.
        name: String,
        /// Its depth.
        depth: usize,
        /// The limit.
        limit: usize,
    },
}
