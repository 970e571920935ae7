"""floe's zarr-python codec pipeline: whole batches of chunks of a floe store in Rust.

zarr-python reads and writes an array's chunks through a *codec pipeline*
(``zarr.abc.codec.CodecPipeline``; its class is the ``codec_pipeline.path`` setting of
``zarr.config``). Its default, ``BatchedCodecPipeline``, fetches, decodes and copies
chunk by chunk in Python. ``FloeCodecPipeline`` hands a whole batch of an array stored
in a floe session (a ``FloeStore``) to Rust in one call: floe's region I/O resolves
the chunk refs once per manifest, fetches the bytes (batched, so reads of one object
coalesce), runs the codecs on floe's compute pool, decodes the elements straight
into zarr's output array (or encodes them straight from the input on writes: both
are lent to Rust for the call, not copied; a batch over ``SLAB_BYTES`` goes in slabs
of whole chunk rows, two in flight), fills missing chunks with the fill value,
read-modify-writes partially covered chunks, reads only the inner chunks a selection
needs from shards, and erases chunks that end up all fill value unless
``write_empty_chunks``; the GIL is released throughout. A call ends by waking the
event loop that awaits it through a socket the loop watches (``_LoopCalls``), so
no Rust thread takes the GIL. A read or write cancelled while Rust works (say by
``asyncio.wait_for``) waits for the Rust calls it started before its cancellation
returns: a cancelled write never lands afterwards over a newer one, and a cancelled
read never writes into the caller's buffer afterwards.

What goes to Rust: zarr v3 arrays (floe stores hold no v2 nodes) in a floe store with
a regular chunk grid, codecs floe implements (``bytes``, ``transpose``, ``gzip``,
``zstd``, ``blosc``, ``crc32c``, ``sharding_indexed``, and the numcodecs codecs
``numcodecs.zlib``, ``gzip``, ``zstd``, ``blosc``, ``shuffle``, ``bz2``, ``lzma``,
``lz4``, ``crc32``, ``crc32c``, ``adler32``, ``fletcher32``, ``delta``,
``fixedscaleoffset``, ``quantize``, ``bitround``, ``packbits``, ``astype``),
fixed-size numeric or boolean data types in native byte order. A *basic* selection
(integers and slices of step 1) forming one box of the array is read or written in
one call per slab; reads by any other selection zarr-python supports (orthogonal
selections with integer or boolean arrays, coordinate selections through
``vindex``, masks, stepped slices) read in Rust only the box each chunk's selection
spans, and of a shard only the inner chunks it touches, and numpy applies the
selection to that box (``floe._selection_reads``). Everything else (other stores, a
codec or data type floe does not implement, strings, writes by fancy or stepped
selections, F-order or non-native outputs) goes to zarr-python's own
``BatchedCodecPipeline`` for that batch: never a different answer from zarr's.

On by default once ``floe`` is imported (for floe stores only; every other store keeps
zarr's pipeline, which this class delegates to). Off with the environment variable
``FLOE_CODEC_PIPELINE=0`` (read at import) or ``floe.codec_pipeline.disable()``;
``enable()`` turns it back on. Supports zarr-python ``>=3.1,<4`` (tested with 3.1).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import zarr
from zarr.abc.codec import CodecPipeline
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.storage import StorePath

from floe._selection_reads import plan as _selection_plan
from floe._settle import wait_ended

__all__ = ["FloeCodecPipeline", "enable", "disable", "is_enabled"]

#: The dotted path zarr's ``codec_pipeline.path`` names this class by.
PIPELINE_PATH = "floe.codec_pipeline.FloeCodecPipeline"
_ZARR_DEFAULT = "zarr.core.codec_pipeline.BatchedCodecPipeline"

#: Whether batches of floe stores go to Rust (``enable()`` / ``disable()``).
_enabled = True

#: Writes of an unsharded array whose chunks hold more than this many decoded bytes
#: go to zarr's pipeline; ``None`` (the default): every write batch goes to Rust.
#: On the quiet 2-core development VM, 256 MiB in 1 MiB chunks write faster through
#: Rust, which encodes straight from the caller's array (stop 39: zstd 0.26 s against
#: 0.56 s, raw 0.04-0.07 s against 0.17 s); an earlier measurement on a loaded
#: machine had routed chunks over 256 KiB to zarr's pipeline.
WRITE_MAX_CHUNK_BYTES: int | None = None

#: A batch larger than this many bytes goes to Rust in slabs of whole chunk rows
#: along the first axis, each about this size (at least one row of chunks), two in
#: flight. With zarr's buffers lent to Rust (stop 39) 64 MiB slabs measured as fast
#: as or faster than one call per 256 MiB batch on the development VM (raw write
#: 44-73 ms against 56-110 ms, zstd write 230-266 ms against 238-327 ms).
#: ``None``: one call per batch.
SLAB_BYTES: int | None = 64 << 20

#: Rust reads in flight at once for a selection that is not a box (one read per run
#: of inner chunks the selection touches, or per chunk of an unsharded array).
SELECTION_READS_IN_FLIGHT = 64

_INT = re.compile(r"\d+")

#: Batches handled since import, by path: ``rust_read``/``rust_write`` went to Rust
#: as boxes, ``rust_read_selection`` to Rust by a selection that is not a box,
#: ``zarr_read``/``zarr_write`` to zarr's pipeline (of a floe-pipeline array). For
#: tests and profiling; reset with ``stats.clear()``.
stats: dict[str, int] = {}


def _count(what: str) -> None:
    stats[what] = stats.get(what, 0) + 1


def is_enabled() -> bool:
    """Whether floe's pipeline is on: zarr's ``codec_pipeline.path`` names it and
    ``disable()`` was not called."""
    return _enabled and zarr.config.get("codec_pipeline.path") == PIPELINE_PATH


def enable() -> None:
    """Makes floe's pipeline zarr's codec pipeline (``codec_pipeline.path``) for arrays
    opened from now on, and lets arrays already opened with it use Rust again. Other
    stores keep zarr's own pipeline (floe's class delegates to it)."""
    global _enabled
    zarr.registry.register_pipeline(FloeCodecPipeline)
    zarr.config.set({"codec_pipeline.path": PIPELINE_PATH})
    _enabled = True


def disable() -> None:
    """Turns floe's pipeline off: zarr's ``BatchedCodecPipeline`` becomes the codec
    pipeline again (when floe's was set), and arrays already opened with floe's
    pipeline hand every batch to it."""
    global _enabled
    _enabled = False
    if zarr.config.get("codec_pipeline.path") == PIPELINE_PATH:
        zarr.config.set({"codec_pipeline.path": _ZARR_DEFAULT})


def _install_default() -> None:
    """At ``import floe``: on unless ``FLOE_CODEC_PIPELINE`` is ``0``/``false``/``off``,
    and only when zarr's pipeline is its default (a user's choice, such as zarrs, is
    kept)."""
    global _enabled
    if not _supported_zarr(zarr.__version__):
        _enabled = False
        return
    zarr.registry.register_pipeline(FloeCodecPipeline)
    if os.environ.get("FLOE_CODEC_PIPELINE", "1").strip().lower() in ("0", "false", "off", "no"):
        _enabled = False
        return
    if zarr.config.get("codec_pipeline.path") == _ZARR_DEFAULT:
        zarr.config.set({"codec_pipeline.path": PIPELINE_PATH})


def _supported_zarr(version: str) -> bool:
    """Whether this zarr-python version has the pipeline interface this class was
    written against (``>=3.1,<4``; CI runs the package's tests on 3.1.0 and on the
    newest 3.x, 3.4.2 at stop 42)."""
    parts = re.findall(r"\d+", version)[:2]
    major, minor = (int(parts[0]), int(parts[1])) if len(parts) == 2 else (0, 0)
    return major == 3 and minor >= 1


def _zarr_pipeline(metadata: Any) -> BatchedCodecPipeline:
    """zarr-python's own pipeline for ``metadata`` (as zarr builds it)."""
    from zarr.core.metadata import ArrayV2Metadata, ArrayV3Metadata

    if isinstance(metadata, ArrayV3Metadata):
        return BatchedCodecPipeline.from_codecs(metadata.codecs)
    if isinstance(metadata, ArrayV2Metadata):
        from zarr.codecs._v2 import V2Codec

        return BatchedCodecPipeline.from_codecs(
            [V2Codec(filters=metadata.filters, compressor=metadata.compressor)]
        )
    raise TypeError(f"unknown array metadata {type(metadata)}")


