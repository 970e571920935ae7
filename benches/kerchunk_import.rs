//! Kerchunk import at scale: a reference file with 1,000,000 chunk refs into one
//! array, imported and committed. Prints the peak resident memory, which must stay
//! bounded (far below the size of a parsed JSON document of the references).

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use floe::format::NodePath;
use floe::ops::import_kerchunk;
use floe::storage::LocalStorage;
use floe::Repository;

/// Chunks per side: SIDE x SIDE chunk refs.
const SIDE: u64 = 1000;
/// Peak resident memory allowed for the whole benchmark process, in bytes.
const MEMORY_TARGET: u64 = 1024 << 20;

fn write_refs(dir: &Path) -> std::path::PathBuf {
    let data = dir.join("data.bin");
    std::fs::write(&data, vec![7u8; (SIDE * SIDE * 4) as usize]).unwrap();
    let refs = dir.join("refs.json");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&refs).unwrap());
    let zarray = serde_json::json!({"zarr_format": 2, "shape": [SIDE, SIDE], "chunks": [1, 1],
        "dtype": "<i4", "compressor": null, "filters": null, "fill_value": 0, "order": "C"});
    write!(
        f,
        r#"{{"version": 1, "refs": {{".zgroup": "{{\"zarr_format\": 2}}", "v/.zarray": {}"#,
        serde_json::to_string(&zarray.to_string()).unwrap()
    )
    .unwrap();
    let url = data.display().to_string();
    for i in 0..SIDE {
        for j in 0..SIDE {
            write!(f, r#", "v/{i}.{j}": ["{url}", {}, 4]"#, (i * SIDE + j) * 4).unwrap();
        }
    }
    writeln!(f, "}}}}").unwrap();
    f.flush().unwrap();
    refs
}

fn peak_rss_bytes() -> u64 {
    // VmHWM: peak resident set size of this process.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn import_million(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let refs = write_refs(dir.path());
    let size = std::fs::metadata(&refs).unwrap().len();
    let mut group = c.benchmark_group("kerchunk_import");
    group.sample_size(10);
    group.measurement_time(std::time::Duration::from_secs(60));
    let mut run = 0;
    group.bench_function("1m_refs_import_and_commit", |b| {
        b.to_async(&rt).iter(|| {
            run += 1;
            let repo_dir = dir.path().join(format!("repo{run}"));
            let refs = refs.clone();
            async move {
                let repo =
                    Repository::create(Arc::new(LocalStorage::new(&repo_dir).unwrap()), None)
                        .await
                        .unwrap();
                let s = repo.writable_session("main").await.unwrap();
                let summary = import_kerchunk(&repo, &s, &refs, &NodePath::root(), None)
                    .await
                    .unwrap();
                assert_eq!(summary.virtual_chunks, SIDE * SIDE);
                s.commit("import").await.unwrap();
                std::fs::remove_dir_all(&repo_dir).unwrap();
            }
        })
    });
    group.finish();
    let peak = peak_rss_bytes();
    println!(
        "kerchunk_import: reference file {} MiB, peak resident memory {} MiB (target {} MiB)",
        size >> 20,
        peak >> 20,
        MEMORY_TARGET >> 20
    );
    assert!(
        peak <= MEMORY_TARGET,
        "peak memory {peak} bytes exceeds the target"
    );
}

criterion_group!(benches, import_million);
criterion_main!(benches);
