"""floe against floe: the `workloads` bench executable (benches/workloads.rs) built from
two commits, on the same data, in one run, for changes that must not slow floe down.

    python benches/compare_commits.py BEFORE_BIN AFTER_BIN [--mib 256] [--runs 8]
        [--workload NAME] [--json OUT]

Build each executable with `cargo bench --bench workloads --no-run` in a checkout of
its commit (cargo prints its path). The two alternate in ABBA order (before, after,
after, before, ...), so that neither always runs on the file system the other just
filled; the table gives the median of the runs per workload in milliseconds and
after / before. The workloads, the data and the file-system settling are those of
`compare_engines.py`.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_engines  # noqa: E402
from engine_compare_common import run_engine  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("before", help="the workloads executable of the earlier commit")
    p.add_argument("after", help="the workloads executable of the later commit")
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--workload", choices=compare_engines.WORKLOADS)
    p.add_argument("--json", help="save every run's timings here")
    args = p.parse_args()
    bins = {"before": args.before, "after": args.after}
    only = ["--workload", args.workload] if args.workload else []
    runs = {k: [] for k in bins}
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data.f32")
        compare_engines.make_data(args.mib).tofile(data)
        scratch = os.path.join(tmp, "scratch")
        os.makedirs(scratch)
        common = ["--mib", str(args.mib), "--runs", "1", "--data", data, "--scratch", scratch]
        for r in range(args.runs):
            order = list(bins.items()) if r % 2 == 0 else list(bins.items())[::-1]
            for name, exe in order:
                print(f"run {r + 1}/{args.runs}: {name}", file=sys.stderr, flush=True)
                runs[name].append(run_engine([exe] + common + only))
    print(f"{args.mib} MiB, median of {args.runs} runs (ABBA), local filesystem\n")
    print("| workload | before (ms) | after (ms) | after / before |\n|---|---|---|---|")
    for w in compare_engines.WORKLOADS:
        key = f"{w}_s"
        if all(key in r for rs in runs.values() for r in rs):
            b = statistics.median(r[key] for r in runs["before"]) * 1e3
            a = statistics.median(r[key] for r in runs["after"]) * 1e3
            print(f"| {w} | {b:.1f} | {a:.1f} | {a / b:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
