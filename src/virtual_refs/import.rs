//! Importing a kerchunk reference set into a session: Zarr v2 metadata (`.zgroup`,
//! `.zarray`, `.zattrs`) becomes Zarr v3 groups and arrays, chunk references become
//! virtual chunk refs (with a checksum of the source taken at import time) or inline
//! chunk refs (for `base64:` / ascii data).
//!
//! The reference file is streamed twice (metadata first, then chunk references), so a
//! set with millions of references imports in memory proportional to the chunk refs'
//! compact form, never to the JSON document. Virtual chunk containers covering the
//! referenced URLs are added to the repository configuration when missing.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use super::authorization::{normalize_url, under_prefix};
use super::kerchunk::{read_references, KerchunkError, Reference};
use super::{VirtualAccess, VirtualChunkResolver};
use crate::error::{Error, Result};
use crate::format::config::{ContainerStore, VirtualChunkContainer};
use crate::format::manifest::{Checksum, ChunkPayload, VirtualChunkRef};
use crate::format::NodePath;
use crate::session::store::array_definition;
use crate::session::Session;
use crate::storage::S3Options;
use crate::zarr::chunk_key_encoding::Separator;
use crate::zarr::metadata::v2::{translate_v2_array, translate_v2_group};
use crate::zarr::metadata::ChunkKeyEncodingKind;

/// What an import did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// Groups created.
    pub groups: usize,
    /// Arrays created.
    pub arrays: usize,
    /// Virtual chunk refs written.
    pub virtual_chunks: u64,
    /// Inline (or small native) chunks written from inline data.
    pub inline_chunks: u64,
    /// References skipped (keys that are neither metadata nor chunks of an array,
    /// e.g. `.zmetadata`).
    pub skipped: u64,
    /// Virtual chunk containers added to the configuration.
    pub containers_added: Vec<String>,
}

/// Progress callback: called with (references processed, total references).
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// The container floe creates for a URL nobody configured: the file's directory for
/// local files, the bucket for S3, the host for HTTP.
fn default_container(url: &str) -> Option<VirtualChunkContainer> {
    let parsed = url::Url::parse(url).ok()?;
    match parsed.scheme() {
        "file" => {
            let path = parsed.path();
            let dir = &path[..path.rfind('/')? + 1];
            Some(VirtualChunkContainer {
                name: None,
                url_prefix: format!("file://{dir}"),
                store: ContainerStore::LocalFileSystem(dir.to_string()),
            })
        }
        "s3" => {
            let bucket = parsed.host_str()?;
            let env = S3Options::from_env();
            Some(VirtualChunkContainer {
                name: None,
                url_prefix: format!("s3://{bucket}/"),
                store: ContainerStore::S3 {
                    compatible: env.endpoint.is_some(),
                    region: env.region.clone().or_else(|| Some("us-east-1".into())),
                    endpoint_url: env.endpoint.clone(),
                    anonymous: env.anonymous,
                    allow_http: env.allow_http,
                    force_path_style: env.force_path_style,
                },
            })
        }
        "http" | "https" => Some(VirtualChunkContainer {
            name: None,
            url_prefix: format!("{}://{}/", parsed.scheme(), parsed.authority()),
            store: ContainerStore::Http,
        }),
        _ => None,
    }
}

struct Probe {
    containers: Vec<VirtualChunkContainer>,
    added: Vec<String>,
    resolver: Arc<VirtualChunkResolver>,
    checksums: HashMap<String, (u64, Option<Checksum>)>,
}

impl Probe {
    fn new(containers: Vec<VirtualChunkContainer>) -> Self {
        let resolver = Self::resolver(&containers);
        Probe {
            containers,
            added: Vec::new(),
            resolver,
            checksums: HashMap::new(),
        }
    }

    fn resolver(containers: &[VirtualChunkContainer]) -> Arc<VirtualChunkResolver> {
        // The user imports these references, so the importer may read their sources.
        let prefixes: Vec<&str> = containers.iter().map(|c| c.url_prefix.as_str()).collect();
        let access = VirtualAccess::prefixes(prefixes).unwrap_or_default();
        Arc::new(VirtualChunkResolver::new(containers.to_vec(), access, None))
    }

