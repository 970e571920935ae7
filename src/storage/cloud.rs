//! Cloud object stores beside S3: Google Cloud Storage, Azure Blob Storage and
//! read-only HTTP servers, all through `object_store`; plus what every object-store
//! backend shares: client settings (retries, timeouts), credentials refreshed by a
//! caller's function ([`RefreshingCredentials`]) and S3 storage built with them.
//!
//! Backends reached through a custom endpoint (an emulator, an S3-compatible server)
//! are wrapped in [`super::CheckedConditionalWrites`]: their first conditional
//! write checks that the server enforces preconditions, and every conditional write
//! is refused with [`StorageError::UnsafeConditionalWrites`] when it does not.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use object_store::aws::AwsCredential;
use object_store::azure::{AzureAccessKey, AzureCredential, MicrosoftAzureBuilder};
use object_store::gcp::{GcpCredential, GoogleCloudStorageBuilder};
use object_store::http::HttpBuilder;
use object_store::{
    BackoffConfig, ClientConfigKey, ClientOptions, CredentialProvider, RetryConfig,
};

use super::guard::CheckedConditionalWrites;
use super::object::{ObjectStorage, SplitReads};
use super::read_only::ReadOnlyStorage;
use super::{S3Options, Storage, StorageError, StorageResult};

/// How an object-store client retries and times out, as Icechunk's
/// `StorageRetriesSettings` and `StorageTimeoutSettings` (every field optional:
/// `None` keeps `object_store`'s default). Durations are in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientSettings {
    /// Tries of a request, the first included (1: no retry). object_store: 11.
    pub max_tries: Option<u32>,
    /// The first backoff between tries, milliseconds. object_store: 100.
    pub initial_backoff_ms: Option<u64>,
    /// The longest backoff between tries, milliseconds. object_store: 15,000.
    pub max_backoff_ms: Option<u64>,
    /// Time to establish a connection, milliseconds. object_store: 5,000.
    pub connect_timeout_ms: Option<u64>,
    /// Longest wait for the next bytes of a response (an idle stream),
    /// milliseconds; 0 disables it. Icechunk's `network_stream_timeout_seconds` and
    /// `read_timeout_ms`. object_store: none.
    pub read_timeout_ms: Option<u64>,
    /// Time for a whole operation, retries included, milliseconds (object_store's
    /// retry timeout). object_store: 180,000.
    pub operation_timeout_ms: Option<u64>,
    /// Time for one try of a request, milliseconds; 0 disables it. object_store:
    /// 30,000.
    pub operation_attempt_timeout_ms: Option<u64>,
    /// The size, in bytes, a large ranged read aims at per request when it is split
    /// into concurrent requests (Icechunk's `ideal_concurrent_request_size`):
    /// 12 MiB.
    pub ideal_concurrent_request_size: Option<u64>,
    /// The most concurrent requests one ranged read is split into (Icechunk's
    /// `max_concurrent_requests_for_object`): 18.
    pub max_concurrent_requests_for_object: Option<u16>,
}

impl ClientSettings {
    /// How the storage splits large ranged reads ([`SplitReads`]), unset fields at
    /// Icechunk's defaults.
    pub fn split_reads(&self) -> SplitReads {
        let d = SplitReads::default();
        SplitReads {
            ideal_request_bytes: self
                .ideal_concurrent_request_size
                .unwrap_or(d.ideal_request_bytes)
                .max(1),
            max_requests_per_object: self
                .max_concurrent_requests_for_object
                .unwrap_or(d.max_requests_per_object)
                .max(1),
        }
    }

    /// These timeouts as object_store client configuration keys and values
    /// (`humantime` durations; a disabled timeout is a very long one). Builders
    /// take them with `with_config`, which amends their client options (those the
    /// environment or other keys set are kept) instead of replacing them.
    pub fn client_config(&self) -> Vec<(ClientConfigKey, String)> {
        let duration = |ms: u64| {
            if ms == 0 {
                "100000h".to_string()
            } else {
                format!("{ms}ms")
            }
        };
        let mut out = Vec::new();
        if let Some(ms) = self.connect_timeout_ms {
            out.push((ClientConfigKey::ConnectTimeout, duration(ms)));
        }
        if let Some(ms) = self.read_timeout_ms {
            out.push((ClientConfigKey::ReadTimeout, duration(ms)));
        }
        if let Some(ms) = self.operation_attempt_timeout_ms {
            out.push((ClientConfigKey::Timeout, duration(ms)));
        }
        out
    }

