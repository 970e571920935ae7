//! The engine honours the repository configuration (Icechunk's `RepositoryConfig`):
//! `manifest.splitting` decides the manifests a commit writes, configurations given
//! when opening are merged over the stored one, `caching` bounds the caches and
//! `manifest.preload` fetches manifests when a session opens,
//! `max_concurrent_requests` bounds the requests in flight and
//! `repo_update_retries` the tries of a spec-2 `repo` object update.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::fixture::Fixture;
use crate::common::{array_def, p};
use bytes::Bytes;
use floe::format::config::RepositoryConfig;
use floe::format::snapshot::Snapshot;
use floe::format::SpecVersion;
use floe::storage::fault::{Call, Fault, FaultyStorage};
use floe::storage::{new_in_memory_storage, Storage};
use floe::{OpenOptions, Repository, VersionSelector};

/// A configuration from `config.yaml` text.
fn config(yaml: &str) -> RepositoryConfig {
    RepositoryConfig::parse(yaml.as_bytes()).unwrap()
}

/// Manifests cut every 3 chunks along axis 2 of arrays named `temp...`, every 2
/// along axis 1 of every array.
const SPLIT_YAML: &str = "manifest:
  splitting:
    split_sizes:
    - - !name_matches {regex: ^temp}
      - [{condition: !Axis 2, num_chunks: 3}]
    - - any_array
      - [{condition: !Axis 1, num_chunks: 2}]
";

/// Writes every chunk of a (3, 4, 17) array of one-element chunks at `path`.
async fn write_cube(s: &floe::Session, path: &str) {
    s.add_array(&p(path), array_def(path, &[3, 4, 17], &[1, 1, 1], "uint8"))
        .unwrap();
    for i in 0..3u64 {
        for j in 0..4u64 {
            for k in 0..17u64 {
                s.set_chunk(&p(path), &[i, j, k], Bytes::from(vec![k as u8]))
                    .await
                    .unwrap();
            }
        }
    }
}

async fn manifests_of(repo: &Repository, snap: floe::SnapshotId, path: &str) -> usize {
    let s: Arc<Snapshot> = repo.assets().fetch_snapshot(&snap).await.unwrap();
    s.nodes[&p(path)].array().unwrap().manifests.len()
}

#[tokio::test]
async fn configured_splitting_decides_the_manifests_of_a_commit() {
    for spec in [SpecVersion::V1, SpecVersion::V2] {
        let f = Fixture::on_spec(new_in_memory_storage(), Some(config(SPLIT_YAML)), spec).await;
        write_cube(&f.session, "/temperature").await;
        write_cube(&f.session, "/salinity").await;
        let id = f.session.commit("cubes").await.unwrap();
        // temperature: axis 1 by 2 (2 blocks) and axis 2 by 3 (6 blocks); the second
        // rule does not size axis 2 again. salinity: only axis 1 (2 blocks).
        assert_eq!(
            manifests_of(&f.repo, id, "/temperature").await,
            12,
            "{spec:?}"
        );
        assert_eq!(manifests_of(&f.repo, id, "/salinity").await, 2, "{spec:?}");
        // The chunks read back through the split manifests.
        let r = f
            .repo
            .readonly_session(&VersionSelector::Snapshot(id))
            .await
            .unwrap();
        for k in [0u64, 5, 16] {
            let got = r
                .get_chunk(&p("/temperature"), &[2, 3, k], None)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(got[..], [k as u8]);
        }

        // Reopened, the stored configuration still splits: one changed chunk rewrites
        // only its block's manifest.
        let repo = Repository::open(Arc::clone(&f.storage)).await.unwrap();
        let s = repo.writable_session("main").await.unwrap();
        s.set_chunk(&p("/temperature"), &[0, 0, 16], Bytes::from_static(b"\x09"))
            .await
            .unwrap();
        let second = s.commit("one chunk").await.unwrap();
        let before = f.repo.assets().fetch_snapshot(&id).await.unwrap();
        let after = repo.assets().fetch_snapshot(&second).await.unwrap();
        let refs = |s: &Snapshot| {
            s.nodes[&p("/temperature")]
                .array()
                .unwrap()
                .manifests
                .clone()
        };
        let kept = refs(&after)
            .iter()
            .filter(|m| refs(&before).contains(m))
            .count();
        assert_eq!(
            kept, 11,
            "{spec:?}: only the changed block's manifest is new"
        );
    }
}

