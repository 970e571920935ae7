//! Compression: the configured zstd level of the files commits write.

use std::sync::Arc;

use crate::common::fixture::{keys, Fixture};
use crate::common::p;
use floe::format::manifest::ChunkPayload;
use floe::storage::new_in_memory_storage;
use floe::VersionSelector;

/// The config's `compression.level` is the zstd level commits write their files at:
/// the same commit at level 19 makes a smaller manifest and transaction log than at
/// level 1 (they hold the same bytes), and both read back alike. Without a level,
/// manifests and transaction logs are written at level 1 (`BULK_DEFAULT_LEVEL`).
#[tokio::test]
async fn commits_write_files_at_the_configured_compression_level() {
    use floe::format::config::RepositoryConfig;
    use floe::format::manifest::NativeChunkRef;
    use floe::format::ChunkId;

    async fn sizes(level: Option<u8>) -> (usize, usize, u64) {
        let storage = new_in_memory_storage();
        let mut config = RepositoryConfig::default();
        config.set_compression_level(level);
        let Fixture {
            repo, session: s, ..
        } = Fixture::on(Arc::clone(&storage), Some(config))
            .await
            .with_u8_array("/a", 20_000);
        assert_eq!(repo.config().compression_level(), level.map(i32::from));
        // The same chunk id everywhere, and in every run (a random one moved the
        // manifest's compressed size past the tolerance below now and then): the
        // files compress well, and differently by level.
        let id = ChunkId::new([0x5a; 12]);
        s.set_chunk_refs(
            &p("/a"),
            (0..20_000u64).map(|i| {
                let r = NativeChunkRef {
                    id,
                    offset: i * 7,
                    length: 7,
                };
                (vec![i], Some(ChunkPayload::Native(r)))
            }),
        )
        .unwrap();
        let snap = s.commit("refs").await.unwrap();
        let r = repo
            .readonly_session(&VersionSelector::Snapshot(snap))
            .await
            .unwrap();
        let back = r.get_chunk_ref(&p("/a"), &[19_999]).await.unwrap();
        let Some(ChunkPayload::Native(n)) = back else {
            panic!("{back:?}")
        };
        let size_of = |prefix: String| {
            let storage = Arc::clone(&storage);
            async move {
                let key = keys(storage.as_ref())
                    .await
                    .into_iter()
                    .find(|k| k.starts_with(&prefix))
                    .unwrap();
                storage.get(&key).await.unwrap().bytes.len()
            }
        };
        (
            size_of("manifests/".into()).await,
            size_of(format!("transactions/{snap}")).await,
            n.offset,
        )
    }
    let (m1, t1, o1) = sizes(Some(1)).await;
    let (m19, t19, o19) = sizes(Some(19)).await;
    assert_eq!((o1, o19), (19_999 * 7, 19_999 * 7));
    assert!(m19 < m1, "manifest: level 19 {m19} bytes, level 1 {m1}");
    assert!(
        t19 < t1,
        "transaction log: level 19 {t19} bytes, level 1 {t1}"
    );
    let (m3, t3, _) = sizes(Some(3)).await;
    let (m, t, _) = sizes(None).await;
    // The files hold random ids (of the manifest, the node, the snapshot), whose
    // bytes change the entropy coding by a few bytes from run to run; the levels
    // differ by ~370 (transaction log) and ~1,600 (manifest).
    let near = |a: usize, b: usize| a.abs_diff(b) <= 64;
    assert!(m19 < m3 && !near(m3, m1), "level 3: {m3} bytes");
    assert!(!near(t3, t1), "level 3: {t3} bytes");
    assert!(near(m, m1) && near(t, t1), "default: {m}, {t} bytes");
}
