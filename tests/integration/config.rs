//! The repository configuration: concurrent `config.yaml` writes.

use crate::common;
use std::sync::Arc;

use floe::storage::new_in_memory_storage;
use floe::{Error, Repository};

#[tokio::test]
async fn a_lost_config_write_is_its_own_error() {
    let storage = new_in_memory_storage();
    let first = common::create_spec1(Arc::clone(&storage), None).await;
    let second = Repository::open(Arc::clone(&storage)).await.unwrap();
    // Neither handle has seen a config.yaml: the first creates it, the second loses.
    first.save_config(first.config()).await.unwrap();
    let err = second.save_config(second.config()).await.unwrap_err();
    assert!(matches!(err, Error::ConfigChanged), "{err}");
    // Both have now seen a version: the first swaps it, the stale second loses again.
    let reopened = Repository::open(Arc::clone(&storage)).await.unwrap();
    first.save_config(first.config()).await.unwrap();
    let err = reopened.save_config(reopened.config()).await.unwrap_err();
    assert!(matches!(err, Error::ConfigChanged), "{err}");
}
