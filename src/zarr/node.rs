//! Hierarchy nodes: paths, metadata lookup (v3 `zarr.json`, or v2 `.zarray` /
//! `.zgroup`, or v1 `meta` translated to v3), children, hierarchy walks, implicit parent groups and
//! node deletion. Below arrays and groups: opening a node as either is
//! [`open_node`](crate::zarr::group::open_node).
//!
//! Node paths follow the core spec's "Storage keys" section: `""` is the root, `foo/bar`
//! is the node whose metadata is at `foo/bar/zarr.json` and whose chunks live under
//! `foo/bar/`. A leading or trailing `/` is accepted and removed, so the session's
//! [`NodePath`] (`/foo/bar`) names the same node; both follow one set of rules
//! ([`normalize_path`]).

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use serde_json::Value;

use crate::format::{FormatError, NodePath};
use crate::zarr::error::{ZarrError, ZarrResult};
use crate::zarr::metadata::v2::{translate_v2_array, translate_v2_group};
use crate::zarr::metadata::{GroupMetadata, NodeMetadata};
use crate::zarr::store::Store;

/// Normalises a node path to its store form (`a/b`, `""` for the root): the
/// hierarchy path a session names [`NodePath`] `/a/b`, by the same rules
/// ([`NodePath::new`]: a leading or trailing `/` is accepted and removed; empty, `.`
/// and `..` segments and control characters are refused), plus one of Zarr stores:
/// no backslash (a separator on some file systems).
///
/// # Errors
/// [`ZarrError::InvalidPath`] for a path [`NodePath::new`] refuses, or with a
/// backslash.
pub fn normalize_path(path: &str) -> ZarrResult<String> {
    Ok(node_path(path)?.key_prefix().to_string())
}

/// The [`NodePath`] (`/a/b`) of a Zarr node path (`a/b` or `/a/b`): the one path
/// type of sessions, diffs and conflicts.
///
/// # Errors
/// As [`normalize_path`].
pub fn node_path(path: &str) -> ZarrResult<NodePath> {
    let invalid = |reason: &str| ZarrError::InvalidPath {
        path: path.to_string(),
        reason: reason.to_string(),
    };
    if path.contains('\\') {
        return Err(invalid("backslash is not allowed"));
    }
    NodePath::new(path).map_err(|e| match e {
        FormatError::InvalidPath { reason, .. } => invalid(reason),
        other => invalid(&other.to_string()),
    })
}

/// The store key prefix of a normalised node path (`""` or `path/`).
pub fn node_prefix(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("{path}/")
    }
}

/// The key of a node's `zarr.json`.
pub fn metadata_key(path: &str) -> String {
    format!("{}zarr.json", node_prefix(path))
}

/// The Zarr format a node was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZarrFormat {
    /// Zarr v1 (one array: `meta` and `attrs`), translated to v3 metadata in memory.
    V1,
    /// Zarr v2 (`.zarray` / `.zgroup`), translated to v3 metadata in memory.
    V2,
    /// Zarr v3 (`zarr.json`).
    V3,
}

fn parse_json(key: &str, path: &str, bytes: &[u8]) -> ZarrResult<Value> {
    serde_json::from_slice(bytes).map_err(|e| ZarrError::InvalidMetadata {
        path: path.to_string(),
        reason: format!("`{key}` is not valid JSON: {e}"),
    })
}

