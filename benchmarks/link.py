"""How fast the host's link stack is, protocol 1.1 and 2.0 side by side, over a pty, next to
pymodbus RTU (a benchmark, not a test).

The simulated shoe runs in its own process (``python -m simulators shoe --pty [--protocol 2.0]``),
so the host stack in this process is measured alone. Each figure is taken three ways, one
fresh shoe each, in one run:

- **1.1, connection**: serial driver (pyserial + asyncio) -> framing (COBS, CRC-16) -> link
  (seq/ACK) -> session (in its DeviceConnection) -> typed messages: what cardd runs today;
- **1.1, link** and **2.0, link**: the same driver, framing and link, and the typed messages,
  with the small host of benchmarks/_link_host.py in place of the session (which speaks 1.x
  only so far): 2.0's frames sealed with ChaCha20-Poly1305 after a handshake2 handshake done
  there. The two "link" columns differ only in the protocol.

Prints:

1. STATUS round trip: a StatusRequest answered by Status, median and p99;
2. card frames/s: the shoe deals every card it holds as fast as its link allows (SIGUSR1) and
   the host counts the CardRead messages delivered, first to last; also the bytes per card
   frame on the wire and how many such frames a 921,600-baud 8N1 line could carry;
3. pymodbus RTU ``read_holding_registers`` round trip against its own server process over a
   socat pty pair (benchmarks/_modbus.py), median and p99.

    .venv/bin/python benchmarks/link.py [--requests 2000] [--cards 50000] [--modbus-requests 2000]

docs/performance.md records the figures and explains what each one includes.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import structlog  # noqa: E402

import _modbus  # noqa: E402
from _link_host import LinkHost  # noqa: E402
from _procs import first_line, stop_process  # noqa: E402
from core.cards import Card, Orientation  # noqa: E402
from firmware_bridge.framing import FrameKind, wire_frame  # noqa: E402
from firmware_bridge.framing2 import Framing2, SessionKeys  # noqa: E402
from firmware_bridge.messages import CardRead, Event, Message, ShoeEmpty, Status, StatusRequest, encode  # noqa: E402
from firmware_bridge.connection import DeviceConnection  # noqa: E402
from firmware_bridge.session import SessionConfig  # noqa: E402
from simulators.shoe import MAX_CARDS  # noqa: E402

RTT_TARGET_MS = 0.5
FRAMES_TARGET = 10_000
LINE_MULTIPLE_TARGET = 4  # card frames/s at least 4 times what a 921,600-baud line carries
LINE_BAUD = 921_600
LINE_BYTES_PER_S = LINE_BAUD // 10  # 8N1: a start bit, 8 data bits, a stop bit per byte
DEAL_TIMEOUT = 120.0
MAX_DECK_CARDS = MAX_CARDS // 52 * 52  # the shoe is loaded with whole decks


@dataclass
class CardFigures:
    cards: int
    elapsed_s: float
    wire_bytes: int  # bytes the host read from the pty while the cards came
    host_cpu_s: float  # CPU this process used from the request to the last card
    shoe_cpu_s: float  # CPU the simulated shoe's process used in the same span

    @property
    def per_s(self) -> float:
        return self.cards / self.elapsed_s

    @property
    def bytes_per_card(self) -> float:
        return self.wire_bytes / self.cards

    def cpu_us_per_card(self, cpu_s: float) -> float:
        return cpu_s / self.cards * 1e6


class CountingConnection(DeviceConnection):
    """The real connection, counting the bytes the driver hands it (what crossed the pty)."""

    wire_bytes = 0

    def bytes_received(self, data: bytes) -> None:
        self.wire_bytes += len(data)
        super().bytes_received(data)


class CardCounter:
    """on_message for the connection: times the CardReads and checks they come in order, once each."""

    def __init__(self) -> None:
        self.count = 0
        self.first = self.last = 0.0
        self.out_of_order: list[int] = []
        self.empty = asyncio.Event()

    def __call__(self, msg: Message) -> None:
        if isinstance(msg, CardRead):
            now = time.perf_counter()
            if self.count == 0:
                self.first = now
            self.last = now
            self.count += 1
            if msg.index != self.count:
                self.out_of_order.append(msg.index)
        elif isinstance(msg, ShoeEmpty):
            self.empty.set()


def card_frame_bytes(protocol: str) -> int:
    """A numbered CardRead event as one DATA frame on the wire (``00 COBS(frame) 00``): 1.1's,
    or 2.0's sealed one."""
    payload = encode(Event(1000, CardRead(1234, Card.parse("QH"), Orientation.FACE_DOWN, 123_456)))
    if protocol == "1.1":
        return len(wire_frame(FrameKind.DATA, 7, 3, payload))
    framing = Framing2()
    framing.install(SessionKeys(bytes(32), bytes([1]) * 32, bytes(16)))
    return len(framing.wire_frame(FrameKind.DATA, 7, 3, payload))


