"""Repository configuration (floe.config, Icechunk's names): values, displays,
pickling, merging, the round trip through repositories (create, open with overrides,
save, fetch), what the engine does with it (inline threshold, manifest splitting), and
byte compatibility with Icechunk 2.x in both directions."""

import json
import os
import pickle
from oracle import run_icechunk

import numpy as np
import pytest
import zarr

import floe
from floe import (
    CachingConfig,
    CompressionAlgorithm,
    CompressionConfig,
    ManifestConfig,
    ManifestPreloadCondition,
    ManifestPreloadConfig,
    ManifestSplitCondition,
    ManifestSplitDimCondition,
    ManifestSplittingConfig,
    ManifestVirtualChunkLocationCompressionConfig,
    RepositoryConfig,
    RepoUpdateRetryConfig,
)

P = ManifestPreloadCondition
S = ManifestSplitCondition
D = ManifestSplitDimCondition


def _icechunk_python():
    """The Python with Icechunk 2.x (`FLOE_PYTHON312`), or None; missing under CI is a
    failure."""
    py312 = os.environ.get("FLOE_PYTHON312")
    if not py312 and os.environ.get("CI") == "true":
        pytest.fail("FLOE_PYTHON312 (Python with icechunk 2.x) is not set")
    return py312 or None


def full_config() -> RepositoryConfig:
    """A configuration with every section floe models set."""
    return RepositoryConfig(
        inline_chunk_threshold_bytes=5,
        get_partial_values_concurrency=7,
        compression=CompressionConfig(algorithm=CompressionAlgorithm.Zstd, level=4),
        max_concurrent_requests=9,
        caching=CachingConfig(num_snapshot_nodes=1000, num_chunk_refs=2000, num_transaction_changes=3),
        manifest=ManifestConfig(
            preload=ManifestPreloadConfig(
                max_total_refs=3,
                preload_if=(P.name_matches("x") | P.path_matches("^/a/")) & P.num_refs(1, None),
                max_arrays_to_scan=4,
            ),
            splitting=ManifestSplittingConfig.from_dict(
                {
                    S.name_matches("temp") | S.path_matches("^/p/"): {D.DimensionName("lon"): 3, D.Axis(0): 2},
                    S.AnyArray(): {D.Any(): 4},
                }
            ),
            virtual_chunk_location_compression=ManifestVirtualChunkLocationCompressionConfig(
                500, compression_level=2
            ),
            max_concurrent_manifest_fetches_during_commit=3,
        ),
        num_updates_per_repo_info_file=10,
        max_concurrent_decodes=3,
    )


def test_fields_default_to_none_and_setters_check_types():
    c = RepositoryConfig.default()
    assert c == RepositoryConfig()
    assert c.inline_chunk_threshold_bytes is None and c.manifest is None and c.caching is None
    assert c.virtual_chunk_containers is None
    with pytest.raises(ValueError):
        c.inline_chunk_threshold_bytes = 70_000  # a u16, as Icechunk
    with pytest.raises(TypeError):
        c.caching = CompressionConfig()
    with pytest.raises(TypeError):
        CachingConfig(num_chunk_refs="many")
    with pytest.raises(ValueError):
        ManifestSplittingConfig.from_dict({S.AnyArray(): {D.Any(): 0}})
    assert CompressionAlgorithm() is CompressionAlgorithm.Zstd is CompressionAlgorithm.default()


def test_nested_sections_are_held_by_reference():
    c = RepositoryConfig(compression=CompressionConfig(level=8))
    c.compression.level = 2
    c.manifest = ManifestConfig()
    c.manifest.preload = ManifestPreloadConfig(max_total_refs=42)
    c.manifest.preload.preload_if = P.true()
    assert c.compression.level == 2
    assert c.manifest.preload == ManifestPreloadConfig(max_total_refs=42, preload_if=P.true())


