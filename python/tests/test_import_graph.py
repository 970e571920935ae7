"""The modules of the ``floe`` package import each other without cycles (issue 44).

The graph is read from the package's sources (``python/floe/*.py``, next to this
``tests`` directory, else the installed copy of them) with :mod:`ast`, so that it shows the layering the code is
written with, not what one particular import order happens to execute:

- Module ``A`` depends on module ``B`` of the package when ``A`` names ``B`` in an
  import statement: ``import floe.b``, ``from floe.b import x``, ``from floe import
  b``, ``from . import b``, ``from .b import x``, or a call
  ``importlib.import_module("floe.b")`` with a literal name. ``from floe import x``
  where ``x`` is not a module of the package, and ``import floe``, depend on the
  package itself (``floe/__init__.py``).
- Imports inside functions and methods count: a lazy import only postpones the cycle
  to the first call, it does not remove it.
- Imports under ``if TYPE_CHECKING:`` (or ``if typing.TYPE_CHECKING:``) do NOT count:
  they never execute, they only inform type checkers. Their ``else:`` branch counts.
- Importing ``floe.b`` executes ``floe/__init__.py`` first, but that implicit step is
  not an edge (otherwise every module would form a cycle with the package, which
  imports them all to re-export their names).
- The native extension ``floe._floe`` (its stub ``_floe.pyi`` in the sources) is a
  module of the package with no edges of its own.
- Modules named by computed strings (``install_as_icechunk`` looks modules up in a
  table) are not edges: only literal import statements and literal
  ``import_module`` calls are read.

The test fails printing every strongly connected component of more than one module
(or a module importing itself), with the import statements that make its edges.
"""

from __future__ import annotations

import ast
import pathlib

PACKAGE = "floe"


def _sources() -> pathlib.Path:
    """``python/floe`` next to this ``tests`` directory; the installed package (a
    copy of those files) when the tests run without the source tree."""
    here = pathlib.Path(__file__).resolve().parents[1] / PACKAGE
    if (here / "__init__.py").is_file():
        return here
    import floe

    return pathlib.Path(floe.__file__).resolve().parent


SOURCES = _sources()


def module_names(directory: pathlib.Path) -> set[str]:
    """The dotted names of the package's modules: ``floe`` for ``__init__.py``,
    ``floe.x`` for ``x.py`` and for a stub ``x.pyi`` (native modules)."""
    names = set()
    for path in directory.iterdir():
        if path.suffix in (".py", ".pyi"):
            stem = path.stem
            names.add(PACKAGE if stem == "__init__" else f"{PACKAGE}.{stem}")
    return names


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    if isinstance(test, ast.Attribute):
        return test.attr == "TYPE_CHECKING"
    return False


