//! Decoder fuzzing on stable Rust: real snapshots, manifests, transaction logs, refs
//! and config files of a spec-1 repository, and the `repo` object, snapshots and
//! transaction logs of a spec-2 one, are mutated (bit flips, byte changes,
//! truncations, insertions, splices; for enveloped files also the flatbuffer inside a
//! re-sealed, valid envelope) and decoded. So are the FlexBuffers values inside a
//! `repo` object on their own: its configuration and metadata values. `config.yaml`
//! also gets YAML tokens (tags, anchors, aliases, flow brackets) spliced in. Every
//! decode must return `Ok` or a typed error: no panic, and no more than 512 MiB
//! allocated at once.
//!
//! Bounded in `cargo test` (3 s); `FLOE_FUZZ_SECONDS=600` runs longer, and
//! `FLOE_FUZZ_SEED` picks the seed (printed on failure).

mod common;
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{array_def, p};
use floe::format::config::{ContainerStore, RepositoryConfig, VirtualChunkContainer};
use floe::format::envelope::{self, FileType};
use floe::format::manifest::{ChunkPayload, Manifest, VirtualChunkRef};
use floe::format::refs::RefData;
use floe::format::repo_info::{Availability, FeatureFlag, RepoInfo};
use floe::format::snapshot::{decode_metadata_value, Snapshot};
use floe::format::transaction_log::TransactionLog;
use floe::format::SpecVersion;
use floe::storage::{new_in_memory_storage, Storage};
use floe::{CommitOptions, OpenOptions, Repository};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

/// Counts live heap bytes and their peak, so a decode that allocates without bound
/// is caught (the fuzz loop runs on one thread). Past [`HARD_LIMIT`] live bytes it
/// fails the allocation (the process aborts) rather than let a runaway decode take
/// the machine's memory.
struct Counting;

/// Live heap bytes past which allocations fail: 2 GiB.
const HARD_LIMIT: usize = 2 << 30;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if LIVE.load(Ordering::Relaxed).saturating_add(layout.size()) > HARD_LIMIT {
            return std::ptr::null_mut();
        }
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
    /// A spec-2 `repo` object.
    RepoInfo,
    /// The FlexBuffers configuration inside a `repo` object.
    ConfigFlexbuffer,
    /// One FlexBuffers metadata value (a `repo` object's or a spec-2 snapshot's).
    MetadataValue,
}

impl Kind {
    fn of(key: &str) -> Option<Kind> {
        Some(match key.split('/').next()? {
            "snapshots" => Kind::Snapshot,
            "manifests" => Kind::Manifest,
            "transactions" => Kind::TransactionLog,
            "refs" if key.ends_with("ref.json") => Kind::Ref,
            "config.yaml" => Kind::Config,
            "repo" => Kind::RepoInfo,
            _ => return None,
        })
    }

    fn file_type(self) -> Option<FileType> {
        match self {
            Kind::Snapshot => Some(FileType::Snapshot),
            Kind::Manifest => Some(FileType::Manifest),
            Kind::TransactionLog => Some(FileType::TransactionLog),
            Kind::RepoInfo => Some(FileType::RepoInfo),
            Kind::Ref | Kind::Config | Kind::ConfigFlexbuffer | Kind::MetadataValue => None,
        }
    }

    /// Decodes `bytes`; `true` when they decoded. What decoded is written back too
    /// (configurations as YAML and FlexBuffers, `repo` objects, metadata values), as
    /// a command that changes the repository would.
    fn decode(self, bytes: &[u8]) -> bool {
        match self {
            Kind::Snapshot => Snapshot::decode(bytes).is_ok(),
            Kind::Manifest => Manifest::decode(bytes).is_ok(),
            Kind::TransactionLog => TransactionLog::decode(bytes).is_ok(),
            Kind::Ref => RefData::parse("refs/branch.x/ref.json", bytes).is_ok(),
            Kind::Config => RepositoryConfig::parse(bytes).map(write_back).is_ok(),
            Kind::RepoInfo => RepoInfo::decode(bytes).map(|i| i.encode()).is_ok(),
            Kind::ConfigFlexbuffer => RepositoryConfig::from_flexbuffer(bytes)
                .map(write_back)
                .is_ok(),
            Kind::MetadataValue => decode_metadata_value(SpecVersion::V2, bytes)
                .map(flexbuffers::to_vec)
                .is_ok(),
        }
    }
}

/// Writes a configuration back in both forms, and reads its containers.
fn write_back(config: RepositoryConfig) {
    let _ = config.to_yaml();
    let _ = config.to_flexbuffer();
    let _ = config.virtual_chunk_containers();
}

