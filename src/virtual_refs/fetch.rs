//! Reading virtual chunks by byte range through `object_store`, with checksum
//! preconditions.
//!
//! Reads are bounded against hostile or broken servers:
//!
//! - *Memory*: a response body is read as a stream and never beyond the range the
//!   request asked for; a longer body stops the read with
//!   [`VirtualChunkError::OverlongResponse`] (a body that disagrees with the range in
//!   its `Content-Range`, or a `200` instead of a `206`, is refused by `object_store`
//!   before the body is read). Memory per request is at most the requested range.
//! - *Time*: every request, with its retries and the size check that may follow it,
//!   must finish within the resolver's read deadline
//!   ([`DEFAULT_READ_DEADLINE`], [`VirtualChunkResolver::with_read_deadline`]), or
//!   fails with [`VirtualChunkError::DeadlineExceeded`].
//! - *Retries*: only failures that can pass are retried (by `object_store`: server
//!   errors, `429`, timeouts, dropped connections, within the deadline). A missing
//!   object (`404`), refused access (`401`, `403`), a failed checksum precondition or
//!   a refused redirect fail at once, and a merged request that fails so is not
//!   repeated chunk by chunk.

use std::collections::HashMap;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use chrono::{TimeZone, Utc};
use futures::StreamExt;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse, HttpService,
};
use object_store::http::HttpBuilder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    ClientOptions, GetOptions, GetRange, GetResultPayload, ObjectStore, ObjectStoreExt, RetryConfig,
};
use url::Url;

use super::authorization::{
    normalize_prefix, normalize_url, object_key, resolve_local, under_prefix, LocalTarget,
    VirtualAccess,
};
use super::credentials::ContainerCredentials;
use super::VirtualChunkError;
use crate::format::config::{ContainerStore, VirtualChunkContainer};
use crate::format::manifest::{Checksum, VirtualChunkRef};
use crate::storage::cloud::{azure_builder, gcs_builder, gcs_emulator_base};
use crate::storage::coalesce::{self, CoalesceOptions};
use crate::storage::credential_env::{azure_env_credentials_missing, gcs_env_credentials_missing};
use crate::storage::{AzureCredentials, ClientSettings, GcsCredentials, S3Options};

/// Default read deadline of virtual chunk reads: 60 seconds for one request (a chunk,
/// or nearby chunks of one object merged into at most
/// [`coalesce::DEFAULT_MAX_SPAN`] bytes), including its retries and the size check
/// that may follow it. Change it with [`VirtualChunkResolver::with_read_deadline`],
/// [`crate::OpenOptions::virtual_read_deadline`] or the CLI's
/// `--virtual-read-deadline SECONDS`.
pub const DEFAULT_READ_DEADLINE: Duration = Duration::from_secs(60);

/// The scheme of relative virtual chunk locations, `vcc://<container name>/<path>`
/// (Icechunk 2.x; see [`VirtualChunkResolver::expand_location`]).
pub const VCC_SCHEME: &str = "vcc://";

/// Connect timeout of one HTTP attempt, when shorter than the deadline.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Timeout of one HTTP attempt, when shorter than the deadline: a stalled attempt is
/// retried while the deadline allows.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a virtual chunk URL is read from.
struct Located<'a> {
    /// The normalized URL.
    url: String,
    /// The container covering it.
    container: &'a VirtualChunkContainer,
    /// The object store to read through.
    store: Arc<dyn ObjectStore>,
    /// The object's path in that store.
    path: Path,
}

/// One container the resolver reads through.
#[derive(Debug)]
struct Entry {
    /// The normalized URL prefix.
    prefix: String,
    container: VirtualChunkContainer,
    /// Whether the reader gave this container itself (its store settings, such as an
    /// S3 endpoint, are then the reader's choice) rather than the repository.
    trusted: bool,
}

/// Resolves virtual chunk URLs to containers, enforces the caller's authorization and
/// reads chunk bytes.
#[derive(Debug)]
pub struct VirtualChunkResolver {
    /// Containers, longest prefix first.
    containers: Vec<Entry>,
    access: VirtualAccess,
    s3_credentials: Option<S3Options>,
    /// The reader's credentials by normalized prefix, longest prefix first.
    credentials: Vec<(String, ContainerCredentials)>,
    stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
    /// The read deadline of one request with its retries.
    deadline: Duration,
}

impl VirtualChunkResolver {
    /// A resolver over the repository's `containers`, allowing only URLs under the
    /// prefixes of `access`. S3 containers take credentials from `s3_credentials` or, when
    /// `None`, from the `AWS_*` environment variables (per-prefix credentials:
    /// [`VirtualChunkResolver::with_credentials`]). Region and addressing come from the
    /// container's config; an endpoint only when the reader chose it (see
    /// [`VirtualChunkError::UntrustedEndpoint`] and
    /// [`VirtualChunkResolver::with_reader_containers`]).
    pub fn new(
        containers: Vec<VirtualChunkContainer>,
        access: VirtualAccess,
        s3_credentials: Option<S3Options>,
    ) -> Self {
        let containers = containers
            .into_iter()
            .map(|c| Entry {
                prefix: normalize_prefix(&c.url_prefix).unwrap_or_else(|_| c.url_prefix.clone()),
                container: c,
                trusted: false,
            })
            .collect();
        let mut r = VirtualChunkResolver {
            containers,
            access,
            s3_credentials,
            credentials: Vec::new(),
            stores: Mutex::new(HashMap::new()),
            deadline: DEFAULT_READ_DEADLINE,
        };
        r.sort();
        r
    }

    /// Longest prefix first, so the most specific container (and credential) wins.
    fn sort(&mut self) {
        self.containers
            .sort_by_key(|e| std::cmp::Reverse(e.prefix.len()));
        self.credentials
            .sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
    }

    /// This resolver with the reader's own containers (the containers of the
    /// configuration the reader passed when opening): a reader's container replaces
    /// the repository's of the same (normalized) URL prefix, and one the repository
    /// lacks is added. Their store settings (an S3 endpoint, region...) are trusted:
    /// the reader's credentials may be sent to their endpoint. The repository's other
    /// containers keep working, but only toward endpoints the reader chose.
    #[must_use]
    pub fn with_reader_containers(mut self, reader: Vec<VirtualChunkContainer>) -> Self {
        for c in reader {
            let prefix = normalize_prefix(&c.url_prefix).unwrap_or_else(|_| c.url_prefix.clone());
            // `s3://b` and `s3://b/` cover the same URLs.
            let same = prefix.trim_end_matches('/').to_string();
            self.containers
                .retain(|e| e.prefix.trim_end_matches('/') != same);
            self.containers.push(Entry {
                prefix,
                container: c,
                trusted: true,
            });
        }
        self.sort();
        self
    }

