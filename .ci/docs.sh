#!/usr/bin/env bash
# The documentation site: builds it, runs every example in it, and opens it in a
# headless Chromium. Run from anywhere as `bash .ci/docs.sh`; .ci/run calls it after
# the Python package is installed.
#
#   1. a venv $FLOE_VENV_DIR/pydocs with MkDocs Material, mkdocstrings and Playwright
#      (pinned in .ci/requirements-docs.txt; reused while that file is unchanged);
#   2. `mkdocs build --strict` into a temporary directory (broken links, missing
#      pages and docstring warnings fail; the CLI reference is generated from
#      $FLOE_BIN's --help by docs/hooks/cli_reference.py);
#   3. every example of docs/**/*.md and README.md, executed by pytest
#      (.ci/test_docs_examples.py) in the pyfloe venv, which has floe, xarray and Dask;
#   4. .ci/docs_browser_check.py: Debian's chromium (installed with apt-get when
#      missing, as root) loads the index, the quickstart and the Python API
#      reference; no console errors, every internal link answers 200. Screenshots of
#      the quickstart go to $FLOE_DOCS_SCREENS (default: the temporary directory).
#
# Settings: FLOE_VENV_DIR (default /opt/floe-py), FLOE_BIN (default
# $CARGO_TARGET_DIR/debug/floe, built with `cargo build` when missing),
# FLOE_DOCS_SITE (keep the built site there). Under CI=true nothing is skipped: a
# browser that cannot be installed fails the script.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
START=$SECONDS
VENV_DIR="${FLOE_VENV_DIR:-/opt/floe-py}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
export FLOE_BIN="${FLOE_BIN:-$CARGO_TARGET_DIR/debug/floe}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/floe-docs.XXXXXX")"
SITE="${FLOE_DOCS_SITE:-$WORK/site}"
SCREENS="${FLOE_DOCS_SCREENS:-$WORK/screens}"
trap 'rm -rf "$WORK"' EXIT

# `bash .ci/docs.sh --setup` only prepares the tools (the venv and chromium), which
# .ci/run does before the Rust tests (floe serve's history-browser test uses them too).
SETUP_ONLY=false
if [[ "${1:-}" == "--setup" ]]; then SETUP_ONLY=true; fi

step() { printf -- '-- docs: %s  [+%ds]\n' "$*" "$((SECONDS - START))"; }
fail() {
    echo "docs: ERROR: $*" >&2
    exit 1
}

step "venv $VENV_DIR/pydocs"
DOCS_PY="$VENV_DIR/pydocs/bin/python"
REQ="$ROOT/.ci/requirements-docs.txt"
STAMP="$VENV_DIR/pydocs/.floe-requirements.sha256"
SUM="$(sha256sum "$REQ" | cut -d' ' -f1)"
if [[ -x "$DOCS_PY" && "$(cat "$STAMP" 2>/dev/null)" == "$SUM" ]] \
    && "$DOCS_PY" -c "import mkdocs, material, mkdocstrings_handlers.python, playwright" 2>/dev/null; then
    echo "reusing $VENV_DIR/pydocs"
else
    # The pyfloe venv's interpreter (Python 3.11, found by .ci/run) makes the venv;
    # without it, python3.11 or python3 from the PATH.
    BASE="$VENV_DIR/pyfloe/bin/python"
    [[ -x "$BASE" ]] || BASE="$(command -v python3.11 || command -v python3)" || fail "no python3"
    [[ -x "$DOCS_PY" ]] || "$BASE" -m venv "$VENV_DIR/pydocs" || fail "creating $VENV_DIR/pydocs failed"
    "$DOCS_PY" -m pip install -q --disable-pip-version-check --no-input -r "$REQ" \
        || fail "pip install -r $REQ failed"
    echo "$SUM" >"$STAMP"
fi

step "chromium"
CHROMIUM="${FLOE_CHROMIUM:-/usr/bin/chromium}"
if [[ ! -x "$CHROMIUM" ]]; then
    if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "installing Debian's chromium"
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
            >"$WORK/apt.log" 2>&1 || { tail -n 20 "$WORK/apt.log" >&2; true; }
    fi
fi
if [[ "$SETUP_ONLY" == true ]]; then
    if [[ -x "$CHROMIUM" ]]; then
        echo "chromium: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
    elif [[ "${CI:-}" == "true" ]]; then
        fail "no chromium at $CHROMIUM and it could not be installed (apt-get install chromium, as root)"
    else
        echo "no chromium at $CHROMIUM (apt-get install chromium, as root): browser checks will be skipped"
    fi
    exit 0
fi

if [[ ! -x "$FLOE_BIN" ]]; then
    step "cargo build (the floe CLI, for the CLI reference and the console examples)"
    cargo build --locked --bin floe || fail "cargo build failed"
fi

step "mkdocs build --strict"
export NO_MKDOCS_2_WARNING=1  # the theme's end-of-life notice, printed on every build
"$DOCS_PY" -m mkdocs build --strict --quiet --config-file "$ROOT/mkdocs.yml" --site-dir "$SITE" \
    || fail "mkdocs build --strict failed (see above)"
echo "built $(find "$SITE" -name '*.html' | wc -l) pages into $SITE"

step "examples: every code block of docs/ and README.md"
PYFLOE="$VENV_DIR/pyfloe/bin/python"
"$PYFLOE" -c "import floe, xarray, dask" || fail "the pyfloe venv needs floe, xarray and dask"
(cd "$WORK" && "$PYFLOE" -m pytest -q -p no:cacheprovider -p no:asyncio -c /dev/null \
    --rootdir "$ROOT" "$ROOT/.ci/test_docs_examples.py") || fail "a documentation example failed"

step "browser: headless Chromium on the built site"
CHROMIUM="${FLOE_CHROMIUM:-/usr/bin/chromium}"
if [[ -x "$CHROMIUM" ]]; then
    "$DOCS_PY" "$ROOT/.ci/docs_browser_check.py" "$SITE" --chromium "$CHROMIUM" --screens "$SCREENS" \
        || fail "the browser check failed (see above)"
elif [[ "${CI:-}" == "true" ]]; then
    fail "no chromium at $CHROMIUM and it could not be installed (apt-get install chromium, as root)"
else
    echo "no chromium at $CHROMIUM (apt-get install chromium, as root): browser check skipped"
fi

step "done"