@dataclass
class Column:
    """One way of measuring: its name, the protocol, and its figures once measured."""

    name: str
    protocol: str
    rtt: list[float] | None = None
    cards: CardFigures | None = None


def start_shoe(cards: int, log_file: IO[str], protocol: str) -> tuple[subprocess.Popen, str]:
    """The simulated shoe in its own process, loaded with ``cards`` rounded up to whole decks; its pty path."""
    decks = math.ceil(cards / 52)
    proc = subprocess.Popen([sys.executable, "-m", "simulators", "shoe", "--pty", "--decks", str(decks),
                             "--heartbeat", "0", "--protocol", protocol], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=log_file, text=True)
    return proc, first_line(proc, "the simulated shoe")


async def measure_cardd(path: str, shoe: subprocess.Popen, requests: int, warmup: int) -> tuple[list[float], CardFigures]:
    """1.1 through DeviceConnection, as cardd runs it."""
    counter = CardCounter()
    # the heartbeat and stale timers are the real ones; the shoe is never silent for 3 s here
    connection = CountingConnection(f"serial://{path}?baud={LINE_BAUD}", counter, None, SessionConfig())
    await connection.open()
    try:
        samples = []
        for i in range(warmup + requests):
            start = time.perf_counter()
            status = await connection.request(StatusRequest(), expect=Status)
            elapsed = time.perf_counter() - start
            if i >= warmup:
                samples.append(elapsed)
        return samples, await deal_all(shoe, counter, status.cards_held, lambda: connection.wire_bytes)
    finally:
        await connection.close()


async def measure_link(path: str, shoe: subprocess.Popen, requests: int, warmup: int,
                       protocol: str) -> tuple[list[float], CardFigures]:
    """1.1 or 2.0 through benchmarks/_link_host.py's host: the link and the messages, no session."""
    counter = CardCounter()
    host = LinkHost(f"serial://{path}?baud={LINE_BAUD}", counter, protocol)
    await host.open()
    try:
        samples = []
        for i in range(warmup + requests):
            start = time.perf_counter()
            status = await host.status()
            elapsed = time.perf_counter() - start
            if i >= warmup:
                samples.append(elapsed)
        return samples, await deal_all(shoe, counter, status.cards_held, lambda: host.wire_bytes)
    finally:
        host.close()