    /// object_store's client options with these timeouts over `base`.
    pub fn client_options(&self, base: ClientOptions) -> ClientOptions {
        self.client_config()
            .into_iter()
            .fold(base, |o, (k, v)| o.with_config(k, v))
    }

    /// object_store's retry configuration with these retries.
    pub fn retry_config(&self) -> RetryConfig {
        let mut r = RetryConfig::default();
        if let Some(tries) = self.max_tries {
            r.max_retries = tries.saturating_sub(1) as usize;
        }
        let mut backoff = BackoffConfig::default();
        if let Some(ms) = self.initial_backoff_ms {
            backoff.init_backoff = Duration::from_millis(ms);
        }
        if let Some(ms) = self.max_backoff_ms {
            backoff.max_backoff = Duration::from_millis(ms);
        }
        r.backoff = backoff;
        if let Some(ms) = self.operation_timeout_ms {
            r.retry_timeout = Duration::from_millis(ms);
        }
        r
    }
}

/// A credential with the instant it stops being valid (`None`: never).
#[derive(Clone, Debug)]
pub struct Expiring<C> {
    /// The credential.
    pub credential: C,
    /// When it expires; a credential past it is fetched again before the next
    /// request.
    pub expires_after: Option<DateTime<Utc>>,
}

/// Fetches a fresh credential (a caller's function: Python's `get_credentials`).
/// An error is a message that fails the request which needed the credential.
pub trait CredentialFetcher<C>: Send + Sync + fmt::Debug {
    /// Fetches a credential.
    fn fetch(&self) -> BoxFuture<'static, Result<Expiring<C>, String>>;
}

/// An `object_store` credential provider over a [`CredentialFetcher`]: the credential
/// is fetched on first use and kept until it expires, then fetched again before the
/// next request (one fetch at a time; concurrent requests wait for it). A credential
/// that arrives already expired serves the request that fetched it and is fetched
/// again for the next one. This is Icechunk's refreshable-credentials behaviour.
pub struct RefreshingCredentials<C> {
    fetcher: Arc<dyn CredentialFetcher<C>>,
    cached: tokio::sync::Mutex<Option<Cached<C>>>,
}

/// A fetched credential and when it expires.
type Cached<C> = (Arc<C>, Option<DateTime<Utc>>);

impl<C> fmt::Debug for RefreshingCredentials<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RefreshingCredentials")
            .field("fetcher", &self.fetcher)
            .finish_non_exhaustive()
    }
}

impl<C> RefreshingCredentials<C> {
    /// A provider calling `fetcher`, starting from `initial` when given (Icechunk's
    /// `scatter_initial_credentials`: the first credential travels with the storage
    /// and serves until it expires).
    pub fn new(fetcher: Arc<dyn CredentialFetcher<C>>, initial: Option<Expiring<C>>) -> Self {
        RefreshingCredentials {
            fetcher,
            cached: tokio::sync::Mutex::new(
                initial.map(|e| (Arc::new(e.credential), e.expires_after)),
            ),
        }
    }
}

#[async_trait]
impl<C: fmt::Debug + Send + Sync + 'static> CredentialProvider for RefreshingCredentials<C> {
    type Credential = C;

    async fn get_credential(&self) -> object_store::Result<Arc<C>> {
        let mut cached = self.cached.lock().await;
        if let Some((credential, expires)) = cached.as_ref() {
            if expires.is_none_or(|t| Utc::now() < t) {
                return Ok(Arc::clone(credential));
            }
        }
        let fresh = self
            .fetcher
            .fetch()
            .await
            .map_err(|message| object_store::Error::Generic {
                store: "credentials",
                source: message.into(),
            })?;
        let credential = Arc::new(fresh.credential);
        *cached = Some((Arc::clone(&credential), fresh.expires_after));
        Ok(credential)
    }
}

/// The root URL reported for `scheme://bucket/prefix`.
fn root_url(scheme: &str, bucket: &str, prefix: &str) -> String {
    if prefix.is_empty() {
        format!("{scheme}://{bucket}")
    } else {
        format!("{scheme}://{bucket}/{prefix}")
    }
}

