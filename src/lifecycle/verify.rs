//! Integrity checking (`floe verify`, a repository `fsck`): everything the refs reach
//! is there and decodes, without reading chunk bytes unless asked.
//!
//! Icechunk 2.3.0 has no such check: a missing or zero-length chunk is found only
//! when it is read (icechunk#2328), and a manifest that fails the format checker
//! stops garbage collection (icechunk#2284). What is checked, in order:
//!
//! 1. **Refs.** Every branch and tag resolves: on spec 1 its ref file decodes; on
//!    spec 2 the `repo` object decodes, every ref names a snapshot it lists, every
//!    parent link it holds names a snapshot it lists, and every snapshot it lists has
//!    a file (one listing of `snapshots/`).
//! 2. **Snapshots.** Every snapshot in the history of a ref exists and decodes within
//!    the format limits ([`crate::format::limits`]), and (spec 2) is listed in the
//!    `repo` object; the parent chain has no loop.
//! 3. **Transaction logs.** The log of every reachable snapshot but the first of a
//!    history exists and decodes.
//! 4. **Manifests.** Every manifest a reachable snapshot lists exists and decodes
//!    (inline chunk refs with it). Manifests are read [`VerifyOptions::manifest_concurrency`]
//!    at a time and dropped once checked, never cached.
//! 5. **Native chunks.** Every native chunk ref points to an object under `chunks/`
//!    of at least the ref's offset + length bytes, and of more than zero bytes. The
//!    sizes come from listing `chunks/` (ranges listed concurrently where the storage
//!    lists ranges cheaply: S3), not from a request per chunk, and the listing runs
//!    while the manifests are read: verification runs at the listing floor. The
//!    listed sizes are kept until the manifests are read (at most
//!    [`VerifyOptions::max_chunk_ids_in_memory`] of them; with more chunk objects
//!    than that, `chunks/` is listed again once they are). The chunk ids to look
//!    for are held in memory at most
//!    [`VerifyOptions::max_chunk_ids_in_memory`] at a time (about 50 bytes each);
//!    larger repositories are checked in several passes over slices of the id space,
//!    as garbage collection does ([`super::gc`]), planned from the largest manifest
//!    and refined when a pass finds more ids than the budget. With
//!    [`VerifyOptions::read_chunks`], each native chunk's byte range is also read.
//! 6. **Virtual chunks**, only when a resolver is given (the caller's authorization,
//!    as for reads): the object each distinct location names exists (one `HEAD` per
//!    location), holds the largest offset + length any ref asks of it, and still
//!    matches the recorded checksum (ETag equal; or not modified after the recorded
//!    second, as Icechunk's reads check).
//!
//! Each problem is reported with what is known of where it is (the ref, snapshot,
//! array, chunk index, object key) and verification goes on; storage failures other
//! than a missing object (a network error, access denied) stop it with an error, as
//! they say nothing about the repository.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;

use crate::assets::{AssetManager, ParentWalk};
use crate::error::{Error, Result};
use crate::format::keys;
use crate::format::manifest::{Checksum, ChunkPayload, Manifest};
use crate::format::repo_info::RepoInfo;
use crate::format::snapshot::ManifestFileInfo;
use crate::format::{ChunkId, ChunkIndices, NodeId, SnapshotId, SpecVersion};
use crate::refs;
use crate::storage::{Storage, StorageError};
use crate::virtual_refs::{VirtualChunkError, VirtualChunkResolver};

/// Options of [`verify`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyOptions {
    /// Also read the byte range of every native chunk ref (off by default: sizes
    /// from the listing prove the bytes are there, not that they are readable).
    pub read_chunks: bool,
    /// Manifests (and transaction logs) fetched and checked at once. `None` (the
    /// default, as garbage collection): the storage's own bound on requests in
    /// flight ([`Storage::max_concurrent_requests`]: 64 on S3 unless configured), or
    /// 32 where it has none.
    pub manifest_concurrency: Option<usize>,
    /// Listings of `chunks/` ranges in flight at once (default 32, as garbage
    /// collection).
    pub list_concurrency: usize,
    /// Requests in flight at once when reading chunks or heading virtual objects
    /// (default 16).
    pub request_concurrency: usize,
    /// Most native chunk ids held in memory at once, and most listed chunk sizes
    /// (default 4 Mi each, about 200 MiB and 120 MiB).
    pub max_chunk_ids_in_memory: u64,
    /// Most problems kept in the report (default 10,000); further ones are only
    /// counted ([`VerifyReport::problems_omitted`]).
    pub max_problems: usize,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            read_chunks: false,
            manifest_concurrency: None,
            list_concurrency: 32,
            request_concurrency: 16,
            max_chunk_ids_in_memory: 4 << 20,
            max_problems: 10_000,
        }
    }
}

impl VerifyOptions {
    /// Options reading (`yes`) every native chunk's bytes, or not (the default).
    pub fn read_chunks(mut self, yes: bool) -> Self {
        self.read_chunks = yes;
        self
    }

    /// Options holding at most `n` chunk ids in memory at once (at least 1).
    pub fn max_chunk_ids_in_memory(mut self, n: u64) -> Self {
        self.max_chunk_ids_in_memory = n.max(1);
        self
    }