    /// This resolver with the reader's credentials by URL prefix (Icechunk's
    /// `containers_credentials`). A read signs with the credential of the longest of
    /// these prefixes covering the location read (path segments matched whole); with
    /// none, as [`VirtualChunkResolver::new`] says. Prefixes that do not normalize are
    /// ignored (the caller authorized them through [`VirtualAccess`], which refuses
    /// them).
    #[must_use]
    pub fn with_credentials(mut self, credentials: Vec<(String, ContainerCredentials)>) -> Self {
        self.credentials = credentials
            .into_iter()
            .filter_map(|(p, c)| Some((normalize_prefix(&p).ok()?, c)))
            .collect();
        self.sort();
        self
    }

    /// Expands a `vcc://name/relative/path` location (Icechunk 2.x's relative virtual
    /// chunk locations) to the URL it stands for: the URL prefix of the container
    /// named `name` (with a trailing `/`) followed by `relative/path` verbatim. Other
    /// locations are returned as they are. What is read, and authorized, is the
    /// expanded URL, normalized as any other ([`normalize_url`]): `..` in the relative
    /// part cannot leave the authorized prefixes.
    ///
    /// # Errors
    /// [`VirtualChunkError::NoContainer`] (naming `location`) when no container has
    /// that name or the location has no `/` after the name.
    pub fn expand_location<'a>(
        &self,
        location: &'a str,
    ) -> Result<std::borrow::Cow<'a, str>, VirtualChunkError> {
        let Some(rest) = location.strip_prefix(VCC_SCHEME) else {
            return Ok(std::borrow::Cow::Borrowed(location));
        };
        let none = || VirtualChunkError::NoContainer {
            url: location.to_string(),
        };
        let (name, relative) = rest.split_once('/').ok_or_else(none)?;
        let container = self
            .containers
            .iter()
            .map(|e| &e.container)
            .find(|c| !name.is_empty() && c.name.as_deref() == Some(name))
            .ok_or_else(none)?;
        let prefix = &container.url_prefix;
        let slash = if prefix.ends_with('/') { "" } else { "/" };
        Ok(std::borrow::Cow::Owned(format!(
            "{prefix}{slash}{relative}"
        )))
    }

    /// The reader's credential for a normalized URL, with its prefix.
    fn credential_for(&self, url: &str) -> Option<&(String, ContainerCredentials)> {
        self.credentials.iter().find(|(p, _)| under_prefix(url, p))
    }

    /// This resolver with `deadline` as the read deadline: the longest one request
    /// for a virtual chunk (or for nearby chunks of one object merged into one
    /// request), with its retries and the size check that may follow it, or one
    /// [`VirtualChunkResolver::head`], may take. A zero deadline is raised to one
    /// millisecond. Default [`DEFAULT_READ_DEADLINE`].
    #[must_use]
    pub fn with_read_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline.max(Duration::from_millis(1));
        self
    }

    /// The read deadline (see [`VirtualChunkResolver::with_read_deadline`]).
    pub fn read_deadline(&self) -> Duration {
        self.deadline
    }

    /// Runs `read` (a request of `url`) under the read deadline.
    async fn within_deadline<T>(
        &self,
        url: &str,
        read: impl Future<Output = Result<T, VirtualChunkError>>,
    ) -> Result<T, VirtualChunkError> {
        match tokio::time::timeout(self.deadline, read).await {
            Ok(r) => r,
            Err(_) => Err(VirtualChunkError::DeadlineExceeded {
                url: url.to_string(),
                deadline: self.deadline,
            }),
        }
    }

    /// The container covering a normalized URL, checked against the authorization
    /// ([`VirtualAccess::allows`]: a local file is judged by its resolved path).
    ///
    /// # Errors
    /// [`VirtualChunkError::NoContainer`], [`VirtualChunkError::Unauthorized`].
    pub fn container_for(&self, url: &str) -> Result<&VirtualChunkContainer, VirtualChunkError> {
        let container = &self.covering(url)?.container;
        if !self.access.allows(url) {
            return Err(VirtualChunkError::Unauthorized {
                url: url.to_string(),
                container: container.url_prefix.clone(),
            });
        }
        Ok(container)
    }

    /// Whether a virtual chunk container of the repository covers a URL normalized by
    /// [`crate::virtual_refs::normalize_url`], authorized or not: Icechunk's
    /// `validate_container` check when a virtual ref is written.
    pub fn covers(&self, url: &str) -> bool {
        self.covering(url).is_ok()
    }

    /// The container covering a normalized URL (longest prefix), authorized or not.
    fn covering(&self, url: &str) -> Result<&Entry, VirtualChunkError> {
        self.containers
            .iter()
            .find(|e| under_prefix(url, &e.prefix))
            .ok_or_else(|| VirtualChunkError::NoContainer {
                url: url.to_string(),
            })
    }

    /// The store cached under `key`, made by `make` the first time.
    fn cached_store(
        &self,
        key: String,
        make: impl FnOnce() -> Result<Arc<dyn ObjectStore>, VirtualChunkError>,
    ) -> Result<Arc<dyn ObjectStore>, VirtualChunkError> {
        let mut stores = self.stores.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = stores.get(&key) {
            return Ok(Arc::clone(s));
        }
        let store = make()?;
        stores.insert(key, Arc::clone(&store));
        Ok(store)
    }

    /// The object store (cached) that reads the non-local URL `url` of `entry`'s
    /// container, with the reader's credentials for it.
    fn store_for(
        &self,
        entry: &Entry,
        url: &Url,
    ) -> Result<Arc<dyn ObjectStore>, VirtualChunkError> {
        let container = &entry.container;
        let raw = url.to_string();
        let credential = self.credential_for(&raw);
        let wrong_credentials =
            |c: &ContainerCredentials, store: &str| VirtualChunkError::InvalidCredentials {
                container: container.url_prefix.clone(),
                reason: format!("{} for {store} container", c.kind()),
            };
        let invalid = |reason: String| VirtualChunkError::InvalidUrl {
            url: raw.clone(),
            reason,
        };
        let base = format!("{}://{}", url.scheme(), url.authority());
        let cache_key = format!(
            "{}|{base}|{}",
            container.url_prefix,
            credential.map_or("", |(p, _)| p.as_str())
        );
        let store = self.cached_store(cache_key, || {
            let store: Arc<dyn ObjectStore> = match &container.store {
                ContainerStore::LocalFileSystem(_) => {
                    return Err(VirtualChunkError::UnsupportedStore {
                        container: container.url_prefix.clone(),
                        store: format!("a local store for a {}:// URL", url.scheme()),
                    })
                }
                ContainerStore::S3 {
                    region,
                    endpoint_url,
                    anonymous,
                    allow_http,
                    force_path_style,
                    ..
                } => {
                    let bucket = url
                        .host_str()
                        .ok_or_else(|| invalid("an s3:// URL needs a bucket".into()))?;
                    // The reader's own options: its endpoint is trusted.
                    let mut opts = self
                        .s3_credentials
                        .clone()
                        .unwrap_or_else(S3Options::from_env);
                    let untrusted = |what: String| VirtualChunkError::UntrustedEndpoint {
                        container: container.url_prefix.clone(),
                        endpoint: what,
                    };
                    if let Some(e) = endpoint_url {
                        if !entry.trusted && !same_endpoint(e, opts.endpoint.as_deref()) {
                            return Err(untrusted(format!("the endpoint `{e}`")));
                        }
                        opts.endpoint = Some(e.clone());
                    }
                    if let Some(r) = region {
                        // With no endpoint the host is built from the region.
                        if !entry.trusted && !plain_region(r) {
                            return Err(untrusted(format!("the region `{r}`")));
                        }
                        opts.region = Some(r.clone());
                    }
                    opts.allow_http = opts.allow_http || *allow_http;
                    opts.force_path_style = opts.force_path_style || *force_path_style;
                    let mut provider = None;
                    let clear_keys = |o: &mut S3Options| {
                        o.access_key_id = None;
                        o.secret_access_key = None;
                        o.session_token = None;
                    };
                    match credential.map(|(_, c)| c) {
                        None => opts.anonymous = *anonymous,
                        Some(ContainerCredentials::S3FromEnv) => {
                            let env = S3Options::from_env();
                            opts.access_key_id = env.access_key_id;
                            opts.secret_access_key = env.secret_access_key;
                            opts.session_token = env.session_token;
                            opts.anonymous = false;
                        }
                        Some(ContainerCredentials::S3Anonymous) => {
                            clear_keys(&mut opts);
                            opts.anonymous = true;
                        }
                        Some(ContainerCredentials::S3Static {
                            access_key_id,
                            secret_access_key,
                            session_token,
                        }) => {
                            opts.access_key_id = Some(access_key_id.clone());
                            opts.secret_access_key = Some(secret_access_key.clone());
                            opts.session_token = session_token.clone();
                            opts.anonymous = false;
                        }
                        Some(ContainerCredentials::S3Refreshable(p)) => {
                            clear_keys(&mut opts);
                            opts.anonymous = false;
                            provider = Some(Arc::clone(p));
                        }
                        Some(other) => return Err(wrong_credentials(other, "an S3")),
                    }
                    // S3 never needs a redirect: every one is refused (a redirect
                    // could lead outside the authorized bucket and endpoint).
                    let mut b = opts
                        .builder(bucket)
                        .with_retry(self.retry_config())
                        .with_http_connector(self.connector(opts.allow_http, false));
                    if let Some(p) = provider {
                        b = b.with_credentials(p);
                    }
                    Arc::new(b.build().map_err(|e| invalid(e.to_string()))?)
                }
                ContainerStore::Http => {
                    if let Some((_, c)) =
                        credential.filter(|(_, c)| !matches!(c, ContainerCredentials::HttpAccess))
                    {
                        return Err(wrong_credentials(c, "an HTTP"));
                    }
                    // The container's URL says whether it is plain HTTP.
                    let allow_http = url.scheme() == "http";
                    Arc::new(
                        HttpBuilder::new()
                            .with_client_options(ClientOptions::new().with_allow_http(allow_http))
                            .with_retry(self.retry_config())
                            .with_http_connector(self.connector(allow_http, true))
                            .with_url(base.clone())
                            .build()
                            .map_err(|source| VirtualChunkError::Backend {
                                url: raw.clone(),
                                source: Box::new(source),
                            })?,
                    )
                }
                ContainerStore::Gcs(_) | ContainerStore::Azure(_)
                    if !scheme_fits(&container.store, url.scheme()) =>
                {
                    return Err(VirtualChunkError::UnsupportedStore {
                        container: container.url_prefix.clone(),
                        store: format!(
                            "a {} store for a {}:// URL",
                            store_name(&container.store),
                            url.scheme()
                        ),
                    })
                }
                ContainerStore::Gcs(opts) => {
                    let bucket = url
                        .host_str()
                        .ok_or_else(|| invalid("a gs:// URL needs a bucket".into()))?;
                    let credentials = match credential.map(|(_, c)| c) {
                        // As Icechunk 2.3.0: authorized without a credential reads
                        // anonymously.
                        None => GcsCredentials::Anonymous,
                        Some(ContainerCredentials::Gcs(c)) => c.clone(),
                        Some(other) => return Err(wrong_credentials(other, "a GCS")),
                    };
                    let (config, base) = gcs_options(entry, opts)?;
                    signer_available(
                        container,
                        matches!(credentials, GcsCredentials::FromEnv)
                            && !names_gcs_signer(&config),
                        gcs_env_credentials_missing,
                    )?;
                    let (b, _) =
                        gcs_builder(bucket, credentials, &config, &ClientSettings::default())
                            .map_err(|e| invalid(e.to_string()))?;
                    let allow_http = base.is_some_and(|b| b.starts_with("http://"));
                    // GCS never needs a redirect: every one is refused.
                    let b = b
                        .with_retry(self.retry_config())
                        .with_http_connector(self.connector(allow_http, false));
                    Arc::new(b.build().map_err(|e| invalid(e.to_string()))?)
                }
                ContainerStore::Azure(opts) => {
                    let name = url
                        .host_str()
                        .ok_or_else(|| invalid("an Azure URL needs a container".into()))?;
                    let credentials = match credential.map(|(_, c)| c) {
                        // Authorized without a credential: anonymous (Icechunk 2.3.0
                        // refuses such an Azure container).
                        None => AzureCredentials::Anonymous,
                        Some(ContainerCredentials::Azure(c)) => c.clone(),
                        Some(other) => return Err(wrong_credentials(other, "an Azure")),
                    };
                    let anonymous = matches!(credentials, AzureCredentials::Anonymous);
                    let (account, config, allow_http) = azure_options(entry, opts, anonymous)?;
                    signer_available(
                        container,
                        matches!(credentials, AzureCredentials::FromEnv)
                            && !names_azure_signer(&config),
                        azure_env_credentials_missing,
                    )?;
                    let (b, _) = azure_builder(
                        &account,
                        name,
                        credentials,
                        &config,
                        &ClientSettings::default(),
                    )
                    .map_err(|e| invalid(e.to_string()))?;
                    // Azure never needs a redirect: every one is refused.
                    let b = b
                        .with_retry(self.retry_config())
                        .with_http_connector(self.connector(allow_http, false));
                    Arc::new(b.build().map_err(|e| invalid(e.to_string()))?)
                }
                ContainerStore::Other(kind) => {
                    return Err(VirtualChunkError::UnsupportedStore {
                        container: container.url_prefix.clone(),
                        store: kind.clone(),
                    })
                }
            };
            Ok(store)
        })?;
        Ok(store)
    }

    /// The retries of a virtual chunk request: object_store's, within the read
    /// deadline.
    fn retry_config(&self) -> RetryConfig {
        RetryConfig {
            retry_timeout: self.deadline,
            ..RetryConfig::default()
        }
    }

    /// The HTTP connector of a container's client: confined to the authorization,
    /// plain HTTP only when `allow_http`, redirects followed (inside the
    /// authorization) only when `follow_redirects`.
    fn connector(&self, allow_http: bool, follow_redirects: bool) -> ConfinedConnector {
        ConfinedConnector {
            access: self.access.clone(),
            allow_http,
            deadline: self.deadline,
            follow_redirects,
        }
    }

    /// Size, modification time and etag of the object at `url` (authorized and covered
    /// by a container, like reads), within the read deadline.
    ///
    /// # Errors
    /// As [`VirtualChunkResolver::fetch`].
    pub async fn head(&self, url: &str) -> Result<object_store::ObjectMeta, VirtualChunkError> {
        let Located {
            url, store, path, ..
        } = self.locate(url)?;
        self.within_deadline(&url, async {
            store.head(&path).await.map_err(|e| map_err(&url, e))
        })
        .await
    }

    /// Normalizes `url`, checks it is covered and authorized, and finds the object
    /// store and path to read it through. A local file is resolved (symbolic links and
    /// `..` followed), the resolved path is what is authorized, and it is also the
    /// path that is read.
    fn locate(&self, url: &str) -> Result<Located<'_>, VirtualChunkError> {
        let url = normalize_url(&self.expand_location(url)?)?;
        let entry = self.covering(&url)?;
        let container = &entry.container;
        let invalid = |reason: String| VirtualChunkError::InvalidUrl {
            url: url.clone(),
            reason,
        };
        let parsed = Url::parse(&url).map_err(|e| invalid(e.to_string()))?;
        let unauthorized = || VirtualChunkError::Unauthorized {
            url: url.clone(),
            container: container.url_prefix.clone(),
        };
        if parsed.scheme() == "file" {
            if parsed.path().ends_with('/') {
                return Err(invalid(
                    "the URL names a directory (its last path segment is empty), not a file".into(),
                ));
            }
            let file = parsed
                .to_file_path()
                .map_err(|()| invalid("not a local file path".into()))?;
            let target = resolve_local(&file)
                .map_err(|e| invalid(format!("cannot resolve the local path: {e}")))?;
            if !self.access.allows_local(target.path()) {
                return Err(unauthorized());
            }
            let real = match target {
                LocalTarget::Existing(p) => p,
                // Never opened: its last components might become a link meanwhile.
                LocalTarget::Missing(_) => {
                    return Err(VirtualChunkError::SourceMissing { url: url.clone() })
                }
            };
            if !matches!(container.store, ContainerStore::LocalFileSystem(_)) {
                return Err(VirtualChunkError::UnsupportedStore {
                    container: container.url_prefix.clone(),
                    store: "a non-local store for a file:// URL".into(),
                });
            }
            if let Some((_, c)) = self
                .credential_for(&url)
                .filter(|(_, c)| !matches!(c, ContainerCredentials::LocalFileSystemAccess))
            {
                return Err(VirtualChunkError::InvalidCredentials {
                    container: container.url_prefix.clone(),
                    reason: format!("{} for a local file system container", c.kind()),
                });
            }
            let path = Path::from_absolute_path(&real).map_err(|e| invalid(e.to_string()))?;
            let store = self.cached_store(format!("{}|file", container.url_prefix), || {
                Ok(Arc::new(LocalFileSystem::new()))
            })?;
            return Ok(Located {
                url,
                container,
                store,
                path,
            });
        }
        // The key requested is the key checked: `object_key` gives both.
        let (path, keyed) = object_key(&parsed)?;
        if !self.access.allows(&keyed) {
            return Err(unauthorized());
        }
        let store = self.store_for(entry, &parsed)?;
        Ok(Located {
            url,
            container,
            store,
            path,
        })
    }

    /// Reads the bytes of a virtual chunk ref: one request, retried only on failures
    /// that can pass, within the read deadline; at most `r.length` bytes are read.
    ///
    /// # Errors
    /// Every [`VirtualChunkError`] variant: invalid or unauthorized URL, no container,
    /// unsupported store, missing source, checksum mismatch, short read, access
    /// denied, deadline exceeded, overlong response, backend error.
    pub async fn fetch(&self, r: &VirtualChunkRef) -> Result<Bytes, VirtualChunkError> {
        self.fetch_range(r, 0, r.length).await
    }

    /// Reads bytes `start..end` (relative to the chunk) of a virtual chunk ref.
    ///
    /// # Errors
    /// As [`VirtualChunkResolver::fetch`].
    pub async fn fetch_range(
        &self,
        r: &VirtualChunkRef,
        start: u64,
        end: u64,
    ) -> Result<Bytes, VirtualChunkError> {
        let from = r.offset.saturating_add(start);
        let to = r.offset.saturating_add(end.min(r.length));
        let range = from..to;
        let mut parts = self
            .fetch_ranges(
                &r.location,
                r.checksum.as_ref(),
                std::slice::from_ref(&range),
            )
            .await?;
        Ok(parts.pop().unwrap_or_default())
    }

    /// Reads byte ranges (`start..end` in the object, in bytes) of the object at
    /// `location`, every request under the `checksum` precondition: one `Bytes` per
    /// range, in the order of `ranges`. The location is normalized, matched to its
    /// container and authorized once, before any request, exactly as for
    /// [`VirtualChunkResolver::fetch`]; nearby ranges are then read with one request
    /// each (gap and span per [`CoalesceOptions::default`], see
    /// [`crate::storage::coalesce`]), at most
    /// [`coalesce::DEFAULT_CONCURRENCY`] at once. The bytes of a gap come from the same
    /// authorized object and are dropped. Empty (or inverted) ranges read as empty
    /// bytes without a request.
    ///
    /// # Errors
    /// As [`VirtualChunkResolver::fetch`]; [`VirtualChunkError::ShortRead`] names the
    /// first range the object does not hold.
    pub async fn fetch_ranges(
        &self,
        location: &str,
        checksum: Option<&Checksum>,
        ranges: &[Range<u64>],
    ) -> Result<Vec<Bytes>, VirtualChunkError> {
        let located = self.locate(location)?;
        let wanted: Vec<usize> = (0..ranges.len())
            .filter(|&i| ranges[i].start < ranges[i].end)
            .collect();
        let mut out = vec![Bytes::new(); ranges.len()];
        if wanted.is_empty() {
            return Ok(out);
        }
        let wanted_ranges: Vec<Range<u64>> = wanted.iter().map(|&i| ranges[i].clone()).collect();
        let url = located.url.clone();
        let read = coalesce::read_coalesced(
            &wanted_ranges,
            CoalesceOptions::default(),
            coalesce::DEFAULT_CONCURRENCY,
            |span| self.fetch_span(&located, checksum, span),
            |range, available| VirtualChunkError::ShortRead {
                url: url.clone(),
                offset: range.start,
                end: range.end,
                got: available.saturating_sub(range.start),
            },
        )
        .await
        .map_err(|e| short_read_of_member(e, &wanted_ranges))?;
        for (i, bytes) in wanted.into_iter().zip(read) {
            out[i] = bytes;
        }
        Ok(out)
    }

    /// One ranged request (`span`, non-empty, object offsets in bytes) of a located
    /// object under the `checksum` precondition, within the read deadline; all of the
    /// span's bytes or an error.
    async fn fetch_span(
        &self,
        located: &Located<'_>,
        checksum: Option<&Checksum>,
        span: Range<u64>,
    ) -> Result<Bytes, VirtualChunkError> {
        self.within_deadline(&located.url, self.fetch_span_now(located, checksum, span))
            .await
    }

    /// [`Self::fetch_span`] without the deadline.
    async fn fetch_span_now(
        &self,
        located: &Located<'_>,
        checksum: Option<&Checksum>,
        span: Range<u64>,
    ) -> Result<Bytes, VirtualChunkError> {
        let Located {
            url,
            container,
            store,
            path,
        } = located;
        let (from, to) = (span.start, span.end);
        let mut opts = GetOptions::new().with_range(Some(GetRange::Bounded(span)));
        match checksum {
            Some(Checksum::ETag(e)) => {
                opts = opts.with_if_match(Some(if_match_value(&container.store, e)));
            }
            Some(Checksum::LastModified(secs)) => {
                // As Icechunk: the object must not be modified after that second
                // (writers round sub-second modification times up).
                let t = Utc
                    .timestamp_opt(i64::from(*secs), 0)
                    .single()
                    .unwrap_or_else(Utc::now);
                opts = opts.with_if_unmodified_since(Some(t));
            }
            None => {}
        }
        let res = match store.get_opts(path, opts).await {
            Ok(res) => res,
            Err(e) => {
                // A range starting past the end fails on most backends with an
                // unspecific error: report it as the short read it is. Errors that say
                // what they are (missing, denied, range not supported, precondition)
                // need no second request.
                let unspecific = matches!(e, object_store::Error::Generic { .. });
                let err = map_err(url, e);
                if unspecific && matches!(err, VirtualChunkError::Backend { .. }) {
                    if let Ok(meta) = store.head(path).await {
                        if meta.size < to {
                            return Err(VirtualChunkError::ShortRead {
                                url: url.clone(),
                                offset: from,
                                end: to,
                                got: meta.size.saturating_sub(from),
                            });
                        }
                    }
                }
                return Err(err);
            }
        };
        let bytes = if matches!(res.payload, GetResultPayload::Stream(_)) {
            // What the server acknowledged (its `Content-Range`, which object_store
            // checked against the request): never read past it.
            let limit = res.range.end.saturating_sub(res.range.start);
            read_at_most(res.into_stream(), limit, url, from, to).await?
        } else {
            // A local file: object_store reads exactly the range.
            res.bytes().await.map_err(|e| map_err(url, e))?
        };
        if (bytes.len() as u64) < to - from {
            return Err(VirtualChunkError::ShortRead {
                url: url.clone(),
                offset: from,
                end: to,
                got: bytes.len() as u64,
            });
        }
        Ok(bytes)
    }
}

