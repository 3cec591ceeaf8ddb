"""The host's receive path, in one process: CPU per card (a benchmark, not a test).

What the daemon spends on a card from the bytes its serial driver reads to the input that
reaches :meth:`~cardd.daemon.tracker_service.TableService.apply`: the serial transport's read
(a real pty), the reconnecting port, the connection, the session, the link (frame decoding,
sequence checks, the ACK it writes), the message decode, the event delivery and
``cardd.daemon.devices``' ``indexed`` that makes the :class:`~devices.tracker.inputs.DeviceMessage`.
The input stops there: a stand-in service counts it (the table, the journal and the publish are
measured by ``benchmarks/card_path.py``).

The device's side is a replay, so that this process is (nearly) all host: a real
:class:`~firmware_bridge.link.Link` answers the link RESET and the handshake (HELLO -> IDENT of a
protocol 1.1 shoe, ResumeEvents), then the shoes' frames, encoded before the measurement, go to
the pty master 16 frames a write (what the daemon's read brings from the simulated shoe), the
next write each time the host's ACK comes back. The frames are always encoded for
:data:`ENCODED_SHOES` shoes, whatever ``--shoes`` says, so that their encoding cancels out in the
difference of two runs. Each shoe: Event(ShoeLoaded), 312 Event(CardRead) with Event(CutCardSeen)
at two thirds, Event(ShoeEmpty); every frame's ack is the host's next seq (the host sends no DATA
meanwhile: the stand-in journals nothing, so nothing is confirmed, and heartbeats are off).

    .venv/bin/python benchmarks/rx_path.py [--shoes 8] [--profile FILE]
    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/tmp/rx.%p \\
        .venv/bin/python benchmarks/rx_path.py --shoes 4      (and --shoes 8:
        instructions a card = (Ir of 8 shoes - Ir of 4 shoes) / 1,248 cards)
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import logging
import os
import random
import sys
import time
import tty
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import structlog  # noqa: E402

from cardd.daemon.devices import Devices  # noqa: E402
from core.cards import Orientation  # noqa: E402
from devices.tracker.inputs import DeviceMessage  # noqa: E402
from drivers.reconnect import Backoff  # noqa: E402
from firmware_bridge.framing import FrameKind, wire_frame  # noqa: E402
from firmware_bridge.link import Link  # noqa: E402
from firmware_bridge.link_types import SEQ_MOD  # noqa: E402
from firmware_bridge.messages import (CardRead, CutCardSeen, DeviceRole, Event, Hello, Ident, Message,  # noqa: E402
                                      ShoeEmpty, ShoeLoaded, decode, encode)
from firmware_bridge.session import SessionConfig  # noqa: E402
from simulators.stack import fisher_yates, full_shoe  # noqa: E402

DECKS = 6
FRAMES_A_WRITE = 16
ENCODED_SHOES = 16
SHOE = "shoe"  # the daemon names a connection by its role in the configuration
#: after the handshake: the device sent IDENT (seq 0); the host sent HELLO and ResumeEvents (seq 0, 1)
FIRST_SEQ, HOST_NEXT = 1, 2


def shoe_writes(shoes: int, rng: random.Random) -> list[list[bytes]]:
    """Per shoe, its frames on the wire grouped FRAMES_A_WRITE to a write, numbered on from the handshake."""
    seq, index, out = FIRST_SEQ, 0, []
    for _ in range(shoes):
        stack = fisher_yates(full_shoe(DECKS), rng)
        cut = len(stack) * 2 // 3
        messages: list[Message] = [ShoeLoaded(0)]
        for i, card in enumerate(stack, 1):
            messages.append(CardRead(i, card, Orientation.FACE_DOWN, i))
            if i == cut:
                messages.append(CutCardSeen(i, i))
        messages.append(ShoeEmpty(len(stack), len(stack)))
        frames = []
        for msg in messages:
            index += 1
            frames.append(wire_frame(FrameKind.DATA, seq, HOST_NEXT, encode(Event(index, msg))))
            seq = (seq + 1) % SEQ_MOD
        out.append([b"".join(frames[i:i + FRAMES_A_WRITE]) for i in range(0, len(frames), FRAMES_A_WRITE)])
    return out


class StandInFeed:
    """Where ``cardd.daemon.devices`` hands a card's input: counts them, says when a shoe is empty."""

    def __init__(self) -> None:
        self.inputs = 0
        self.empty: asyncio.Event = asyncio.Event()

    def callbacks(self, device: str) -> tuple[Callable[[Any], None], Callable[[Any], None]]:
        return (lambda msg: None), (lambda event: None)

    def apply(self, inp: DeviceMessage) -> list[Any]:
        self.inputs += 1
        if type(inp.message) is ShoeEmpty:
            self.empty.set()
        return []


