//! Kerchunk import at scale, a plain benchmark binary: `cargo bench --bench
//! kerchunk_import` writes a reference file of `FLOE_KERCHUNK_REFS` chunk refs
//! (default 1,000,000; 10,000,000 is the scale target), imports it into a new
//! repository on local disk and commits, and prints the wall time of the import and
//! of the commit and the peak resident memory (VmHWM) of each phase. It fails when
//! the peak exceeds the target: 1 GiB up to 10^6 refs, 2 GiB above
//! (`FLOE_KERCHUNK_MAX_RSS_MIB` overrides it). `FLOE_KERCHUNK_RUNS` repeats the import
//! and commit (default 1; each run in a fresh repository).
//!
//! The references are what kerchunk makes of a NetCDF archive: two variables (`t`
//! and `p`, half of the refs each) of many small compressed chunks, stored
//! interleaved row by row in 16 data files with long paths, so millions of refs
//! share a handful of locations, with offsets and lengths that vary from chunk to
//! chunk. The data files are sparse: only their sizes matter to the import.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use floe::format::manifest::ChunkPayload;
use floe::format::NodePath;
use floe::ops::import_kerchunk;
use floe::storage::LocalStorage;
use floe::{Repository, VersionSelector};

/// Chunks per row of each array's chunk grid.
const COLS: u64 = 1000;
/// Data files the refs point into.
const FILES: u64 = 16;
/// Bytes before the first chunk of a data file (its header).
const HEADER: u64 = 4096;
/// The two variables.
const VARS: [&str; 2] = ["t", "p"];

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Encoded length of chunk `n` of variable `v`: 200..=1223 bytes, deterministic.
fn chunk_len(v: u64, n: u64) -> u64 {
    let mut x = (n << 1 | v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    200 + x % 1024
}

/// The reference layout: for each ref (variable, row, column) its file and offset.
struct Layout {
    refs: u64,
    rows: u64,
    files: Vec<PathBuf>,
}

impl Layout {
    fn new(dir: &Path, refs: u64) -> Self {
        let per_var = refs / 2;
        let rows = per_var.div_ceil(COLS).max(1);
        let data = dir.join(
            "archive/reanalysis/era5/single-levels/reanalysis/hourly/\
             2m_temperature_and_surface_pressure/netcdf4",
        );
        std::fs::create_dir_all(&data).unwrap();
        let files = (0..FILES)
            .map(|f| data.join(format!("era5_sfc_{:04}.nc", 1979 + f)))
            .collect();
        Layout {
            refs: per_var * 2,
            rows,
            files,
        }
    }

    /// The file of `row` (consecutive rows share a file, like one file per year).
    fn file_of(&self, row: u64) -> usize {
        (row * FILES / self.rows) as usize
    }

    /// Visits every ref in file order: (variable, row, column, file, offset, length).
    fn for_each(&self, mut f: impl FnMut(u64, u64, u64, usize, u64, u64)) {
        let per_var = self.refs / 2;
        let mut offsets = vec![HEADER; self.files.len()];
        for row in 0..self.rows {
            let file = self.file_of(row);
            for (v, _) in VARS.iter().enumerate() {
                for col in 0..COLS {
                    let n = row * COLS + col;
                    if n >= per_var {
                        break;
                    }
                    let len = chunk_len(v as u64, n);
                    f(v as u64, row, col, file, offsets[file], len);
                    offsets[file] += len;
                }
            }
        }
    }

    /// Writes the reference file (and the sparse data files); returns its path.
    fn write(&self, dir: &Path) -> PathBuf {
        let path = dir.join("refs.json");
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        write!(
            out,
            r#"{{"version": 1, "refs": {{".zgroup": "{{\"zarr_format\": 2}}""#
        )
        .unwrap();
        for name in VARS {
            let zarray = serde_json::json!({"zarr_format": 2, "shape": [self.rows, COLS * 100],
                "chunks": [1, 100], "dtype": "<f4", "compressor": {"id": "zlib", "level": 4},
                "filters": null, "fill_value": 0.0, "order": "C"});
            let zattrs = serde_json::json!({"_ARRAY_DIMENSIONS": ["time", "cell"]});
            for (key, doc) in [(".zarray", zarray), (".zattrs", zattrs)] {
                let doc = serde_json::to_string(&doc.to_string()).unwrap();
                write!(out, r#", "{name}/{key}": {doc}"#).unwrap();
            }
        }
        let files: Vec<String> = self.files.iter().map(|p| p.display().to_string()).collect();
        let mut lines = Vec::new();
        self.for_each(|v, row, col, file, offset, len| {
            let name = VARS[v as usize];
            let url = &files[file];
            lines.clear();
            write!(
                lines,
                r#", "{name}/{row}.{col}": ["{url}", {offset}, {len}]"#
            )
            .unwrap();
            out.write_all(&lines).unwrap();
        });
        writeln!(out, "}}}}").unwrap();
        out.flush().unwrap();
        // Sparse data files, each as long as the chunks it holds.
        let mut sizes = vec![HEADER; self.files.len()];
        self.for_each(|_, _, _, file, offset, len| sizes[file] = offset + len);
        for (path, size) in self.files.iter().zip(sizes) {
            std::fs::File::create(path).unwrap().set_len(size).unwrap();
        }
        path
    }
}

/// A field of `/proc/self/status` in bytes (`VmHWM`: peak resident set, `VmRSS`).
fn status_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// CPU time (user + system) this process used so far, in seconds: a figure that
/// other processes on the machine disturb less than wall time.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses): utime and stime are
    // the 12th and 13th, in clock ticks (100 per second on Linux).
    let rest = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse().ok())
        .collect();
    fields.iter().sum::<u64>() as f64 / 100.0
}

