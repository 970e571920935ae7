"""Checks that an S3-compatible server is fit for floe's tests: the operations
object_store's S3 client uses, and conditional writes that are atomic under racing
writers. Exits non-zero on any violation, so a racy or incomplete emulator fails CI
instead of letting the storage tests pass by luck.

usage: check_conditional_writes.py BUCKET [--writers N] [--rounds N] [--chain N]

The endpoint and credentials come from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY and AWS_REGION (see s3util.py). Everything is written under a
fresh `conformance-check-<random>/` prefix of BUCKET and deleted afterwards.

Checks:
  features  PUT/GET/HEAD, ranged GET (206, and 416 past the end), DELETE (idempotent),
            ListObjectsV2 (prefix filter, key order, pagination), PUT If-None-Match: *,
            PUT If-Match: <etag> (412 on mismatch, 404/412 on a missing key), and GET
            If-Match / If-Unmodified-Since (412 when they do not hold).
  create    every round, N writers released together PUT the same new key with
            If-None-Match: *: exactly one 200, every other answer 412, and the
            stored bytes are the winner's.
  cas       every round, N writers released together PUT one existing key with
            If-Match: <its etag> and distinct bodies: exactly one 200, every other
            answer 412 (or 409, which S3 may send under contention), and the stored
            bytes and etag are the winner's.
  chain     N writers each run read-increment-write (If-Match) loops on one counter:
            the final value must equal the number of successful writes (no lost update).
"""

from __future__ import annotations

import argparse
import email.utils
import os
import sys
import threading
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from s3util import Client, Config  # noqa: E402

FAILURES: list[str] = []


def check(cond: bool, what: str) -> bool:
    if not cond:
        FAILURES.append(what)
        print(f"  FAIL: {what}", flush=True)
    return cond


def list_keys(c: Client, bucket: str, prefix: str, max_keys: int | None = None):
    """All keys under prefix via ListObjectsV2, following continuation tokens.
    Returns (keys, pages)."""
    import urllib.parse

    keys, pages, token = [], 0, None
    while True:
        q = {"list-type": "2", "prefix": prefix}
        if max_keys:
            q["max-keys"] = str(max_keys)
        if token:
            q["continuation-token"] = token
        query = urllib.parse.urlencode(sorted(q.items()), quote_via=urllib.parse.quote)
        r = c.request("GET", bucket, query=query)
        if not check(r.status == 200, f"ListObjectsV2 answered {r}"):
            return keys, pages
        pages += 1
        try:
            root = ET.fromstring(r.body)
        except ET.ParseError as e:
            check(False, f"ListObjectsV2 answer is not XML ({e}): {r.body[:200]!r}")
            return keys, pages
        ns = root.tag.split("}")[0] + "}" if root.tag.startswith("{") else ""
        keys += [e.findtext(f"{ns}Key") for e in root.findall(f"{ns}Contents")]
        truncated = (root.findtext(f"{ns}IsTruncated") or "false").lower() == "true"
        token = root.findtext(f"{ns}NextContinuationToken")
        if not truncated:
            return keys, pages
        if not check(bool(token), "truncated listing without NextContinuationToken"):
            return keys, pages


