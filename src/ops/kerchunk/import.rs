//! Importing a kerchunk reference set into a session: Zarr v2 metadata (`.zgroup`,
//! `.zarray`, `.zattrs`) becomes Zarr v3 groups and arrays, chunk references become
//! virtual chunk refs (with a checksum of the source taken at import time) or inline
//! chunk refs (for `base64:` / ascii data).
//!
//! The reference file is streamed twice (its header and metadata first, then chunk
//! references, a few thousand at a time), so a set with millions of references
//! imports in memory proportional to the chunk refs' compact form in the session's
//! change set (where refs into one object share its location), never to the JSON
//! document. Virtual chunk containers covering the
//! referenced URLs are added to the repository configuration when missing.
//!
//! Spec: `../shared/specs/kerchunk-references.txt` (the reference sets read);
//! the Zarr v2 to v3 metadata translation is `crate::zarr::metadata::v2`'s.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use super::limits::KerchunkLimits;
use super::{Reference, ReferenceFile};
use crate::error::KerchunkError;
use crate::error::{Error, Result};
use crate::format::config::{ContainerStore, VirtualChunkContainer};
use crate::format::manifest::{Checksum, ChunkPayload, VirtualChunkRef};
use crate::format::NodePath;
use crate::ops::Progress;
use crate::repository::Repository;
use crate::session::array_definition;
use crate::session::Session;
use crate::storage::S3Options;
use crate::virtual_refs::authorization::normalize_url;
use crate::virtual_refs::{VirtualAccess, VirtualChunkError, VirtualChunkResolver};
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

/// What the importer learned about one referenced object.
#[derive(Clone, Debug)]
struct Source {
    /// The normalized URL.
    location: String,
    /// Size in bytes.
    size: u64,
    /// Its checksum at import time.
    checksum: Option<Checksum>,
}

/// Looks up referenced objects once each (by the URL as written in the references),
/// adding virtual chunk containers for URLs no container covers.
struct Probe {
    containers: Vec<VirtualChunkContainer>,
    added: Vec<String>,
    resolver: Arc<VirtualChunkResolver>,
    sources: HashMap<String, Source>,
    /// The object looked up last (by its URL as written): references usually come
    /// in runs into one object.
    last: Option<(String, Source)>,
}

impl Probe {
    fn new(containers: Vec<VirtualChunkContainer>) -> Self {
        let resolver = Self::resolver(&containers);
        Probe {
            containers,
            added: Vec::new(),
            resolver,
            sources: HashMap::new(),
            last: None,
        }
    }

    fn resolver(containers: &[VirtualChunkContainer]) -> Arc<VirtualChunkResolver> {
        // The user imports these references, so the importer may read their sources.
        let prefixes: Vec<&str> = containers.iter().map(|c| c.url_prefix.as_str()).collect();
        let access = VirtualAccess::prefixes(prefixes).unwrap_or_default();
        Arc::new(VirtualChunkResolver::new(containers.to_vec(), access, None))
    }

    /// The object at `raw_url` (as written in the references): normalized URL, size
    /// and checksum, making sure a container covers it.
    async fn object(&mut self, raw_url: &str) -> Result<&Source> {
        if self.last.as_ref().is_none_or(|(url, _)| url != raw_url) {
            let source = match self.sources.get(raw_url) {
                Some(s) => s.clone(),
                None => {
                    let s = self.look_up(raw_url).await?;
                    self.sources.insert(raw_url.to_string(), s.clone());
                    s
                }
            };
            self.last = Some((raw_url.to_string(), source));
        }
        match &self.last {
            Some((_, source)) => Ok(source),
            None => Err(Error::InvalidConfig {
                reason: format!("source `{raw_url}` vanished from the import cache"),
            }),
        }
    }

