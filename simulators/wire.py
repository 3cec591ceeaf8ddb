"""The wire between a simulated device's link and its transport, where byte-level faults happen.

Both directions: ``bit_flip_rate`` (one random bit of a byte flipped) and ``drop_rate`` (a
byte lost). Device to host only: ``slow_ack_ms`` (every write held that long, so ACKs come
late), ``ftdi_batching_ms`` (writes gathered and flushed on a timer, like an FTDI latency
timer) and ``byte_at_a_time`` (one write per byte, one per loop turn). The switches are read
at every write, so a test can flip them mid-run; the RNG is seeded from ``Faults.seed`` so a
faulty run repeats exactly.
"""
from __future__ import annotations

import asyncio
import collections
import random
from dataclasses import dataclass
from typing import Callable

from simulators.faults import Faults


@dataclass
class WireStats:
    bytes_to_host: int = 0
    bytes_from_host: int = 0
    flipped: int = 0
    dropped: int = 0
    writes: int = 0  # raw writes to the transport (byte_at_a_time makes one per byte)


class FaultyWire:
    def __init__(self, faults: Callable[[], Faults], raw_write: Callable[[bytes], None],
                 loop: asyncio.AbstractEventLoop) -> None:
        self._faults = faults
        self._raw_write = raw_write
        self._loop = loop
        self.stats = WireStats()
        self._rng = random.Random(faults().seed)
        self._delayed: collections.deque[tuple[float, bytes]] = collections.deque()
        self._batch = bytearray()
        self._batch_timer: asyncio.TimerHandle | None = None
        self._trickle = bytearray()
        self._trickling = False

    def from_host(self, data: bytes) -> bytes:
        """What the device receives of ``data``."""
        self.stats.bytes_from_host += len(data)
        return self._damage(data)

    def to_host(self, data: bytes) -> None:
        """Send ``data`` (frames from the device's link) towards the host."""
        self.stats.bytes_to_host += len(data)
        faults = self._faults()
        if (not (faults.bit_flip_rate > 0 or faults.drop_rate > 0 or faults.slow_ack_ms > 0 or faults.ftdi_batching_ms > 0
                 or faults.byte_at_a_time or self._trickling) and data):
            # a clean wire (the card path): the stages below would each pass the bytes on as they are
            self.stats.writes += 1
            self._raw_write(data)
            return
        data = self._damage(data)
        delay = faults.slow_ack_ms / 1000
        if delay > 0:
            self._delayed.append((self._loop.time() + delay, data))
            self._loop.call_later(delay, self._release_delayed)
        else:
            self._batched(data)

    def close(self) -> None:
        if self._batch_timer is not None:
            self._batch_timer.cancel()
        self._delayed.clear()
        self._batch.clear()
        self._trickle.clear()

    # ---- stages ---------------------------------------------------------------------

    def _damage(self, data: bytes) -> bytes:
        faults = self._faults()
        flip, drop = faults.bit_flip_rate, faults.drop_rate
        if not data or (flip <= 0 and drop <= 0):
            return data
        rng, out = self._rng, bytearray()
        for byte in data:
            roll = rng.random()
            if roll < drop:
                self.stats.dropped += 1
                continue
            if roll < drop + flip:
                byte ^= 1 << rng.randrange(8)
                self.stats.flipped += 1
            out.append(byte)
        return bytes(out)

    def _release_delayed(self) -> None:
        now = self._loop.time()
        while self._delayed and self._delayed[0][0] <= now:
            self._batched(self._delayed.popleft()[1])

    def _batched(self, data: bytes) -> None:
        period = self._faults().ftdi_batching_ms / 1000
        if period <= 0:
            self._deliver(data)
            return
        self._batch += data
        if self._batch_timer is None:
            self._batch_timer = self._loop.call_later(period, self._flush_batch)

    def _flush_batch(self) -> None:
        self._batch_timer = None
        data, self._batch = bytes(self._batch), bytearray()
        self._deliver(data)

    def _deliver(self, data: bytes) -> None:
        if not data:
            return
        if self._faults().byte_at_a_time or self._trickling:
            self._trickle += data
            if not self._trickling:
                self._trickling = True
                self._loop.call_soon(self._trickle_one)
            return
        self.stats.writes += 1
        self._raw_write(data)

    def _trickle_one(self) -> None:
        if not self._trickle:
            self._trickling = False
            return
        byte = bytes(self._trickle[:1])
        del self._trickle[:1]
        self.stats.writes += 1
        self._raw_write(byte)
        self._loop.call_soon(self._trickle_one)



MemoryWire = Callable[[Callable[[bytes], None]], Callable[[bytes], None]]


def memory_wires(faults: Callable[[], Faults]) -> tuple[MemoryWire, MemoryWire]:
    """The fault switches as the two wires of a ``mem://`` line, ``(to_host, to_device)`` for
    ``drivers.memory.listen(name, accept, to_host=..., to_device=...)``: every switch applies
    towards the host, the damage (bit flips, drops) both ways. Each connection gets fresh wires."""

    def to_host(deliver: Callable[[bytes], None]) -> Callable[[bytes], None]:
        return FaultyWire(faults, deliver, asyncio.get_running_loop()).to_host

    def to_device(deliver: Callable[[bytes], None]) -> Callable[[bytes], None]:
        wire = FaultyWire(faults, deliver, asyncio.get_running_loop())
        return lambda data: deliver(wire.from_host(data))

    return to_host, to_device
