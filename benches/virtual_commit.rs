//! One commit of very many virtual chunk refs (issue 48: "a commit of 10^8 virtual
//! refs completes"; Icechunk panics committing 7.2·10^7 at once, earth-mover/icechunk
//! #1558, and used more than 100 GB for 10^8, #401). A plain benchmark binary:
//! `cargo bench --bench virtual_commit` prints, for each phase, its wall time and the
//! process's resident set after it and at its peak so far (`VmRSS` / `VmHWM`, Linux):
//! 1. the refs set through [`floe::Session::set_chunk_refs`] in batches of 10^5, as an
//!    importer does (a 2-D array of `refs / 1000` × 1,000 chunks; every 1,000 refs
//!    share one source file, `file:///archive/fNNNNNN.nc`);
//! 2. the commit, to a repository on local disk;
//! 3. a fresh open and a read of 100 refs spread over the array, checked.
//!
//! `FLOE_VREFS` sets the number of refs (default 100,000,000, rounded down to a
//! multiple of 1,000); `FLOE_VREFS_DIR` keeps the repository in a directory of your
//! choice (it must not exist yet), otherwise a temporary directory is used.

use std::time::Instant;

use bytes::Bytes;
use floe::format::manifest::{ChunkPayload, VirtualChunkRef};
use floe::format::NodePath;
use floe::repository::VersionSelector;
use floe::session::array_definition;
use floe::storage::LocalStorage;
use floe::Repository;

const COLS: u64 = 1_000;
const BATCH_ROWS: u64 = 100;

fn status(field: &str) -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn report(phase: &str, t: Instant) {
    println!(
        "{phase}: {:.1} s, resident {:.0} MiB, peak {:.0} MiB",
        t.elapsed().as_secs_f64(),
        status("VmRSS:"),
        status("VmHWM:")
    );
}

fn vref(row: u64, col: u64) -> ChunkPayload {
    ChunkPayload::Virtual(VirtualChunkRef {
        location: format!("file:///archive/f{row:06}.nc"),
        offset: col * 4096,
        length: 4096,
        checksum: None,
    })
}

fn main() {
    let refs: u64 = std::env::var("FLOE_VREFS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000_000);
    let rows = (refs / COLS).max(1);
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::env::var("FLOE_VREFS_DIR").map_or_else(|_| tmp.path().join("repo"), Into::into);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let path = NodePath::new("/big").unwrap();
        let json = serde_json::json!({
            "zarr_format": 3, "node_type": "array", "shape": [rows, COLS * 1024],
            "data_type": "float32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1, 1024]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0.0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "attributes": {}
        });
        let storage = LocalStorage::new(&dir).unwrap();
        let repo = Repository::create(std::sync::Arc::new(storage), None)
            .await
            .unwrap();
        let s = repo.writable_session("main").await.unwrap();
        s.add_array(
            &path,
            array_definition(&path, Bytes::from(serde_json::to_vec(&json).unwrap())).unwrap(),
        )
        .unwrap();
        println!("{} virtual refs ({rows} x {COLS} chunks)", rows * COLS);
        let t = Instant::now();
        for first in (0..rows).step_by(BATCH_ROWS as usize) {
            let last = (first + BATCH_ROWS).min(rows);
            s.set_chunk_refs(
                &path,
                (first..last).flat_map(|r| (0..COLS).map(move |c| (vec![r, c], Some(vref(r, c))))),
            )
            .unwrap();
        }
        report("set_chunk_refs", t);
        let t = Instant::now();
        let id = s.commit("virtual refs").await.unwrap();
        report("commit", t);
        drop(s);
        let manifests = std::fs::read_dir(dir.join("manifests")).map_or(0, Iterator::count);
        println!("snapshot {id}, {manifests} manifests");

        let t = Instant::now();
        let storage = LocalStorage::new(&dir).unwrap();
        let repo = Repository::open(std::sync::Arc::new(storage))
            .await
            .unwrap();
        let r = repo
            .readonly_session(&VersionSelector::Branch("main".into()))
            .await
            .unwrap();
        for k in 0..100u64 {
            let (row, col) = (k * 7919 % rows, k * 104_729 % COLS);
            let got = r.get_chunk_ref(&path, &[row, col]).await.unwrap();
            assert_eq!(got, Some(vref(row, col)), "ref ({row}, {col})");
        }
        report("open and read 100 refs", t);
    });
}
