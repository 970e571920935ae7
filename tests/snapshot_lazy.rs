//! Memory proportional to the work (issue 27, class 6): reading a commit's facts
//! (log, `--as-of`, resolving a snapshot id, creating refs) does not decode the
//! snapshot's node table, and listing nodes reads them one at a time.
//!
//! A counting global allocator measures the peak of live heap bytes while each
//! library call runs, against the peak of a full [`Snapshot::decode`] of the same
//! file. Measuring tests hold [`SERIAL`] so that no other test allocates meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use floe::assets::AssetManager;
use floe::format::snapshot::{ArrayData, DimensionShape, NodeData, NodeSnapshot, Snapshot};
use floe::format::{keys, NodeId, NodePath, SnapshotId, SpecVersion};
use floe::storage::{new_in_memory_storage, LocalStorage, Storage};
use floe::{Repository, VersionSelector};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Held by every test that measures, so that measurements do not overlap.
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `f`; returns its result and the most heap bytes it held at once beyond what
/// was live when it started.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

/// [`peak_during`] of a future.
async fn peak_during_async<T>(f: impl std::future::Future<Output = T>) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f.await;
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

const GROUP_JSON: &str = r#"{"zarr_format":3,"node_type":"group","attributes":{}}"#;
const ARRAY_JSON: &str = r#"{"zarr_format":3,"node_type":"array","shape":[10],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[10]}},"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":0,"codecs":[{"name":"bytes"}],"attributes":{}}"#;

fn node(path: &str, array: bool) -> NodeSnapshot {
    NodeSnapshot {
        id: NodeId::random(),
        path: NodePath::new(path).unwrap(),
        user_data: Bytes::from_static(if array { ARRAY_JSON } else { GROUP_JSON }.as_bytes()),
        node_data: if array {
            NodeData::Array(ArrayData {
                shape: vec![DimensionShape::regular(10, 10)],
                dimension_names: None,
                manifests: Vec::new(),
            })
        } else {
            NodeData::Group
        },
    }
}

/// A spec-`spec` snapshot on top of the initial one: the root group, then groups
/// `/gNNNN` of 99 arrays `/gNNNN/aNN` each, `n` nodes in all.
fn wide_snapshot(spec: SpecVersion, n: usize) -> Snapshot {
    let mut nodes = BTreeMap::new();
    let mut add = |n: NodeSnapshot| {
        nodes.insert(n.path.clone(), n);
    };
    add(node("/", false));
    let mut made = 1;
    'groups: for g in 0.. {
        if made == n {
            break;
        }
        add(node(&format!("/g{g:04}"), false));
        made += 1;
        for a in 0..99 {
            if made == n {
                break 'groups;
            }
            add(node(&format!("/g{g:04}/a{a:02}"), true));
            made += 1;
        }
    }
    let mut snap = Snapshot::initial(spec);
    snap.id = SnapshotId::random();
    snap.parent_id = Some(SnapshotId::INITIAL);
    snap.message = format!("{n} nodes");
    snap.metadata
        .insert("author".into(), serde_json::json!({"name": "lazy"}));
    snap.nodes = nodes;
    snap
}

/// A spec-1 repository in `storage` whose `main` points at a snapshot of `n` nodes;
/// returns that snapshot's id.
async fn wide_repo(storage: Arc<dyn Storage>, n: usize) -> SnapshotId {
    let repo = Repository::create_with(
        Arc::clone(&storage),
        None,
        SpecVersion::V1,
        floe::OpenOptions::default(),
    )
    .await
    .unwrap();
    let snap = Arc::new(wide_snapshot(SpecVersion::V1, n));
    let id = snap.id;
    AssetManager::new(Arc::clone(&storage))
        .write_snapshot(snap)
        .await
        .unwrap();
    repo.reset_branch("main", id, None).await.unwrap();
    id
}

const NODES: usize = 100_000;