/// Collects a response body of at most `limit` bytes (the request being for object
/// bytes `from..to`), stopping at the first byte past it.
///
/// # Errors
/// [`VirtualChunkError::OverlongResponse`] past `limit`; body errors as
/// [`map_err`].
async fn read_at_most(
    mut body: futures::stream::BoxStream<'static, object_store::Result<Bytes>>,
    limit: u64,
    url: &str,
    from: u64,
    to: u64,
) -> Result<Bytes, VirtualChunkError> {
    let mut parts: Vec<Bytes> = Vec::new();
    let mut total: u64 = 0;
    while let Some(part) = body.next().await {
        let part = part.map_err(|e| map_err(url, e))?;
        total = total.saturating_add(part.len() as u64);
        if total > limit {
            return Err(VirtualChunkError::OverlongResponse {
                url: url.to_string(),
                offset: from,
                end: to,
            });
        }
        parts.push(part);
    }
    Ok(match parts.len() {
        0 => Bytes::new(),
        1 => parts.swap_remove(0),
        _ => {
            let mut buf = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
            for p in &parts {
                buf.extend_from_slice(p);
            }
            Bytes::from(buf)
        }
    })
}

/// Whether a failed request of a merged span may pass chunk by chunk: only a short
/// read (some of the span's chunks may lie inside the object). Everything else (a
/// missing object, refused access, a checksum mismatch, a refused redirect, the
/// deadline, a server that keeps failing) would fail again for every chunk.
pub(crate) fn worth_retrying_per_chunk(e: &VirtualChunkError) -> bool {
    matches!(e, VirtualChunkError::ShortRead { .. })
}

