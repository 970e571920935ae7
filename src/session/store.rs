//! [`SessionStore`]: the Zarr v3 store view of a session, mapping keys the way Icechunk
//! does: `<path>/zarr.json` is the node's user data (its `zarr.json` bytes) and chunk
//! keys (`<array path>/c/0/1` under the array's chunk key encoding) are chunk refs.
//! Writes go to the session's change set; reads see the snapshot plus uncommitted
//! changes.
//!
//! Spec: Zarr v3 core, "Abstract store interface" and "Storage keys"; chunk key
//! encodings `default` and `v2` (`../shared/specs/zarr/v3/chunk-key-encodings/`).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use serde_json::Value;

use crate::error::Error;
use crate::format::manifest::ChunkPayload;
use crate::format::snapshot::{DimensionShape, NodeSnapshot};
use crate::format::{ChunkIndices, NodeId, NodePath, SpecVersion, MAX_CHUNK_COORDINATE};
use crate::zarr::chunk_grid::ChunkGridMetadata;
use crate::zarr::chunk_key_encoding::{
    chunk_key_encoding_from_json, ChunkKeyEncoding, DefaultChunkKeyEncoding, Separator,
};
use crate::zarr::store::{ByteRange, ChunkKeys, ChunkPort, ListDirResult, Store, StoreError};

use super::{payload_len, ArrayDefinition, Session};

const METADATA_FILE: &str = "zarr.json";

/// A Zarr store over a [`Session`].
#[derive(Clone, Debug)]
pub struct SessionStore {
    session: Session,
    /// Chunk key encodings of arrays, by node id, with the zarr.json they were read
    /// from (so that a changed zarr.json is read again): parsing JSON on every chunk
    /// access would dominate the cost of small reads.
    encodings: Arc<Mutex<EncodingCache>>,
}

/// Chunk key encodings by array node id, with the zarr.json bytes they came from.
type EncodingCache = HashMap<NodeId, (Bytes, Arc<dyn ChunkKeyEncoding>)>;

/// A value [`SessionStore::prepare_set`] made ready to record: the bytes of a chunk
/// already stored (inline, or as a native chunk object written), or a metadata
/// document. Nothing of it is in the session until [`SessionStore::finish_set`].
#[derive(Debug)]
pub struct PreparedSet {
    key: String,
    value: Prepared,
}

#[derive(Debug)]
enum Prepared {
    Metadata(NodePath, Bytes),
    Chunk(NodePath, ChunkIndices, ChunkPayload),
}

impl PreparedSet {
    /// The store key it sets.
    pub fn key(&self) -> &str {
        &self.key
    }
}

/// What a store key refers to.
enum Target {
    Metadata(NodePath),
    Chunk(NodePath, ChunkIndices),
    Nothing,
}

/// A repository error at `key`, as the store reports it.
fn backend(key: &str, e: Error) -> StoreError {
    StoreError::Repository {
        key: key.to_string(),
        source: Box::new(e),
    }
}

impl StoreError {
    /// The repository error behind a [`StoreError::Repository`] (what a
    /// [`SessionStore`] reports when its session refuses or fails an operation);
    /// `None` for other errors.
    pub fn repository_error(&self) -> Option<&Error> {
        match self {
            StoreError::Repository { source, .. } => source.downcast_ref::<Error>(),
            _ => None,
        }
    }
}

fn node_metadata_key(path: &NodePath) -> String {
    if path.is_root() {
        METADATA_FILE.to_string()
    } else {
        format!("{}/{METADATA_FILE}", path.key_prefix())
    }
}

fn parse_json(path: &NodePath, bytes: &[u8]) -> Result<Value, Error> {
    serde_json::from_slice(bytes).map_err(|e| Error::InvalidNodeMetadata {
        path: path.clone(),
        reason: format!("zarr.json is not JSON: {e}"),
    })
}