def features(c: Client, bucket: str, base: str):
    print("== features", flush=True)
    k = f"{base}/f/obj"
    r = c.request("PUT", bucket, k, b"0123456789")
    check(r.status == 200 and bool(r.etag), f"PUT answered {r} (etag {r.etag})")
    etag = r.etag

    r = c.request("GET", bucket, k)
    check(r.status == 200 and r.body == b"0123456789", f"GET answered {r}")
    check(r.etag == etag, f"GET etag {r.etag} != PUT etag {etag}")

    r = c.request("HEAD", bucket, k)
    check(r.status == 200, f"HEAD answered {r}")
    check(r.headers.get("content-length") == "10", f"HEAD content-length {r.headers}")
    check(r.etag == etag, f"HEAD etag {r.etag} != {etag}")
    check("last-modified" in r.headers, "HEAD has no Last-Modified")

    r = c.request("GET", bucket, k, headers={"Range": "bytes=2-5"})
    check(r.status == 206 and r.body == b"2345", f"ranged GET answered {r}")
    check(r.headers.get("content-range") == "bytes 2-5/10", f"Content-Range {r.headers}")
    r = c.request("GET", bucket, k, headers={"Range": "bytes=7-20"})
    check(r.status == 206 and r.body == b"789", f"ranged GET over the end answered {r}")
    check(r.headers.get("content-range") == "bytes 7-9/10", f"Content-Range {r.headers}")
    r = c.request("GET", bucket, k, headers={"Range": "bytes=10-20"})
    check(r.status == 416, f"ranged GET past the end answered {r}, expected 416")

    r = c.request("GET", bucket, f"{base}/f/missing")
    check(r.status == 404, f"GET of a missing key answered {r}")
    r = c.request("HEAD", bucket, f"{base}/f/missing")
    check(r.status == 404, f"HEAD of a missing key answered {r}")

    # Conditional PUTs.
    r = c.request("PUT", bucket, k, b"other", headers={"If-None-Match": "*"})
    check(r.status == 412, f"PUT If-None-Match:* on an existing key answered {r}")
    r = c.request("GET", bucket, k)
    check(r.body == b"0123456789", "a failed If-None-Match PUT changed the object")
    r = c.request("PUT", bucket, f"{base}/f/new", b"new", headers={"If-None-Match": "*"})
    check(r.status == 200, f"PUT If-None-Match:* on a new key answered {r}")
    r = c.request("PUT", bucket, k, b"stale", headers={"If-Match": '"0000"'})
    check(r.status == 412, f"PUT If-Match:<wrong etag> answered {r}")
    r = c.request("PUT", bucket, k, b"ABCDEFGHIJ", headers={"If-Match": etag})
    check(r.status == 200 and r.etag and r.etag != etag, f"PUT If-Match:<etag> answered {r}")
    new_etag = r.etag
    r = c.request("PUT", bucket, k, b"again", headers={"If-Match": etag})
    check(r.status == 412, f"PUT If-Match:<superseded etag> answered {r}")
    r = c.request("GET", bucket, k)
    check(r.body == b"ABCDEFGHIJ" and r.etag == new_etag, f"object after CAS is {r}")
    r = c.request("PUT", bucket, f"{base}/f/absent", b"x", headers={"If-Match": etag})
    check(r.status in (404, 412), f"PUT If-Match on a missing key answered {r}")
    r = c.request("HEAD", bucket, f"{base}/f/absent")
    check(r.status == 404, "a failed If-Match PUT created the object")

    # Conditional GETs (virtual chunk checksums).
    r = c.request("GET", bucket, k, headers={"If-Match": '"0000"'})
    check(r.status == 412, f"GET If-Match:<wrong etag> answered {r}")
    r = c.request("GET", bucket, k, headers={"If-Match": new_etag})
    check(r.status == 200 and r.body == b"ABCDEFGHIJ", f"GET If-Match:<etag> answered {r}")
    past = email.utils.formatdate(time.time() - 3600, usegmt=True)
    future = email.utils.formatdate(time.time() + 3600, usegmt=True)
    r = c.request("GET", bucket, k, headers={"If-Unmodified-Since": past})
    check(r.status == 412, f"GET If-Unmodified-Since:<an hour ago> answered {r}")
    r = c.request("GET", bucket, k, headers={"If-Unmodified-Since": future})
    check(r.status == 200, f"GET If-Unmodified-Since:<in an hour> answered {r}")
    r = c.request("GET", bucket, k, headers={"If-Match": new_etag, "Range": "bytes=0-1"})
    check(r.status == 206 and r.body == b"AB", f"ranged GET with If-Match answered {r}")

    # Listing: prefix filter on raw bytes, order, pagination.
    names = ["refs/branch.main/ref.json", "refs/branch.m/ref.json", "refs/tag.x/ref.json",
             "refs/branch.main2/ref.json", "a", "a/b", "a-b", "a0", "B", "\u00e9t\u00e9"]
    for n in names:
        check(c.request("PUT", bucket, f"{base}/l/{n}", n.encode()).status == 200, f"PUT {n}")
    keys, _ = list_keys(c, bucket, f"{base}/l/")
    got = [x[len(base) + 3:] for x in keys]
    want = sorted(names, key=lambda s: s.encode())
    check(got == want, f"ListObjectsV2 order {got} != {want}")
    keys, _ = list_keys(c, bucket, f"{base}/l/refs/branch.")
    got = [x[len(base) + 3:] for x in keys]
    want = sorted((n for n in names if n.startswith("refs/branch.")), key=lambda s: s.encode())
    check(got == want, f"ListObjectsV2 prefix filter {got} != {want}")
    keys, pages = list_keys(c, bucket, f"{base}/l/", max_keys=3)
    check(len(keys) == len(names) and pages >= 4, f"paginated listing: {len(keys)} keys in {pages} pages")

    # Deletes are idempotent.
    r = c.request("DELETE", bucket, k)
    check(r.status in (200, 204), f"DELETE answered {r}")
    r = c.request("DELETE", bucket, k)
    check(r.status in (200, 204), f"DELETE of a missing key answered {r}")
    r = c.request("GET", bucket, k)
    check(r.status == 404, f"GET after DELETE answered {r}")
    print(f"  {len(FAILURES)} failure(s)", flush=True)


