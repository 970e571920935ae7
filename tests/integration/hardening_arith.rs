//! Hardening (issue 9, section 3): checked arithmetic on shapes, element counts,
//! offsets and lengths; `cat` reads exactly the region in bounded memory; native refs
//! whose offset+length overflow are errors; ranged reads past an object's end are
//! errors; kerchunk `gen` expansion and templates are bounded.
//!
//! Tests that would panic or abort the process on the old code run the `floe` binary
//! as a child, so the suite survives while they are red. Peak memory of a child is
//! sampled from `/proc/<pid>/status` (`VmHWM`) while it runs (Linux only; elsewhere
//! the memory bound is not checked).

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{array_def, p};
use bytes::Bytes;
use floe::format::manifest::{ChunkPayload, NativeChunkRef};
use floe::storage::{LocalStorage, Storage};
use floe::zarr::RegionFormats;
use floe::zarr::{ArraySubset, DataType, FilesystemStore, ZarrError};
use floe::{Error, Repository};

// ------------------------------------------------------------------ helpers

fn floe_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_floe"));
    c.args(args).env_remove("FLOE_LOG").env_remove("RUST_LOG");
    c
}

/// What a finished child did.
struct Run {
    code: Option<i32>,
    stdout: Vec<u8>,
    /// Bytes of stdout read (all of it unless `keep` limited what was kept).
    stdout_len: u64,
    stderr: String,
    /// Peak resident set (`VmHWM`) in KiB, sampled while the child ran; `None` where
    /// `/proc` is unavailable.
    peak_kib: Option<u64>,
    elapsed: Duration,
}

fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs floe with `args`, keeping at most `keep` bytes of stdout (the rest is read
/// and counted) and stopping after `stop_after` bytes of stdout when given (the child
/// is then killed). Samples the child's peak memory while it runs.
fn run_sampled(args: &[&str], keep: usize, stop_after: Option<u64>) -> Run {
    let started = Instant::now();
    let mut child = floe_cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run floe");
    let pid = child.id();
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut total = 0u64;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = match out.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let room = keep.saturating_sub(kept.len()).min(n);
            kept.extend_from_slice(&buf[..room]);
            total += n as u64;
            if stop_after.is_some_and(|s| total >= s) {
                break;
            }
        }
        (kept, total)
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut peak = None;
    let code = loop {
        if let Some(kib) = vm_hwm_kib(pid) {
            peak = Some(peak.unwrap_or(0).max(kib));
        }
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        if reader.is_finished() && stop_after.is_some() {
            // Enough output: stop the child we started.
            let _ = child.kill();
            break child.wait().expect("wait").code();
        }
        if started.elapsed() > Duration::from_secs(120) {
            // Stop the child we started before failing, so it does not outlive us.
            let _ = child.kill();
            let _ = child.wait();
            panic!("floe {args:?} did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let (stdout, stdout_len) = reader.join().expect("stdout reader");
    Run {
        code,
        stdout,
        stdout_len,
        stderr: err_reader.join().expect("stderr reader"),
        peak_kib: peak,
        elapsed: started.elapsed(),
    }
}

fn run(args: &[&str]) -> Run {
    run_sampled(args, usize::MAX, None)
}

fn ok(args: &[&str]) -> String {
    let r = run(args);
    assert_eq!(r.code, Some(0), "floe {args:?} failed: {}", r.stderr);
    String::from_utf8(r.stdout).expect("utf-8")
}

/// Expects exit status 1 with one `floe: error:` line containing every `expect`.
fn fails(args: &[&str], expect: &[&str]) -> String {
    let r = run(args);
    assert_eq!(
        r.code,
        Some(1),
        "floe {args:?} should fail with status 1: stdout {:?} stderr {}",
        String::from_utf8_lossy(&r.stdout[..r.stdout.len().min(200)]),
        r.stderr
    );
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one stderr line expected: {:?}", r.stderr);
    assert!(lines[0].starts_with("floe: error: "), "{}", r.stderr);
    for e in expect {
        assert!(lines[0].contains(e), "`{e}` not in {:?}", r.stderr);
    }
    lines[0].to_string()
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Writes a plain Zarr v3 store at `dir` with a root group and one array `/a` of the
/// given shape, chunk shape, data type and fill value (metadata only, no chunks).
fn plain_store(dir: &Path, shape: &[u64], chunks: &[u64], dtype: &str, fill: serde_json::Value) {
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(
        dir.join("zarr.json"),
        r#"{"zarr_format":3,"node_type":"group","attributes":{}}"#,
    )
    .unwrap();
    let meta = serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {}
    });
    std::fs::write(dir.join("a/zarr.json"), serde_json::to_vec(&meta).unwrap()).unwrap();
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().unwrap()
}

// ------------------------------------------------------------------ huge shapes

/// `[2^63, 2^63]`: metadata-only commands work; JSON and raw output of the whole
/// array are a typed "too large" error (the old code panicked with an overflow in
/// the element count); text output summarizes; small regions print.
#[test]
fn huge_shape_is_accepted_for_metadata_and_refused_for_whole_reads() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("big");
    plain_store(&store, &[1 << 63, 1 << 63], &[1, 1], "float64", 0.into());
    let st = s(&store);
    assert!(ok(&["ls", &st]).contains("shape [9223372036854775808,9223372036854775808]"));
    for format in ["json", "raw"] {
        fails(
            &["cat", &st, "/a", "--format", format],
            &[
                "`a`",
                "too large",
                "[9223372036854775808, 9223372036854775808]",
            ],
        );
    }
    let text = ok(&["cat", &st, "/a"]);
    assert!(
        text.contains("more than 2^64 elements, summarized"),
        "{text}"
    );
    assert!(text.contains("[[0.0 0.0 0.0 ... 0.0 0.0 0.0]"), "{text}");
    // A small region at the far corner.
    let corner = "9223372036854775806:,9223372036854775807:";
    let json = ok(&["cat", &st, "/a", "--region", corner, "--format", "json"]);
    assert_eq!(json.trim(), "[[0.0],[0.0]]");
    // Empty regions print their bracket structure without reading anything.
    let json = ok(&["cat", &st, "/a", "--region", "0:2,0:0", "--format", "json"]);
    assert_eq!(json.trim(), "[[],[]]");
    // ... but not 2^63 empty lists' worth of brackets times 2^63.
    let json = ok(&["cat", &st, "/a", "--region", "0:0,:", "--format", "json"]);
    assert_eq!(json.trim(), "[]");
}

/// Text output of a many-dimensional array: 6 cells per summarized dimension still
/// grow as 6^ndim; past the cell limit it is a typed error (the old code built a grid
/// of 6^ndim strings: 10^7 for 9 dimensions, 2*10^9 for 12).
#[test]
fn text_summary_of_many_dimensions_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("nd");
    plain_store(&store, &[7; 9], &[1; 9], "uint8", 0.into());
    let st = s(&store);
    fails(
        &["cat", &st, "/a"],
        &["too large", "too many cells", "--format json"],
    );
    // Fewer dimensions still summarize.
    let store = dir.path().join("nd4");
    plain_store(&store, &[7; 4], &[1; 4], "uint8", 0.into());
    let text = ok(&["cat", &s(&store), "/a"]);
    assert!(text.contains("2401 elements, summarized"), "{text}");
}

/// A region at the end of a `[u64::MAX]` array: its last chunk ends past `u64::MAX`
/// (the old code overflowed computing the chunk's end and aborted).
#[test]
fn region_at_the_end_of_a_u64_max_array() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("umax");
    plain_store(&store, &[u64::MAX], &[10], "int32", 7.into());
    let st = s(&store);
    let json = ok(&[
        "cat",
        &st,
        "/a",
        "--region",
        "18446744073709551610:",
        "--format",
        "json",
    ]);
    assert_eq!(json.trim(), "[7,7,7,7,7]");
    let text = ok(&["cat", &st, "/a"]);
    assert!(text.contains("[7 7 7 ... 7 7 7]"), "{text}");
    let raw = run(&[
        "cat",
        &st,
        "/a",
        "--region",
        "18446744073709551613:",
        "--format",
        "raw",
    ]);
    assert_eq!(raw.code, Some(0), "{}", raw.stderr);
    assert_eq!(
        raw.stdout,
        [7i32, 7]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>()
    );
}