/// Reads the metadata of the node at `path` (normalised): v3 `zarr.json`, else v2
/// `.zarray` / `.zgroup` (+ `.zattrs`) translated to v3, else a v1 array's `meta`
/// (+ `attrs`) translated to v3.
///
/// # Errors
/// [`ZarrError::NodeNotFound`] when there is no metadata; metadata errors naming the
/// path; store errors.
pub async fn read_node_metadata(
    store: &dyn Store,
    path: &str,
) -> ZarrResult<(NodeMetadata, ZarrFormat)> {
    let path = normalize_path(path)?;
    let prefix = node_prefix(&path);
    let key = metadata_key(&path);
    if let Some(bytes) = store.get(&key).await? {
        let meta = NodeMetadata::from_bytes(&bytes).map_err(|e| e.at_path(&path))?;
        return Ok((meta, ZarrFormat::V3));
    }
    let zarray_key = format!("{prefix}.zarray");
    let zgroup_key = format!("{prefix}.zgroup");
    let (zarray, zgroup) = futures::try_join!(store.get(&zarray_key), store.get(&zgroup_key))?;
    if zarray.is_none() && zgroup.is_none() {
        return read_v1_metadata(store, &path).await;
    }
    let zattrs_key = format!("{prefix}.zattrs");
    let zattrs = match store.get(&zattrs_key).await? {
        Some(b) => Some(parse_json(&zattrs_key, &path, &b)?),
        None => None,
    };
    let meta = if let Some(za) = zarray {
        let za = parse_json(&zarray_key, &path, &za)?;
        NodeMetadata::Array(translate_v2_array(&za, zattrs.as_ref()).map_err(|e| e.at_path(&path))?)
    } else {
        let zg = zgroup.unwrap_or_default();
        let zg = parse_json(&zgroup_key, &path, &zg)?;
        NodeMetadata::Group(translate_v2_group(&zg, zattrs.as_ref()).map_err(|e| e.at_path(&path))?)
    };
    Ok((meta, ZarrFormat::V2))
}

/// A Zarr v1 array at `path` (normalised): its `meta` and `attrs` keys translated.
/// A `meta` key that is not a JSON object with a `zarr_format` member is some other
/// file, not Zarr v1 metadata: no node.
///
/// # Errors
/// [`ZarrError::NodeNotFound`] without v1 metadata; metadata errors naming the path
/// and key (a `zarr_format` other than 1 among them); store errors.
async fn read_v1_metadata(store: &dyn Store, path: &str) -> ZarrResult<(NodeMetadata, ZarrFormat)> {
    use crate::zarr::metadata::v1::{
        parse_v1_json, translate_v1_array, V1_ATTRIBUTES_KEY, V1_METADATA_KEY,
    };
    let not_found = || ZarrError::NodeNotFound {
        path: path.to_string(),
    };
    let prefix = node_prefix(path);
    let Some(meta) = store.get(&format!("{prefix}{V1_METADATA_KEY}")).await? else {
        return Err(not_found());
    };
    let meta = match parse_v1_json(V1_METADATA_KEY, &meta) {
        Ok(m) if m.get("zarr_format").is_some() => m,
        _ => return Err(not_found()),
    };
    let attrs = match store.get(&format!("{prefix}{V1_ATTRIBUTES_KEY}")).await? {
        Some(b) => Some(parse_v1_json(V1_ATTRIBUTES_KEY, &b).map_err(|e| e.at_path(path))?),
        None => None,
    };
    let array = translate_v1_array(&meta, attrs.as_ref()).map_err(|e| e.at_path(path))?;
    Ok((NodeMetadata::Array(array), ZarrFormat::V1))
}

