"""Test plumbing for the link tests: an in-memory byte wire that can lose, damage, duplicate
and reorder what it carries (seeded, so every failure reproduces), and a pair of joined Links."""
from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Callable

from firmware_bridge.framing2 import Framing2
from firmware_bridge.link import Link, LinkConfig, LinkEvent


@dataclass
class Wire:
    """One direction of a byte stream. Each write is delivered on the loop after ``delay`` s,
    cut into random chunks, unless an impairment hits it."""

    seed: int = 0
    drop: float = 0.0
    corrupt: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    delay: float = 0.0
    cut: bool = False  # everything written is lost
    drop_next: int = 0  # lose this many writes, then carry on
    receiver: Callable[[bytes], None] | None = None
    written: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def carrying(self, deliver: Callable[[bytes], None]) -> Callable[[bytes], None]:
        """This wire as a drivers.memory Wire: what is written goes, impaired, to ``deliver``."""
        self.receiver = deliver
        return self.write

    def write(self, data: bytes) -> None:
        self.written.append(data)
        if self.cut:
            return
        if self.drop_next:
            self.drop_next -= 1
            return
        rng, buf = self.rng, bytearray(data)
        if rng.random() < self.drop:
            start = rng.randrange(len(buf))
            del buf[start : start + rng.randint(1, len(buf))]
        if buf and rng.random() < self.corrupt:
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        if rng.random() < self.reorder and len(buf) > 2:
            i = rng.randrange(len(buf) - 1)
            buf[i], buf[i + 1] = buf[i + 1], buf[i]
        copies = 2 if rng.random() < self.duplicate else 1
        for _ in range(copies):
            self._deliver(bytes(buf))

    def _deliver(self, data: bytes) -> None:
        loop = asyncio.get_running_loop()
        pos = 0
        while pos < len(data):
            n = self.rng.randint(1, 40)
            chunk, pos = data[pos : pos + n], pos + n
            # call_later keeps byte order: equal deadlines run in scheduling order
            loop.call_later(self.delay, self._receive, chunk)

    def _receive(self, chunk: bytes) -> None:
        if self.receiver is not None:
            self.receiver(chunk)


@dataclass
class End:
    """One end of a link pair: the Link, what it delivered and the events it reported."""

    link: Link
    wire_out: Wire
    delivered: list[bytes] = field(default_factory=list)
    events: list[tuple[LinkEvent, str]] = field(default_factory=list)


def _appender(events: list[tuple[LinkEvent, str]]) -> Callable[[LinkEvent, str], None]:
    return lambda event, detail: events.append((event, detail))


def make_pair(a_to_b: Wire | None = None, b_to_a: Wire | None = None, config: LinkConfig | None = None,
              framings: tuple[Framing2, Framing2] | None = None) -> tuple[End, End]:
    """Two Links joined by two wires; call inside a running loop. ``framings``: protocol 2.0
    frames, each end's own (1.x frames without)."""
    a_to_b, b_to_a = a_to_b or Wire(), b_to_a or Wire()
    config = config or LinkConfig(initial_rto=0.02, min_rto=0.002, max_rto=0.2)
    ends = []
    for i, (name, out) in enumerate((("a", a_to_b), ("b", b_to_a))):
        delivered: list[bytes] = []
        events: list[tuple[LinkEvent, str]] = []
        link = Link(out.write, delivered.append, _appender(events), config, name=name,
                    framing=None if framings is None else framings[i])
        ends.append(End(link, out, delivered, events))
    a, b = ends
    a_to_b.receiver = b.link.bytes_received
    b_to_a.receiver = a.link.bytes_received
    return a, b
