"""The async runner of the tests."""
from __future__ import annotations

import asyncio
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a test coroutine on a fresh loop; fail the test on a task left running or on anything
    that reached the loop's exception handler (an exception escaping a reader callback, a task
    dying unobserved)."""
    escaped: list[dict[str, Any]] = []

    async def main() -> T:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: escaped.append(context))
        result = await coro
        leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert not leftover, f"tasks left running: {leftover}"
        return result

    result = asyncio.run(main())
    assert not escaped, f"exceptions escaped into the event loop: {escaped}"
    return result