class Race:
    """N worker threads, each with its own connection, released together per round."""

    def __init__(self, bucket: str, writers: int):
        self.bucket = bucket
        self.writers = writers
        self.clients = [Client() for _ in range(writers)]
        for cl in self.clients:
            cl.connect()

    def round(self, make_request):
        """Runs one round: make_request(i, client) returns a prepared request for
        writer i; all are signed first, then sent at once. Returns the responses."""
        prepared = [make_request(i, cl) for i, cl in enumerate(self.clients)]
        go = threading.Barrier(self.writers)
        out: list = [None] * self.writers

        def run(i):
            try:
                go.wait()
                out[i] = self.clients[i].send(prepared[i])
            except Exception as e:  # noqa: BLE001 - reported as a violation
                out[i] = e

        threads = [threading.Thread(target=run, args=(i,)) for i in range(self.writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out

    def close(self):
        for cl in self.clients:
            cl.close()


def race_create(race: Race, c: Client, base: str, rounds: int):
    print(f"== create: {rounds} rounds x {race.writers} writers, PUT If-None-Match: *", flush=True)
    statuses: dict = {}
    for r in range(rounds):
        key = f"{base}/create/{r}"
        res = race.round(
            lambda i, cl: cl.prepare("PUT", race.bucket, key, f"writer {i} round {r}".encode(),
                                     headers={"If-None-Match": "*"}))
        codes = [x.status if hasattr(x, "status") else repr(x) for x in res]
        for s in codes:
            statuses[s] = statuses.get(s, 0) + 1
        winners = [i for i, s in enumerate(codes) if s == 200]
        check(len(winners) == 1, f"create round {r}: {len(winners)} winners, answers {codes}")
        check(all(s in (200, 412) for s in codes), f"create round {r}: unexpected answers {codes}")
        if len(winners) == 1:
            got = c.request("GET", race.bucket, key)
            check(got.body == f"writer {winners[0]} round {r}".encode(),
                  f"create round {r}: stored {got.body!r}, winner was writer {winners[0]}")
    print(f"  answers: {dict(sorted(statuses.items(), key=str))}", flush=True)


def race_cas(race: Race, c: Client, base: str, rounds: int):
    print(f"== cas: {rounds} rounds x {race.writers} writers, PUT If-Match: <same etag>", flush=True)
    statuses: dict = {}
    key = f"{base}/cas/obj"
    for r in range(rounds):
        init = c.request("PUT", race.bucket, key, f"initial {r}".encode())
        if not check(init.status == 200 and init.etag, f"cas round {r}: setup PUT {init}"):
            continue
        etag = init.etag
        res = race.round(
            lambda i, cl: cl.prepare("PUT", race.bucket, key, f"writer {i} round {r}".encode(),
                                     headers={"If-Match": etag}))
        codes = [x.status if hasattr(x, "status") else repr(x) for x in res]
        for s in codes:
            statuses[s] = statuses.get(s, 0) + 1
        winners = [i for i, s in enumerate(codes) if s == 200]
        check(len(winners) == 1, f"cas round {r}: {len(winners)} winners, answers {codes}")
        check(all(s in (200, 409, 412) for s in codes), f"cas round {r}: unexpected answers {codes}")
        if len(winners) == 1:
            w = winners[0]
            got = c.request("GET", race.bucket, key)
            check(got.body == f"writer {w} round {r}".encode(),
                  f"cas round {r}: stored {got.body!r}, winner was writer {w}")
            check(got.etag == res[w].etag,
                  f"cas round {r}: stored etag {got.etag}, winner was told {res[w].etag}")
    print(f"  answers: {dict(sorted(statuses.items(), key=str))}", flush=True)


def race_chain(bucket: str, c: Client, base: str, writers: int, attempts: int):
    print(f"== chain: {writers} writers x {attempts} read-increment-CAS attempts", flush=True)
    key = f"{base}/chain/counter"
    check(c.request("PUT", bucket, key, b"0").status == 200, "chain: setup PUT")
    wins = [0] * writers
    errors: list = []
    go = threading.Barrier(writers)

    def run(i):
        cl = Client()
        try:
            go.wait()
            for n in range(attempts):
                cur = cl.request("GET", bucket, key)
                if cur.status != 200:
                    errors.append(f"writer {i}: GET {cur}")
                    return
                value = int(cur.body.split(b":")[0])
                body = f"{value + 1}:writer {i}:attempt {n}".encode()
                r = cl.request("PUT", bucket, key, body, headers={"If-Match": cur.etag})
                if r.status == 200:
                    wins[i] += 1
                elif r.status not in (409, 412):
                    errors.append(f"writer {i}: PUT {r}")
                    return
        except Exception as e:  # noqa: BLE001
            errors.append(f"writer {i}: {e!r}")
        finally:
            cl.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not errors, f"chain: errors {errors}")
    final = int(c.request("GET", bucket, key).body.split(b":")[0])
    total = sum(wins)
    check(final == total, f"chain: counter is {final} but {total} writes succeeded (lost update)")
    check(total >= attempts, f"chain: only {total} successful writes in {writers * attempts} attempts")
    print(f"  {total} successful CAS writes of {writers * attempts}, counter = {final}", flush=True)


def cleanup(c: Client, bucket: str, base: str):
    before = len(FAILURES)
    try:
        keys, _ = list_keys(c, bucket, base + "/")
        for k in keys:
            c.request("DELETE", bucket, k)
    except Exception as e:  # noqa: BLE001 - leftovers are harmless
        print(f"  (cleanup of {base}/ failed: {e!r})")
    del FAILURES[before:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bucket")
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--chain", type=int, default=20, help="attempts per writer in the chain check")
    ap.add_argument("--checks", default="features,create,cas,chain",
                    help="comma-separated subset of: features,create,cas,chain")
    args = ap.parse_args()
    if args.writers < 2:
        ap.error("--writers must be at least 2")
    checks = set(args.checks.split(","))
    if not checks <= {"features", "create", "cas", "chain"}:
        ap.error(f"unknown checks in {args.checks!r}")

    cfg = Config()
    print(f"S3 server check: {cfg.endpoint} bucket {args.bucket}, {args.writers} parallel writers",
          flush=True)
    base = f"conformance-check-{os.urandom(6).hex()}"
    c = Client(cfg)
    started = time.monotonic()
    try:
        if "features" in checks:
            features(c, args.bucket, base)
        race = Race(args.bucket, args.writers)
        try:
            if "create" in checks:
                race_create(race, c, base, args.rounds)
            if "cas" in checks:
                race_cas(race, c, base, args.rounds)
        finally:
            race.close()
        if "chain" in checks:
            race_chain(args.bucket, c, base, args.writers, args.chain)
    finally:
        cleanup(c, args.bucket, base)
    took = time.monotonic() - started
    if FAILURES:
        print(f"S3 server check FAILED: {len(FAILURES)} violation(s) in {took:.1f}s", flush=True)
        for f in FAILURES[:50]:
            print(f"  - {f}")
        return 1
    print(f"S3 server check passed in {took:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
