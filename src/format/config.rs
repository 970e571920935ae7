//! `config.yaml`: the repository configuration, a YAML map (and, in spec 2, the same
//! map in the `repo` object, as FlexBuffers).
//!
//! floe reads the keys Icechunk 2.3 defines (`inline_chunk_threshold_bytes`,
//! `get_partial_values_concurrency`, `compression`, `max_concurrent_requests`,
//! `max_concurrent_decodes`, `caching`, `storage`, `virtual_chunk_containers`,
//! `manifest` (see [`manifest`]), `repo_update_retries`,
//! `num_updates_per_repo_info_file`) and keeps every other key as it found it when it
//! rewrites the file. Virtual chunk containers map a URL prefix to
//! `{name, url_prefix, store}`, where `store` is a YAML-tagged value such as
//! `!local_file_system /path`, `!s3 {...}`, `!s3_compatible {...}`, `!http {...}`.
//!
//! Spec: `../shared/docs/icechunk-format-v1.md`, "config.yaml".

use serde::{Deserialize, Serialize};
use serde_yaml::value::{Tag, TaggedValue};
use serde_yaml::{Mapping, Value};

use crate::format::FormatError;

/// Ops-log entries kept in one spec-2 `repo` object by default, when the
/// configuration sets no `num_updates_per_repo_info_file` (Icechunk's default).
pub const DEFAULT_UPDATES_PER_FILE: usize = 1000;

pub mod manifest;
pub mod packing;

pub use manifest::{
    ManifestConfig, ManifestPreloadCondition, ManifestPreloadConfig, ManifestSplitCondition,
    ManifestSplitDim, ManifestSplitDimCondition, ManifestSplittingConfig,
    VirtualChunkLocationCompressionConfig,
};
pub use packing::{
    ChunkPackingConfig, ChunkPackingMode, DEFAULT_PACK_TARGET_SIZE_BYTES,
    DEFAULT_PACK_THRESHOLD_BYTES,
};

/// Key of the configuration object.
pub const CONFIG_KEY: &str = super::keys::CONFIG;
/// Default largest encoded chunk size stored inline in manifests, in bytes.
pub const DEFAULT_INLINE_CHUNK_THRESHOLD_BYTES: u64 = 512;

/// Default of `get_partial_values_concurrency`: chunk reads of one
/// `get_partial_values` call in flight at once.
pub const DEFAULT_GET_PARTIAL_VALUES_CONCURRENCY: u16 = 10;
/// Default of `max_concurrent_requests`: storage requests of one repository in
/// flight at once.
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: u16 = 256;
/// Default of `max_concurrent_decodes` (Icechunk 2.3: chunk decodes at once).
pub const DEFAULT_MAX_CONCURRENT_DECODES: u16 = 2;

/// The keys Icechunk 2.3 writes, in its order (as `null` when unset); floe writes
/// them too so that Icechunk reads what floe writes.
const STANDARD_KEYS: [&str; 12] = [
    "inline_chunk_threshold_bytes",
    "get_partial_values_concurrency",
    "compression",
    "max_concurrent_requests",
    "max_concurrent_decodes",
    "caching",
    "storage",
    "virtual_chunk_containers",
    "manifest",
    "previous_file",
    "repo_update_retries",
    "num_updates_per_repo_info_file",
];

/// Sections merged field by field by [`RepositoryConfig::merge`], by their path;
/// every other map (and every list or tagged value) is replaced whole when the
/// overriding configuration sets it, as Icechunk merges.
const MERGED_SECTIONS: [&[&str]; 12] = [
    &["chunk_packing"],
    &["compression"],
    &["caching"],
    &["storage"],
    &["storage", "concurrency"],
    &["storage", "retries"],
    &["storage", "timeouts"],
    &["manifest"],
    &["manifest", "preload"],
    &["manifest", "virtual_chunk_location_compression"],
    &["repo_update_retries"],
    &["repo_update_retries", "default"],
];

/// `caching`: how many decoded objects the repository keeps in memory (Icechunk's
/// `CachingConfig`). Unset fields take Icechunk's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachingConfig {
    /// Snapshot nodes kept (default 500,000).
    #[serde(default)]
    pub num_snapshot_nodes: Option<u64>,
    /// Manifest chunk refs kept (default 15,000,000).
    #[serde(default)]
    pub num_chunk_refs: Option<u64>,
    /// Transaction-log changes kept (default 0).
    #[serde(default)]
    pub num_transaction_changes: Option<u64>,
    /// Bytes of attributes kept (default 0).
    #[serde(default)]
    pub num_bytes_attributes: Option<u64>,
    /// Bytes of chunks kept (default 0).
    #[serde(default)]
    pub num_bytes_chunks: Option<u64>,
}

impl CachingConfig {
    /// Snapshot nodes kept (default 500,000).
    pub fn num_snapshot_nodes(&self) -> u64 {
        self.num_snapshot_nodes.unwrap_or(500_000)
    }
    /// Manifest chunk refs kept (default 15,000,000).
    pub fn num_chunk_refs(&self) -> u64 {
        self.num_chunk_refs.unwrap_or(15_000_000)
    }
    /// Transaction-log changes kept (default 0).
    pub fn num_transaction_changes(&self) -> u64 {
        self.num_transaction_changes.unwrap_or(0)
    }
    /// Bytes of attributes kept (default 0).
    pub fn num_bytes_attributes(&self) -> u64 {
        self.num_bytes_attributes.unwrap_or(0)
    }
    /// Bytes of chunks kept (default 0).
    pub fn num_bytes_chunks(&self) -> u64 {
        self.num_bytes_chunks.unwrap_or(0)
    }
}

/// Retry settings (Icechunk's storage `RetriesSettings`), here those of
/// `repo_update_retries.default`: how often an update of the spec-2 `repo` object is
/// tried when another writer changed it in between.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetriesSettings {
    /// Tries in all, the first included.
    #[serde(default)]
    pub max_tries: Option<u16>,
    /// First wait between tries, in milliseconds.
    #[serde(default)]
    pub initial_backoff_ms: Option<u32>,
    /// Longest wait between tries, in milliseconds.
    #[serde(default)]
    pub max_backoff_ms: Option<u32>,
}