/// Each call that needs only commit facts, on a fresh repository handle (empty
/// caches), holds less than a tenth of what a full decode of the snapshot holds.
async fn check_header_paths(storage: Arc<dyn Storage>) {
    let id = wide_repo(Arc::clone(&storage), NODES).await;
    let bytes = storage.get(&keys::snapshot(&id)).await.unwrap().bytes;
    let (full, full_peak) = peak_during(|| Snapshot::decode(&bytes).unwrap());
    assert_eq!(full.nodes.len(), NODES);
    drop(full);
    let bound = full_peak / 10;
    let fresh = || async { Repository::open(Arc::clone(&storage)).await.unwrap() };
    let time = chrono::Utc::now();
    let mut tags = 0;
    let mut checked = Vec::new();
    for what in [
        "log -n 1",
        "log",
        "resolve id",
        "resolve_ref id",
        "as-of",
        "create_tag",
        "create_branch",
        "reset_branch",
    ] {
        let repo = fresh().await;
        let (_, peak) = peak_during_async(async {
            {
                use futures::{StreamExt, TryStreamExt};
                match what {
                    "log -n 1" => {
                        let log: Vec<_> = repo
                            .ancestry_stream(VersionSelector::Branch("main".into()))
                            .take(1)
                            .try_collect()
                            .await
                            .unwrap();
                        assert_eq!(log[0].id, id);
                        assert_eq!(log[0].message, format!("{NODES} nodes"));
                        assert_eq!(log[0].metadata["author"]["name"], "lazy");
                    }
                    "log" => {
                        let log = repo.ancestry(id).await.unwrap();
                        assert_eq!(log.len(), 2);
                        assert_eq!(log[0].parent_id, Some(SnapshotId::INITIAL));
                    }
                    "resolve id" => {
                        let sel = VersionSelector::Snapshot(id);
                        assert_eq!(repo.resolve(&sel).await.unwrap(), id);
                    }
                    "resolve_ref id" => {
                        let sel = repo.resolve_ref(&id.to_string()).await.unwrap();
                        assert_eq!(sel, VersionSelector::Snapshot(id));
                    }
                    "as-of" => {
                        let sel = VersionSelector::AsOf {
                            branch: "main".into(),
                            time,
                        };
                        assert_eq!(repo.resolve(&sel).await.unwrap(), id);
                    }
                    "create_tag" => {
                        tags += 1;
                        repo.create_tag(&format!("t{tags}"), id).await.unwrap();
                    }
                    "create_branch" => repo.create_branch("b", id).await.unwrap(),
                    "reset_branch" => repo.reset_branch("b", id, None).await.unwrap(),
                    _ => unreachable!(),
                }
            }
        })
        .await;
        checked.push((what, peak));
    }
    eprintln!("full decode: {full_peak} bytes; {checked:?}");
    let over: Vec<_> = checked.iter().filter(|(_, p)| *p > bound).collect();
    assert!(
        over.is_empty(),
        "a full decode holds {full_peak} bytes at most; these held more than a tenth of it: \
         {over:?} (all: {checked:?})"
    );
}

#[test]
fn commit_facts_do_not_decode_the_node_table_on_local_disk() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()).unwrap());
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(check_header_paths(storage));
}

#[test]
fn commit_facts_do_not_decode_the_node_table_in_memory() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(check_header_paths(new_in_memory_storage()));
}

/// `floe ls`'s path: listing the nodes of a snapshot file holds its flatbuffer and
/// one node at a time, well under what the decoded tree holds.
#[test]
fn listing_nodes_holds_less_than_the_decoded_tree() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let storage = new_in_memory_storage();
    let id = rt.block_on(wide_repo(Arc::clone(&storage), NODES));
    let bytes = rt
        .block_on(storage.get(&keys::snapshot(&id)))
        .unwrap()
        .bytes;
    let (full, full_peak) = peak_during(|| Snapshot::decode(&bytes).unwrap());
    let repo = rt.block_on(Repository::open(Arc::clone(&storage))).unwrap();
    let (listed, peak) = peak_during(|| {
        let nodes = rt.block_on(repo.snapshot_nodes(&id)).unwrap();
        let mut listed = 0;
        for (n, expected) in nodes.under(&NodePath::root()).zip(full.nodes.values()) {
            assert_eq!(&n.unwrap(), expected);
            listed += 1;
        }
        listed
    });
    assert_eq!(listed, NODES);
    eprintln!("listing: {peak} bytes, full decode: {full_peak}");
    assert!(
        peak < full_peak / 2,
        "listing held {peak} bytes, a full decode {full_peak}"
    );
}