/// Resets VmHWM to the current resident set (Linux `clear_refs` 5), so the next
/// phase's peak can be read on its own; false when the kernel refuses.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn mib(b: u64) -> f64 {
    b as f64 / f64::from(1 << 20)
}

fn main() {
    let refs = env_u64("FLOE_KERCHUNK_REFS").unwrap_or(1_000_000);
    let runs = env_u64("FLOE_KERCHUNK_RUNS").unwrap_or(1).max(1);
    let target = env_u64("FLOE_KERCHUNK_MAX_RSS_MIB")
        .map(|m| m << 20)
        .unwrap_or(if refs <= 1_000_000 { 1 << 30 } else { 2 << 30 });
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path(), refs);
    let t = Instant::now();
    let refs_file = layout.write(dir.path());
    let size = std::fs::metadata(&refs_file).unwrap().len();
    println!(
        "kerchunk_import: {} refs ({} arrays, {FILES} data files), reference file {:.0} MiB \
         written in {:.1} s",
        layout.refs,
        VARS.len(),
        mib(size),
        t.elapsed().as_secs_f64()
    );
    let mut peak = status_bytes("VmHWM:");
    for run in 0..runs {
        let repo_dir = dir.path().join(format!("repo{run}"));
        let can_reset = reset_peak();
        let (import, commit, import_peak, commit_peak, cpu) = rt.block_on(async {
            let storage = Arc::new(LocalStorage::new(&repo_dir).unwrap());
            let repo = Repository::create(storage, None).await.unwrap();
            let s = repo.writable_session("main").await.unwrap();
            let t = Instant::now();
            let cpu0 = cpu_seconds();
            let summary = import_kerchunk(&repo, &s, &refs_file, &NodePath::root(), None)
                .await
                .unwrap();
            let import = t.elapsed();
            let cpu1 = cpu_seconds();
            assert_eq!(summary.virtual_chunks, layout.refs);
            let import_peak = status_bytes("VmHWM:");
            let resident = status_bytes("VmRSS:");
            let reset = reset_peak();
            let t = Instant::now();
            let id = s.commit("import").await.unwrap();
            let commit = t.elapsed();
            let cpu = (cpu1 - cpu0, cpu_seconds() - cpu1);
            let commit_peak = status_bytes("VmHWM:");
            drop(s);
            println!(
                "  run {run}: resident after import {:.0} MiB{}",
                mib(resident),
                if reset { "" } else { " (VmHWM not resettable)" }
            );
            check_sample(&repo, &id, &layout).await;
            (import, commit, import_peak, commit_peak, cpu)
        });
        peak = peak.max(import_peak).max(commit_peak);
        println!(
            "  run {run}: import {:.1} s ({:.1} s CPU, peak {:.0} MiB), commit {:.1} s \
             ({:.1} s CPU, peak {:.0} MiB), total {:.1} s{}",
            import.as_secs_f64(),
            cpu.0,
            mib(import_peak),
            commit.as_secs_f64(),
            cpu.1,
            mib(commit_peak),
            (import + commit).as_secs_f64(),
            if can_reset { "" } else { " (peaks cumulative)" }
        );
        std::fs::remove_dir_all(&repo_dir).unwrap();
    }
    println!(
        "kerchunk_import: peak resident memory {:.0} MiB ({:.0} bytes per ref; target {:.0} MiB)",
        mib(peak),
        peak as f64 / layout.refs as f64,
        mib(target)
    );
    assert!(
        peak <= target,
        "peak resident memory {peak} bytes exceeds the target {target}"
    );
}

/// Checks a few committed refs against the layout.
async fn check_sample(repo: &Repository, id: &floe::format::SnapshotId, layout: &Layout) {
    let s = repo
        .readonly_session(&VersionSelector::Snapshot(*id))
        .await
        .unwrap();
    let per_var = layout.refs / 2;
    let want: Vec<u64> = [0, 1, per_var / 2, per_var - 1].to_vec();
    let mut expected = std::collections::HashMap::new();
    layout.for_each(|v, row, col, file, offset, len| {
        let n = row * COLS + col;
        if want.contains(&n) {
            expected.insert((v, n), (file, offset, len));
        }
    });
    for ((v, n), (file, offset, len)) in expected {
        let path = NodePath::new(&format!("/{}", VARS[v as usize])).unwrap();
        let r = s.get_chunk_ref(&path, &[n / COLS, n % COLS]).await.unwrap();
        let Some(ChunkPayload::Virtual(r)) = r else {
            panic!("chunk {n} of {path} is not virtual: {r:?}")
        };
        assert_eq!((r.offset, r.length), (offset, len));
        assert!(r
            .location
            .ends_with(&layout.files[file].display().to_string()));
    }
}
