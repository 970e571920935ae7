//! The `chunk_packing` section of the repository configuration: whether a session
//! writes small chunks together, several to one chunk object ("pack"), and the sizes
//! that decide it.
//!
//! A floe key, not one Icechunk defines. Icechunk 2.3.0 opens a repository whose
//! configuration carries it (its configuration reader ignores keys it does not know,
//! in `config.yaml` and in the spec-2 `repo` object alike) and reads packed chunks,
//! because a native chunk ref names an object, an offset and a length; but
//! Icechunk drops the key when it rewrites the configuration itself. The section
//! also works as a runtime option: a configuration given when a repository is opened
//! merges over the stored one, field by field.

use serde::{Deserialize, Serialize};

/// Default of `chunk_packing.threshold_bytes`: chunks of at most 64 KiB (encoded) are
/// packed. Below this size a request's fixed cost on object storage (tens of
/// milliseconds to the first byte, and a per-request price) outweighs the transfer
/// of the bytes many times over; above it, one object per chunk costs little more
/// than its transfer, and keeps garbage collection fine-grained.
pub const DEFAULT_PACK_THRESHOLD_BYTES: u32 = 64 << 10;

/// Default of `chunk_packing.target_size_bytes`: a pack is written once it holds
/// 8 MiB. That is at least 128 packed chunks per request, one plain `PUT` (far below
/// multipart sizes), read whole with one ranged `GET` (the coalescing span is
/// 16 MiB), and the memory a session holds per pack not yet written.
pub const DEFAULT_PACK_TARGET_SIZE_BYTES: u32 = 8 << 20;

/// When a session packs small chunks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChunkPackingMode {
    /// On for object storage (S3, GCS, Azure, HTTP, in memory), where every object
    /// costs a request; off where the storage's objects are local files, which cost
    /// little each and are written without a request.
    #[default]
    Auto,
    /// Always on, also for local files.
    Enabled,
    /// Always off: every chunk above the inline threshold is its own chunk object,
    /// as Icechunk writes them.
    Disabled,
}

/// `chunk_packing`: every field is optional; unset ones take the defaults above.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkPackingConfig {
    /// When packing is on (default [`ChunkPackingMode::Auto`]).
    #[serde(default)]
    pub mode: Option<ChunkPackingMode>,
    /// A chunk of at most this many encoded bytes (and more than the inline
    /// threshold) is packed; default 65,536 (64 KiB).
    #[serde(default)]
    pub threshold_bytes: Option<u32>,
    /// A pack is written once it holds at least this many bytes; default
    /// 8,388,608 (8 MiB).
    #[serde(default)]
    pub target_size_bytes: Option<u32>,
}

impl ChunkPackingConfig {
    /// When packing is on (default [`ChunkPackingMode::Auto`]).
    pub fn mode(&self) -> ChunkPackingMode {
        self.mode.unwrap_or_default()
    }

    /// The packing threshold in bytes (default 65,536).
    pub fn threshold_bytes(&self) -> u32 {
        self.threshold_bytes.unwrap_or(DEFAULT_PACK_THRESHOLD_BYTES)
    }

    /// The target pack size in bytes (default 8,388,608), at least 1.
    pub fn target_size_bytes(&self) -> u32 {
        self.target_size_bytes
            .unwrap_or(DEFAULT_PACK_TARGET_SIZE_BYTES)
            .max(1)
    }

    /// Whether a session on storage whose objects are local files
    /// (`local_files`) or not packs chunks.
    pub fn enabled_for(&self, local_files: bool) -> bool {
        match self.mode() {
            ChunkPackingMode::Auto => !local_files,
            ChunkPackingMode::Enabled => true,
            ChunkPackingMode::Disabled => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_modes() {
        let c = ChunkPackingConfig::default();
        assert_eq!(c.threshold_bytes(), 65_536);
        assert_eq!(c.target_size_bytes(), 8 << 20);
        assert!(c.enabled_for(false));
        assert!(!c.enabled_for(true));
        let on = ChunkPackingConfig {
            mode: Some(ChunkPackingMode::Enabled),
            ..c
        };
        assert!(on.enabled_for(true));
        let off = ChunkPackingConfig {
            mode: Some(ChunkPackingMode::Disabled),
            ..c
        };
        assert!(!off.enabled_for(false));
        let yaml = serde_yaml::to_string(&on).unwrap();
        assert!(yaml.contains("mode: enabled"), "{yaml}");
        let back: ChunkPackingConfig = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(back, on);
    }

    #[test]
    fn stored_section_is_read_merged_and_checked() {
        use crate::format::config::RepositoryConfig;
        use crate::format::FormatError;
        let stored = RepositoryConfig::parse(
            b"chunk_packing: {mode: enabled, threshold_bytes: 1000}\nother: kept\n",
        )
        .unwrap();
        assert_eq!(
            stored.chunk_packing(),
            ChunkPackingConfig {
                mode: Some(ChunkPackingMode::Enabled),
                threshold_bytes: Some(1000),
                target_size_bytes: None,
            }
        );
        // A configuration given at open merges over the stored one, field by field.
        let over = RepositoryConfig::parse(b"chunk_packing: {target_size_bytes: 4096}\n").unwrap();
        let merged = stored.merge(&over).chunk_packing();
        assert_eq!(merged.mode(), ChunkPackingMode::Enabled);
        assert_eq!(merged.threshold_bytes(), 1000);
        assert_eq!(merged.target_size_bytes(), 4096);
        for bad in [
            &b"chunk_packing: {mode: sometimes}\n"[..],
            b"chunk_packing: {threshold_bytes: -1}\n",
            b"chunk_packing: 7\n",
        ] {
            let e = RepositoryConfig::parse(bad).unwrap_err();
            assert!(
                matches!(&e, FormatError::InvalidConfig { reason } if reason.starts_with("chunk_packing")),
                "{e:?}"
            );
        }
    }
}
