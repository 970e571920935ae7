"""Awaiting native calls to their end, cancellation or not.

floe's Rust work runs on its own threads (tokio): once a call that changes a session
started, cancelling the Python task that awaits it does not stop it, and the change
could land after the caller was told the call was cancelled (over a newer write of
the same key, or into a commit made meanwhile). The helpers here wait for such calls
to end before a cancellation is passed on, so a cancelled call has either taken
effect or never started by the time its cancellation returns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["run_to_end", "wait_ended"]

T = TypeVar("T")


async def wait_ended(futures: list[asyncio.Future]) -> asyncio.CancelledError | None:
    """Waits until every one of ``futures`` has ended, without cancelling any, and
    retrieves their outcomes (no "exception was never retrieved" warnings). Returns
    the last ``CancelledError`` that cancelled the waiting task meanwhile (the wait
    goes on regardless), ``None`` when there was none."""
    cancelled = None
    pending = [f for f in futures if not f.done()]
    while pending:
        try:
            await asyncio.wait(pending)
        except asyncio.CancelledError as e:
            cancelled = e
        pending = [f for f in pending if not f.done()]
    for f in futures:
        if not f.cancelled():
            f.exception()
    return cancelled


async def run_to_end(call: Awaitable[T]) -> T:
    """Awaits the native call ``call`` (a coroutine or future) and returns its result.
    When the awaiting task is cancelled meanwhile, the call is not cancelled: this
    waits for it to end (further cancellations change nothing), then raises the
    ``CancelledError``. So a change the call makes is complete, or was never made,
    by the time the cancellation returns.

    Example: ``await run_to_end(native_store.set(key, data))``."""
    future = asyncio.ensure_future(call)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await wait_ended([future])
        raise