    /// Size and checksum of the object at `url`, making sure a container covers it.
    async fn object(&mut self, url: &str) -> Result<(u64, Option<Checksum>)> {
        if let Some(c) = self.checksums.get(url) {
            return Ok(c.clone());
        }
        let covered = self.containers.iter().any(|c| {
            normalize_url(&c.url_prefix)
                .is_ok_and(|p| under_prefix(url, &keep_slash(&c.url_prefix, p)))
        });
        if !covered {
            let c = default_container(url).ok_or_else(|| Error::InvalidConfig {
                reason: format!("no virtual chunk container can be made for `{url}`"),
            })?;
            self.added.push(c.url_prefix.clone());
            self.containers.push(c);
            self.resolver = Self::resolver(&self.containers);
        }
        let meta = self
            .resolver
            .head(url)
            .await
            .map_err(|source| Error::VirtualChunk {
                path: NodePath::root(),
                index: Vec::new(),
                source,
            })?;
        let checksum = match (&meta.e_tag, url.starts_with("file:")) {
            (Some(e), false) => Some(Checksum::ETag(e.clone())),
            _ => u32::try_from(meta.last_modified.timestamp())
                .ok()
                .map(Checksum::LastModified),
        };
        let out = (meta.size, checksum);
        self.checksums.insert(url.to_string(), out.clone());
        Ok(out)
    }
}

fn keep_slash(original: &str, mut normalized: String) -> String {
    if original.ends_with('/') && !normalized.ends_with('/') {
        normalized.push('/');
    }
    normalized
}

fn kerchunk_err(e: KerchunkError) -> Error {
    Error::InvalidConfig {
        reason: e.to_string(),
    }
}

fn json_of(key: &str, bytes: &[u8]) -> Result<Value> {
    serde_json::from_slice(bytes).map_err(|e| Error::InvalidNodeMetadata {
        path: NodePath::new(key).unwrap_or_else(|_| NodePath::root()),
        reason: format!("`{key}` is not JSON: {e}"),
    })
}

/// Splits `a/b/.zarray` into (`a/b`, `.zarray`).
fn split_key(key: &str) -> (&str, &str) {
    match key.rfind('/') {
        Some(i) => (&key[..i], &key[i + 1..]),
        None => ("", key),
    }
}

/// Information about an imported array needed to place its chunk refs.
struct ArrayTarget {
    path: NodePath,
    ndim: usize,
    separator: char,
}

/// Writes one chunk reference into the session.
async fn place_chunk(
    session: &Session,
    probe: &mut Probe,
    summary: &mut ImportSummary,
    path: &NodePath,
    idx: &[u32],
    r: Reference,
) -> Result<()> {
    let normalized = |url: &str| {
        normalize_url(url).map_err(|source| Error::VirtualChunk {
            path: path.clone(),
            index: idx.to_vec(),
            source,
        })
    };
    // Probe errors name the chunk whose reference points at the source.
    let at_chunk = |e: Error| match e {
        Error::VirtualChunk { source, .. } => Error::VirtualChunk {
            path: path.clone(),
            index: idx.to_vec(),
            source,
        },
        other => other,
    };
    let vref = match r {
        Reference::Data(bytes) => {
            session.set_chunk(path, idx, bytes).await?;
            summary.inline_chunks += 1;
            return Ok(());
        }
        Reference::Url(url) => {
            let location = normalized(&url)?;
            let (length, checksum) = probe.object(&location).await.map_err(at_chunk)?;
            VirtualChunkRef {
                location,
                offset: 0,
                length,
                checksum,
            }
        }
        Reference::Range {
            url,
            offset,
            length,
        } => {
            let location = normalized(&url)?;
            let (_, checksum) = probe.object(&location).await.map_err(at_chunk)?;
            VirtualChunkRef {
                location,
                offset,
                length,
                checksum,
            }
        }
    };
    session.set_chunk_ref(path, idx, Some(ChunkPayload::Virtual(vref)))?;
    summary.virtual_chunks += 1;
    Ok(())
}

