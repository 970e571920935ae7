"""10^6 virtual refs written from Python through the vectorized call, committed, and
read back (floe issue 31's scale target: writes under 5 s, bounded memory, no Python
object per ref in the engine).

Layout: ``--refs`` int32 chunks of one value each, spread over ``--files`` local files
(back to back); array ``big`` holds every ref, array ``small`` the first 1,000. Phases,
each timed, with the process's resident memory after it and its peak so far
(``VmRSS`` / ``VmHWM``, Linux):

1. ``set_virtual_refs_arr`` of all refs (locations as a list of ``str``, offsets and
   lengths as numpy arrays);
2. ``commit``;
3. a fresh ``Repository.open`` and reading variable ``small`` whole, and the first
   10,000 values of ``big``, checked against the files.

    python benches/python_million_refs.py [--refs 1000000] [--files 10]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import zarr

import floe


def _mem() -> str:
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.strip()
    return f"RSS {fields.get('VmRSS', '?')}, peak {fields.get('VmHWM', '?')}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--refs", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=10)
    args = ap.parse_args()
    n, nfiles = args.refs, args.files
    per_file = -(-n // nfiles)
    tmp = tempfile.mkdtemp(prefix="floe-million-")
    data = os.path.join(tmp, "data")
    os.mkdir(data)
    values = np.arange(n, dtype="<i4")
    for i in range(nfiles):
        with open(os.path.join(data, f"f{i}.bin"), "wb") as f:
            f.write(values[i * per_file : (i + 1) * per_file].tobytes())
    prefix = f"file://{data}/"
    config = floe.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        floe.VirtualChunkContainer(prefix, floe.local_filesystem_store(data))
    )
    access = {prefix: floe.credentials.LocalFileSystemAccess}
    storage = floe.local_filesystem_storage(os.path.join(tmp, "repo"))
    repo = floe.Repository.create(storage, config, authorize_virtual_chunk_access=access)
    s = repo.writable_session("main")
    for name, size in (("big", n), ("small", min(n, 1000))):
        zarr.create_array(s.store, name=name, shape=(size,), chunks=(1,), dtype="<i4",
                          compressors=None, fill_value=-1)
    idx = np.arange(n)
    locations = [f"{prefix}f{i}.bin" for i in range(nfiles) for _ in range(per_file)][:n]
    offsets = (idx % per_file) * 4
    lengths = np.full(n, 4)
    print(f"{n} refs over {nfiles} files; inputs built: {_mem()}")

    t = time.perf_counter()
    failed = s.store.set_virtual_refs_arr("big", (n,), locations, offsets, lengths)
    m = min(n, 1000)
    s.store.set_virtual_refs_arr("small", (m,), locations[:m], offsets[:m], lengths[:m])
    write_s = time.perf_counter() - t
    assert failed is None
    print(f"  set_virtual_refs_arr  {write_s:7.3f} s   {_mem()}")

    t = time.perf_counter()
    s.commit(f"{n} virtual refs")
    commit_s = time.perf_counter() - t
    print(f"  commit                {commit_s:7.3f} s   {_mem()}")
    del s, locations

    t = time.perf_counter()
    reader = floe.Repository.open(storage, config, authorize_virtual_chunk_access=access)
    store = reader.readonly_session("main").store
    small = zarr.open_array(store, path="small", mode="r")[...]
    head = zarr.open_array(store, path="big", mode="r")[: min(n, 10_000)]
    read_s = time.perf_counter() - t
    assert np.array_equal(small, values[:m])
    assert np.array_equal(head, values[: min(n, 10_000)])
    print(f"  open + read small ({m}) and big[:10000]  {read_s:7.3f} s   {_mem()}")


if __name__ == "__main__":
    main()
