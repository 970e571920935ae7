//! Every storage key of an Icechunk repository, spec 1 and 2, in one place
//! (`../shared/docs/icechunk-format-v1.md`, "Layout"; spec 2:
//! `../shared/docs/icechunk-format-notes.md`). Keys are `/`-separated and relative to
//! the repository root.
//!
//! | object | key |
//! |---|---|
//! | snapshot | `snapshots/<SnapshotId>` |
//! | manifest | `manifests/<ManifestId>` |
//! | transaction log | `transactions/<SnapshotId>` (of the snapshot it produced) |
//! | native chunk | `chunks/<ChunkId>` |
//! | branch (spec 1) | `refs/branch.<name>/ref.json` |
//! | tag (spec 1) | `refs/tag.<name>/ref.json`, and `ref.json.deleted` beside it once deleted |
//! | configuration (spec 1) | `config.yaml` |
//! | repository object (spec 2: refs, config, ops log, snapshot summaries) | `repo` |
//! | replaced repository objects (spec 2) | `overwritten/repo.<T>.<R>` |
//! | floe's garbage-collection state (not Icechunk's) | `floe/gc-state` |

use super::{ChunkId, ManifestId, SnapshotId};

/// Prefix of snapshot keys.
pub const SNAPSHOTS: &str = "snapshots/";
/// Prefix of manifest keys.
pub const MANIFESTS: &str = "manifests/";
/// Prefix of transaction log keys.
pub const TRANSACTIONS: &str = "transactions/";
/// Prefix of native chunk keys.
pub const CHUNKS: &str = "chunks/";
/// Prefix of branch and tag keys.
pub const REFS: &str = "refs/";
/// The file name of a ref inside its directory.
pub const REF_FILE: &str = "ref.json";
/// The file name of a deleted tag's tombstone inside its directory.
pub const TOMBSTONE_FILE: &str = "ref.json.deleted";
/// Prefix of a branch's directory name under [`REFS`].
pub const BRANCH_DIR: &str = "branch.";
/// Prefix of a tag's directory name under [`REFS`].
pub const TAG_DIR: &str = "tag.";
/// The repository configuration.
pub const CONFIG: &str = "config.yaml";
/// The spec-2 repository object, whose presence marks a spec-2 repository.
pub const SPEC2_REPO: &str = "repo";

/// floe's garbage-collection state ([`super::gc_state`]): the chunk ids of the
/// manifests the last collection retained. Not an Icechunk object: Icechunk
/// neither reads nor deletes it.
pub const GC_STATE: &str = "floe/gc-state";

/// Spec 2: the folder of copies of replaced `repo` objects.
pub const OVERWRITTEN: &str = "overwritten/";

/// Spec 2: the name (relative to [`OVERWRITTEN`], as the ops log records it) of a
/// copy of the `repo` object replaced at `now_ms` (milliseconds since the Unix
/// epoch): `repo.<T>.<R>` with `T` = 3000-01-01T00:00Z minus now in milliseconds,
/// 14 digits (newest sorts first), and `R` 12 random bytes in Crockford base32.
pub fn repo_backup_name(now_ms: u64) -> String {
    const YEAR_3000_MS: u64 = 32_503_680_000_000;
    let random = super::ChunkId::random();
    format!(
        "{SPEC2_REPO}.{:014}.{random}",
        YEAR_3000_MS.saturating_sub(now_ms)
    )
}

/// Spec 2: the key of a `repo` copy named `name` (see [`repo_backup_name`]).
pub fn overwritten(name: &str) -> String {
    format!("{OVERWRITTEN}{name}")
}

/// Key of snapshot `id`.
pub fn snapshot(id: &SnapshotId) -> String {
    format!("{SNAPSHOTS}{id}")
}

/// Key of manifest `id`.
pub fn manifest(id: &ManifestId) -> String {
    format!("{MANIFESTS}{id}")
}

/// Key of the transaction log of snapshot `id`.
pub fn transaction_log(id: &SnapshotId) -> String {
    format!("{TRANSACTIONS}{id}")
}

/// Key of native chunk `id`.
pub fn chunk(id: &ChunkId) -> String {
    format!("{CHUNKS}{id}")
}

/// Key of branch `name`'s ref.
pub fn branch(name: &str) -> String {
    format!("{REFS}{BRANCH_DIR}{name}/{REF_FILE}")
}

/// Key of tag `name`'s ref.
pub fn tag(name: &str) -> String {
    format!("{REFS}{TAG_DIR}{name}/{REF_FILE}")
}

/// Key of tag `name`'s tombstone (present once the tag is deleted).
pub fn tag_tombstone(name: &str) -> String {
    format!("{REFS}{TAG_DIR}{name}/{TOMBSTONE_FILE}")
}