/// Extracts shape, number of chunks and dimension names from an array's `zarr.json`,
/// as Icechunk 2.3.0 records them in snapshots: the chunk grid is `regular`
/// (`ceil(length / chunk length)` chunks per dimension) or `rectilinear` (every
/// listed edge; see [`ChunkGridMetadata`]).
///
/// # Errors
/// [`Error::InvalidNodeMetadata`] when `shape` or the chunk grid are missing or
/// malformed (a rectilinear grid whose edges do not cover the shape, a grid of
/// another rank, ...) or the grid is neither `regular` nor `rectilinear`.
pub fn array_definition(path: &NodePath, user_data: Bytes) -> Result<ArrayDefinition, Error> {
    let meta = parse_json(path, &user_data)?;
    let invalid = |reason: &str| Error::InvalidNodeMetadata {
        path: path.clone(),
        reason: reason.to_string(),
    };
    let shape: Vec<u64> = meta
        .get("shape")
        .and_then(Value::as_array)
        .and_then(|dims| dims.iter().map(Value::as_u64).collect())
        .ok_or_else(|| invalid("`shape` must be a list of non-negative integers"))?;
    let grid = meta
        .get("chunk_grid")
        .ok_or_else(|| invalid("missing `chunk_grid`"))
        .and_then(|g| {
            ChunkGridMetadata::from_json(g, &shape).map_err(|e| invalid(&e.to_string()))
        })?;
    let num_chunks = grid.num_chunks(&shape);
    let dimension_names = match meta.get("dimension_names") {
        None | Some(Value::Null) => None,
        Some(Value::Array(names)) => Some(
            names
                .iter()
                .map(|n| n.as_str().map(str::to_string))
                .collect(),
        ),
        Some(_) => return Err(invalid("`dimension_names` must be a list")),
    };
    Ok(ArrayDefinition {
        shape: shape
            .into_iter()
            .zip(num_chunks)
            .map(|(array_length, n)| DimensionShape::new(array_length, n))
            .collect(),
        dimension_names,
        user_data,
    })
}

/// The name of the chunk grid an array's `zarr.json` declares (`"regular"`,
/// `"rectilinear"`); `None` when the bytes are not JSON or name no grid.
pub(crate) fn chunk_grid_name(user_data: &[u8]) -> Option<String> {
    let meta: Value = serde_json::from_slice(user_data).ok()?;
    let grid = meta.get("chunk_grid")?;
    grid.get("name")
        .and_then(Value::as_str)
        .or_else(|| grid.as_str())
        .map(str::to_string)
}

impl Session {
    /// A Zarr store view of this session (the Zarr layer's view, defined there so the
    /// session module knows nothing of Zarr).
    pub fn store(&self) -> SessionStore {
        SessionStore::new(self.clone())
    }
}

impl SessionStore {
    /// The first half of [`Store::set`]: checks `key` and, for a chunk key, stores
    /// `value`'s bytes (inline, or as a new native chunk object written now), without
    /// changing the session. [`SessionStore::finish_set`] records the result and does
    /// no I/O, so a caller that is cancelled while this runs (an async task) drops the
    /// prepared value and nothing lands in the session later; a chunk object written
    /// for it is unreferenced, and garbage collection removes it.
    ///
    /// # Errors
    /// As [`Store::set`].
    pub async fn prepare_set(&self, key: &str, value: Bytes) -> Result<PreparedSet, StoreError> {
        self.ready(key).await?;
        self.check_writable(key)?;
        let value = match self.resolve(key)? {
            Target::Metadata(path) => Prepared::Metadata(path, value),
            Target::Chunk(path, idx) => {
                let payload = self
                    .session
                    .prepare_chunk(&path, &idx, value)
                    .await
                    .map_err(|e| backend(key, e))?;
                Prepared::Chunk(path, idx, payload)
            }
            Target::Nothing => {
                return Err(StoreError::InvalidKey {
                    key: key.to_string(),
                    reason: "not a zarr.json key or a chunk key of an existing array".into(),
                })
            }
        };
        Ok(PreparedSet {
            key: key.to_string(),
            value,
        })
    }

