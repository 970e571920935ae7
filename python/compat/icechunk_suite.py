#!/usr/bin/env python3
"""Runs Icechunk's own Python test suite on floe and on icechunk 2.3.0, side by side.

A local yardstick for issue 30 (floe as a drop-in for Icechunk's Python API), not part
of CI: Icechunk's tests are another project's code, read from a git clone at run time
and never copied into floe.

    python python/compat/icechunk_suite.py --mirror ICECHUNK_GIT_DIR [--work DIR] \
        [--setup] [--floe-python PY] [--icechunk-python PY] [--only tests/test_x.py ...] \
        [--engines floe,icechunk]

- ``--mirror``: a (bare) git clone of earth-mover/icechunk; ``--rev`` picks the
  revision (default ``HEAD``). ``icechunk-python/tests`` is exported from it into
  ``WORK/run-ENGINE`` for each engine.
- ``--setup`` creates two Python 3.12 venvs under ``WORK`` (``venv-floe`` with floe
  built from this checkout, ``venv-icechunk`` with ``icechunk==2.3.0``), both with the
  same test dependencies (zarr 3.4.2, xarray, dask, hypothesis, ...). Without it, give
  ``--floe-python`` / ``--icechunk-python`` (or reuse venvs an earlier ``--setup`` made).
- floe runs through ``python/compat/shim``: ``import icechunk`` there is exactly
  ``floe.install_as_icechunk()``; Icechunk's pure-Python ``icechunk.testing`` helpers
  are copied into a scratch copy of the shim from the icechunk venv at run time.
- Tests that need services this machine lacks are deselected for both engines
  (``python/compat/excluded.txt``, with reasons); hypothesis runs one bounded,
  derandomized profile (``python/compat/floe_compat_plugin.py``); each test has 120 s and each
  file ``--file-timeout`` seconds.

Prints one row per file (passed / failed / errors / skipped per engine) and last the
line ``icechunk-suite: floe passes B of the P tests icechunk 2.3.0 passes (..%)``
(the goal of issue 30: at least 95%), with each engine's own passed/run counts. Results (junit XML
and logs per file) stay in ``WORK/results/ENGINE``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parent.parent
ENGINES = ("floe", "icechunk")
TEST_DEPS = [
    "zarr==3.4.2",
    "numpy",
    "xarray",
    "dask[distributed]",
    "pytest",
    "pytest-asyncio",
    "pytest-timeout",
    "hypothesis",
    "boto3",
    "mypy-boto3-s3",
    "termcolor",
    "rich",
    "flatbuffers",
    "zstandard",
    "pandas",
    "packaging",
]


def run(cmd: list[str], **kw) -> None:
    print("   $", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def setup_venvs(work: Path, python: str) -> None:
    """Creates WORK/venv-floe and WORK/venv-icechunk (Python 3.12) when missing, and
    (re)installs floe from this checkout into venv-floe."""
    for engine in ENGINES:
        venv = work / f"venv-{engine}"
        if not (venv / "bin" / "python").exists():
            run([python, "-m", "venv", str(venv)])
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
            extra = ["icechunk==2.3.0"] if engine == "icechunk" else []
            run(pip + extra + TEST_DEPS)
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", str(CHECKOUT / "target"))
    run(
        [str(work / "venv-floe" / "bin" / "python"), "-m", "pip", "install", "-q",
         "--no-deps", "--force-reinstall", str(CHECKOUT / "python")],
        env=env,
    )


def export_tests(mirror: str, rev: str, dest: Path) -> Path:
    """Exports icechunk-python/{tests,pyproject.toml} at REV into DEST; returns the
    icechunk-python folder."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", mirror, "archive", rev, "icechunk-python/tests",
         "icechunk-python/pyproject.toml"],
        check=True, capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest / "icechunk-python"


