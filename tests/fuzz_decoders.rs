//! Decoder fuzzing on stable Rust: real snapshots, manifests, transaction logs, refs
//! and config files from a repository floe writes are mutated (bit flips, byte
//! changes, truncations, insertions, splices; for enveloped files also the flatbuffer
//! inside a re-sealed, valid envelope) and decoded. Every decode must return `Ok` or a
//! typed error: no panic, and no more than 512 MiB allocated at once.
//!
//! Bounded in `cargo test` (3 s); `FLOE_FUZZ_SECONDS=600` runs longer, and
//! `FLOE_FUZZ_SEED` picks the seed (printed on failure).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{array_def, p};
use floe::format::config::{ContainerStore, RepositoryConfig, VirtualChunkContainer};
use floe::format::envelope::{self, FileType};
use floe::format::manifest::{ChunkPayload, Manifest, VirtualChunkRef};
use floe::format::refs::RefData;
use floe::format::snapshot::Snapshot;
use floe::format::transaction_log::TransactionLog;
use floe::storage::new_in_memory_storage;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Counts live heap bytes and their peak, so a decode that allocates without bound
/// is caught (the fuzz loop runs on one thread).
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

/// What a file is and how to decode it.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Snapshot,
    Manifest,
    TransactionLog,
    Ref,
    Config,
}

impl Kind {
    fn of(key: &str) -> Option<Kind> {
        Some(match key.split('/').next()? {
            "snapshots" => Kind::Snapshot,
            "manifests" => Kind::Manifest,
            "transactions" => Kind::TransactionLog,
            "refs" if key.ends_with("ref.json") => Kind::Ref,
            "config.yaml" => Kind::Config,
            _ => return None,
        })
    }

    fn file_type(self) -> Option<FileType> {
        match self {
            Kind::Snapshot => Some(FileType::Snapshot),
            Kind::Manifest => Some(FileType::Manifest),
            Kind::TransactionLog => Some(FileType::TransactionLog),
            Kind::Ref | Kind::Config => None,
        }
    }

    /// Decodes `bytes`; `true` when they decoded.
    fn decode(self, bytes: &[u8]) -> bool {
        match self {
            Kind::Snapshot => Snapshot::decode(bytes).is_ok(),
            Kind::Manifest => Manifest::decode(bytes).is_ok(),
            Kind::TransactionLog => TransactionLog::decode(bytes).is_ok(),
            Kind::Ref => RefData::parse("refs/branch.x/ref.json", bytes).is_ok(),
            Kind::Config => RepositoryConfig::parse(bytes).is_ok(),
        }
    }
}

/// The files of a repository with groups, arrays of native, inline and virtual
/// chunks, several commits, a tag and a config with a virtual chunk container.
async fn seeds() -> Vec<(Kind, Vec<u8>)> {
    let storage = new_in_memory_storage();
    // Spec 1: its ref files and config.yaml are seeds too.
    let repo = common::create_spec1(storage.clone(), None).await;
    let mut config = repo.config();
    config.set_virtual_chunk_container(VirtualChunkContainer {
        name: Some("data".into()),
        url_prefix: "file:///data/".into(),
        store: ContainerStore::LocalFileSystem("/data".into()),
    });
    repo.save_config(config).await.unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_group(&p("/g"), common::group_json(serde_json::json!({"a": 1})))
        .unwrap();
    s.add_array(&p("/g/a"), array_def("/g/a", &[8, 8], &[2, 2], "int32"))
        .unwrap();
    s.add_array(&p("/v"), array_def("/v", &[100], &[10], "uint8"))
        .unwrap();
    for i in 0..4u32 {
        s.set_chunk(
            &p("/g/a"),
            &[i.into(), i.into()],
            Bytes::from(vec![i as u8; 16]),
        )
        .await
        .unwrap();
        s.set_chunk(
            &p("/g/a"),
            &[i.into(), (3 - i).into()],
            Bytes::from(vec![7u8; 2048]),
        )
        .await
        .unwrap();
        let v = ChunkPayload::Virtual(VirtualChunkRef {
            location: format!("file:///data/f{i}.bin"),
            offset: u64::from(i) * 10,
            length: 10,
            checksum: None,
        });
        s.set_chunk_ref(&p("/v"), &[i.into()], Some(v)).unwrap();
    }
    let first = s.commit("first").await.unwrap();
    repo.create_tag("v1", first).await.unwrap();
    s.delete_node(&p("/v")).unwrap();
    s.set_chunk(&p("/g/a"), &[0, 0], Bytes::from_static(&[9; 16]))
        .await
        .unwrap();
    s.commit("second").await.unwrap();
    let mut out = Vec::new();
    for info in storage.list("").await.unwrap() {
        if let Some(kind) = Kind::of(&info.key) {
            let bytes = storage.get(&info.key).await.unwrap().bytes.to_vec();
            assert!(kind.decode(&bytes), "seed {} does not decode", info.key);
            out.push((kind, bytes));
        }
    }
    assert!(out.len() >= 9, "{} seed files", out.len());
    out
}