impl VirtualChunkError {
    /// The same error for another chunk of the same failed request (a backend error's
    /// source, which cannot be cloned, is carried as its message).
    pub(crate) fn for_another_chunk(&self) -> VirtualChunkError {
        use VirtualChunkError as E;
        let text = |source: &object_store::Error| {
            Box::new(object_store::Error::Generic {
                store: "virtual chunk source",
                source: source.to_string().into(),
            })
        };
        match self {
            E::InvalidUrl { url, reason } => E::InvalidUrl {
                url: url.clone(),
                reason: reason.clone(),
            },
            E::NoContainer { url } => E::NoContainer { url: url.clone() },
            E::Unauthorized { url, container } => E::Unauthorized {
                url: url.clone(),
                container: container.clone(),
            },
            E::ChecksumMismatch { url } => E::ChecksumMismatch { url: url.clone() },
            E::SourceMissing { url } => E::SourceMissing { url: url.clone() },
            E::ShortRead {
                url,
                offset,
                end,
                got,
            } => E::ShortRead {
                url: url.clone(),
                offset: *offset,
                end: *end,
                got: *got,
            },
            E::UnsupportedStore { container, store } => E::UnsupportedStore {
                container: container.clone(),
                store: store.clone(),
            },
            E::RedirectRefused { url, location } => E::RedirectRefused {
                url: url.clone(),
                location: location.clone(),
            },
            E::Backend { url, source } => E::Backend {
                url: url.clone(),
                source: text(source),
            },
            E::DeadlineExceeded { url, deadline } => E::DeadlineExceeded {
                url: url.clone(),
                deadline: *deadline,
            },
            E::OverlongResponse { url, offset, end } => E::OverlongResponse {
                url: url.clone(),
                offset: *offset,
                end: *end,
            },
            E::AccessDenied { url, source } => E::AccessDenied {
                url: url.clone(),
                source: text(source),
            },
            E::UntrustedEndpoint {
                container,
                endpoint,
            } => E::UntrustedEndpoint {
                container: container.clone(),
                endpoint: endpoint.clone(),
            },
            E::InvalidCredentials { container, reason } => E::InvalidCredentials {
                container: container.clone(),
                reason: reason.clone(),
            },
        }
    }
}