    async fn look_up(&mut self, raw_url: &str) -> Result<Source> {
        let virtual_err = |source| Error::VirtualChunk {
            path: NodePath::root(),
            index: Vec::new(),
            source,
        };
        let url = normalize_url(raw_url).map_err(virtual_err)?;
        let uncovered = matches!(
            self.resolver.container_for(&url),
            Err(VirtualChunkError::NoContainer { .. })
        );
        if uncovered {
            let c = default_container(&url).ok_or_else(|| Error::InvalidConfig {
                reason: format!("no virtual chunk container can be made for `{url}`"),
            })?;
            self.added.push(c.url_prefix.clone());
            self.containers.push(c);
            self.resolver = Self::resolver(&self.containers);
        }
        let meta = self.resolver.head(&url).await.map_err(virtual_err)?;
        // Local files get a last-modified checksum in whole seconds, rounded up: Icechunk
        // rejects an object modified after the recorded second (If-Unmodified-Since),
        // so a truncated time would fail every file whose mtime has a fraction.
        let checksum = match (&meta.e_tag, url.starts_with("file:")) {
            (Some(e), false) => Some(Checksum::ETag(e.clone())),
            _ => {
                let t = meta.last_modified;
                let secs = t.timestamp() + i64::from(t.timestamp_subsec_nanos() > 0);
                u32::try_from(secs).ok().map(Checksum::LastModified)
            }
        };
        Ok(Source {
            location: url,
            size: meta.size,
            checksum,
        })
    }
}

fn kerchunk_err(e: KerchunkError) -> Error {
    Error::Kerchunk(Box::new(e))
}

fn json_of(key: &str, bytes: &[u8]) -> Result<Value> {
    serde_json::from_slice(bytes).map_err(|e| Error::InvalidNodeMetadata {
        path: NodePath::new(key).unwrap_or_else(|_| NodePath::root()),
        reason: format!("`{key}` is not JSON: {e}"),
    })
}

/// The bytes of metadata document `key`: inline data.
fn metadata_bytes(key: String, r: Reference) -> std::result::Result<Bytes, KerchunkError> {
    match r {
        Reference::Data(b) => Ok(b),
        _ => Err(KerchunkError::InvalidReference {
            key,
            reason: "metadata must be inline data".into(),
        }),
    }
}