/// One random mutation of `data`.
fn mutate(rng: &mut StdRng, data: &mut Vec<u8>) {
    let len = data.len();
    match rng.random_range(0..6) {
        0 if len > 0 => {
            let i = rng.random_range(0..len);
            data[i] ^= 1 << rng.random_range(0..8);
        }
        1 if len > 0 => {
            let i = rng.random_range(0..len);
            data[i] = *[0u8, 0xff, 0x7f, 0x80, 1]
                .get(rng.random_range(0..5))
                .unwrap_or(&0);
        }
        2 if len > 0 => data.truncate(rng.random_range(0..len)),
        3 => {
            let i = rng.random_range(0..=len);
            let n = rng.random_range(1..16);
            let bytes: Vec<u8> = (0..n).map(|_| rng.random()).collect();
            data.splice(i..i, bytes);
        }
        4 if len > 8 => {
            // Copy a run of bytes over another place (duplicated offsets, lengths).
            let from = rng.random_range(0..len - 4);
            let n = rng.random_range(1..=(len - from).min(32));
            let to = rng.random_range(0..=len - n);
            let run = data[from..from + n].to_vec();
            data[to..to + n].copy_from_slice(&run);
        }
        _ if len >= 4 => {
            // A little-endian u32 set to an extreme (flatbuffer offsets and lengths).
            let i = rng.random_range(0..len - 3);
            let v = *[u32::MAX, 0x7fff_ffff, 0, 4, 0x8000_0000]
                .get(rng.random_range(0..5))
                .unwrap_or(&0);
            data[i..i + 4].copy_from_slice(&v.to_le_bytes());
        }
        _ => data.push(rng.random()),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn mutated_format_files_never_panic_nor_exhaust_memory() {
    let seeds = seeds().await;
    let seed: u64 = std::env::var("FLOE_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x00f1_0e00);
    let budget = Duration::from_secs(
        std::env::var("FLOE_FUZZ_SECONDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3),
    );
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let (mut runs, mut decoded) = (0u64, 0u64);
    while started.elapsed() < budget {
        let (kind, original) = &seeds[rng.random_range(0..seeds.len())];
        let mut input = original.clone();
        // Half of the enveloped inputs get their flatbuffer mutated inside a valid,
        // re-sealed envelope, so the mutations reach the flatbuffer verifier and the
        // readers rather than stopping at the header or zstd.
        let inner = kind
            .file_type()
            .filter(|_| rng.random_bool(0.5))
            .map(|t| (t, envelope::open(t, original).unwrap()));
        let rounds = rng.random_range(1..=4);
        if let Some((t, mut flatbuffer)) = inner {
            for _ in 0..rounds {
                mutate(&mut rng, &mut flatbuffer);
            }
            input = envelope::seal(t, &flatbuffer).unwrap();
        } else {
            for _ in 0..rounds {
                mutate(&mut rng, &mut input);
            }
        }
        let before = LIVE.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| kind.decode(&input)));
        std::panic::set_hook(hook);
        let peak = PEAK.load(Ordering::Relaxed).saturating_sub(before);
        runs += 1;
        match outcome {
            Ok(ok) => decoded += u64::from(ok),
            Err(_) => {
                let path = std::env::temp_dir().join(format!("floe-fuzz-crash-{seed}-{runs}"));
                std::fs::write(&path, &input).unwrap();
                panic!(
                    "decoding a mutated {kind:?} panicked (seed {seed}, run {runs}); input saved to {}",
                    path.display()
                );
            }
        }
        assert!(
            peak < 512 << 20,
            "decoding a mutated {kind:?} allocated {peak} bytes (seed {seed}, run {runs})"
        );
    }
    eprintln!(
        "fuzzed {runs} inputs in {:?}; {decoded} still decoded",
        started.elapsed()
    );
    assert!(runs > 100, "only {runs} inputs in the time budget");
}
