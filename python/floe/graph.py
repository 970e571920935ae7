"""``Repository.ancestry_graph``: the history of one branch, or of every branch, as
a text graph (terminal, with or without colour) and an SVG (Jupyter), as
Icechunk's ``AncestryGraph``.

Each commit is one row, newest first: a ``*`` in the column of the first branch
whose history reaches it, the snapshot id, the branches and tags pointing to it,
and the commit message. Commits reached by several branches appear once.
"""

from __future__ import annotations

import datetime
import html
from dataclasses import dataclass, field

__all__ = ["AncestryGraph"]

_RESET = "\x1b[0m"
_COLOURS = ("\x1b[33m", "\x1b[32m", "\x1b[36m", "\x1b[35m", "\x1b[34m", "\x1b[31m")


@dataclass
class _Row:
    id: str
    parent_id: str | None
    message: str
    written_at: datetime.datetime
    column: int
    labels: list[str] = field(default_factory=list)


class AncestryGraph:
    """The commits of one or more branches with their labels (branches and tags),
    newest first. ``str()`` gives the text graph (ANSI colours unless ``plain``),
    ``_repr_svg_()`` an SVG drawing for notebooks."""

    def __init__(self, rows: list[_Row], plain: bool = True):
        self._rows = rows
        self._plain = plain

    @classmethod
    def _build(cls, repo, branch: str | None, plain: bool) -> AncestryGraph:
        branches = (
            [branch]
            if branch is not None
            else sorted(repo.list_branches(), key=lambda b: (b != "main", b))
        )
        labels: dict[str, list[str]] = {}
        for b in branches:
            labels.setdefault(repo.lookup_branch(b), []).append(b)
        for t in sorted(repo.list_tags()):
            labels.setdefault(repo.lookup_tag(t), []).append(f"tag: {t}")
        rows: dict[str, _Row] = {}
        for column, b in enumerate(branches):
            for info in repo.ancestry(branch=b):
                if info.id in rows:
                    break
                rows[info.id] = _Row(
                    info.id,
                    info.parent_id,
                    info.message,
                    info.written_at,
                    column,
                    labels.get(info.id, []),
                )
        ordered = sorted(rows.values(), key=lambda r: r.written_at, reverse=True)
        return cls(ordered, plain)

    def _line(self, row: _Row, width: int) -> str:
        cells = ["|"] * width
        cells[row.column] = "*"
        graph = " ".join(cells)
        label = f" ({', '.join(row.labels)})" if row.labels else ""
        if self._plain:
            return f"{graph} {row.id}{label} {row.message}"
        colour = _COLOURS[row.column % len(_COLOURS)]
        return (
            f"{colour}{graph}{_RESET} \x1b[33m{row.id}{_RESET}"
            f"\x1b[1;32m{label}{_RESET} {row.message}"
        )

    def __str__(self) -> str:
        width = max((r.column for r in self._rows), default=0) + 1
        return "\n".join(self._line(r, width) for r in self._rows) + "\n"

    def __repr__(self) -> str:
        return str(self)

    def _repr_svg_(self) -> str:
        """The graph as SVG: a circle per commit in its branch's column, joined to
        its parent, with the id, labels and message beside it."""
        step, left = 28, 20
        width = max((r.column for r in self._rows), default=0) + 1
        text_x = left + width * 20 + 10
        y_of = {r.id: 20 + i * step for i, r in enumerate(self._rows)}
        col_of = {r.id: r.column for r in self._rows}
        parts = []
        for r in self._rows:
            if r.parent_id in y_of:
                parts.append(
                    f'<line x1="{left + r.column * 20}" y1="{y_of[r.id]}" '
                    f'x2="{left + col_of[r.parent_id] * 20}" y2="{y_of[r.parent_id]}" '
                    'stroke="#888" stroke-width="2"/>'
                )
        for r in self._rows:
            y = y_of[r.id]
            label = f" ({', '.join(r.labels)})" if r.labels else ""
            parts.append(
                f'<circle cx="{left + r.column * 20}" cy="{y}" r="6" fill="#4a90d9"/>'
                f'<text x="{text_x}" y="{y + 4}" font-family="monospace" font-size="12">'
                f"{html.escape(r.id[:8])}{html.escape(label)} {html.escape(r.message)}</text>"
            )
        height = 20 + len(self._rows) * step
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="800" height="{height}">'
            + "".join(parts)
            + "</svg>"
        )
