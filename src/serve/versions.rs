//! The versions the server reads: a read-only session per snapshot, cached (a
//! snapshot never changes), with the consolidated group metadata built from it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::format::{NodePath, SnapshotId};
use crate::repository::{Repository, VersionSelector};
use crate::session::{Session, SessionStore};

/// Snapshots whose sessions are kept.
const CACHED_SNAPSHOTS: usize = 64;

/// One snapshot's session and store, and the `zarr.json` documents of its groups
/// with their consolidated metadata, built on first request.
#[derive(Debug)]
pub(crate) struct Version {
    pub(crate) session: Session,
    pub(crate) store: SessionStore,
    consolidated: Mutex<HashMap<NodePath, Bytes>>,
}

impl Version {
    /// The `zarr.json` of the group at `path` (`user_data`, its stored document) with
    /// zarr-python's inline `consolidated_metadata` of every node below it: keys are
    /// paths relative to the group, child groups carry an empty consolidated
    /// metadata of their own, as `zarr.consolidate_metadata` writes them. The stored
    /// bytes when they are not a JSON object.
    pub(crate) fn group_document(&self, path: &NodePath, user_data: &Bytes) -> Result<Bytes> {
        if let Some(b) = self
            .consolidated
            .lock()
            .ok()
            .and_then(|c| c.get(path).cloned())
        {
            return Ok(b);
        }
        let Ok(Value::Object(mut doc)) = serde_json::from_slice::<Value>(user_data) else {
            return Ok(user_data.clone());
        };
        let mut members = Map::new();
        for node in self.session.list_nodes_under(path)? {
            if node.path == *path {
                continue;
            }
            let rel = node.path.key_prefix();
            let rel = if path.is_root() {
                rel.to_string()
            } else {
                rel.strip_prefix(&format!("{}/", path.key_prefix()))
                    .unwrap_or(rel)
                    .to_string()
            };
            let Ok(Value::Object(mut meta)) = serde_json::from_slice::<Value>(&node.user_data)
            else {
                continue;
            };
            if node.is_group() {
                meta.insert("consolidated_metadata".into(), inline(Map::new()));
            }
            members.insert(rel, Value::Object(meta));
        }
        doc.insert("consolidated_metadata".into(), inline(members));
        let bytes = Bytes::from(serde_json::to_vec(&Value::Object(doc)).unwrap_or_default());
        if let Ok(mut c) = self.consolidated.lock() {
            c.insert(path.clone(), bytes.clone());
        }
        Ok(bytes)
    }
}

fn inline(metadata: Map<String, Value>) -> Value {
    json!({"kind": "inline", "must_understand": false, "metadata": metadata})
}

/// The cache of snapshot sessions.
#[derive(Debug)]
pub(crate) struct Versions {
    repo: Repository,
    cache: quick_cache::sync::Cache<SnapshotId, Arc<Version>>,
}

impl Versions {
    pub(crate) fn new(repo: Repository) -> Self {
        Versions {
            repo,
            cache: quick_cache::sync::Cache::new(CACHED_SNAPSHOTS),
        }
    }

    /// The version of snapshot `id`, which must exist (checked when not cached).
    ///
    /// # Errors
    /// [`Error::SnapshotNotFound`]; storage and format errors.
    pub(crate) async fn snapshot(&self, id: SnapshotId) -> Result<Arc<Version>> {
        self.cache
            .get_or_insert_async(&id, async {
                let session = self
                    .repo
                    .readonly_session(&VersionSelector::Snapshot(id))
                    .await?;
                let store = session.store();
                Ok::<_, Error>(Arc::new(Version {
                    session,
                    store,
                    consolidated: Mutex::new(HashMap::new()),
                }))
            })
            .await
    }

    /// The snapshot a selector names now (branches and tags are read anew).
    ///
    /// # Errors
    /// As [`Repository::resolve`].
    pub(crate) async fn resolve(&self, selector: &VersionSelector) -> Result<SnapshotId> {
        self.repo.resolve(selector).await
    }
}
