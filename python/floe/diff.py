"""Diff: what changed between two snapshots, or in a session (Icechunk's ``Diff``)."""

from __future__ import annotations

from floe._display import html_block, qualified


class Diff:
    """The changes between two versions (``Repository.diff``) or the uncommitted
    changes of a session (``Session.status``), as Icechunk's ``Diff``. Paths are
    node paths (``/a/b``); nodes are named by their paths after any moves.

    ```python
    zarr.create_array(session.store, name="pressure", shape=(4,), dtype="f4")
    zarr.open_array(session.store, path="temperature")[0, :] = 15.0  # chunk (0, 0)
    d = session.status()  # or repo.diff(from_tag=..., to_branch=...) after commits
    print(d.new_arrays)  # {'/pressure'}
    print(d.updated_chunks["/temperature"])  # [[0, 0]]: chunk grid indices
    print(d)  # a readable summary
    if not d.is_empty():
        session.commit("add pressure, reset row 0")
    ```
    """

    __slots__ = (
        "new_groups",
        "new_arrays",
        "deleted_groups",
        "deleted_arrays",
        "updated_groups",
        "updated_arrays",
        "updated_chunks",
        "moved_nodes",
    )

    def __init__(self, raw: dict):
        #: Groups created.
        self.new_groups: set[str] = set(raw.get("new_groups", ()))
        #: Arrays created.
        self.new_arrays: set[str] = set(raw.get("new_arrays", ()))
        #: Groups deleted.
        self.deleted_groups: set[str] = set(raw.get("deleted_groups", ()))
        #: Arrays deleted.
        self.deleted_arrays: set[str] = set(raw.get("deleted_arrays", ()))
        #: Groups whose ``zarr.json`` changed.
        self.updated_groups: set[str] = set(raw.get("updated_groups", ()))
        #: Arrays whose ``zarr.json`` changed.
        self.updated_arrays: set[str] = set(raw.get("updated_arrays", ()))
        #: Chunk grid coordinates written or deleted, by array path.
        self.updated_chunks: dict[str, list[list[int]]] = {
            path: sorted(list(c) for c in coords)
            for path, coords in raw.get("updated_chunks", {}).items()
        }
        #: Spec 2: nodes moved, as ``(from_path, to_path)`` pairs.
        self.moved_nodes: list[tuple[str, str]] = sorted(
            ((old, new) for new, old in raw.get("moved_nodes", {}).items()),
            key=lambda move: move[1].split("/"),
        )

    def is_empty(self) -> bool:
        """Whether nothing changed."""
        return not any(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Diff) and all(
            getattr(self, n) == getattr(other, n) for n in self.__slots__
        )

    _TITLES = (
        ("new_groups", "Groups created"),
        ("new_arrays", "Arrays created"),
        ("deleted_groups", "Groups deleted"),
        ("deleted_arrays", "Arrays deleted"),
        ("updated_groups", "Group definitions updated"),
        ("updated_arrays", "Array definitions updated"),
    )

    def __repr__(self) -> str:
        # As Icechunk: one titled, indented section per non-empty kind of change.
        out = []
        for name, title in self._TITLES:
            paths = getattr(self, name)
            if paths:
                out.append(f"{title}:\n" + "".join(f"    {p}\n" for p in sorted(paths)) + "\n")
        if self.moved_nodes:
            out.append(
                "Nodes moved/renamed:\n"
                + "".join(f"    {a} -> {b}\n" for a, b in self.moved_nodes)
                + "\n"
            )
        if self.updated_chunks:
            lines = ["Chunks updated:\n"]
            for path in sorted(self.updated_chunks):
                lines.append(f"    {path}:\n")
                chunks = self.updated_chunks[path]
                # As Icechunk: the first 10 chunks, then how many more.
                lines.extend(f"        {c}\n" for c in chunks[:10])
                if len(chunks) > 10:
                    lines.append(f"        ... {len(chunks) - 10} more\n")
            out.append("".join(lines))
        return "".join(out)

    __str__ = __repr__

    def _repr_html_(self) -> str:
        def paths(v: object) -> str:
            if isinstance(v, set):
                return "{" + ", ".join(f'"{p}"' for p in sorted(v)) + "}"
            if isinstance(v, dict):
                return "{" + ", ".join(f'"{k}": {c}' for k, c in sorted(v.items())) + "}"
            return str(v)

        return html_block(
            qualified("snapshots.Diff"), [(n, paths(getattr(self, n))) for n in self.__slots__]
        )
