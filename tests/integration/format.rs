//! Format round trips of every object type, and typed errors (never panics) for
//! corrupt and truncated snapshot, manifest, transaction-log, ref and config files.

use crate::common;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::common::{array_def, p};
use bytes::Bytes;
use floe::format::config::RepositoryConfig;
use floe::format::envelope::{self, FileType};
use floe::format::manifest::{Checksum, ChunkPayload, Manifest, NativeChunkRef, VirtualChunkRef};
use floe::format::refs::RefData;
use floe::format::snapshot::{
    ArrayData, DimensionShape, ManifestFileInfo, ManifestRef, NodeData, NodeSnapshot, Snapshot,
};
use floe::format::transaction_log::TransactionLog;
use floe::format::{ChunkId, FormatError, ManifestId, NodeId, SnapshotId};
use floe::storage::{new_in_memory_storage, Storage};
use floe::{Error, Repository, VersionSelector};
use proptest::prelude::*;

fn sample_snapshot() -> Snapshot {
    let mid = ManifestId::random();
    let mut nodes = BTreeMap::new();
    let g = NodeSnapshot {
        id: NodeId::random(),
        path: p("/"),
        user_data: Bytes::from_static(br#"{"zarr_format":3,"node_type":"group"}"#),
        node_data: NodeData::Group,
    };
    let a = NodeSnapshot {
        id: NodeId::random(),
        path: p("/g/temperature"),
        user_data: Bytes::from_static(b"{}"),
        node_data: NodeData::Array(ArrayData {
            shape: vec![
                DimensionShape::regular(100, 10),
                DimensionShape::regular(7, 7),
            ],
            dimension_names: Some(vec![Some("time".into()), None]),
            manifests: vec![ManifestRef {
                object_id: mid,
                extents: vec![0..10, 0..1],
            }],
        }),
    };
    let scalar = NodeSnapshot {
        id: NodeId::random(),
        path: p("/g/s"),
        user_data: Bytes::new(),
        node_data: NodeData::Array(ArrayData {
            shape: vec![],
            dimension_names: None,
            manifests: vec![],
        }),
    };
    for n in [g, a, scalar] {
        nodes.insert(n.path.clone(), n);
    }
    Snapshot {
        spec_version: floe::format::SpecVersion::V1,
        id: SnapshotId::random(),
        parent_id: Some(SnapshotId::INITIAL),
        flushed_at: 1_700_000_000_123_456,
        message: "a message with ünïcode".into(),
        metadata: BTreeMap::from([
            ("author".into(), serde_json::json!("me")),
            ("n".into(), serde_json::json!(-3)),
            ("f".into(), serde_json::json!(2.5)),
            (
                "nested".into(),
                serde_json::json!({"a": [1, null, true, "x"]}),
            ),
        ]),
        manifest_files: vec![ManifestFileInfo {
            id: mid,
            size_bytes: 1234,
            num_chunk_refs: 10,
        }],
        nodes,
    }
}

fn sample_manifest() -> Manifest {
    let node = NodeId::random();
    let other = NodeId::random();
    let refs = BTreeMap::from([
        (
            vec![0, 0],
            ChunkPayload::Inline(Bytes::from_static(b"tiny")),
        ),
        (
            vec![0, 1],
            ChunkPayload::Native(NativeChunkRef {
                id: ChunkId::random(),
                offset: 0,
                length: 4096,
            }),
        ),
        (
            vec![1, 0],
            ChunkPayload::Virtual(VirtualChunkRef {
                location: "s3://bucket/file.nc".into(),
                offset: 100,
                length: 200,
                checksum: Some(Checksum::ETag("\"abc\"".into())),
            }),
        ),
        (
            vec![1, 1],
            ChunkPayload::Virtual(VirtualChunkRef {
                location: "file:///data/x.nc".into(),
                offset: 5,
                length: 6,
                checksum: Some(Checksum::LastModified(1_700_000_000)),
            }),
        ),
        (
            vec![2, 0],
            ChunkPayload::Virtual(VirtualChunkRef {
                location: "https://h/x".into(),
                offset: 0,
                length: 1,
                checksum: None,
            }),
        ),
    ]);
    let refs2 = BTreeMap::from([(vec![], ChunkPayload::Inline(Bytes::from_static(b"s")))]);
    Manifest {
        id: ManifestId::random(),
        arrays: BTreeMap::from([(node, refs), (other, refs2)]),
    }
}

fn sample_log() -> TransactionLog {
    let mut log = TransactionLog::new(SnapshotId::random());
    log.new_groups = BTreeSet::from([NodeId::random(), NodeId::random()]);
    log.new_arrays = BTreeSet::from([NodeId::random()]);
    log.deleted_groups = BTreeSet::from([NodeId::random()]);
    log.deleted_arrays = BTreeSet::from([NodeId::random()]);
    log.updated_arrays = BTreeSet::from([NodeId::random()]);
    log.updated_groups = BTreeSet::from([NodeId::random()]);
    log.updated_chunks =
        BTreeMap::from([(NodeId::random(), BTreeSet::from([vec![0, 1], vec![2, 3]]))]);
    log
}

#[test]
fn snapshot_round_trip() {
    let s = sample_snapshot();
    let bytes = s.encode().unwrap();
    assert_eq!(bytes[37], FileType::Snapshot as u8);
    assert_eq!(Snapshot::decode(&bytes).unwrap(), s);
    let init = Snapshot::initial(floe::format::SpecVersion::V1);
    assert_eq!(Snapshot::decode(&init.encode().unwrap()).unwrap(), init);
}

#[test]
fn manifest_round_trip() {
    let m = sample_manifest();
    let bytes = m.encode().unwrap();
    assert_eq!(bytes[37], FileType::Manifest as u8);
    let back = Manifest::decode(&bytes).unwrap();
    assert_eq!(back, m);
    assert_eq!(back.num_chunk_refs(), 6);
}

#[test]
fn transaction_log_round_trip() {
    let log = sample_log();
    let bytes = log.encode().unwrap();
    assert_eq!(bytes[37], FileType::TransactionLog as u8);
    assert_eq!(TransactionLog::decode(&bytes).unwrap(), log);
    let empty = TransactionLog::new(SnapshotId::random());
    assert!(TransactionLog::decode(&empty.encode().unwrap())
        .unwrap()
        .is_empty());
}

#[test]
fn ref_round_trip_and_errors() {
    let r = RefData {
        snapshot: SnapshotId::random(),
    };
    let bytes = r.to_bytes();
    assert_eq!(bytes, format!("{{\"snapshot\":\"{}\"}}", r.snapshot));
    assert_eq!(RefData::parse("k", &bytes).unwrap(), r);
    for bad in [
        &b""[..],
        b"{",
        b"[]",
        br#"{"snapshot":"nope"}"#,
        br#"{"snapshot":"1CECHNKREP0F1RSTCMT0","x":1}"#,
        b"\xff\xfe",
    ] {
        assert!(
            matches!(
                RefData::parse("k", bad),
                Err(FormatError::InvalidRef { .. })
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn config_round_trip_keeps_unknown_keys() {
    let cfg =
        RepositoryConfig::parse(b"inline_chunk_threshold_bytes: 64\nfuture: {a: 1}\n").unwrap();
    let back = RepositoryConfig::parse(cfg.to_yaml().unwrap().as_bytes()).unwrap();
    assert_eq!(back.inline_chunk_threshold_bytes(), 64);
    assert_eq!(back.raw().get("future"), cfg.raw().get("future"));
}

/// Every prefix of a valid file decodes to an error, never a panic.
fn all_truncations_fail<T: std::fmt::Debug>(
    bytes: &[u8],
    decode: impl Fn(&[u8]) -> Result<T, FormatError>,
) {
    for len in 0..bytes.len() {
        let err = decode(&bytes[..len]).unwrap_err();
        assert!(
            matches!(
                err,
                FormatError::Truncated { .. }
                    | FormatError::BadMagic { .. }
                    | FormatError::Compression { .. }
                    | FormatError::InvalidFlatbuffer { .. }
            ),
            "truncated to {len} bytes: {err:?}"
        );
    }
}

#[test]
fn truncated_files_are_typed_errors() {
    all_truncations_fail(&sample_snapshot().encode().unwrap(), Snapshot::decode);
    all_truncations_fail(&sample_manifest().encode().unwrap(), Manifest::decode);
    all_truncations_fail(&sample_log().encode().unwrap(), TransactionLog::decode);
}

#[test]
fn corrupt_flatbuffers_in_valid_envelopes_are_typed_errors() {
    let good = envelope::open(FileType::Manifest, &sample_manifest().encode().unwrap()).unwrap();
    // Flip each byte of the flatbuffer in turn: decoding never panics, and a broken
    // identifier or table offset is reported as an invalid flatbuffer.
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0xA5;
        let sealed = envelope::seal(FileType::Manifest, &bad).unwrap();
        let _ = Manifest::decode(&sealed);
    }
    let mut no_ident = good.clone();
    no_ident[4..8].copy_from_slice(b"XXXX");
    assert!(matches!(
        Manifest::decode(&envelope::seal(FileType::Manifest, &no_ident).unwrap()),
        Err(FormatError::InvalidFlatbuffer { .. })
    ));
    let mut bad_root = good.clone();
    bad_root[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        Manifest::decode(&envelope::seal(FileType::Manifest, &bad_root).unwrap()),
        Err(FormatError::InvalidFlatbuffer { .. })
    ));
    // A snapshot file handed to the manifest decoder.
    assert!(matches!(
        Manifest::decode(&sample_snapshot().encode().unwrap()),
        Err(FormatError::WrongFileType { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn random_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..400), kind in 0u8..3) {
        let ft = [FileType::Snapshot, FileType::Manifest, FileType::TransactionLog][kind as usize];
        // Raw random bytes, and random bytes behind a valid header.
        let _ = Snapshot::decode(&body);
        let sealed = envelope::seal(ft, &body).unwrap();
        let wrong_type = matches!(Snapshot::decode(&sealed), Err(FormatError::WrongFileType { .. }));
        prop_assert!(ft == FileType::Snapshot || wrong_type);
        let _ = Manifest::decode(&sealed);
        let _ = TransactionLog::decode(&sealed);
    }
}

/// A spec-1 repository (its ref file and `config.yaml` are corrupted below) with
/// one commit.
async fn repo_with_commit() -> (Arc<dyn Storage>, Repository, SnapshotId, SnapshotId) {
    let storage = new_in_memory_storage();
    let repo = common::create_spec1(Arc::clone(&storage), None).await;
    let s = repo.writable_session("main").await.unwrap();
    s.add_array(&p("/a"), array_def("/a", &[2], &[1], "uint8"))
        .unwrap();
    s.set_chunk(&p("/a"), &[0], Bytes::from_static(b"\x01"))
        .await
        .unwrap();
    let id = s.commit("c").await.unwrap();
    let snap = repo.assets().fetch_snapshot(&id).await.unwrap();
    let mid = snap.manifest_files[0].id;
    let mid_snapshot = SnapshotId::new(*mid.as_bytes());
    (storage, repo, id, mid_snapshot)
}

#[tokio::test]
async fn corrupt_files_in_a_repository_are_typed_errors() {
    // Snapshot.
    let (storage, _, id, _) = repo_with_commit().await;
    storage
        .put(&format!("snapshots/{id}"), Bytes::from_static(b"garbage"))
        .await
        .unwrap();
    let repo = Repository::open(Arc::clone(&storage)).await.unwrap();
    let err = repo
        .readonly_session(&VersionSelector::Branch("main".into()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Format(FormatError::Truncated { .. })),
        "{err}"
    );

    // Manifest: truncated in the middle of the zstd frame.
    let (storage, _, id, mid) = repo_with_commit().await;
    let key = format!("manifests/{mid}");
    let full = storage.get(&key).await.unwrap().bytes;
    storage
        .put(&key, full.slice(..full.len() - 5))
        .await
        .unwrap();
    let repo = Repository::open(Arc::clone(&storage)).await.unwrap();
    let r = repo
        .readonly_session(&VersionSelector::Snapshot(id))
        .await
        .unwrap();
    let err = r.get_chunk(&p("/a"), &[0], None).await.unwrap_err();
    assert!(matches!(err, Error::Format(_) | Error::Storage(_)), "{err}");

    // Transaction log: a concurrent commit forces a rebase that reads it.
    let (storage, repo, id, _) = repo_with_commit().await;
    // A separately opened repository has its own caches, so it reads the file.
    let fresh = Repository::open(Arc::clone(&storage)).await.unwrap();
    let s = fresh.writable_session("main").await.unwrap();
    let other = repo.writable_session("main").await.unwrap();
    other
        .set_chunk(&p("/a"), &[1], Bytes::from_static(b"\x02"))
        .await
        .unwrap();
    let other_id = other.commit("other").await.unwrap();
    assert_ne!(other_id, id);
    storage
        .put(
            &format!("transactions/{other_id}"),
            Bytes::from_static(b"ICE"),
        )
        .await
        .unwrap();
    s.set_chunk(&p("/a"), &[0], Bytes::from_static(b"\x03"))
        .await
        .unwrap();
    let err = s.commit("needs rebase").await.unwrap_err();
    assert!(
        matches!(err, Error::Format(FormatError::Truncated { .. })),
        "{err}"
    );
    assert_eq!(
        Repository::open(Arc::clone(&storage))
            .await
            .unwrap()
            .lookup_branch("main")
            .await
            .unwrap(),
        other_id,
        "nothing committed is lost"
    );

    // Ref file.
    let (storage, repo, _, _) = repo_with_commit().await;
    storage
        .put(
            "refs/branch.main/ref.json",
            Bytes::from_static(b"{\"snapshot\":"),
        )
        .await
        .unwrap();
    assert!(matches!(
        repo.lookup_branch("main").await,
        Err(Error::Format(FormatError::InvalidRef { .. }))
    ));

    // Config file.
    let (storage, _, _, _) = repo_with_commit().await;
    storage
        .put(
            "config.yaml",
            Bytes::from_static(b"inline_chunk_threshold_bytes: [oops"),
        )
        .await
        .unwrap();
    assert!(matches!(
        Repository::open(Arc::clone(&storage)).await,
        Err(Error::Format(FormatError::InvalidConfig { .. }))
    ));
}

fn arb_payload() -> impl Strategy<Value = ChunkPayload> {
    let offset = prop_oneof![Just(0u64), any::<u64>()];
    let length = prop_oneof![Just(0u64), any::<u64>()];
    let checksum = prop_oneof![
        Just(None),
        "[ -~]{0,12}".prop_map(|e| Some(Checksum::ETag(e))),
        (1u32..).prop_map(|t| Some(Checksum::LastModified(t))),
    ];
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..40)
            .prop_map(|b| ChunkPayload::Inline(Bytes::from(b))),
        (offset.clone(), length.clone()).prop_map(|(offset, length)| {
            ChunkPayload::Native(NativeChunkRef {
                id: ChunkId::random(),
                offset,
                length,
            })
        }),
        ("[a-z]{1,3}://[ -~]{0,30}", offset, length, checksum).prop_map(
            |(location, offset, length, checksum)| {
                ChunkPayload::Virtual(VirtualChunkRef {
                    location,
                    offset,
                    length,
                    checksum,
                })
            }
        ),
    ]
}

/// The refs of one array: 1-30 of them, all of one rank (0-3).
fn arb_refs() -> impl Strategy<Value = BTreeMap<Vec<u64>, ChunkPayload>> {
    (0usize..4).prop_flat_map(|rank| {
        let coords = proptest::collection::vec(
            prop_oneof![0u64..4, Just(floe::format::MAX_CHUNK_COORDINATE)],
            rank,
        );
        proptest::collection::btree_map(coords, arb_payload(), 1..30)
    })
}

fn arb_ids(max: usize) -> impl Strategy<Value = BTreeSet<NodeId>> {
    proptest::collection::vec(Just(()), 0..max)
        .prop_map(|v| v.into_iter().map(|()| NodeId::random()).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// Every kind of chunk ref, with and without offset, length and checksum, at
    /// ranks 0-3, survives encoding (laid out front to back) and a verified decode.
    #[test]
    fn random_manifests_round_trip(arrays in proptest::collection::vec(arb_refs(), 0..4)) {
        let m = Manifest {
            id: ManifestId::random(),
            arrays: arrays.into_iter().map(|refs| (NodeId::random(), refs)).collect(),
        };
        let back = Manifest::decode(&m.encode().unwrap()).unwrap();
        prop_assert_eq!(back, m);
    }

    /// Transaction logs, moves included (spec 2), survive encoding and decoding.
    #[test]
    fn random_transaction_logs_round_trip(
        sets in proptest::collection::vec(arb_ids(4), 6),
        chunks in proptest::collection::vec(
            proptest::collection::btree_set(proptest::collection::vec(0u64..100, 0..4), 0..20),
            0..4,
        ),
        moves in proptest::collection::vec(("[a-z]{1,8}", "[a-z]{1,8}", any::<bool>()), 0..3),
    ) {
        use floe::format::snapshot::NodeKind;
        use floe::format::transaction_log::MovedNode;
        use floe::format::{NodePath, SpecVersion};
        let mut log = TransactionLog::new(SnapshotId::random());
        let [a, b, c, d, e, f]: [BTreeSet<NodeId>; 6] = sets.try_into().unwrap();
        (log.new_groups, log.new_arrays, log.deleted_groups) = (a, b, c);
        (log.deleted_arrays, log.updated_arrays, log.updated_groups) = (d, e, f);
        // Chunk sets of one rank each, as arrays have.
        log.updated_chunks = chunks
            .into_iter()
            .map(|set| {
                let rank = set.iter().next().map_or(0, Vec::len);
                let set: BTreeSet<Vec<u64>> = set.into_iter().filter(|c| c.len() == rank).collect();
                (NodeId::random(), set)
            })
            .collect();
        log.moved_nodes = moves
            .into_iter()
            .map(|(from, to, array)| MovedNode {
                from: NodePath::new(&format!("/{from}")).unwrap(),
                to: NodePath::new(&format!("/{to}/x")).unwrap(),
                node_id: NodeId::random(),
                kind: if array { NodeKind::Array } else { NodeKind::Group },
            })
            .collect();
        let spec2 = TransactionLog::decode(&log.encode_as(SpecVersion::V2).unwrap()).unwrap();
        prop_assert_eq!(&spec2, &log);
        if log.moved_nodes.is_empty() {
            prop_assert_eq!(TransactionLog::decode(&log.encode().unwrap()).unwrap(), log);
        }
    }
}

/// Files whose head outgrows the room left for it in front of the body (many arrays
/// of few refs) are joined instead, and read back alike.
#[test]
fn manifests_and_logs_of_many_small_arrays_round_trip() {
    let one = |i: u64| {
        BTreeMap::from([(
            vec![i],
            ChunkPayload::Native(NativeChunkRef {
                id: ChunkId::random(),
                offset: i,
                length: 1,
            }),
        )])
    };
    let m = Manifest {
        id: ManifestId::random(),
        arrays: (0..300).map(|i| (NodeId::random(), one(i))).collect(),
    };
    assert_eq!(Manifest::decode(&m.encode().unwrap()).unwrap(), m);
    let mut log = TransactionLog::new(SnapshotId::random());
    log.updated_chunks = (0..3000u64)
        .map(|i| (NodeId::random(), BTreeSet::from([vec![i, 1]])))
        .collect();
    assert_eq!(TransactionLog::decode(&log.encode().unwrap()).unwrap(), log);
}