    /// The second half of [`Store::set`]: records what [`SessionStore::prepare_set`]
    /// prepared. No I/O and no await.
    ///
    /// # Errors
    /// As [`Store::set`] (the session may have become read-only, or the array been
    /// deleted or shrunk, since the value was prepared).
    pub fn finish_set(&self, prepared: PreparedSet) -> Result<(), StoreError> {
        let PreparedSet { key, value } = prepared;
        self.check_writable(&key)?;
        match value {
            Prepared::Metadata(path, doc) => self.set_metadata(&key, &path, doc),
            Prepared::Chunk(path, idx, payload) => self
                .session
                .set_chunk_ref(&path, &idx, Some(payload))
                .map_err(|e| backend(&key, e)),
        }
    }

    /// [`Store::get`] answered at once when it needs no I/O: a `zarr.json` key (the
    /// node's metadata document, `None` for no node) or a key that names nothing
    /// (`None`), once the session's snapshot is loaded or in the repository's cache
    /// ([`Session::load_now`]). `None` for a chunk key or when the snapshot must be
    /// read: the caller then awaits [`Store::get`]. Callers
    /// that make many metadata calls (zarr-python opens a group with four gets)
    /// save a round trip through the async runtime per call.
    ///
    /// # Errors
    /// As [`Store::get`]: [`StoreError::InvalidKey`] for a key no Zarr hierarchy has.
    pub fn get_now(&self, key: &str) -> Option<Result<Option<Bytes>, StoreError>> {
        if !self.session.load_now() {
            return None;
        }
        match self.resolve(key) {
            Ok(Target::Metadata(path)) => {
                Some(Ok(self.session.get_node(&path).ok().map(|n| n.user_data)))
            }
            Ok(Target::Nothing) => Some(Ok(None)),
            Ok(Target::Chunk(..)) => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// [`Store::set`] of a `zarr.json` key done at once (a metadata document is
    /// recorded in the session, nothing is written to storage), once the session's
    /// snapshot is loaded or cached; `None` for other keys or when it must be read:
    /// the caller then goes through [`SessionStore::prepare_set`].
    ///
    /// # Errors
    /// As [`Store::set`].
    pub fn set_metadata_now(&self, key: &str, value: Bytes) -> Option<Result<(), StoreError>> {
        if !self.session.load_now() {
            return None;
        }
        if let Err(e) = self.check_writable(key) {
            return Some(Err(e));
        }
        match self.resolve(key) {
            Ok(Target::Metadata(path)) => Some(self.set_metadata(key, &path, value)),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// Records the metadata document `value` of the node at `path` (its `zarr.json`
    /// is `key`): adds, updates or replaces the node.
    fn set_metadata(&self, key: &str, path: &NodePath, value: Bytes) -> Result<(), StoreError> {
        let is_array = self.node_kind(key, path, &value)?;
        let existing = self.session.get_node(path).ok();
        let result = match (existing, is_array) {
            (Some(n), true) if n.array().is_some() => {
                array_definition(path, value).and_then(|def| self.session.update_array(path, def))
            }
            (Some(n), false) if n.is_group() => self.session.update_group(path, value),
            (existing, is_array) => {
                if existing.is_some() {
                    self.session
                        .delete_node(path)
                        .map_err(|e| backend(key, e))?;
                }
                if is_array {
                    array_definition(path, value)
                        .and_then(|def| self.session.add_array(path, def))
                        .map(|_| ())
                } else {
                    self.session.add_group(path, value).map(|_| ())
                }
            }
        };
        result.map_err(|e| backend(key, e))
    }

    /// [`StoreError::ReadOnly`] for a write of `key` when the session is read-only.
    fn check_writable(&self, key: &str) -> Result<(), StoreError> {
        if self.session.is_writable() {
            Ok(())
        } else {
            Err(StoreError::ReadOnly {
                key: key.to_string(),
            })
        }
    }

    /// Loads the session's snapshot, which every key operation needs first (a no-op
    /// once loaded).
    ///
    /// # Errors
    /// Storage and format errors reading the snapshot.
    pub async fn load(&self) -> Result<(), StoreError> {
        self.ready("").await
    }

    /// [`Store::erase`] in a session already loaded ([`SessionStore::load`]): no I/O
    /// and no await, so a caller can do it after its own awaits, where it cannot be
    /// cancelled half-way.
    ///
    /// # Errors
    /// As [`Store::erase`]; [`StoreError::Repository`] when the session is not loaded.
    pub fn erase_loaded(&self, key: &str) -> Result<(), StoreError> {
        self.check_writable(key)?;
        let result = match self.resolve(key)? {
            Target::Metadata(path) => self.session.delete_node(&path),
            Target::Chunk(path, idx) => self.session.set_chunk_ref(&path, &idx, None),
            Target::Nothing => Ok(()),
        };
        match result {
            Ok(()) | Err(Error::NodeNotFound { .. }) | Err(Error::InvalidChunkIndex { .. }) => {
                Ok(())
            }
            Err(e) => Err(backend(key, e)),
        }
    }

    /// The store view of `session`.
    pub fn new(session: Session) -> Self {
        SessionStore {
            session,
            encodings: Arc::default(),
        }
    }

    /// The session behind the store.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The array's chunk key encoding (the default `c/...` encoding when its
    /// zarr.json names none or cannot be read).
    fn encoding_of(&self, node: &NodeSnapshot) -> Arc<dyn ChunkKeyEncoding> {
        let mut cache = self.encodings.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((user_data, enc)) = cache.get(&node.id) {
            if *user_data == node.user_data {
                return Arc::clone(enc);
            }
        }
        let enc: Arc<dyn ChunkKeyEncoding> = serde_json::from_slice::<Value>(&node.user_data)
            .ok()
            .and_then(|m| m.get("chunk_key_encoding").cloned())
            .and_then(|e| chunk_key_encoding_from_json(&e).ok())
            .map_or_else(
                || -> Arc<dyn ChunkKeyEncoding> {
                    Arc::new(DefaultChunkKeyEncoding {
                        separator: Separator::Slash,
                    })
                },
                Arc::from,
            );
        cache.insert(node.id, (node.user_data.clone(), Arc::clone(&enc)));
        enc
    }

    /// The array and chunk index a chunk key names, in the array's own chunk key
    /// encoding (`"temp/c/0/1"` is chunk `[0, 1]` of `/temp`); `None` when the key is
    /// no chunk key of an existing array (a metadata key, or no such array). How
    /// Icechunk's `store.set_virtual_ref(key, ...)` finds its chunk.
    ///
    /// # Errors
    /// [`StoreError::InvalidKey`] for keys with a leading `/`, empty or `..` segments.
    pub fn chunk_of_key(&self, key: &str) -> Result<Option<(NodePath, ChunkIndices)>, StoreError> {
        Ok(match self.resolve(key)? {
            Target::Chunk(path, index) => Some((path, index)),
            Target::Metadata(_) | Target::Nothing => None,
        })
    }

    /// Whether the `zarr.json` bytes `value` written at `key` (the node at `path`)
    /// describe an array (`true`) or a group (`false`).
    ///
    /// # Errors
    /// [`Error::InvalidNodeMetadata`] (as a repository error at `key`) for another
    /// `node_type`, or for a chunk grid other than `regular` in a spec-1 repository.
    fn node_kind(&self, key: &str, path: &NodePath, value: &[u8]) -> Result<bool, StoreError> {
        let meta = parse_json(path, value).map_err(|e| backend(key, e))?;
        let is_array = match meta.get("node_type").and_then(Value::as_str) {
            Some("array") => true,
            Some("group") => false,
            _ => {
                return Err(backend(
                    key,
                    Error::InvalidNodeMetadata {
                        path: path.clone(),
                        reason: "node_type must be \"array\" or \"group\"".into(),
                    },
                ))
            }
        };
        if is_array && self.session.inner.ctx.assets.spec_version() == SpecVersion::V1 {
            // Icechunk 2.3.0 refuses any grid but `regular` in a spec-1
            // repository, whose snapshots record a chunk length per dimension.
            let grid = meta
                .get("chunk_grid")
                .and_then(|g| g.get("name").or(Some(g)))
                .and_then(Value::as_str);
            if let Some(grid) = grid.filter(|&g| g != "regular") {
                return Err(backend(
                    key,
                    Error::InvalidNodeMetadata {
                        path: path.clone(),
                        reason: format!(
                            "a `{grid}` chunk grid cannot be stored in a spec version 1 \
                             repository (non-regular chunk grids need spec_version=2 \
                             or higher)"
                        ),
                    },
                ));
            }
        }
        Ok(is_array)
    }

    /// Reads the session's snapshot if it was opened without it ([`Session::load`]).
    async fn ready(&self, key: &str) -> Result<(), StoreError> {
        self.session.load().await.map_err(|e| backend(key, e))
    }

    fn resolve(&self, key: &str) -> Result<Target, StoreError> {
        self.session.loaded().map_err(|e| backend(key, e))?;
        if key.starts_with('/') || key.split('/').any(|s| s.is_empty() || s == "..") {
            return Err(StoreError::InvalidKey {
                key: key.to_string(),
                reason: "keys are relative, with no empty or `..` segments".into(),
            });
        }
        if key == METADATA_FILE {
            return Ok(Target::Metadata(NodePath::root()));
        }
        if let Some(prefix) = key.strip_suffix("/zarr.json") {
            if let Ok(p) = NodePath::new(prefix) {
                return Ok(Target::Metadata(p));
            }
        }
        // The first array along the key's segments owns the chunk key.
        let segments: Vec<&str> = key.split('/').collect();
        let mut candidates = vec![NodePath::root()];
        for i in 1..segments.len() {
            if let Ok(p) = NodePath::new(&segments[..i].join("/")) {
                candidates.push(p);
            }
        }
        for (i, path) in candidates.into_iter().enumerate() {
            let Ok(node) = self.session.get_node(&path) else {
                continue;
            };
            if let Some(a) = node.array() {
                let rest = segments[i..].join("/");
                let index: Option<Vec<u64>> = self
                    .encoding_of(&node)
                    .decode(&rest, a.shape.len())
                    .filter(|idx| idx.iter().all(|&i| i <= MAX_CHUNK_COORDINATE));
                return Ok(match index {
                    Some(idx) => Target::Chunk(path, idx),
                    None => Target::Nothing,
                });
            }
        }
        Ok(Target::Nothing)
    }

    /// Whether `key` is in the store, raising for keys no Zarr v3 hierarchy has, as
    /// Icechunk's store does (its `exists("foo")` is an invalid-key error, where
    /// [`Store::size`] answers `None`). A key may be: a `zarr.json` key; a chunk key
    /// of an existing array (in its chunk key encoding); a default-encoding chunk key
    /// (`.../c` followed by integer segments) of an array that does not exist; or a
    /// Zarr v2 metadata key (`.zarray`, `.zgroup`, `.zattrs`, `.zmetadata`), which is
    /// never in a v3 store.
    ///
    /// # Errors
    /// [`StoreError::InvalidKey`] for any other key (and for keys with a leading `/`,
    /// empty or `..` segments); repository errors reading chunk refs.
    pub async fn exists(&self, key: &str) -> Result<bool, StoreError> {
        self.ready(key).await?;
        if matches!(self.resolve(key)?, Target::Nothing) && !could_be_key(key) {
            return Err(StoreError::InvalidKey {
                key: key.to_string(),
                reason: "not a zarr.json key or a chunk key".into(),
            });
        }
        Ok(self.size(key).await?.is_some())
    }

    /// Stores `value` at `key` only when nothing is stored there (Zarr's
    /// `set_if_not_exists`): returns whether it stored it. Atomic within the
    /// session, as Icechunk's: a `zarr.json` creates its node only when no node is
    /// at the path (checked and added under one lock); a chunk is stored only when
    /// it has no ref ([`Session::set_chunk_if_absent`]).
    ///
    /// # Errors
    /// [`StoreError::ReadOnly`] on a read-only session (also when the key exists);
    /// [`StoreError::InvalidKey`] for a key that is neither; repository errors as
    /// for [`Store::set`].
    pub async fn set_if_not_exists(&self, key: &str, value: Bytes) -> Result<bool, StoreError> {
        self.ready(key).await?;
        self.check_writable(key)?;
        let added = match self.resolve(key)? {
            // An existing node is kept whatever `value` holds (not even parsed).
            Target::Metadata(path) if self.session.get_node(&path).is_ok() => Ok(false),
            Target::Metadata(path) => {
                let added = if self.node_kind(key, &path, &value)? {
                    array_definition(&path, value)
                        .and_then(|def| self.session.add_array(&path, def))
                } else {
                    self.session.add_group(&path, value)
                };
                match added {
                    Ok(_) => Ok(true),
                    Err(Error::NodeExists { .. }) => Ok(false),
                    Err(e) => Err(e),
                }
            }
            Target::Chunk(path, idx) => self.session.set_chunk_if_absent(&path, &idx, value).await,
            Target::Nothing => {
                return Err(StoreError::InvalidKey {
                    key: key.to_string(),
                    reason: "not a zarr.json key or a chunk key of an existing array".into(),
                })
            }
        };
        added.map_err(|e| backend(key, e))
    }

    fn chunk_keys(&self, node: &NodeSnapshot, chunks: &[ChunkIndices]) -> Vec<String> {
        let enc = self.encoding_of(node);
        chunks
            .iter()
            .map(|idx| {
                let k = enc.encode(idx);
                if node.path.is_root() {
                    k
                } else {
                    format!("{}/{k}", node.path.key_prefix())
                }
            })
            .collect()
    }

    async fn all_keys(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.ready(prefix).await?;
        let mut keys = BTreeSet::new();
        let nodes = self.session.list_nodes().map_err(|e| backend(prefix, e))?;
        for node in nodes {
            let meta_key = node_metadata_key(&node.path);
            let node_prefix = node_key_prefix(&node.path);
            if meta_key.starts_with(prefix) {
                keys.insert(meta_key);
            }
            // Chunk keys of arrays that can match the prefix.
            if node.array().is_some()
                && (node_prefix.starts_with(prefix) || prefix.starts_with(&node_prefix))
            {
                let chunks = self
                    .session
                    .list_chunks(&node.path)
                    .await
                    .map_err(|e| backend(prefix, e))?;
                keys.extend(
                    self.chunk_keys(&node, &chunks)
                        .into_iter()
                        .filter(|k| k.starts_with(prefix)),
                );
            }
        }
        Ok(keys.into_iter().collect())
    }
}

/// The prefix every key of the node at `path` starts with: `a/b/` for `/a/b`, the
/// empty prefix for the root.
fn node_key_prefix(path: &NodePath) -> String {
    if path.is_root() {
        String::new()
    } else {
        format!("{}/", path.key_prefix())
    }
}

/// Whether `key`, which no existing node owns, has the shape of a Zarr key: a Zarr v2
/// metadata key, or a default-encoding chunk key (a `c` segment followed only by
/// integer segments) of an array that does not exist.
fn could_be_key(key: &str) -> bool {
    const V2_METADATA: [&str; 4] = [".zarray", ".zgroup", ".zattrs", ".zmetadata"];
    let segments: Vec<&str> = key.split('/').collect();
    if segments.last().is_some_and(|s| V2_METADATA.contains(s)) {
        return true;
    }
    segments.iter().enumerate().any(|(i, s)| {
        *s == "c"
            && segments[i + 1..]
                .iter()
                .all(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()))
    })
}

#[async_trait]
impl Store for SessionStore {
    async fn get(&self, key: &str) -> Result<Option<Bytes>, StoreError> {
        self.ready(key).await?;
        match self.resolve(key)? {
            Target::Metadata(path) => Ok(self.session.get_node(&path).ok().map(|n| n.user_data)),
            Target::Chunk(path, idx) => match self.session.get_chunk(&path, &idx, None).await {
                Ok(b) => Ok(b),
                Err(Error::InvalidChunkIndex { .. }) => Ok(None),
                Err(e) => Err(backend(key, e)),
            },
            Target::Nothing => Ok(None),
        }
    }

    async fn get_partial_values(
        &self,
        key: &str,
        ranges: &[ByteRange],
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        self.ready(key).await?;
        match self.resolve(key)? {
            Target::Chunk(path, idx) => {
                let payload = match self.session.get_chunk_ref(&path, &idx).await {
                    Ok(Some(p)) => p,
                    Ok(None) | Err(Error::InvalidChunkIndex { .. }) => return Ok(None),
                    Err(e) => return Err(backend(key, e)),
                };
                let size = payload_len(&payload);
                let ranges = ranges
                    .iter()
                    .map(|r| r.to_range(key, size))
                    .collect::<Result<Vec<_>, _>>()?;
                // One call: nearby ranges (a shard's inner chunks) share a request.
                let parts = self
                    .session
                    .get_chunk_ranges(&path, &idx, &ranges)
                    .await
                    .map_err(|e| backend(key, e))?;
                Ok(Some(
                    parts.unwrap_or_else(|| vec![Bytes::new(); ranges.len()]),
                ))
            }
            _ => {
                let Some(whole) = self.get(key).await? else {
                    return Ok(None);
                };
                let mut out = Vec::with_capacity(ranges.len());
                for r in ranges {
                    let range = r.to_range(key, whole.len() as u64)?;
                    out.push(whole.slice(range.start as usize..range.end as usize));
                }
                Ok(Some(out))
            }
        }
    }

    /// Chunk keys are read through [`Session::get_chunks`]: virtual chunks of one
    /// file (and chunks sharing a native chunk object) at nearby offsets are read
    /// with one request, within the authorization of each chunk's location.
    fn get_many<'a>(
        &'a self,
        keys: Vec<String>,
        concurrency: usize,
    ) -> BoxStream<'a, (usize, Result<Option<Bytes>, StoreError>)> {
        if self.session.loaded().is_err() {
            // A session opened without its snapshot reads it first; when that fails,
            // the first key reports why and the others that it is not read.
            return futures::stream::once(async move {
                match self.ready(keys.first().map_or("", String::as_str)).await {
                    Ok(()) => self.get_many(keys, concurrency),
                    Err(e) => {
                        let rest = (1..keys.len())
                            .map(move |i| (i, Err(backend(&keys[i], Error::SessionNotLoaded))));
                        futures::stream::iter(std::iter::once((0, Err(e))).chain(rest)).boxed()
                    }
                }
            })
            .flatten()
            .boxed();
        }
        let mut ready = Vec::new();
        let mut chunks = Vec::new();
        let mut positions = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            match self.resolve(key) {
                Err(e) => ready.push((i, Err(e))),
                Ok(Target::Metadata(path)) => ready.push((
                    i,
                    Ok(self.session.get_node(&path).ok().map(|n| n.user_data)),
                )),
                Ok(Target::Nothing) => ready.push((i, Ok(None))),
                Ok(Target::Chunk(path, idx)) => {
                    chunks.push((path, idx));
                    positions.push(i);
                }
            }
        }
        let read = self
            .session
            .get_chunks(chunks, concurrency)
            .map(move |(j, r)| {
                let i = positions.get(j).copied().unwrap_or(j);
                let r = match r {
                    Ok(b) => Ok(b),
                    Err(Error::InvalidChunkIndex { .. }) => Ok(None),
                    Err(e) => Err(backend(keys.get(i).map_or("", String::as_str), e)),
                };
                (i, r)
            });
        futures::stream::iter(ready).chain(read).boxed()
    }