/// The error for a backend's rejected options.
fn invalid(location: String, e: object_store::Error) -> StorageError {
    StorageError::InvalidLocation {
        location,
        reason: e.to_string(),
    }
}

/// What S3 storage built by [`new_s3_storage_with`] adds to [`S3Options`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct S3Extras {
    /// HTTP headers sent with every request (name, value).
    pub headers: Vec<(String, String)>,
    /// Send `x-amz-request-payer: requester` (requester-pays buckets).
    pub requester_pays: bool,
    /// Send a SHA-256 checksum of every uploaded body (`x-amz-checksum-sha256`),
    /// which S3 verifies before storing it (Icechunk's
    /// `checksum_algorithm=ChecksumAlgorithm.Sha256`; the only checksum
    /// `object_store` computes).
    pub checksum_sha256: bool,
}

/// Storage at `s3://bucket/prefix` with `options`, signing with `credentials`
/// (a refreshing provider) when given, with `settings` and `extras`. A custom
/// endpoint (S3-compatible servers, emulators) gets the conditional-write check.
///
/// # Errors
/// [`StorageError::InvalidLocation`] when the options are rejected (a header that
/// is not valid HTTP...).
pub fn new_s3_storage_with(
    bucket: &str,
    prefix: &str,
    options: &S3Options,
    credentials: Option<Arc<dyn CredentialProvider<Credential = AwsCredential>>>,
    settings: &ClientSettings,
    extras: &S3Extras,
) -> StorageResult<Arc<dyn Storage>> {
    let prefix = prefix.trim_matches('/');
    let url = root_url("s3", bucket, prefix);
    let mut b = options.builder(bucket);
    if !extras.headers.is_empty() {
        let client = with_headers(ClientOptions::new(), &extras.headers, &url)?;
        // Replaces the client options: the HTTP switch is set again after it.
        b = b
            .with_client_options(client)
            .with_allow_http(options.allow_http);
    }
    for (k, v) in settings.client_config() {
        b = b.with_config(object_store::aws::AmazonS3ConfigKey::Client(k), v);
    }
    let mut b = b
        .with_retry(settings.retry_config())
        .with_request_payer(extras.requester_pays);
    if extras.checksum_sha256 {
        b = b.with_checksum_algorithm(object_store::aws::Checksum::SHA256);
    }
    if let Some(c) = credentials {
        b = b.with_credentials(c);
    }
    let store = Arc::new(b.build().map_err(|e| invalid(url.clone(), e))?);
    let region = options.region.clone().unwrap_or_else(|| "us-east-1".into());
    let storage = ObjectStorage::new(Arc::clone(&store) as _, prefix, url)
        .with_split_reads(settings.split_reads())
        .with_ranged_listing(true)
        .with_s3_conditional_delete(store, region);
    Ok(checked_if(options.endpoint.is_some(), Arc::new(storage)))
}

/// `options` sending `headers` with every request.
///
/// # Errors
/// [`StorageError::InvalidLocation`] (at `location`) for a header that is not
/// valid HTTP.
fn with_headers(
    options: ClientOptions,
    headers: &[(String, String)],
    location: &str,
) -> StorageResult<ClientOptions> {
    if headers.is_empty() {
        return Ok(options);
    }
    let bad = |reason: String| StorageError::InvalidLocation {
        location: location.to_string(),
        reason,
    };
    let mut map = http::HeaderMap::new();
    for (k, v) in headers {
        let name = http::HeaderName::try_from(k.as_str())
            .map_err(|e| bad(format!("header `{k}`: {e}")))?;
        let value = http::HeaderValue::try_from(v.as_str())
            .map_err(|e| bad(format!("header `{k}`: {e}")))?;
        map.insert(name, value);
    }
    Ok(options.with_default_headers(map))
}

/// `storage`, wrapped in the conditional-write check when `custom` (a server other
/// than the cloud provider's own).
fn checked_if(custom: bool, storage: Arc<dyn Storage>) -> Arc<dyn Storage> {
    if custom {
        Arc::new(CheckedConditionalWrites::new(storage))
    } else {
        storage
    }
}