/// A short read of a merged request, reported as the short read of the first of
/// `ranges` (the caller's order) that ends past the bytes the object holds; other
/// errors as they are.
fn short_read_of_member(e: VirtualChunkError, ranges: &[Range<u64>]) -> VirtualChunkError {
    match e {
        VirtualChunkError::ShortRead {
            url,
            offset,
            end,
            got,
        } => {
            let available = offset.saturating_add(got);
            match ranges.iter().find(|r| r.end > available) {
                Some(r) => VirtualChunkError::ShortRead {
                    url,
                    offset: r.start,
                    end: r.end,
                    got: available.saturating_sub(r.start),
                },
                None => VirtualChunkError::ShortRead {
                    url,
                    offset,
                    end,
                    got,
                },
            }
        }
        other => other,
    }
}

/// The `If-Match` value for an etag checksum. Local files have no real etag:
/// object_store derives one from inode, mtime and size, quoted since 0.14 but bare in
/// the 0.13 that Icechunk 1.x uses (and stores in chunk refs). Compare those without
/// regard to quotes; other stores get the etag exactly as recorded.
fn if_match_value(store: &ContainerStore, etag: &str) -> String {
    match store {
        ContainerStore::LocalFileSystem(_) => {
            let bare = etag.strip_prefix("W/").unwrap_or(etag).trim_matches('"');
            format!("\"{bare}\"")
        }
        _ => etag.to_string(),
    }
}

