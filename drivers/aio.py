"""Small asyncio and callback helpers the layers share (drivers is the lowest layer, so they live here)."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

import structlog


async def cancel_and_wait(task: asyncio.Task | None) -> None:
    """Cancel ``task`` and wait until it has finished, so nothing of it runs after close."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


def call_logged(log: structlog.typing.FilteringBoundLogger | Any, what: str, fn: Callable[..., Any],
                *args: Any, **context: Any) -> None:
    """Call ``fn(*args)``; an exception there is logged as ``what`` (with ``context``, e.g. the
    device, and the head of any bytes argument) and swallowed: an owner's broken callback must
    never stop the loop, a reader thread, a link or a supervisor that called it. Hot paths call
    this per chunk, so the bytes are only looked at once something failed."""
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - the callee's bug, reported where it happened
        for arg in args:
            if isinstance(arg, (bytes, bytearray)):
                context.setdefault("size", len(arg))
                context.setdefault("head", bytes(arg[:32]).hex(" "))
        log.exception(what, **context)