/// `repo_update_retries` (Icechunk's `RepoUpdateRetryConfig`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoUpdateRetryConfig {
    /// Retries of every `repo` object update; unset: 100 tries, 50 ms first wait,
    /// 30 s longest.
    #[serde(default)]
    pub default: Option<RetriesSettings>,
}

impl RepoUpdateRetryConfig {
    /// The effective retries: the configured fields over Icechunk's defaults (100
    /// tries, 50 ms, 30,000 ms).
    pub fn effective(&self) -> (u16, u32, u32) {
        let d = self.default.unwrap_or_default();
        (
            d.max_tries.unwrap_or(100).max(1),
            d.initial_backoff_ms.unwrap_or(50),
            d.max_backoff_ms.unwrap_or(30_000),
        )
    }
}

/// The store behind a virtual chunk container.
#[derive(Clone, Debug, PartialEq)]
pub enum ContainerStore {
    /// `!local_file_system <path>`: files under a local directory.
    LocalFileSystem(String),
    /// `!s3 {...}` (AWS) or `!s3_compatible {...}` (MinIO and others).
    S3 {
        /// Whether the tag was `s3_compatible`.
        compatible: bool,
        /// Region, if set.
        region: Option<String>,
        /// Endpoint URL, if set.
        endpoint_url: Option<String>,
        /// Send no credentials.
        anonymous: bool,
        /// Allow plain `http://` endpoints.
        allow_http: bool,
        /// Path-style addressing.
        force_path_style: bool,
    },
    /// `!http {...}`: plain HTTP(S) servers.
    Http,
    /// `!gcs {...}`: Google Cloud Storage (Icechunk's `gcs_store(opts)`), with its
    /// options (object_store `GoogleConfigKey` names and string values) in the
    /// order the configuration lists them. The bucket is the host of each location
    /// (`gs://bucket/...`).
    Gcs(Vec<(String, String)>),
    /// `!azure {...}`: Azure Blob Storage (Icechunk's `azure_store(account=...,
    /// config=...)`), with its options (`account` and object_store `AzureConfigKey`
    /// names, string values) in the order the configuration lists them. The
    /// container is the host of each location (`az://container/...`,
    /// `abfs://container/...`).
    Azure(Vec<(String, String)>),
    /// Any other store kind (`!in_memory`, ...), kept by tag name; floe cannot read
    /// chunks through it.
    Other(String),
}

/// One virtual chunk container: chunk refs whose URL starts with `url_prefix` are read
/// through `store`.
#[derive(Clone, Debug, PartialEq)]
pub struct VirtualChunkContainer {
    /// Optional name.
    pub name: Option<String>,
    /// URL prefix, e.g. `s3://bucket/data/` or `file:///data/`.
    pub url_prefix: String,
    /// How to reach the objects.
    pub store: ContainerStore,
}

impl VirtualChunkContainer {
    fn to_yaml(&self) -> Value {
        let store = match &self.store {
            ContainerStore::LocalFileSystem(p) => {
                tagged("local_file_system", Value::from(p.as_str()))
            }
            ContainerStore::S3 {
                compatible,
                region,
                endpoint_url,
                anonymous,
                allow_http,
                force_path_style,
            } => {
                let mut m = Mapping::new();
                m.insert("region".into(), opt(region));
                m.insert("endpoint_url".into(), opt(endpoint_url));
                m.insert("anonymous".into(), Value::Bool(*anonymous));
                m.insert("allow_http".into(), Value::Bool(*allow_http));
                m.insert("force_path_style".into(), Value::Bool(*force_path_style));
                m.insert("network_stream_timeout_seconds".into(), Value::from(60));
                m.insert("requester_pays".into(), Value::Bool(false));
                tagged(
                    if *compatible { "s3_compatible" } else { "s3" },
                    Value::Mapping(m),
                )
            }
            ContainerStore::Http => tagged("http", Value::Mapping(Mapping::new())),
            ContainerStore::Gcs(opts) => tagged("gcs", string_map(opts)),
            ContainerStore::Azure(opts) => tagged("azure", string_map(opts)),
            ContainerStore::Other(tag) => tagged(tag, Value::Null),
        };
        let mut m = Mapping::new();
        m.insert("name".into(), opt(&self.name));
        m.insert("url_prefix".into(), Value::from(self.url_prefix.as_str()));
        m.insert("store".into(), store);
        Value::Mapping(m)
    }

    fn from_yaml(key: &str, v: &Value) -> Result<Self, FormatError> {
        let invalid = |reason: String| FormatError::InvalidConfig {
            reason: format!("virtual chunk container `{key}`: {reason}"),
        };
        let m = v.as_mapping().ok_or_else(|| invalid("not a map".into()))?;
        let url_prefix = m
            .get("url_prefix")
            .and_then(Value::as_str)
            .unwrap_or(key)
            .to_string();
        let name = m.get("name").and_then(Value::as_str).map(str::to_string);
        let store = match m.get("store") {
            Some(Value::Tagged(t)) => {
                let tag = t.tag.to_string();
                let tag = tag.trim_start_matches('!');
                match tag {
                    "" => return Err(invalid("the store kind (its tag) is empty".into())),
                    "local_file_system" => ContainerStore::LocalFileSystem(
                        t.value
                            .as_str()
                            .ok_or_else(|| invalid("local_file_system needs a path".into()))?
                            .to_string(),
                    ),
                    "s3" | "s3_compatible" => {
                        let o = t.value.as_mapping().cloned().unwrap_or_default();
                        let s = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
                        let b = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
                        ContainerStore::S3 {
                            compatible: tag == "s3_compatible",
                            region: s("region"),
                            endpoint_url: s("endpoint_url"),
                            anonymous: b("anonymous"),
                            allow_http: b("allow_http"),
                            force_path_style: b("force_path_style"),
                        }
                    }
                    "http" => ContainerStore::Http,
                    "gcs" => ContainerStore::Gcs(string_pairs(&t.value).map_err(invalid)?),
                    "azure" => ContainerStore::Azure(string_pairs(&t.value).map_err(invalid)?),
                    other => ContainerStore::Other(other.to_string()),
                }
            }
            Some(Value::String(s)) if !s.is_empty() => ContainerStore::Other(s.clone()),
            _ => return Err(invalid("missing or untagged `store`".into())),
        };
        Ok(VirtualChunkContainer {
            name,
            url_prefix,
            store,
        })
    }
}