fn map_err(url: &str, e: object_store::Error) -> VirtualChunkError {
    // A redirect our policy refused surfaces as a source of the backend error.
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<RedirectOutside>() {
            return VirtualChunkError::RedirectRefused {
                url: url.to_string(),
                location: r.location.clone(),
            };
        }
        cur = err.source();
    }
    match e {
        object_store::Error::NotFound { .. } => VirtualChunkError::SourceMissing {
            url: url.to_string(),
        },
        object_store::Error::Precondition { .. } | object_store::Error::NotModified { .. } => {
            VirtualChunkError::ChecksumMismatch {
                url: url.to_string(),
            }
        }
        e @ (object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. }) => VirtualChunkError::AccessDenied {
            url: url.to_string(),
            source: Box::new(e),
        },
        other => VirtualChunkError::Backend {
            url: url.to_string(),
            source: Box::new(other),
        },
    }
}

/// Whether a GCS or Azure store reads URLs of `scheme` (as Icechunk 2.3.0 accepts
/// them: `gs`/`gcs` for GCS; `az`/`azure`/`abfs` for Azure).
fn scheme_fits(store: &ContainerStore, scheme: &str) -> bool {
    match store {
        ContainerStore::Gcs(_) => matches!(scheme, "gs" | "gcs"),
        ContainerStore::Azure(_) => matches!(scheme, "az" | "azure" | "abfs"),
        _ => true,
    }
}

/// A store kind's name for errors.
fn store_name(store: &ContainerStore) -> &'static str {
    match store {
        ContainerStore::LocalFileSystem(_) => "local file system",
        ContainerStore::S3 { .. } => "S3",
        ContainerStore::Http => "HTTP",
        ContainerStore::Gcs(_) => "GCS",
        ContainerStore::Azure(_) => "Azure",
        ContainerStore::Other(_) => "other",
    }
}

/// Object store options: names and string values, in order.
type Options = Vec<(String, String)>;

/// The error for a setting of a repository's container the reader did not choose.
fn untrusted(entry: &Entry, what: String) -> VirtualChunkError {
    VirtualChunkError::UntrustedEndpoint {
        container: entry.container.url_prefix.clone(),
        endpoint: what,
    }
}

/// The client options of a GCS container (Icechunk's `gcs_store(opts)`: object_store
/// `GoogleConfigKey` names; unknown names are skipped, as Icechunk does), and the
/// base URL requests go to (`None`: Google's). The bucket is always the location's
/// host (a `bucket` option is dropped). The reader's `STORAGE_EMULATOR_HOST` is the
/// base URL when the container names none.
///
/// A container the reader gave keeps every option. From a container only the
/// repository names, only the signing switch (`skip_signature`) and client settings
/// are taken; a base URL only when it is the reader's own (`STORAGE_EMULATOR_HOST`);
/// any other option (credentials: service account, key, application credentials,
/// bearer token) is refused.
///
/// # Errors
/// [`VirtualChunkError::UntrustedEndpoint`] for a refused option.
fn gcs_options(
    entry: &Entry,
    opts: &[(String, String)],
) -> Result<(Options, Option<String>), VirtualChunkError> {
    use object_store::gcp::GoogleConfigKey as K;
    let reader = gcs_emulator_base();
    let mut config = Vec::new();
    let mut base = None;
    for (k, v) in opts {
        let Ok(key) = k.parse::<K>() else { continue };
        match key {
            K::Bucket => continue,
            K::BaseUrl => {
                if !entry.trusted && !same_endpoint(v, reader.as_deref()) {
                    return Err(untrusted(entry, format!("the endpoint `{v}`")));
                }
                base = Some(v.clone());
            }
            K::SkipSignature | K::Client(_) => {}
            _ if entry.trusted => {}
            _ => return Err(untrusted(entry, format!("the option `{k}`"))),
        }
        config.push((k.clone(), v.clone()));
    }
    if base.is_none() {
        if let Some(r) = reader {
            config.push(("google_base_url".into(), r.clone()));
            base = Some(r);
        }
    }
    Ok((config, base))
}