/// The files of a spec-1 repository and of a spec-2 one, the FlexBuffers values of
/// the spec-2 `repo` object, and a few more metadata values.
async fn seeds() -> Vec<(Kind, Vec<u8>)> {
    let mut out = spec1_seeds().await;
    out.extend(spec2_seeds().await);
    out
}

/// Every file of `storage` a [`Kind`] decodes, checked to decode.
async fn files(storage: &dyn Storage) -> Vec<(Kind, Vec<u8>)> {
    let mut out = Vec::new();
    for info in storage.list("").await.unwrap() {
        if let Some(kind) = Kind::of(&info.key) {
            let bytes = storage.get(&info.key).await.unwrap().bytes.to_vec();
            assert!(kind.decode(&bytes), "seed {} does not decode", info.key);
            out.push((kind, bytes));
        }
    }
    out
}

/// JSON values of every kind, nested: metadata as users write it.
fn metadata() -> BTreeMap<String, serde_json::Value> {
    BTreeMap::from([
        ("author".to_string(), json!("someone")),
        ("count".to_string(), json!(-3)),
        ("big".to_string(), json!(u64::MAX)),
        ("ratio".to_string(), json!(0.25)),
        ("flag".to_string(), json!(true)),
        ("nothing".to_string(), json!(null)),
        (
            "nested".to_string(),
            json!({"list": [1, "two", [3.5, false], {"k": null}], "empty": {}, "none": []}),
        ),
    ])
}

/// The files of a spec-2 repository with commit and repository metadata, a config
/// with containers of every store kind, tags, a deleted tag, a status change and a
/// feature flag, and the FlexBuffers values inside its `repo` object.
async fn spec2_seeds() -> Vec<(Kind, Vec<u8>)> {
    let storage = new_in_memory_storage();
    let repo = Repository::create_with(
        storage.clone(),
        None,
        SpecVersion::V2,
        OpenOptions::default(),
    )
    .await
    .unwrap();
    let mut config = repo.config();
    for (prefix, store) in [
        (
            "file:///data/",
            ContainerStore::LocalFileSystem("/data".into()),
        ),
        (
            "s3://bucket/p/",
            ContainerStore::S3 {
                compatible: true,
                region: Some("us-east-1".into()),
                endpoint_url: Some("http://127.0.0.1:9000".into()),
                anonymous: true,
                allow_http: true,
                force_path_style: true,
            },
        ),
        ("https://example.com/", ContainerStore::Http),
        (
            "gcs://b/",
            ContainerStore::Gcs(vec![(
                "google_base_url".into(),
                "http://127.0.0.1:1".into(),
            )]),
        ),
        (
            "az://c/",
            ContainerStore::Azure(vec![("account".into(), "acct".into())]),
        ),
        ("memory://m/", ContainerStore::Other("in_memory".into())),
    ] {
        config.set_virtual_chunk_container(VirtualChunkContainer {
            name: Some(prefix.into()),
            url_prefix: prefix.into(),
            store,
        });
    }
    config.set_inline_chunk_threshold_bytes(Some(100));
    config.set_compression_level(Some(2));
    repo.save_config(config).await.unwrap();
    repo.set_metadata(metadata()).await.unwrap();
    let s = repo.writable_session("main").await.unwrap();
    s.add_group(&p("/g"), common::group_json(json!({"a": 1})))
        .unwrap();
    s.add_array(&p("/g/a"), array_def("/g/a", &[4, 4], &[2, 2], "int32"))
        .unwrap();
    s.set_chunk(&p("/g/a"), &[0, 1], Bytes::from(vec![3u8; 16]))
        .await
        .unwrap();
    let first = s
        .commit_with("first", metadata(), CommitOptions::default())
        .await
        .unwrap();
    repo.create_tag("v1", first).await.unwrap();
    repo.create_tag("gone", first).await.unwrap();
    repo.delete_tag("gone").await.unwrap();
    repo.set_status(Availability::Online, Some("checked".into()))
        .await
        .unwrap();
    repo.set_feature_flag(FeatureFlag::MoveNode, Some(false))
        .await
        .unwrap();
    let mut out = files(storage.as_ref()).await;
    let repo_object = storage.get("repo").await.unwrap().bytes;
    let info = RepoInfo::decode(&repo_object).unwrap();
    out.push((Kind::ConfigFlexbuffer, info.config_bytes.clone().unwrap()));
    for value in metadata().values() {
        out.push((Kind::MetadataValue, flexbuffers::to_vec(value).unwrap()));
    }
    assert!(
        out.iter().any(|(k, _)| matches!(k, Kind::RepoInfo)),
        "no repo object"
    );
    out
}

