//! Manifests per array: arrays untouched by a commit keep their manifests, large
//! arrays are split into several, and a commit rewrites only the changed ones.

use crate::common::fixture::Fixture;
use crate::common::{array_def, p};
use bytes::Bytes;
use floe::format::manifest::ChunkPayload;
use floe::format::snapshot::Snapshot;
use floe::VersionSelector;

#[tokio::test]
async fn untouched_arrays_reuse_their_manifests() {
    let Fixture {
        repo, session: s, ..
    } = Fixture::in_memory().await;
    for name in ["a", "b"] {
        let path = format!("/{name}");
        s.add_array(&p(&path), array_def(&path, &[4], &[1], "uint8"))
            .unwrap();
        for i in 0..4 {
            s.set_chunk(&p(&path), &[i], Bytes::from(vec![i as u8]))
                .await
                .unwrap();
        }
    }
    let first = s.commit("two arrays").await.unwrap();
    s.set_chunk(&p("/a"), &[0], Bytes::from_static(b"\xff"))
        .await
        .unwrap();
    let second = s.commit("touch a").await.unwrap();
    let s1 = repo.assets().fetch_snapshot(&first).await.unwrap();
    let s2 = repo.assets().fetch_snapshot(&second).await.unwrap();
    let m = |s: &Snapshot, path: &str| s.nodes[&p(path)].array().unwrap().manifests.clone();
    assert_eq!(m(&s1, "/b"), m(&s2, "/b"), "b's manifest is reused");
    assert_ne!(m(&s1, "/a"), m(&s2, "/a"), "a gets a new manifest");
    assert_eq!(s2.manifest_files.len(), 2);
    let r = repo
        .readonly_session(&VersionSelector::Snapshot(second))
        .await
        .unwrap();
    assert_eq!(
        r.get_chunk(&p("/a"), &[0], None).await.unwrap().unwrap()[..],
        [0xff]
    );
    assert_eq!(
        r.get_chunk(&p("/b"), &[3], None).await.unwrap().unwrap()[..],
        [3]
    );
}

#[tokio::test]
async fn large_arrays_are_split_into_manifests_and_commits_rewrite_only_changed_ones() {
    use floe::session::MAX_REFS_PER_MANIFEST;
    let n = 2 * MAX_REFS_PER_MANIFEST + 10;
    let Fixture {
        repo, session: s, ..
    } = Fixture::in_memory()
        .await
        .with_u8_array("/big", n)
        .with_u8_array("/small", 4);
    let refs = (0..n).map(|i| {
        (
            vec![i],
            Some(ChunkPayload::Inline(Bytes::from(vec![(i % 251) as u8]))),
        )
    });
    s.set_chunk_refs(&p("/big"), refs).unwrap();
    s.set_chunk(&p("/small"), &[0], Bytes::from_static(b"\x01"))
        .await
        .unwrap();
    let first = s.commit("big").await.unwrap();
    let snap1 = repo.assets().fetch_snapshot(&first).await.unwrap();
    let m1 = snap1.nodes[&p("/big")].array().unwrap().manifests.clone();
    assert_eq!(m1.len(), 3, "{m1:?}");
    assert!(snap1
        .manifest_files
        .iter()
        .all(|f| u64::from(f.num_chunk_refs) <= MAX_REFS_PER_MANIFEST));

    // One chunk in the middle block: only that block's manifest is rewritten.
    let mid = MAX_REFS_PER_MANIFEST as u32 + 5;
    s.set_chunk(&p("/big"), &[mid.into()], Bytes::from_static(b"\xee"))
        .await
        .unwrap();
    let second = s.commit("one chunk").await.unwrap();
    let snap2 = repo.assets().fetch_snapshot(&second).await.unwrap();
    let m2 = snap2.nodes[&p("/big")].array().unwrap().manifests.clone();
    assert_eq!(m2.len(), 3);
    let kept = m2.iter().filter(|m| m1.contains(m)).count();
    assert_eq!(kept, 2, "two of three manifests are reused");
    assert_eq!(
        snap2.nodes[&p("/small")].array().unwrap().manifests,
        snap1.nodes[&p("/small")].array().unwrap().manifests
    );

    let r = repo
        .readonly_session(&VersionSelector::Snapshot(second))
        .await
        .unwrap();
    for i in [0u32, mid - 1, mid, mid + 1, n as u32 - 1] {
        let want = if i == mid { 0xee } else { (i % 251) as u8 };
        assert_eq!(
            r.get_chunk(&p("/big"), &[i.into()], None)
                .await
                .unwrap()
                .unwrap()[..],
            [want],
            "chunk {i}"
        );
    }
    assert_eq!(r.list_chunks(&p("/big")).await.unwrap().len() as u64, n);

    // Shrinking the array rewrites and drops refs outside the new shape.
    s.update_array(&p("/big"), array_def("/big", &[10], &[1], "uint8"))
        .unwrap();
    let third = s.commit("shrink").await.unwrap();
    let r = repo
        .readonly_session(&VersionSelector::Snapshot(third))
        .await
        .unwrap();
    assert_eq!(r.list_chunks(&p("/big")).await.unwrap().len(), 10);
    let snap3 = repo.assets().fetch_snapshot(&third).await.unwrap();
    assert_eq!(snap3.nodes[&p("/big")].array().unwrap().manifests.len(), 1);
}

