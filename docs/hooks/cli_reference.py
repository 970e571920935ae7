"""MkDocs hook: the command-line reference (docs/reference/cli.md) is generated from
the `floe` binary's own clap help at build time, so it cannot drift from the CLI.

The page holds the marker ``<!-- floe-cli-reference -->``; this hook replaces it with
``floe --help`` and ``floe <command> [<subcommand>] --help`` for every command clap
lists. The binary is ``$FLOE_BIN``, else ``target/debug/floe`` (under
``$CARGO_TARGET_DIR`` when set); a missing binary fails the build.

Run directly (``python docs/hooks/cli_reference.py``) to print the generated Markdown.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

MARKER = "<!-- floe-cli-reference -->"
ROOT = Path(__file__).resolve().parents[2]


def floe_bin() -> str:
    env = os.environ.get("FLOE_BIN")
    if env:
        return env
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    binary = target / "debug" / "floe"
    if not binary.exists():
        raise RuntimeError(
            f"the floe binary is needed for the CLI reference: set FLOE_BIN or run "
            f"`cargo build` (looked for {binary})"
        )
    return str(binary)


def _help(binary: str, args: list[str]) -> str:
    out = subprocess.run(
        [binary, *args, "--help"],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "100", "NO_COLOR": "1"},
    ).stdout
    return out.rstrip() + "\n"


def _subcommands(help_text: str) -> list[tuple[str, str]]:
    """The (name, one-line summary) pairs of the help's ``Commands:`` section."""
    found = []
    section = False
    for line in help_text.splitlines():
        if line.strip() == "Commands:":
            section = True
            continue
        if section:
            if not line.startswith("  "):
                break
            m = re.match(r"^  (\S+)\s+(.*)$", line)
            if m:
                found.append((m.group(1), m.group(2).strip()))
            elif found and line.startswith("    "):  # a summary clap wrapped
                found[-1] = (found[-1][0], f"{found[-1][1]} {line.strip()}")
    return [(n, summary.replace("|", "\\|")) for n, summary in found if n != "help"]


def generate(binary: str | None = None) -> str:
    binary = binary or floe_bin()
    parts: list[str] = []

    def walk(path: list[str], summary: str, level: int) -> None:
        text = _help(binary, path)
        title = " ".join(["floe", *path])
        if path:
            anchor = "-".join(path)
            parts.append(f"{'#' * level} `{title}` {{#{anchor}}}\n\n{summary}\n")
        parts.append(f"```text\n{text}```\n")
        for name, sub_summary in _subcommands(text):
            walk([*path, name], sub_summary, min(level + 1, 4) if path else 2)

    walk([], "", 2)
    table = ["| command | what it does |", "|---|---|"]
    for name, summary in _subcommands(_help(binary, [])):
        table.append(f"| [`floe {name}`](#{name}) | {summary} |")
        for sub, sub_summary in _subcommands(_help(binary, [name])):
            table.append(f"| [`floe {name} {sub}`](#{name}-{sub}) | {sub_summary} |")
    return "\n".join(table) + "\n\n## `floe` {#floe}\n\n" + "\n".join(parts)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, generate())
    return markdown


if __name__ == "__main__":
    sys.stdout.write(generate(sys.argv[1] if len(sys.argv) > 1 else None))