class _Unsupported(Exception):
    """This batch goes to zarr's pipeline."""


class FloeCodecPipeline(CodecPipeline):
    """zarr-python's ``CodecPipeline`` for arrays in floe stores (see the module
    docstring). Every method but ``read`` and ``write`` is zarr's
    ``BatchedCodecPipeline``'s (held in ``inner``); ``read`` and ``write`` send a batch
    of a floe store to Rust when it qualifies and to ``inner`` otherwise.

    Errors from Rust: ``floe.FormatError`` naming the array and chunk key for a chunk
    that does not decode, the store's exceptions (``ReadOnlyError``, ``StorageError``)
    as ``FloeStore`` raises them.

    Cancellation: work Rust started cannot be stopped, so a ``read`` or ``write``
    whose task is cancelled (``asyncio.wait_for`` timing out, a ``TaskGroup`` failing)
    waits for its Rust calls in flight to end before it raises ``CancelledError``,
    and starts no more. Each Rust call (one per slab of ``SLAB_BYTES``) of a
    cancelled write is therefore either complete or never started when the
    cancellation returns (a write of several slabs may be partly applied, as a
    cancelled write through zarr's own pipeline may be), and nothing of it lands
    later, over a newer write of the same chunks or in a commit made after; a
    cancelled read writes nothing into zarr's output after its cancellation returns.
    A cancellation can thus take as long as two slabs' calls.

    zarr builds one per array (``codec_pipeline.path`` in ``zarr.config``, set when
    ``floe`` is imported); you rarely call it yourself:

    ```python
    from floe.codec_pipeline import FloeCodecPipeline

    array = zarr.open_array(store, path="temperature")
    pipeline = FloeCodecPipeline.from_array_metadata_and_store(array.metadata, store)
    print(pipeline.array_bytes_codec, pipeline.bytes_bytes_codecs)  # bytes, zstd
    print(floe.codec_pipeline.is_enabled())  # True
    ```

    Icechunk has no codec pipeline of its own (it uses zarr's); this class changes
    how fast chunks move, never the bytes stored or the values read.
    """

    def __init__(self, inner: BatchedCodecPipeline, metadata: Any = None, store: Any = None):
        self.inner = inner
        self._metadata = metadata
        self._store = store
        # array path -> native handle (None: this array goes to zarr's pipeline)
        self._native: dict[str, Any] = {}

    # -- construction ------------------------------------------------------------

    @classmethod
    def from_codecs(cls, codecs: Iterable[Any]) -> FloeCodecPipeline:
        """A pipeline of ``codecs`` without a store (zarr builds the inner pipelines of
        shards this way): zarr's own, wrapped; every batch goes to zarr's pipeline.

        ```python
        from zarr.codecs import BytesCodec, ZstdCodec
        from floe.codec_pipeline import FloeCodecPipeline

        pipeline = FloeCodecPipeline.from_codecs([BytesCodec(), ZstdCodec(level=3)])
        print(pipeline.bytes_bytes_codecs)  # (ZstdCodec(level=3, checksum=False),)
        ```

        :raises ValueError: codecs zarr cannot chain (e.g. no array-to-bytes codec).
        """
        return cls(BatchedCodecPipeline.from_codecs(codecs))

    @classmethod
    def from_array_metadata_and_store(cls, array_metadata: Any, store: Any) -> FloeCodecPipeline:
        """The pipeline of an array (zarr's ``ArrayV3Metadata``) in ``store``: batches
        go to Rust when ``store`` is a ``FloeStore``, to zarr's pipeline otherwise.

        ```python
        from floe.codec_pipeline import FloeCodecPipeline

        array = zarr.open_array(store, path="temperature")
        pipeline = FloeCodecPipeline.from_array_metadata_and_store(array.metadata, store)
        print(pipeline)  # FloeCodecPipeline(BatchedCodecPipeline(...), rust=True)
        ```
        """
        from floe.store import FloeStore

        inner = _zarr_pipeline(array_metadata)
        if isinstance(store, FloeStore):
            return cls(inner, array_metadata, store)
        return cls(inner)

    def __reduce__(self):
        if self._store is not None:
            return (_rebuild, (self._metadata, self._store))
        return (FloeCodecPipeline.from_codecs, (tuple(self.inner),))

    def evolve_from_array_spec(self, array_spec: Any) -> FloeCodecPipeline:
        """This pipeline with its codecs adapted to ``array_spec`` (zarr's
        ``ArraySpec``: chunk shape, data type, fill value), each codec evolved as
        zarr evolves it (``Codec.evolve_from_array_spec``); same store. (zarr 3.1's
        own ``BatchedCodecPipeline.evolve_from_array_spec`` raises ``ValueError``:
        it hands ``from_codecs`` a generator, read twice; zarr evolves codecs, never
        a pipeline, so arrays never call it.)

        ```python
        from zarr.core.array_spec import ArrayConfig, ArraySpec
        from zarr.core.buffer import default_buffer_prototype
        from floe.codec_pipeline import FloeCodecPipeline

        array = zarr.open_array(store, path="temperature")
        pipeline = FloeCodecPipeline.from_array_metadata_and_store(array.metadata, store)
        spec = ArraySpec(  # chunk (0, 0): shape (1, 10), float32
            shape=(1, 10),
            dtype=array.metadata.data_type,
            fill_value=array.metadata.fill_value,
            config=ArrayConfig.from_dict({}),
            prototype=default_buffer_prototype(),
        )
        print(pipeline.evolve_from_array_spec(spec) == pipeline)  # True
        ```
        """
        inner = BatchedCodecPipeline.from_codecs(
            [c.evolve_from_array_spec(array_spec=array_spec) for c in self.inner],
            batch_size=self.inner.batch_size,
        )
        return type(self)(inner, self._metadata, self._store)

    # -- zarr's pipeline for everything but read and write ------------------------

    def __iter__(self) -> Iterator[Any]:
        return iter(self.inner)

    @property
    def array_array_codecs(self) -> tuple[Any, ...]:
        """The array-to-array codecs (filters) of zarr's pipeline, in order."""
        return self.inner.array_array_codecs

    @property
    def array_bytes_codec(self) -> Any:
        """The array-to-bytes codec (serializer) of zarr's pipeline."""
        return self.inner.array_bytes_codec

    @property
    def bytes_bytes_codecs(self) -> tuple[Any, ...]:
        """The bytes-to-bytes codecs (compressors) of zarr's pipeline, in order."""
        return self.inner.bytes_bytes_codecs

    @property
    def batch_size(self) -> int:
        """Chunks per batch of zarr's pipeline (zarr's ``codec_pipeline.batch_size``)."""
        return self.inner.batch_size

    def __repr__(self) -> str:
        return f"FloeCodecPipeline({self.inner!r}, rust={self._store is not None})"

    def __eq__(self, other: object) -> bool:
        """Equal when zarr's pipelines are equal and both serve the same store (zarr
        compares arrays field by field, its pipeline included: two handles of one
        array are equal, as with zarr's own pipeline)."""
        if not isinstance(other, FloeCodecPipeline):
            return NotImplemented
        return self.inner == other.inner and self._store == other._store

    def __hash__(self) -> int:
        return hash(tuple(self.inner))

    @property
    def supports_partial_decode(self) -> bool:
        """Whether zarr's pipeline decodes parts of a chunk (sharded arrays)."""
        return self.inner.supports_partial_decode

    @property
    def supports_partial_encode(self) -> bool:
        """Whether zarr's pipeline encodes parts of a chunk (sharded arrays)."""
        return self.inner.supports_partial_encode

    def validate(self, *, shape: Any, dtype: Any, chunk_grid: Any) -> None:
        """Checks that the codecs fit an array of ``shape`` (a tuple of element
        counts), ``dtype`` (zarr's data type) and ``chunk_grid``, as zarr's
        ``BatchedCodecPipeline.validate``; zarr calls it when it creates an array.

        ```python
        from floe.codec_pipeline import FloeCodecPipeline

        array = zarr.open_array(store, path="temperature")
        pipeline = FloeCodecPipeline.from_array_metadata_and_store(array.metadata, store)
        meta = array.metadata
        pipeline.validate(shape=meta.shape, dtype=meta.data_type, chunk_grid=meta.chunk_grid)
        ```

        :raises ValueError: a codec that cannot serve that array (e.g. a shard shape
            that does not divide the chunk shape).
        """
        self.inner.validate(shape=shape, dtype=dtype, chunk_grid=chunk_grid)

    def compute_encoded_size(self, byte_length: int, array_spec: Any) -> int:
        """The size in bytes of a chunk of ``byte_length`` decoded bytes once encoded,
        as zarr's ``BatchedCodecPipeline.compute_encoded_size``.

        ```python
        from zarr.codecs import BytesCodec
        from zarr.core.array_spec import ArrayConfig, ArraySpec
        from zarr.core.buffer import default_buffer_prototype
        from floe.codec_pipeline import FloeCodecPipeline

        array = zarr.open_array(store, path="temperature")
        spec = ArraySpec(  # chunk (0, 0): shape (1, 10), float32
            shape=(1, 10),
            dtype=array.metadata.data_type,
            fill_value=array.metadata.fill_value,
            config=ArrayConfig.from_dict({}),
            prototype=default_buffer_prototype(),
        )
        pipeline = FloeCodecPipeline.from_codecs([BytesCodec()])  # no compression
        print(pipeline.compute_encoded_size(40, spec))  # 40: ten float32 elements
        ```

        :raises NotImplementedError: a codec whose output size is not known in
            advance (any compressor, such as the default ``zstd``).
        """
        return self.inner.compute_encoded_size(byte_length, array_spec)

    async def decode(self, chunk_bytes_and_specs: Iterable[Any]) -> Iterable[Any]:
        """Decodes chunks: pairs ``(encoded Buffer or None, ArraySpec)`` to decoded
        ``NDBuffer`` (or ``None``) in the same order; awaitable. zarr's
        ``BatchedCodecPipeline.decode``, in Python (floe's Rust path is ``read``).

        ```python
        import asyncio

        from zarr.core.array_spec import ArrayConfig, ArraySpec
        from zarr.core.buffer import default_buffer_prototype
        from floe.codec_pipeline import FloeCodecPipeline

        array = zarr.open_array(store, path="temperature")
        pipeline = FloeCodecPipeline.from_array_metadata_and_store(array.metadata, store)
        spec = ArraySpec(  # chunk (0, 0): shape (1, 10), float32
            shape=(1, 10),
            dtype=array.metadata.data_type,
            fill_value=array.metadata.fill_value,
            config=ArrayConfig.from_dict({}),
            prototype=default_buffer_prototype(),
        )
        raw = asyncio.run(store.get("temperature/c/0/0", default_buffer_prototype()))
        (chunk,) = asyncio.run(pipeline.decode([(raw, spec)]))
        print(chunk.as_numpy_array()[0, :3])  # [0. 1. 2.]
        ```

        :raises ValueError: bytes that do not decode with these codecs.
        """
        return await self.inner.decode(chunk_bytes_and_specs)

    async def encode(self, chunk_arrays_and_specs: Iterable[Any]) -> Iterable[Any]:
        """Encodes chunks: pairs ``(NDBuffer or None, ArraySpec)`` to encoded
        ``Buffer`` (or ``None``) in the same order; awaitable. zarr's
        ``BatchedCodecPipeline.encode``, in Python (floe's Rust path is ``write``).

        ```python
        import asyncio

        from zarr.core.array_spec import ArrayConfig, ArraySpec
        from zarr.core.buffer import default_buffer_prototype
        from floe.codec_pipeline import FloeCodecPipeline

        array = zarr.open_array(store, path="temperature")
        pipeline = FloeCodecPipeline.from_array_metadata_and_store(array.metadata, store)
        spec = ArraySpec(  # chunk (0, 0): shape (1, 10), float32
            shape=(1, 10),
            dtype=array.metadata.data_type,
            fill_value=array.metadata.fill_value,
            config=ArrayConfig.from_dict({}),
            prototype=default_buffer_prototype(),
        )
        values = default_buffer_prototype().nd_buffer.from_numpy_array(
            np.full((1, 10), 20.5, dtype="f4")  # degrees Celsius, say
        )
        (encoded,) = asyncio.run(pipeline.encode([(values, spec)]))
        print(len(encoded.to_bytes()) < 40)  # True: zstd-compressed
        ```
        """
        return await self.inner.encode(chunk_arrays_and_specs)

    # -- Rust ---------------------------------------------------------------------

    def _handle(self, path: str) -> Any:
        """The native array at ``path`` (cached); ``_Unsupported`` when floe's codec
        chain does not implement this array."""
        if path in self._native:
            native = self._native[path]
        else:
            native = None
            try:
                native = self._make_handle(path)
            except _Unsupported:
                pass
            except Exception:
                # floe rejects the metadata (a codec or data type it lacks): zarr's
                # pipeline reads the array.
                native = None
            self._native[path] = native
        if native is None:
            raise _Unsupported
        return native

    def _make_handle(self, path: str) -> Any:
        from zarr.core.buffer import default_buffer_prototype

        meta = self._metadata
        fmt = meta.zarr_format
        docs = meta.to_buffer_dict(default_buffer_prototype())
        if fmt != 3:
            # floe stores hold zarr v3 nodes only (as Icechunk's)
            raise _Unsupported
        doc = docs["zarr.json"].to_bytes().decode()
        dtype = (
            meta.dtype.to_native_dtype()
            if hasattr(meta.dtype, "to_native_dtype")
            else np.dtype(meta.dtype)
        )
        if dtype.kind not in "biufc" or dtype.byteorder not in "=|" and dtype.byteorder != _NATIVE:
            raise _Unsupported
        native = self._store._native._pipeline_array(path, doc, fmt)
        if native.item_size != dtype.itemsize:
            raise _Unsupported
        self._dtype = dtype.newbyteorder("=")
        return native

    def _batch_array(self, batch: list) -> tuple[Any, Any, list[int], str]:
        """The array a batch of a ``FloeStore`` reads or writes: ``(native, metadata,
        chunk shape, key prefix)`` (the prefix being the first key minus its chunk
        key); ``_Unsupported`` when the pipeline is off, the batch is empty or not
        of this pipeline's store, the grid is not regular, or floe's codec chain does
        not implement the array."""
        meta = self._metadata
        if meta is None or not _enabled or not batch:
            raise _Unsupported
        first = batch[0][0]
        if type(first) is not StorePath or first.store is not self._store:
            raise _Unsupported
        # Rust reads and writes regular grids only: a rectilinear grid (zarr 3.4's
        # `RectilinearChunkGridMetadata`, chunks of listed lengths) goes to zarr's
        # pipeline, which knows each chunk's shape.
        if "rectilinear" in type(meta.chunk_grid).__name__.lower():
            raise _Unsupported
        grid = getattr(meta.chunk_grid, "chunk_shape", None)
        if grid is None:
            raise _Unsupported
        cshape = [int(x) for x in grid]
        _coords, prefix = _split_key(meta, first.path, len(cshape))
        native = self._handle(prefix.rstrip("/"))
        return native, meta, cshape, prefix

    def _chunk_coords(self, getter: Any, prefix: str, nd: int) -> list[int]:
        """The chunk coordinates of a batch item's key (of the array at ``prefix``,
        ``nd`` dimensions); ``_Unsupported`` for another store or array."""
        if type(getter) is not StorePath or getter.store is not self._store:
            raise _Unsupported
        key = getter.path
        if not key.startswith(prefix):
            raise _Unsupported
        coords = [int(x) for x in _INT.findall(key, len(prefix))] if nd else []
        if len(coords) != nd:
            raise _Unsupported
        return coords

    def _box(self, batch: list) -> tuple[Any, list[int], list[int], list[slice], Any, str | None]:
        """The box of the array a batch covers: ``(native, start, shape, out_box,
        spec, stale)`` where ``out_box`` is the slices of zarr's output (or input) the
        box fills and ``stale`` the array's key prefix when the box reaches past the
        shape this pipeline knows (``None`` otherwise); ``_Unsupported`` when the
        batch is not one box read or written through a ``FloeStore`` with a basic
        selection."""
        native, meta, cshape, prefix = self._batch_array(batch)
        nd = len(cshape)

        lo: list[int | None] = [None] * nd
        hi = [0] * nd
        is_int = [False] * nd
        offset: list[int | None] = [None] * nd
        total = 0
        for getter, _spec, csel, osel, _complete in batch:
            coords = self._chunk_coords(getter, prefix, nd)
            if len(csel) != nd:
                raise _Unsupported
            n = 1
            j = 0
            for d in range(nd):
                s = csel[d]
                origin = coords[d] * cshape[d]
                if type(s) is slice:
                    if s.step not in (1, None) or is_int[d] and lo[d] is not None:
                        raise _Unsupported
                    a = origin + s.start
                    b = origin + s.stop
                    o = osel[j]
                    j += 1
                    if type(o) is not slice or o.step not in (1, None):
                        raise _Unsupported
                    off = a - o.start
                    if offset[d] is None:
                        offset[d] = off
                    elif offset[d] != off:
                        raise _Unsupported
                    n *= b - a
                elif isinstance(s, (int, np.integer)):
                    a = origin + int(s)
                    b = a + 1
                    if lo[d] is not None and not is_int[d]:
                        raise _Unsupported
                    is_int[d] = True
                else:
                    # integer arrays, masks: not a basic selection
                    raise _Unsupported
                if lo[d] is None or a < lo[d]:
                    lo[d] = a
                if b > hi[d]:
                    hi[d] = b
            if j != len(osel):
                raise _Unsupported
            total += n
        # A non-empty batch sets every axis.
        start = [int(x) for x in lo if x is not None]
        if len(start) != nd:
            raise _Unsupported
        shape = [h - s for h, s in zip(hi, start, strict=True)]
        vol = 1
        out_box = []
        for d in range(nd):
            if is_int[d]:
                if shape[d] != 1:
                    raise _Unsupported
            else:
                off = offset[d]
                if off is None:  # unreachable: the axis's slices set it
                    raise _Unsupported
                vol *= shape[d]
                b0 = start[d] - off
                out_box.append(slice(b0, b0 + shape[d]))
        if vol != total:
            # gaps (or overlaps): not one box
            raise _Unsupported
        outside = any(a + n > m for a, n, m in zip(start, shape, meta.shape, strict=True))
        return native, start, shape, out_box, batch[0][1], (prefix if outside else None)

    async def _refresh(self, prefix: str) -> None:
        """zarr resizes an array in place (``AsyncArray.resize``, ``append``) and keeps
        its pipeline: a region past the shape this pipeline knows means the array grew.
        Reads the array's metadata from the session and adopts it when it differs from
        the known one only in shape; ``_Unsupported`` otherwise."""
        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.metadata import ArrayV3Metadata

        meta = self._metadata
        proto = default_buffer_prototype()
        buf = await self._store.get(prefix + "zarr.json", proto)
        if buf is None:
            raise _Unsupported
        new = ArrayV3Metadata.from_dict(json.loads(buf.to_bytes()))

        def doc_of(m: Any) -> str:
            d = m.to_dict()
            d.pop("attributes", None)
            return json.dumps(d, sort_keys=True, default=str)

        if doc_of(new.update_shape(meta.shape)) != doc_of(meta):
            raise _Unsupported
        self._metadata = new
        self._native.clear()

    async def _region(self, batch: list) -> tuple[Any, list[int], list[int], list[slice], Any]:
        """``_box``, after adopting a grown shape (``_refresh``) when needed."""
        native, start, shape, out_box, spec, stale = self._box(batch)
        if stale is not None:
            try:
                await self._refresh(stale)
            except Exception as e:
                raise _Unsupported from e
            native, start, shape, out_box, spec, stale = self._box(batch)
            if stale is not None:
                raise _Unsupported
        return native, start, shape, out_box, spec

    def _native_dtype(self, dtype: np.dtype) -> bool:
        """Whether zarr's buffer holds the array's data type in native byte order (the
        elements Rust reads and writes)."""
        want = getattr(self, "_dtype", None)
        return (
            want is not None
            and dtype.kind in "biufc"
            and dtype.byteorder in ("=", "|", _NATIVE)
            and dtype.newbyteorder("=") == want
        )

    def _rust_write_pays(self, spec: Any, dtype: np.dtype) -> bool:
        """Whether a write batch goes to Rust by size: always for a sharded array or
        when ``WRITE_MAX_CHUNK_BYTES`` is ``None``, else when one chunk holds at most
        that many decoded bytes."""
        if WRITE_MAX_CHUNK_BYTES is None:
            return True
        codecs = getattr(self._metadata, "codecs", ()) or ()
        if any(type(c).__name__ == "ShardingCodec" for c in codecs):
            return True
        chunk_bytes = int(np.prod(spec.shape, dtype=np.int64)) * dtype.itemsize
        return chunk_bytes <= WRITE_MAX_CHUNK_BYTES

    def _selection_reads(self, batch: list, out: Any) -> tuple[Any, np.ndarray, list, list]:
        """A batch whose selection is not one box (integer arrays, masks, stepped
        slices: orthogonal, coordinate and mask selections): ``(native, arr, reads,
        assigns)``, where ``reads`` are the regions to read in Rust, each ``(start,
        shape, destination view)``, and ``assigns`` the ``(box buffer, shifted chunk
        selection, out selection)`` to apply once they are read (``_read_selection``).
        For a sharded array only the inner chunks the selection touches are read.
        ``_Unsupported`` (nothing started) when the batch is not of a ``FloeStore``
        array with a regular grid, or zarr's output is not a native-order numpy
        array."""
        native, meta, cshape, prefix = self._batch_array(batch)
        nd = len(cshape)
        if nd == 0:
            raise _Unsupported
        arr = out.as_numpy_array() if hasattr(out, "as_numpy_array") else out.as_ndarray_like()
        if not isinstance(arr, np.ndarray) or not self._native_dtype(arr.dtype):
            raise _Unsupported
        block = _inner_chunk_shape(meta) or cshape
        if len(block) != nd:
            raise _Unsupported
        reads: list[tuple[list[int], list[int], np.ndarray]] = []
        assigns: list[tuple[np.ndarray, tuple[Any, ...], Any]] = []
        for getter, _spec, csel, osel, _complete in batch:
            coords = self._chunk_coords(getter, prefix, nd)
            try:
                planned = _selection_plan(tuple(csel), cshape, block)
            except ValueError as e:
                raise _Unsupported from e
            if planned is None:
                continue
            lo, hi, shifted, regions = planned
            origin = [c * n for c, n in zip(coords, cshape, strict=True)]
            if any(o + h > m for o, h, m in zip(origin, hi, meta.shape, strict=True)):
                # past the shape this pipeline knows (a resized array): zarr's path
                raise _Unsupported
            buf = np.empty([h - a for a, h in zip(lo, hi, strict=True)], dtype=arr.dtype)
            for a, b in regions:
                start = [o + x + y for o, x, y in zip(origin, lo, a, strict=True)]
                shape = [y - x for x, y in zip(a, b, strict=True)]
                view = buf[tuple(slice(x, y) for x, y in zip(a, b, strict=True))]
                reads.append((start, shape, view))
            assigns.append((buf, shifted, osel))
        return native, arr, reads, assigns

    async def read(
        self, batch_info: Iterable[Any], out: Any, drop_axes: tuple[int, ...] = ()
    ) -> None:
        """Reads a batch into ``out`` (zarr's ``NDBuffer``); see the class docstring.
        Cancelled, it raises ``CancelledError`` only once Rust stopped writing into
        ``out``.

        ```python
        array = zarr.open_array(store, path="temperature")
        print(array[1:3, :2])  # zarr calls read: [[10. 11.] [20. 21.]]
        print(floe.codec_pipeline.stats.get("rust_read", 0) > 0)  # True: read in Rust
        ```
        """
        batch = list(batch_info)
        if self._store is None:
            return await self.inner.read(batch, out, drop_axes)
        try:
            if drop_axes:
                raise _Unsupported
            native, start, shape, out_box, _spec = await self._region(batch)
            arr = out.as_numpy_array() if hasattr(out, "as_numpy_array") else out.as_ndarray_like()
            if not isinstance(arr, np.ndarray) or not self._native_dtype(arr.dtype):
                raise _Unsupported
            if len(out_box) != arr.ndim:
                raise _Unsupported
            target = arr[tuple(out_box) + (Ellipsis,)]
        except _Unsupported:
            try:
                selection = self._selection_reads(batch, out)
            except _Unsupported:
                _count("zarr_read")
                return await self.inner.read(batch, out, drop_axes)
            _count("rust_read_selection")
            return await _read_selection(*selection, drop_axes)
        _count("rust_read")
        # The first axis of the array is the target's first when no integer selects
        # it (an integer-selected axis has length 1 and is never split).
        split = len(out_box) == len(shape) and len(shape) > 0
        row_bytes = arr.dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64))
        slabs = _slabs(start, shape, self._chunk_rows(), row_bytes) if split else None

        def calls() -> Iterator[Any]:
            for part_start, part_shape, rows in _parts(start, shape, slabs):
                part = target[rows]
                if part.flags.c_contiguous and part.flags.writeable:
                    yield _start(
                        native.read, part_start, part_shape, part.reshape(-1).view(np.uint8)
                    )
                else:
                    tmp = np.empty(part.shape, dtype=arr.dtype)
                    yield _then_copy(
                        _start(native.read, part_start, part_shape, tmp.reshape(-1).view(np.uint8)),
                        tmp,
                        part,
                    )

        await _in_flight(calls())

    async def write(
        self, batch_info: Iterable[Any], value: Any, drop_axes: tuple[int, ...] = ()
    ) -> None:
        """Writes a batch from ``value`` (zarr's ``NDBuffer``; shape ``()`` for a
        scalar); see the class docstring. Cancelled, it raises ``CancelledError`` only
        once every Rust call it started has ended: no part of the write lands after
        that.

        ```python
        array = zarr.open_array(store, path="temperature")
        array[:2] = np.full((2, 10), 21.5, dtype="f4")  # zarr calls write: Rust encodes
        print(array[0, 0])  # 21.5
        ```
        """
        batch = list(batch_info)
        if drop_axes or self._store is None:
            if self._store is not None:
                _count("zarr_write")
            return await self.inner.write(batch, value, drop_axes)
        try:
            native, start, shape, out_box, spec = await self._region(batch)
            arr = (
                value.as_numpy_array()
                if hasattr(value, "as_numpy_array")
                else value.as_ndarray_like()
            )
            if not isinstance(arr, np.ndarray):
                raise _Unsupported
            dtype = arr.dtype
            if not self._native_dtype(dtype):
                raise _Unsupported
            if arr.ndim == 0:
                src = np.broadcast_to(arr, shape)
            else:
                if arr.ndim != len(out_box):
                    raise _Unsupported
                src = arr[tuple(out_box)].reshape(shape)
            if not self._rust_write_pays(spec, dtype):
                raise _Unsupported
            write_empty = bool(spec.config.write_empty_chunks)
        except _Unsupported:
            _count("zarr_write")
            return await self.inner.write(batch, value, drop_axes)
        _count("rust_write")
        self._store._check_writable()
        row_bytes = dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64))
        slabs = _slabs(start, shape, self._chunk_rows(), row_bytes) if shape else None

        def calls() -> Iterator[Any]:
            for part_start, part_shape, rows in _parts(start, shape, slabs):
                data = np.ascontiguousarray(src[rows]).reshape(-1).view(np.uint8)
                yield _start(native.write, part_start, part_shape, data, write_empty)

        await _in_flight(calls())

    def _chunk_rows(self) -> int:
        """Elements along the first axis of one chunk of the grid (of one shard for a
        sharded array: the grid's chunks), 0 when unknown."""
        grid = getattr(getattr(self._metadata, "chunk_grid", None), "chunk_shape", None)
        return int(grid[0]) if grid else 0


