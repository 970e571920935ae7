//! Repository maintenance for repositories that live for years: expiring old
//! snapshots from history ([`expire`]), deleting objects nothing reaches any more
//! ([`gc`]), upgrading spec-1 repositories to spec 2 ([`upgrade`]), restoring an
//! unreadable spec-2 `repo` object from its saved copies ([`repair`]), checking that
//! everything the refs reach is there and decodes ([`mod@verify`]) and copying a
//! repository between storages ([`mod@clone`]). Expiry and garbage collection follow
//! Icechunk's semantics on spec-1 repositories (Icechunk's design documents 007
//! "basic expiration" and its garbage collector), so floe and Icechunk leave the same
//! objects behind on the same repository; Icechunk 2.3.0 has no verify or clone.
//!
//! Histories can also be thinned per branch ([`retention`]: keep the last N
//! commits and those of the last days, as Iceberg's snapshot retention) and
//! stretches of a branch squashed into one commit ([`squash`]).
//!
//! The usual sequence is [`crate::Repository::expire_snapshots`] (which only edits
//! history) followed by [`crate::Repository::garbage_collect`] (which deletes what
//! expiry made unreachable, once it is older than the cut-off).

pub mod clone;
pub mod expire;
pub mod gc;
pub mod repair;
pub mod retention;
pub mod squash;
pub mod stats;
pub mod upgrade;
pub mod verify;

pub use clone::{clone_repository, CloneOptions, CloneReport};
pub use expire::{ExpireOptions, ExpireResult};
pub use gc::{GcOptions, GcSummary, GC_SAFETY_WINDOW_SECS};
pub use repair::{repair_repo_object, RepairOutcome};
pub use retention::{RetentionPolicy, RetentionRule, RETENTION_METADATA_KEY};
pub use squash::SquashResult;
pub use stats::ChunkStorageStats;
pub use upgrade::{upgrade_to_spec2, UpgradeReport};
pub use verify::{verify, Problem, ProblemKind, VerifyOptions, VerifyReport};
