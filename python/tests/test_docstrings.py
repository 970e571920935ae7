"""The public Python API is documented, and the examples in its docstrings run.

The rule (issue 45, item 6):

* every public object -- the names in ``floe.__all__``, the objects of the other
  modules the API reference renders, and the public methods, properties and nested
  classes of the public classes -- has a docstring of at least one sentence;
* public classes and functions, and the user-facing methods of the public classes,
  also show an example: a fenced ```` ```python ```` block, the form the API
  reference renders. Exceptions, enums and their members, properties, dunder methods
  and nested variant classes need the sentence only; an awaitable ``*_async`` twin
  needs one sentence naming its blocking twin and saying it is awaitable. A method
  that its class's example calls (``.name(``) counts as shown, so small builders
  (``ManifestSplitCondition.path_matches``) can share their class's example.
  ``EXAMPLE_PENDING`` lists the names still waiting for an example, so the list can
  only shrink: a new public name without an example fails, and so does a listed name
  that has gained one;
* every example runs, in a fresh temporary directory, with the namespace the API
  reference states (``docs/reference/python.md``): ``floe``, ``zarr``, ``np``
  (NumPy), ``repo`` (a new local repository whose ``main`` branch holds one committed
  array ``temperature``, float32, shape (4, 10), chunks (1, 10), values 0 to 39),
  ``session`` (a writable session on ``main``) and ``store`` (its ``session.store``).
  An example whose first line is ``# not run: <reason>`` (cloud credentials, a
  server, worker processes) is only compiled; fewer than 10 may say so.

The docstrings are read where the API reference reads them: from the Python sources,
and for the classes and functions of the native module ``floe._floe`` from its stub
``_floe.pyi`` (their runtime ``__doc__`` is pyo3's, from the Rust doc comments).
"""

from __future__ import annotations

import ast
import enum
import inspect
import os
import re
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest
import zarr

import floe
import floe.codec_pipeline
import floe.dask
import floe.distributed
import floe.xarray

STUB = Path(floe.__file__).with_name("_floe.pyi")

#: Objects the API reference renders besides ``floe.__all__``.
EXTRA = {
    "codec_pipeline.FloeCodecPipeline": floe.codec_pipeline.FloeCodecPipeline,
    "xarray.to_floe": floe.xarray.to_floe,
    "dask.store_dask": floe.dask.store_dask,
    "dask.session_merge_reduction": floe.dask.session_merge_reduction,
    "distributed.merge_sessions": floe.distributed.merge_sessions,
    "distributed.extract_session": floe.distributed.extract_session,
}

#: Modules whose docstrings the API reference renders (their examples run too).
MODULES = [floe.conflicts, floe.snapshots, floe.diff, floe.storage, floe.exceptions]

#: Public names still waiting for an example of their own (see the module docstring).
EXAMPLE_PENDING: set[str] = set()

NOT_RUN = "# not run:"
FENCE = re.compile(r"^[ \t]*```python[ \t]*\n(.*?)^[ \t]*```", re.M | re.S)


def _stub_docs() -> dict[str, str]:
    """Docstrings of the stub, by qualified name (``Class``, ``Class.member``,
    ``function``); an attribute's docstring is the string that follows it."""
    docs: dict[str, str] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for i, node in enumerate(body):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                name = prefix + node.name
                if doc and name not in docs:  # the first of several @overloads
                    docs[name] = doc
                if isinstance(node, ast.ClassDef):
                    visit(node.body, name + ".")
            elif isinstance(node, ast.AnnAssign | ast.Assign) and i + 1 < len(body):
                after = body[i + 1]
                target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
                if (
                    isinstance(target, ast.Name)
                    and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)
                ):
                    docs[prefix + target.id] = inspect.cleandoc(after.value.value)

    visit(ast.parse(STUB.read_text()).body, "")
    return docs


STUB_DOCS = _stub_docs()


def _is_native(obj: object) -> bool:
    return getattr(obj, "__module__", None) == "floe._floe"


def _kind(cls: type, name: str) -> str:
    raw = inspect.getattr_static(cls, name)
    if isinstance(raw, property) or type(raw).__name__ == "getset_descriptor":
        return "property"
    if inspect.isclass(raw):
        return "nested"
    if isinstance(raw, enum.Enum) or not callable(getattr(cls, name, None)):
        return "member"
    return "method"


