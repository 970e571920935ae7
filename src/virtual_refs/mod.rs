//! Virtual chunk refs: chunks that live inside objects outside the repository (NetCDF4
//! and HDF5 files on a local disk, S3 or HTTP), read by byte range.
//!
//! A virtual ref is read only through a *virtual chunk container* of the repository's
//! `config.yaml` (a URL prefix and the store behind it), and only when the caller
//! authorized that prefix when opening the repository: an untrusted repository can
//! never make floe read arbitrary local files or hosts. What is authorized is the exact
//! location read: URLs are normalized first (dot segments, percent-encoding, case,
//! ports; ambiguous forms are refused), local files are checked after resolving
//! symbolic links, and HTTP redirects are followed only inside the authorization. The
//! [`authorization`] module documents the guarantees.
//!
//! Checksums: an etag checksum is sent as an `If-Match` precondition; a last-modified
//! checksum (seconds) rejects a source modified since. Either failure, a missing
//! object, or a short read is a [`VirtualChunkError`], never wrong data or fill values.

pub mod authorization;
pub mod fetch;
pub mod import;
pub mod kerchunk;

pub use authorization::{normalize_prefix, normalize_url, VirtualAccess};
pub use fetch::VirtualChunkResolver;
pub use import::{import_kerchunk, import_kerchunk_with, ImportSummary};
pub use kerchunk::KerchunkLimits;

/// Errors reading virtual chunks. Every variant names the URL.
#[derive(Debug, thiserror::Error)]
pub enum VirtualChunkError {
    /// The URL cannot be parsed or uses an unsupported scheme.
    #[error("invalid virtual chunk URL `{url}`: {reason}")]
    InvalidUrl {
        /// The URL.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// No virtual chunk container of the repository covers the URL.
    #[error("no virtual chunk container of this repository covers `{url}`")]
    NoContainer {
        /// The URL.
        url: String,
    },
    /// A container covers the URL but the caller did not authorize it.
    #[error("reading `{url}` is not authorized: authorize the prefix `{container}` to read it")]
    Unauthorized {
        /// The URL.
        url: String,
        /// The container's URL prefix.
        container: String,
    },
    /// The object changed since the ref was made (etag or last-modified mismatch).
    #[error("checksum mismatch for `{url}`: the object was modified after the reference was made")]
    ChecksumMismatch {
        /// The URL.
        url: String,
    },
    /// The object does not exist.
    #[error("virtual chunk source `{url}` not found")]
    SourceMissing {
        /// The URL.
        url: String,
    },
    /// The object is shorter than the ref's byte range.
    #[error("short read of `{url}`: wanted bytes {offset}..{end}, got {got} bytes")]
    ShortRead {
        /// The URL.
        url: String,
        /// Start of the wanted range, in bytes.
        offset: u64,
        /// End of the wanted range, in bytes.
        end: u64,
        /// Bytes received.
        got: u64,
    },
    /// The container's store kind cannot be read by floe (e.g. GCS, Azure).
    #[error("virtual chunk container `{container}` uses an unsupported store `{store}`")]
    UnsupportedStore {
        /// The container prefix.
        container: String,
        /// The store kind.
        store: String,
    },
    /// An HTTP server answered with a redirect to a location outside the authorized
    /// prefixes (another host, port, scheme or path); it was not followed.
    #[error("`{url}` redirects to `{location}`, outside the authorized prefixes: not followed")]
    RedirectRefused {
        /// The URL.
        url: String,
        /// Where the server redirected to.
        location: String,
    },
    /// The backend failed (network, permissions...).
    #[error("error reading `{url}`: {source}")]
    Backend {
        /// The URL.
        url: String,
        /// The backend error.
        #[source]
        source: Box<object_store::Error>,
    },
}
