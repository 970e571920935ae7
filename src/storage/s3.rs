//! S3-compatible storage (AWS S3, MinIO, and test servers) through `object_store`'s
//! `AmazonS3`, with conditional writes by `If-None-Match: *` and `If-Match: <etag>`.

use std::sync::Arc;

use object_store::aws::{AmazonS3Builder, S3ConditionalPut};

use super::object::ObjectStorage;
use super::{Storage, StorageError, StorageResult};

/// How to reach an S3-compatible server. Fields left `None` fall back to the
/// standard `AWS_*` environment variables read by [`S3Options::from_env`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct S3Options {
    /// Endpoint URL, e.g. `http://127.0.0.1:9000` for MinIO; `None` for AWS.
    pub endpoint: Option<String>,
    /// Region name (`us-east-1` when unset).
    pub region: Option<String>,
    /// Access key id.
    pub access_key_id: Option<String>,
    /// Secret access key.
    pub secret_access_key: Option<String>,
    /// Session token for temporary credentials.
    pub session_token: Option<String>,
    /// Allow plain `http://` endpoints.
    pub allow_http: bool,
    /// Path-style addressing (`endpoint/bucket/key`), as MinIO needs; virtual-hosted
    /// style otherwise.
    pub force_path_style: bool,
    /// Send no credentials (public buckets).
    pub anonymous: bool,
    /// The most requests in flight at once on the storage
    /// ([`Storage::max_concurrent_requests`]); `None`:
    /// [`super::DEFAULT_MAX_CONCURRENT_REQUESTS`] (64). From the environment:
    /// `FLOE_S3_MAX_CONCURRENT_REQUESTS`.
    pub max_concurrent_requests: Option<usize>,
}

impl S3Options {
    /// Options from the environment: `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT`),
    /// `AWS_REGION` (or `AWS_DEFAULT_REGION`), `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ALLOW_HTTP` (`true`/`1`) and
    /// `AWS_FORCE_PATH_STYLE` / `AWS_S3_FORCE_PATH_STYLE` (`true`/`1`). A custom
    /// endpoint implies path-style addressing, and plain HTTP when its URL is `http://`.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let flag = |k: &str| var(k).is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
        let endpoint = var("AWS_ENDPOINT_URL").or_else(|| var("AWS_ENDPOINT"));
        let is_http = endpoint
            .as_deref()
            .is_some_and(|e| e.starts_with("http://"));
        S3Options {
            force_path_style: flag("AWS_FORCE_PATH_STYLE")
                || flag("AWS_S3_FORCE_PATH_STYLE")
                || endpoint.is_some(),
            allow_http: flag("AWS_ALLOW_HTTP") || is_http,
            endpoint,
            region: var("AWS_REGION").or_else(|| var("AWS_DEFAULT_REGION")),
            access_key_id: var("AWS_ACCESS_KEY_ID"),
            secret_access_key: var("AWS_SECRET_ACCESS_KEY"),
            session_token: var("AWS_SESSION_TOKEN"),
            anonymous: flag("AWS_SKIP_SIGNATURE"),
            max_concurrent_requests: var("FLOE_S3_MAX_CONCURRENT_REQUESTS")
                .and_then(|v| v.parse().ok())
                .filter(|&n: &usize| n > 0),
        }
    }

    /// An `object_store` S3 client for `bucket` with these options.
    ///
    /// # Errors
    /// [`StorageError::InvalidLocation`] when the options are rejected (bad endpoint...).
    pub fn build(&self, bucket: &str) -> StorageResult<object_store::aws::AmazonS3> {
        self.builder(bucket)
            .build()
            .map_err(|e| StorageError::InvalidLocation {
                location: format!("s3://{bucket}"),
                reason: e.to_string(),
            })
    }

    /// Whether request bodies are signed (SigV4 with the SHA-256 of each body in
    /// `x-amz-content-sha256`): only over plain HTTP, where the signature is what
    /// protects a body in transit. Over HTTPS (AWS itself, or an `https://`
    /// endpoint), TLS protects it and bodies go as `UNSIGNED-PAYLOAD`, as botocore
    /// sends them to S3 over HTTPS: no hashing of every uploaded byte (about 40 ms
    /// of CPU per 64 MiB on the 2-core development VM, which has SHA extensions).
    pub fn signs_payload(&self) -> bool {
        self.endpoint
            .as_deref()
            .is_some_and(|e| !e.to_ascii_lowercase().starts_with("https://"))
    }

    /// The `object_store` S3 builder for `bucket` with these options, before it is
    /// built: for callers that add client settings or a credential provider
    /// ([`crate::storage::cloud`]).
    pub fn builder(&self, bucket: &str) -> AmazonS3Builder {
        super::tls::install_crypto_provider();
        let mut b = AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_region(self.region.clone().unwrap_or_else(|| "us-east-1".into()))
            .with_allow_http(self.allow_http)
            .with_virtual_hosted_style_request(!self.force_path_style)
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            .with_skip_signature(self.anonymous)
            .with_unsigned_payload(!self.signs_payload());
        if let Some(e) = &self.endpoint {
            b = b.with_endpoint(e);
        }
        if let Some(k) = &self.access_key_id {
            b = b.with_access_key_id(k);
        }
        if let Some(s) = &self.secret_access_key {
            b = b.with_secret_access_key(s);
        }
        if let Some(t) = &self.session_token {
            b = b.with_token(t);
        }
        b
    }
}