/// Imports the kerchunk references in `refs` under node `dest` of a writable session,
/// without committing. Adds virtual chunk containers for uncovered URLs to the
/// repository configuration (saved before returning).
///
/// # Errors
/// [`Error::InvalidConfig`] wrapping kerchunk parse errors; [`Error::InvalidNodeMetadata`]
/// for bad `.zarray`/`.zgroup` documents; [`Error::VirtualChunk`] when a referenced
/// source cannot be read (missing object, no container); session errors
/// ([`Error::NodeExists`], [`Error::ReadOnlySession`]); storage errors.
pub async fn import_kerchunk(
    session: &Session,
    refs: &Path,
    dest: &NodePath,
    progress: Option<Progress<'_>>,
) -> Result<ImportSummary> {
    let mut summary = ImportSummary::default();
    // Pass 1: metadata documents only.
    let mut meta: BTreeMap<String, Bytes> = BTreeMap::new();
    let mut total = 0u64;
    read_references(refs, |key, r| {
        total += 1;
        let (_, name) = split_key(&key);
        if matches!(name, ".zarray" | ".zgroup" | ".zattrs") {
            match r {
                Reference::Data(b) => {
                    meta.insert(key, b);
                }
                _ => {
                    return Err(KerchunkError::InvalidReference {
                        key,
                        reason: "metadata must be inline data".into(),
                    })
                }
            }
        }
        Ok(())
    })
    .map_err(kerchunk_err)?;

    // Create groups and arrays, parents first.
    let join = |prefix: &str| -> Result<NodePath> {
        if prefix.is_empty() {
            Ok(dest.clone())
        } else if dest.is_root() {
            Ok(NodePath::new(prefix)?)
        } else {
            Ok(NodePath::new(&format!("{dest}/{prefix}"))?)
        }
    };
    let mut arrays: BTreeMap<String, ArrayTarget> = BTreeMap::new();
    let mut prefixes: Vec<(String, bool)> = meta
        .keys()
        .filter_map(|k| match split_key(k) {
            (p, ".zarray") => Some((p.to_string(), true)),
            (p, ".zgroup") => Some((p.to_string(), false)),
            _ => None,
        })
        .collect();
    prefixes.sort();
    // Parents of `dest` and implicit groups get empty group metadata.
    let empty_group =
        Bytes::from_static(br#"{"zarr_format":3,"node_type":"group","attributes":{}}"#);
    // Creates missing ancestors of `path` as empty groups; returns how many.
    let ensure_parents = |path: &NodePath| -> Result<usize> {
        let mut missing = Vec::new();
        let mut p = path.parent();
        while let Some(parent) = p {
            if session.get_node(&parent).is_err() {
                missing.push(parent.clone());
            }
            p = parent.parent();
        }
        let n = missing.len();
        for m in missing.into_iter().rev() {
            session.add_group(&m, empty_group.clone())?;
        }
        Ok(n)
    };
    for (prefix, is_array) in prefixes {
        let path = join(&prefix)?;
        summary.groups += ensure_parents(&path)?;
        let attrs_key = if prefix.is_empty() {
            ".zattrs".to_string()
        } else {
            format!("{prefix}/.zattrs")
        };
        let attrs = meta
            .get(&attrs_key)
            .map(|b| json_of(&attrs_key, b))
            .transpose()?;
        let doc_key = if prefix.is_empty() {
            if is_array {
                ".zarray".to_string()
            } else {
                ".zgroup".to_string()
            }
        } else if is_array {
            format!("{prefix}/.zarray")
        } else {
            format!("{prefix}/.zgroup")
        };
        let doc = json_of(&doc_key, &meta[&doc_key])?;
        let invalid = |e: crate::zarr::error::ZarrError| Error::InvalidNodeMetadata {
            path: path.clone(),
            reason: e.to_string(),
        };
        if is_array {
            let separator = doc
                .get("dimension_separator")
                .and_then(Value::as_str)
                .and_then(|s| s.chars().next())
                .unwrap_or('.');
            let mut m = translate_v2_array(&doc, attrs.as_ref()).map_err(invalid)?;
            // Repositories store chunks by index; Icechunk readers expect the
            // default `c/...` keys.
            m.chunk_key_encoding = ChunkKeyEncodingKind::Default(Separator::Slash);
            let ndim = m.shape.len();
            let def = array_definition(&path, Bytes::from(m.to_bytes()))?;
            session.add_array(&path, def)?;
            summary.arrays += 1;
            arrays.insert(
                prefix,
                ArrayTarget {
                    path,
                    ndim,
                    separator,
                },
            );
        } else {
            let g = translate_v2_group(&doc, attrs.as_ref()).map_err(invalid)?;
            if path.is_root() && session.get_node(&path).is_ok() {
                session.update_group(&path, Bytes::from(g.to_bytes()))?;
            } else {
                session.add_group(&path, Bytes::from(g.to_bytes()))?;
                summary.groups += 1;
            }
        }
    }

    // Pass 2: chunk references, read on a blocking thread and handed over through a
    // bounded channel, so only a few thousand are in flight at any time.
    let repo = session.repository().clone();
    let mut probe = Probe::new(repo.config().virtual_chunk_containers()?);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(NodePath, Vec<u32>, Reference)>(4096);
    let refs_path = refs.to_path_buf();
    let reader = tokio::task::spawn_blocking(move || -> std::result::Result<u64, KerchunkError> {
        let mut skipped = 0u64;
        read_references(&refs_path, |key, r| {
            if split_key(&key).1.starts_with('.') {
                return Ok(());
            }
            // The array owning the key: the longest array prefix of the key.
            let target = arrays
                .iter()
                .filter(|(p, _)| p.is_empty() || key.starts_with(&format!("{p}/")))
                .max_by_key(|(p, _)| p.len())
                .map(|(p, t)| {
                    (
                        t,
                        if p.is_empty() {
                            key.as_str()
                        } else {
                            &key[p.len() + 1..]
                        },
                    )
                });
            let Some((t, chunk_key)) = target else {
                skipped += 1;
                return Ok(());
            };
            let index: Option<Vec<u32>> = if t.ndim == 0 {
                (chunk_key == "0").then(Vec::new)
            } else {
                chunk_key
                    .split(t.separator)
                    .map(|s| s.parse::<u32>().ok())
                    .collect()
            };
            match index {
                Some(idx) if idx.len() == t.ndim => tx
                    .blocking_send((t.path.clone(), idx, r))
                    .map_err(|_| KerchunkError::Sink("import stopped".into())),
                _ => {
                    skipped += 1;
                    Ok(())
                }
            }
        })?;
        Ok(skipped)
    });
    let mut done = 0u64;
    let mut failure = None;
    while let Some((path, idx, r)) = rx.recv().await {
        if let Err(e) = place_chunk(session, &mut probe, &mut summary, &path, &idx, r).await {
            failure = Some(e);
            break;
        }
        done += 1;
        if let Some(p) = progress {
            if done.is_multiple_of(1000) {
                p(done, total);
            }
        }
    }
    drop(rx);
    let read = reader.await.map_err(|e| Error::InvalidConfig {
        reason: format!("reference reader failed: {e}"),
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    summary.skipped += read.map_err(kerchunk_err)?;
    if let Some(p) = progress {
        p(total, total);
    }
    if !probe.added.is_empty() {
        let mut config = repo.config();
        for c in probe
            .containers
            .iter()
            .filter(|c| probe.added.contains(&c.url_prefix))
        {
            config.set_virtual_chunk_container(c.clone());
        }
        repo.save_config(config).await?;
        summary.containers_added = probe.added.clone();
    }
    Ok(summary)
}