    async fn set(&self, key: &str, value: Bytes) -> Result<(), StoreError> {
        let prepared = self.prepare_set(key, value).await?;
        self.finish_set(prepared)
    }

    /// The session's own port for the array at `keys`' path
    /// ([`SessionChunks`](super::SessionChunks)): chunk refs by index, manifests
    /// prepared per region, local chunk files moved on compute threads.
    fn chunk_port(&self, keys: &ChunkKeys) -> Option<Arc<dyn ChunkPort>> {
        // Before the snapshot is read the port cannot know the array: chunks then go
        // through the store's keys, which read it.
        self.session.loaded().ok()?;
        let path = NodePath::new(keys.path()).ok()?;
        Some(Arc::new(super::chunks::port::SessionChunks::open(
            self.session.clone(),
            path,
            keys.clone(),
        )))
    }

    async fn erase(&self, key: &str) -> Result<(), StoreError> {
        self.ready(key).await?;
        self.erase_loaded(key)
    }

    /// Removes every key that starts with `prefix`. A node whose every key starts with
    /// `prefix` (its key prefix does: `a/` for `/a`, the empty one for the root) goes
    /// whole, with the nodes under it, without listing its chunks: `delete_dir("")`
    /// (what zarr's `open_group(mode="w")` and xarray's `to_zarr(mode="w")` run)
    /// costs one deletion per top node, not one per chunk key. The keys left under
    /// `prefix` (chunks under a prefix inside an array, such as `a/c/1/`) are then
    /// listed and erased one by one.
    async fn erase_prefix(&self, prefix: &str) -> Result<(), StoreError> {
        self.ready(prefix).await?;
        self.check_writable(prefix)?;
        let mut whole: Vec<NodePath> = self
            .session
            .list_nodes()
            .map_err(|e| backend(prefix, e))?
            .into_iter()
            .filter(|node| node_key_prefix(&node.path).starts_with(prefix))
            .map(|node| node.path)
            .collect();
        // Sorted, a node comes before the nodes under it (its path is a prefix of
        // theirs): deleting it takes them along, and they are then not found.
        whole.sort();
        for path in whole {
            match self.session.delete_node(&path) {
                Ok(()) | Err(Error::NodeNotFound { .. }) => {}
                Err(e) => return Err(backend(prefix, e)),
            }
        }
        for key in self.all_keys(prefix).await? {
            self.erase_loaded(&key)?;
        }
        Ok(())
    }

