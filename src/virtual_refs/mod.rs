//! Virtual chunk refs: chunks that live inside objects outside the repository (NetCDF4
//! and HDF5 files on a local disk, S3 or HTTP), read by byte range.
//!
//! A virtual ref is read only through a *virtual chunk container* of the repository's
//! `config.yaml` (a URL prefix and the store behind it), and only when the caller
//! authorized that prefix when opening the repository: an untrusted repository can
//! never make floe read arbitrary local files or hosts. What is authorized is the exact
//! location read: URLs are normalized first (dot segments, percent-encoding, case,
//! ports; ambiguous forms are refused), local files are checked after resolving
//! symbolic links, HTTP redirects are followed only inside the authorization and S3
//! redirects never; an S3 endpoint from the repository's configuration is contacted
//! only when the reader chose it too. The [`authorization`] module documents the
//! guarantees.
//!
//! Checksums: an etag checksum is sent as an `If-Match` precondition; a last-modified
//! checksum (seconds) rejects a source modified since. Either failure, a missing
//! object, or a short read is a [`VirtualChunkError`], never wrong data or fill values.
//!
//! Hostile servers: a read never holds more than the bytes it asked for, never lasts
//! longer than the read deadline ([`fetch::DEFAULT_READ_DEADLINE`], 60 seconds, with
//! its retries), and failures that cannot pass are not retried (see [`fetch`]).

pub mod authorization;
pub mod credentials;
pub mod fetch;

pub use crate::error::VirtualChunkError;
pub use authorization::{normalize_prefix, normalize_url, VirtualAccess};
pub use credentials::ContainerCredentials;
pub use fetch::VirtualChunkResolver;