#[tokio::test]
async fn a_configuration_given_at_open_is_merged_over_the_stored_one() {
    let f = Fixture::on(new_in_memory_storage(), Some(config(SPLIT_YAML))).await;
    write_cube(&f.session, "/temperature").await;
    f.session.commit("cubes").await.unwrap();
    // Whole arrays from now on, by a configuration given when opening (not stored).
    let whole =
        config("inline_chunk_threshold_bytes: 0\nmanifest:\n  splitting:\n    split_sizes: null\n");
    let repo =
        Repository::open_configured(Arc::clone(&f.storage), OpenOptions::default(), Some(whole))
            .await
            .unwrap();
    assert_eq!(repo.config().inline_chunk_threshold_bytes(), 0);
    assert_eq!(
        repo.config().manifest().splitting.unwrap().split_sizes,
        None,
        "splitting is replaced whole"
    );
    let s = repo.writable_session("main").await.unwrap();
    s.set_chunk(&p("/temperature"), &[0, 0, 0], Bytes::from_static(b"\x01"))
        .await
        .unwrap();
    let id = s.commit("whole").await.unwrap();
    assert_eq!(manifests_of(&repo, id, "/temperature").await, 1);
    // The stored configuration is unchanged until saved.
    let stored = Repository::fetch_config(Arc::clone(&f.storage))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.inline_chunk_threshold_bytes(), 512);
    repo.save_config(repo.config()).await.unwrap();
    let stored = Repository::fetch_config(Arc::clone(&f.storage))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.inline_chunk_threshold_bytes(), 0);
    // A repository that stores no configuration has none to fetch.
    let empty = Fixture::in_memory().await;
    assert!(Repository::fetch_config(empty.storage)
        .await
        .unwrap()
        .is_none());
    assert!(matches!(
        Repository::fetch_config(new_in_memory_storage()).await,
        Err(floe::Error::RepositoryNotFound { .. })
    ));
}

/// A storage counting the reads of manifests.
fn counting() -> (Arc<dyn Storage>, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&count);
    let storage = FaultyStorage::new(
        new_in_memory_storage(),
        Box::new(move |call, key: &str| {
            if matches!(call, Call::Get | Call::GetRange) && key.starts_with("manifests/") {
                c.fetch_add(1, Ordering::SeqCst);
            }
            Fault::None
        }),
    );
    (Arc::new(storage), count)
}

/// Writes a committed 4-chunk array at `/time` in a new repository on `storage`.
async fn one_array(storage: &Arc<dyn Storage>) {
    let f = Fixture::on(
        Arc::clone(storage),
        Some(config("inline_chunk_threshold_bytes: 0\n")),
    )
    .await
    .with_u8_array("/time", 4);
    for i in 0..4 {
        f.session
            .set_chunk(&p("/time"), &[i], Bytes::from(vec![i as u8]))
            .await
            .unwrap();
    }
    f.session.commit("time").await.unwrap();
}

/// Reads chunk 0 of `/time` through a new read-only session on `main`.
async fn read_time(repo: &Repository) {
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert!(r
        .get_chunk(&p("/time"), &[0], None)
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn caching_bounds_the_manifest_cache() {
    let (storage, gets) = counting();
    one_array(&storage).await;
    let off = "manifest: {preload: {max_total_refs: 0}}\n";
    // Default caches: the manifest is read once for two sessions.
    let repo = Repository::open_configured(
        Arc::clone(&storage),
        OpenOptions::default(),
        Some(config(off)),
    )
    .await
    .unwrap();
    let start = gets.load(Ordering::SeqCst);
    read_time(&repo).await;
    read_time(&repo).await;
    assert_eq!(gets.load(Ordering::SeqCst) - start, 1);
    // No room for a manifest's refs: every session reads it again.
    let tiny = config(&format!("{off}caching: {{num_chunk_refs: 2}}\n"));
    let repo =
        Repository::open_configured(Arc::clone(&storage), OpenOptions::default(), Some(tiny))
            .await
            .unwrap();
    let start = gets.load(Ordering::SeqCst);
    read_time(&repo).await;
    read_time(&repo).await;
    assert_eq!(gets.load(Ordering::SeqCst) - start, 2);
}

#[tokio::test]
async fn sessions_preload_the_manifests_the_configuration_selects() {
    let (storage, gets) = counting();
    one_array(&storage).await;
    // `time` is a coordinate name of the default condition: a new session fetches its
    // manifest before any read.
    let repo = Repository::open(Arc::clone(&storage)).await.unwrap();
    let start = gets.load(Ordering::SeqCst);
    let _s = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    let mut waited = 0;
    while gets.load(Ordering::SeqCst) == start && waited < 200 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += 1;
    }
    assert_eq!(gets.load(Ordering::SeqCst) - start, 1, "preloaded");
    read_time(&repo).await;
    assert_eq!(
        gets.load(Ordering::SeqCst) - start,
        1,
        "then read from the cache"
    );

    // A condition that selects nothing: no fetch until a read.
    for cond in [
        "'false'",
        "!name_matches {regex: ^lat$}",
        "!num_refs {from: !Included 5, to: Unbounded}",
    ] {
        let cfg = config(&format!("manifest: {{preload: {{preload_if: {cond}}}}}\n"));
        let repo =
            Repository::open_configured(Arc::clone(&storage), OpenOptions::default(), Some(cfg))
                .await
                .unwrap();
        let start = gets.load(Ordering::SeqCst);
        let _s = repo.writable_session("main").await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            gets.load(Ordering::SeqCst),
            start,
            "{cond}: nothing preloaded"
        );
    }
}

