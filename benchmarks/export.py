"""The floor export against a real mosquitto on loopback: a benchmark (prints figures), not a test.

    .venv/bin/python benchmarks/export.py --backlog 1000000 --cards 600 --path-cards 300 --shoes 20 --idle-seconds 60

mosquitto 2 (Debian's) runs with a minimal configuration of its own (anonymous, no persistence, one
loopback listener); the exporter speaks MQTT 5 to it, QoS 1, the default card filter. Measured:

- **drain**: records/s the :class:`~cardd.export.exporter.Exporter` delivers from a backlog of N
  records (a journal built with the journal API, rounds as benchmarks/journal.py writes them),
  from its start to ``delivered_through() == N``, in a process of its own; that process's RSS
  before the exporter starts and at its peak (the backlog's memory);
- **floor latency**: a real ``cardd`` dealing one card every 50 ms (20 cards/s, no round open:
  each card one record), from the simulated shoe writing the CardRead's bytes (CLOCK_MONOTONIC)
  to an MQTT subscriber in this process receiving that card's record (CLOCK_MONOTONIC too), p50/p99;
- **the card path with the broker SIGSTOP'ed**: benchmarks/daemon.py's latency (shoe -> WATCH
  subscriber, one card at a time) with mosquitto running, SIGSTOP'ed, and running again, one daemon;
- **CPU**: the daemon's CPU over the same whole shoes dealt flat out with export on and off
  (/proc/PID/stat, alternated), the difference per exported record; and its idle CPU with export
  on and off, both devices connected;
- the card path (the same latency) with export on and off, alternated;
- the daemon's RSS after those shoes with export on.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))  # its sibling benchmarks, by name (a spawned child finds them too)

import daemon as daemon_bench  # noqa: E402  (benchmarks/daemon.py: the daemon, devices and WATCH rig)
import journal as journal_bench  # noqa: E402  (benchmarks/journal.py: a journal of rounds)
import paho.mqtt.client as mqtt  # noqa: E402
from _procs import stop_process  # noqa: E402
from paho.mqtt.enums import CallbackAPIVersion  # noqa: E402

from cardd.config import ExportConfig  # noqa: E402
from cardd.journal import Journal, input_of  # noqa: E402

MOSQUITTO = shutil.which("mosquitto", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") or "/usr/sbin/mosquitto"
DRAIN_TARGET = 20_000  # records/s
LATENCY_P99_TARGET_MS = 20.0
IDLE_TARGET = 0.5  # % of a core
RSS_TARGET_MB = 60.0
DEAL_GAP_S = 0.05  # 20 cards/s
SITE, TABLE = "bench", "bj-01"


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def free_port() -> int:
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Broker:
    """mosquitto on a free loopback port, for this run only."""

    def __init__(self, directory: Path, extra: str = "") -> None:
        """``extra``: more lines of mosquitto.conf."""
        self.port = free_port()
        config = directory / f"mosquitto-{self.port}.conf"
        config.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                          f"log_dest none\n{extra}")
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(config)], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not self._accepts():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mosquitto ({MOSQUITTO}) did not start")
            time.sleep(0.02)

    def _accepts(self) -> bool:
        import socket
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def pause(self) -> None:
        self.proc.send_signal(19)  # SIGSTOP

    def resume(self) -> None:
        self.proc.send_signal(18)  # SIGCONT

    def stop(self) -> None:
        self.resume()
        stop_process(self.proc)


def export_config(url: str) -> ExportConfig:
    return ExportConfig(brokers=[url], site=SITE, table=TABLE)


# ---- the drain: an Exporter alone, in its own process ------------------------------------------

def rss_kb(pid: int | str = "self") -> dict[str, int]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return found


def _drain(path: str, url: str, conn: Connection) -> None:
    """In a process of its own: export the whole journal at ``path`` to ``url``; send the figures."""
    import logging

    import structlog
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    from cardd.export.exporter import Exporter, TableFacts
    journal = Journal.open(path)
    total = journal.last_seq
    before = rss_kb()
    exporter = Exporter(export_config(url), journal, TableFacts("bench", "casino-000", "0" * 64, ()))
    cpu0, began = time.process_time(), time.monotonic()
    exporter.start()
    peak_rss = 0
    while exporter.delivered_through() < total:
        time.sleep(0.01)
        peak_rss = max(peak_rss, rss_kb()["VmRSS"])
        if time.monotonic() - began > 3600:
            break
    took, cpu = time.monotonic() - began, time.process_time() - cpu0
    delivered = exporter.delivered_through()
    exporter.stop()
    journal.close()
    conn.send({"records": total, "delivered": delivered, "seconds": took, "cpu": cpu,
               "rss_before_mb": before["VmRSS"] / 1024, "rss_peak_mb": peak_rss / 1024,
               "hwm_mb": rss_kb()["VmHWM"] / 1024})


def drain(directory: Path, broker: Broker, records: int) -> None:
    path = directory / "backlog.sqlite3"
    journal_bench.build(path, records)
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    proc = context.Process(target=_drain, args=(str(path), broker.url, child), daemon=True)
    broker_cpu = daemon_bench.process_cpu(broker.proc.pid)
    proc.start()
    figures: dict[str, Any] = parent.recv()
    broker_cpu = daemon_bench.process_cpu(broker.proc.pid) - broker_cpu
    proc.join(30)
    peak = max(figures["rss_peak_mb"], figures["hwm_mb"])
    rate = figures["delivered"] / figures["seconds"]
    print(f"drain: {figures['delivered']:,} of {figures['records']:,} backlog records delivered in "
          f"{figures['seconds']:.1f} s = {rate:,.0f} records/s (target >= {DRAIN_TARGET:,}: {verdict(rate >= DRAIN_TARGET)}); "
          f"exporter CPU {figures['cpu'] / max(1, figures['delivered']) * 1e6:.1f} us a record "
          f"({figures['cpu'] / figures['seconds'] * 100:.0f} % of a core); "
          f"mosquitto's CPU {broker_cpu / max(1, figures['delivered']) * 1e6:.1f} us a record")
    print(f"RSS with a {figures['records']:,}-record backlog: {peak:.1f} MB at most while it drained "
          f"({figures['rss_before_mb']:.1f} MB with the journal open, before the export) "
          f"(target <= {RSS_TARGET_MB:.0f} MB: {verdict(peak <= RSS_TARGET_MB)})")
    for stale in directory.glob("backlog.sqlite3*"):
        stale.unlink()


# ---- the daemon ----------------------------------------------------------------------------------

class FloorSubscriber:
    """An MQTT subscriber to the table's events: when (CLOCK_MONOTONIC) each seq first arrived."""

    def __init__(self, broker: Broker) -> None:
        self.arrived: dict[int, float] = {}
        self._subscribed = threading.Event()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="bench-floor", protocol=mqtt.MQTTv5)
        self.client.on_connect = lambda c, *_: c.subscribe(f"cardd/v1/{SITE}/{TABLE}/events", qos=1)
        self.client.on_subscribe = lambda *_: self._subscribed.set()
        self.client.on_message = self._message
        self.client.connect("127.0.0.1", broker.port)
        self.client.loop_start()
        assert self._subscribed.wait(10), "the benchmark's subscriber never subscribed"

    def _message(self, _client: mqtt.Client, _userdata: Any, message: mqtt.MQTTMessage) -> None:
        now = time.monotonic()
        for event in json.loads(message.payload)["events"]:  # a message holds one or more records
            self.arrived.setdefault(event["seq"], now)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def card_seqs(journal_path: Path, after: int) -> dict[int, int]:
    """Card index (in its shoe) -> the seq of the record carrying that read, for records after ``after``."""
    found: dict[int, int] = {}
    with Journal.open(journal_path, readonly=True) as journal:
        for record in journal.query(seq_from=after + 1, limit=None):
            read = input_of(record.kind, record.data)
            if isinstance(read, dict) and str(read.get("message", "")).startswith(daemon_bench.CARD_READ_HEX):
                found.setdefault(int(read["message"][2:6], 16), record.seq)
    return found


