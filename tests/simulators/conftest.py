"""A bench harness for device logic without a transport: it collects what a device emits."""
from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, TypeVar

import pytest

from firmware_bridge.messages import Message
from simulators.device import SimulatedDevice

from tests.support.poll import until

M = TypeVar("M", bound=Message)


class Harness:
    def __init__(self, device: SimulatedDevice) -> None:
        self.device = device
        self.out: list[Message] = []
        self.disconnects: list[float] = []
        self.link_resets = 0
        self._changed = asyncio.Event()
        device.attach(self._emit, flush=self._flush, on_reboot=self._reboot, disconnect=self._disconnect)

    def _emit(self, msg: Message) -> None:
        self.out.append(msg)
        self._changed.set()

    async def _flush(self, limit: int = 0) -> None:
        await asyncio.sleep(0)

    def _reboot(self) -> None:
        self.link_resets += 1

    async def _disconnect(self, seconds: float) -> None:
        self.disconnects.append(seconds)

    def send(self, msg: Message) -> list[Message]:
        replies = self.device.handle(msg)
        self.out.extend(replies)
        return replies

    def of(self, cls: type[M]) -> list[M]:
        return [m for m in self.out if isinstance(m, cls)]

    async def until(self, cls: type[M], count: int = 1, timeout: float = 5.0) -> list[M]:
        """Wait until ``count`` messages of ``cls`` have been emitted (fails after ``timeout``)."""
        await until(lambda: len(self.of(cls)) >= count, timeout=timeout, changed=self._changed)
        return self.of(cls)

    async def until_true(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        """Let the device's tasks run until ``predicate()`` holds (fails after ``timeout``)."""
        await until(predicate, timeout=timeout)


def run(factory: Callable[[], SimulatedDevice], body: Callable[[Harness], Awaitable[None]]) -> None:
    """Run ``body`` on a fresh loop with a started device; stop its tasks afterwards."""
    async def main() -> None:
        device = factory()
        harness = Harness(device)
        device.start()
        try:
            await body(harness)
        finally:
            device.close()
    asyncio.run(main())


@pytest.fixture
def run_device():
    return run


@pytest.fixture(autouse=True)
def _no_leaks(no_leaks):
    """Every simulator test leaves no thread or fd behind (ptys, loops, endpoint threads; the
    check itself is tests/conftest.py's)."""
    yield