async def deal_all(shoe: subprocess.Popen, counter: "CardCounter", held: int,
                   wire_bytes: Callable[[], int]) -> CardFigures:
    """The shoe deals every card it holds as fast as its link allows; the host counts them."""
    bytes_before, host_cpu, shoe_cpu = wire_bytes(), time.process_time(), cpu_seconds(shoe.pid)
    shoe.send_signal(signal.SIGUSR1)
    await asyncio.wait_for(counter.empty.wait(), DEAL_TIMEOUT)
    if counter.count != held or counter.out_of_order:
        raise RuntimeError(f"the shoe held {held} cards, the host got {counter.count} CardReads; "
                           f"out of order: {counter.out_of_order[:10]}")
    return CardFigures(counter.count, counter.last - counter.first, wire_bytes() - bytes_before,
                       time.process_time() - host_cpu, cpu_seconds(shoe.pid) - shoe_cpu)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (fields 14 and 15 of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile_ms(samples: list[float], pct: int) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[pct - 1] * 1000


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def report(columns: list[Column], modbus_rtt: list[float] | str) -> None:
    def each(fn: Callable[[Column], str]) -> str:
        return "".join(f"{fn(c):>18}" for c in columns)

    def verdicts(ok: Callable[[Column], bool]) -> str:
        return " / ".join(verdict(ok(c)) for c in columns)

    def rtt(c: Column) -> list[float]:
        assert c.rtt is not None
        return c.rtt

    def cards(c: Column) -> CardFigures:
        assert c.cards is not None
        return c.cards

    def median_ms(c: Column) -> float:
        return statistics.median(rtt(c)) * 1000

    def line_multiple(c: Column) -> float:
        return cards(c).per_s / (LINE_BYTES_PER_S / card_frame_bytes(c.protocol))

    rows = [
        ("STATUS round trip, median", each(lambda c: f"{median_ms(c):.3f} ms"), f"<= {RTT_TARGET_MS} ms",
         verdicts(lambda c: median_ms(c) <= RTT_TARGET_MS)),
        ("STATUS round trip, p99", each(lambda c: f"{percentile_ms(rtt(c), 99):.3f} ms"), "", ""),
        ("card frames/s, sustained", each(lambda c: f"{cards(c).per_s:,.0f}"), f">= {FRAMES_TARGET:,}",
         verdicts(lambda c: cards(c).per_s >= FRAMES_TARGET)),
        ("  vs a 921,600-baud line", each(lambda c: f"{line_multiple(c):.2f} x"), f">= {LINE_MULTIPLE_TARGET} x",
         verdicts(lambda c: line_multiple(c) >= LINE_MULTIPLE_TARGET)),
        ("  bytes read per card", each(lambda c: f"{cards(c).bytes_per_card:.1f}"), "", ""),
        ("  host CPU per card", each(lambda c: f"{cards(c).cpu_us_per_card(cards(c).host_cpu_s):.1f} us"), "", ""),
        ("  shoe CPU per card", each(lambda c: f"{cards(c).cpu_us_per_card(cards(c).shoe_cpu_s):.1f} us"), "", ""),
    ]
    reference: list[tuple[str, str]] = []
    if isinstance(modbus_rtt, str):
        reference.append(("pymodbus RTU round trip", f"not measured: {modbus_rtt}"))
    else:
        modbus_median = statistics.median(modbus_rtt) * 1000
        reference += [
            ("pymodbus RTU round trip, median", f"{modbus_median:.3f} ms (reference)"),
            ("pymodbus RTU round trip, p99", f"{percentile_ms(modbus_rtt, 99):.3f} ms"),
            ("  cardd 1.1 STATUS is faster by", f"{modbus_median / median_ms(columns[0]):.1f} x"),
        ]
    print(f"{'figure':30}{each(lambda c: c.name)}  {'target':<13} verdict")
    for name, values, target, result in rows:
        print(f"{name:30}{values}  {target:<13} {result}".rstrip())
    for name, value in reference:
        print(f"{name:30} {value}")
    print(f"STATUS: {len(rtt(columns[0]))} requests each; cards: {cards(columns[0]).cards:,} CardReads each; "
          f"one numbered CardRead DATA frame is {card_frame_bytes('1.1')} bytes in 1.1, "
          f"{card_frame_bytes('2.0')} in 2.0 (sealed); a 921,600-baud 8N1 line carries {LINE_BYTES_PER_S:,} "
          f"bytes/s = {LINE_BYTES_PER_S / card_frame_bytes('1.1'):,.0f} 1.1 or "
          f"{LINE_BYTES_PER_S / card_frame_bytes('2.0'):,.0f} 2.0 card frames/s")
    print("the \"link\" columns: benchmarks/_link_host.py's host (no session: firmware_bridge/session.py speaks "
          "1.x only so far), 2.0 after a handshake2 handshake with the simulated shoe")
    if not isinstance(modbus_rtt, str):
        print(f"pymodbus {_modbus_version()}: {len(modbus_rtt)} read_holding_registers(1, count={_modbus.REGISTERS}) "
              f"over a socat pty pair, server in its own process")


def _modbus_version() -> str:
    import pymodbus
    return pymodbus.__version__


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000, help="STATUS requests measured (after --warmup)")
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--cards", type=int, default=50_000, help=f"cards the shoe deals (rounded up to whole decks, at most {MAX_DECK_CARDS:,})")
    ap.add_argument("--modbus-requests", type=int, default=2000, help="pymodbus reads measured (0: skip)")
    args = ap.parse_args()
    if not 0 < args.cards <= MAX_DECK_CARDS:
        ap.error(f"--cards {args.cards}: allowed 1..{MAX_DECK_CARDS} (CardRead.index is 16 bits)")
    # the link logs state changes; a benchmark measures the stack, not a console
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(f"link benchmark: python {sys.version.split()[0]}, {os.cpu_count()} CPUs; host stack in this process, "
          f"simulated shoe in its own process (a fresh one per column), over a pty", flush=True)

    columns = [Column("1.1, connection", "1.1"), Column("1.1, link", "1.1"), Column("2.0, link", "2.0")]
    for column in columns:
        with tempfile.TemporaryFile("w+") as shoe_log:
            try:
                shoe, path = start_shoe(args.cards, shoe_log, column.protocol)
                try:
                    if column.name == "1.1, connection":
                        column.rtt, column.cards = asyncio.run(measure_cardd(path, shoe, args.requests, args.warmup))
                    else:
                        column.rtt, column.cards = asyncio.run(measure_link(path, shoe, args.requests, args.warmup,
                                                                            column.protocol))
                finally:
                    stop_process(shoe)
            except BaseException:
                shoe_log.seek(0)
                print(f"{column.name}: the simulated shoe's log (its end):\n{shoe_log.read()[-4000:]}",
                      file=sys.stderr)
                raise

    modbus_rtt: list[float] | str
    if args.modbus_requests <= 0:
        modbus_rtt = "skipped (--modbus-requests 0)"
    else:
        try:
            modbus_rtt = _modbus.measure(args.modbus_requests, args.warmup)
        except _modbus.ModbusPeerError as exc:
            modbus_rtt = str(exc)
    report(columns, modbus_rtt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