def test_conditions_compare_by_value_and_combine_with_operators():
    assert P.and_conditions([P.true(), P.name_matches("foo")]) == P.true() & P.name_matches("foo")
    assert P.or_conditions([P.true(), P.name_matches("foo")]) == P.true() | P.name_matches("foo")
    assert P.name_matches("a") != P.path_matches("a")
    assert S.or_conditions([S.name_matches("t"), S.name_matches("s")]) == S.name_matches("t") | S.name_matches("s")
    assert D.Axis(1) == D.Axis(1) and hash(D.Axis(1)) == hash(D.Axis(1)) and D.Axis(1) != D.Axis(2)
    assert len({S.AnyArray(), S.AnyArray(), S.name_matches("a")}) == 2


def test_splitting_dicts_keep_their_order():
    rules = {S.name_matches("t"): {D.DimensionName("lon"): 3, D.Any(): 1}, S.AnyArray(): {D.Axis(0): 2}}
    c = ManifestSplittingConfig.from_dict(rules)
    assert list(c.to_dict()) == list(rules)
    assert list(c.to_dict()[S.name_matches("t")].items()) == [(D.DimensionName("lon"), 3), (D.Any(), 1)]
    assert ManifestSplittingConfig.from_dict(c.to_dict()) == c
    assert c.split_sizes[1] == (S.AnyArray(), ((D.Axis(0), 2),))


@pytest.mark.parametrize(
    "value",
    [
        CachingConfig(),
        CachingConfig(num_snapshot_nodes=100, num_chunk_refs=200),
        CompressionConfig(),
        CompressionConfig(algorithm=CompressionAlgorithm.Zstd, level=5),
        ManifestPreloadConfig(max_total_refs=42, preload_if=P.num_refs(None, 7) & P.false()),
        ManifestSplittingConfig(),
        ManifestVirtualChunkLocationCompressionConfig(min_num_chunks=500),
        ManifestConfig(),
        RepoUpdateRetryConfig(),
        RepositoryConfig(),
        full_config(),
    ],
)
def test_repr_evaluates_to_an_equal_value_and_values_pickle(value):
    assert eval(repr(value), {"floe": floe}) == value
    assert pickle.loads(pickle.dumps(value)) == value
    assert repr(value).startswith("floe.config.")
    assert str(value).startswith("<floe.config.")
    assert '<div class="icechunk-repr">' in value._repr_html_()


def test_str_shows_effective_defaults():
    s = str(RepositoryConfig(caching=CachingConfig(num_snapshot_nodes=42)))
    assert "num_snapshot_nodes: 42\n" in s
    assert "num_chunk_refs: 15000000 (default)" in s
    assert "inline_chunk_threshold_bytes: 512 (default)" in s
    assert "algorithm: Zstd (default)" in s
    assert "max_concurrent_manifest_fetches_during_commit: 1 (default)" in s
    assert "floe.config.CachingConfig(" not in s


def test_merge_follows_icechunks_rules():
    base = full_config()
    base.set_virtual_chunk_container(floe.VirtualChunkContainer("s3://a/", floe.s3_store(region="x")))
    over = RepositoryConfig(
        caching=CachingConfig(num_chunk_refs=9),
        manifest=ManifestConfig(splitting=ManifestSplittingConfig(), preload=ManifestPreloadConfig(max_arrays_to_scan=8)),
    )
    over.clear_virtual_chunk_containers()
    merged = base.merge(over)
    assert merged.inline_chunk_threshold_bytes == 5
    assert merged.caching == CachingConfig(num_snapshot_nodes=1000, num_chunk_refs=9, num_transaction_changes=3)
    assert merged.manifest.splitting == ManifestSplittingConfig()  # replaced whole
    assert merged.manifest.preload.max_total_refs == 3 and merged.manifest.preload.max_arrays_to_scan == 8
    assert merged.virtual_chunk_containers == {}
    assert base.merge(RepositoryConfig()) == base
    with pytest.raises(TypeError):
        base.merge(CachingConfig())