class _Imports(ast.NodeVisitor):
    """Collects the package modules one module's code names, with the line naming
    each (for the failure message)."""

    def __init__(self, module: str, is_package: bool, modules: set[str]):
        self.module = module
        self.is_package = is_package
        self.modules = modules
        self.edges: dict[str, list[str]] = {}

    def _add(self, target: str, node: ast.AST, text: str) -> None:
        # A module naming itself (`from floe import x` in floe/__init__.py) is no edge.
        if target in self.modules and target != self.module:
            self.edges.setdefault(target, []).append(f"line {node.lineno}: {text}")

    def _owning_module(self, dotted: str) -> str | None:
        """The longest prefix of ``dotted`` that is a module of the package."""
        parts = dotted.split(".")
        for end in range(len(parts), 0, -1):
            candidate = ".".join(parts[:end])
            if candidate in self.modules:
                return candidate
        return None

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            owner = self._owning_module(alias.name)
            if owner is not None:
                self._add(owner, node, f"import {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            # Relative: level 1 is the package this module belongs to.
            base = self.module if self.is_package else self.module.rpartition(".")[0]
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            source = f"{base}.{node.module}" if node.module else base
        else:
            source = node.module or ""
        owner = self._owning_module(source)
        if owner is None:
            return
        names = ", ".join(alias.name for alias in node.names)
        text = f"from {'.' * node.level}{node.module or ''} import {names}"
        targets = []
        for alias in node.names:
            # `from floe import b` names the module floe.b when there is one.
            child = f"{source}.{alias.name}"
            target = child if alias.name != "*" and child in self.modules else owner
            if target not in targets:
                targets.append(target)
        for target in targets:
            self._add(target, node, text)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if (
            name in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            owner = self._owning_module(node.args[0].value)
            if owner is not None:
                self._add(owner, node, f"{name}({node.args[0].value!r})")
        self.generic_visit(node)


def import_graph(directory: pathlib.Path) -> dict[str, dict[str, list[str]]]:
    """``{module: {imported module: [the statements naming it]}}`` for every ``.py``
    module of the package in ``directory``."""
    modules = module_names(directory)
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(directory.glob("*.py")):
        is_package = path.stem == "__init__"
        module = PACKAGE if is_package else f"{PACKAGE}.{path.stem}"
        visitor = _Imports(module, is_package, modules)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        graph[module] = visitor.edges
    for module in modules:
        graph.setdefault(module, {})
    return graph


def cycles(graph: dict[str, dict[str, object] | set[str] | list[str]]) -> list[list[str]]:
    """The strongly connected components that are cycles (more than one node, or one
    node with an edge to itself), each sorted, in sorted order (Tarjan's algorithm,
    iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    found.append(sorted(component))
    return sorted(found)


def describe(graph: dict[str, dict[str, list[str]]], component: list[str]) -> str:
    members = set(component)
    lines = [" <-> ".join(component)]
    for module in component:
        for target, statements in sorted(graph[module].items()):
            if target in members:
                lines.append(f"  {module} -> {target}: " + "; ".join(statements))
    return "\n".join(lines)


def test_cycle_finder_on_a_made_up_graph():
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},  # a -> b -> c -> a
        "d": {"e"},
        "e": {"d"},  # d <-> e, reached from the first cycle
        "f": {"f"},  # a self-import
        "g": {"a", "h"},
        "h": set(),  # g and h are on no cycle
        "i": {"missing"},  # an edge to a node with no entry of its own
    }
    assert cycles(graph) == [["a", "b", "c"], ["d", "e"], ["f"]]
    assert cycles({"x": {"y"}, "y": set()}) == []
    # A long chain closed into one loop (the finder does not recurse).
    chain = {str(i): {str(i + 1)} for i in range(5000)}
    chain["5000"] = {"0"}
    assert cycles(chain) == [sorted(chain)]


def test_graph_reader_on_made_up_sources(tmp_path):
    package = tmp_path / PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("from floe.a import A\nfrom . import b\n")
    (package / "_native.pyi").write_text("import floe\n")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "import floe._native\n"
        "if TYPE_CHECKING:\n"
        "    from floe.c import C\n"
        "else:\n"
        "    from .b import B\n"
        "def f():\n"
        "    from floe import c\n"
    )
    (package / "b.py").write_text(
        "import importlib\n"
        "def g():\n"
        "    return importlib.import_module('floe.a')\n"
    )
    (package / "c.py").write_text("import floe\nfrom floe import A\nimport os\n")
    graph = import_graph(package)
    assert {m: sorted(t) for m, t in graph.items()} == {
        "floe": ["floe.a", "floe.b"],
        "floe._native": [],
        "floe.a": ["floe._native", "floe.b", "floe.c"],
        "floe.b": ["floe.a"],
        "floe.c": ["floe"],
    }
    assert cycles(graph) == [["floe", "floe.a", "floe.b", "floe.c"]]


def test_the_package_imports_without_cycles():
    assert (SOURCES / "__init__.py").is_file(), f"no package sources at {SOURCES}"
    graph = import_graph(SOURCES)
    found = cycles(graph)
    assert not found, "import cycles in the floe package:\n" + "\n".join(
        describe(graph, component) for component in found
    )


def test_the_graph_sees_the_package():
    """The reader finds the package's real imports (so that an empty graph cannot
    pass the cycle test by accident)."""
    graph = import_graph(SOURCES)
    assert {"floe", "floe._floe", "floe.repository", "floe.session"} <= set(graph)
    assert "floe.session" in graph["floe.repository"]
    assert "floe.session" in graph["floe"]
    assert sum(len(targets) for targets in graph.values()) > 30