class ReplayShoe:
    """The pty's device side: a real link for the handshake, then the recorded writes, ack-clocked."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        os.set_blocking(self.master, False)
        self.path = os.ttyname(self.slave)
        self.link = Link(self._write, self._payload, name="replay shoe")
        self.writes: list[bytes] = []
        self.replaying = False
        loop.add_reader(self.master, self._readable)

    def _write(self, data: bytes) -> None:
        os.write(self.master, data)

    def _payload(self, payload: bytes) -> None:
        if type(decode(payload)) is Hello:
            ident = Ident(DeviceRole.SHOE, "replay", "shoe-1", "1.0.0", 1, 1, 0x5EED)
            self.link.send(encode(ident))

    def _readable(self) -> None:
        try:
            data = os.read(self.master, 4096)
        except OSError:
            return
        if not self.replaying:
            self.link.bytes_received(data)
        elif self.writes:
            os.write(self.master, self.writes.pop())

    def deal(self, writes: list[bytes]) -> None:
        """Write the first of ``writes``; each of the host's reads (its ACK) releases the next."""
        self.writes = writes[::-1]
        self.replaying = True
        os.write(self.master, self.writes.pop())

    def close(self) -> None:
        self.loop.remove_reader(self.master)
        self.link.close()
        os.close(self.master)
        os.close(self.slave)


async def run(shoes: int, profile: str | None) -> tuple[int, float]:
    loop = asyncio.get_running_loop()
    writes = shoe_writes(ENCODED_SHOES, random.Random(1))[:shoes]
    device = ReplayShoe(loop)
    feed = StandInFeed()
    devices = Devices.__new__(Devices)  # its connection wiring only: no configuration, no table
    devices.service = SimpleNamespace(feed=feed, event_marks={})  # type: ignore[assignment]
    devices.backoff = Backoff()
    config = SessionConfig(heartbeat_interval=3600.0, stale_after=7200.0)  # no heartbeat to answer
    connection = devices._connection(SHOE, f"serial://{device.path}", config)
    await connection.open()
    profiler = cProfile.Profile() if profile else None
    cards = 0
    before = time.process_time()
    if profiler is not None:
        profiler.enable()
    for shoe in writes:
        feed.empty.clear()
        device.deal(shoe)
        await feed.empty.wait()
        cards += DECKS * 52
    if profiler is not None and profile:
        profiler.disable()
        profiler.dump_stats(profile)
    cpu = time.process_time() - before
    expected = sum(DECKS * 52 + 3 for _ in writes)
    if feed.inputs != expected:
        raise RuntimeError(f"{feed.inputs} inputs reached the stand-in, {expected} were sent")
    await connection.close()
    device.close()
    return cards, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shoes", type=int, default=8, help=f"shoes replayed, at most {ENCODED_SHOES}")
    ap.add_argument("--profile", help="write a cProfile of the replayed shoes to FILE")
    args = ap.parse_args()
    if not 1 <= args.shoes <= ENCODED_SHOES:
        ap.error(f"--shoes: 1 to {ENCODED_SHOES}")
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    cards, cpu = asyncio.run(run(args.shoes, args.profile))
    print(f"{args.shoes} shoes, {cards} cards: host receive path {cpu / cards * 1e6:.2f} us CPU a card")
    return 0


if __name__ == "__main__":
    sys.exit(main())