/// Storage at `s3://bucket/prefix` on an S3-compatible server: one `object_store`
/// client (one HTTP connection pool) for every request of the storage, with at most
/// [`S3Options::max_concurrent_requests`] in flight.
///
/// # Errors
/// [`StorageError::InvalidLocation`] when the options are rejected.
pub fn new_s3_storage(
    bucket: &str,
    prefix: &str,
    options: S3Options,
) -> StorageResult<Arc<dyn Storage>> {
    let store = options.build(bucket)?;
    let prefix = prefix.trim_matches('/');
    let url = if prefix.is_empty() {
        format!("s3://{bucket}")
    } else {
        format!("s3://{bucket}/{prefix}")
    };
    // S3 lists keys in byte order and starts after a given key (`start-after`).
    let store = Arc::new(store);
    let region = options.region.unwrap_or_else(|| "us-east-1".into());
    Ok(Arc::new(
        ObjectStorage::new(Arc::clone(&store) as _, prefix, url)
            .with_ranged_listing(true)
            .with_s3_conditional_delete(store, region)
            .with_max_concurrent_requests(
                options
                    .max_concurrent_requests
                    .unwrap_or(super::DEFAULT_MAX_CONCURRENT_REQUESTS),
            ),
    ))
}

#[cfg(test)]
mod tests {
    use object_store::aws::AmazonS3ConfigKey;

    use super::S3Options;

    /// Bodies are signed over plain HTTP only: an `http://` endpoint signs them, AWS
    /// (no endpoint) and `https://` endpoints send `UNSIGNED-PAYLOAD`.
    #[test]
    fn payloads_are_signed_over_plain_http_only() {
        for (endpoint, signed) in [
            (None, false),
            (Some("https://s3.example.org"), false),
            (Some("HTTPS://s3.example.org"), false),
            (Some("http://127.0.0.1:9000"), true),
        ] {
            let options = S3Options {
                endpoint: endpoint.map(str::to_string),
                allow_http: signed,
                ..S3Options::default()
            };
            assert_eq!(options.signs_payload(), signed, "{endpoint:?}");
            let unsigned = options
                .builder("b")
                .get_config_value(&AmazonS3ConfigKey::UnsignedPayload);
            assert_eq!(
                unsigned.as_deref(),
                Some(if signed { "false" } else { "true" }),
                "{endpoint:?}"
            );
        }
    }
}