/// Nodes at and below a path are those [`NodePath::starts_with`] says, in path
/// order, also among siblings whose names extend the path's (`/a-b`, `/ab`).
#[test]
fn listing_under_a_path_matches_the_tree() {
    use floe::format::snapshot::SnapshotNodes;
    let mut snap = wide_snapshot(SpecVersion::V1, 250);
    for p in [
        "/a", "/a/b", "/a/b/c", "/a-b", "/a-b/c", "/ab", "/a0", "/a.", "/a/b-c", "/b",
    ] {
        let n = node(p, p.ends_with('c'));
        snap.nodes.insert(n.path.clone(), n);
    }
    let nodes = SnapshotNodes::decode(&snap.encode().unwrap()).unwrap();
    assert_eq!(nodes.len(), snap.nodes.len());
    assert_eq!(nodes.id(), snap.id);
    for root in [
        "/",
        "/a",
        "/a/b",
        "/a-b",
        "/ab",
        "/a/b/c",
        "/g0001",
        "/g0001/a05",
        "/g",
        "/zzz",
        "/a/x",
    ] {
        let root = NodePath::new(root).unwrap();
        let listed: Vec<NodeSnapshot> = nodes.under(&root).collect::<Result<_, _>>().unwrap();
        let expected: Vec<NodeSnapshot> = snap
            .nodes
            .values()
            .filter(|n| n.path.starts_with(&root))
            .cloned()
            .collect();
        assert_eq!(listed, expected, "under {root}");
    }
}

/// The commit facts read without the node table are those of the whole snapshot,
/// for spec-1 and spec-2 files.
#[test]
fn header_matches_the_full_decode() {
    use floe::format::snapshot::SnapshotHeader;
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        for n in [1, 2, 5_000] {
            let snap = wide_snapshot(spec, n);
            let bytes = snap.encode().unwrap();
            let header = SnapshotHeader::decode(&bytes).unwrap();
            assert_eq!(header, Snapshot::decode(&bytes).unwrap().header());
            assert_eq!(header.spec_version, spec);
            assert_eq!(header.message, format!("{n} nodes"));
        }
    }
    let initial = Snapshot::initial(SpecVersion::V2);
    let header = SnapshotHeader::decode(&initial.encode().unwrap()).unwrap();
    assert_eq!(header, initial.header());
}

/// A snapshot rewritten under its id (a spec-1 expiry gives it another parent) is
/// not read from stale cached commit facts.
#[tokio::test]
async fn cached_commit_facts_follow_a_rewritten_snapshot() {
    let storage = new_in_memory_storage();
    let assets = AssetManager::new(Arc::clone(&storage));
    let mut snap = wide_snapshot(SpecVersion::V1, 10);
    assets.write_snapshot(Arc::new(snap.clone())).await.unwrap();
    let header = assets.fetch_snapshot_header(&snap.id).await.unwrap();
    assert_eq!(header.parent_id, Some(SnapshotId::INITIAL));
    let other = SnapshotId::random();
    snap.parent_id = Some(other);
    assets.write_snapshot(Arc::new(snap.clone())).await.unwrap();
    assets.clear_caches();
    assets.write_snapshot(Arc::new(snap.clone())).await.unwrap();
    assert_eq!(
        assets
            .fetch_snapshot_header(&snap.id)
            .await
            .unwrap()
            .parent_id,
        Some(other)
    );
    // Read from the file, then rewritten: the cache does not keep the old one.
    let fresh = AssetManager::new(Arc::clone(&storage));
    assert_eq!(
        fresh
            .fetch_snapshot_header(&snap.id)
            .await
            .unwrap()
            .parent_id,
        Some(other)
    );
    snap.parent_id = Some(SnapshotId::INITIAL);
    fresh.write_snapshot(Arc::new(snap.clone())).await.unwrap();
    assert_eq!(
        fresh
            .fetch_snapshot_header(&snap.id)
            .await
            .unwrap()
            .parent_id,
        Some(SnapshotId::INITIAL)
    );
    // A missing snapshot, and a file holding another snapshot.
    let missing = SnapshotId::random();
    assert!(matches!(
        fresh.fetch_snapshot_header(&missing).await,
        Err(floe::Error::SnapshotNotFound { id }) if id == missing
    ));
    let bytes = storage.get(&keys::snapshot(&snap.id)).await.unwrap().bytes;
    storage.put(&keys::snapshot(&missing), bytes).await.unwrap();
    assert!(matches!(
        fresh.fetch_snapshot_header(&missing).await,
        Err(floe::Error::Format(
            floe::format::FormatError::InvalidData { .. }
        ))
    ));
    assert!(matches!(
        fresh.fetch_snapshot_nodes(&missing).await,
        Err(floe::Error::Format(
            floe::format::FormatError::InvalidData { .. }
        ))
    ));
}