/// How a Google Cloud Storage client authenticates (Icechunk's `GcsCredentials`).
#[derive(Clone, Debug, Default)]
pub enum GcsCredentials {
    /// object_store's discovery: `GOOGLE_*` variables, application default
    /// credentials, the metadata server.
    #[default]
    FromEnv,
    /// Unsigned requests (public buckets, emulators).
    Anonymous,
    /// A service account JSON file at this path.
    ServiceAccountFile(String),
    /// A serialized service account key (JSON).
    ServiceAccountKey(String),
    /// An application default credentials file at this path.
    ApplicationCredentials(String),
    /// A fixed OAuth bearer token.
    BearerToken(String),
    /// Bearer tokens from a caller's function, refreshed when they expire.
    Refreshable(Arc<dyn CredentialProvider<Credential = GcpCredential>>),
}

/// Storage at `gs://bucket/prefix` on Google Cloud Storage. `config` holds
/// object_store `GoogleConfigKey` names and values (`google_base_url`, ...); with
/// [`GcsCredentials::FromEnv`] the `GOOGLE_*` variables are read too, and
/// `STORAGE_EMULATOR_HOST` (the variable Google's clients honour) sets the base URL
/// of an emulator, which is then reached without signing. Version tokens are
/// generations (GCS matches `x-goog-if-generation-match`, not etags). A custom base
/// URL gets the conditional-write check.
///
/// # Errors
/// [`StorageError::InvalidLocation`] for an unknown configuration key or options the
/// client rejects (an unreadable service account file...).
pub fn new_gcs_storage(
    bucket: &str,
    prefix: &str,
    credentials: GcsCredentials,
    config: &[(String, String)],
    settings: &ClientSettings,
) -> StorageResult<Arc<dyn Storage>> {
    let prefix = prefix.trim_matches('/');
    let url = root_url("gs", bucket, prefix);
    let (b, custom) =
        gcs_builder(bucket, credentials, config, settings).map_err(|e| invalid(url.clone(), e))?;
    let store = b.build().map_err(|e| invalid(url.clone(), e))?;
    let storage = ObjectStorage::new(Arc::new(store), prefix, url)
        .with_split_reads(settings.split_reads())
        .with_ranged_listing(true)
        .with_generation_versions(true);
    Ok(checked_if(custom, Arc::new(storage)))
}

/// The `object_store` client builder of Google Cloud Storage `bucket`, as
/// [`new_gcs_storage`] and virtual chunk containers of GCS
/// ([`crate::virtual_refs::VirtualChunkResolver`]) configure it: `settings`' retries
/// and timeouts, plain HTTP allowed (the base URL decides), `config` (object_store
/// `GoogleConfigKey` names), then `credentials`. With [`GcsCredentials::FromEnv`] the
/// `GOOGLE_*` variables and `STORAGE_EMULATOR_HOST` are read too. Also returns
/// whether the base URL is custom (an emulator or a configured `google_base_url`).
///
/// # Errors
/// `object_store`'s error for an unknown configuration key.
pub fn gcs_builder(
    bucket: &str,
    credentials: GcsCredentials,
    config: &[(String, String)],
    settings: &ClientSettings,
) -> object_store::Result<(GoogleCloudStorageBuilder, bool)> {
    super::tls::install_crypto_provider();
    let mut b = match credentials {
        GcsCredentials::FromEnv => GoogleCloudStorageBuilder::from_env(),
        _ => GoogleCloudStorageBuilder::new(),
    };
    // Plain HTTP is allowed: the base URL decides (emulators serve it).
    b = b
        .with_config(
            object_store::gcp::GoogleConfigKey::Client(ClientConfigKey::AllowHttp),
            "true",
        )
        .with_retry(settings.retry_config());
    for (k, v) in settings.client_config() {
        b = b.with_config(object_store::gcp::GoogleConfigKey::Client(k), v);
    }
    let mut custom = false;
    if matches!(credentials, GcsCredentials::FromEnv) {
        if let Some(base) = gcs_emulator_base() {
            b = b.with_base_url(&base).with_skip_signature(true);
            custom = true;
        }
    }
    for (k, v) in config {
        let key = k.parse()?;
        if matches!(key, object_store::gcp::GoogleConfigKey::BaseUrl) {
            custom = true;
        }
        b = b.with_config(key, v);
    }
    b = match credentials {
        GcsCredentials::FromEnv => b,
        GcsCredentials::Anonymous => b.with_skip_signature(true),
        GcsCredentials::ServiceAccountFile(p) => b.with_service_account_path(p),
        GcsCredentials::ServiceAccountKey(k) => b.with_service_account_key(k),
        GcsCredentials::ApplicationCredentials(p) => b.with_application_credentials(p),
        GcsCredentials::BearerToken(t) => b.with_bearer_token(t),
        GcsCredentials::Refreshable(c) => b.with_credentials(c),
    };
    Ok((b.with_bucket_name(bucket), custom))
}