/// Refuses at once a container whose client would sign with credentials from the
/// environment (`from_env`) when `missing` finds the environment has none
/// ([`crate::storage::credential_env`]): never a wait on a metadata server or
/// managed identity endpoint this machine lacks.
///
/// # Errors
/// [`VirtualChunkError::InvalidCredentials`] naming what is missing.
fn signer_available(
    container: &VirtualChunkContainer,
    from_env: bool,
    missing: fn() -> Option<String>,
) -> Result<(), VirtualChunkError> {
    match from_env.then(missing).flatten() {
        Some(reason) => Err(VirtualChunkError::InvalidCredentials {
            container: container.url_prefix.clone(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Whether a GCS container's client options (object_store `GoogleConfigKey` names)
/// say how to sign requests, or not to: a service account, a key, application
/// credentials, or `skip_signature` on.
fn names_gcs_signer(config: &Options) -> bool {
    use object_store::gcp::GoogleConfigKey as K;
    config.iter().any(|(k, v)| match k.parse::<K>() {
        Ok(K::ServiceAccount | K::ServiceAccountKey | K::ApplicationCredentials) => true,
        Ok(K::SkipSignature) => flag(v),
        _ => false,
    })
}

/// Whether an Azure container's client options (object_store `AzureConfigKey`
/// names) say how to sign requests, or not to: a key, SAS, token, service
/// principal, federated token, the Azure CLI, a managed identity endpoint, the
/// emulator, or `skip_signature` on.
fn names_azure_signer(config: &Options) -> bool {
    use object_store::azure::AzureConfigKey as K;
    config.iter().any(|(k, v)| match k.parse::<K>() {
        Ok(
            K::AccessKey
            | K::SasKey
            | K::Token
            | K::ClientSecret
            | K::FederatedTokenFile
            | K::MsiEndpoint
            | K::MsiResourceId
            | K::UseFabricEndpoint,
        ) => true,
        Ok(K::UseEmulator | K::UseAzureCli | K::SkipSignature) => flag(v),
        _ => false,
    })
}

/// A truthy object_store flag value (`true`, `1`, any case).
fn flag(v: &str) -> bool {
    v == "1" || v.eq_ignore_ascii_case("true")
}

/// The account, client options and plain-HTTP switch of an Azure container
/// (Icechunk's `azure_store(account=..., config=...)`: `account` and object_store
/// `AzureConfigKey` names; unknown names are skipped, as Icechunk does). The
/// container is always the location's host (a `container_name` option is dropped).
/// The reader's `AZURE_STORAGE_USE_EMULATOR` and `AZURE_STORAGE_ENDPOINT` apply when
/// the container sets neither (the emulator's address then comes from the reader's
/// `AZURITE_BLOB_STORAGE_URL`, as object_store reads it).
///
/// A container the reader gave keeps every option. From a container only the
/// repository names: the emulator switch and the endpoint only when they are the
/// reader's own; the account (which picks the host,
/// `<account>.blob.core.windows.net`) with credentials only when it is the reader's
/// `AZURE_STORAGE_ACCOUNT_NAME` or the reader's emulator serves it (anonymous reads
/// send no secret and may go to any account); client settings, `skip_signature` and
/// `disable_tagging`; any other option (credentials, identity endpoints, another
/// host) is refused.
///
/// # Errors
/// [`VirtualChunkError::UntrustedEndpoint`] for a refused option or account;
/// [`VirtualChunkError::UnsupportedStore`] when no account is named.
fn azure_options(
    entry: &Entry,
    opts: &[(String, String)],
    anonymous: bool,
) -> Result<(String, Options, bool), VirtualChunkError> {
    use object_store::azure::AzureConfigKey as K;
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let reader_emulator = env("AZURE_STORAGE_USE_EMULATOR").is_some_and(|v| flag(&v));
    let reader_endpoint = env("AZURE_STORAGE_ENDPOINT").or_else(|| env("AZURE_ENDPOINT"));
    let mut account = None;
    let mut config = Vec::new();
    let (mut emulator, mut endpoint) = (None, None);
    for (k, v) in opts {
        if k == "account" {
            account = Some(v.clone());
            continue;
        }
        let Ok(key) = k.parse::<K>() else { continue };
        match key {
            K::ContainerName => continue,
            K::AccountName => {
                account = Some(v.clone());
                continue;
            }
            K::UseEmulator => {
                if !entry.trusted && flag(v) && !reader_emulator {
                    return Err(untrusted(entry, format!("the emulator (`{k}: {v}`)")));
                }
                emulator = Some(flag(v));
            }
            K::Endpoint => {
                if !entry.trusted && !same_endpoint(v, reader_endpoint.as_deref()) {
                    return Err(untrusted(entry, format!("the endpoint `{v}`")));
                }
                endpoint = Some(v.clone());
            }
            K::SkipSignature | K::DisableTagging | K::Client(_) => {}
            _ if entry.trusted => {}
            _ => return Err(untrusted(entry, format!("the option `{k}`"))),
        }
        config.push((k.clone(), v.clone()));
    }
    if emulator.is_none() && endpoint.is_none() {
        if reader_emulator {
            config.push(("azure_storage_use_emulator".into(), "true".into()));
            emulator = Some(true);
        } else if let Some(e) = &reader_endpoint {
            config.push(("azure_storage_endpoint".into(), e.clone()));
            endpoint = Some(e.clone());
        }
    }
    let emulator = emulator.unwrap_or(false);
    let account = match account {
        Some(a) => a,
        // The emulator has one well-known account.
        None if emulator => "devstoreaccount1".to_string(),
        None => {
            return Err(VirtualChunkError::UnsupportedStore {
                container: entry.container.url_prefix.clone(),
                store: "an Azure store naming no `account`".into(),
            })
        }
    };
    let on_readers_server = emulator || endpoint.is_some();
    if !entry.trusted
        && !anonymous
        && !on_readers_server
        && env("AZURE_STORAGE_ACCOUNT_NAME").as_deref() != Some(account.as_str())
    {
        return Err(untrusted(entry, format!("the account `{account}`")));
    }
    let allow_http = emulator || endpoint.is_some_and(|e| e.starts_with("http://"));
    Ok((account, config, allow_http))
}

/// Whether a repository's S3 `endpoint` is the reader's own (`reader`): same scheme,
/// host, port and path, ignoring case and a trailing `/`.
fn same_endpoint(endpoint: &str, reader: Option<&str>) -> bool {
    let canon = |e: &str| {
        Url::parse(e).ok().map(|u| {
            (
                u.scheme().to_string(),
                u.host_str().map(str::to_ascii_lowercase),
                u.port_or_known_default(),
                u.path().trim_end_matches('/').to_string(),
            )
        })
    };
    match (canon(endpoint), reader.and_then(canon)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Whether an S3 region is a plain name (letters, digits, `-`, `_`): with no
/// endpoint, object_store builds the host from it (`s3.<region>.amazonaws.com`), so
/// a region from the repository must not be able to name another host.
fn plain_region(region: &str) -> bool {
    !region.is_empty()
        && region.len() <= 64
        && region
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// At most this many redirects are followed for one virtual chunk request.
const MAX_REDIRECTS: usize = 10;

/// The error the redirect policy returns for a location outside the authorization.
#[derive(Debug, thiserror::Error)]
#[error("redirect to `{location}` leaves the authorized prefixes")]
struct RedirectOutside {
    location: String,
}

/// Builds the HTTP client of virtual HTTP(S) containers: like object_store's default
/// (timeouts, no transparent decompression) but following a redirect only when the
/// new location, normalized, is itself authorized (see the module documentation of
/// [`super::authorization`]). No attempt outlasts the read deadline.
#[derive(Debug)]
struct ConfinedConnector {
    access: VirtualAccess,
    allow_http: bool,
    deadline: Duration,
    /// Whether redirects inside the authorization are followed (HTTP containers);
    /// `false` refuses every redirect (S3, which never needs one).
    follow_redirects: bool,
}

impl HttpConnector for ConfinedConnector {
    fn connect(&self, _options: &ClientOptions) -> object_store::Result<HttpClient> {
        let access = self.access.clone();
        let follow = self.follow_redirects;
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            let location = attempt.url().to_string();
            let inside = normalize_url(&location)
                .is_ok_and(|n| !n.starts_with("file:") && access.allows(&n));
            if follow && inside && attempt.previous().len() <= MAX_REDIRECTS {
                attempt.follow()
            } else {
                attempt.error(RedirectOutside { location })
            }
        });
        crate::storage::tls::install_crypto_provider();
        let client = reqwest::Client::builder()
            .redirect(policy)
            .https_only(!self.allow_http)
            .connect_timeout(CONNECT_TIMEOUT.min(self.deadline))
            .timeout(ATTEMPT_TIMEOUT.min(self.deadline))
            // As object_store: compression would falsify Content-Length.
            .no_gzip()
            .no_brotli()
            .no_zstd()
            .no_deflate()
            .build()
            .map_err(|e| object_store::Error::Generic {
                store: "HTTP",
                source: Box::new(e),
            })?;
        Ok(HttpClient::new(ConfinedClient(client)))
    }
}

/// The client of [`ConfinedConnector`]: a redirect the client did not follow (one to
/// a scheme it cannot follow, such as `file://`) becomes a [`RedirectOutside`] error
/// instead of a bare status.
#[derive(Debug)]
struct ConfinedClient(reqwest::Client);

impl HttpService for ConfinedClient {
    fn call<'a, 'b>(
        &'a self,
        req: HttpRequest,
    ) -> Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(async move {
            let res = self.0.call(req).await?;
            let status = res.status();
            if status.is_redirection() && status.as_u16() != 304 {
                if let Some(location) = res.headers().get("location") {
                    return Err(HttpError::new(
                        HttpErrorKind::Unknown,
                        RedirectOutside {
                            location: String::from_utf8_lossy(location.as_bytes()).into_owned(),
                        },
                    ));
                }
            }
            Ok(res)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(store: ContainerStore, trusted: bool) -> Entry {
        Entry {
            prefix: "x://c/".into(),
            container: VirtualChunkContainer {
                name: None,
                url_prefix: "x://c/".into(),
                store,
            },
            trusted,
        }
    }

    fn opts(pairs: &[(&str, &str)]) -> Options {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn refused(r: Result<impl std::fmt::Debug, VirtualChunkError>, what: &str) {
        match r {
            Err(VirtualChunkError::UntrustedEndpoint { endpoint, .. }) => {
                assert!(endpoint.contains(what), "{endpoint} lacks {what}")
            }
            other => panic!("expected UntrustedEndpoint naming {what}, got {other:?}"),
        }
    }

    /// A repository's Azure account with the reader's credentials names the host
    /// they go to: refused unless the reader chose it; anonymous reads may go to any
    /// account; a reader's container keeps whatever it names.
    #[test]
    fn azure_accounts_and_options_from_the_repository() {
        // No emulator (explicitly): the account picks `<account>.blob.core.windows.net`.
        let o = opts(&[
            ("account", "not-the-readers-account"),
            ("azure_storage_use_emulator", "false"),
        ]);
        let e = entry(ContainerStore::Azure(o.clone()), false);
        refused(azure_options(&e, &o, false), "not-the-readers-account");
        let (account, _, allow_http) = azure_options(&e, &o, true).unwrap();
        assert_eq!(account, "not-the-readers-account");
        assert!(!allow_http);
        let mine = entry(ContainerStore::Azure(o.clone()), true);
        assert!(azure_options(&mine, &o, false).is_ok());
        // Credential and identity options from the repository are refused.
        for key in [
            "azure_storage_account_key",
            "azure_msi_endpoint",
            "azure_client_secret",
        ] {
            let o = opts(&[("account", "a"), (key, "v")]);
            let e = entry(ContainerStore::Azure(o.clone()), false);
            refused(azure_options(&e, &o, true), key);
            assert!(
                azure_options(&entry(ContainerStore::Azure(o.clone()), true), &o, true).is_ok()
            );
        }
        let o = opts(&[
            ("account", "a"),
            ("azure_storage_endpoint", "http://203.0.113.9:1/a"),
        ]);
        let e = entry(ContainerStore::Azure(o.clone()), false);
        refused(azure_options(&e, &o, true), "203.0.113.9");
        // Unknown options are skipped (as Icechunk), client settings kept; no
        // account and no emulator is an unsupported store.
        let o = opts(&[
            ("no_such_option", "1"),
            ("azure_storage_use_emulator", "false"),
        ]);
        let e = entry(ContainerStore::Azure(o.clone()), false);
        assert!(matches!(
            azure_options(&e, &o, true),
            Err(VirtualChunkError::UnsupportedStore { .. })
        ));
    }

    /// A repository's GCS base URL or credential option is refused; the signing
    /// switch and client settings are taken; a `bucket` option never replaces the
    /// location's bucket.
    #[test]
    fn gcs_options_from_the_repository() {
        let o = opts(&[("google_base_url", "http://203.0.113.9:1")]);
        refused(
            gcs_options(&entry(ContainerStore::Gcs(o.clone()), false), &o),
            "203.0.113.9",
        );
        let (config, base) = gcs_options(&entry(ContainerStore::Gcs(o.clone()), true), &o).unwrap();
        assert_eq!(base.as_deref(), Some("http://203.0.113.9:1"));
        assert_eq!(config, o);
        for key in [
            "google_service_account",
            "google_service_account_key",
            "google_application_credentials",
            "google_bearer_token",
        ] {
            let o = opts(&[(key, "v")]);
            refused(
                gcs_options(&entry(ContainerStore::Gcs(o.clone()), false), &o),
                key,
            );
        }
        let o = opts(&[
            ("google_skip_signature", "true"),
            ("timeout", "5s"),
            ("bucket", "other"),
            ("no_such_option", "1"),
        ]);
        let (config, _) = gcs_options(&entry(ContainerStore::Gcs(o.clone()), false), &o).unwrap();
        let keys: Vec<&str> = config.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(&keys[..2], ["google_skip_signature", "timeout"]);
        assert!(!keys.contains(&"bucket") && !keys.contains(&"no_such_option"));
    }

    #[test]
    fn stores_read_their_own_schemes() {
        let gcs = ContainerStore::Gcs(Vec::new());
        let azure = ContainerStore::Azure(Vec::new());
        assert!(scheme_fits(&gcs, "gs") && scheme_fits(&gcs, "gcs") && !scheme_fits(&gcs, "s3"));
        for s in ["az", "azure", "abfs"] {
            assert!(scheme_fits(&azure, s));
        }
        assert!(!scheme_fits(&azure, "gs"));
    }
}