/// In spec 2 the commit facts carry the `repo` object's parent links, as whole
/// snapshots do; log, `--as-of` and ref creation work from them.
#[tokio::test]
async fn spec2_commit_facts_take_parents_from_the_repo_object() {
    let storage = new_in_memory_storage();
    let repo = Repository::create_with(
        Arc::clone(&storage),
        None,
        SpecVersion::V2,
        floe::OpenOptions::default(),
    )
    .await
    .unwrap();
    let mut ids = vec![SnapshotId::INITIAL];
    for i in 0..3 {
        let s = repo.writable_session("main").await.unwrap();
        s.add_group(
            &NodePath::new(&format!("/g{i}")).unwrap(),
            Bytes::from_static(GROUP_JSON.as_bytes()),
        )
        .unwrap();
        ids.push(s.commit(&format!("c{i}")).await.unwrap());
    }
    let fresh = Repository::open(Arc::clone(&storage)).await.unwrap();
    let assets = AssetManager::for_spec(Arc::clone(&storage), SpecVersion::V2);
    for w in ids.windows(2) {
        let header = assets.fetch_snapshot_header(&w[1]).await.unwrap();
        assert_eq!(header.parent_id, Some(w[0]));
        assert_eq!(header.spec_version, SpecVersion::V2);
    }
    let log: Vec<_> = fresh
        .ancestry(ids[3])
        .await
        .unwrap()
        .iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(log, ids.iter().rev().copied().collect::<Vec<_>>());
    fresh.create_tag("t", ids[2]).await.unwrap();
    assert!(matches!(
        fresh.create_tag("u", SnapshotId::random()).await,
        Err(floe::Error::SnapshotNotFound { .. })
    ));
}

/// The spec-1 ref operations check, from commit facts, that the snapshot exists.
#[tokio::test]
async fn spec1_refs_need_an_existing_snapshot() {
    let storage = new_in_memory_storage();
    let repo = Repository::create_with(
        Arc::clone(&storage),
        None,
        floe::format::SpecVersion::V1,
        floe::OpenOptions::default(),
    )
    .await
    .unwrap();
    let missing = SnapshotId::random();
    assert!(matches!(
        repo.create_tag("t", missing).await,
        Err(floe::Error::SnapshotNotFound { id }) if id == missing
    ));
    assert!(matches!(
        repo.create_branch("b", missing).await,
        Err(floe::Error::SnapshotNotFound { .. })
    ));
    assert!(matches!(
        repo.reset_branch("main", missing, None).await,
        Err(floe::Error::SnapshotNotFound { .. })
    ));
    assert!(matches!(
        repo.resolve(&VersionSelector::Snapshot(missing)).await,
        Err(floe::Error::SnapshotNotFound { .. })
    ));
    assert!(matches!(
        repo.resolve_ref(&missing.to_string()).await,
        Err(floe::Error::RefNotFound { .. })
    ));
    assert!(matches!(
        repo.snapshot_nodes(&missing).await,
        Err(floe::Error::SnapshotNotFound { .. })
    ));
}

