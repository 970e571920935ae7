//! Fork sizes and merge times (issue: cooperative writers). A plain benchmark binary:
//! `cargo bench --bench forks` prints
//! - the serialized size and encode/decode time of a fork holding 10^6 native chunk
//!   refs (target < 64 MiB);
//! - the time to resume and merge 100 forks of 10^4 refs each into one session
//!   (target < 2 s), and the commit that follows.
//!
//! `FLOE_FORK_BENCH_REFS` scales the first (default 1,000,000); `FLOE_FORK_BENCH_FORKS`
//! the number of forks of the second (default 100).

use std::time::Instant;

use bytes::Bytes;
use floe::format::manifest::{ChunkPayload, NativeChunkRef};
use floe::format::{ChunkId, NodePath};
use floe::session::array_definition;
use floe::storage::new_in_memory_storage;
use floe::Repository;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn array_json(n: u64) -> Bytes {
    Bytes::from(
        serde_json::to_vec(&serde_json::json!({
            "zarr_format": 3, "node_type": "array", "shape": [n], "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0, "codecs": [{"name": "bytes"}], "attributes": {}
        }))
        .unwrap(),
    )
}

fn native(i: u64) -> Option<ChunkPayload> {
    Some(ChunkPayload::Native(NativeChunkRef {
        id: ChunkId::random(),
        offset: 0,
        length: 1_000_000 + i % 1000,
    }))
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let refs = env("FLOE_FORK_BENCH_REFS", 1_000_000) as u64;
        let forks = env("FLOE_FORK_BENCH_FORKS", 100) as u64;
        let per_fork = 10_000u64;
        let n = refs.max(forks * per_fork);
        let path = NodePath::new("/data").unwrap();
        let repo = Repository::create(new_in_memory_storage(), None).await.unwrap();
        let s = repo.writable_session("main").await.unwrap();
        s.add_array(&path, array_definition(&path, array_json(n)).unwrap())
            .unwrap();
        s.commit("array").await.unwrap();

        // 1. One fork with `refs` chunk refs.
        let fork = s.fork().await.unwrap();
        fork.set_chunk_refs(&path, (0..refs).map(|i| (vec![i], native(i))))
            .unwrap();
        let t = Instant::now();
        let bytes = fork.to_fork_bytes().await.unwrap();
        let encode = t.elapsed();
        let t = Instant::now();
        let back = repo.fork_from_bytes(&bytes).await.unwrap();
        let decode = t.elapsed();
        assert_eq!(back.change_set().num_chunk_changes() as u64, refs);
        println!(
            "fork with {refs} chunk refs: {:.1} MiB serialized ({:.1} bytes/ref), encode {:.0} ms, decode {:.0} ms",
            bytes.len() as f64 / (1 << 20) as f64,
            bytes.len() as f64 / refs as f64,
            encode.as_secs_f64() * 1e3,
            decode.as_secs_f64() * 1e3
        );

        // 2. `forks` forks of 10^4 refs each, serialized as workers would return them.
        let base = s.fork().await.unwrap().to_fork_bytes().await.unwrap();
        let mut returned = Vec::new();
        for f in 0..forks {
            let w = repo.fork_from_bytes(&base).await.unwrap();
            let start = f * per_fork;
            w.set_chunk_refs(
                &path,
                (start..start + per_fork).map(|i| (vec![i], native(i))),
            )
            .unwrap();
            returned.push(w.to_fork_bytes().await.unwrap());
        }
        let t = Instant::now();
        let mut sessions = Vec::new();
        for b in &returned {
            sessions.push(repo.fork_from_bytes(b).await.unwrap());
        }
        let resumed = t.elapsed();
        let t = Instant::now();
        s.merge(sessions).await.unwrap();
        let merged = t.elapsed();
        assert_eq!(s.change_set().num_chunk_changes() as u64, forks * per_fork);
        let t = Instant::now();
        s.commit("merged").await.unwrap();
        let committed = t.elapsed();
        println!(
            "{forks} forks x {per_fork} refs: resume {:.0} ms + merge {:.0} ms = {:.0} ms; commit of the {} refs {:.0} ms",
            resumed.as_secs_f64() * 1e3,
            merged.as_secs_f64() * 1e3,
            (resumed + merged).as_secs_f64() * 1e3,
            forks * per_fork,
            committed.as_secs_f64() * 1e3
        );
    });
}