def test_virtual_chunk_containers_round_trip_and_names_identify_them():
    c = RepositoryConfig()
    one = floe.VirtualChunkContainer("s3://one/", floe.s3_store(region="us-east-1"), name="data")
    two = floe.VirtualChunkContainer("s3://two/", floe.http_store({"allow_http": "true"}), name="data")
    c.set_virtual_chunk_container(one)
    c.set_virtual_chunk_container(two)
    assert list(c.virtual_chunk_containers) == ["s3://two/"]
    repo = floe.Repository.create(floe.in_memory_storage(), config=c)
    assert repo.config.virtual_chunk_containers == {"s3://two/": two}
    c.clear_virtual_chunk_containers()
    assert c.virtual_chunk_containers == {}


@pytest.mark.parametrize("spec", [1, 2])
def test_create_open_save_and_fetch(spec):
    storage = floe.in_memory_storage()
    repo = floe.Repository.create(storage, config=full_config(), spec_version=spec)
    assert repo.config == full_config()
    assert floe.Repository.fetch_config(storage) == full_config()
    # Overrides given to open are merged over the stored configuration, not stored.
    over = RepositoryConfig(inline_chunk_threshold_bytes=0, caching=CachingConfig(num_chunk_refs=9))
    opened = floe.Repository.open(storage, config=over)
    assert opened.config.inline_chunk_threshold_bytes == 0
    assert opened.config.caching.num_snapshot_nodes == 1000
    assert opened.config.caching.num_chunk_refs == 9
    assert opened.config.manifest == full_config().manifest
    assert floe.Repository.fetch_config(storage) == full_config()
    opened.save_config()
    assert floe.Repository.fetch_config(storage) == opened.config
    assert opened.writable_session("main").config == opened.config
    # reopen merges too, in memory.
    again = opened.reopen(config=RepositoryConfig(max_concurrent_requests=3))
    assert again.config.max_concurrent_requests == 3
    assert floe.Repository.fetch_config(storage).max_concurrent_requests == 9
    # A repository created with the defaults stores none.
    plain = floe.in_memory_storage()
    floe.Repository.create(plain, spec_version=spec)
    assert floe.Repository.fetch_config(plain) is None
    with pytest.raises(floe.FloeError):
        floe.Repository.fetch_config(floe.in_memory_storage())


def test_inline_threshold_decides_where_chunks_go(tmp_path):
    path = str(tmp_path / "repo")
    config = RepositoryConfig.default()
    config.inline_chunk_threshold_bytes = 5
    repo = floe.Repository.open_or_create(floe.local_filesystem_storage(path), config=config)
    store = repo.writable_session("main").store
    small = zarr.create_array(store, name="small", shape=(10,), chunks=(1,), dtype="int32", compressors=None)
    small[:] = 1
    assert not os.path.isdir(f"{path}/chunks")
    big = zarr.create_array(store, name="big", shape=(10,), chunks=(1,), dtype="int64", compressors=None)
    big[:] = 2
    assert len(os.listdir(f"{path}/chunks")) == 10


@pytest.mark.parametrize("spec", [1, 2])
def test_splitting_decides_the_manifests_written(tmp_path, spec):
    path = str(tmp_path / "repo")
    splitting = ManifestSplittingConfig.from_dict({S.name_matches("temp"): {D.Axis(1): 3, D.Any(): 2}})
    config = RepositoryConfig(inline_chunk_threshold_bytes=0, manifest=ManifestConfig(splitting=splitting))
    repo = floe.Repository.create(floe.local_filesystem_storage(path), config=config, spec_version=spec)
    session = repo.writable_session("main")
    for name in ("temperature", "other"):
        a = zarr.create_array(session.store, name=name, shape=(4, 10), chunks=(1, 1), dtype="uint8", compressors=None)
        a[:] = np.arange(40, dtype="uint8").reshape(4, 10)
    session.commit("write")
    # temperature: axis 0 by 2 (2 blocks) x axis 1 by 3 (4 blocks); other: whole.
    assert len(os.listdir(f"{path}/manifests")) == 8 + 1
    reopened = floe.Repository.open(floe.local_filesystem_storage(path))
    assert reopened.config.manifest.splitting == splitting
    group = zarr.open_group(reopened.readonly_session("main").store, mode="r")
    np.testing.assert_array_equal(group["temperature"][:], np.arange(40).reshape(4, 10))