_NATIVE = "<" if np.little_endian else ">"


class _LoopCalls:
    """The Rust pipeline calls in flight on one event loop and their futures.

    A call ends by queueing its outcome in ``_floe.Completions`` and writing a byte
    to a socket this loop watches (``loop.add_reader``); ``_drain`` resolves the
    futures on the loop's thread. The pipeline never cancels these futures (it
    awaits them through ``asyncio.shield``, see ``_in_flight``), so each gets
    its call's outcome; one cancelled by other code is skipped when its call ends.
    No Rust thread takes the GIL or calls Python to end a call
    (``pyo3_async_runtimes`` did both, through tokio's blocking pool: ~150 us
    of thread switches per call on the 2-core VM, more than a one-inner-chunk read
    takes)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        from floe import _floe

        self._loop = weakref.ref(loop)
        self._native = _floe.Completions()
        self._futures: dict[int, asyncio.Future[None]] = {}
        self._next = 0
        loop.add_reader(self._native.fileno(), self._drain)

    def start(self, method: Callable[..., None], args: tuple[Any, ...]) -> asyncio.Future[None]:
        """Calls ``method(*args, completions, token)`` (which raises at once for bad
        arguments) and returns the future of its outcome."""
        loop = self._loop()
        assert loop is not None, "a call started on a loop that is gone"
        token = self._next
        self._next += 1
        method(*args, self._native, token)
        fut: asyncio.Future[None] = loop.create_future()
        self._futures[token] = fut
        return fut

    def _drain(self) -> None:
        for token, error in self._native.take():
            fut = self._futures.pop(token, None)
            if fut is None or fut.done():
                # Cancelled (by a caller of `_start`, never by the pipeline) while
                # Rust worked: its buffer was kept until now.
                continue
            if error is None:
                fut.set_result(None)
            else:
                fut.set_exception(error)


_LOOP_CALLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopCalls] = (
    weakref.WeakKeyDictionary()
)


def _start(method: Callable[..., None], *args: Any) -> asyncio.Future[None]:
    """Starts the Rust pipeline call ``method(*args, completions, token)`` on the
    running loop; returns the future of its outcome (``None``, or the call's
    exception). Cancelling that future does not stop the call: await it through
    ``asyncio.shield`` (as ``_in_flight`` does) to learn when it ended."""
    loop = asyncio.get_running_loop()
    calls = _LOOP_CALLS.get(loop)
    if calls is None:
        calls = _LOOP_CALLS[loop] = _LoopCalls(loop)
    return calls.start(method, args)


async def _then_copy(call: Any, tmp: np.ndarray, part: np.ndarray) -> None:
    """Awaits a started Rust read into ``tmp``, then copies ``tmp`` into ``part``."""
    await call
    part[...] = tmp


async def _read_selection(
    native: Any, arr: np.ndarray, reads: list, assigns: list, drop_axes: tuple[int, ...]
) -> None:
    """Runs the reads ``_selection_reads`` planned, ``SELECTION_READS_IN_FLIGHT`` at
    a time, then assigns each chunk's selection into ``arr`` as zarr does
    (``out[out_selection] = chunk[chunk_selection]``, axes ``drop_axes`` squeezed)."""

    def calls() -> Iterator[Any]:
        for start, shape, view in reads:
            if view.flags.c_contiguous:
                yield _start(native.read, start, shape, view.reshape(-1).view(np.uint8))
            else:
                tmp = np.empty(view.shape, dtype=view.dtype)
                yield _then_copy(
                    _start(native.read, start, shape, tmp.reshape(-1).view(np.uint8)), tmp, view
                )

    await _in_flight(calls(), SELECTION_READS_IN_FLIGHT)
    for buf, shifted, osel in assigns:
        value = buf[shifted]
        if drop_axes:
            value = value.squeeze(axis=drop_axes)
        arr[osel] = value


def _inner_chunk_shape(meta: Any) -> list[int] | None:
    """The inner chunk shape of a sharded array (its outermost sharding codec's),
    ``None`` for an array without sharding."""
    for codec in getattr(meta, "codecs", ()) or ():
        if type(codec).__name__ == "ShardingCodec":
            return [int(x) for x in codec.chunk_shape]
    return None


async def _in_flight(calls: Iterator[Any], limit: int = 2) -> None:
    """Awaits the Rust calls ``calls`` starts (each started when the iterator yields
    it: a future of ``_start``, or a ``_then_copy`` coroutine, run as a task), keeping
    at most ``limit`` (two) in flight, so one slab's start overlaps the previous
    slab's encoding or decoding.

    Returns, or raises, only once every call started has ended, whatever happened:
    a call's error, an error starting the next call, or the cancellation of the task
    that awaits this. Rust cannot be stopped once a call started (the write or the
    read goes on in tokio), so a cancelled batch waits for the calls in flight
    (cancelling again while it waits changes nothing) and then raises
    ``CancelledError`` (no further call is started): each call of a cancelled write
    is complete, or was never started, by the time its cancellation returns, and
    never lands afterwards over a newer write of the same chunks (nor in a commit
    made after); a cancelled read no longer writes into the caller's buffer. The
    calls' futures are never cancelled (they are awaited through ``asyncio.shield``),
    so ``_LoopCalls`` resolves each with its outcome, and every outcome is retrieved.
    The first error (or the cancellation) is raised; a cancellation that arrives
    while an error waits for the other calls is raised instead of that error."""
    # Started and not yet awaited to their end, oldest first.
    window: list[asyncio.Future[None]] = []
    try:
        for call in calls:
            window.append(asyncio.ensure_future(call))
            if len(window) >= limit:
                await asyncio.shield(window[0])
                window.pop(0)
        while window:
            await asyncio.shield(window[0])
            window.pop(0)
    except BaseException as error:
        cancelled = await wait_ended(window)
        if cancelled is not None and not isinstance(error, asyncio.CancelledError):
            raise cancelled from error
        raise


def _parts(
    start: list[int], shape: list[int], slabs: list[tuple[int, int]] | None
) -> Iterator[tuple[list[int], list[int], Any]]:
    """Each slab's region ``(start, shape)`` and its rows of the batch's buffer (a
    slice of the first axis; ``...``, the whole buffer, when ``slabs`` is ``None`` or
    one slab covers the region, 0-dimensional ones included)."""
    if slabs is None or len(slabs) == 1:
        yield start, shape, Ellipsis
        return
    for a, b in slabs:
        yield [start[0] + a] + start[1:], [b - a] + shape[1:], slice(a, b)


def _slabs(
    start: list[int], shape: list[int], chunk_rows: int, row_bytes: int
) -> list[tuple[int, int]]:
    """The slabs a region of ``shape`` at ``start`` goes to Rust in: ``(first,
    last)`` offsets along the first axis (relative to ``start[0]``), each ending on a
    chunk boundary of the grid (``chunk_rows`` elements along the first axis), each
    about ``SLAB_BYTES`` (``row_bytes``: bytes of one element row of the region),
    never splitting a chunk. One slab when the region is small or the setting is
    ``None``."""
    n = shape[0] if shape else 0
    if SLAB_BYTES is None or n == 0 or n * row_bytes <= SLAB_BYTES or chunk_rows <= 0:
        return [(0, n)]
    step = max(1, SLAB_BYTES // max(1, chunk_rows * row_bytes)) * chunk_rows
    out = []
    a = start[0]
    end = start[0] + n
    while a < end:
        b = min(end, (a // step + 1) * step)
        out.append((a - start[0], b - start[0]))
        a = b
    return out


def _split_key(meta: Any, key: str, nd: int) -> tuple[list[int], str]:
    """The chunk coordinates of chunk key ``key`` of an ``nd``-dimensional array and
    the key's array prefix (``"a/b/"``, ``""`` for the root); ``_Unsupported`` when
    the key is not one of the array's chunk keys."""
    zero = meta.encode_chunk_key((0,) * nd)
    segs = zero.count("/") + 1
    parts = key.rsplit("/", segs)
    if len(parts) == segs:
        prefix = ""
    elif len(parts) == segs + 1:
        prefix = parts[0] + "/"
    else:
        raise _Unsupported
    tail = key[len(prefix) :]
    coords = [int(x) for x in _INT.findall(tail)]
    if nd == 0:
        coords = []
    if len(coords) != nd or meta.encode_chunk_key(tuple(coords)) != tail:
        raise _Unsupported
    return coords, prefix


def _rebuild(metadata: Any, store: Any) -> FloeCodecPipeline:
    """Unpickles a pipeline of a floe store."""
    return FloeCodecPipeline.from_array_metadata_and_store(metadata, store)