/// `value` tagged `!tag`. YAML has no empty tag (serde_yaml's `Tag::new` panics on
/// one): with an empty `tag` the value stays untagged. Parsed configurations never
/// hold an empty store kind ([`VirtualChunkContainer::from_yaml`] and
/// [`RepositoryConfig::from_flexbuffer`] refuse it), so only a
/// `ContainerStore::Other("")` built in code gets here with one, and is written as
/// an untagged store, which reading refuses.
fn tagged(tag: &str, value: Value) -> Value {
    if tag.is_empty() {
        return value;
    }
    Value::Tagged(Box::new(TaggedValue {
        tag: Tag::new(tag),
        value,
    }))
}

/// `pairs` as a YAML map of strings, in their order.
fn string_map(pairs: &[(String, String)]) -> Value {
    Value::Mapping(
        pairs
            .iter()
            .map(|(k, v)| (Value::from(k.as_str()), Value::from(v.as_str())))
            .collect(),
    )
}

/// The string options of a `!gcs` or `!azure` store: a map of strings (or null, no
/// options), in the order written. Numbers and booleans are taken as their text
/// (Icechunk's options are strings, YAML may write `true` unquoted).
fn string_pairs(v: &Value) -> Result<Vec<(String, String)>, String> {
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    match v {
        Value::Null => Ok(Vec::new()),
        Value::Mapping(m) => m
            .iter()
            .map(|(k, v)| match (k.as_str(), text(v)) {
                (Some(k), Some(v)) => Ok((k.to_string(), v)),
                _ => Err(format!(
                    "store option {k:?} is not a string key with a string value"
                )),
            })
            .collect(),
        _ => Err("the store options are not a map".to_string()),
    }
}

fn opt(s: &Option<String>) -> Value {
    s.as_deref().map(Value::from).unwrap_or(Value::Null)
}

/// `v` in serde's plain form: YAML tags back into `{variant: value}` (or `"variant"`
/// for a tag without a value), as FlexBuffers and JSON write enums.
fn untag(v: &Value) -> Value {
    match v {
        Value::Tagged(t) => {
            let tag = t.tag.to_string();
            let tag = tag.trim_start_matches('!').to_string();
            match &t.value {
                Value::Null => Value::String(tag),
                inner => {
                    let mut m = Mapping::new();
                    m.insert(Value::String(tag), untag(inner));
                    Value::Mapping(m)
                }
            }
        }
        Value::Mapping(m) => Value::Mapping(m.iter().map(|(k, v)| (k.clone(), untag(v))).collect()),
        Value::Sequence(s) => Value::Sequence(s.iter().map(untag).collect()),
        other => other.clone(),
    }
}

/// `v` as a YAML value (enums tagged).
fn to_yaml_value<T: Serialize>(v: &T) -> Result<Value, FormatError> {
    serde_yaml::to_value(v).map_err(|e| FormatError::InvalidConfig {
        reason: e.to_string(),
    })
}

/// A repository configuration: the parsed YAML map, with typed accessors for the keys
/// floe uses. Unknown keys are kept verbatim.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RepositoryConfig {
    raw: Mapping,
}

impl RepositoryConfig {
    /// Parses `config.yaml` bytes.
    ///
    /// # Errors
    /// [`FormatError::InvalidConfig`] when the bytes are not a YAML map, or a known key
    /// has the wrong type.
    pub fn parse(bytes: &[u8]) -> Result<Self, FormatError> {
        let value: Value =
            serde_yaml::from_slice(bytes).map_err(|e| FormatError::InvalidConfig {
                reason: e.to_string(),
            })?;
        let raw = match value {
            Value::Mapping(m) => m,
            Value::Null => Mapping::new(),
            _ => {
                return Err(FormatError::InvalidConfig {
                    reason: "config.yaml is not a YAML map".into(),
                })
            }
        };
        let cfg = RepositoryConfig { raw };
        cfg.check()?;
        Ok(cfg)
    }

    /// Parses the FlexBuffers configuration of a spec-2 `repo` object (Icechunk's
    /// `RepositoryConfig` through serde) into the same map `config.yaml` gives.
    ///
    /// # Errors
    /// [`FormatError::InvalidConfig`] when the bytes are not a FlexBuffers map, or a
    /// known key has the wrong type.
    pub fn from_flexbuffer(bytes: &[u8]) -> Result<Self, FormatError> {
        let value: Value =
            super::flexbuffer::from_slice(bytes).map_err(|e| FormatError::InvalidConfig {
                reason: format!("the repo object's configuration: {e}"),
            })?;
        Self::from_untagged(value, "the repo object's configuration")
    }

    /// The configuration in serde's plain form (enums as `{variant: value}` maps or
    /// `"variant"` strings, as JSON and FlexBuffers write them): how the Python
    /// bindings pass configurations. The inverse of [`RepositoryConfig::to_plain`].
    ///
    /// # Errors
    /// [`FormatError::InvalidConfig`] when `value` is not a map (or null), or a known
    /// key has the wrong shape.
    pub fn from_plain(value: &serde_json::Value) -> Result<Self, FormatError> {
        let value = serde_yaml::to_value(value).map_err(|e| FormatError::InvalidConfig {
            reason: e.to_string(),
        })?;
        Self::from_untagged(value, "configuration")
    }