def _run_icechunk(script: str, *args: str) -> str:
    py312 = _icechunk_python()
    if py312 is None:
        pytest.skip("no Python with icechunk 2.x (FLOE_PYTHON312)")
    out = run_icechunk([py312, "-c", script, *args])
    return out.stdout


@pytest.mark.parametrize("spec", [1, 2])
def test_icechunk_reads_the_configuration_floe_writes(tmp_path, spec):
    path = str(tmp_path / "repo")
    floe.Repository.create(floe.local_filesystem_storage(path), config=full_config(), spec_version=spec)
    script = """
import sys, json, icechunk as ic
c = ic.Repository.fetch_config(ic.local_filesystem_storage(sys.argv[1]))
m = c.manifest
print(json.dumps({
    "inline": c.inline_chunk_threshold_bytes, "gpv": c.get_partial_values_concurrency,
    "level": c.compression.level, "mcr": c.max_concurrent_requests, "decodes": c.max_concurrent_decodes,
    "refs": c.caching.num_chunk_refs, "updates": c.num_updates_per_repo_info_file,
    "preload": repr(m.preload.preload_if), "max_total_refs": m.preload.max_total_refs,
    "split": [[repr(k), [[repr(d), n] for d, n in v.items()]] for k, v in m.splitting.to_dict().items()],
    "vlc": m.virtual_chunk_location_compression.min_num_chunks,
    "fetches": m.max_concurrent_manifest_fetches_during_commit,
}))
"""
    got = json.loads(_run_icechunk(script, path))
    assert got["inline"] == 5 and got["gpv"] == 7 and got["level"] == 4 and got["mcr"] == 9
    assert got["decodes"] == 3 and got["refs"] == 2000 and got["updates"] == 10
    assert got["max_total_refs"] == 3 and got["vlc"] == 500 and got["fetches"] == 3
    assert got["preload"] == (
        'icechunk.config.ManifestPreloadCondition.and_conditions([icechunk.config.ManifestPreloadCondition.or_conditions('
        '[icechunk.config.ManifestPreloadCondition.name_matches("x"), '
        'icechunk.config.ManifestPreloadCondition.path_matches("^/a/")]), '
        "icechunk.config.ManifestPreloadCondition.num_refs(1, None)])"
    )
    assert [r[1] for r in got["split"]] == [
        [['icechunk.config.ManifestSplitDimCondition.dimension_name("lon")', 3],
         ["icechunk.config.ManifestSplitDimCondition.axis(0)", 2]],
        [["icechunk.config.ManifestSplitDimCondition.any()", 4]],
    ]


@pytest.mark.parametrize("spec", [1, 2])
def test_floe_reads_the_configuration_icechunk_writes(tmp_path, spec):
    path = str(tmp_path / "repo")
    script = """
import sys, icechunk as ic
P, S, D = ic.ManifestPreloadCondition, ic.ManifestSplitCondition, ic.ManifestSplitDimCondition
c = ic.RepositoryConfig(inline_chunk_threshold_bytes=5, compression=ic.CompressionConfig(level=4),
    caching=ic.CachingConfig(num_chunk_refs=2000),
    manifest=ic.ManifestConfig(
        preload=ic.ManifestPreloadConfig(max_total_refs=3, preload_if=P.name_matches("x") & P.num_refs(None, 7)),
        splitting=ic.ManifestSplittingConfig.from_dict({S.name_matches("temp"): {D.Axis(1): 3, D.Any(): 2}})))
ic.Repository.create(ic.local_filesystem_storage(sys.argv[1]), config=c, spec_version=int(sys.argv[2]))
"""
    _run_icechunk(script, path, str(spec))
    c = floe.Repository.fetch_config(floe.local_filesystem_storage(path))
    assert c.inline_chunk_threshold_bytes == 5 and c.compression.level == 4
    assert c.caching.num_chunk_refs == 2000
    assert c.manifest.preload.preload_if == P.name_matches("x") & P.num_refs(None, 7)
    assert c.manifest.splitting == ManifestSplittingConfig.from_dict({S.name_matches("temp"): {D.Axis(1): 3, D.Any(): 2}})
    # Icechunk stored its storage settings too: kept, and written back unchanged.
    assert c.storage is not None
    repo = floe.Repository.open(floe.local_filesystem_storage(path))
    repo.save_config()
    assert floe.Repository.fetch_config(floe.local_filesystem_storage(path)) == c