/// The library: a region read whose size overflows is `ZarrError::TooLarge`, and a
/// write to the last chunk of a `[u64::MAX]` array round-trips.
#[test]
fn library_reads_of_huge_regions_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let store: Arc<dyn floe::zarr::Store> = Arc::new(FilesystemStore::new(dir.path()).unwrap());
        let big =
            floe::zarr::ArrayBuilder::new(vec![1 << 63, 1 << 63], vec![1, 1], DataType::UInt8)
                .create(Arc::clone(&store), "big")
                .await
                .unwrap();
        let all = ArraySubset::full(big.shape());
        for e in [
            big.read_region_bytes(&all).await.unwrap_err(),
            big.read_region::<u8>(&all).await.unwrap_err(),
            big.read_region_json(&all).await.unwrap_err(),
            big.write_region::<u8>(&all, &[]).await.unwrap_err(),
        ] {
            assert!(matches!(e, ZarrError::TooLarge { .. }), "{e}");
        }
        // Fits u64 but not memory: also refused before allocating.
        let row = ArraySubset::new(vec![0, 0], vec![1, 1 << 62]);
        let e = big.read_region_bytes(&row).await.unwrap_err();
        assert!(matches!(e, ZarrError::TooLarge { .. }), "{e}");
        // A chunk shape that cannot be held: opening works, chunk I/O is refused.
        let huge_chunks =
            floe::zarr::ArrayBuilder::new(vec![1 << 62], vec![1 << 62], DataType::Float64)
                .create(Arc::clone(&store), "huge_chunks")
                .await
                .unwrap();
        let e = huge_chunks.read_chunk::<f64>(&[0]).await.unwrap_err();
        assert!(matches!(e, ZarrError::TooLarge { .. }), "{e}");
        let e = huge_chunks
            .write_region::<f64>(&ArraySubset::new(vec![5], vec![1]), &[1.0])
            .await
            .unwrap_err();
        assert!(matches!(e, ZarrError::TooLarge { .. }), "{e}");
        // A shard whose index would have 2^62 entries: invalid metadata naming the
        // index (the old code overflowed computing the index size).
        let e = floe::zarr::ArrayBuilder::new(vec![1 << 62], vec![1 << 62], DataType::UInt8)
            .codecs(vec![
                serde_json::json!({"name": "sharding_indexed", "configuration": {
                "chunk_shape": [1],
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                 {"name": "crc32c"}],
                "index_location": "end"}}),
            ])
            .create(Arc::clone(&store), "sharded")
            .await
            .unwrap_err();
        assert!(matches!(e, ZarrError::InvalidMetadata { .. }), "{e}");
        assert!(e.to_string().contains("index too large"), "{e}");
        // The last chunk of a [u64::MAX] array.
        let end = floe::zarr::ArrayBuilder::new(vec![u64::MAX], vec![10], DataType::Int32)
            .create(Arc::clone(&store), "end")
            .await
            .unwrap();
        let tail = ArraySubset::new(vec![u64::MAX - 3], vec![3]);
        end.write_region::<i32>(&tail, &[1, 2, 3]).await.unwrap();
        assert_eq!(end.read_region::<i32>(&tail).await.unwrap(), vec![1, 2, 3]);
        let last = ArraySubset::new(vec![u64::MAX / 10 * 10], vec![u64::MAX % 10]);
        assert_eq!(
            end.read_region::<i32>(&last).await.unwrap(),
            vec![0, 0, 1, 2, 3]
        );
    });
}

// ------------------------------------------------------------------ wide arrays