    /// Options keeping at most `n` problems in the report.
    pub fn max_problems(mut self, n: usize) -> Self {
        self.max_problems = n;
        self
    }
}

/// What kind of problem [`verify`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProblemKind {
    /// Spec 2: the `repo` object is missing or does not decode (nothing else can be
    /// checked; `floe repair` restores it from a saved copy).
    UnreadableRepoObject,
    /// Spec 1: a ref file does not decode.
    UnreadableRef,
    /// A ref names a snapshot that does not exist.
    DanglingRef,
    /// Spec 2: the `repo` object disagrees with itself or with the snapshots (a ref
    /// or parent link naming a snapshot it does not list, a reachable snapshot it
    /// does not list).
    RepoObjectMismatch,
    /// A snapshot in a ref's history does not exist.
    MissingSnapshot,
    /// A snapshot does not decode (or exceeds the format limits).
    CorruptSnapshot,
    /// The parent chain of a ref loops.
    AncestryLoop,
    /// A reachable snapshot's transaction log does not exist.
    MissingTransactionLog,
    /// A transaction log does not decode.
    CorruptTransactionLog,
    /// A manifest a reachable snapshot lists does not exist.
    MissingManifest,
    /// A manifest does not decode (or exceeds the format limits).
    CorruptManifest,
    /// A native chunk ref points to an object that does not exist.
    MissingChunk,
    /// A native chunk ref points past the end of its object.
    TruncatedChunk,
    /// A native chunk object holds zero bytes (icechunk#2328).
    ZeroLengthChunk,
    /// Reading a native chunk's bytes failed (with [`VerifyOptions::read_chunks`]).
    UnreadableChunk,
    /// A virtual chunk ref's object does not exist.
    MissingVirtualObject,
    /// A virtual chunk ref's object no longer matches the recorded ETag or
    /// modification time.
    ChangedVirtualObject,
    /// A virtual chunk ref points past the end of its object.
    TruncatedVirtualObject,
    /// A virtual chunk ref's object could not be checked (no container covers it,
    /// not authorized, access denied...).
    UncheckedVirtualObject,
}

/// One problem [`verify`] found, with what is known of where it is.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Problem {
    /// What is wrong.
    pub kind: ProblemKind,
    /// A sentence saying what is wrong.
    pub message: String,
    /// The branch or tag (`branch:main`, `tag:v1`) through which it was reached.
    #[serde(rename = "ref")]
    pub ref_name: Option<String>,
    /// The snapshot involved (for a chunk: a snapshot that lists its manifest).
    pub snapshot: Option<SnapshotId>,
    /// The array's path.
    pub array: Option<String>,
    /// The chunk's index.
    pub chunk: Option<ChunkIndices>,
    /// The key of the object involved (relative to the repository root), or the
    /// URL of a virtual chunk's object.
    pub key: Option<String>,
}

impl Problem {
    fn new(kind: ProblemKind, message: impl Into<String>) -> Self {
        Problem {
            kind,
            message: message.into(),
            ref_name: None,
            snapshot: None,
            array: None,
            chunk: None,
            key: None,
        }
    }

    fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    fn snapshot(mut self, id: SnapshotId) -> Self {
        self.snapshot = Some(id);
        self
    }

    fn via(mut self, ref_name: Option<&str>) -> Self {
        self.ref_name = ref_name.map(str::to_string);
        self
    }
}

/// What [`verify`] checked and found.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct VerifyReport {
    /// Branches and tags checked.
    pub refs: u64,
    /// Snapshots reached and decoded.
    pub snapshots: u64,
    /// Transaction logs decoded.
    pub transaction_logs: u64,
    /// Manifests decoded.
    pub manifests: u64,
    /// Native chunk refs checked (each ref of each manifest).
    pub native_refs: u64,
    /// Distinct native chunk objects checked.
    pub chunk_objects: u64,
    /// Inline chunk refs decoded.
    pub inline_refs: u64,
    /// Virtual chunk refs seen.
    pub virtual_refs: u64,
    /// Distinct virtual objects checked (0 unless a resolver was given).
    pub virtual_objects: u64,
    /// Problems found (at most [`VerifyOptions::max_problems`]).
    pub problems: Vec<Problem>,
    /// Problems found beyond [`VerifyOptions::max_problems`], counted only.
    pub problems_omitted: u64,
}

impl VerifyReport {
    /// Whether no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty() && self.problems_omitted == 0
    }

    /// Problems found in all, kept or not.
    pub fn problem_count(&self) -> u64 {
        (self.problems.len() as u64).saturating_add(self.problems_omitted)
    }
}

/// Progress callback of [`verify`]: (items checked in the current phase, phase name).
pub type VerifyProgress<'a> = &'a (dyn Fn(u64, &str) + Sync);