/// Partial decompression keeps the envelope's rules: the prefix is the start of the
/// payload, the whole equals [`envelope::open`]'s, a truncated or mislabelled frame
/// fails.
#[test]
fn payload_prefix_keeps_the_envelope_rules() {
    use floe::format::envelope::{self, FileType, PayloadPrefix};
    use floe::format::FormatError;
    let payload: Vec<u8> = (0..300_000u32)
        .flat_map(|i| (i % 251).to_le_bytes())
        .collect();
    let sealed = envelope::seal(FileType::Snapshot, &payload).unwrap();
    let mut p = PayloadPrefix::open(FileType::Snapshot, &sealed).unwrap();
    p.fill(1000).unwrap();
    assert!(p.data().len() >= 1000 && !p.is_complete());
    assert!(p.data().len() < payload.len());
    assert_eq!(p.data(), &payload[..p.data().len()]);
    p.fill(10).unwrap();
    assert_eq!(p.into_complete().unwrap(), payload);
    let mut all = PayloadPrefix::open(FileType::Snapshot, &sealed).unwrap();
    all.fill(usize::MAX).unwrap();
    assert!(all.is_complete());
    assert_eq!(
        all.data(),
        envelope::open(FileType::Snapshot, &sealed).unwrap()
    );
    // The front and the back without the middle.
    for (keep, from) in [
        (1000, 500_000),
        (0, 1_199_000),
        (70_000, 70_000),
        (10, 2_000_000),
    ] {
        let p = PayloadPrefix::open(FileType::Snapshot, &sealed).unwrap();
        let mut expected = payload[..keep].to_vec();
        expected.extend_from_slice(&payload[from.min(payload.len())..]);
        assert_eq!(
            p.into_without(keep, from).unwrap(),
            expected,
            "{keep} {from}"
        );
    }
    let mut p = PayloadPrefix::open(FileType::Snapshot, &sealed).unwrap();
    p.fill(usize::MAX).unwrap();
    assert_eq!(p.into_without(5, 1_100_000).unwrap().len(), 5 + 100_000);
    // Truncated: the prefix reads, the whole fails.
    let cut = &sealed[..sealed.len() - 100];
    let mut p = PayloadPrefix::open(FileType::Snapshot, cut).unwrap();
    p.fill(100).unwrap();
    assert!(matches!(
        p.into_complete(),
        Err(FormatError::Compression { .. })
    ));
    assert!(matches!(
        PayloadPrefix::open(FileType::Snapshot, cut)
            .unwrap()
            .into_without(100, 200_000),
        Err(FormatError::Compression { .. })
    ));
    assert!(matches!(
        PayloadPrefix::open(FileType::Manifest, &sealed),
        Err(FormatError::WrongFileType { .. })
    ));
    // A frame that declares 1 TiB: refused before anything is decompressed.
    let mut file = sealed[..envelope::HEADER_LEN].to_vec();
    file.extend_from_slice(&[0x28, 0xB5, 0x2F, 0xFD, 0xE0]);
    file.extend_from_slice(&(1u64 << 40).to_le_bytes());
    file.extend_from_slice(&[1, 0, 0]);
    assert!(matches!(
        PayloadPrefix::open(FileType::Snapshot, &file),
        Err(FormatError::TooLarge { .. })
    ));
    // A frame that declares other than it holds.
    let mut frame = zstd::bulk::compress(&payload[..1000], 3).unwrap();
    let mut short = sealed[..envelope::HEADER_LEN].to_vec();
    short.append(&mut frame);
    let mut lying = short.clone();
    let mut p = PayloadPrefix::open(FileType::Snapshot, &short).unwrap();
    p.fill(10).unwrap();
    assert_eq!(p.into_complete().unwrap(), &payload[..1000]);
    // Its frame header says one byte more.
    let fhd = lying[envelope::HEADER_LEN + 4];
    let single_segment = (fhd >> 5) & 1 == 1;
    let dict_bytes = [0, 1, 2, 4][usize::from(fhd & 3)];
    let fcs_at = envelope::HEADER_LEN + 5 + usize::from(!single_segment) + dict_bytes;
    assert_eq!(fhd >> 6, 1, "a 2-byte content size");
    lying[fcs_at] += 1;
    assert_eq!(
        zstd::zstd_safe::get_frame_content_size(&lying[envelope::HEADER_LEN..])
            .ok()
            .flatten(),
        Some(1001)
    );
    assert!(matches!(
        PayloadPrefix::open(FileType::Snapshot, &lying)
            .unwrap()
            .into_complete(),
        Err(FormatError::Compression { .. })
    ));
}

/// Mutated snapshot flatbuffers (re-sealed in valid envelopes): reading commit facts
/// or listing nodes returns data or a typed error, never panics.
#[test]
fn mutated_snapshots_fail_cleanly() {
    use floe::format::envelope::{self, FileType};
    use floe::format::snapshot::{SnapshotHeader, SnapshotNodes};
    use rand::{Rng, SeedableRng};
    let mut snap = wide_snapshot(SpecVersion::V1, 60);
    snap.message = "x".repeat(100);
    let bytes = snap.encode().unwrap();
    let payload = envelope::open(FileType::Snapshot, &bytes).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(27);
    for round in 0..3_000 {
        let mut p = payload.clone();
        for _ in 0..rng.random_range(1..4) {
            let i = rng.random_range(0..p.len());
            p[i] = rng.random();
        }
        if round % 10 == 0 {
            p.truncate(rng.random_range(0..p.len()));
        }
        let sealed = envelope::seal(FileType::Snapshot, &p).unwrap();
        let _ = SnapshotHeader::decode(&sealed);
        if let Ok(nodes) = SnapshotNodes::decode(&sealed) {
            for root in ["/", "/g0000"] {
                for n in nodes.under(&NodePath::new(root).unwrap()) {
                    let _ = n;
                }
            }
        }
    }
}