#[tokio::test]
async fn rewrite_manifests_applies_the_current_splitting_and_keeps_the_refs() {
    use floe::format::config::{
        ManifestConfig, ManifestSplitCondition, ManifestSplitDim, ManifestSplitDimCondition,
        ManifestSplittingConfig, RepositoryConfig,
    };
    let Fixture {
        repo, session: s, ..
    } = Fixture::in_memory().await.with_u8_array("/a", 6);
    for i in 0..6u64 {
        s.set_chunk(&p("/a"), &[i], Bytes::from(vec![i as u8]))
            .await
            .unwrap();
    }
    let first = s.commit("one manifest").await.unwrap();
    let mut config = RepositoryConfig::default();
    let splitting = ManifestSplittingConfig {
        split_sizes: Some(vec![(
            ManifestSplitCondition::AnyArray,
            vec![ManifestSplitDim {
                condition: ManifestSplitDimCondition::Any,
                num_chunks: 2,
            }],
        )]),
    };
    config
        .set_manifest(Some(&ManifestConfig {
            splitting: Some(splitting),
            ..ManifestConfig::default()
        }))
        .unwrap();
    let split = repo.reopen(Some(&config)).unwrap();
    let w = split.writable_session("main").await.unwrap();
    let id = w
        .rewrite_manifests("split", Default::default(), false)
        .await
        .unwrap();
    let snap = repo.assets().fetch_snapshot(&id).await.unwrap();
    assert_eq!(snap.parent_id, Some(first));
    assert_eq!(snap.nodes[&p("/a")].array().unwrap().manifests.len(), 3);
    assert_eq!(
        snap.metadata["__icechunk"]["splitting_config"]["split_sizes"][0][1][0]["num_chunks"],
        2
    );
    let r = repo
        .readonly_session(&VersionSelector::Snapshot(id))
        .await
        .unwrap();
    for i in 0..6u64 {
        assert_eq!(
            r.get_chunk(&p("/a"), &[i], None).await.unwrap().unwrap()[..],
            [i as u8]
        );
    }
    // An amend replaces the tip: its parent is the tip's parent.
    let w = repo.writable_session("main").await.unwrap();
    let amended = w
        .rewrite_manifests("joined", Default::default(), true)
        .await
        .unwrap();
    let snap = repo.assets().fetch_snapshot(&amended).await.unwrap();
    assert_eq!(snap.parent_id, Some(first));
    assert_eq!(snap.nodes[&p("/a")].array().unwrap().manifests.len(), 1);
}
