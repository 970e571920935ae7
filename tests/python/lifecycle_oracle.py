"""The oracle for floe's snapshot expiry and garbage collection: runs Icechunk's
`expire_snapshots` and then `garbage_collect` on a spec-1 repository and prints what
Icechunk reports and leaves behind.

Usage:
  lifecycle_oracle.py REPO EXPIRE_BEFORE_US GC_BEFORE_US [--delete-expired-branches]
                      [--delete-expired-tags] [--dry-run]
      Times are microseconds since the Unix epoch (UTC). Prints one JSON object:
      {"expired": [snapshot ids, sorted], "gc": {GCSummary fields},
       "branches": {name: id}, "tags": {name: id},
       "ancestry": {"branch.NAME" | "tag.NAME": [ids, newest first]}}
"""

import datetime as dt
import json
import os
import sys
import warnings

import icechunk as ic

warnings.filterwarnings("ignore")

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def at(us):
    return EPOCH + dt.timedelta(microseconds=int(us))


def main():
    repo_path, expire_us, gc_us, *flags = sys.argv[1:]
    repo = ic.Repository.open(ic.local_filesystem_storage(repo_path))
    expired = repo.expire_snapshots(
        at(expire_us),
        delete_expired_branches="--delete-expired-branches" in flags,
        delete_expired_tags="--delete-expired-tags" in flags,
    )
    summary = repo.garbage_collect(at(gc_us), dry_run="--dry-run" in flags)
    # Reopen: expiry rewrote snapshots that an open repository may have cached.
    repo = ic.Repository.open(ic.local_filesystem_storage(repo_path))
    branches = {b: repo.lookup_branch(b) for b in sorted(repo.list_branches())}
    tags = {t: repo.lookup_tag(t) for t in sorted(repo.list_tags())}
    ancestry = {f"branch.{b}": [s.id for s in repo.ancestry(branch=b)] for b in branches}
    ancestry.update({f"tag.{t}": [s.id for s in repo.ancestry(tag=t)] for t in tags})
    fields = ["bytes_deleted", "chunks_deleted", "manifests_deleted", "snapshots_deleted",
              "attributes_deleted", "transaction_logs_deleted", "objects_failed_to_delete",
              "throttled_batches", "delete_errors", "skipped_phases"]
    json.dump({
        "expired": sorted(expired),
        "gc": {f: getattr(summary, f) for f in fields},
        "branches": branches,
        "tags": tags,
        "ancestry": ancestry,
    }, sys.stdout)


if __name__ == "__main__":
    main()
    # Icechunk 2.3.0's extension can crash (SIGSEGV) while the interpreter shuts
    # down, after the work is done and printed (seen in CI): leave without it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