    async fn size(&self, key: &str) -> Result<Option<u64>, StoreError> {
        self.ready(key).await?;
        match self.resolve(key)? {
            Target::Metadata(path) => Ok(self
                .session
                .get_node(&path)
                .ok()
                .map(|n| n.user_data.len() as u64)),
            // The chunk ref knows the stored length: nothing is fetched.
            Target::Chunk(path, idx) => match self.session.get_chunk_ref(&path, &idx).await {
                Ok(p) => Ok(p.as_ref().map(payload_len)),
                Err(Error::InvalidChunkIndex { .. }) => Ok(None),
                Err(e) => Err(backend(key, e)),
            },
            Target::Nothing => Ok(None),
        }
    }

    async fn list_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.all_keys(prefix).await
    }

    async fn list_dir(&self, prefix: &str) -> Result<ListDirResult, StoreError> {
        let mut out = ListDirResult::default();
        let mut prefixes = BTreeSet::new();
        for key in self.all_keys(prefix).await? {
            let rest = &key[prefix.len()..];
            match rest.split_once('/') {
                Some((dir, _)) => {
                    prefixes.insert(format!("{prefix}{dir}/"));
                }
                None => out.keys.push(key.clone()),
            }
        }
        out.prefixes = prefixes.into_iter().collect();
        Ok(out)
    }

    fn is_writable(&self) -> bool {
        self.session.is_writable()
    }
}