/// The base URL of the GCS emulator the process's `STORAGE_EMULATOR_HOST` names
/// (`host:port` taken as `http://host:port`), when set and not empty.
pub fn gcs_emulator_base() -> Option<String> {
    let host = std::env::var("STORAGE_EMULATOR_HOST")
        .ok()
        .filter(|h| !h.is_empty())?;
    Some(if host.contains("://") {
        host
    } else {
        format!("http://{host}")
    })
}

/// How an Azure Blob Storage client authenticates (Icechunk's `AzureCredentials`).
#[derive(Clone, Debug, Default)]
pub enum AzureCredentials {
    /// object_store's discovery: `AZURE_*` variables (`AZURE_STORAGE_ACCOUNT_KEY`,
    /// `AZURE_STORAGE_USE_EMULATOR`, ...), managed identity, the Azure CLI.
    #[default]
    FromEnv,
    /// Unsigned requests (public containers).
    Anonymous,
    /// A storage account key (base64).
    AccessKey(String),
    /// A shared access signature: its query string (`sv=...&sig=...`).
    SasToken(String),
    /// A fixed OAuth bearer token.
    BearerToken(String),
    /// Credentials from a caller's function, refreshed when they expire.
    Refreshable(Arc<dyn CredentialProvider<Credential = AzureCredential>>),
}

/// An Azure credential of `kind` (`access_key`, `sas_token` or `bearer_token`).
///
/// # Errors
/// A message for an access key that is not base64 or an unknown kind.
pub fn azure_credential(kind: &str, secret: &str) -> Result<AzureCredential, String> {
    match kind {
        "access_key" => AzureAccessKey::try_new(secret)
            .map(AzureCredential::AccessKey)
            .map_err(|e| e.to_string()),
        "sas_token" => Ok(AzureCredential::SASToken(sas_pairs(secret))),
        "bearer_token" => Ok(AzureCredential::BearerToken(secret.to_string())),
        other => Err(format!("unknown Azure credential kind `{other}`")),
    }
}

/// The query pairs of a SAS token (`?` optional).
fn sas_pairs(token: &str) -> Vec<(String, String)> {
    url::form_urlencoded::parse(token.trim_start_matches('?').as_bytes())
        .into_owned()
        .collect()
}

/// Storage at `az://container/prefix` in Azure Blob Storage `account`. `config`
/// holds object_store `AzureConfigKey` names and values (`azure_storage_use_emulator`,
/// `azure_storage_endpoint`, ...); with [`AzureCredentials::FromEnv`] the `AZURE_*`
/// variables are read too. The emulator (Azurite) or a custom endpoint gets the
/// conditional-write check.
///
/// # Errors
/// [`StorageError::InvalidLocation`] for an unknown configuration key or options the
/// client rejects (an access key that is not base64...).
pub fn new_azure_storage(
    account: &str,
    container: &str,
    prefix: &str,
    credentials: AzureCredentials,
    config: &[(String, String)],
    settings: &ClientSettings,
) -> StorageResult<Arc<dyn Storage>> {
    let prefix = prefix.trim_matches('/');
    let url = root_url("az", container, prefix);
    let (b, custom) = azure_builder(account, container, credentials, config, settings)
        .map_err(|e| invalid(url.clone(), e))?;
    let store = b.build().map_err(|e| invalid(url.clone(), e))?;
    // Azure lists etags unquoted and answers them quoted elsewhere.
    let storage = ObjectStorage::new(Arc::new(store), prefix, url)
        .with_split_reads(settings.split_reads())
        .with_quoted_etags(true);
    Ok(checked_if(custom, Arc::new(storage)))
}