/// Whether any node (v3, v2 or v1) exists at `path`.
///
/// # Errors
/// Store errors.
pub async fn node_exists(store: &dyn Store, path: &str) -> ZarrResult<bool> {
    let path = normalize_path(path)?;
    let prefix = node_prefix(&path);
    for name in ["zarr.json", ".zarray", ".zgroup", "meta"] {
        if store.get(&format!("{prefix}{name}")).await?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Writes group metadata for every missing ancestor of `path` (root included).
///
/// # Errors
/// [`ZarrError::WrongNodeType`] when an ancestor is an array; store errors.
pub(crate) async fn ensure_parent_groups(store: &dyn Store, path: &str) -> ZarrResult<()> {
    if path.is_empty() {
        return Ok(());
    }
    let segments: Vec<&str> = path.split('/').collect();
    for depth in 0..segments.len() {
        let parent = segments[..depth].join("/");
        match read_node_metadata(store, &parent).await {
            Ok((NodeMetadata::Group(_), _)) => {}
            Ok((NodeMetadata::Array(_), _)) => {
                return Err(ZarrError::WrongNodeType {
                    path: parent,
                    expected: "group",
                    found: "array",
                })
            }
            Err(ZarrError::NodeNotFound { .. }) => {
                store
                    .set(
                        &metadata_key(&parent),
                        Bytes::from(GroupMetadata::default().to_bytes()),
                    )
                    .await?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The child nodes of the group at `path`: `(child path, metadata)` sorted by path.
/// Child prefixes without metadata (e.g. chunk directories) are skipped.
///
/// # Errors
/// Store errors and metadata errors of children.
pub async fn list_children(
    store: &dyn Store,
    path: &str,
) -> ZarrResult<Vec<(String, NodeMetadata)>> {
    let path = normalize_path(path)?;
    let listing = store.list_dir(&node_prefix(&path)).await?;
    let children: Vec<String> = listing
        .prefixes
        .iter()
        .map(|p| p.trim_end_matches('/').to_string())
        .collect();
    let mut out: Vec<(String, NodeMetadata)> = futures::stream::iter(children)
        .map(|child| async move {
            match read_node_metadata(store, &child).await {
                Ok((m, _)) => Ok(Some((child, m))),
                Err(ZarrError::NodeNotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .buffer_unordered(16)
        .try_filter_map(|x| async move { Ok(x) })
        .try_collect()
        .await?;
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Every node of the hierarchy under (and including) `path`, depth-first in path
/// order: `(path, metadata)`. Descends only into groups.
///
/// # Errors
/// As [`read_node_metadata`] and [`list_children`].
pub async fn walk(store: &dyn Store, path: &str) -> ZarrResult<Vec<(String, NodeMetadata)>> {
    let path = normalize_path(path)?;
    let (root, _) = read_node_metadata(store, &path).await?;
    let mut out = Vec::new();
    let mut stack = vec![(path, root)];
    while let Some((p, m)) = stack.pop() {
        let is_group = matches!(m, NodeMetadata::Group(_));
        out.push((p.clone(), m));
        if is_group {
            let children = list_children(store, &p).await?;
            stack.extend(children.into_iter().rev());
        }
    }
    Ok(out)
}

/// Deletes the node at `path` and everything under it (erases its key prefix; the
/// whole store for the root).
///
/// # Errors
/// [`ZarrError::NodeNotFound`] when no node exists there; store errors.
pub async fn delete_node(store: &dyn Store, path: &str) -> ZarrResult<()> {
    let path = normalize_path(path)?;
    if !node_exists(store, &path).await? {
        return Err(ZarrError::NodeNotFound { path });
    }
    store.erase_prefix(&node_prefix(&path)).await?;
    Ok(())
}

/// `attributes` with `update` merged in: keys with a `null` value are removed, the
/// others inserted or replaced (the merge rule of `update_attributes`).
pub fn merge_attributes(
    attributes: &serde_json::Map<String, serde_json::Value>,
    update: serde_json::Map<String, serde_json::Value>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut merged = attributes.clone();
    for (k, v) in update {
        if v.is_null() {
            merged.remove(&k);
        } else {
            merged.insert(k, v);
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(normalize_path("/").unwrap(), "");
        assert_eq!(normalize_path("/a/b/").unwrap(), "a/b");
        assert_err!(
            normalize_path("a//b"),
            crate::zarr::ZarrError::InvalidPath { .. }
        );
        assert_err!(
            normalize_path("a/../b"),
            crate::zarr::ZarrError::InvalidPath { .. }
        );
        for bad in ["a\\b", "a/\tb", "a/\u{0}"] {
            assert_err!(
                normalize_path(bad),
                crate::zarr::ZarrError::InvalidPath { .. }
            );
        }
        // One convention with sessions: the store form and the NodePath name the
        // same node.
        assert_eq!(node_path("a/b").unwrap().as_str(), "/a/b");
        assert_eq!(node_path("/a/b/").unwrap().key_prefix(), "a/b");
        assert!(node_path("").unwrap().is_root());
        assert_eq!(metadata_key(""), "zarr.json");
        assert_eq!(metadata_key("foo/bar"), "foo/bar/zarr.json");
        assert_eq!(node_prefix("foo"), "foo/");
    }
}
