//! The public error types. Each layer has its own enum ([`StorageError`],
//! [`FormatError`], the Zarr layer's errors); [`Error`] is what repository, session and
//! CLI operations return, with one variant per failure a caller can act on.

use chrono::{DateTime, Utc};

mod conflict;
mod kerchunk;
mod virtual_chunk;

pub use crate::format::FormatError;
pub use crate::storage::StorageError;
pub use conflict::{Conflict, ConflictError};
pub use kerchunk::KerchunkError;
pub use virtual_chunk::VirtualChunkError;

use crate::format::{ChunkIndices, NodePath, SnapshotId, SpecVersion};

/// Errors of repository and session operations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The storage backend failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A format object is corrupt, truncated or of an unsupported version.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// No repository at the location (no `refs/branch.main/ref.json`).
    #[error("no repository at `{location}`")]
    RepositoryNotFound {
        /// The storage root URL.
        location: String,
    },
    /// A repository already exists where one was to be created.
    #[error("a repository already exists at `{location}`")]
    RepositoryExists {
        /// The storage root URL.
        location: String,
    },
    /// An operation that needs another Icechunk spec version than the repository's
    /// (the ops log, repository metadata, status and feature flags need spec 2).
    #[error("`{operation}` is not supported on Icechunk spec-{spec_version} repositories")]
    UnsupportedOnSpecVersion {
        /// The operation (`commit`, `create_branch`, ...).
        operation: &'static str,
        /// The repository's spec version.
        spec_version: SpecVersion,
    },
    /// A branch or tag name that is empty or contains `/` or control characters.
    #[error("invalid {kind} name `{name}`: {reason}")]
    InvalidRefName {
        /// `branch` or `tag`.
        kind: &'static str,
        /// The name given.
        name: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// The branch does not exist.
    #[error("branch `{name}` not found")]
    BranchNotFound {
        /// The branch name.
        name: String,
    },
    /// The branch already exists.
    #[error("branch `{name}` already exists")]
    BranchExists {
        /// The branch name.
        name: String,
    },
    /// `main` cannot be deleted: it marks the repository's existence.
    #[error("branch `main` cannot be deleted")]
    CannotDeleteMain,
    /// The tag does not exist.
    #[error("tag `{name}` not found")]
    TagNotFound {
        /// The tag name.
        name: String,
    },
    /// The tag exists (tags never move).
    #[error("tag `{name}` already exists")]
    TagExists {
        /// The tag name.
        name: String,
    },
    /// The tag was deleted; its name can never be used again.
    #[error("tag `{name}` was deleted; a deleted tag's name cannot be reused")]
    TagDeleted {
        /// The tag name.
        name: String,
    },
    /// A reference that is neither a branch, a tag, nor a snapshot id.
    #[error("`{reference}` is not a branch, tag or snapshot id of this repository")]
    RefNotFound {
        /// The reference given.
        reference: String,
    },
    /// The snapshot does not exist.
    #[error("snapshot {id} not found")]
    SnapshotNotFound {
        /// The snapshot id.
        id: SnapshotId,
    },
    /// The parent chain of a snapshot reaches the same snapshot twice: the repository's
    /// history is corrupt (a snapshot names itself or a descendant as its parent).
    #[error("corrupt history: snapshot {snapshot} is its own ancestor (the parent chain loops)")]
    AncestryLoop {
        /// The first snapshot seen twice.
        snapshot: SnapshotId,
    },
    /// No snapshot of the branch was committed at or before the time.
    #[error("branch `{branch}` has no snapshot at or before {time}")]
    NoSnapshotAtTime {
        /// The branch.
        branch: String,
        /// The requested time.
        time: DateTime<Utc>,
    },
    /// A branch moved between reading and updating it (reset or commit without rebase).
    #[error("branch `{branch}` moved: expected it at {expected}, found {actual}")]
    BranchMoved {
        /// The branch.
        branch: String,
        /// The snapshot the caller expected.
        expected: SnapshotId,
        /// Where the branch is now.
        actual: SnapshotId,
    },
    /// Commit conflicts that a rebase cannot resolve.
    #[error(transparent)]
    Conflict(#[from] Box<ConflictError>),
    /// Forks whose changes overlap each other or the changes the session made since
    /// they were forked: nothing was merged.
    #[error("cannot merge: {}", conflict::list(conflicts))]
    MergeConflict {
        /// Every conflict found, over all the forks given.
        conflicts: Vec<Conflict>,
    },
    /// The fork's changes were already merged into this session.
    #[error("fork {fork} was already merged into this session")]
    ForkAlreadyMerged {
        /// The fork's change id (hex).
        fork: String,
    },
    /// Only a fork can be serialized or merged: a session on a branch holds the right
    /// to commit to it and does not travel; call `Session::fork` and send the fork.
    #[error(
        "only a fork session can be serialized or merged; call Session::fork() and send the fork"
    )]
    NotAFork,
    /// A fork cannot commit: merge it into the session it was forked from, which
    /// commits.
    #[error("a fork cannot commit; merge it into the session it came from and commit there")]
    ForkCannotCommit,
    /// Serialized fork bytes that cannot be read (corrupt, truncated, another version,
    /// or chunk indices outside their arrays).
    #[error("invalid fork: {reason}")]
    InvalidFork {
        /// What is wrong.
        reason: String,
    },
    /// `clone` refused a destination that holds another repository (or one with
    /// commits the source lacks), whose refs the clone would overwrite.
    #[error("cannot clone into `{location}`: {reason}")]
    CloneDestinationInUse {
        /// The destination's root URL.
        location: String,
        /// Why it is refused.
        reason: String,
    },
    /// A retention policy that cannot be applied: unknown fields, wrong types, or a
    /// rule that would keep nothing but the tip.
    #[error("invalid retention policy: {reason}")]
    InvalidRetentionPolicy {
        /// What is wrong.
        reason: String,
    },
    /// A squash range that is not a stretch of the branch's history: `to` is not in
    /// it, or `from` is not an ancestor of `to`.
    #[error("cannot squash branch `{branch}`: {reason}")]
    InvalidSquashRange {
        /// The branch.
        branch: String,
        /// What is wrong with the range.
        reason: String,
    },
    /// The branch tip is the initial snapshot, which has no parent to amend onto.
    #[error("the first commit of a repository cannot be amended; make a new commit")]
    NoAmendForInitialCommit,
    /// The node does not exist.
    #[error("node `{path}` not found")]
    NodeNotFound {
        /// The path.
        path: NodePath,
    },
    /// A node already exists at the path.
    #[error("a node already exists at `{path}`")]
    NodeExists {
        /// The path.
        path: NodePath,
    },
    /// The parent of a new node is missing or is an array.
    #[error("cannot create `{path}`: its parent is not an existing group")]
    ParentNotGroup {
        /// The path of the node being created.
        path: NodePath,
    },
    /// A move whose destination is already a node (Icechunk's wording: a move
    /// never overwrites).
    #[error("move cannot overwrite existing node at `{path}`")]
    MoveOverwrite {
        /// The destination.
        path: NodePath,
    },
    /// A move whose destination's parent is missing (`missing`) or is an array:
    /// moves land under existing groups only and never create intermediate groups.
    #[error(
        "cannot move to `{to}`: the destination's parent {}",
        move_parent_problem(.parent, *.missing)
    )]
    MoveParentNotGroup {
        /// The destination.
        to: NodePath,
        /// Its parent.
        parent: NodePath,
        /// Whether the parent is missing (otherwise it is an array).
        missing: bool,
    },
    /// The node is a group where an array was needed.
    #[error("node `{path}` is not an array")]
    NotAnArray {
        /// The path.
        path: NodePath,
    },
    /// The node is an array where a group was needed.
    #[error("node `{path}` is not a group")]
    NotAGroup {
        /// The path.
        path: NodePath,
    },
    /// A chunk index outside the array's chunk grid, or of the wrong dimensionality.
    #[error("chunk index {index:?} is outside the chunk grid of array `{path}`")]
    InvalidChunkIndex {
        /// The array.
        path: NodePath,
        /// The index given.
        index: ChunkIndices,
    },
    /// A chunk ref whose object is missing or shorter than the ref says.
    #[error("chunk {index:?} of array `{path}` cannot be read: {reason}")]
    ChunkUnreadable {
        /// The array.
        path: NodePath,
        /// The chunk index.
        index: ChunkIndices,
        /// Why (missing object, short read, ...).
        reason: String,
    },
    /// A virtual chunk could not be read (unauthorized, checksum mismatch, ...).
    #[error("chunk {index:?} of array `{path}`: {source}")]
    VirtualChunk {
        /// The array.
        path: NodePath,
        /// The chunk index.
        index: ChunkIndices,
        /// What went wrong.
        #[source]
        source: VirtualChunkError,
    },
    /// A write on a read-only session.
    #[error("session is read-only")]
    ReadOnlySession,
    /// A synchronous node method on a session opened without its snapshot
    /// ([`Repository::writable_session_lazy`](crate::Repository::writable_session_lazy))
    /// before [`Session::load`](crate::Session::load) read it.
    #[error("the session's snapshot is not read yet: call `Session::load` first")]
    SessionNotLoaded,
    /// A commit with no change, when empty commits were not allowed.
    #[error("no changes to commit")]
    NoChangesToCommit,
    /// Node metadata (`zarr.json`) that floe cannot understand.
    #[error("invalid metadata for `{path}`: {reason}")]
    InvalidNodeMetadata {
        /// The node.
        path: NodePath,
        /// What is wrong.
        reason: String,
    },
    /// `shift_array` or `reindex_array` on an array whose `zarr.json` does not declare
    /// a `regular` chunk grid (a `rectilinear` one, or one that cannot be read):
    /// chunks of such grids differ in shape by position, so moving them would corrupt
    /// the array (Icechunk 2.3.0's `UnsupportedChunkGridForReindex`, issue 2151).
    #[error(
        "cannot shift or reindex the chunks of the array at `{path}`: its chunk grid is \
         `{grid}`, not `regular`; the chunks of a `{grid}` grid differ in shape by position, \
         so moving them would corrupt the array"
    )]
    UnsupportedChunkGridForReindex {
        /// The array.
        path: NodePath,
        /// The grid's name in the metadata (`rectilinear`), `unknown` when unreadable.
        grid: String,
    },
    /// A kerchunk reference set that cannot be read or imported.
    #[error(transparent)]
    Kerchunk(#[from] Box<KerchunkError>),
    /// A configuration value that cannot be used.
    #[error("invalid configuration: {reason}")]
    InvalidConfig {
        /// What is wrong.
        reason: String,
    },
    /// `config.yaml` was written by another writer after this repository handle read
    /// it (the conditional write lost); reopen the repository and apply the change
    /// again.
    #[error("config.yaml was changed by another writer; reopen the repository and retry")]
    ConfigChanged,
    /// [`crate::Session::move_node`] on a session that is not a rearrange session.
    #[error("nodes move only in a rearrange session (Repository::rearrange_session)")]
    NotARearrangeSession,
    /// A move that cannot be made.
    #[error("cannot move `{from}` to `{to}`: {reason}")]
    InvalidMove {
        /// The node to move.
        from: NodePath,
        /// Where it was to go.
        to: NodePath,
        /// Why not.
        reason: String,
    },
    /// Spec 2: the repository's status does not accept writes.
    #[error("the repository is read-only ({availability:?}){}", reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default())]
    RepositoryReadOnly {
        /// The status (`ReadOnly` or `Offline`).
        availability: crate::format::repo_info::Availability,
        /// Why, if the status says.
        reason: Option<String>,
    },
    /// Spec 2: the `repo` object kept changing under this update (other writers won
    /// every compare-and-swap) for this many attempts.
    #[error("the repo object changed under each of {attempts} update attempts")]
    RepoObjectContention {
        /// Attempts made.
        attempts: u32,
    },
    /// A feature flag turned off on this repository forbids the operation.
    #[error("`{operation}` is disabled on this repository by feature flag `{flag}`")]
    FeatureDisabled {
        /// The operation.
        operation: &'static str,
        /// The flag's name.
        flag: &'static str,
    },
    /// Spec 2: the `repo` object cannot be read and no copy under `overwritten/`
    /// can be read either, so [`crate::lifecycle::repair::repair_repo_object`] has
    /// nothing to restore.
    #[error(
        "the repo object cannot be read ({reason}) and none of the {tried} copies under \
         overwritten/ can be read either"
    )]
    NoReadableRepoBackup {
        /// Why the `repo` object cannot be read.
        reason: String,
        /// Copies tried.
        tried: usize,
    },
    /// Garbage collection was given a cut-off inside its safety window (newer than
    /// `window_seconds` before now): objects of commits still in flight could be
    /// deleted. Pass an older cut-off, or override the window
    /// (`GcOptions::allow_recent_cutoff`, `floe gc --allow-recent-cutoff`).
    #[error(
        "gc cut-off {cut_off} is within the {window_seconds} s safety window (must be before \
         {latest_allowed}): objects of commits still in flight could be deleted; pass an \
         older cut-off, or override with --allow-recent-cutoff \
         (GcOptions::allow_recent_cutoff) if no writer is active"
    )]
    GcCutoffTooRecent {
        /// The cut-off given.
        cut_off: chrono::DateTime<chrono::Utc>,
        /// The newest cut-off accepted at the time of the call.
        latest_allowed: chrono::DateTime<chrono::Utc>,
        /// The safety window, in seconds.
        window_seconds: u64,
    },
    /// Garbage collection stopped: `failures` delete batches in a row failed under
    /// `prefix` (`GcOptions::max_consecutive_delete_failures`, Icechunk 2.3.0's
    /// `max_consecutive_delete_failures`). What was deleted before stays deleted;
    /// the rest is garbage for the next collection.
    #[error(
        "too many consecutive delete failures under `{prefix}` ({failures} in a row): {last_error}"
    )]
    GcDeletesFailing {
        /// The directory being swept (`chunks/`, ...).
        prefix: String,
        /// Batches that failed in a row.
        failures: u32,
        /// The last batch's error.
        last_error: String,
    },
}

impl Error {
    /// [`Error::Conflict`]: `branch` moved from `base` to `winning_snapshot`, with the
    /// `conflicts` found (none when no rebase was tried).
    pub(crate) fn conflict(
        branch: &str,
        base: SnapshotId,
        winning_snapshot: SnapshotId,
        conflicts: Vec<Conflict>,
    ) -> Error {
        Error::Conflict(Box::new(ConflictError {
            branch: branch.to_string(),
            base,
            winning_snapshot,
            conflicts,
        }))
    }
}

/// Result of repository and session operations.
pub type Result<T> = std::result::Result<T, Error>;

/// How [`Error::MoveParentNotGroup`] words its parent (as Icechunk 2.3.0 does).
fn move_parent_problem(parent: &NodePath, missing: bool) -> String {
    if missing {
        format!("group `{parent}` does not exist")
    } else {
        format!("`{parent}` is an array, not a group")
    }
}