#[tokio::test]
async fn commits_fetch_manifests_as_concurrently_as_configured() {
    let delayed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d = Arc::clone(&delayed);
    let storage: Arc<dyn Storage> = Arc::new(FaultyStorage::new(
        new_in_memory_storage(),
        Box::new(move |call, key: &str| {
            if d.load(Ordering::SeqCst)
                && matches!(call, Call::Get | Call::GetRange)
                && key.starts_with("manifests/")
            {
                Fault::Delay(Duration::from_millis(300))
            } else {
                Fault::None
            }
        }),
    ));
    // Four manifests of one chunk each.
    let one_per_chunk = "inline_chunk_threshold_bytes: 0
manifest:
  splitting:
    split_sizes: [[any_array, [{condition: Any, num_chunks: 1}]]]
";
    let f = Fixture::on(Arc::clone(&storage), Some(config(one_per_chunk)))
        .await
        .with_u8_array("/a", 4);
    for i in 0..4 {
        f.session
            .set_chunk(&p("/a"), &[i], Bytes::from(vec![i as u8]))
            .await
            .unwrap();
    }
    f.session.commit("four manifests").await.unwrap();
    delayed.store(true, Ordering::SeqCst);
    let mut took = Vec::new();
    for n in [1, 4] {
        // One manifest for the whole array: the commit reads all four.
        let whole = config(&format!(
            "manifest:\n  splitting: {{split_sizes: null}}\n  max_concurrent_manifest_fetches_during_commit: {n}\n"
        ));
        let repo =
            Repository::open_configured(Arc::clone(&storage), OpenOptions::default(), Some(whole))
                .await
                .unwrap();
        // Each run on its own branch from the four-manifest commit.
        let branch = format!("b{n}");
        let tip = repo.lookup_branch("main").await.unwrap();
        repo.create_branch(&branch, tip).await.unwrap();
        let s = repo.writable_session(&branch).await.unwrap();
        s.set_chunk(&p("/a"), &[0], Bytes::from_static(b"\x07"))
            .await
            .unwrap();
        let start = std::time::Instant::now();
        let id = s.commit("whole").await.unwrap();
        took.push(start.elapsed());
        assert_eq!(manifests_of(&repo, id, "/a").await, 1);
    }
    assert!(
        took[0] >= Duration::from_millis(1100),
        "one at a time: {took:?}"
    );
    assert!(
        took[1] < Duration::from_millis(900),
        "four at once: {took:?}"
    );
}

/// Time on a paused clock that 8 chunk writes at once take when every request
/// takes 20 ms, on a repository opened with `yaml`'s configuration.
async fn eight_writes(yaml: &str) -> Duration {
    let storage: Arc<dyn Storage> = Arc::new(FaultyStorage::new(
        new_in_memory_storage(),
        Box::new(|_, _| Fault::Delay(Duration::from_millis(20))),
    ));
    let f = Fixture::on(Arc::clone(&storage), None)
        .await
        .with_u8_array("/a", 8);
    f.session.commit("array").await.unwrap();
    // Unpacked: each chunk is an object of its own.
    let mut configured = config(yaml);
    configured
        .set_chunk_packing(Some(&floe::format::config::ChunkPackingConfig {
            mode: Some(floe::format::config::ChunkPackingMode::Disabled),
            ..Default::default()
        }))
        .unwrap();
    let repo = Repository::open_configured(storage, OpenOptions::default(), Some(configured))
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    let start = tokio::time::Instant::now();
    let writes = (0..8u64).map(|i| {
        let s = s.clone();
        // Over the inline threshold: each chunk is an object of its own.
        async move {
            s.set_chunk(&p("/a"), &[i], Bytes::from(vec![1u8; 1024]))
                .await
        }
    });
    for r in futures::future::join_all(writes).await {
        r.unwrap();
    }
    start.elapsed()
}