def make_shim(work: Path, icechunk_python: str) -> Path:
    """Copies python/compat/shim to WORK/shim and Icechunk's icechunk.testing helpers
    (from the icechunk venv) beside it; returns the folder to put on PYTHONPATH."""
    shim = work / "shim"
    if shim.exists():
        shutil.rmtree(shim)
    shutil.copytree(HERE / "shim", shim)
    testing = subprocess.run(
        [icechunk_python, "-c",
         "import os, icechunk.testing as t; print(os.path.dirname(t.__file__))"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    shutil.copytree(testing, shim / "icechunk" / "testing",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return shim


def test_files(root: Path, only: list[str]) -> list[str]:
    if only:
        return only
    files = sorted(
        str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py")
    )
    return files


def run_file(engine: str, python: str, root: Path, f: str, results: Path,
             pythonpath: str, timeout: int) -> None:
    name = f.removeprefix("tests/").removesuffix(".py").replace("/", "__")
    env = dict(os.environ)
    env["PYTHONPATH"] = pythonpath
    env["FLOE_COMPAT_EXCLUDE"] = str(HERE / "excluded.txt")
    env.pop("CI", None)
    cmd = [
        python, "-m", "pytest", f, "-q", "-p", "floe_compat_plugin", "-p", "no:cacheprovider",
        "-o", "addopts=-ra --strict-markers", "-o", "log_cli=false",
        "--timeout=120", f"--junitxml={results / (name + '.xml')}",
    ]
    with open(results / f"{name}.log", "w") as log:
        try:
            subprocess.run(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                           timeout=timeout)
        except subprocess.TimeoutExpired:
            log.write(f"\nfile timed out after {timeout} s\n")


def outcomes(results: Path, f: str) -> dict[str, str] | None:
    """Each test of one file's junit XML by id: "passed", "failed", "error" or
    "skipped"; None when the file left no XML (it timed out or crashed)."""
    name = f.removeprefix("tests/").removesuffix(".py").replace("/", "__")
    path = results / f"{name}.xml"
    if not path.exists():
        return None
    try:
        tree = ET.parse(path)
    except ET.ParseError:
        return None
    out = {}
    for case in tree.getroot().iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        kinds = {child.tag for child in case}
        if "error" in kinds:
            out[test_id] = "error"
        elif "failure" in kinds:
            out[test_id] = "failed"
        elif "skipped" in kinds:
            out[test_id] = "skipped"
        else:
            out[test_id] = "passed"
    return out


def counts(results: Path, f: str) -> tuple[int, int, int, int] | None:
    """(passed, failed, errors, skipped) of one file, or None."""
    tests = outcomes(results, f)
    if tests is None:
        return None
    values = list(tests.values())
    return tuple(values.count(k) for k in ("passed", "failed", "error", "skipped"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", help="required unless --report-only")
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--work", default="/tmp/floe-icechunk-suite")
    ap.add_argument("--setup", action="store_true")
    ap.add_argument("--python", default="python3.12",
                    help="interpreter for --setup's venvs")
    ap.add_argument("--floe-python")
    ap.add_argument("--icechunk-python")
    ap.add_argument("--engines", default="floe,icechunk")
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--file-timeout", type=int, default=900)
    ap.add_argument("--report-only", action="store_true",
                    help="summarize WORK/results without running anything")
    args = ap.parse_args()

    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if args.setup:
        setup_venvs(work, args.python)
    pythons = {
        "floe": args.floe_python or str(work / "venv-floe" / "bin" / "python"),
        "icechunk": args.icechunk_python or str(work / "venv-icechunk" / "bin" / "python"),
    }
    engines = [e for e in args.engines.split(",") if e]
    t0 = time.time()
    roots = {}
    if args.report_only:
        engines = [e for e in ENGINES if (work / "results" / e).is_dir()]
        files = test_files(work / f"run-{engines[0]}" / "icechunk-python", args.only)
    else:
        shim = make_shim(work, pythons["icechunk"])
        for engine in engines:
            roots[engine] = export_tests(args.mirror, args.rev, work / f"run-{engine}")
            results = work / "results" / engine
            if results.exists():
                shutil.rmtree(results)
            results.mkdir(parents=True)
        files = test_files(next(iter(roots.values())), args.only)
    for f in files:
        for engine in engines if not args.report_only else []:
            pp = f"{shim}:{HERE}" if engine == "floe" else str(HERE)
            run_file(engine, pythons[engine], roots[engine], f,
                     work / "results" / engine, pp, args.file_timeout)
        row = [f"{f:<50}"]
        for engine in engines:
            c = counts(work / "results" / engine, f)
            row.append(f"{engine} " + ("no result" if c is None else "%d/%d/%d/%d" % c))
        print("  ".join(row), flush=True)
    if (work / "results" / "icechunk").is_dir() and "icechunk" not in engines:
        engines.append("icechunk")  # an earlier run's baseline, for the comparison
    totals = {}
    for engine in engines:
        p = n = 0
        for f in files:
            c = counts(work / "results" / engine, f)
            if c:
                p += c[0]
                n += c[0] + c[1] + c[2]
        totals[engine] = (p, n)
    print(f"(passed/failed/errors/skipped per engine; {time.time() - t0:.0f} s)")
    if set(engines) == set(ENGINES):
        # The goal of issue 30: the tests icechunk 2.3.0 passes that also pass on floe.
        both = ic_passed = 0
        for f in files:
            ic = outcomes(work / "results" / "icechunk", f) or {}
            fl = outcomes(work / "results" / "floe", f) or {}
            for test_id, result in ic.items():
                if result == "passed":
                    ic_passed += 1
                    both += fl.get(test_id) == "passed"
        print(
            f"icechunk-suite: floe passes {both} of the {ic_passed} tests icechunk 2.3.0"
            f" passes ({100 * both / max(ic_passed, 1):.1f}%); floe {totals['floe'][0]}"
            f"/{totals['floe'][1]} passed, icechunk 2.3.0 {totals['icechunk'][0]}"
            f"/{totals['icechunk'][1]}"
        )
    else:
        for engine, (p, n) in totals.items():
            print(f"icechunk-suite: {engine} {p}/{n} passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
