//! Turning a change set into a new snapshot (flush), and the commit point: the
//! compare-and-swap of the branch ref.
//!
//! Spec: Icechunk specification, "Write New Snapshot" and "Creating and Updating
//! Branches": write chunks (done as they are set), manifests, the transaction log, the
//! snapshot, then conditionally update `refs/branch.<name>/ref.json`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};

use crate::assets::AssetManager;
use crate::error::Result;
use crate::format::envelope::FileType;
use crate::format::snapshot::{
    now_micros, ManifestFileInfo, ManifestRef, NodeData, NodeSnapshot, Snapshot,
};
use crate::format::transaction_log::TransactionLog;
use crate::format::{ManifestId, NodePath, SnapshotId};

use super::change_set::ChangeSet;
use super::manifest_split::{write_array_manifests, ArrayManifests, ManifestLayouts};
use super::overlay::apply_node_changes;

/// How many arrays' manifests are merged, encoded and written at once (bounds the
/// memory of a wide commit and its requests in flight).
const MANIFEST_WRITE_CONCURRENCY: usize = 32;

/// Above this many chunk changes, a commit encodes its transaction log straight from
/// the change set (no `TransactionLog` copy of every chunk index, and none kept in
/// the asset cache).
const LOG_COPY_MAX_CHUNKS: usize = 65_536;

/// Where a new snapshot goes in the history.
#[derive(Clone, Debug)]
pub(crate) enum CommitMethod<'a> {
    /// A child of the base snapshot.
    NewCommit,
    /// A replacement of the base snapshot (the branch tip), given with its transaction
    /// log: the new snapshot's parent is the base's parent, and its transaction log
    /// records the base's changes followed by the new ones.
    Amend(&'a TransactionLog),
    /// A child of the base snapshot that moved these nodes (a rearrange session; the
    /// base is the moved view).
    Moves(Vec<crate::format::transaction_log::MovedNode>),
}

