"""The asyncio helper the layers share (drivers is the lowest layer with a loop, so it lives here)."""
from __future__ import annotations

import asyncio


async def cancel_and_wait(task: asyncio.Task | None) -> None:
    """Cancel ``task`` and wait until it has finished, so nothing of it runs after close."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
