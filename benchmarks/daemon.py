"""The daemon end to end: a benchmark (prints figures), not a test.

    .venv/bin/python benchmarks/daemon.py [--idle-seconds 60] [--shoes 100]

The real ``cardd`` runs in its own process with the durable journal (WAL, synchronous=FULL,
group commit); the simulated shuffler and shoe run in this process, each behind its own pty
(the daemon opens them with the serial driver exactly as real devices). Measured:

- latency from the shoe writing a CardRead (the moment the simulated device emits it,
  CLOCK_MONOTONIC, which both processes share) to its journaled input record arriving at a
  WATCH subscriber, p50 and p99, with 1 and with 50 subscribers (cards dealt one at a time);
- sustained card events per second end to end (the shoe deals a whole shoe as fast as its
  link takes it; device -> daemon -> journal -> subscriber);
- start-up time (process start to the API answering), on an empty journal and at the end;
- idle CPU of the daemon with both devices connected (heartbeats only);
- resident memory after each batch of shoes, and its trend.

The cards of the throughput and memory runs are dealt with no round open: the tracker takes
each as a card drawn in error (a warning event), so each card read still makes an input
record and an event, journaled and published.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from firmware_bridge.messages import CardRead, Message  # noqa: E402
from simulators.pty_endpoint import PtyEndpoint  # noqa: E402
from simulators.rig import SimulatedTable  # noqa: E402

CARDD = Path(sys.executable).with_name("cardd")
CARD_READ_HEX = "30"  # CardRead's type code, the first byte of its encoding


class Subscriber:
    """A WATCH client: the arrival time of each card read (by index) in the current phase."""

    def __init__(self) -> None:
        self.arrived: dict[int, float] = {}
        self.task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()

    async def run(self, path: Path) -> None:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 20)
        await reader.readline()  # VERSION
        writer.write(b'{"class":"WATCH","id":"w"}\n')
        await writer.drain()
        await reader.readline()  # ACK
        self.ready.set()
        try:
            while line := await reader.readline():
                if b'"DeviceMessage"' not in line:
                    continue
                now = time.monotonic()
                event = json.loads(line)
                hexed = event["data"].get("message", "")
                if event["kind"] == "input" and hexed.startswith(CARD_READ_HEX):
                    self.arrived.setdefault(int(hexed[2:6], 16), now)
        finally:
            writer.close()


class Bench:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.sim = SimulatedTable.over_ptys(shuffle_time_s=0.0)
        self.emitted: dict[int, float] = {}
        self.proc: asyncio.subprocess.Process | None = None
        self.control: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._n = 0

    def start_devices(self) -> Path:
        self.sim.start()
        shoe = self.sim.shoe
        device = shoe.device
        original = device.emit

        def emit(msg: Message) -> None:  # the moment the shoe reports the card (on its own loop)
            if isinstance(msg, CardRead):
                self.emitted.setdefault(msg.index, time.monotonic())
            original(msg)

        device.emit = emit  # type: ignore[method-assign]
        assert isinstance(shoe, PtyEndpoint) and isinstance(self.sim.shuffler, PtyEndpoint)
        config = self.directory / "cardd.toml"
        config.write_text(
            f'[devices]\nshoe = "{shoe.url}"\nshuffler = "{self.sim.shuffler.url}"\n\n'
            f'[table]\nrules = "{ROOT / "rules" / "casino-000.toml"}"\n\n'
            f'[journal]\npath = "{self.directory / "journal.sqlite3"}"\n\n'
            f'[api]\nsocket = "{self.directory / "cardd.sock"}"\n\n[log]\nlevel = "warning"\n')
        return config

    @property
    def sock(self) -> Path:
        return self.directory / "cardd.sock"

    async def start_daemon(self, config: Path) -> float:
        """Seconds from process start to the API's VERSION line."""
        began = time.monotonic()
        self.proc = await asyncio.create_subprocess_exec(str(CARDD), "--config", str(config), "--log-format", "json",
                                                         stdout=asyncio.subprocess.DEVNULL,
                                                         stderr=asyncio.subprocess.DEVNULL)
        while True:
            try:
                reader, writer = await asyncio.open_unix_connection(str(self.sock))
                await reader.readline()
                took = time.monotonic() - began
                self.control = (reader, writer)
                return took
            except OSError:
                await asyncio.sleep(0.002)

    async def stop_daemon(self) -> None:
        if self.control is not None:
            self.control[1].close()
            self.control = None
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            await self.proc.wait()

    async def request(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self.control is not None
        reader, writer = self.control
        self._n += 1
        writer.write(json.dumps({**message, "id": str(self._n)}).encode() + b"\n")
        await writer.drain()
        reply: dict[str, Any] = json.loads(await reader.readline())
        return reply

    async def state(self) -> dict[str, Any]:
        return (await self.request({"class": "STATE"}))["state"]

    async def until(self, check: Any, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            state = await self.state()
            if check(state):
                return state
            if time.monotonic() > deadline:
                raise RuntimeError(f"the table never got there: {json.dumps(state)[:500]}")
            await asyncio.sleep(0.01)

    async def new_shoe(self) -> None:
        """Void what is left, shuffle, load: the shoe is in the burn."""
        state = await self.state()
        if state["shoe"]["state"] not in ("idle", "void", "reconciled", "refused"):
            reply = await self.request({"class": "COMMAND", "name": "void_shoe", "args": {}})
            assert reply["class"] == "ACK", reply
        reply = await self.request({"class": "COMMAND", "name": "start_shuffle", "args": {}})
        assert reply["class"] == "ACK", reply
        await self.until(lambda s: s["shoe"]["state"] == "verified")
        await asyncio.to_thread(self.sim.hand_off, 1.0)  # cut card at the very end: deal the whole stack
        await self.until(lambda s: s["shoe"]["state"] == "burning")
        self.emitted.clear()

    def deal(self, n: int) -> None:
        self.sim.shoe.call(self.sim.shoe.device.deal, n)

    def rss_mb(self) -> float:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def cpu_seconds(self) -> float:
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def latency(bench: Bench, subscribers: int, cards: int) -> tuple[float, float]:
    subs = [Subscriber() for _ in range(subscribers)]
    for sub in subs:
        sub.task = asyncio.create_task(sub.run(bench.sock))
    await asyncio.gather(*(sub.ready.wait() for sub in subs))
    await bench.new_shoe()
    samples: list[float] = []
    for index in range(1, cards + 1):
        await asyncio.to_thread(bench.deal, 1)
        while not all(index in sub.arrived for sub in subs):
            await asyncio.sleep(0.0005)
        samples += [sub.arrived[index] - bench.emitted[index] for sub in subs]
        await asyncio.sleep(0.005)  # one card at a time: latency, not throughput
    for sub in subs:
        assert sub.task is not None
        sub.task.cancel()
    samples.sort()
    return statistics.median(samples) * 1000, samples[int(len(samples) * 0.99)] * 1000


async def throughput(bench: Bench) -> tuple[int, float]:
    sub = Subscriber()
    sub.task = asyncio.create_task(sub.run(bench.sock))
    await sub.ready.wait()
    await bench.new_shoe()
    cards = bench.sim.shoe.call(bench.sim.shoe.device.cards_held)
    began = time.monotonic()
    await asyncio.to_thread(bench.deal, cards)
    while len(sub.arrived) < cards:
        await asyncio.sleep(0.001)
    took = max(sub.arrived.values()) - began
    sub.task.cancel()
    return cards, cards / took


async def many_shoes(bench: Bench, shoes: int) -> list[tuple[int, float]]:
    sub = Subscriber()
    sub.task = asyncio.create_task(sub.run(bench.sock))
    await sub.ready.wait()
    trend = []
    for n in range(1, shoes + 1):
        sub.arrived.clear()
        await bench.new_shoe()
        cards = bench.sim.shoe.call(bench.sim.shoe.device.cards_held)
        await asyncio.to_thread(bench.deal, cards)
        while len(sub.arrived) < cards:
            await asyncio.sleep(0.002)
        if n % max(1, shoes // 5) == 0 or n == 1:
            trend.append((n, bench.rss_mb()))
    sub.task.cancel()
    return trend


async def main(args: argparse.Namespace) -> None:
    directory = Path(tempfile.mkdtemp(prefix="cardd-bench-"))
    bench = Bench(directory)
    try:
        config = bench.start_devices()
        startup = await bench.start_daemon(config)
        print(f"start-up (empty journal): {startup * 1000:.0f} ms to the API's VERSION line")
        await bench.until(lambda s: all(d["link"] == "up" for d in s["devices"].values()))
        for subs in (1, 50):
            p50, p99 = await latency(bench, subs, args.cards)
            print(f"latency CardRead written -> subscriber, {subs:2d} subscriber(s), {args.cards} cards: "
                  f"p50 {p50:.2f} ms, p99 {p99:.2f} ms")
        cards, rate = await throughput(bench)
        print(f"sustained: {cards} card reads end to end at {rate:,.0f} cards/s (1 subscriber)")
        trend = await many_shoes(bench, args.shoes)
        print("RSS after shoes: " + ", ".join(f"{n}: {mb:.1f} MB" for n, mb in trend))
        await asyncio.sleep(2)  # let the last commits settle before idling
        before, began = bench.cpu_seconds(), time.monotonic()
        await asyncio.sleep(args.idle_seconds)
        used = bench.cpu_seconds() - before
        print(f"idle CPU over {args.idle_seconds:.0f} s, both devices connected: "
              f"{used / (time.monotonic() - began) * 100:.2f} % of a core")
        records = (await bench.state())["seq"]
        await bench.stop_daemon()
        startup = await bench.start_daemon(config)
        print(f"start-up (journal of {records:,} records): {startup * 1000:.0f} ms")
    finally:
        await bench.stop_daemon()
        bench.sim.stop()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    import logging

    import structlog
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))  # the simulators' logs
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cards", type=int, default=200, help="cards dealt one at a time for each latency figure")
    ap.add_argument("--shoes", type=int, default=100, help="shoes dealt for the memory trend")
    ap.add_argument("--idle-seconds", type=float, default=60.0)
    asyncio.run(main(ap.parse_args()))