/// Whether a reference key names a Zarr v2 metadata document.
fn is_metadata(key: &str) -> bool {
    matches!(split_key(key).1, ".zarray" | ".zgroup" | ".zattrs")
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

/// Chunk refs to set on one array.
type RefUpdates = Vec<(Vec<u64>, Option<ChunkPayload>)>;

/// Writes a batch of chunk references into the session: inline data one by one,
/// virtual refs of each array under one lock.
async fn place_batch(
    session: &Session,
    probe: &mut Probe,
    summary: &mut ImportSummary,
    paths: &[NodePath],
    batch: Vec<(usize, Vec<u64>, Reference)>,
) -> Result<()> {
    let mut virtual_refs: BTreeMap<usize, RefUpdates> = BTreeMap::new();
    for (target, idx, r) in batch {
        let path = &paths[target];
        let (url, offset, length) = match r {
            Reference::Data(bytes) => {
                session.set_chunk(path, &idx, bytes).await?;
                summary.inline_chunks += 1;
                continue;
            }
            Reference::Url(url) => (url, 0, None),
            Reference::Range {
                url,
                offset,
                length,
            } => (url, offset, Some(length)),
        };
        let source = probe.object(&url).await.map_err(|e| match e {
            Error::VirtualChunk { source, .. } => Error::VirtualChunk {
                path: path.clone(),
                index: idx.clone(),
                source,
            },
            other => other,
        })?;
        let vref = VirtualChunkRef {
            location: source.location.clone(),
            offset,
            length: length.unwrap_or(source.size),
            checksum: source.checksum.clone(),
        };
        virtual_refs
            .entry(target)
            .or_default()
            .push((idx, Some(ChunkPayload::Virtual(vref))));
    }
    for (target, refs) in virtual_refs {
        summary.virtual_chunks += refs.len() as u64;
        session.set_chunk_refs(&paths[target], refs)?;
    }
    Ok(())
}

/// Imports the kerchunk references in `refs` under node `dest` of a writable session
/// of `repo`, without committing. Adds virtual chunk containers for uncovered URLs to
/// the repository configuration (saved before returning).
///
/// # Errors
/// [`Error::Kerchunk`] for unreadable or malformed references; [`Error::InvalidNodeMetadata`]
/// for bad `.zarray`/`.zgroup` documents; [`Error::VirtualChunk`] when a referenced
/// source cannot be read (missing object, no container); session errors
/// ([`Error::NodeExists`], [`Error::ReadOnlySession`]); storage errors.
pub async fn import_kerchunk(
    repo: &Repository,
    session: &Session,
    refs: &Path,
    dest: &NodePath,
    progress: Option<Progress<'_>>,
) -> Result<ImportSummary> {
    import_kerchunk_with(
        repo,
        session,
        refs,
        dest,
        progress,
        &KerchunkLimits::default(),
    )
    .await
}

/// [`import_kerchunk`] within `limits`: at most
/// [`KerchunkLimits::max_generated_refs`] references from `gen` entries (default
/// 10^7, checked before any is generated), and templates on a fuel budget.
///
/// # Errors
/// As [`import_kerchunk`]; [`Error::Kerchunk`] wrapping
/// [`KerchunkError::TooManyRefs`] or [`KerchunkError::TemplateLimit`] past a limit.
pub async fn import_kerchunk_with(
    repo: &Repository,
    session: &Session,
    refs: &Path,
    dest: &NodePath,
    progress: Option<Progress<'_>>,
    limits: &KerchunkLimits,
) -> Result<ImportSummary> {
    let mut summary = ImportSummary::default();
    // Pass 1 (on a blocking thread): the header and the metadata documents; chunk
    // references are only counted (for progress), never decoded.
    let (path, file_limits) = (refs.to_path_buf(), limits.clone());
    let (file, early) =
        tokio::task::spawn_blocking(move || ReferenceFile::open(&path, &file_limits, &is_metadata))
            .await
            .map_err(|e| {
                kerchunk_err(KerchunkError::Sink(format!("reference reader failed: {e}")))
            })?
            .map_err(kerchunk_err)?;
    let mut meta: BTreeMap<String, Bytes> = BTreeMap::new();
    for (key, r) in early {
        meta.insert(key.clone(), metadata_bytes(key, r).map_err(kerchunk_err)?);
    }
    let total = file.remaining_refs();

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

    // Pass 2: chunk references, read on a blocking thread and handed over in batches
    // through a bounded channel, so only a few thousand are in flight at any time.
    let mut probe = Probe::new(session.config().virtual_chunk_containers()?);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<(usize, Vec<u64>, Reference)>>(8);
    let targets: Vec<(String, ArrayTarget)> = arrays.into_iter().collect();
    let paths: Vec<NodePath> = targets.iter().map(|(_, t)| t.path.clone()).collect();
    let reader = tokio::task::spawn_blocking(move || -> std::result::Result<u64, KerchunkError> {
        const BATCH: usize = 4096;
        let mut skipped = 0u64;
        let mut batch = Vec::with_capacity(BATCH);
        // Every key: metadata documents were taken in pass 1, but one `gen` makes
        // would be an error.
        file.read(&|_| true, |key, r| {
            if is_metadata(&key) {
                return metadata_bytes(key, r).map(drop);
            }
            // The array owning the key: the longest array prefix of the key.
            let target = targets
                .iter()
                .enumerate()
                .filter(|(_, (p, _))| {
                    p.is_empty()
                        || key.starts_with(p.as_str()) && key.as_bytes().get(p.len()) == Some(&b'/')
                })
                .max_by_key(|(_, (p, _))| p.len())
                .map(|(i, (p, t))| {
                    (
                        i,
                        t,
                        if p.is_empty() {
                            key.as_str()
                        } else {
                            &key[p.len() + 1..]
                        },
                    )
                });
            let Some((i, t, chunk_key)) = target else {
                skipped += 1;
                return Ok(());
            };
            let index: Option<Vec<u64>> = if t.ndim == 0 {
                (chunk_key == "0").then(Vec::new)
            } else {
                chunk_key
                    .split(t.separator)
                    .map(|s| s.parse::<u64>().ok())
                    .collect()
            };
            match index {
                Some(idx) if idx.len() == t.ndim => {
                    batch.push((i, idx, r));
                    if batch.len() >= BATCH {
                        tx.blocking_send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)))
                            .map_err(|_| KerchunkError::Sink("import stopped".into()))?;
                    }
                }
                _ => skipped += 1,
            }
            Ok(())
        })?;
        if !batch.is_empty() {
            tx.blocking_send(batch)
                .map_err(|_| KerchunkError::Sink("import stopped".into()))?;
        }
        Ok(skipped)
    });
    let mut done = 0u64;
    let mut failure = None;
    while let Some(batch) = rx.recv().await {
        let n = batch.len() as u64;
        if let Err(e) = place_batch(session, &mut probe, &mut summary, &paths, batch).await {
            failure = Some(e);
            break;
        }
        done += n;
        if let Some(p) = progress {
            p(done, total);
        }
    }
    drop(rx);
    let read = reader
        .await
        .map_err(|e| kerchunk_err(KerchunkError::Sink(format!("reference reader failed: {e}"))))?;
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