#[tokio::test(start_paused = true)]
async fn max_concurrent_requests_bounds_the_requests_in_flight() {
    // Icechunk's default (256): the 8 chunk objects go out at once.
    assert_eq!(eight_writes("{}").await, Duration::from_millis(20));
    assert_eq!(
        eight_writes("max_concurrent_requests: 2").await,
        Duration::from_millis(80)
    );
    assert_eq!(
        eight_writes("max_concurrent_requests: 4").await,
        Duration::from_millis(40)
    );
}

#[tokio::test]
async fn repo_update_retries_bound_the_tries_of_a_spec2_update() {
    let storage = new_in_memory_storage();
    let f = Fixture::on_spec(Arc::clone(&storage), None, SpecVersion::V2).await;
    let tip = f.repo.lookup_branch("main").await.unwrap();
    for (yaml, works) in [
        // One try: the stale `repo` object this handle holds is refused and no other
        // try is made.
        ("repo_update_retries: {default: {max_tries: 1}}", false),
        (
            "repo_update_retries: {default: {max_tries: 2, initial_backoff_ms: 1, max_backoff_ms: 2}}",
            true,
        ),
        // Unset: floe's own retries.
        ("{}", true),
    ] {
        let mine = Repository::open_configured(
            Arc::clone(&storage),
            OpenOptions::default(),
            Some(config(yaml)),
        )
        .await
        .unwrap();
        // Another handle changes the `repo` object: `mine` holds a stale copy.
        let other = Repository::open(Arc::clone(&storage)).await.unwrap();
        let name = format!("other-{}", rand_name(yaml));
        other.create_tag(&name, tip).await.unwrap();
        let result = mine.create_tag(&format!("mine-{}", rand_name(yaml)), tip).await;
        match (works, result) {
            (true, Ok(())) => {}
            (false, Err(floe::Error::RepoObjectContention { attempts })) => {
                assert_eq!(attempts, 1);
            }
            (_, other) => panic!("{yaml}: unexpected {other:?}"),
        }
    }
}

/// A tag name unique to a configuration's text.
fn rand_name(yaml: &str) -> String {
    format!(
        "{:x}",
        yaml.bytes()
            .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
    )
}

#[tokio::test]
async fn caching_num_bytes_chunks_keeps_chunk_bytes_read() {
    let reads = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&reads);
    let storage: Arc<dyn Storage> = Arc::new(FaultyStorage::new(
        new_in_memory_storage(),
        Box::new(move |call, key: &str| {
            if matches!(call, Call::Get | Call::GetRange) && key.starts_with("chunks/") {
                r.fetch_add(1, Ordering::SeqCst);
            }
            Fault::None
        }),
    ));
    one_array(&storage).await;
    // Icechunk's default (0): every read goes to storage; a cache of 1 KiB keeps the
    // one-byte chunks read.
    for (yaml, gets_per_pass) in [("{}", 4), ("caching: {num_bytes_chunks: 1024}", 0)] {
        let repo = Repository::open_configured(
            Arc::clone(&storage),
            OpenOptions::default(),
            Some(config(yaml)),
        )
        .await
        .unwrap();
        let s = repo
            .readonly_session(&VersionSelector::Branch("main".into()))
            .await
            .unwrap();
        for pass in 0..2 {
            let before = reads.load(Ordering::SeqCst);
            for i in 0..4u64 {
                let got = s.get_chunk(&p("/time"), &[i], None).await.unwrap();
                assert_eq!(got.as_deref(), Some(&[i as u8][..]));
            }
            let gets = reads.load(Ordering::SeqCst) - before;
            if pass == 0 {
                assert_eq!(gets, 4, "{yaml}: the first pass reads every chunk");
            } else {
                assert_eq!(gets, gets_per_pass, "{yaml}: second pass");
            }
        }
    }
}