/// `[4, 2^31]` float64: a small region prints at once in little memory, and the
/// whole array streams (the old code allocated 64 GiB for the first row of chunks
/// and aborted; a `0:2,0:16M` raw region peaked at its full 256 MiB).
#[test]
fn cat_of_a_very_wide_array_reads_only_the_region_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("wide");
    plain_store(&store, &[4, 1 << 31], &[4, 1 << 20], "float64", 1.5.into());
    let st = s(&store);

    let r = run_sampled(
        &[
            "cat",
            &st,
            "/a",
            "--region",
            "0:2,1000:1010",
            "--format",
            "json",
        ],
        1 << 20,
        None,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let row = format!("[{}]", ["1.5"; 10].join(","));
    assert_eq!(
        String::from_utf8(r.stdout).unwrap().trim(),
        format!("[{row},{row}]")
    );
    assert!(r.elapsed < Duration::from_secs(20), "{:?}", r.elapsed);
    if let Some(kib) = r.peak_kib {
        assert!(kib < 64 * 1024, "peak {kib} KiB for a 20-element region");
    }

    // 32 Mi elements (256 MiB) of raw output: streamed in bounded blocks.
    let r = run_sampled(
        &[
            "cat",
            &st,
            "/a",
            "--region",
            "0:2,0:16777216",
            "--format",
            "raw",
        ],
        16,
        None,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout_len, 2 * 16_777_216 * 8);
    assert_eq!(
        r.stdout,
        [1.5f64.to_le_bytes(), 1.5f64.to_le_bytes()].concat()
    );
    if let Some(kib) = r.peak_kib {
        assert!(kib < 128 * 1024, "peak {kib} KiB streaming 256 MiB");
    }
    eprintln!(
        "wide raw region: {:?}, peak {:?} KiB",
        r.elapsed, r.peak_kib
    );

    // The whole array (64 GiB of output): the first MiB arrives; then we stop it.
    for format in ["raw", "json"] {
        let r = run_sampled(&["cat", &st, "/a", "--format", format], 64, Some(1 << 20));
        assert!(
            r.stdout_len >= 1 << 20,
            "{format}: only {} bytes before exit {:?}: {}",
            r.stdout_len,
            r.code,
            r.stderr
        );
        if format == "json" {
            assert!(r.stdout.starts_with(b"[[1.5,1.5,"), "{:?}", r.stdout);
        }
        if let Some(kib) = r.peak_kib {
            assert!(kib < 128 * 1024, "{format}: peak {kib} KiB");
        }
    }
}

// ------------------------------------------------------------------ native refs

/// A repository whose array `/a` has chunk 0 stored natively and chunk 1 pointing
/// into the same object with an offset whose sum with the length overflows.
async fn repo_with_overflowing_native_ref(dir: &Path) -> Repository {
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir).unwrap());
    let repo = Repository::create(storage, None).await.unwrap();
    let session = repo.writable_session("main").await.unwrap();
    session
        .add_array(&p("/a"), array_def("/a", &[2000], &[1000], "uint8"))
        .unwrap();
    session
        .set_chunk(&p("/a"), &[0], Bytes::from(vec![3u8; 1000]))
        .await
        .unwrap();
    let Some(ChunkPayload::Native(good)) = session.get_chunk_ref(&p("/a"), &[0]).await.unwrap()
    else {
        panic!("chunk 0 should be a native ref");
    };
    let bad = NativeChunkRef {
        id: good.id,
        offset: u64::MAX - 10,
        length: 1000,
    };
    session
        .set_chunk_ref(&p("/a"), &[1], Some(ChunkPayload::Native(bad)))
        .unwrap();
    session.commit("overflowing ref").await.unwrap();
    repo
}

/// Reading a native ref whose offset+length overflows is `ChunkUnreadable` (the
/// old code wrapped the range to an empty one and returned 0 bytes); `export` of
/// such a repository fails with status 1 and removes what it wrote.
#[test]
fn native_ref_offset_overflow_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let repo_dir = dir.path().join("repo");
    rt().block_on(async {
        let repo = repo_with_overflowing_native_ref(&repo_dir).await;
        let session = repo
            .readonly_session(&floe::VersionSelector::Branch("main".into()))
            .await
            .unwrap();
        assert_eq!(
            session.get_chunk(&p("/a"), &[0], None).await.unwrap(),
            Some(Bytes::from(vec![3u8; 1000]))
        );
        let e = session.get_chunk(&p("/a"), &[1], None).await.unwrap_err();
        assert!(matches!(e, Error::ChunkUnreadable { .. }), "{e}");
        assert!(e.to_string().contains("overflow"), "{e}");
        let e = session
            .get_chunk(&p("/a"), &[1], Some(5..10))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::ChunkUnreadable { .. }), "{e}");
        // A virtual ref at offset u64::MAX is refused before any fetch (the fetcher
        // saturates offset+length, which turns this range into an empty one).
        let w = repo.writable_session("main").await.unwrap();
        let v = floe::format::manifest::VirtualChunkRef {
            location: "file:///nonexistent/f.nc".into(),
            offset: u64::MAX,
            length: 1,
            checksum: None,
        };
        w.set_chunk_ref(&p("/a"), &[1], Some(ChunkPayload::Virtual(v)))
            .unwrap();
        let e = w.get_chunk(&p("/a"), &[1], None).await.unwrap_err();
        assert!(matches!(e, Error::ChunkUnreadable { .. }), "{e}");
        assert!(e.to_string().contains("overflows"), "{e}");
    });
    let dest = dir.path().join("out");
    fails(&["export", &s(&repo_dir), &s(&dest)], &["/a", "overflow"]);
    assert!(!dest.exists(), "a failed export removes its destination");
}

