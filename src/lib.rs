//! # floe
//!
//! Transactional, versioned Zarr v3 repositories in the [Icechunk] on-disk format:
//! commits, branches, tags and time travel for N-dimensional arrays, safe concurrent
//! writers (optimistic concurrency with rebase), and virtual references into existing
//! NetCDF/HDF5 files. Both spec versions are read and written: spec 2 (the default
//! for new repositories, as in Icechunk 2.x, with its `repo` object, ops log,
//! repository metadata and node moves) and spec 1 (on request, with
//! [`Repository::create_with`]; opens in Icechunk 1.x and 2.x);
//! [`lifecycle::upgrade_to_spec2`] upgrades.
//!
//! Data flows one way through the modules, each using only those before it (checked by
//! `tests/integration/module_graph.rs`, which also refuses import cycles between files):
//! [`storage`] → [`mod@format`] → [`error`] → [`virtual_refs`] → `assets` (fetching and
//! caching format objects) → [`refs`] → [`lifecycle`] (expiry, garbage collection,
//! upgrade, repair) → [`zarr`] → [`session`] (with [`SessionStore`], a session as a
//! Zarr store) → [`repository`] → [`ops`] (import, export) → [`serve`] (every version
//! over HTTP as plain Zarr, and a JSON API). The `floe` command line is the binary's
//! own module (`src/cli`, not library API) on top of all of them.
//!
//! ## Paths and chunk indices
//!
//! One convention runs through every layer:
//!
//! - **Node paths.** Sessions, diffs, conflicts and errors name nodes with
//!   [`NodePath`] (absolute: `/`, `/a/b`). The Zarr API takes the same paths in
//!   store form (`a/b`, `""` for the root; a leading `/` is accepted), checked by the
//!   same rules ([`zarr::node::normalize_path`]), and `Array::node_path` /
//!   `Group::node_path` give the [`NodePath`] back.
//! - **Chunk indices.** Chunk grid coordinates are `u64` everywhere (`&[u64]` in,
//!   [`format::ChunkIndices`] = `Vec<u64>` out), in the session as in Zarr arrays.
//!   Icechunk files store `u32` coordinates, so a session refuses coordinates above
//!   [`format::MAX_CHUNK_COORDINATE`] when they are set.
//!
//! ## Quickstart
//!
//! ```
//! use bytes::Bytes;
//! use floe::storage::LocalStorage;
//! use floe::{NodePath, Repository, VersionSelector};
//! use floe::zarr::store::Store;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let repo = Repository::create(std::sync::Arc::new(LocalStorage::new(dir.path())?), None).await?;
//!
//! // A writable session on `main`, seen as a Zarr store: write a group and an array.
//! let session = repo.writable_session("main").await?;
//! let store = session.store();
//! store.set("zarr.json", Bytes::from(r#"{"zarr_format":3,"node_type":"group","attributes":{}}"#)).await?;
//! store.set("t/zarr.json", Bytes::from(r#"{"zarr_format":3,"node_type":"array","shape":[4],
//!     "data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},
//!     "chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},
//!     "fill_value":0,"codecs":[{"name":"bytes"}],"attributes":{}}"#)).await?;
//! store.set("t/c/0", Bytes::from_static(&[1, 2])).await?;
//! let first = session.commit("first values").await?;
//!
//! // Branch and tag the first commit, then change the data on main.
//! repo.create_branch("experiment", first).await?;
//! repo.create_tag("v1", first).await?;
//! store.set("t/c/0", Bytes::from_static(&[9, 9])).await?;
//! let second = session.commit("new values").await?;
//! assert_eq!(repo.ancestry(second).await?.len(), 3); // two commits + the initial snapshot
//!
//! // Time travel: the tag still reads the older snapshot.
//! let old = repo.readonly_session(&VersionSelector::Tag("v1".into())).await?;
//! assert_eq!(old.store().get("t/c/0").await?.as_deref(), Some(&[1u8, 2][..]));
//! let new = repo.readonly_session(&VersionSelector::Branch("main".into())).await?;
//! assert_eq!(new.store().get("t/c/0").await?.as_deref(), Some(&[9u8, 9][..]));
//! assert_eq!(new.get_node(&NodePath::new("/t")?)?.array().map(|a| a.shape.len()), Some(1));
//! # Ok(())
//! # }
//! ```
//!
//! [Icechunk]: https://icechunk.io

// No `unwrap`, `expect` or `panic!` in library code: errors are typed and returned.
// Unit tests (`cfg(test)`) are exempt; integration tests and benches are other crates.
// The `testing` feature's conformance suites, which report by panicking, opt out.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
// `unsafe` only in the modules that declare it (`#[allow(unsafe_code)]` on their
// `mod` line: flatbuffer roots in `format::fb` and `format::snapshot`, c-blosc in
// `zarr::codec::blosc`, mapped chunk files in `serve::file_body`, the Zarr chunks'
// zstd context in `zstd_context`), every block with a `// SAFETY:` comment.
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

/// Test assertion: `$e` is an `Err` matching `$p` (prints what it was otherwise).
#[cfg(test)]
macro_rules! assert_err {
    ($e:expr, $p:pat) => {
        match $e {
            Err($p) => {}
            other => panic!(
                "expected Err({}), got {:?}",
                stringify!($p),
                other.map(|_| ())
            ),
        }
    };
}

/// The asset manager is internal; the `testing` feature exposes it for tests that
/// inspect or plant objects.
#[cfg(feature = "testing")]
pub mod assets;
#[cfg(not(feature = "testing"))]
#[allow(unreachable_pub)]
pub(crate) mod assets;
mod buffer_pool;
mod compute;
pub mod error;
pub mod format;
pub mod lifecycle;
pub mod ops;
pub mod refs;
pub mod repository;
pub mod serve;
pub mod session;
pub mod storage;
pub mod virtual_refs;
pub mod zarr;
// `unsafe`: a zstd-sys context for Zarr chunks (a setting the safe bindings lack).
#[allow(unsafe_code)]
mod zstd_context;

pub use error::{Error, Result};
pub use format::{NodePath, SnapshotId};
pub use repository::{OpenOptions, Repository, SnapshotInfo, VersionSelector};
pub use session::{CommitOptions, Session, SessionStore};
