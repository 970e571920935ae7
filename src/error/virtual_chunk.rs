//! Errors reading virtual chunks (defined here so that [`super::Error`] depends on no
//! layer above it; the reading lives in `virtual_refs`).

/// Errors reading virtual chunks. Every variant names the URL.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    #[error(
        "no virtual chunk container of this repository covers `{url}`: edit the repository \
         configuration to add one whose url prefix covers it"
    )]
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
    /// The container's store kind cannot be read by floe (in memory, an unknown
    /// kind), does not fit the location's scheme, or lacks a setting it needs (an
    /// Azure store without `account`).
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
    /// A container's endpoint (S3: endpoint or region; GCS: base URL; Azure:
    /// endpoint, emulator or, with credentials, account) or another setting that
    /// picks a server or credentials comes from the repository's own configuration
    /// and is not one the reader chose: no request is sent, so a hostile repository
    /// cannot point the reader's requests (and credentials) at a host of its
    /// choosing. The reader trusts it by giving the container in its own
    /// configuration when opening ([`crate::OpenOptions::virtual_containers`],
    /// Python's `Repository.open(config=...)`, the CLI's `--virtual-container`) or by
    /// making it its own (`AWS_ENDPOINT_URL`,
    /// [`crate::OpenOptions::virtual_s3_credentials`]; `STORAGE_EMULATOR_HOST`;
    /// `AZURE_STORAGE_ENDPOINT`, `AZURE_STORAGE_USE_EMULATOR`,
    /// `AZURE_STORAGE_ACCOUNT_NAME`).
    #[error(
        "virtual chunk container `{container}` names {endpoint} in the repository's \
         configuration, which the reader did not choose: not contacted. Give the \
         container in the configuration passed when opening the repository, or make it \
         the reader's own (AWS_ENDPOINT_URL, STORAGE_EMULATOR_HOST, AZURE_STORAGE_ENDPOINT)"
    )]
    UntrustedEndpoint {
        /// The container prefix.
        container: String,
        /// What was refused (`the endpoint `...``, `the region `...``).
        endpoint: String,
    },
    /// The credentials the reader gave for a container do not fit its store (S3
    /// credentials for an HTTP container, GCS credentials for an S3 one...), as
    /// Icechunk's `InvalidCredentials`.
    #[error("invalid credentials for virtual chunk container `{container}`: {reason}")]
    InvalidCredentials {
        /// The container prefix.
        container: String,
        /// What does not fit.
        reason: String,
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
    /// One read (a request with its retries and the follow-up size check, or a
    /// `HEAD`) did not finish within the read deadline
    /// ([`crate::virtual_refs::fetch::DEFAULT_READ_DEADLINE`] unless configured).
    #[error("reading `{url}` did not finish within the {}-second deadline", deadline.as_secs_f64())]
    DeadlineExceeded {
        /// The URL.
        url: String,
        /// The deadline that passed.
        deadline: std::time::Duration,
    },
    /// The server answered a range request with a body longer than the range it
    /// acknowledged; reading stopped after `end - offset` bytes.
    #[error("`{url}` answered bytes {offset}..{end} with a longer body: refused")]
    OverlongResponse {
        /// The URL.
        url: String,
        /// Start of the range, in bytes.
        offset: u64,
        /// End of the range, in bytes.
        end: u64,
    },
    /// The server refused access (HTTP 401 or 403, or the store's equivalent). Not
    /// retried.
    #[error("access to `{url}` denied by its server: {source}")]
    AccessDenied {
        /// The URL.
        url: String,
        /// The backend error.
        #[source]
        source: Box<object_store::Error>,
    },
}