// ------------------------------------------------------------------ kerchunk gen

/// A repository at `dir/repo` and a reference file `dir/refs.json` holding `doc`.
fn kerchunk_setup(dir: &Path, doc: &str) -> (String, String) {
    let repo = dir.join("repo");
    let r = run(&["init", &s(&repo)]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let refs = dir.join("refs.json");
    std::fs::write(&refs, doc).unwrap();
    (s(&repo), s(&refs))
}

fn gen_refs(dimensions: &str) -> String {
    format!(
        r#"{{"version": 1,
            "refs": {{".zgroup": "{{\"zarr_format\": 2}}",
                      "a/.zarray": "{{\"zarr_format\": 2, \"shape\": [1000000], \"chunks\": [1], \"dtype\": \"<i4\", \"compressor\": null, \"fill_value\": 0, \"filters\": null, \"order\": \"C\"}}"}},
            "gen": [{{"key": "a/{{{{i}}}}", "url": "/nonexistent/f.nc", "offset": "0", "length": "4",
                      "dimensions": {dimensions}}}]}}"#
    )
}

/// `gen` with a huge `stop` (the old code panicked collecting the range) and four
/// 65536-long dimensions (the old product wrapped to 0: nothing imported, exit 0)
/// fail with one error line naming the limit; nothing is committed.
#[test]
fn kerchunk_gen_expansion_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    for (name, dims, count) in [
        (
            "huge_stop",
            r#"{"i": {"stop": 9223372036854775807}}"#,
            "9223372036854775807",
        ),
        (
            "wrapping_product",
            r#"{"a": {"stop": 65536}, "b": {"stop": 65536}, "c": {"stop": 65536}, "i": {"stop": 65536}}"#,
            "more than 2^64",
        ),
    ] {
        let sub = dir.path().join(name);
        std::fs::create_dir_all(&sub).unwrap();
        let (repo, refs) = kerchunk_setup(&sub, &gen_refs(dims));
        fails(
            &["import", "kerchunk", &refs, &repo, "-m", "x"],
            &["gen entry 0", count, "10000000", "--max-refs"],
        );
        let log = ok(&["log", &repo]);
        assert!(!log.contains(" x"), "{name}: nothing committed: {log}");
    }
}

/// `--max-refs` lowers (and raises) the limit.
#[test]
fn kerchunk_max_refs_flag() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, refs) = kerchunk_setup(dir.path(), &gen_refs(r#"{"i": {"stop": 20}}"#));
    fails(
        &[
            "import",
            "kerchunk",
            &refs,
            &repo,
            "-m",
            "x",
            "--max-refs",
            "19",
        ],
        &["would generate 20 references", "limit of 19"],
    );
    // Within the limit the import proceeds (and fails on the missing source file,
    // which shows the references were generated).
    fails(
        &[
            "import",
            "kerchunk",
            &refs,
            &repo,
            "-m",
            "x",
            "--max-refs",
            "20",
        ],
        &["/nonexistent/f.nc"],
    );
}

/// Nested Jinja loops stop on the fuel budget with a one-line error, quickly.
#[test]
fn kerchunk_templates_have_an_execution_budget() {
    let dir = tempfile::tempdir().unwrap();
    let doc = r#"{"version": 1,
        "templates": {"f": "{% for i in range(100000) %}{% for j in range(100000) %}{{c}}{% endfor %}{% endfor %}"},
        "refs": {".zgroup": "{\"zarr_format\": 2}",
                 "a/.zarray": "{\"zarr_format\": 2, \"shape\": [1], \"chunks\": [1], \"dtype\": \"<i4\", \"compressor\": null, \"fill_value\": 0, \"filters\": null, \"order\": \"C\"}",
                 "a/0": ["/data/{{ f(c='x') }}.nc", 0, 4]}}"#;
    let (repo, refs) = kerchunk_setup(dir.path(), doc);
    let started = Instant::now();
    fails(
        &["import", "kerchunk", &refs, &repo, "-m", "x"],
        &["exceeds its budget"],
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}