def test_partial_reads_follow_the_configured_concurrency():
    storage = floe.in_memory_storage()
    repo = floe.Repository.create(storage, config=RepositoryConfig(get_partial_values_concurrency=3))
    session = repo.writable_session("main")
    assert session.config.get_partial_values_concurrency == 3
    assert session.store._partial_values_concurrency() == 3
    default = floe.Repository.create(floe.in_memory_storage()).writable_session("main")
    assert default.store._partial_values_concurrency() == 10
    a = zarr.create_array(session.store, name="a", shape=(8,), chunks=(2,), dtype="uint8", compressors=None)
    a[:] = np.arange(8, dtype="uint8")
    np.testing.assert_array_equal(a[:], np.arange(8))


def test_virtual_module_repr_names_and_unknown_keys_survive():
    assert floe.virtual.VirtualChunkContainer is floe.VirtualChunkContainer
    c = floe.VirtualChunkContainer("file:///data/", floe.local_filesystem_store("/data"), name="d")
    assert repr(c).startswith("floe.virtual.VirtualChunkContainer(")
    assert eval(repr(c), {"floe": floe}) == c
    # A key floe does not model is kept through a round trip with the engine.
    config = RepositoryConfig._from_plain({"some_future_key": {"a": [1, 2]}, "inline_chunk_threshold_bytes": 3})
    storage = floe.in_memory_storage()
    floe.Repository.create(storage, config=config, spec_version=1)
    back = floe.Repository.fetch_config(storage)
    assert back._extra == {"some_future_key": {"a": [1, 2]}}
    assert back.inline_chunk_threshold_bytes == 3


def test_repo_update_retries_bound_the_tries_of_a_spec2_update():
    storage = floe.in_memory_storage()
    floe.Repository.create(storage, spec_version=2)
    for tries, works in [(1, False), (2, True), (None, True)]:
        retries = None if tries is None else floe.RepoUpdateRetryConfig(
            default=floe.StorageRetriesSettings(max_tries=tries, initial_backoff_ms=1, max_backoff_ms=2))
        mine = floe.Repository.open(storage, config=RepositoryConfig(repo_update_retries=retries))
        tip = mine.lookup_branch("main")
        # Another handle changes the `repo` object: `mine` holds a stale copy, and its
        # first try is refused.
        floe.Repository.open(storage).create_tag(f"other-{tries}", tip)
        if works:
            mine.create_tag(f"mine-{tries}", tip)
        else:
            with pytest.raises(floe.ConflictError) as e:
                mine.create_tag(f"mine-{tries}", tip)
            assert e.value.kind == floe.ErrorKind.UPDATE_ATTEMPTS_EXHAUSTED


def test_max_concurrent_requests_reaches_the_engine():
    storage = floe.in_memory_storage()
    repo = floe.Repository.create(storage, config=RepositoryConfig(max_concurrent_requests=3))
    assert repo.config.max_concurrent_requests == 3
    reopened = floe.Repository.open(storage, config=RepositoryConfig(max_concurrent_requests=5))
    assert reopened.config.max_concurrent_requests == 5
    # The bound applies to every request of the handle (tests/integration/repository_config.rs
    # measures it); the repository still works under a bound of 1.
    one = floe.Repository.open(storage, config=RepositoryConfig(max_concurrent_requests=1))
    s = one.writable_session("main")
    zarr.create_array(s.store, name="a", shape=(8,), chunks=(1,), dtype="u8",
                      compressors=None)[:] = np.arange(8, dtype="u8")
    s.commit("eight chunks")
    np.testing.assert_array_equal(
        zarr.open_array(one.readonly_session(branch="main").store, path="a", mode="r")[:],
        np.arange(8))