/// The `object_store` client builder of Azure Blob Storage `container` in `account`,
/// as [`new_azure_storage`] and virtual chunk containers of Azure
/// ([`crate::virtual_refs::VirtualChunkResolver`]) configure it: `settings`' retries
/// and timeouts, `config` (object_store `AzureConfigKey` names), then
/// `credentials`. With [`AzureCredentials::FromEnv`] the `AZURE_*` variables are
/// read too. Also returns whether the server is custom (the emulator, Azurite, or a
/// configured endpoint).
///
/// # Errors
/// `object_store`'s error for an unknown configuration key.
pub fn azure_builder(
    account: &str,
    container: &str,
    credentials: AzureCredentials,
    config: &[(String, String)],
    settings: &ClientSettings,
) -> object_store::Result<(MicrosoftAzureBuilder, bool)> {
    use object_store::azure::AzureConfigKey;
    super::tls::install_crypto_provider();
    let mut b = match credentials {
        AzureCredentials::FromEnv => MicrosoftAzureBuilder::from_env(),
        _ => MicrosoftAzureBuilder::new(),
    };
    for (k, v) in settings.client_config() {
        b = b.with_config(AzureConfigKey::Client(k), v);
    }
    b = b
        .with_retry(settings.retry_config())
        .with_account(account)
        .with_container_name(container);
    for (k, v) in config {
        b = b.with_config(k.parse()?, v);
    }
    b = match credentials {
        AzureCredentials::FromEnv => b,
        AzureCredentials::Anonymous => b.with_skip_signature(true),
        AzureCredentials::AccessKey(k) => b.with_access_key(k),
        AzureCredentials::SasToken(t) => b.with_sas_authorization(sas_pairs(&t)),
        AzureCredentials::BearerToken(t) => b.with_bearer_token_authorization(t),
        AzureCredentials::Refreshable(c) => b.with_credentials(c),
    };
    let flag = |v: Option<String>| v.is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    let custom = flag(b.get_config_value(&AzureConfigKey::UseEmulator))
        || b.get_config_value(&AzureConfigKey::Endpoint).is_some();
    Ok((b, custom))
}

