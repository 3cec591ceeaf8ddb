"""How fast the host's link stack is, over a pty, next to pymodbus RTU (a benchmark, not a test).

The simulated shoe runs in its own process (``python -m simulators shoe --pty``), so the host
stack in this process is measured alone: serial driver (pyserial + asyncio) -> framing (COBS,
CRC) -> link (seq/ACK) -> session (in its DeviceConnection) -> typed messages. Prints, in one run:

1. STATUS round trip: ``await connection.request(StatusRequest(), expect=Status)``, median and p99;
2. card frames/s: the shoe deals every card it holds as fast as its link allows (SIGUSR1) and
   the host counts the CardRead messages its connection delivers, first to last; also the bytes
   per card frame on the wire and how many frames a 921,600-baud 8N1 line could carry;
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
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import structlog  # noqa: E402

import _modbus  # noqa: E402
from _procs import first_line, stop_process  # noqa: E402
from core.cards import Card, Orientation  # noqa: E402
from firmware_bridge.framing import Frame, FrameKind, encode_frame  # noqa: E402
from firmware_bridge.messages import CardRead, Message, ShoeEmpty, Status, StatusRequest, encode  # noqa: E402
from firmware_bridge.connection import DeviceConnection  # noqa: E402
from firmware_bridge.session import SessionConfig  # noqa: E402
from simulators.shoe import MAX_CARDS  # noqa: E402

RTT_TARGET_MS = 0.5
FRAMES_TARGET = 10_000
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


def card_frame_bytes() -> int:
    """A CardRead as one DATA frame on the wire (``00 COBS(frame) 00``; COBS adds one byte here)."""
    msg = CardRead(1234, Card.parse("QH"), Orientation.FACE_DOWN, 123_456)
    return len(encode_frame(Frame(FrameKind.DATA, 7, 3, encode(msg))))


def start_shoe(cards: int, log_file: IO[str]) -> tuple[subprocess.Popen, str]:
    """The simulated shoe in its own process, loaded with ``cards`` rounded up to whole decks; its pty path."""
    decks = math.ceil(cards / 52)
    proc = subprocess.Popen([sys.executable, "-m", "simulators", "shoe", "--pty", "--decks", str(decks),
                             "--heartbeat", "0"], cwd=ROOT, stdout=subprocess.PIPE, stderr=log_file, text=True)
    return proc, first_line(proc, "the simulated shoe")


async def measure_cardd(path: str, shoe: subprocess.Popen, requests: int, warmup: int) -> tuple[list[float], CardFigures]:
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
        held = status.cards_held
        bytes_before, host_cpu, shoe_cpu = connection.wire_bytes, time.process_time(), cpu_seconds(shoe.pid)
        shoe.send_signal(signal.SIGUSR1)  # the shoe deals all it holds, as fast as its link allows
        await asyncio.wait_for(counter.empty.wait(), DEAL_TIMEOUT)
        if counter.count != held or counter.out_of_order:
            raise RuntimeError(f"the shoe held {held} cards, the host got {counter.count} CardReads; "
                               f"out of order: {counter.out_of_order[:10]}")
        figures = CardFigures(counter.count, counter.last - counter.first, connection.wire_bytes - bytes_before,
                              time.process_time() - host_cpu, cpu_seconds(shoe.pid) - shoe_cpu)
        return samples, figures
    finally:
        await connection.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (fields 14 and 15 of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile_ms(samples: list[float], pct: int) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[pct - 1] * 1000


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def report(cardd_rtt: list[float], cards: CardFigures, modbus_rtt: list[float] | str) -> None:
    median_ms = statistics.median(cardd_rtt) * 1000
    line_capacity = LINE_BYTES_PER_S / card_frame_bytes()
    rows = [
        ("STATUS round trip, median", f"{median_ms:.3f} ms", f"<= {RTT_TARGET_MS} ms", verdict(median_ms <= RTT_TARGET_MS)),
        ("STATUS round trip, p99", f"{percentile_ms(cardd_rtt, 99):.3f} ms", "", ""),
        ("card frames/s, sustained", f"{cards.per_s:,.0f}", f">= {FRAMES_TARGET:,}", verdict(cards.per_s >= FRAMES_TARGET)),
        ("  vs a 921,600-baud line", f"{cards.per_s / line_capacity:.2f} x", "> 1 x", verdict(cards.per_s > line_capacity)),
    ]
    if isinstance(modbus_rtt, str):
        rows.append(("pymodbus RTU round trip", "not measured", "", modbus_rtt))
    else:
        modbus_median = statistics.median(modbus_rtt) * 1000
        rows += [
            ("pymodbus RTU round trip, median", f"{modbus_median:.3f} ms", "(reference)", ""),
            ("pymodbus RTU round trip, p99", f"{percentile_ms(modbus_rtt, 99):.3f} ms", "", ""),
            ("  cardd STATUS is faster by", f"{modbus_median / median_ms:.1f} x", "", ""),
        ]
    print(f"{'figure':34} {'measured':>14}  {'target':<13} verdict")
    for name, value, target, result in rows:
        print(f"{name:34} {value:>14}  {target:<13} {result}".rstrip())
    print(f"STATUS: {len(cardd_rtt)} requests; cards: {cards.cards:,} CardReads in {cards.elapsed_s:.3f} s, "
          f"{cards.bytes_per_card:.1f} bytes read per card (one CardRead DATA frame is {card_frame_bytes()} bytes); "
          f"a 921,600-baud 8N1 line carries {LINE_BYTES_PER_S:,} bytes/s = {line_capacity:,.0f} card frames/s")
    print(f"CPU per card while dealing: host {cards.cpu_us_per_card(cards.host_cpu_s):.1f} us "
          f"({cards.host_cpu_s / cards.elapsed_s:.0%} of a core), simulated shoe "
          f"{cards.cpu_us_per_card(cards.shoe_cpu_s):.1f} us ({cards.shoe_cpu_s / cards.elapsed_s:.0%} of a core)")
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
          f"simulated shoe in its own process, over a pty", flush=True)

    with tempfile.TemporaryFile("w+") as shoe_log:
        try:
            shoe, path = start_shoe(args.cards, shoe_log)
            try:
                cardd_rtt, cards = asyncio.run(measure_cardd(path, shoe, args.requests, args.warmup))
            finally:
                stop_process(shoe)
        except BaseException:
            shoe_log.seek(0)
            print(f"the simulated shoe's log (its end):\n{shoe_log.read()[-4000:]}", file=sys.stderr)
            raise

    modbus_rtt: list[float] | str
    if args.modbus_requests <= 0:
        modbus_rtt = "skipped (--modbus-requests 0)"
    else:
        try:
            modbus_rtt = _modbus.measure(args.modbus_requests, args.warmup)
        except _modbus.ModbusPeerError as exc:
            modbus_rtt = str(exc)
    report(cardd_rtt, cards, modbus_rtt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
