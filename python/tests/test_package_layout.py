"""The package's shape mirrors icechunk-python: one module per concept, every method
written out (no forwarding), a typed stub of the native module and py.typed."""

import importlib
import inspect
import pathlib

import pytest

import floe

MODULES = {
    "floe.repository": ["Repository", "SpecVersion"],
    "floe.session": ["Session"],
    "floe.store": ["FloeStore", "IcechunkStore"],
    "floe.storage": ["Storage", "in_memory_storage", "local_filesystem_storage",
                     "s3_storage"],
    "floe.config": ["RepositoryConfig", "CompressionConfig"],
    "floe.conflicts": ["BasicConflictSolver", "ConflictDetector", "VersionSelection"],
    "floe.snapshots": ["Diff", "SnapshotInfo"],
    "floe.exceptions": ["FloeError", "IcechunkError", "ConflictError", "ReadOnlyError",
                        "InvalidInputError", "SessionStateError"],
    "floe.xarray": ["to_floe", "to_icechunk"],
    "floe.diff": ["Diff"],
}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_concept_has_its_module_and_the_top_level_reexports_it(module):
    mod = importlib.import_module(module)
    for name in MODULES[module]:
        assert hasattr(mod, name), f"{module}.{name}"
        if module != "floe.xarray":
            assert getattr(floe, name) is getattr(mod, name), name
    for name in floe.__all__:
        assert hasattr(floe, name), name


# Every native method the wrappers offer, written out in Python with a docstring.
REPOSITORY_METHODS = [
    "create", "open", "open_or_create", "exists", "spec_version", "config", "save_config",
    "writable_session", "readonly_session", "rearrange_session", "ancestry", "diff",
    "list_branches", "lookup_branch", "create_branch", "reset_branch", "delete_branch",
    "list_tags", "lookup_tag", "create_tag", "delete_tag", "get_metadata",
    "set_metadata", "update_metadata", "expire_snapshots", "garbage_collect", "verify",
]
SESSION_METHODS = [
    "store", "snapshot_id", "branch", "read_only", "has_uncommitted_changes", "status",
    "discard_changes", "commit", "amend", "rebase", "fork", "merge", "move",
]


@pytest.mark.parametrize(
    "cls, names", [(floe.Repository, REPOSITORY_METHODS), (floe.Session, SESSION_METHODS)]
)
def test_methods_are_written_out_with_docstrings(cls, names):
    assert "__getattr__" not in vars(cls)
    for name in names:
        member = inspect.getattr_static(cls, name)
        assert inspect.getdoc(member), f"{cls.__name__}.{name} has no docstring"


def test_every_native_repository_method_has_a_wrapper():
    native = [n for n in dir(floe._floe.Repository) if not n.startswith("_")]
    missing = [n for n in native if not hasattr(floe.Repository, n)]
    assert not missing
    native = [n for n in dir(floe._floe.Session) if not n.startswith("_")]
    assert not [n for n in native if not hasattr(floe.Session, n)]


def test_typed_stub_and_py_typed_are_installed():
    root = pathlib.Path(floe.__file__).parent
    assert (root / "py.typed").exists()
    stub = (root / "_floe.pyi").read_text()
    # The stub declares every public native class and function.
    for name in dir(floe._floe):
        if not name.startswith("__"):
            assert f" {name}" in stub or f"class {name}" in stub, name
