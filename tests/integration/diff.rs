//! Diffs between snapshots: of diverged branches (comparing the snapshots) and along
//! the ancestry (from the transaction logs).

use crate::common::fixture::Fixture;
use crate::common::{array_def, group_json, p};
use bytes::Bytes;

#[tokio::test]
async fn diff_between_diverged_branches_compares_snapshots() {
    let Fixture {
        repo, session: s, ..
    } = Fixture::in_memory().await;
    s.add_group(&p("/"), group_json(serde_json::json!({"v": 1})))
        .unwrap();
    s.add_array(&p("/a"), array_def("/a", &[4], &[1], "uint8"))
        .unwrap();
    for i in 0..3 {
        s.set_chunk(&p("/a"), &[i], Bytes::from(vec![i as u8]))
            .await
            .unwrap();
    }
    let base = s.commit("base").await.unwrap();
    repo.create_branch("dev", base).await.unwrap();
    s.set_chunk(&p("/a"), &[0], Bytes::from_static(b"\x09"))
        .await
        .unwrap();
    s.add_array(&p("/b"), array_def("/b", &[2], &[1], "uint8"))
        .unwrap();
    let main_tip = s.commit("main work").await.unwrap();
    let d = repo.writable_session("dev").await.unwrap();
    d.set_chunk(&p("/a"), &[1], Bytes::from_static(b"\x07"))
        .await
        .unwrap();
    d.update_group(&p("/"), group_json(serde_json::json!({"v": 2})))
        .unwrap();
    let dev_tip = d.commit("dev work").await.unwrap();

    let diff = repo.diff(main_tip, dev_tip).await.unwrap();
    assert_eq!(diff.deleted_arrays.iter().collect::<Vec<_>>(), ["/b"]);
    assert!(diff.new_arrays.is_empty());
    assert_eq!(diff.updated_groups.iter().collect::<Vec<_>>(), ["/"]);
    assert_eq!(
        diff.updated_chunks
            .get("/a")
            .unwrap()
            .iter()
            .cloned()
            .collect::<Vec<_>>(),
        vec![vec![0], vec![1]]
    );
    // Along the ancestry, the transaction logs give the same kind of answer.
    let along = repo.diff(base, main_tip).await.unwrap();
    assert_eq!(along.new_arrays.iter().collect::<Vec<_>>(), ["/b"]);
    assert_eq!(along.updated_chunks.get("/a").unwrap().len(), 1);
}
