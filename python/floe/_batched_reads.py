"""Batched whole-key reads of a ``FloeStore``: the gets zarr-python issues for the
chunks of one read (``async.concurrency`` of them at once) are gathered per event-loop
turn and sent to the engine as one ``get_many`` call, whose chunk reads go through
floe's coalesced path (virtual chunks of one file at nearby offsets: one request per
merged span, each location authorized as a single read's).

A get waits for at most the rest of the current event-loop turn before its batch
leaves; results and errors stay per key (a failing key raises in its own ``get``
only). Nothing is cached: every batch reads the session as it is when it runs.
"""

from __future__ import annotations

import asyncio
from typing import Any


class GetBatcher:
    """Gathers whole-key gets of one native store per event loop (a store may serve
    several loops: zarr's sync loop thread and the caller's own)."""

    def __init__(self, native: Any, concurrency: int) -> None:
        self._native = native
        self._concurrency = concurrency
        self._pending: dict[asyncio.AbstractEventLoop, list[tuple[str, asyncio.Future]]] = {}
        # Running batch tasks (kept referenced until done, as asyncio requires).
        self._tasks: set[asyncio.Task] = set()

    async def get(self, key: str) -> bytes | None:
        """The value of ``key`` (``None`` when absent), read in this turn's batch.
        Raises what ``NativeStore.get`` raises for the key."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        batch = self._pending.get(loop)
        if batch is None:
            batch = self._pending[loop] = []
            loop.call_soon(self._flush, loop)
        batch.append((key, fut))
        return await fut

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = self._pending.pop(loop, [])
        if batch:
            task = loop.create_task(self._run(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[tuple[str, asyncio.Future]]) -> None:
        try:
            if len(batch) == 1:
                key, fut = batch[0]
                try:
                    results: list[Any] = [await self._native.get(key, 0, 0, 0)]
                except Exception as e:  # the key's own error
                    results = [e]
            else:
                results = await self._native.get_many([k for k, _ in batch], self._concurrency)
        except BaseException as e:  # the whole batch failed (cancelled loop...)
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(e)
            if not isinstance(e, Exception):
                raise
            return
        for (_, fut), r in zip(batch, results, strict=True):
            if fut.done():  # its get was cancelled
                continue
            if isinstance(r, BaseException):
                fut.set_exception(r)
            else:
                fut.set_result(r)