async def floor_latency(bench: Any, floor: FloorSubscriber, cards: int) -> tuple[float, float, int]:
    """(p50, p99 ms, samples): cards dealt one every DEAL_GAP_S, shoe write -> MQTT subscriber."""
    samples: list[float] = []
    left = cards
    while left:
        await bench.new_shoe()
        after = (await bench.state())["seq"]
        dealt = min(left, await bench.devices("cards_held"))
        began = time.monotonic()
        for n in range(dealt):
            await bench.devices("deal", 1)
            await asyncio.sleep(max(0.0, began + (n + 1) * DEAL_GAP_S - time.monotonic()))
        emitted: dict[int, float] = await bench.devices("emitted")
        await bench.until(lambda s: s["export"]["backlog"] == 0, timeout=60)
        seqs = card_seqs(bench.directory / "journal.sqlite3", after)
        deadline = time.monotonic() + 30
        while any(seq not in floor.arrived for seq in seqs.values()) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        samples += [floor.arrived[seq] - emitted[index] for index, seq in seqs.items()
                    if seq in floor.arrived and index in emitted]
        left -= dealt
    samples.sort()
    return statistics.median(samples) * 1000, samples[int(len(samples) * 0.99)] * 1000, len(samples)


def write_config(bench: Any, broker: Broker | None) -> Path:
    config: Path = bench.directory / "cardd.toml"
    text = config.read_text().split("\n[export]")[0]
    if broker is not None:
        text += f'\n[export]\nbrokers = ["{broker.url}"]\nsite = "{SITE}"\ntable = "{TABLE}"\n'
    config.write_text(text)
    return config


