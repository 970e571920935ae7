"""Helpers shared by the two engine comparisons, which run as scripts and import this
file from their own directory: `compare_engines.py` (floe's Rust API against
Icechunk through zarr-python) and `compare_python.py` (floe's Python package against
Icechunk, both through zarr-python).

Both run each engine in its own interpreter (floe's package and each Icechunk
version live in different venvs) by re-running themselves with `--engine ...`; every
engine run prints one JSON line of timings (seconds, keys ending in `_s`; or
milliseconds, keys ending in `_ms`), and the driver prints the medians as a Markdown
table with floe's speed-up (other engine's time / floe's time).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile


def settle():
    """Before each run (the floe side of `compare_engines.py` does the same, see
    `benches/workloads.rs`): flushes the previous run's dirty pages, then drops the
    kernel's clean caches where allowed (root), so that ext4 does not scan past the
    inodes of files deleted in the last minute when it creates new ones. No run
    deletes anything: the driver removes every engine's repositories once the
    comparison ends."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
    except OSError:
        pass


def venv_python(venv, env_var=None):
    """The interpreter of a venv `.ci/run` sets up: `$env_var` (when given) if it
    names an existing file, else `$FLOE_VENV_DIR/<venv>/bin/python` (default directory
    /opt/floe-py: py311 has icechunk 1.x, py312 icechunk 2.x, pyfloe floe's package)
    when it exists, else None."""
    path = os.environ.get(env_var) if env_var else None
    if path and os.path.exists(path):
        return path
    path = os.path.join(os.environ.get("FLOE_VENV_DIR", "/opt/floe-py"), venv, "bin", "python")
    return path if os.path.exists(path) else None


def run_engine(cmd, env=None):
    """Runs one engine's command (in the temporary directory, with the environment
    `env`, by default this process's) and returns the JSON object on the last line of
    its output; exits with its error output when it fails."""
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          cwd=tempfile.gettempdir(), env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rerun_self(python, script, args, env=None):
    """Runs the script `script` (a `__file__`) again under the interpreter `python`
    with `args`, as `run_engine` does."""
    return run_engine([python, os.path.abspath(script)] + list(args), env)


def medians(runs, keys=None):
    """Per engine (`runs`: engine -> list of its runs' JSON objects), the median of
    each of `keys` (default: the keys of the engine's first run) that every run of
    the engine reported."""
    out = {}
    for engine, rs in runs.items():
        wanted = keys if keys is not None else list(rs[0])
        out[engine] = {k: statistics.median(r[k] for r in rs)
                       for k in wanted if all(k in r for r in rs)}
    return out


def _ms(key, value):
    return value * 1000 if key.endswith("_s") else value


def _row_name(key):
    for suffix in ("_ms", "_s"):
        if key.endswith(suffix):
            return key[: -len(suffix)]
    return key


def table(labels, med, keys):
    """Markdown: one row per key of `keys` (named without its `_s`/`_ms` unit suffix),
    times in ms per engine of `med` (as `medians` returns; `labels`: engine -> column
    name; `floe` first), and floe's speed-up against each other engine."""
    head = ["workload"] + [f"{labels[e]} (ms)" for e in med]
    others = [e for e in med if e != "floe"]
    head += [f"floe speed-up vs {labels[e].split()[-1]}" for e in others]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    for key in keys:
        row = [_row_name(key)]
        row += [f"{_ms(key, med[e][key]):.1f}" if key in med[e] else "n/a" for e in med]
        row += [f"{med[e][key] / med['floe'][key]:.2f}x"
                if key in med[e] and key in med["floe"] else "n/a"
                for e in others]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