/// Builds and writes the new snapshot `new_id` for `changes` on top of `base`: writes
/// one new manifest per array whose chunks changed (or whose shape shrank), reuses
/// every other manifest as it is, then writes the transaction log and the snapshot.
/// Nothing is visible until the branch moves ([`crate::refs::RefStore::commit`], the
/// commit point). Each array's manifests follow the layout `layouts` gives it (the
/// configuration's `manifest.splitting`, or floe's own).
///
/// # Errors
/// Storage and format errors.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn flush(
    assets: &AssetManager,
    layouts: &ManifestLayouts,
    base: &Snapshot,
    changes: &Arc<ChangeSet>,
    new_id: SnapshotId,
    message: &str,
    metadata: BTreeMap<String, serde_json::Value>,
    method: CommitMethod<'_>,
) -> Result<Arc<Snapshot>> {
    let mut nodes = apply_node_changes(base, changes);

    // Arrays whose manifests change: those with chunk changes, and those resized so
    // that refs fall outside the new shape or the manifest layout moved.
    let mut rewrite: Vec<(NodePath, bool)> = Vec::new();
    for (path, node) in &nodes {
        let Some(a) = node.array() else { continue };
        let chunk_changes = changes
            .array_chunks(&node.id)
            .is_some_and(|c| !c.is_empty());
        let old = base
            .nodes
            .get(path)
            .filter(|o| o.id == node.id)
            .and_then(NodeSnapshot::array);
        let rewrite_all = old.is_some_and(|o| {
            let shrunk = o
                .shape
                .iter()
                .zip(&a.shape)
                .any(|(before, after)| after.num_chunks() < before.num_chunks());
            o.shape != a.shape && (shrunk || layouts.layout(path, o) != layouts.layout(path, a))
        });
        if chunk_changes || rewrite_all {
            rewrite.push((path.clone(), rewrite_all));
        }
    }

    // A large log of a new commit is encoded from the change set's chunk indices;
    // an amend merges the replaced commit's log, so it is built in full.
    let stream_chunks = changes.num_chunk_changes() > LOG_COPY_MAX_CHUNKS
        && !matches!(method, CommitMethod::Amend(_));
    let own_log = |id| {
        if stream_chunks {
            changes.transaction_log_of_nodes(id)
        } else {
            changes.transaction_log(id)
        }
    };
    let (parent_id, log) = match method {
        CommitMethod::NewCommit => (Some(base.id), own_log(new_id)),
        CommitMethod::Amend(previous) => (base.parent_id, previous.then(&own_log(new_id), new_id)),
        CommitMethod::Moves(moves) => {
            let mut log = own_log(new_id);
            log.moved_nodes = moves;
            (Some(base.id), log)
        }
    };
    let write_log = async {
        if !stream_chunks {
            return assets.write_transaction_log(Arc::new(log)).await;
        }
        let changes = Arc::clone(changes);
        let (spec, level) = (
            assets.spec_version(),
            assets.compression_level(FileType::TransactionLog),
        );
        let bytes = crate::assets::blocking(move || {
            let chunks = changes.updated_chunks().map(|(id, c)| (id, c.keys()));
            log.encode_with_chunks(spec, level, chunks, changes.num_chunk_changes())
        })
        .await?;
        assets.write_transaction_log_bytes(&new_id, bytes).await
    };
    let jobs: Vec<(NodePath, NodeSnapshot, bool)> = rewrite
        .into_iter()
        .filter_map(|(path, all)| {
            let node = nodes.get(&path)?.clone();
            Some((path, node, all))
        })
        .collect();
    let manifests = futures::stream::iter(jobs.into_iter().map(
        |(path, node, rewrite_all)| async move {
            let old: Vec<ManifestRef> = base
                .nodes
                .get(&path)
                .filter(|o| o.id == node.id)
                .and_then(NodeSnapshot::array)
                .map(|a| a.manifests.clone())
                .unwrap_or_default();
            let Some(array) = node.array() else {
                return Ok((path, ArrayManifests::default()));
            };
            let layout = layouts.layout(&path, array);
            let written = write_array_manifests(
                assets,
                base,
                node.id,
                &old,
                &array.shape,
                layout,
                changes,
                rewrite_all,
            )
            .await?;
            Ok::<_, crate::error::Error>((path, written))
        },
    ))
    .buffer_unordered(MANIFEST_WRITE_CONCURRENCY)
    .try_collect::<Vec<(NodePath, ArrayManifests)>>();

    // The transaction log depends on nothing else: it is written while the manifests
    // and then the snapshot (which names the manifests and their sizes) are.
    let tree = async move {
        let new_manifests = manifests.await?;
        let mut infos: HashMap<ManifestId, ManifestFileInfo> =
            base.manifest_files.iter().map(|i| (i.id, *i)).collect();
        for (path, new) in new_manifests {
            if let Some(NodeData::Array(a)) = nodes.get_mut(&path).map(|n| &mut n.node_data) {
                infos.extend(new.written.iter().map(|i| (i.id, *i)));
                a.manifests = new.refs;
            }
        }
        let mut manifest_files: Vec<ManifestFileInfo> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for node in nodes.values() {
            if let Some(a) = node.array() {
                for m in &a.manifests {
                    if seen.insert(m.object_id) {
                        if let Some(info) = infos.get(&m.object_id) {
                            manifest_files.push(*info);
                        }
                    }
                }
            }
        }
        manifest_files.sort_by_key(|i| i.id);
        let snapshot = Arc::new(Snapshot {
            spec_version: assets.spec_version(),
            id: new_id,
            parent_id,
            flushed_at: now_micros().max(base.flushed_at + 1),
            message: message.to_string(),
            metadata,
            manifest_files,
            nodes,
        });
        assets.write_snapshot(Arc::clone(&snapshot)).await?;
        Ok::<_, crate::error::Error>(snapshot)
    };
    let ((), snapshot) = futures::try_join!(write_log, tree)?;
    Ok(snapshot)
}
