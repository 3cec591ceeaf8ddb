"""The one way a test waits for something to happen."""
from __future__ import annotations

import asyncio
from typing import Callable


async def until(condition: Callable[[], object], *, timeout: float = 10.0, what: str = "",
                changed: asyncio.Event | None = None) -> None:
    """Let the loop run until ``condition()`` holds; fail the test, naming ``what``, after ``timeout``.

    With ``changed`` (an event whoever changes the watched state sets), the condition is checked
    again only when it is set; without, every millisecond."""
    async def wait() -> None:
        while not condition():
            if changed is None:
                await asyncio.sleep(0.001)
            else:
                changed.clear()
                await changed.wait()
    try:
        await asyncio.wait_for(wait(), timeout)
    except TimeoutError:
        raise AssertionError(f"not within {timeout} s: {what or condition}") from None