/// Read-only storage at `base_url` on an HTTP(S) server (a repository served as
/// static files). `config` holds object_store `ClientConfigKey` names and values
/// (`allow_http`, `timeout`, ...); `headers` are sent with every request. Every
/// write fails with [`StorageError::ReadOnly`].
///
/// # Errors
/// [`StorageError::InvalidLocation`] for an unknown configuration key, a header that
/// is not valid HTTP, or a URL the client rejects.
pub fn new_http_storage(
    base_url: &str,
    config: &[(String, String)],
    headers: &[(String, String)],
    settings: &ClientSettings,
) -> StorageResult<Arc<dyn Storage>> {
    let url = base_url.trim_end_matches('/').to_string();
    let mut options = ClientOptions::new().with_allow_http(url.starts_with("http://"));
    for (k, v) in config {
        let key: ClientConfigKey = k.parse().map_err(|e| invalid(url.clone(), e))?;
        options = options.with_config(key, v);
    }
    let options = with_headers(options, headers, &url)?;
    super::tls::install_crypto_provider();
    let store = HttpBuilder::new()
        .with_url(url.clone())
        .with_client_options(settings.client_options(options))
        .with_retry(settings.retry_config())
        .build()
        .map_err(|e| invalid(url.clone(), e))?;
    let storage =
        ObjectStorage::new(Arc::new(store), "", url).with_split_reads(settings.split_reads());
    Ok(Arc::new(ReadOnlyStorage::new(Arc::new(storage))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug)]
    struct Counting {
        calls: Arc<AtomicUsize>,
        expires_in: Option<chrono::Duration>,
    }

    impl CredentialFetcher<GcpCredential> for Counting {
        fn fetch(&self) -> BoxFuture<'static, Result<Expiring<GcpCredential>, String>> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            let expires_after = self.expires_in.map(|d| Utc::now() + d);
            Box::pin(async move {
                Ok(Expiring {
                    credential: GcpCredential {
                        bearer: format!("token-{n}"),
                    },
                    expires_after,
                })
            })
        }
    }

    #[tokio::test]
    async fn refreshing_credentials_are_cached_until_they_expire() {
        let calls = Arc::new(AtomicUsize::new(0));
        let p = RefreshingCredentials::new(
            Arc::new(Counting {
                calls: Arc::clone(&calls),
                expires_in: None,
            }),
            None,
        );
        assert_eq!(p.get_credential().await.unwrap().bearer, "token-0");
        assert_eq!(p.get_credential().await.unwrap().bearer, "token-0");
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        // Already expired when fetched: every request fetches again.
        let calls = Arc::new(AtomicUsize::new(0));
        let p = RefreshingCredentials::new(
            Arc::new(Counting {
                calls: Arc::clone(&calls),
                expires_in: Some(chrono::Duration::seconds(-1)),
            }),
            None,
        );
        p.get_credential().await.unwrap();
        p.get_credential().await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_initial_credential_serves_until_it_expires() {
        let calls = Arc::new(AtomicUsize::new(0));
        let initial = Expiring {
            credential: GcpCredential {
                bearer: "scattered".into(),
            },
            expires_after: Some(Utc::now() + chrono::Duration::hours(1)),
        };
        let p = RefreshingCredentials::new(
            Arc::new(Counting {
                calls: Arc::clone(&calls),
                expires_in: None,
            }),
            Some(initial),
        );
        assert_eq!(p.get_credential().await.unwrap().bearer, "scattered");
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }

    #[derive(Debug)]
    struct Failing;

    impl CredentialFetcher<GcpCredential> for Failing {
        fn fetch(&self) -> BoxFuture<'static, Result<Expiring<GcpCredential>, String>> {
            Box::pin(async { Err("no credentials today".to_string()) })
        }
    }

    #[tokio::test]
    async fn a_failing_fetch_is_a_generic_error_with_its_message() {
        let p = RefreshingCredentials::new(Arc::new(Failing), None);
        let e = p.get_credential().await.unwrap_err();
        assert!(matches!(e, object_store::Error::Generic { .. }));
        assert!(e.to_string().contains("no credentials today"), "{e}");
    }

    #[test]
    fn settings_map_to_object_store() {
        let s = ClientSettings {
            max_tries: Some(1),
            initial_backoff_ms: Some(5),
            max_backoff_ms: Some(50),
            operation_timeout_ms: Some(1_000),
            ..Default::default()
        };
        let r = s.retry_config();
        assert_eq!(r.max_retries, 0);
        assert_eq!(r.backoff.init_backoff, Duration::from_millis(5));
        assert_eq!(r.backoff.max_backoff, Duration::from_millis(50));
        assert_eq!(r.retry_timeout, Duration::from_secs(1));
        assert_eq!(ClientSettings::default().retry_config().max_retries, 10);
        let t = ClientSettings {
            connect_timeout_ms: Some(250),
            read_timeout_ms: Some(0),
            ..Default::default()
        };
        assert_eq!(
            t.client_config(),
            vec![
                (ClientConfigKey::ConnectTimeout, "250ms".to_string()),
                (ClientConfigKey::ReadTimeout, "100000h".to_string())
            ]
        );
        assert!(ClientSettings::default().client_config().is_empty());
    }

    #[test]
    fn azure_credentials_parse() {
        assert!(matches!(
            azure_credential("sas_token", "?sv=1&sig=a%2Bb"),
            Ok(AzureCredential::SASToken(p)) if p == vec![("sv".to_string(), "1".to_string()), ("sig".to_string(), "a+b".to_string())]
        ));
        assert!(azure_credential("access_key", "not base64!").is_err());
        assert!(matches!(
            azure_credential("bearer_token", "t"),
            Ok(AzureCredential::BearerToken(t)) if t == "t"
        ));
    }

    #[test]
    fn unknown_config_keys_are_invalid_locations() {
        let e = new_gcs_storage(
            "b",
            "p",
            GcsCredentials::Anonymous,
            &[("no_such_key".into(), "x".into())],
            &ClientSettings::default(),
        )
        .unwrap_err();
        assert!(matches!(e, StorageError::InvalidLocation { .. }), "{e}");
        let e = new_http_storage(
            "http://127.0.0.1:1/repo",
            &[],
            &[("bad header".into(), "x".into())],
            &ClientSettings::default(),
        )
        .unwrap_err();
        assert!(matches!(e, StorageError::InvalidLocation { .. }), "{e}");
    }
}