def _inventory() -> list[tuple[str, str, str]]:
    """``(qualified name, kind, docstring)`` of every public object."""
    top = {name: getattr(floe, name) for name in floe.__all__}
    top.update(EXTRA)
    items: list[tuple[str, str, str]] = []
    seen: set[int] = set()
    for name, obj in sorted(top.items()):
        if id(obj) in seen:  # aliases: IcechunkStore is FloeStore
            continue
        seen.add(id(obj))
        native = _is_native(obj)
        short = name.rsplit(".", 1)[-1]
        doc = STUB_DOCS.get(short, "") if native else inspect.getdoc(obj) or ""
        if not inspect.isclass(obj):
            items.append((name, "function", doc))
            continue
        if issubclass(obj, BaseException):
            items.append((name, "exception", doc))
            continue
        if isinstance(obj, enum.EnumMeta):
            items.append((name, "enum", doc))
            continue
        items.append((name, "class", doc))
        for member in sorted(vars(obj)):
            if member.startswith("_"):
                continue
            kind = _kind(obj, member)
            if kind == "member":
                continue
            if native:
                mdoc = STUB_DOCS.get(f"{short}.{member}", "")
            else:
                mdoc = inspect.getdoc(inspect.getattr_static(obj, member)) or ""
                if kind == "nested" and mdoc == doc:
                    mdoc = ""
            items.append((f"{name}.{member}", kind, mdoc))
    return items


INVENTORY = _inventory()


def _needs_example(name: str, kind: str) -> bool:
    return kind in ("class", "function") or (kind == "method" and not name.endswith("_async"))


def _examples(doc: str) -> list[str]:
    return [textwrap.dedent(block) for block in FENCE.findall(doc)]


def _sentence(doc: str) -> bool:
    first = doc.strip().split("\n\n")[0]
    return len(first.split()) >= 3 and first.rstrip()[-1:] in (".", ":", ")")


def test_every_public_object_has_a_docstring():
    missing = [name for name, _, doc in INVENTORY if not _sentence(doc)]
    assert not missing, f"no docstring of one sentence: {missing}"


def test_async_twins_name_their_blocking_twin():
    bad = []
    for name, kind, doc in INVENTORY:
        if kind == "method" and name.endswith("_async"):
            twin = name.rsplit(".", 1)[-1].removesuffix("_async")
            if "awaitable" not in doc.lower() or twin not in doc:
                bad.append(name)
    assert not bad, f"say 'awaitable' and name the blocking twin: {bad}"


def test_classes_functions_and_methods_have_examples():
    docs = {name: doc for name, _, doc in INVENTORY}
    missing = set()
    for name, kind, doc in INVENTORY:
        if not _needs_example(name, kind) or _examples(doc):
            continue
        owner, _, member = name.rpartition(".")
        if kind == "method" and any(
            f".{member}(" in code for code in _examples(docs.get(owner, ""))
        ):
            continue
        missing.add(name)
    assert not (missing - EXAMPLE_PENDING), f"no example: {sorted(missing - EXAMPLE_PENDING)}"
    assert not (EXAMPLE_PENDING - missing), (
        f"remove from EXAMPLE_PENDING: {sorted(EXAMPLE_PENDING - missing)}"
    )


def _all_examples() -> list[tuple[str, str]]:
    found = []
    docs = [(name, doc) for name, _, doc in INVENTORY]
    docs += [(m.__name__, inspect.getdoc(m) or "") for m in MODULES]
    for name, doc in docs:
        for i, code in enumerate(_examples(doc)):
            found.append((f"{name}[{i}]", code))
    return found


EXAMPLES = _all_examples()


def test_few_examples_are_not_run():
    not_run = [name for name, code in EXAMPLES if code.lstrip().startswith(NOT_RUN)]
    assert len(not_run) < 10, not_run


@pytest.fixture
def namespace(tmp_path, monkeypatch):
    """The namespace every docstring example assumes (docs/reference/python.md)."""
    monkeypatch.chdir(tmp_path)
    repo = floe.Repository.create(floe.local_filesystem_storage(str(tmp_path / "repo")))
    setup = repo.writable_session("main")
    temperature = zarr.create_array(
        setup.store, name="temperature", shape=(4, 10), chunks=(1, 10), dtype="f4"
    )
    temperature[:] = np.arange(40, dtype="f4").reshape(4, 10)
    setup.commit("add temperature")
    session = repo.writable_session("main")
    # A module of its own, so that functions an example defines pickle by reference
    # (refreshable credentials pickle their function).
    module = types.ModuleType("docstring_example")
    module.__dict__.update(
        floe=floe, zarr=zarr, np=np, repo=repo, session=session, store=session.store
    )
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module.__dict__


@pytest.mark.parametrize("code", [c for _, c in EXAMPLES], ids=[n for n, _ in EXAMPLES])
def test_docstring_example_runs(code, namespace):
    compiled = compile(code, "<docstring example>", "exec")
    if code.lstrip().startswith(NOT_RUN):
        return
    env = os.environ.copy()
    # install_as_icechunk's example registers floe as `icechunk`: undone afterwards.
    saved = {k: v for k, v in sys.modules.items() if _icechunk_module(k)}
    try:
        exec(compiled, namespace)
    finally:
        os.environ.clear()
        os.environ.update(env)
        for name in [k for k in sys.modules if _icechunk_module(k)]:
            del sys.modules[name]
        sys.modules.update(saved)


def _icechunk_module(name: str) -> bool:
    return name == "icechunk" or name.startswith("icechunk.")
