//! Time travel: reading a version by snapshot id, tag, or branch and time.

use crate::common::fixture::Fixture;
use crate::common::{array_def, p};
use bytes::Bytes;
use floe::format::SnapshotId;
use floe::{Error, VersionSelector};

#[tokio::test]
async fn time_travel_by_snapshot_tag_and_time() {
    let Fixture {
        repo,
        session: s,
        dir: _dir,
        ..
    } = Fixture::local().await.with_u8_array("/x", 3);
    let mut ids = Vec::new();
    let mut times = Vec::new();
    for v in 0..4u8 {
        for i in 0..3 {
            s.set_chunk(&p("/x"), &[i], Bytes::from(vec![v * 10 + i as u8]))
                .await
                .unwrap();
        }
        let id = s.commit(&format!("v{v}")).await.unwrap();
        repo.create_tag(&format!("v{v}"), id).await.unwrap();
        ids.push(id);
        times.push(
            repo.assets()
                .fetch_snapshot(&id)
                .await
                .unwrap()
                .flushed_at_time(),
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    // Shrink the array and delete a chunk in the newest commit.
    s.update_array(&p("/x"), array_def("/x", &[2], &[1], "uint8"))
        .unwrap();
    s.set_chunk_ref(&p("/x"), &[0], None).unwrap();
    let last = s.commit("shrink").await.unwrap();
    let now = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap();
    assert_eq!(now.snapshot_id(), last);
    assert_eq!(now.list_chunks(&p("/x")).await.unwrap(), vec![vec![1]]);

    for (v, id) in ids.iter().enumerate() {
        let expect: Vec<u8> = (0..3).map(|i| v as u8 * 10 + i).collect();
        for sel in [
            VersionSelector::Snapshot(*id),
            VersionSelector::Tag(format!("v{v}")),
            VersionSelector::AsOf {
                branch: "main".into(),
                time: times[v],
            },
        ] {
            let r = repo.readonly_session(&sel).await.unwrap();
            assert_eq!(r.snapshot_id(), *id, "{sel:?}");
            let mut got = Vec::new();
            for i in 0..3 {
                got.push(r.get_chunk(&p("/x"), &[i], None).await.unwrap().unwrap()[0]);
            }
            assert_eq!(got, expect, "{sel:?}");
        }
    }
    // Just before the first commit, main was at the initial snapshot; before that,
    // there is nothing.
    let r = repo
        .readonly_session(&VersionSelector::AsOf {
            branch: "main".into(),
            time: times[0] - chrono::Duration::microseconds(1),
        })
        .await
        .unwrap();
    assert_eq!(r.snapshot_id(), SnapshotId::INITIAL);
    let t0 = repo
        .assets()
        .fetch_snapshot(&SnapshotId::INITIAL)
        .await
        .unwrap()
        .flushed_at_time();
    assert!(matches!(
        repo.readonly_session(&VersionSelector::AsOf {
            branch: "main".into(),
            time: t0 - chrono::Duration::seconds(1)
        })
        .await,
        Err(Error::NoSnapshotAtTime { .. })
    ));
}
