//! Kerchunk import on synthetic reference sets: Zarr v2 metadata translated to v3,
//! virtual and inline chunk refs, F order, zlib, scalar arrays, subgroups, templates.

use crate::common;
use std::io::Write;
use std::sync::Arc;

use crate::common::p;
use base64::Engine;
use floe::ops::import_kerchunk;
use floe::storage::LocalStorage;
use floe::virtual_refs::VirtualAccess;
use floe::zarr::{Array, ArraySubset, Store};
use floe::{Error, OpenOptions, Repository, VersionSelector};
use serde_json::json;

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn le_i32(vals: impl IntoIterator<Item = i32>) -> Vec<u8> {
    vals.into_iter().flat_map(i32::to_le_bytes).collect()
}

struct Fixture {
    dir: tempfile::TempDir,
    refs: std::path::PathBuf,
    source: std::path::PathBuf,
}

/// A data file holding chunks of two arrays, and references to it.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("data").join("source.bin");
    std::fs::create_dir_all(source.parent().unwrap()).unwrap();
    let mut file = Vec::new();
    let mut refs = serde_json::Map::new();
    refs.insert(".zgroup".into(), json!(r#"{"zarr_format": 2}"#));
    refs.insert(".zattrs".into(), json!(r#"{"title": "synthetic"}"#));
    // temp: 4 x 6 int32 in 2 x 3 chunks, C order, no compressor; value = 10 * row + col.
    refs.insert(
        "temp/.zarray".into(),
        json!(
            json!({"zarr_format": 2, "shape": [4, 6], "chunks": [2, 3], "dtype": "<i4",
            "compressor": null, "filters": null, "fill_value": -1, "order": "C"})
            .to_string()
        ),
    );
    refs.insert(
        "temp/.zattrs".into(),
        json!(r#"{"_ARRAY_DIMENSIONS": ["y", "x"], "units": "K"}"#),
    );
    for ci in 0..2 {
        for cj in 0..2 {
            if (ci, cj) == (1, 1) {
                continue; // never written: reads as the fill value
            }
            let mut vals = Vec::new();
            for r in 0..2 {
                for c in 0..3 {
                    vals.push(10 * (ci * 2 + r) + cj * 3 + c);
                }
            }
            let bytes = le_i32(vals);
            let offset = file.len();
            file.extend_from_slice(&bytes);
            refs.insert(
                format!("temp/{ci}.{cj}"),
                json!([source.display().to_string(), offset, bytes.len()]),
            );
        }
    }
    // sub/f: 3 x 2 int32, F order, zlib, one chunk.
    refs.insert("sub/.zgroup".into(), json!(r#"{"zarr_format": 2}"#));
    refs.insert(
        "sub/f/.zarray".into(),
        json!(json!({"zarr_format": 2, "shape": [3, 2], "chunks": [3, 2], "dtype": "<i4",
            "compressor": {"id": "zlib", "level": 1}, "filters": null, "fill_value": 0, "order": "F"}).to_string()),
    );
    // Column-major memory of [[0,1],[2,3],[4,5]]: 0,2,4,1,3,5.
    let f_bytes = zlib(&le_i32([0, 2, 4, 1, 3, 5]));
    let offset = file.len();
    file.extend_from_slice(&f_bytes);
    refs.insert(
        "sub/f/0.0".into(),
        json!(["{{base}}/source.bin", offset, f_bytes.len()]),
    );
    // s: a scalar stored inline as base64.
    refs.insert(
        "s/.zarray".into(),
        json!(
            json!({"zarr_format": 2, "shape": [], "chunks": [], "dtype": "<f8",
            "compressor": null, "filters": null, "fill_value": "NaN", "order": "C"})
            .to_string()
        ),
    );
    refs.insert(
        "s/0".into(),
        json!(format!(
            "base64:{}",
            base64::engine::general_purpose::STANDARD.encode(2.5f64.to_le_bytes())
        )),
    );
    std::fs::write(&source, &file).unwrap();
    let doc = json!({
        "version": 1,
        "templates": {"base": format!("file://{}", source.parent().unwrap().display())},
        "refs": refs,
    });
    let refs_path = dir.path().join("refs.json");
    std::fs::write(&refs_path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    Fixture {
        dir,
        refs: refs_path,
        source,
    }
}

/// A new repository on local disk at `repo_dir`, with a writable session on `main`.
async fn new_repo(repo_dir: &std::path::Path) -> (Repository, floe::Session) {
    let repo = Repository::create(Arc::new(LocalStorage::new(repo_dir).unwrap()), None)
        .await
        .unwrap();
    let s = repo.writable_session("main").await.unwrap();
    (repo, s)
}

async fn import(f: &Fixture, dest: &str) -> Repository {
    let (repo, s) = new_repo(&f.dir.path().join("repo")).await;
    let summary = import_kerchunk(&repo, &s, &f.refs, &p(dest), None)
        .await
        .unwrap();
    assert_eq!(summary.arrays, 3);
    assert_eq!(summary.virtual_chunks, 4);
    assert_eq!(summary.inline_chunks, 1);
    assert_eq!(
        summary.containers_added,
        vec![format!("file://{}/", f.source.parent().unwrap().display())]
    );
    s.commit("import").await.unwrap();
    repo
}

async fn reader(f: &Fixture, authorize: bool) -> Arc<dyn Store> {
    let prefixes = if authorize {
        vec![format!("file://{}/", f.source.parent().unwrap().display())]
    } else {
        vec![]
    };
    common::main_store(&f.dir.path().join("repo"), &prefixes).await
}

#[tokio::test]
async fn imports_metadata_and_chunks_and_reads_values() {
    let f = fixture();
    import(&f, "/").await;
    let store = reader(&f, true).await;
    let root = String::from_utf8(store.get("zarr.json").await.unwrap().unwrap().to_vec()).unwrap();
    assert!(root.contains("synthetic"), "{root}");
    let temp = Array::open(Arc::clone(&store), "temp").await.unwrap();
    assert_eq!(temp.shape(), &[4, 6]);
    assert_eq!(
        temp.dimension_names().unwrap(),
        &[Some("y".to_string()), Some("x".to_string())]
    );
    assert_eq!(temp.attributes().get("units"), Some(&json!("K")));
    assert!(temp.attributes().get("_ARRAY_DIMENSIONS").is_none());
    let vals: Vec<i32> = temp.read_all().await.unwrap();
    let mut expect = Vec::new();
    for r in 0..4 {
        for c in 0..6 {
            expect.push(if r >= 2 && c >= 3 { -1 } else { 10 * r + c });
        }
    }
    assert_eq!(vals, expect);
    let f_arr = Array::open(Arc::clone(&store), "sub/f").await.unwrap();
    assert_eq!(
        f_arr.read_all::<i32>().await.unwrap(),
        vec![0, 1, 2, 3, 4, 5]
    );
    let s = Array::open(Arc::clone(&store), "s").await.unwrap();
    assert_eq!(
        s.read_region::<f64>(&ArraySubset::full(&[])).await.unwrap(),
        vec![2.5]
    );
}

#[tokio::test]
async fn imports_under_a_path_and_refuses_unauthorized_reads() {
    let f = fixture();
    let repo = import(&f, "/imported/run1").await;
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    let paths: Vec<String> = r
        .list_nodes()
        .unwrap()
        .into_iter()
        .map(|n| n.path.to_string())
        .collect();
    assert_eq!(
        paths,
        [
            "/",
            "/imported",
            "/imported/run1",
            "/imported/run1/s",
            "/imported/run1/sub",
            "/imported/run1/sub/f",
            "/imported/run1/temp"
        ]
    );
    // Without authorization, a virtual chunk read is an error, not fill values.
    let store = reader(&f, false).await;
    let temp = Array::open(Arc::clone(&store), "imported/run1/temp")
        .await
        .unwrap();
    let err = temp.read_all::<i32>().await.unwrap_err().to_string();
    assert!(err.contains("not authorized"), "{err}");
}

#[tokio::test]
async fn modified_sources_fail_with_a_checksum_error() {
    let f = fixture();
    import(&f, "/").await;
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(10);
    let file = std::fs::File::options()
        .write(true)
        .open(&f.source)
        .unwrap();
    file.set_modified(later).unwrap();
    drop(file);
    let store = reader(&f, true).await;
    let err = common::read_error(&store, "temp").await;
    assert!(
        err.contains("checksum mismatch") && err.contains("source.bin"),
        "{err}"
    );
}

#[tokio::test]
async fn missing_sources_are_import_errors() {
    let f = fixture();
    std::fs::remove_file(&f.source).unwrap();
    let storage = Arc::new(LocalStorage::new(&f.dir.path().join("repo")).unwrap());
    let repo = Repository::create(storage, None).await.unwrap();
    let s = repo.writable_session("main").await.unwrap();
    let err = import_kerchunk(&repo, &s, &f.refs, &p("/"), None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::VirtualChunk { .. }), "{err}");
}

#[tokio::test]
async fn metadata_that_is_not_inline_data_is_an_error() {
    // In `refs` (read with the header) and made by `gen` (read with the chunks).
    let dir = tempfile::tempdir().unwrap();
    let refs = dir.path().join("refs.json");
    for doc in [
        json!({"version": 1, "refs": {".zgroup": ["/data/x.nc", 0, 10]}}),
        json!({"version": 1, "refs": {".zgroup": r#"{"zarr_format": 2}"#},
               "gen": [{"key": "g{{i}}/.zgroup", "url": "/data/x.nc",
                        "dimensions": {"i": {"stop": 2}}}]}),
    ] {
        std::fs::write(&refs, serde_json::to_vec(&doc).unwrap()).unwrap();
        let storage = floe::storage::new_in_memory_storage();
        let repo = Repository::create(storage, None).await.unwrap();
        let s = repo.writable_session("main").await.unwrap();
        let err = import_kerchunk(&repo, &s, &refs, &p("/"), None)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("metadata must be inline data"),
            "{doc}: {err}"
        );
    }
}

#[tokio::test]
async fn large_generated_reference_sets_import_with_progress() {
    // 50,000 refs from one `gen` entry (a 250 x 200 chunk grid), each 4 bytes of a file.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("big.bin");
    let values: Vec<i32> = (0..50_000).collect();
    std::fs::write(&data, le_i32(values.iter().copied())).unwrap();
    let doc = json!({
        "version": 1,
        "templates": {"f": data.display().to_string()},
        "refs": {
            ".zgroup": r#"{"zarr_format": 2}"#,
            "v/.zarray": json!({"zarr_format": 2, "shape": [250, 200], "chunks": [1, 1], "dtype": "<i4",
                "compressor": null, "filters": null, "fill_value": 0, "order": "C"}).to_string(),
        },
        "gen": [{"key": "v/{{i}}.{{j}}", "url": "{{f}}", "offset": "{{(i * 200 + j) * 4}}", "length": "4",
                 "dimensions": {"i": {"stop": 250}, "j": {"stop": 200}}}],
    });
    let refs = dir.path().join("refs.json");
    std::fs::write(&refs, serde_json::to_vec(&doc).unwrap()).unwrap();
    let repo_dir = dir.path().join("repo");
    let (repo, s) = new_repo(&repo_dir).await;
    let seen = std::sync::Mutex::new(Vec::new());
    let progress = |done: u64, total: u64| seen.lock().unwrap().push((done, total));
    let summary = import_kerchunk(&repo, &s, &refs, &p("/"), Some(&progress))
        .await
        .unwrap();
    assert_eq!(summary.virtual_chunks, 50_000);
    let seen = seen.into_inner().unwrap();
    assert!(seen.len() > 1, "progress is reported along the way");
    assert!(
        seen.windows(2).all(|w| w[0].0 <= w[1].0),
        "progress only grows"
    );
    assert_eq!(seen.last(), Some(&(50_000, 50_000)));
    s.commit("50k refs").await.unwrap();

    let prefix = format!("file://{}/", dir.path().display());
    let opts = OpenOptions::default().virtual_access(VirtualAccess::prefixes([prefix]).unwrap());
    let repo = Repository::open_with(Arc::new(LocalStorage::new(&repo_dir).unwrap()), opts)
        .await
        .unwrap();
    let r = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    let v = Array::open(Arc::new(r.store()), "v").await.unwrap();
    let region: Vec<i32> = v
        .read_region(&ArraySubset::new(vec![100, 50], vec![3, 4]))
        .await
        .unwrap();
    let want: Vec<i32> = (100..103)
        .flat_map(|i| (50..54).map(move |j| i * 200 + j))
        .collect();
    assert_eq!(region, want);
    assert_eq!(r.list_chunks(&p("/v")).await.unwrap().len(), 50_000);
}

#[tokio::test]
async fn local_sources_get_a_last_modified_checksum_rounded_up() {
    // Icechunk reads with If-Unmodified-Since the recorded second: a truncated time
    // would reject every file whose mtime has a fraction of a second.
    let f = fixture();
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_250);
    std::fs::File::options()
        .write(true)
        .open(&f.source)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let repo = import(&f, "/").await;
    let s = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    let refs = s.chunk_refs(&p("/temp")).await.unwrap();
    assert!(!refs.is_empty());
    for (idx, payload) in refs {
        match payload {
            floe::format::manifest::ChunkPayload::Virtual(v) => assert_eq!(
                v.checksum,
                Some(floe::format::manifest::Checksum::LastModified(
                    1_700_000_001
                )),
                "chunk {idx:?}"
            ),
            other => panic!("chunk {idx:?} is not virtual: {other:?}"),
        }
    }
}

#[tokio::test]
async fn http_sources_import_and_read_by_range() {
    // The S3 test server also answers plain HTTP GETs (path-style URLs) with ranges.
    let Some(base) = common::s3_url("http-source") else {
        return;
    };
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
    let (bucket, key_prefix) = base.trim_start_matches("s3://").split_once('/').unwrap();
    let data: Vec<u8> = le_i32(0..24);
    let storage = floe::storage::create_storage(&base, None).unwrap();
    storage
        .put("data.bin", bytes::Bytes::from(data))
        .await
        .unwrap();
    let url = format!("{endpoint}/{bucket}/{key_prefix}/data.bin");
    let mut refs = serde_json::Map::new();
    refs.insert(".zgroup".into(), json!(r#"{"zarr_format": 2}"#));
    refs.insert(
        "v/.zarray".into(),
        json!(
            json!({"zarr_format": 2, "shape": [24], "chunks": [6], "dtype": "<i4",
            "compressor": null, "filters": null, "fill_value": 0, "order": "C"})
            .to_string()
        ),
    );
    for c in 0..4 {
        refs.insert(format!("v/{c}"), json!([url, c * 24, 24]));
    }
    let dir = tempfile::tempdir().unwrap();
    let refs_path = dir.path().join("refs.json");
    std::fs::write(
        &refs_path,
        serde_json::to_vec(&json!({"version": 1, "refs": refs})).unwrap(),
    )
    .unwrap();
    let repo_dir = dir.path().join("repo");
    let (repo, s) = new_repo(&repo_dir).await;
    let summary = import_kerchunk(&repo, &s, &refs_path, &p("/"), None)
        .await
        .unwrap();
    assert_eq!(summary.virtual_chunks, 4);
    assert_eq!(summary.containers_added, vec![format!("{endpoint}/")]);
    s.commit("http refs").await.unwrap();
    let store = common::main_store(&repo_dir, &[format!("{endpoint}/{bucket}/")]).await;
    let v = Array::open(Arc::clone(&store), "v").await.unwrap();
    assert_eq!(
        v.read_all::<i32>().await.unwrap(),
        (0..24).collect::<Vec<i32>>()
    );
    let refused = common::main_store(&repo_dir, &[format!("{endpoint}/other-bucket/")]).await;
    assert!(common::read_error(&refused, "v")
        .await
        .contains("not authorized"));
}

#[tokio::test]
async fn shared_locations_read_back_as_imported_before_and_after_commit() {
    use floe::format::manifest::{Checksum, ChunkPayload, VirtualChunkRef};
    use std::collections::BTreeMap;
    // Two arrays (2,000 and 1,200 chunks) of one zlib-compressed int32 each, stored
    // with gaps in three data files with long paths; the refs of both arrays
    // interleave, out of index order.
    let dir = tempfile::tempdir().unwrap();
    let data = dir
        .path()
        .join("archive/some/long/prefix/of/a/netcdf/collection");
    std::fs::create_dir_all(&data).unwrap();
    let files: Vec<std::path::PathBuf> = (0..3)
        .map(|i| data.join(format!("file_{i:04}.nc")))
        .collect();
    let mut contents = vec![Vec::new(); files.len()];
    let mut refs = serde_json::Map::new();
    refs.insert(".zgroup".into(), json!(r#"{"zarr_format": 2}"#));
    let mut entries = Vec::new();
    let mut expected: BTreeMap<(&str, Vec<u64>), (usize, u64, u64)> = BTreeMap::new();
    let value = |name: &str, i: u64, j: u64| {
        let v = (i * 1000 + j) as i32;
        if name == "a" {
            v
        } else {
            -v
        }
    };
    for (name, rows, cols) in [("a", 40u64, 50u64), ("b", 30, 40)] {
        refs.insert(
            format!("{name}/.zarray"),
            json!(
                json!({"zarr_format": 2, "shape": [rows, cols], "chunks": [1, 1],
                "dtype": "<i4", "compressor": {"id": "zlib", "level": 1}, "filters": null,
                "fill_value": 0, "order": "C"})
                .to_string()
            ),
        );
        for i in 0..rows {
            for j in 0..cols {
                let bytes = zlib(&le_i32([value(name, i, j)]));
                let f = ((i + j) % 3) as usize;
                let gap = ((i * 7 + j * 13) % 50) as usize;
                let end = contents[f].len() + gap;
                contents[f].resize(end, 0);
                let offset = contents[f].len() as u64;
                contents[f].extend_from_slice(&bytes);
                entries.push((
                    format!("{name}/{i}.{j}"),
                    json!([files[f].display().to_string(), offset, bytes.len()]),
                ));
                expected.insert((name, vec![i, j]), (f, offset, bytes.len() as u64));
            }
        }
    }
    let n = entries.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&k| k * 7919 % n);
    for k in order {
        refs.insert(entries[k].0.clone(), entries[k].1.clone());
    }
    for (i, (path, bytes)) in files.iter().zip(&contents).enumerate() {
        std::fs::write(path, bytes).unwrap();
        let mtime = std::time::UNIX_EPOCH
            + std::time::Duration::from_millis(1_700_000_000_250 + 1000 * i as u64);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
    }
    let refs_path = dir.path().join("refs.json");
    let doc = json!({"version": 1, "refs": refs});
    std::fs::write(&refs_path, serde_json::to_vec(&doc).unwrap()).unwrap();

    let repo_dir = dir.path().join("repo");
    let (repo, s) = new_repo(&repo_dir).await;
    let summary = import_kerchunk(&repo, &s, &refs_path, &p("/"), None)
        .await
        .unwrap();
    assert_eq!(summary.virtual_chunks, 3200);
    assert_eq!(
        summary.containers_added,
        vec![format!("file://{}/", data.display())]
    );
    let want = |name: &str| -> Vec<(Vec<u64>, ChunkPayload)> {
        expected
            .iter()
            .filter(|((n, _), _)| *n == name)
            .map(|((_, idx), &(f, offset, length))| {
                let v = VirtualChunkRef {
                    location: format!("file://{}", files[f].display()),
                    offset,
                    length,
                    checksum: Some(Checksum::LastModified(1_700_000_001 + f as u32)),
                };
                (idx.clone(), ChunkPayload::Virtual(v))
            })
            .collect()
    };
    for name in ["a", "b"] {
        let path = p(&format!("/{name}"));
        assert_eq!(
            s.chunk_refs(&path).await.unwrap(),
            want(name),
            "uncommitted {name}"
        );
    }
    let id = s.commit("import").await.unwrap();

    let prefix = format!("file://{}/", data.display());
    let opts = OpenOptions::default().virtual_access(VirtualAccess::prefixes([prefix]).unwrap());
    let repo = Repository::open_with(Arc::new(LocalStorage::new(&repo_dir).unwrap()), opts)
        .await
        .unwrap();
    let r = repo
        .readonly_session(&VersionSelector::Snapshot(id))
        .await
        .unwrap();
    for (name, rows, cols) in [("a", 40u64, 50u64), ("b", 30, 40)] {
        let path = p(&format!("/{name}"));
        assert_eq!(
            r.chunk_refs(&path).await.unwrap(),
            want(name),
            "committed {name}"
        );
        let array = Array::open(Arc::new(r.store()), name).await.unwrap();
        let all: Vec<i32> = array
            .read_region(&ArraySubset::new(vec![0, 0], vec![rows, cols]))
            .await
            .unwrap();
        let values: Vec<i32> = (0..rows)
            .flat_map(|i| (0..cols).map(move |j| value(name, i, j)))
            .collect();
        assert_eq!(all, values, "values of {name}");
    }
}