/// The files of a spec-1 repository with groups, arrays of native, inline and
/// virtual chunks, several commits, a tag and a config with a virtual chunk
/// container.
async fn spec1_seeds() -> Vec<(Kind, Vec<u8>)> {
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
    let out = files(storage.as_ref()).await;
    assert!(out.len() >= 9, "{} seed files", out.len());
    out
}

/// YAML syntax spliced into `config.yaml`: tags (empty, verbatim, secondary,
/// named), anchors and aliases, merge keys, flow brackets, document markers.
const YAML_TOKENS: [&str; 24] = [
    "!",
    "!!",
    "! ",
    "!<>",
    "!<!>",
    "!<tag:x>",
    "!!str ",
    "!!binary ",
    "!a!",
    "!e!x ",
    "&a ",
    "*a",
    "<<: ",
    "? ",
    ": ",
    "- ",
    "{",
    "}",
    "[",
    "]",
    "\n---\n",
    "\n...\n",
    "%TAG ! tag:x,2000:\n",
    "\"",
];

/// Splices one YAML token into `data` at a random place.
fn splice_yaml_token(rng: &mut StdRng, data: &mut Vec<u8>) {
    let token = YAML_TOKENS[rng.random_range(0..YAML_TOKENS.len())];
    let i = rng.random_range(0..=data.len());
    data.splice(i..i, token.bytes());
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
    let (mut runs, mut decoded, mut failures) = (0u64, 0u64, 0u64);
    // Inputs, decoded inputs and decode time by kind.
    let mut by_kind: BTreeMap<String, (u64, u64, Duration)> = BTreeMap::new();
    while started.elapsed() < budget {
        let (kind, original) = &seeds[rng.random_range(0..seeds.len())];
        let mut input = original.clone();
        // Half of the enveloped inputs get their flatbuffer mutated inside a valid,
        // re-sealed envelope, so the mutations reach the flatbuffer verifier and the
        // readers rather than stopping at the header or zstd.
        let inner = kind.file_type().filter(|_| rng.random_bool(0.5)).map(|t| {
            let (spec, flatbuffer) = envelope::open_versioned(t, original).unwrap();
            (t, spec, flatbuffer)
        });
        let rounds = rng.random_range(1..=4);
        if let Some((t, spec, mut flatbuffer)) = inner {
            for _ in 0..rounds {
                mutate(&mut rng, &mut flatbuffer);
            }
            input = envelope::seal_at(t, spec, 1, &flatbuffer).unwrap();
        } else {
            for _ in 0..rounds {
                if matches!(kind, Kind::Config) && rng.random_bool(0.5) {
                    splice_yaml_token(&mut rng, &mut input);
                } else {
                    mutate(&mut rng, &mut input);
                }
            }
        }
        if std::env::var_os("FLOE_FUZZ_KEEP_GOING").is_some() {
            // An input that aborts the process (past HARD_LIMIT) is left here.
            std::fs::write(std::env::temp_dir().join("floe-fuzz-current"), &input).unwrap();
        }
        let before = LIVE.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let decode_started = Instant::now();
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| kind.decode(&input)));
        let stats = by_kind.entry(format!("{kind:?}")).or_default();
        stats.0 += 1;
        stats.1 += u64::from(matches!(outcome, Ok(true)));
        stats.2 += decode_started.elapsed();
        std::panic::set_hook(hook);
        let peak = PEAK.load(Ordering::Relaxed).saturating_sub(before);
        runs += 1;
        let failure = match outcome {
            Ok(_) if peak >= 512 << 20 => Some(format!("allocated {peak} bytes")),
            Ok(ok) => {
                decoded += u64::from(ok);
                None
            }
            Err(_) => Some("panicked".to_string()),
        };
        if let Some(what) = failure {
            let path = std::env::temp_dir().join(format!("floe-fuzz-crash-{seed}-{runs}"));
            std::fs::write(&path, &input).unwrap();
            let report = format!(
                "decoding a mutated {kind:?} {what} (seed {seed}, run {runs}); input saved to {}",
                path.display()
            );
            // FLOE_FUZZ_KEEP_GOING=1 collects every failure of the run.
            if std::env::var_os("FLOE_FUZZ_KEEP_GOING").is_none() {
                panic!("{report}");
            }
            eprintln!("{report}");
            failures += 1;
        }
    }
    eprintln!(
        "fuzzed {runs} inputs in {:?}; {decoded} still decoded; by kind (inputs, decoded, time): {by_kind:?}",
        started.elapsed()
    );
    assert_eq!(failures, 0, "{failures} inputs failed");
    assert!(runs > 100, "only {runs} inputs in the time budget");
}