async def shoes_cpu(bench: Any, shoes: int) -> tuple[float, int]:
    """The daemon's CPU seconds over ``shoes`` whole shoes dealt flat out, until the export has
    them all (when on), and the records they made."""
    watchers = await daemon_bench.Watchers.connect(bench.sock, 1, bench.selector)
    seqs = cpu = 0.0
    try:
        for _ in range(shoes):
            await bench.new_shoe()
            first = (await bench.state())["seq"]
            before = bench.cpu_seconds()
            watchers.clear()
            cards: int = await bench.devices("cards_held")
            await bench.devices("deal", cards)
            await watchers.wait_for(cards)
            state = await bench.until(lambda s: s.get("export") is None or s["export"]["backlog"] == 0, timeout=60)
            cpu += bench.cpu_seconds() - before
            seqs += state["seq"] - first
    finally:
        watchers.close()
    return cpu, int(seqs)


async def idle_cpu(bench: Any, seconds: float) -> float:
    await asyncio.sleep(1.0)  # the last commits and acknowledgements settle
    before, began = bench.cpu_seconds(), time.monotonic()
    await asyncio.sleep(seconds)
    return (bench.cpu_seconds() - before) / (time.monotonic() - began) * 100


async def run_daemon(args: argparse.Namespace, broker: Broker, directory: Path,
                     selector: daemon_bench.StampingSelector) -> None:
    bench = daemon_bench.Bench(directory, selector)
    floor = FloorSubscriber(broker)
    try:
        bench.start_devices()
        await bench.start_daemon(write_config(bench, broker))
        await bench.until(lambda s: all(d["link"] == "up" for d in s["devices"].values())
                          and s["export"]["connected"])
        p50, p99, n = await floor_latency(bench, floor, args.cards)
        print(f"floor latency, CardRead written -> MQTT subscriber, {n} cards at 20 cards/s: p50 {p50:.2f} ms, "
              f"p99 {p99:.2f} ms (target p99 <= {LATENCY_P99_TARGET_MS:.0f} ms: {verdict(p99 <= LATENCY_P99_TARGET_MS)})")
        figures = []
        for what in ("running", "SIGSTOP'ed", "running again"):
            if what == "SIGSTOP'ed":
                broker.pause()
            p50, p99 = await daemon_bench.latency(bench, 1, args.path_cards)
            if what == "SIGSTOP'ed":
                export = (await bench.state())["export"]
                broker.resume()
                what += f" (export then: connected {export['connected']}, backlog {export['backlog']})"
            figures.append(f"broker {what}: p50 {p50:.2f} ms, p99 {p99:.2f} ms")
        print(f"card path, CardRead written -> WATCH subscriber, {args.path_cards} cards each: " + "; ".join(figures))
        await bench.until(lambda s: s["export"]["connected"] and s["export"]["backlog"] == 0, timeout=120)
        on_cpu = on_records = off_cpu = off_records = 0.0
        idle_on = idle_off = 0.0
        path: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for _ in range(args.pairs):
            for export_on in (True, False):
                await bench.stop_daemon()
                await bench.start_daemon(write_config(bench, broker if export_on else None))
                await bench.until(lambda s: all(d["link"] == "up" for d in s["devices"].values())
                                  and (not export_on or (s["export"]["connected"] and s["export"]["backlog"] == 0)))
                path[export_on].append(await daemon_bench.latency(bench, 1, args.path_cards))
                cpu, records = await shoes_cpu(bench, args.shoes)
                idle = await idle_cpu(bench, args.idle_seconds)
                if export_on:
                    on_cpu, on_records, idle_on = on_cpu + cpu, on_records + records, idle_on + idle
                    rss = bench.rss_mb()
                else:
                    off_cpu, off_records, idle_off = off_cpu + cpu, off_records + records, idle_off + idle
        print(f"card path, CardRead written -> WATCH subscriber, {args.path_cards} cards a run, p50/p99 ms: "
              + "; ".join(f"export {'on' if on else 'off'} " + ", ".join(f"{p50:.2f}/{p99:.2f}" for p50, p99 in path[on])
                          for on in (True, False)))
        per_on, per_off = on_cpu / on_records * 1e6, off_cpu / off_records * 1e6
        print(f"daemon CPU a record over {args.pairs} x {args.shoes} shoes flat out: export on {per_on:.1f} us, "
              f"off {per_off:.1f} us: the export's extra CPU {per_on - per_off:.1f} us a record")
        idle_on, idle_off = idle_on / args.pairs, idle_off / args.pairs
        print(f"idle CPU over {args.idle_seconds:g} s, both devices connected: export on {idle_on:.2f} %, "
              f"off {idle_off:.2f} % of a core (target <= {IDLE_TARGET} %: {verdict(idle_on <= IDLE_TARGET)})")
        print(f"daemon RSS with export on, after {args.pairs * args.shoes} shoes: {rss:.1f} MB")
    finally:
        floor.close()
        await bench.stop_daemon()
        if bench.sim is not None:
            bench.sim.stop()


def main(args: argparse.Namespace) -> None:
    directory = Path(tempfile.mkdtemp(prefix="cardd-bench-export-"))
    broker = Broker(directory)
    try:
        drain(directory, broker, args.backlog)
        selector = daemon_bench.StampingSelector()
        with asyncio.Runner(loop_factory=lambda: asyncio.SelectorEventLoop(selector)) as runner:
            runner.run(run_daemon(args, broker, directory, selector))
    finally:
        broker.stop()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    import logging

    import structlog
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))  # the simulators' logs
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backlog", type=int, default=20_000, help="records in the backlog drained (full: 1000000)")
    ap.add_argument("--cards", type=int, default=100, help="cards dealt at 20 cards/s for the floor latency (full: 600)")
    ap.add_argument("--path-cards", type=int, default=100,
                    help="cards dealt one at a time for each card-path latency (full: 300)")
    ap.add_argument("--shoes", type=int, default=2, help="shoes dealt flat out for each CPU figure (full: 20)")
    ap.add_argument("--pairs", type=int, default=1, help="export on/off runs alternated for the CPU figures (full: 2)")
    ap.add_argument("--idle-seconds", type=float, default=5.0, help="each idle CPU window (full: 60)")
    main(ap.parse_args())
