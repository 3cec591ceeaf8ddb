"""Recorders a test hands to the code under test, and the clock it moves by hand."""
from __future__ import annotations

import asyncio
from typing import Callable

from tests.support.poll import until


class FakeClock:
    """The injectable monotonic clock: tests move time, nothing sleeps."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class ListenerRecorder:
    """A TransportListener that records chunks and losses and lets a test await them."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.lost: list[Exception | None] = []
        self.changed = asyncio.Event()

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)

    def bytes_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.changed.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.append(exc)
        self.changed.set()

    async def until(self, condition: Callable[[], object], timeout: float = 5.0) -> None:
        await until(condition, timeout=timeout, changed=self.changed)

    async def wait_bytes(self, count: int) -> bytes:
        await self.until(lambda: len(self.data) >= count)
        return self.data

    async def wait_lost(self) -> Exception | None:
        await self.until(lambda: bool(self.lost))
        return self.lost[0]