/// Inputs the fuzzer found (minimised), which panicked inside `flexbuffers` or
/// serde_yaml, or allocated without bound, before FlexBuffers values were checked
/// and empty YAML tags refused.
mod found {
    use super::*;
    use floe::format::FormatError;

    /// A bool of 8 bytes in a 3-byte buffer: `flexbuffers` sliced past the end.
    const BOOL_PAST_THE_END: [u8; 3] = [0x01, (26 << 2) | 3, 0x01];

    /// A vector claiming 2^32 - 1 elements (offset 0 from the root slot, length slot
    /// 0xffffffff): `flexbuffers` read each missing element as null, so decoding
    /// allocated until memory ran out.
    const HUGE_VECTOR: [u8; 7] = [0xff, 0xff, 0xff, 0xff, 0x00, (10 << 2) | 2, 0x01];

    /// A vector of keys whose length (6) runs past the end of the buffer:
    /// `flexbuffers` read the offset of its sixth key past the end.
    const KEY_SLOT_PAST_THE_END: [u8; 6] = [0x06, 0xff, 0xff, 0x02, 14 << 2, 0x01];

    #[test]
    fn metadata_values_that_panicked_are_refused() {
        for bytes in [
            &BOOL_PAST_THE_END[..],
            &HUGE_VECTOR[..],
            &KEY_SLOT_PAST_THE_END[..],
        ] {
            let r = decode_metadata_value(SpecVersion::V2, bytes);
            assert!(
                r.as_ref().is_err_and(|e| e.starts_with("not FlexBuffers")),
                "{bytes:?}: {r:?}"
            );
        }
    }

    /// The configuration `{"virtual_chunk_containers": {"x": {"store": ""}}}`: serde
    /// writes a unit enum variant as its name, and an empty name made an empty YAML
    /// tag, on which serde_yaml's `Tag::new` panicked.
    fn empty_store_kind() -> Vec<u8> {
        flexbuffers::to_vec(json!({"virtual_chunk_containers": {"x": {"store": ""}}})).unwrap()
    }

    #[test]
    fn a_flexbuffers_config_with_an_empty_store_kind_is_refused() {
        for bytes in [
            empty_store_kind(),
            // The newtype form, `{"": value}`.
            flexbuffers::to_vec(json!({"virtual_chunk_containers": {"x": {"store": {"": 1}}}}))
                .unwrap(),
        ] {
            assert!(matches!(
                RepositoryConfig::from_flexbuffer(&bytes),
                Err(FormatError::InvalidConfig { .. })
            ));
        }
        for bytes in [&BOOL_PAST_THE_END[..], &HUGE_VECTOR[..]] {
            assert!(matches!(
                RepositoryConfig::from_flexbuffer(bytes),
                Err(FormatError::InvalidConfig { .. })
            ));
        }
    }

    #[tokio::test]
    async fn a_repo_object_with_a_malformed_config_is_refused() {
        let storage = new_in_memory_storage();
        Repository::create_with(
            storage.clone(),
            None,
            SpecVersion::V2,
            OpenOptions::default(),
        )
        .await
        .unwrap();
        let good = RepoInfo::decode(&storage.get("repo").await.unwrap().bytes).unwrap();
        for config in [
            empty_store_kind(),
            BOOL_PAST_THE_END.to_vec(),
            HUGE_VECTOR.to_vec(),
        ] {
            let mut info = good.clone();
            info.config_bytes = Some(config);
            let bytes = info.encode().unwrap();
            assert!(matches!(
                RepoInfo::decode(&bytes),
                Err(FormatError::InvalidConfig { .. })
            ));
        }
    }
}

/// Replays a saved input: `FLOE_FUZZ_REPLAY=<file> FLOE_FUZZ_KIND=<kind>` (a
/// [`Kind`] name as the failure report prints it); does nothing without them.
#[test]
fn replay_a_saved_input() {
    let (Some(path), Ok(name)) = (
        std::env::var_os("FLOE_FUZZ_REPLAY"),
        std::env::var("FLOE_FUZZ_KIND"),
    ) else {
        return;
    };
    let kind = [
        Kind::Snapshot,
        Kind::Manifest,
        Kind::TransactionLog,
        Kind::Ref,
        Kind::Config,
        Kind::RepoInfo,
        Kind::ConfigFlexbuffer,
        Kind::MetadataValue,
    ]
    .into_iter()
    .find(|k| format!("{k:?}") == name)
    .unwrap_or_else(|| panic!("no kind {name}"));
    let input = std::fs::read(path).unwrap();
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let decoded = kind.decode(&input);
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    eprintln!("{kind:?}: decoded {decoded}, peak {peak} bytes");
}
