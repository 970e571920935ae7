"""The listing floor of a local repository: every file under REPO listed with its
size (`os.scandir`, one `stat` per file), the kernel's caches dropped first (needs
root). What any check of every object's size pays; `floe verify REPO` is compared
with it.

    python benches/listing_floor.py REPO [--runs 3]

Prints one line per run: files, bytes, seconds.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_compare_common import settle


def listing(root):
    """(files, bytes) under `root`, walked with `os.scandir` and one `stat` each."""
    files = size = 0
    pending = [root]
    while pending:
        for entry in os.scandir(pending.pop()):
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
            else:
                size += os.stat(entry.path).st_size
                files += 1
    return files, size


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("repo")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    for _ in range(args.runs):
        settle()
        t = time.perf_counter()
        files, size = listing(args.repo)
        print(f"{files} files, {size} bytes, {time.perf_counter() - t:.2f} s", flush=True)


if __name__ == "__main__":
    main()