/// Checks the integrity of the repository in `storage` (see the module docs for
/// what is checked). Virtual chunk objects are checked only when `resolver` is given,
/// under its authorization. Problems are reported, not raised: the report says
/// whether the repository is healthy ([`VerifyReport::is_ok`]).
///
/// # Example
/// ```
/// use floe::lifecycle::verify::{verify, VerifyOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), floe::Error> {
/// let storage = floe::storage::new_in_memory_storage();
/// floe::Repository::create(storage.clone(), None).await?;
/// let report = verify(storage, None, VerifyOptions::default(), None).await?;
/// assert!(report.is_ok());
/// assert_eq!(report.refs, 1); // main
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// [`Error::RepositoryNotFound`] when `storage` holds no repository; storage errors
/// other than a missing object (network, access), which leave the repository's
/// state unknown.
pub async fn verify(
    storage: Arc<dyn Storage>,
    resolver: Option<&VirtualChunkResolver>,
    options: VerifyOptions,
    progress: Option<VerifyProgress<'_>>,
) -> Result<VerifyReport> {
    let Some(spec) = refs::spec_version_of(storage.as_ref()).await? else {
        return Err(Error::RepositoryNotFound {
            location: storage.root_url(),
        });
    };
    let assets = AssetManager::for_spec(Arc::clone(&storage), spec);
    let mut v = Verifier {
        assets: &assets,
        storage: storage.as_ref(),
        fetch_concurrency: super::gc::fetch_concurrency(
            storage.as_ref(),
            options.manifest_concurrency,
        ),
        options,
        progress,
        report: VerifyReport::default(),
        ref_names: Vec::new(),
    };
    let Some((roots, info)) = v.roots(spec).await? else {
        return Ok(v.report);
    };
    let walked = v.walk(roots, info.as_deref()).await?;
    if let Some(info) = &info {
        v.listed_snapshot_files(info, &walked).await?;
    }
    v.transaction_logs(&walked).await?;
    v.manifests_and_chunks(&walked, resolver).await?;
    Ok(v.report)
}

/// The chunk objects under `prefixes` (`chunks/` ranges), listed `concurrency` at
/// a time: each id with its size in bytes; keys that are not chunk ids are skipped.
fn chunk_listing<'a>(
    storage: &'a dyn Storage,
    prefixes: &'a [String],
    concurrency: usize,
) -> futures::stream::BoxStream<'a, Result<(ChunkId, u64)>> {
    futures::stream::iter(prefixes)
        .map(move |p| storage.list_stream(p))
        .flatten_unordered(concurrency.max(1))
        .filter_map(|object| {
            futures::future::ready(match object {
                Err(e) => Some(Err(Error::from(e))),
                Ok(o) => o
                    .key
                    .strip_prefix(keys::CHUNKS)
                    .and_then(|id| id.parse::<ChunkId>().ok())
                    .map(|id| Ok((id, o.size))),
            })
        })
        .boxed()
}

/// Every chunk object under `prefixes` with its size in bytes ([`chunk_listing`]);
/// `None` once more than `limit` are found (the listing stops there).
async fn chunk_sizes(
    storage: &dyn Storage,
    prefixes: &[String],
    concurrency: usize,
    limit: u64,
) -> Result<Option<HashMap<ChunkId, u64>>> {
    let mut sizes = HashMap::new();
    let mut listed = chunk_listing(storage, prefixes, concurrency);
    while let Some(listed) = listed.next().await {
        let (id, size) = listed?;
        sizes.insert(id, size);
        if sizes.len() as u64 > limit {
            return Ok(None);
        }
    }
    Ok(Some(sizes))
}

/// What the walk of the refs' histories reached.
struct Walked {
    /// Reachable snapshots: index of the ref that first reached each, and whether it
    /// has a parent.
    snapshots: HashMap<SnapshotId, (usize, bool)>,
    /// Manifests to check, each with the snapshot that first listed it.
    manifests: Vec<(ManifestFileInfo, SnapshotId)>,
    /// Snapshots the walk found missing or unreadable (reported already).
    failed: HashSet<SnapshotId>,
}

/// The state of one verification.
struct Verifier<'a> {
    assets: &'a AssetManager,
    storage: &'a dyn Storage,
    /// Manifests and transaction logs fetched at once
    /// ([`VerifyOptions::manifest_concurrency`], resolved against the storage).
    fetch_concurrency: usize,
    options: VerifyOptions,
    progress: Option<VerifyProgress<'a>>,
    report: VerifyReport,
    /// `branch:NAME` / `tag:NAME` of each root, by index.
    ref_names: Vec<String>,
}

/// Whether an error says an object is missing (rather than unreadable, or a failure
/// of the storage).
fn is_missing(e: &Error) -> bool {
    matches!(
        e,
        Error::SnapshotNotFound { .. } | Error::Storage(StorageError::NotFound { .. })
    )
}

/// Whether an error is the storage failing (so nothing is learnt about the object).
fn is_storage_failure(e: &Error) -> bool {
    matches!(e, Error::Storage(s) if !matches!(s, StorageError::NotFound { .. } | StorageError::ShortRead { .. }))
}