    /// The configuration in serde's plain form (see [`RepositoryConfig::from_plain`]),
    /// with every standard key present (null when unset).
    ///
    /// # Errors
    /// [`FormatError::InvalidConfig`] when a value has no JSON form (a non-string
    /// map key).
    pub fn to_plain(&self) -> Result<serde_json::Value, FormatError> {
        serde_json::to_value(untag(&Value::Mapping(self.with_standard_keys()))).map_err(|e| {
            FormatError::InvalidConfig {
                reason: format!("the configuration has no JSON form: {e}"),
            }
        })
    }

    /// A configuration from a map in serde's plain form: enum values (virtual chunk
    /// container stores, manifest conditions) become YAML-tagged, as `config.yaml`
    /// holds them. `what` names the source in errors.
    fn from_untagged(value: Value, what: &str) -> Result<Self, FormatError> {
        let mut raw = match value {
            Value::Mapping(m) => m,
            Value::Null => Mapping::new(),
            _ => {
                return Err(FormatError::InvalidConfig {
                    reason: format!("{what} is not a map"),
                })
            }
        };
        // serde writes an enum as `{variant: value}` (or `"variant"` without a value)
        // where YAML writes `!variant value`: containers' stores become tagged, as
        // `config.yaml` has them.
        // YAML has no empty tag: an empty variant name is refused here (serde_yaml's
        // `Tag::new` would panic on it).
        if let Some(Value::Mapping(containers)) = raw.get_mut("virtual_chunk_containers") {
            for container in containers.values_mut() {
                let Some(store) = container.get_mut("store") else {
                    continue;
                };
                let as_tagged = match store {
                    Value::Mapping(m) if m.len() == 1 => m
                        .iter()
                        .next()
                        .and_then(|(k, v)| Some((k.as_str()?, v.clone()))),
                    Value::String(k) => Some((k.as_str(), Value::Null)),
                    _ => None,
                };
                let as_tagged = match as_tagged {
                    Some(("", _)) => {
                        return Err(FormatError::InvalidConfig {
                            reason: format!(
                                "{what}: a virtual chunk container's store kind is empty"
                            ),
                        })
                    }
                    Some((k, v)) => Some(tagged(k, v)),
                    None => None,
                };
                if let Some(t) = as_tagged {
                    *store = t;
                }
            }
        }
        // The manifest section's conditions, through its typed form.
        if let Some(manifest) = raw.get_mut("manifest").filter(|m| !m.is_null()) {
            let typed: ManifestConfig = serde_json::to_value(&*manifest)
                .and_then(serde_json::from_value)
                .map_err(|e| FormatError::InvalidConfig {
                    reason: format!("{what}: manifest: {e}"),
                })?;
            *manifest = to_yaml_value(&typed)?;
        }
        let cfg = RepositoryConfig { raw };
        cfg.check()?;
        Ok(cfg)
    }

    /// `self` with `other` over it, as Icechunk's `RepositoryConfig::merge`: every key
    /// `other` sets (not null) wins; the sections `compression`, `caching`,
    /// `storage` (and its `concurrency`, `retries`, `timeouts`), `manifest` (and its
    /// `preload`, `virtual_chunk_location_compression`), `repo_update_retries`
    /// (and its `default`) and floe's `chunk_packing` merge field by field;
    /// everything else, notably `virtual_chunk_containers` and
    /// `manifest.splitting`, is replaced whole.
    pub fn merge(&self, other: &RepositoryConfig) -> RepositoryConfig {
        fn merge_map(mine: &Mapping, theirs: &Mapping, path: &mut Vec<String>) -> Mapping {
            let mut out = mine.clone();
            for (k, v) in theirs {
                if v.is_null() {
                    continue;
                }
                let key = k.as_str().unwrap_or_default().to_string();
                path.push(key);
                let merged = match (out.get(k), v) {
                    (Some(Value::Mapping(a)), Value::Mapping(b))
                        if MERGED_SECTIONS
                            .iter()
                            .any(|s| s.iter().copied().eq(path.iter().map(String::as_str))) =>
                    {
                        Value::Mapping(merge_map(a, b, path))
                    }
                    _ => v.clone(),
                };
                path.pop();
                out.insert(k.clone(), merged);
            }
            out
        }
        RepositoryConfig {
            raw: merge_map(&self.raw, &other.raw, &mut Vec::new()),
        }
    }

