//! Cloud backends beside S3 on local emulators (.ci/cloud_emulators.sh starts them):
//! the storage conformance suite on Azure Blob Storage (Azurite, which enforces
//! conditional writes), and on Google Cloud Storage (gcp-storage-emulator, which
//! does not) the refusal of every repository write. Also S3 built with settings and
//! refreshing credentials on the S3 test server, and the read-only HTTP backend.
//!
//! The emulator tests need `FLOE_TEST_AZURE_CONTAINER` (with the `AZURE_*` and
//! `AZURITE_BLOB_STORAGE_URL` variables), `FLOE_TEST_GCS_BUCKET` (with
//! `STORAGE_EMULATOR_HOST`) and `FLOE_TEST_S3_BUCKET`; they are skipped without them,
//! except in CI (`CI=true`), where that is a failure.

use crate::common;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use floe::storage::cloud::{CredentialFetcher, Expiring, RefreshingCredentials, S3Extras};
use floe::storage::conformance::storage_contract;
use floe::storage::{
    new_azure_storage, new_gcs_storage, new_http_storage, new_s3_storage_with, AzureCredentials,
    ClientSettings, GcsCredentials, S3Options, Storage, StorageError, WriteOutcome,
};
use floe::{Error, Repository};

fn unique(test: &str) -> String {
    format!("{test}-{:016x}", rand::random::<u64>())
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn azure(test: &str) -> Option<Arc<dyn Storage>> {
    let container = common::require(
        env("FLOE_TEST_AZURE_CONTAINER"),
        "FLOE_TEST_AZURE_CONTAINER",
    )?;
    let account = env("AZURE_STORAGE_ACCOUNT_NAME").unwrap_or_else(|| "devstoreaccount1".into());
    Some(
        new_azure_storage(
            &account,
            &container,
            &unique(test),
            AzureCredentials::FromEnv,
            &[],
            &ClientSettings::default(),
        )
        .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn azure_storage_conformance() {
    let Some(s) = azure("conformance") else {
        return;
    };
    assert!(s.root_url().starts_with("az://"), "{}", s.root_url());
    storage_contract(s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn azure_repository_round_trip() {
    let Some(s) = azure("repo") else {
        return;
    };
    let repo = Repository::create(Arc::clone(&s), None).await.unwrap();
    assert!(Repository::exists(s.as_ref()).await.unwrap());
    let e = Repository::create(Arc::clone(&s), None).await.unwrap_err();
    assert!(matches!(e, Error::RepositoryExists { .. }), "{e}");
    repo.create_branch("dev", repo.lookup_branch("main").await.unwrap())
        .await
        .unwrap();
    let reopened = Repository::open(s).await.unwrap();
    let mut branches = reopened.list_branches().await.unwrap();
    branches.sort();
    assert_eq!(branches, vec!["dev".to_string(), "main".to_string()]);
}

/// gcp-storage-emulator ignores `x-goog-if-generation-match` (.ci/cloudutil.py
/// gcs-check), and answers neither `HEAD` (501) nor an `ETag`, which object_store's
/// GCS client needs: floe neither reads nor writes a repository there, and every
/// attempt is a storage error, never a silent success.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gcs_emulator_refuses_repository_writes() {
    let Some(bucket) = common::require(env("FLOE_TEST_GCS_BUCKET"), "FLOE_TEST_GCS_BUCKET") else {
        return;
    };
    let one_try = ClientSettings {
        max_tries: Some(1),
        ..Default::default()
    };
    let s = new_gcs_storage(
        &bucket,
        &unique("refused"),
        GcsCredentials::FromEnv,
        &[],
        &one_try,
    )
    .unwrap();
    assert!(s.root_url().starts_with("gs://"), "{}", s.root_url());
    let e = Repository::create(Arc::clone(&s), None).await.unwrap_err();
    assert!(
        matches!(e, Error::Storage(StorageError::Backend { .. })),
        "{e}"
    );
    let e = s
        .put_if_absent("refs/x", Bytes::from_static(b"1"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            StorageError::UnsafeConditionalWrites { .. } | StorageError::Backend { .. }
        ),
        "{e}"
    );
    let e = Repository::exists(s.as_ref()).await.unwrap_err();
    assert!(
        matches!(e, Error::Storage(StorageError::Backend { .. })),
        "{e}"
    );
}

#[derive(Debug)]
struct Keys {
    calls: Arc<AtomicUsize>,
    key: String,
    secret: String,
}

impl CredentialFetcher<object_store::aws::AwsCredential> for Keys {
    fn fetch(
        &self,
    ) -> futures::future::BoxFuture<
        'static,
        Result<Expiring<object_store::aws::AwsCredential>, String>,
    > {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let credential = object_store::aws::AwsCredential {
            key_id: self.key.clone(),
            secret_key: self.secret.clone(),
            token: None,
        };
        Box::pin(async move {
            Ok(Expiring {
                credential,
                expires_after: None,
            })
        })
    }
}

/// S3 with a refreshing credential provider and explicit settings: the provider is
/// asked once and its credential serves every later request; the S3 test server's
/// conditional writes pass the check.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s3_with_refreshing_credentials_and_settings() {
    let Some(bucket) = common::s3_bucket() else {
        return;
    };
    let env_opts = S3Options::from_env();
    let mut options = env_opts.clone();
    options.access_key_id = None;
    options.secret_access_key = None;
    let calls = Arc::new(AtomicUsize::new(0));
    let provider = Arc::new(RefreshingCredentials::new(
        Arc::new(Keys {
            calls: Arc::clone(&calls),
            key: env_opts.access_key_id.clone().unwrap_or_default(),
            secret: env_opts.secret_access_key.clone().unwrap_or_default(),
        }),
        None,
    ));
    let settings = ClientSettings {
        max_tries: Some(2),
        connect_timeout_ms: Some(2_000),
        read_timeout_ms: Some(30_000),
        ..Default::default()
    };
    let s = new_s3_storage_with(
        &bucket,
        &unique("refreshing"),
        &options,
        Some(provider as _),
        &settings,
        &S3Extras::default(),
    )
    .unwrap();
    assert_eq!(
        s.put_if_absent("a", Bytes::from_static(b"1"))
            .await
            .unwrap(),
        WriteOutcome::Written(s.head("a").await.unwrap().version)
    );
    assert_eq!(
        s.put_if_absent("a", Bytes::from_static(b"2"))
            .await
            .unwrap(),
        WriteOutcome::PreconditionFailed
    );
    assert_eq!(s.get("a").await.unwrap().bytes.as_ref(), b"1");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "one fetch serves every request"
    );
}

/// HTTP storage reads a repository served as files and refuses every write before
/// a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_storage_is_read_only() {
    let s = new_http_storage(
        "http://127.0.0.1:9/repo",
        &[],
        &[("authorization".into(), "Bearer t".into())],
        &ClientSettings::default(),
    )
    .unwrap();
    let e = Repository::create(Arc::clone(&s), None).await.unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Storage(StorageError::ReadOnly { .. })
                | Error::Storage(StorageError::Backend { .. })
        ),
        "{e}"
    );
    let e = s.put("refs/x", Bytes::new()).await.unwrap_err();
    assert!(matches!(e, StorageError::ReadOnly { .. }), "{e}");
    let e = s.put_if_absent("refs/x", Bytes::new()).await.unwrap_err();
    assert!(matches!(e, StorageError::ReadOnly { .. }), "{e}");
}