impl Verifier<'_> {
    fn problem(&mut self, problem: Problem) {
        if self.report.problems.len() < self.options.max_problems {
            self.report.problems.push(problem);
        } else {
            self.report.problems_omitted += 1;
        }
    }

    fn tick(&self, n: u64, phase: &str) {
        if let Some(report) = self.progress {
            report(n, phase);
        }
    }

    /// Every ref's snapshot (with `ref_names` filled), and the spec-2 `repo` object;
    /// `None` when the `repo` object cannot be read (reported).
    async fn roots(
        &mut self,
        spec: SpecVersion,
    ) -> Result<Option<(Vec<SnapshotId>, Option<Arc<RepoInfo>>)>> {
        let mut roots = Vec::new();
        if spec == SpecVersion::V2 {
            let info = match self.assets.fetch_repo_info().await {
                Ok((info, _)) => info,
                Err(e) if is_storage_failure(&e) => return Err(e),
                Err(e) => {
                    self.problem(
                        Problem::new(
                            ProblemKind::UnreadableRepoObject,
                            format!("the repo object cannot be read: {e}"),
                        )
                        .key(keys::SPEC2_REPO),
                    );
                    return Ok(None);
                }
            };
            let refs = info
                .branches
                .iter()
                .map(|(n, id)| (format!("branch:{n}"), *id))
                .chain(info.tags.iter().map(|(n, id)| (format!("tag:{n}"), *id)));
            for (name, id) in refs {
                if !info.snapshots.contains_key(&id) {
                    self.problem(
                        Problem::new(
                            ProblemKind::RepoObjectMismatch,
                            format!(
                                "{name} names snapshot {id}, which the repo object does not list"
                            ),
                        )
                        .snapshot(id)
                        .via(Some(&name))
                        .key(keys::SPEC2_REPO),
                    );
                }
                self.ref_names.push(name);
                roots.push(id);
            }
            for s in info.snapshots.values() {
                if let Some(parent) = s.parent_id {
                    if !info.snapshots.contains_key(&parent) {
                        self.problem(
                            Problem::new(
                                ProblemKind::RepoObjectMismatch,
                                format!(
                                    "the repo object gives snapshot {} the parent {parent}, which it does not list",
                                    s.id
                                ),
                            )
                            .snapshot(s.id)
                            .key(keys::SPEC2_REPO),
                        );
                    }
                }
            }
            self.report.refs = roots.len() as u64;
            return Ok(Some((roots, Some(info))));
        }
        let listing = refs::list_refs(self.storage).await?;
        let refs = listing
            .branches
            .iter()
            .map(|n| (true, n))
            .chain(listing.tags.iter().map(|n| (false, n)));
        for (branch, name) in refs {
            let (label, key) = if branch {
                (format!("branch:{name}"), keys::branch(name))
            } else {
                (format!("tag:{name}"), keys::tag(name))
            };
            let fetched = if branch {
                refs::fetch_branch(self.storage, name).await.map(|b| b.0)
            } else {
                refs::fetch_tag(self.storage, name).await
            };
            self.report.refs += 1;
            match fetched {
                Ok(id) => {
                    self.ref_names.push(label);
                    roots.push(id);
                }
                Err(e) if is_storage_failure(&e) => return Err(e),
                Err(Error::TagDeleted { .. }) => {}
                Err(e) => self.problem(
                    Problem::new(
                        ProblemKind::UnreadableRef,
                        format!("{label} cannot be read: {e}"),
                    )
                    .via(Some(&label))
                    .key(key),
                ),
            }
        }
        Ok(Some((roots, None)))
    }

    /// Walks every root's history, reporting missing, corrupt and looping snapshots.
    async fn walk(&mut self, roots: Vec<SnapshotId>, info: Option<&RepoInfo>) -> Result<Walked> {
        let mut snapshots: HashMap<SnapshotId, (usize, bool)> = HashMap::new();
        let mut manifests = Vec::new();
        let mut manifest_ids = HashSet::new();
        let mut failed = HashSet::new();
        for (index, root) in roots.into_iter().enumerate() {
            if snapshots.contains_key(&root) {
                continue;
            }
            let name = self.ref_names.get(index).cloned();
            let mut walk = ParentWalk::new(self.assets, root);
            let mut expected = root;
            let mut first = true;
            loop {
                let snap = match walk.next().await {
                    Ok(Some(snap)) => snap,
                    Ok(None) => break,
                    Err(e) if is_storage_failure(&e) => return Err(e),
                    Err(e) => {
                        failed.insert(expected);
                        let key = keys::snapshot(&expected);
                        let (kind, message) = match &e {
                            Error::AncestryLoop { snapshot } => (
                                ProblemKind::AncestryLoop,
                                format!("the parent chain loops at snapshot {snapshot}"),
                            ),
                            e if is_missing(e) && first => (
                                ProblemKind::DanglingRef,
                                format!("the ref names snapshot {expected}, which does not exist"),
                            ),
                            e if is_missing(e) => (
                                ProblemKind::MissingSnapshot,
                                format!("snapshot {expected} of the history does not exist"),
                            ),
                            e => (
                                ProblemKind::CorruptSnapshot,
                                format!("snapshot {expected} cannot be decoded: {e}"),
                            ),
                        };
                        self.problem(
                            Problem::new(kind, message)
                                .snapshot(expected)
                                .via(name.as_deref())
                                .key(key),
                        );
                        break;
                    }
                };
                first = false;
                if snapshots.contains_key(&snap.id) {
                    break;
                }
                snapshots.insert(snap.id, (index, snap.parent_id.is_some()));
                self.report.snapshots += 1;
                self.tick(self.report.snapshots, "snapshots");
                if let Some(info) = info {
                    if !info.snapshots.contains_key(&snap.id) {
                        self.problem(
                            Problem::new(
                                ProblemKind::RepoObjectMismatch,
                                format!(
                                    "snapshot {} is in the history of a ref but the repo object does not list it",
                                    snap.id
                                ),
                            )
                            .snapshot(snap.id)
                            .via(name.as_deref())
                            .key(keys::SPEC2_REPO),
                        );
                    }
                }
                for m in &snap.manifest_files {
                    if manifest_ids.insert(m.id) {
                        manifests.push((*m, snap.id));
                    }
                }
                match snap.parent_id {
                    Some(p) => expected = p,
                    None => break,
                }
            }
        }
        Ok(Walked {
            snapshots,
            manifests,
            failed,
        })
    }

    /// Spec 2: every snapshot the `repo` object lists has a file (one listing of
    /// `snapshots/`). Expiry and garbage collection take a snapshot out of the object
    /// before its file is deleted, so a listed snapshot without a file is damage (its
    /// history and ops log no longer read). Snapshots the walk reported are skipped.
    async fn listed_snapshot_files(&mut self, info: &RepoInfo, walked: &Walked) -> Result<()> {
        let files: HashSet<SnapshotId> = self
            .storage
            .list(keys::SNAPSHOTS)
            .await?
            .iter()
            .filter_map(|o| o.key.strip_prefix(keys::SNAPSHOTS)?.parse().ok())
            .collect();
        for id in info.snapshots.keys() {
            if !files.contains(id) && !walked.failed.contains(id) {
                self.problem(
                    Problem::new(
                        ProblemKind::RepoObjectMismatch,
                        format!("the repo object lists snapshot {id}, whose file does not exist"),
                    )
                    .snapshot(*id)
                    .key(keys::snapshot(id)),
                );
            }
        }
        Ok(())
    }

    /// The ref through which `snapshot` was reached.
    fn ref_of(&self, walked: &Walked, snapshot: &SnapshotId) -> Option<String> {
        walked
            .snapshots
            .get(snapshot)
            .and_then(|(i, _)| self.ref_names.get(*i).cloned())
    }

    /// Checks the transaction log of every reachable snapshot that has a parent.
    async fn transaction_logs(&mut self, walked: &Walked) -> Result<()> {
        let ids: Vec<SnapshotId> = walked
            .snapshots
            .iter()
            .filter(|(_, (_, has_parent))| *has_parent)
            .map(|(id, _)| *id)
            .collect();
        let assets = self.assets;
        let mut checks = futures::stream::iter(ids)
            .map(|id| async move { (id, assets.fetch_transaction_log(&id).await.map(|_| ())) })
            .buffer_unordered(self.fetch_concurrency);
        while let Some((id, outcome)) = checks.next().await {
            let (kind, message) = match outcome {
                Ok(()) => {
                    self.report.transaction_logs += 1;
                    self.tick(self.report.transaction_logs, "transaction logs");
                    continue;
                }
                Err(e) if is_storage_failure(&e) => return Err(e),
                Err(e) if is_missing(&e) => (
                    ProblemKind::MissingTransactionLog,
                    format!("the transaction log of snapshot {id} does not exist"),
                ),
                Err(e) => (
                    ProblemKind::CorruptTransactionLog,
                    format!("the transaction log of snapshot {id} cannot be decoded: {e}"),
                ),
            };
            let via = self.ref_of(walked, &id);
            self.problem(
                Problem::new(kind, message)
                    .snapshot(id)
                    .via(via.as_deref())
                    .key(keys::transaction_log(&id)),
            );
        }
        Ok(())
    }

    /// A problem at a chunk ref of manifest `manifest_index`: with its snapshot, ref
    /// and the array's path.
    async fn chunk_problem(
        &self,
        walked: &Walked,
        manifest_index: usize,
        node: NodeId,
        index: ChunkIndices,
        problem: Problem,
    ) -> Problem {
        let Some((_, snapshot)) = walked.manifests.get(manifest_index) else {
            return problem;
        };
        let array = match self.assets.fetch_snapshot(snapshot).await {
            Ok(snap) => snap
                .nodes
                .values()
                .find(|n| n.id == node)
                .map(|n| n.path.to_string()),
            Err(_) => None,
        };
        let via = self.ref_of(walked, snapshot);
        Problem {
            snapshot: Some(*snapshot),
            ref_name: via,
            array,
            chunk: Some(index),
            ..problem
        }
    }

    /// Reads every manifest (pass by pass over the chunk id space) and checks the
    /// chunks their refs point to.
    ///
    /// Passes are planned from the largest manifest (a lower bound of the distinct
    /// chunk ids; the sum over manifests, garbage collection's bound, counts a chunk
    /// once per manifest listing it, so a history of full manifests would make
    /// hundreds of passes). When a pass finds more ids than the budget, it stops
    /// collecting them and the remaining id space is planned again with twice as many
    /// passes (its manifest sweep still completes, for the checks done once).
    async fn manifests_and_chunks(
        &mut self,
        walked: &Walked,
        resolver: Option<&VirtualChunkResolver>,
    ) -> Result<()> {
        let budget = self.options.max_chunk_ids_in_memory.max(1);
        let largest: u64 = walked
            .manifests
            .iter()
            .map(|(m, _)| u64::from(m.num_chunk_refs))
            .max()
            .unwrap_or(0);
        let mut sweep = Sweep {
            first: true,
            virtual_objects: HashMap::new(),
            check_virtual: resolver.is_some(),
        };
        let mut planned = largest.div_ceil(budget).max(1);
        // Id prefixes whose chunks are checked.
        let mut done: Vec<String> = Vec::new();
        'plan: loop {
            let passes: Vec<Vec<String>> =
                super::gc::chunk_passes(planned.saturating_mul(budget), budget)
                    .into_iter()
                    .map(|pass| {
                        pass.into_iter()
                            .filter(|p| !done.iter().any(|d| p.starts_with(d.as_str())))
                            .collect::<Vec<_>>()
                    })
                    .filter(|pass| !pass.is_empty())
                    .collect();
            let whole = passes.len() == 1 && done.is_empty();
            let finest = passes.iter().all(|p| p.len() == 1 && p[0].len() == 2);
            for pass in passes {
                let limit = if finest { u64::MAX } else { budget };
                // One pass over everything: `chunks/` is listed while the manifests
                // are read (the listing's system calls on one core, the reads
                // waiting on the storage), unless it holds more objects than the
                // budget.
                let (needed, sizes) = if whole {
                    let prefixes = super::gc::listings(self.storage, keys::CHUNKS, &pass);
                    let listing = chunk_sizes(
                        self.storage,
                        &prefixes,
                        self.options.list_concurrency,
                        budget,
                    );
                    let sweeping = self.sweep_manifests(walked, &mut sweep, None, limit);
                    let (needed, sizes) = futures::join!(sweeping, listing);
                    (needed?, sizes?)
                } else {
                    let needed = self
                        .sweep_manifests(walked, &mut sweep, Some(&pass), limit)
                        .await?;
                    (needed, None)
                };
                let Some(needed) = needed else {
                    planned = planned.saturating_mul(2);
                    continue 'plan;
                };
                self.check_chunk_objects(walked, &pass, needed, sizes)
                    .await?;
                done.extend(pass);
            }
            break;
        }
        if let Some(resolver) = resolver {
            let objects = std::mem::take(&mut sweep.virtual_objects);
            self.check_virtual(walked, resolver, objects).await?;
        }
        Ok(())
    }

    /// Reads every manifest once and collects the native chunk ids of `pass` (all,
    /// when `None`) with the largest end any ref asks and one manifest asking it;
    /// `None` once more than `limit` ids are found (the sweep still completes when it
    /// is the first, which also counts refs, reports unreadable manifests, collects
    /// virtual objects and reads chunks).
    async fn sweep_manifests(
        &mut self,
        walked: &Walked,
        sweep: &mut Sweep,
        pass: Option<&Vec<String>>,
        limit: u64,
    ) -> Result<Option<HashMap<ChunkId, (u64, usize)>>> {
        let first = sweep.first;
        let in_pass = pass.map(|p| super::gc::PassFilter::new(p));
        let mut needed: Option<HashMap<ChunkId, (u64, usize)>> = Some(HashMap::new());
        let mut chunk_reads: Vec<ChunkRead> = Vec::new();
        let assets = self.assets;
        // Owned items: a closure over borrowed ones would make the future lose
        // `Send` (its lifetimes are not general).
        let infos: Vec<(usize, ManifestFileInfo)> = walked
            .manifests
            .iter()
            .map(|(info, _)| *info)
            .enumerate()
            .collect();
        let mut fetched = futures::stream::iter(infos)
            .map(|(i, info)| async move {
                let manifest = assets
                    .fetch_manifest_uncached(&info.id, Some(info.size_bytes))
                    .await;
                (i, manifest)
            })
            .buffer_unordered(self.fetch_concurrency);
        let mut count = 0u64;
        while let Some((i, fetched)) = fetched.next().await {
            let manifest = match fetched {
                Ok(m) => m,
                Err(e) if is_storage_failure(&e) => return Err(e),
                Err(e) => {
                    if first {
                        self.manifest_problem(walked, i, &e);
                    }
                    continue;
                }
            };
            count += 1;
            self.tick(count, "manifests");
            if first {
                self.report.manifests += 1;
            } else if needed.is_none() {
                break;
            }
            for (node, chunks) in &manifest.arrays {
                for (index, payload) in chunks {
                    match payload {
                        ChunkPayload::Native(r) => {
                            if first {
                                self.report.native_refs += 1;
                                if self.options.read_chunks {
                                    chunk_reads.push((i, *node, index.clone(), *r));
                                }
                            }
                            let Some(map) = needed.as_mut() else { continue };
                            if in_pass.as_ref().is_some_and(|f| !f.contains(&r.id)) {
                                continue;
                            }
                            let end = r.offset.saturating_add(r.length);
                            map.entry(r.id)
                                .and_modify(|e| {
                                    if end > e.0 {
                                        *e = (end, i);
                                    }
                                })
                                .or_insert((end, i));
                            if map.len() as u64 > limit {
                                // Over the budget: this pass is planned again, finer.
                                needed = None;
                            }
                        }
                        ChunkPayload::Inline(_) if first => self.report.inline_refs += 1,
                        ChunkPayload::Virtual(r) if first => {
                            self.report.virtual_refs += 1;
                            if sweep.check_virtual {
                                let end = r.offset.saturating_add(r.length);
                                let need = sweep
                                    .virtual_objects
                                    .entry(r.location.clone())
                                    .or_insert_with(|| VirtualNeed {
                                        end,
                                        checksum: r.checksum.clone(),
                                        at: (i, *node, index.clone()),
                                    });
                                if end > need.end {
                                    need.end = end;
                                    need.at = (i, *node, index.clone());
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            if !chunk_reads.is_empty() {
                self.read_chunks(walked, std::mem::take(&mut chunk_reads))
                    .await?;
            }
        }
        sweep.first = false;
        Ok(needed)
    }

    /// Reports manifest `index` of the walk as missing or corrupt (`e`).
    fn manifest_problem(&mut self, walked: &Walked, index: usize, e: &Error) {
        let Some((info, snapshot)) = walked.manifests.get(index).copied() else {
            return;
        };
        let (kind, message) = if is_missing(e) {
            (
                ProblemKind::MissingManifest,
                format!("manifest {} does not exist", info.id),
            )
        } else {
            (
                ProblemKind::CorruptManifest,
                format!("manifest {} cannot be decoded: {e}", info.id),
            )
        };
        let via = self.ref_of(walked, &snapshot);
        self.problem(
            Problem::new(kind, message)
                .snapshot(snapshot)
                .via(via.as_deref())
                .key(keys::manifest(&info.id)),
        );
    }

    /// Checks each needed chunk's object: present, not empty, long enough; its size
    /// from `sizes` (every chunk object, listed already) or else from a listing of
    /// `chunks/` over the id prefixes of `pass`.
    async fn check_chunk_objects(
        &mut self,
        walked: &Walked,
        pass: &[String],
        mut needed: HashMap<ChunkId, (u64, usize)>,
        sizes: Option<HashMap<ChunkId, u64>>,
    ) -> Result<()> {
        if needed.is_empty() {
            return Ok(());
        }
        let mut bad: Vec<(ChunkId, (u64, usize), Option<u64>)> = Vec::new();
        let mut found = |id: ChunkId, size: u64, report: &mut VerifyReport| {
            let Some(need) = needed.remove(&id) else {
                return false;
            };
            report.chunk_objects += 1;
            if size == 0 || size < need.0 {
                bad.push((id, need, Some(size)));
            }
            true
        };
        if let Some(sizes) = sizes {
            for (id, size) in sizes {
                if found(id, size, &mut self.report) {
                    self.tick(self.report.chunk_objects, "chunk objects");
                }
            }
        } else {
            let prefixes = super::gc::listings(self.storage, keys::CHUNKS, pass);
            let mut listed = chunk_listing(self.storage, &prefixes, self.options.list_concurrency);
            while let Some(listed) = listed.next().await {
                let (id, size) = listed?;
                if found(id, size, &mut self.report) {
                    self.tick(self.report.chunk_objects, "chunk objects");
                }
            }
        }
        bad.extend(needed.into_iter().map(|(id, need)| (id, need, None)));
        for (id, (end, manifest_index), size) in bad {
            let key = keys::chunk(&id);
            let (kind, message) = match size {
                None => (
                    ProblemKind::MissingChunk,
                    format!("chunk object {key} does not exist"),
                ),
                Some(0) => (
                    ProblemKind::ZeroLengthChunk,
                    format!("chunk object {key} holds zero bytes"),
                ),
                Some(size) => (
                    ProblemKind::TruncatedChunk,
                    format!("chunk object {key} holds {size} bytes; a ref needs {end}"),
                ),
            };
            let problem = Problem::new(kind, message).key(key);
            // A truncated object: the ref reaching past its end (a chunk of a pack
            // may lie within it while another does not).
            let within = size.filter(|&n| n > 0);
            let located = self
                .locate_chunk(walked, manifest_index, id, within, problem)
                .await;
            self.problem(located);
        }
        Ok(())
    }

    /// `problem` at the first ref to chunk `id` in manifest `manifest_index` (read
    /// again: problems are rare, and the refs' places are not kept in memory); with
    /// `size` (bytes of a truncated object), the first ref ending past it.
    async fn locate_chunk(
        &self,
        walked: &Walked,
        manifest_index: usize,
        id: ChunkId,
        size: Option<u64>,
        problem: Problem,
    ) -> Problem {
        let Some((info, _)) = walked.manifests.get(manifest_index) else {
            return problem;
        };
        let Ok(manifest) = self
            .assets
            .fetch_manifest_uncached(&info.id, Some(info.size_bytes))
            .await
        else {
            return problem;
        };
        match find_native(&manifest, id, size) {
            Some((node, index)) => {
                self.chunk_problem(walked, manifest_index, node, index, problem)
                    .await
            }
            None => problem,
        }
    }

    /// Reads the byte ranges of native chunk refs, reporting those that fail.
    async fn read_chunks(&mut self, walked: &Walked, reads: Vec<ChunkRead>) -> Result<()> {
        let storage = self.storage;
        let mut results = futures::stream::iter(reads)
            .map(|(i, node, index, r)| async move {
                let key = keys::chunk(&r.id);
                let read = storage
                    .get_range(&key, r.offset..r.offset.saturating_add(r.length))
                    .await;
                (i, node, index, key, read)
            })
            .buffer_unordered(self.options.request_concurrency.max(1));
        let mut failed = Vec::new();
        while let Some((i, node, index, key, read)) = results.next().await {
            match read {
                Ok(_) => {}
                Err(e @ (StorageError::NotFound { .. } | StorageError::ShortRead { .. })) => {
                    failed.push((i, node, index, key, e.to_string()));
                }
                Err(e) => return Err(e.into()),
            }
        }
        drop(results);
        for (i, node, index, key, message) in failed {
            let problem = Problem::new(
                ProblemKind::UnreadableChunk,
                format!("reading chunk object {key} failed: {message}"),
            )
            .key(key);
            let located = self.chunk_problem(walked, i, node, index, problem).await;
            self.problem(located);
        }
        Ok(())
    }

    /// Heads each distinct virtual object once and checks size and checksum.
    async fn check_virtual(
        &mut self,
        walked: &Walked,
        resolver: &VirtualChunkResolver,
        objects: HashMap<String, VirtualNeed>,
    ) -> Result<()> {
        let mut heads = futures::stream::iter(objects)
            .map(|(location, need)| async move {
                let head = resolver.head(&location).await;
                (location, need, head)
            })
            .buffer_unordered(self.options.request_concurrency.max(1));
        let mut found = Vec::new();
        let mut checked = 0u64;
        while let Some((location, need, head)) = heads.next().await {
            checked += 1;
            self.tick(checked, "virtual objects");
            let problem = match head {
                Ok(meta) => virtual_mismatch(&location, &need, &meta),
                Err(VirtualChunkError::SourceMissing { .. }) => Some((
                    ProblemKind::MissingVirtualObject,
                    format!("virtual chunk object {location} does not exist"),
                )),
                Err(e) => Some((
                    ProblemKind::UncheckedVirtualObject,
                    format!("virtual chunk object {location} cannot be checked: {e}"),
                )),
            };
            if let Some(p) = problem {
                found.push((location, need, p));
            }
        }
        drop(heads);
        self.report.virtual_objects = checked;
        for (location, need, (kind, message)) in found {
            let (i, node, index) = need.at;
            let problem = Problem::new(kind, message).key(location);
            let located = self.chunk_problem(walked, i, node, index, problem).await;
            self.problem(located);
        }
        Ok(())
    }
}

/// A native chunk ref to read: manifest index, array, chunk index, the ref.
type ChunkRead = (
    usize,
    NodeId,
    ChunkIndices,
    crate::format::manifest::NativeChunkRef,
);

/// What the first sweep over the manifests gathers once.
struct Sweep {
    /// Whether the next sweep is the first.
    first: bool,
    /// Virtual objects to check, by location.
    virtual_objects: HashMap<String, VirtualNeed>,
    /// Whether virtual objects are checked.
    check_virtual: bool,
}

/// What the refs ask of one virtual object.
struct VirtualNeed {
    /// The largest offset + length.
    end: u64,
    /// The checksum of the first ref seen.
    checksum: Option<Checksum>,
    /// Where one ref asking `end` is: manifest index, array, chunk index.
    at: (usize, NodeId, ChunkIndices),
}

/// What is wrong with a virtual object given its `HEAD`, if anything.
fn virtual_mismatch(
    location: &str,
    need: &VirtualNeed,
    meta: &object_store::ObjectMeta,
) -> Option<(ProblemKind, String)> {
    match &need.checksum {
        Some(Checksum::ETag(etag)) => {
            let unquote = |s: &str| s.trim_start_matches("W/").trim_matches('"').to_string();
            let now = meta.e_tag.as_deref().map(unquote);
            if now.as_deref() != Some(unquote(etag).as_str()) {
                return Some((
                    ProblemKind::ChangedVirtualObject,
                    format!(
                        "virtual chunk object {location} changed: ETag {} where the refs recorded {etag}",
                        meta.e_tag.as_deref().unwrap_or("(none)")
                    ),
                ));
            }
        }
        Some(Checksum::LastModified(secs)) if meta.last_modified.timestamp() > i64::from(*secs) => {
            return Some((
                ProblemKind::ChangedVirtualObject,
                format!(
                    "virtual chunk object {location} changed: modified at {} after the recorded {secs} s",
                    meta.last_modified
                ),
            ));
        }
        Some(Checksum::LastModified(_)) | None => {}
    }
    if meta.size < need.end {
        return Some((
            ProblemKind::TruncatedVirtualObject,
            format!(
                "virtual chunk object {location} holds {} bytes; a ref needs {}",
                meta.size, need.end
            ),
        ));
    }
    None
}

/// The first ref to native chunk `id` in `manifest`: its array and index.
fn find_native(
    manifest: &Manifest,
    id: ChunkId,
    past: Option<u64>,
) -> Option<(NodeId, ChunkIndices)> {
    let reaches = |r: &crate::format::manifest::NativeChunkRef| {
        past.is_none_or(|size| r.offset.saturating_add(r.length) > size)
    };
    manifest.arrays.iter().find_map(|(node, chunks)| {
        chunks.iter().find_map(|(index, payload)| match payload {
            ChunkPayload::Native(r) if r.id == id && reaches(r) => Some((*node, index.clone())),
            _ => None,
        })
    })
}
