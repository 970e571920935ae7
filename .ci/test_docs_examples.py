"""Runs every code example of the documentation (docs/**/*.md and README.md), so that
no example can go stale. Run by .ci/docs.sh:

    FLOE_BIN=target/debug/floe pytest .ci/test_docs_examples.py

with a Python that has floe, xarray and Dask installed (the pyfloe venv). One test per
page; its blocks run in order in one fresh temporary directory (the working
directory of every block), sharing state:

- ```python blocks are executed in one namespace per page. A ```text block titled
  "Output" right after one is what it must print (same wildcards as below).
- ```console blocks are CLI sessions: each ``$ command`` line runs in bash with
  ``floe`` being $FLOE_BIN; the lines after it, up to the next ``$``, are the output
  it must print (stdout and stderr). In the expected output ``...`` matches any text
  (a line of only ``...`` any number of lines) and a snapshot id (20 characters of
  Crockford base32) matches any snapshot id. A command shown failing is marked with
  ``# fails`` at its end and must exit non-zero.
- ```rust blocks must appear line for line in a doc comment of src/lib.rs, whose
  doctests `cargo test` compiles and runs.
- Blocks whose title starts with "Not run" (```python title="Not run: needs S3
  credentials") are not executed; the title, shown on the page, gives the reason.
  Blocks in sh, bash, toml, yaml or text are never executed: in docs/ every sh/bash
  block must carry such a title (they install or build things).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
RUN_LANGS = {"python", "console", "rust"}
NEVER_RUN = {"sh", "bash", "shell", "toml", "yaml", "text", "json", "ini", ""}
ID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{20}\b")


@dataclass
class Block:
    lang: str
    title: str
    code: str
    line: int


def blocks(path: Path) -> list[Block]:
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```+\s*([\w+-]*)\s*(.*)$", lines[i])
        if not m:
            i += 1
            continue
        fence = re.match(r"^(`+)", lines[i]).group(1)
        lang, attrs = m.group(1).lower(), m.group(2)
        t = re.search(r'title="([^"]*)"', attrs)
        start = i + 1
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1
        found.append(Block(lang, t.group(1) if t else "", "\n".join(body) + "\n", start))
    return found


def _expected_regex(expected: str) -> re.Pattern:
    out = []
    for line in expected.splitlines():
        if line.strip() == "...":
            out.append(r"(?:[^\n]*\n)*?")
            continue
        parts = []
        for piece in re.split(r"(\.\.\.)", line):
            if piece == "...":
                parts.append(r"[^\n]*?")
            else:
                rest = []
                last = 0
                for im in ID.finditer(piece):
                    rest.append(re.escape(piece[last : im.start()]))
                    rest.append(ID.pattern)
                    last = im.end()
                rest.append(re.escape(piece[last:]))
                parts.append("".join(rest))
        out.append("".join(parts).rstrip() + r"[ \t]*\n")
    return re.compile("".join(out), re.DOTALL)


def run_console(block: Block, cwd: Path, env: dict[str, str], where: str) -> None:
    commands: list[tuple[str, list[str]]] = []
    for line in block.code.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"{where}: console block text before the first `$ `")
    for command, expected in commands:
        fails = command.rstrip().endswith("# fails")
        proc = subprocess.run(
            ["bash", "-c", command],
            check=False,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        output = proc.stdout + proc.stderr
        if fails:
            assert proc.returncode != 0, f"{where}: `{command}` was shown failing but exited 0"
        else:
            assert proc.returncode == 0, f"{where}: `{command}` exited {proc.returncode}:\n{output}"
        want = "\n".join(expected).strip("\n")
        if want:
            got = output.rstrip("\n") + "\n"
            assert _expected_regex(want).fullmatch(got), (
                f"{where}: `{command}` printed\n{got}\nbut the page shows\n{want}\n"
            )


def _doc_comment_lines() -> list[str]:
    lines = []
    for line in (ROOT / "src" / "lib.rs").read_text(encoding="utf-8").splitlines():
        s = line.strip()
        if s.startswith("//!"):
            lines.append(s[3:].removeprefix(" ").rstrip())
    return lines


def check_rust(block: Block, where: str) -> None:
    doc = _doc_comment_lines()
    want = [ln.rstrip() for ln in block.code.strip("\n").splitlines()]
    for start in range(len(doc) - len(want) + 1):
        if doc[start : start + len(want)] == want:
            return
    raise AssertionError(
        f"{where}: this rust block is not a doctest of src/lib.rs (cargo test runs those); "
        "copy it from there"
    )


@pytest.fixture(scope="session")
def floe_env(tmp_path_factory) -> dict[str, str]:
    binary = os.environ.get("FLOE_BIN") or str(ROOT / "target" / "debug" / "floe")
    if not Path(binary).exists():
        pytest.fail(f"FLOE_BIN ({binary}) does not exist: cargo build first")
    bindir = tmp_path_factory.mktemp("bin")
    (bindir / "floe").symlink_to(Path(binary).resolve())
    # `python` in console blocks is the interpreter running these tests.
    (bindir / "python").symlink_to(Path(sys.executable))
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "NO_COLOR": "1"}
    env.pop("FLOE_LOG", None)
    return env


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_examples(page: Path, tmp_path: Path, floe_env, monkeypatch) -> None:
    rel = page.relative_to(ROOT)
    # The page's namespace is a module in sys.modules, so that functions its examples
    # define pickle (as they would in a script).
    slug = re.sub(r"\W", "_", str(rel.with_suffix("")))
    module = types.ModuleType(f"docs_example_{slug}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    monkeypatch.chdir(tmp_path)
    ran = 0
    last_stdout: str | None = None
    for block in blocks(page):
        where = f"{rel}:{block.line}"
        if block.title.startswith("Not run"):
            continue
        if block.lang in NEVER_RUN or block.lang not in RUN_LANGS:
            if rel.parts[0] == "docs" and block.lang in {"sh", "bash", "shell"}:
                raise AssertionError(
                    f'{where}: a {block.lang} block in docs/ needs title="Not run: <reason>" '
                    "(or make it a ```console session, which is executed)"
                )
            continue
        if block.lang == "text" and block.title == "Output":
            assert last_stdout is not None, f"{where}: an Output block follows no python block"
            want = block.code.strip("\n")
            assert _expected_regex(want).fullmatch(last_stdout.rstrip("\n") + "\n"), (
                f"{where}: the python block before printed\n{last_stdout}\nbut the page shows\n{want}\n"
            )
            last_stdout = None
            ran += 1
            continue
        last_stdout = None
        if block.lang == "python":
            code = compile(block.code, where, "exec")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(code, namespace)  # noqa: S102
            last_stdout = out.getvalue()
            sys.stdout.write(last_stdout)
        elif block.lang == "console":
            run_console(block, tmp_path, floe_env, where)
        elif block.lang == "rust":
            check_rust(block, where)
        ran += 1
    if ran == 0:
        pytest.skip("no executable examples on this page")


def test_not_run_blocks_are_few() -> None:
    """Blocks exempted from running are listed here by count, so a new one is a
    decision: at most 16 across the site (benchmark reproduce commands included)."""
    skipped = [
        f"{p.relative_to(ROOT)}:{b.line}"
        for p in PAGES
        for b in blocks(p)
        if b.title.startswith("Not run")
    ]
    assert len(skipped) <= 16, f"{len(skipped)} blocks are not run: {skipped}"


@pytest.mark.parametrize("name", ["README.md", "CONTRIBUTING.md", "CHANGELOG.md"])
def test_relative_links_resolve(name: str) -> None:
    """The top-level Markdown files (read on a forge, outside the site) link to files
    that exist."""
    text = (ROOT / name).read_text(encoding="utf-8")
    missing = [
        target
        for target in re.findall(r"\]\(([^)\s]+)\)", text)
        if "://" not in target
        and not target.startswith(("#", "mailto:"))
        and not (ROOT / target.split("#")[0]).exists()
    ]
    assert not missing, f"{name} links to missing files: {missing}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q", *sys.argv[1:]]))