    /// Spec 2: ops-log entries kept in one `repo` object before older ones move to a
    /// backup (`num_updates_per_repo_info_file`, default 1000).
    pub fn num_updates_per_repo_info_file(&self) -> usize {
        self.raw
            .get("num_updates_per_repo_info_file")
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n > 0)
            .unwrap_or(DEFAULT_UPDATES_PER_FILE)
    }

    /// Sets (or, with `None`, removes) `num_updates_per_repo_info_file`.
    pub fn set_num_updates_per_repo_info_file(&mut self, n: Option<u16>) {
        let key = Value::from("num_updates_per_repo_info_file");
        match n {
            Some(n) => {
                self.raw.insert(key, Value::from(n));
            }
            None => {
                self.raw.remove(&key);
            }
        }
    }

    /// Encodes as the FlexBuffers configuration of a spec-2 `repo` object: the map
    /// with YAML tags turned back into serde's enum form (`{variant: value}`, or
    /// `"variant"` for a tag without a value), as [`RepositoryConfig::from_flexbuffer`]
    /// reads it.
    ///
    /// # Errors
    /// [`FormatError::InvalidConfig`] when a value cannot be encoded.
    pub fn to_flexbuffer(&self) -> Result<Vec<u8>, FormatError> {
        flexbuffers::to_vec(untag(&Value::Mapping(self.raw.clone()))).map_err(|e| {
            FormatError::InvalidConfig {
                reason: format!("cannot encode the configuration as FlexBuffers: {e}"),
            }
        })
    }

    fn check(&self) -> Result<(), FormatError> {
        match self.raw.get("inline_chunk_threshold_bytes") {
            None | Some(Value::Null) => {}
            Some(v) if v.as_u64().is_some() => {}
            Some(v) => {
                return Err(FormatError::InvalidConfig {
                    reason: format!(
                        "inline_chunk_threshold_bytes must be a non-negative integer, found {v:?}"
                    ),
                })
            }
        }
        self.virtual_chunk_containers()?;
        self.typed::<ManifestConfig>("manifest")?;
        self.typed::<CachingConfig>("caching")?;
        self.typed::<ChunkPackingConfig>("chunk_packing")?;
        self.typed::<RepoUpdateRetryConfig>("repo_update_retries")?;
        for key in [
            "get_partial_values_concurrency",
            "max_concurrent_requests",
            "max_concurrent_decodes",
            "num_updates_per_repo_info_file",
        ] {
            self.typed::<u16>(key)?;
        }
        Ok(())
    }

    /// The value of `key` as a `T`, `None` when absent or null.
    ///
    /// # Errors
    /// [`FormatError::InvalidConfig`] when it has another shape.
    fn typed<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<Option<T>, FormatError> {
        match self.raw.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => serde_yaml::from_value(v.clone()).map(Some).map_err(|e| {
                FormatError::InvalidConfig {
                    reason: format!("{key}: {e}"),
                }
            }),
        }
    }

    /// Sets `key` to `value` (null for `None`).
    fn set_typed<T: Serialize>(&mut self, key: &str, value: Option<&T>) -> Result<(), FormatError> {
        let v = match value {
            Some(v) => to_yaml_value(v)?,
            None => Value::Null,
        };
        self.raw.insert(key.into(), v);
        Ok(())
    }

    /// The `manifest` section (all unset when absent). Checked when the configuration
    /// was read, so a malformed one reads as unset.
    pub fn manifest(&self) -> ManifestConfig {
        self.typed("manifest").ok().flatten().unwrap_or_default()
    }

    /// Sets (or with `None`, unsets) the `manifest` section.
    ///
    /// # Errors
    /// [`FormatError::InvalidConfig`] when it cannot be encoded.
    pub fn set_manifest(&mut self, manifest: Option<&ManifestConfig>) -> Result<(), FormatError> {
        self.set_typed("manifest", manifest)
    }

    /// The `caching` section (all unset when absent).
    pub fn caching(&self) -> CachingConfig {
        self.typed("caching").ok().flatten().unwrap_or_default()
    }

    /// Sets (or with `None`, unsets) the `caching` section.
    ///
    /// # Errors
    /// [`FormatError::InvalidConfig`] when it cannot be encoded.
    pub fn set_caching(&mut self, caching: Option<&CachingConfig>) -> Result<(), FormatError> {
        self.set_typed("caching", caching)
    }

    /// The `chunk_packing` section (floe's; all unset when absent): whether
    /// sessions write small chunks several to one chunk object, see
    /// [`ChunkPackingConfig`].
    pub fn chunk_packing(&self) -> ChunkPackingConfig {
        self.typed("chunk_packing")
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    /// Sets (or with `None`, unsets) the `chunk_packing` section.
    ///
    /// # Errors
    /// [`FormatError::InvalidConfig`] when it cannot be encoded.
    pub fn set_chunk_packing(
        &mut self,
        packing: Option<&ChunkPackingConfig>,
    ) -> Result<(), FormatError> {
        self.set_typed("chunk_packing", packing)
    }

    /// The `repo_update_retries` section (all unset when absent).
    pub fn repo_update_retries(&self) -> RepoUpdateRetryConfig {
        self.typed("repo_update_retries")
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    /// Chunk reads of one `get_partial_values` call in flight at once (default 10,
    /// at least 1).
    pub fn get_partial_values_concurrency(&self) -> u16 {
        self.typed::<u16>("get_partial_values_concurrency")
            .ok()
            .flatten()
            .unwrap_or(DEFAULT_GET_PARTIAL_VALUES_CONCURRENCY)
            .max(1)
    }

    /// Storage requests of the repository in flight at once (default 256, at least
    /// 1).
    pub fn max_concurrent_requests(&self) -> u16 {
        self.typed::<u16>("max_concurrent_requests")
            .ok()
            .flatten()
            .unwrap_or(DEFAULT_MAX_CONCURRENT_REQUESTS)
            .max(1)
    }

    /// Serializes to YAML, with Icechunk's standard keys present (as `null` when unset).
    ///
    /// # Errors
    /// [`FormatError::InvalidConfig`] if serialization fails.
    pub fn to_yaml(&self) -> Result<String, FormatError> {
        serde_yaml::to_string(&Value::Mapping(self.with_standard_keys())).map_err(|e| {
            FormatError::InvalidConfig {
                reason: e.to_string(),
            }
        })
    }

    /// The map with every standard key, in Icechunk's order (null when unset), then
    /// the other keys.
    fn with_standard_keys(&self) -> Mapping {
        let mut out = Mapping::new();
        for k in STANDARD_KEYS {
            out.insert(k.into(), self.raw.get(k).cloned().unwrap_or(Value::Null));
        }
        for (k, v) in &self.raw {
            if !out.contains_key(k) {
                out.insert(k.clone(), v.clone());
            }
        }
        out
    }

    /// The raw YAML map.
    pub fn raw(&self) -> &Mapping {
        &self.raw
    }

    /// Whether every key is absent or null (Icechunk writes no file for such a config).
    pub fn is_default(&self) -> bool {
        self.raw.values().all(Value::is_null)
    }

    /// The zstd level every metadata file is written at (`compression.level`), or
    /// `None` when the config sets none (then each file type has its default: the
    /// format envelope's `default_level`). A level above 22 is taken as 22, and 0 as
    /// unset.
    pub fn compression_level(&self) -> Option<i32> {
        self.raw
            .get("compression")
            .and_then(|c| c.get("level"))
            .and_then(Value::as_u64)
            .filter(|&l| l > 0)
            .and_then(|l| i32::try_from(l.min(22)).ok())
    }

    /// The zstd level files of type `file_type` are written at: the configured
    /// `compression.level`, or that type's default.
    pub fn compression_level_for(&self, file_type: super::envelope::FileType) -> i32 {
        self.compression_level()
            .unwrap_or_else(|| super::envelope::default_level(file_type))
    }

    /// Sets (or with `None`, unsets) `compression.level`, keeping the rest of
    /// `compression` (its `algorithm`) as it is.
    pub fn set_compression_level(&mut self, level: Option<u8>) {
        let key = Value::from("compression");
        let mut compression = match self.raw.get(&key) {
            Some(Value::Mapping(m)) => m.clone(),
            _ => Mapping::new(),
        };
        match level {
            Some(l) => {
                compression.insert("level".into(), Value::from(l));
            }
            None => {
                compression.remove("level");
            }
        }
        let v = if compression.is_empty() {
            Value::Null
        } else {
            Value::Mapping(compression)
        };
        self.raw.insert(key, v);
    }

    /// Largest encoded chunk size stored inline in a manifest, in bytes (default 512).
    pub fn inline_chunk_threshold_bytes(&self) -> u64 {
        self.raw
            .get("inline_chunk_threshold_bytes")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_INLINE_CHUNK_THRESHOLD_BYTES)
    }

    /// Sets (or with `None`, unsets) the inline threshold, in bytes.
    pub fn set_inline_chunk_threshold_bytes(&mut self, bytes: Option<u16>) {
        let v = bytes.map(Value::from).unwrap_or(Value::Null);
        self.raw.insert("inline_chunk_threshold_bytes".into(), v);
    }

    /// The virtual chunk containers, in file order.
    ///
    /// # Errors
    /// [`FormatError::InvalidConfig`] for a malformed container.
    pub fn virtual_chunk_containers(&self) -> Result<Vec<VirtualChunkContainer>, FormatError> {
        match self.raw.get("virtual_chunk_containers") {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Mapping(m)) => m
                .iter()
                .map(|(k, v)| VirtualChunkContainer::from_yaml(k.as_str().unwrap_or(""), v))
                .collect(),
            Some(_) => Err(FormatError::InvalidConfig {
                reason: "virtual_chunk_containers must be a map".into(),
            }),
        }
    }

    /// Adds or replaces the container with the same `url_prefix`.
    pub fn set_virtual_chunk_container(&mut self, container: VirtualChunkContainer) {
        let entry = self
            .raw
            .entry("virtual_chunk_containers".into())
            .or_insert(Value::Null);
        if !entry.is_mapping() {
            *entry = Value::Mapping(Mapping::new());
        }
        if let Value::Mapping(m) = entry {
            m.insert(
                Value::from(container.url_prefix.as_str()),
                container.to_yaml(),
            );
        }
    }

    /// Removes the container with this URL prefix; returns whether one was removed.
    pub fn remove_virtual_chunk_container(&mut self, url_prefix: &str) -> bool {
        match self.raw.get_mut("virtual_chunk_containers") {
            Some(Value::Mapping(m)) => m.remove(url_prefix).is_some(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::envelope::FileType;

    const ICECHUNK_CONFIG: &str = "inline_chunk_threshold_bytes: 100
get_partial_values_concurrency: null
compression: null
max_concurrent_requests: null
caching: null
storage: null
virtual_chunk_containers:
  file:///data/:
    name: null
    url_prefix: file:///data/
    store: !local_file_system /data/
  s3://bucket/prefix/:
    name: null
    url_prefix: s3://bucket/prefix/
    store: !s3_compatible
      region: us-east-1
      endpoint_url: http://127.0.0.1:9000
      anonymous: false
      allow_http: true
      force_path_style: true
      network_stream_timeout_seconds: 60
      requester_pays: false
  https://example.com/:
    name: null
    url_prefix: https://example.com/
    store: !http {}
manifest: null
some_future_key:
  nested: [1, 2, 3]
";

    /// `config.yaml` as Icechunk 2.3.0 writes it with every section set (a
    /// `Repository.create(config=...)` of spec 1).
    const ICECHUNK_230_FULL: &str = r#"inline_chunk_threshold_bytes: 5
get_partial_values_concurrency: 7
compression:
  algorithm: null
  level: 4
max_concurrent_requests: 9
max_concurrent_decodes: 3
caching:
  num_snapshot_nodes: 1
  num_chunk_refs: 2
  num_transaction_changes: 3
  num_bytes_attributes: 4
  num_bytes_chunks: 5
storage:
  concurrency:
    max_concurrent_requests_for_object: 5
    ideal_concurrent_request_size: 4096
  retries:
    max_tries: 5
    initial_backoff_ms: 0
    max_backoff_ms: 0
  timeouts: null
  unsafe_use_conditional_update: false
  unsafe_use_conditional_create: null
  unsafe_use_metadata: false
  storage_class: X
  metadata_storage_class: null
  chunks_storage_class: null
  minimum_size_for_multipart_upload: null
virtual_chunk_containers: null
manifest:
  preload:
    max_total_refs: 3
    preload_if: !and
    - !and
      - !and
        - !or
          - !name_matches
            regex: x
          - !path_matches
            regex: /a/.*
          - 'true'
          - 'false'
        - !num_refs
          from: !Included 1
          to: Unbounded
      - !num_refs
        from: Unbounded
        to: !Excluded 7
    - !num_refs
      from: !Included 2
      to: !Excluded 8
    max_arrays_to_scan: 4
  splitting:
    split_sizes:
    - - any_array
      - - condition: !Axis 0
          num_chunks: 2
        - condition: !DimensionName lon
          num_chunks: 3
        - condition: Any
          num_chunks: 4
    - - !or
        - !name_matches
          regex: t
        - !path_matches
          regex: p
      - - condition: Any
          num_chunks: 1
    - - !and
        - !name_matches
          regex: a
      - []
  virtual_chunk_location_compression:
    min_num_chunks: 5
    dictionary_max_training_samples: null
    dictionary_max_size_bytes: null
    compression_level: 2
  max_concurrent_manifest_fetches_during_commit: 3
previous_file: null
repo_update_retries:
  default:
    max_tries: 3
    initial_backoff_ms: null
    max_backoff_ms: null
num_updates_per_repo_info_file: 10
"#;

    #[test]
    fn icechunk_230_full_config_round_trips_byte_for_byte() {
        let cfg = RepositoryConfig::parse(ICECHUNK_230_FULL.as_bytes()).unwrap();
        assert_eq!(cfg.to_yaml().unwrap(), ICECHUNK_230_FULL);
        let m = cfg.manifest();
        assert_eq!(m.preload().max_total_refs(), 3);
        assert_eq!(m.max_concurrent_manifest_fetches_during_commit(), 3);
        let splitting = m.splitting.clone().unwrap();
        let rules = splitting.split_sizes.clone().unwrap();
        assert_eq!(rules.len(), 3);
        assert_eq!(rules[0].0, ManifestSplitCondition::AnyArray);
        assert_eq!(
            rules[0].1[1].condition,
            ManifestSplitDimCondition::DimensionName("lon".into())
        );
        assert_eq!(cfg.caching().num_chunk_refs(), 2);
        assert_eq!(cfg.get_partial_values_concurrency(), 7);
        assert_eq!(cfg.max_concurrent_requests(), 9);
        assert_eq!(cfg.repo_update_retries().effective(), (3, 50, 30_000));
        // Through serde's plain form (Python) and FlexBuffers (spec 2) and back.
        let plain = cfg.to_plain().unwrap();
        assert_eq!(
            plain["manifest"]["splitting"]["split_sizes"][0][0],
            "any_array"
        );
        assert_eq!(
            plain["manifest"]["splitting"]["split_sizes"][0][1][0]["condition"]["Axis"],
            0
        );
        let back = RepositoryConfig::from_plain(&plain).unwrap();
        assert_eq!(back.to_yaml().unwrap(), ICECHUNK_230_FULL);
        let flex = RepositoryConfig::from_flexbuffer(&cfg.to_flexbuffer().unwrap()).unwrap();
        assert_eq!(flex.manifest(), m);
        // FlexBuffers maps keep keys sorted: the same values, in another order.
        assert_eq!(flex.to_plain().unwrap(), plain);
    }

    #[test]
    fn merge_follows_icechunks_rules() {
        let base = RepositoryConfig::parse(
            b"inline_chunk_threshold_bytes: 5
compression: {algorithm: zstd, level: 4}
caching: {num_snapshot_nodes: 1, num_chunk_refs: 2}
virtual_chunk_containers:
  s3://a/: {name: null, url_prefix: s3://a/, store: !s3 {region: x}}
manifest:
  preload: {max_total_refs: 3, preload_if: 'true'}
  splitting:
    split_sizes: [[any_array, [{condition: Any, num_chunks: 2}]]]
",
        )
        .unwrap();
        let over = RepositoryConfig::parse(
            b"caching: {num_chunk_refs: 9}
compression: {level: null}
virtual_chunk_containers: {}
manifest:
  preload: {max_arrays_to_scan: 7}
  splitting:
    split_sizes: null
",
        )
        .unwrap();
        let m = base.merge(&over);
        assert_eq!(m.inline_chunk_threshold_bytes(), 5, "unset in `over`: kept");
        assert_eq!(
            m.compression_level(),
            Some(4),
            "a null field does not override"
        );
        assert_eq!(
            m.caching().num_snapshot_nodes,
            Some(1),
            "merged field by field"
        );
        assert_eq!(m.caching().num_chunk_refs, Some(9));
        assert!(
            m.virtual_chunk_containers().unwrap().is_empty(),
            "replaced whole"
        );
        let manifest = m.manifest();
        let preload = manifest.preload.unwrap();
        assert_eq!(
            (preload.max_total_refs, preload.max_arrays_to_scan),
            (Some(3), Some(7))
        );
        assert_eq!(preload.preload_if, Some(ManifestPreloadCondition::True));
        assert_eq!(
            manifest.splitting,
            Some(ManifestSplittingConfig { split_sizes: None }),
            "splitting is replaced whole"
        );
        assert_eq!(base.merge(&RepositoryConfig::default()), base);
    }

    #[test]
    fn malformed_sections_are_typed_errors() {
        for yaml in [
            "manifest: {preload: {preload_if: !no_such_condition 1}}\n",
            "caching: {num_chunk_refs: lots}\n",
            "max_concurrent_requests: -1\n",
            "repo_update_retries: {default: {max_tries: []}}\n",
        ] {
            let r = RepositoryConfig::parse(yaml.as_bytes());
            assert!(
                matches!(r, Err(FormatError::InvalidConfig { .. })),
                "{yaml}: {r:?}"
            );
        }
        let plain =
            serde_json::json!({"manifest": {"splitting": {"split_sizes": [["no_such", []]]}}});
        assert!(matches!(
            RepositoryConfig::from_plain(&plain),
            Err(FormatError::InvalidConfig { .. })
        ));
    }

    #[test]
    fn compression_level_reads_icechunks_key_and_keeps_the_algorithm() {
        let mut cfg =
            RepositoryConfig::parse(b"compression:\n  algorithm: zstd\n  level: 1\n").unwrap();
        assert_eq!(cfg.compression_level(), Some(1));
        assert_eq!(cfg.compression_level_for(FileType::Snapshot), 1);
        cfg.set_compression_level(Some(40));
        assert_eq!(
            cfg.compression_level(),
            Some(22),
            "above zstd's range: its maximum"
        );
        let back = RepositoryConfig::parse(cfg.to_yaml().unwrap().as_bytes()).unwrap();
        assert_eq!(back.raw()["compression"]["algorithm"], Value::from("zstd"));
        cfg.set_compression_level(None);
        assert_eq!(cfg.compression_level(), None);
        assert_eq!(cfg.raw()["compression"]["algorithm"], Value::from("zstd"));
        let zero = RepositoryConfig::parse(b"compression:\n  level: 0\n").unwrap();
        for unset in [RepositoryConfig::default(), zero] {
            assert_eq!(unset.compression_level(), None);
            // Unset: manifests and transaction logs at 1, the rest at 3.
            let by_type = [
                FileType::Snapshot,
                FileType::Manifest,
                FileType::TransactionLog,
                FileType::RepoInfo,
            ]
            .map(|t| unset.compression_level_for(t));
            assert_eq!(by_type, [3, 1, 1, 3]);
        }
    }

    #[test]
    fn reads_icechunk_config_and_keeps_unknown_keys() {
        let cfg = RepositoryConfig::parse(ICECHUNK_CONFIG.as_bytes()).unwrap();
        assert_eq!(cfg.inline_chunk_threshold_bytes(), 100);
        let vcc = cfg.virtual_chunk_containers().unwrap();
        assert_eq!(vcc.len(), 3);
        assert_eq!(
            vcc[0].store,
            ContainerStore::LocalFileSystem("/data/".into())
        );
        assert!(matches!(
            &vcc[1].store,
            ContainerStore::S3 { compatible: true, allow_http: true, force_path_style: true, endpoint_url: Some(e), .. } if e == "http://127.0.0.1:9000"
        ));
        assert_eq!(vcc[2].store, ContainerStore::Http);
        let mut cfg2 = cfg.clone();
        cfg2.set_inline_chunk_threshold_bytes(Some(7));
        let text = cfg2.to_yaml().unwrap();
        let back = RepositoryConfig::parse(text.as_bytes()).unwrap();
        assert_eq!(back.inline_chunk_threshold_bytes(), 7);
        assert_eq!(back.virtual_chunk_containers().unwrap(), vcc);
        assert_eq!(
            back.raw().get("some_future_key"),
            cfg.raw().get("some_future_key")
        );
    }

    #[test]
    fn bad_configs_are_typed_errors() {
        assert!(matches!(
            RepositoryConfig::parse(b"[1, 2"),
            Err(FormatError::InvalidConfig { .. })
        ));
        assert!(matches!(
            RepositoryConfig::parse(b"- a\n- b\n"),
            Err(FormatError::InvalidConfig { .. })
        ));
        assert!(matches!(
            RepositoryConfig::parse(b"inline_chunk_threshold_bytes: lots\n"),
            Err(FormatError::InvalidConfig { .. })
        ));
        assert!(matches!(
            RepositoryConfig::parse(b"virtual_chunk_containers: 3\n"),
            Err(FormatError::InvalidConfig { .. })
        ));
        assert!(RepositoryConfig::parse(b"").unwrap().is_default());
    }

    /// YAML's non-specific tag `!` names no store kind; it used to be read as an
    /// empty one, and writing the configuration back panicked in serde_yaml's
    /// `Tag::new`. An empty untagged name is refused the same way.
    #[test]
    fn an_empty_store_kind_is_refused() {
        for store in ["! {}", "! /data", "''"] {
            let yaml =
                format!("virtual_chunk_containers:\n  x:\n    url_prefix: x\n    store: {store}\n");
            let r = RepositoryConfig::parse(yaml.as_bytes());
            assert!(
                matches!(r, Err(FormatError::InvalidConfig { .. })),
                "{store}: {r:?}"
            );
        }
    }

    /// Icechunk 2.3.0's `gcs_store` and `azure_store` containers (its `config.yaml`
    /// text) keep their options, in order, through reading, writing and the plain
    /// form the Python bindings use; options that are not strings are refused.
    #[test]
    fn gcs_and_azure_stores_keep_their_options() {
        let yaml = "virtual_chunk_containers:\n  az://cont/data/:\n    name: null\n    \
                    url_prefix: az://cont/data/\n    store: !azure\n      \
                    azure_storage_use_emulator: 'true'\n      account: acc\n  \
                    gs://bkt/data/:\n    name: null\n    url_prefix: gs://bkt/data/\n    \
                    store: !gcs\n      google_base_url: http://x\n  gs://b2/:\n    \
                    url_prefix: gs://b2/\n    store: !gcs {}\n";
        let cfg = RepositoryConfig::parse(yaml.as_bytes()).unwrap();
        let vcc = cfg.virtual_chunk_containers().unwrap();
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        let stores: Vec<_> = vcc.iter().map(|c| c.store.clone()).collect();
        assert_eq!(
            stores,
            vec![
                ContainerStore::Azure(vec![
                    pair("azure_storage_use_emulator", "true"),
                    pair("account", "acc")
                ]),
                ContainerStore::Gcs(vec![pair("google_base_url", "http://x")]),
                ContainerStore::Gcs(vec![]),
            ]
        );
        let mut written = RepositoryConfig::default();
        for c in vcc.clone() {
            written.set_virtual_chunk_container(c);
        }
        let back = RepositoryConfig::parse(written.to_yaml().unwrap().as_bytes()).unwrap();
        assert_eq!(back.virtual_chunk_containers().unwrap(), vcc);
        let plain = RepositoryConfig::from_plain(&written.to_plain().unwrap()).unwrap();
        assert_eq!(plain.virtual_chunk_containers().unwrap(), vcc);
        let bad = "virtual_chunk_containers:\n  g:\n    url_prefix: gs://b/\n    \
                   store: !gcs {a: [1]}\n";
        assert!(matches!(
            RepositoryConfig::parse(bad.as_bytes()).and_then(|c| c.virtual_chunk_containers()),
            Err(FormatError::InvalidConfig { .. })
        ));
    }

    /// A store kind built in code as empty is written untagged (YAML has no empty
    /// tag), and reading it back refuses it.
    #[test]
    fn an_empty_store_kind_built_in_code_is_written_without_a_tag() {
        let mut cfg = RepositoryConfig::default();
        cfg.set_virtual_chunk_container(VirtualChunkContainer {
            name: None,
            url_prefix: "x".into(),
            store: ContainerStore::Other(String::new()),
        });
        let yaml = cfg.to_yaml().unwrap();
        assert!(matches!(
            RepositoryConfig::parse(yaml.as_bytes()),
            Err(FormatError::InvalidConfig { .. })
        ));
        assert!(matches!(
            RepositoryConfig::from_flexbuffer(&cfg.to_flexbuffer().unwrap()),
            Err(FormatError::InvalidConfig { .. })
        ));
    }
}
