"""The daemon end to end: a benchmark (prints figures), not a test.

    .venv/bin/python benchmarks/daemon.py [--idle-seconds 60] [--shoes 100]

The real ``cardd`` runs in its own process with the durable journal (WAL, synchronous=FULL,
group commit); the simulated shuffler and shoe run in a third process, each behind its own
pty (the daemon opens them with the serial driver exactly as real devices), so neither the
devices nor the subscribers (here, in the benchmark's own process) share a GIL with the other.
Measured:

- latency from the shoe writing a CardRead (the moment the simulated device writes the bytes
  holding its frame to the pty, CLOCK_MONOTONIC, which both processes share) to its journaled
  input record arriving at a WATCH subscriber, p50 and p99, with 1 and with 50 subscribers (cards dealt one at a time);
- sustained card events per second end to end (the shoe deals whole shoes as fast as its
  link takes them; device -> daemon -> journal -> subscriber: from the shoe writing the bytes of
  a shoe's first card to the last card arriving at the subscriber; 50 shoes by default, and the
  spread of the shoes' own rates: one shoe pours in within 10-20 ms), and each process's CPU per card;
- start-up time (process start to the API answering), on an empty journal and at the end,
  and with ``--journal-records N`` (5,000,000: 90 days of a busy table) on that journal padded to
  N records with journal rounds (benchmarks/journal.py's), the table's latest snapshot written
  again with the last batch so the daemon restores the same table;
- idle CPU of the daemon with both devices connected (heartbeats only);
- the floor under the latency: one card's durable commit (its one record) alone, on the same
  disk, one every 5 ms as the latency phase deals them and back to back (a disk left idle a
  few milliseconds syncs slower: on this kind of virtual machine, 0.3 ms back to back and
  0.7-0.9 ms with 5 ms between);
- resident memory after each batch of shoes, and its trend.

The cards of the throughput and memory runs are dealt with no round open: the tracker takes
each as a card drawn in error (a warning event carrying the read), so each card read still
makes a record, journaled and published.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import multiprocessing
import os
import random
import selectors
import shutil
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cardd.config import RULES_DIR  # noqa: E402
from cardd.journal import INPUT_KEY, Entry, Journal, input_of  # noqa: E402
from firmware_bridge.messages import CardRead, Message  # noqa: E402
from simulators.pty_endpoint import PtyEndpoint  # noqa: E402
from simulators.rig import SimulatedTable  # noqa: E402
from multiprocessing.connection import Connection  # noqa: E402

CARDD = Path(sys.executable).with_name("cardd")
CARD_READ_HEX = "30"  # CardRead's type code, the first byte of its encoding
#: in an API line, what only a record carrying a card read holds: its input's encoded message (the
#: event the read caused carries it under the journal's INPUT_KEY; the API's JSON has no spaces)
CARD_READ_LINE = b'"message":"' + CARD_READ_HEX.encode()


class StampingSelector(selectors.EpollSelector):
    """The benchmark loop's selector: notes when each ``epoll`` wait returned."""

    woke = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(timeout)
        self.woke = time.monotonic()
        return ready


class Watchers:
    """WATCH clients on the daemon's API socket: the arrival time of each card read (by index),
    per client, in the current phase.

    Each client is a plain socket read by a reader callback of the loop (no stream, no task); a
    chunk is stamped with the moment the loop's ``epoll`` wait returned (the bytes were there by
    then: an upper bound on their arrival) and lines are parsed only when asked. So 50 clients
    measure the daemon's fan-out, not 50 asyncio readers (about 40 us each) queued behind each
    other in this process; and nothing polls while waiting for a card."""

    def __init__(self, socks: list[socket.socket], selector: StampingSelector) -> None:
        """``selector``: the one the running loop was made with (it stamps the chunks)."""
        self.loop = asyncio.get_running_loop()
        self.selector = selector
        self.socks = socks
        self.chunks: list[list[tuple[float, bytes]]] = [[] for _ in socks]
        self.counts = [0] * len(socks)  # lines that may be card reads (an upper bound, cheap)
        self._tails = [b""] * len(socks)
        self._want: tuple[int, asyncio.Future[None]] | None = None
        self._short = 0
        for n, sock in enumerate(socks):
            sock.setblocking(False)
            self.loop.add_reader(sock.fileno(), self._readable, n)

    @classmethod
    async def connect(cls, path: Path, clients: int, selector: StampingSelector) -> "Watchers":
        socks, early = [], []
        for _ in range(clients):
            reader, writer = await asyncio.open_unix_connection(str(path))
            await reader.readline()  # VERSION
            writer.write(b'{"class":"WATCH","id":"w"}\n')
            await reader.readline()  # ACK: nothing is published to this client before it
            # what the stream read past the ACK (an event published meanwhile) is this client's too
            early.append(bytes(reader._buffer))  # type: ignore[attr-defined]
            socks.append(writer.get_extra_info("socket").dup())
            writer.transport.abort()  # the stream lets go; the duplicate stays open
        watchers = cls(socks, selector)
        for n, data in enumerate(early):
            if data:
                watchers._take(n, time.monotonic(), data)
        return watchers

    def _readable(self, n: int) -> None:
        try:
            data = self.socks[n].recv(1 << 20)
        except BlockingIOError:
            return
        if not data:
            self.loop.remove_reader(self.socks[n].fileno())
            return
        self._take(n, self.selector.woke, data)

    def _take(self, n: int, when: float, data: bytes) -> None:
        # as little Python as can be: with 50 clients this process reads 50 sockets a card, and
        # the later ones are stamped at a later epoll return the longer it spends on each
        self.chunks[n].append((when, data))
        end = data.rfind(b"\n") + 1
        if not end:
            self._tails[n] += data
            return
        tail = self._tails[n]
        self._tails[n] = data[end:]
        count = self.counts[n]
        self.counts[n] = count + (tail + data[:end] if tail else data[:end] if end < len(data) else data).count(
            CARD_READ_LINE)
        want = self._want
        if want is not None and count < want[0] <= self.counts[n]:
            self._short -= 1
            if not self._short and not want[1].done():
                want[1].set_result(None)

    async def wait_for(self, count: int, timeout: float = 30.0) -> None:
        """Until every client has at least ``count`` card lines."""
        if min(self.counts) >= count:
            return
        self._want = (count, self.loop.create_future())
        self._short = sum(1 for got in self.counts if got < count)  # clients still short of it
        try:
            await asyncio.wait_for(self._want[1], timeout)
        except TimeoutError:
            raise RuntimeError(f"the watchers got {min(self.counts)} of {count} card reads in {timeout} s") from None
        finally:
            self._want = None

    def clear(self) -> None:
        for n in range(len(self.socks)):
            self.chunks[n], self.counts[n] = [], 0

    def arrived(self, n: int) -> dict[int, float]:
        """Card index -> when client ``n`` had its input record (the chunk holding its newline)."""
        arrived: dict[int, float] = {}
        tail = b""
        for when, data in self.chunks[n]:
            lines = (tail + data).split(b"\n")
            tail = lines.pop()
            for line in lines:
                if CARD_READ_LINE not in line:
                    continue
                read = input_of(*(lambda e: (e["kind"], e["data"]))(json.loads(line)))
                arrived.setdefault(int(read["message"][2:6], 16), when)
        return arrived

    def close(self) -> None:
        for sock in self.socks:
            self.loop.remove_reader(sock.fileno())
            sock.close()


def _devices(conn: Connection) -> None:
    """The simulated table in its own process, driven over ``conn``: (op, arg) -> result."""
    import logging

    import structlog
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    sim = SimulatedTable.over_ptys(shuffle_time_s=0.0)
    sim.start()
    emitted: dict[int, float] = {}  # card index -> when the shoe wrote the bytes holding it
    unwritten: list[int] = []  # cards the shoe read whose bytes it has not written yet
    shoe = sim.shoe
    assert isinstance(shoe, PtyEndpoint) and isinstance(sim.shuffler, PtyEndpoint)
    original_emit = shoe.device.emit

    def emit(msg: Message) -> None:  # the shoe reports a card: its frame is in the next write
        if isinstance(msg, CardRead) and msg.index not in emitted:
            unwritten.append(msg.index)
        original_emit(msg)

    def written() -> None:  # the moment the device writes to its line (what it wrote before a card's
        now = time.monotonic()  # frame left would stamp that card early: never late)
        for index in unwritten:
            emitted.setdefault(index, now)
        unwritten.clear()

    shoe.device.emit = emit
    shoe.on_write = written
    conn.send((shoe.url, sim.shuffler.url))
    try:
        while True:
            op, arg = conn.recv()
            result: Any = None
            if op == "stop":
                conn.send(None)
                break
            if op == "deal":
                shoe.call(shoe.device.deal, arg)
            elif op == "hand_off":
                result = sim.hand_off(arg)
            elif op == "cards_held":
                result = shoe.call(shoe.device.cards_held)
            elif op == "emitted":
                result = dict(emitted)
            elif op == "clear":
                emitted.clear()
                unwritten.clear()
            conn.send(result)
    finally:
        sim.stop()


class Devices:
    """The parent's handle on :func:`_devices` (blocking calls: run them in a thread)."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.proc = context.Process(target=_devices, args=(child,), daemon=True)
        self.proc.start()
        self.shoe_url, self.shuffler_url = self.conn.recv()

    def call(self, op: str, arg: Any = None) -> Any:
        self.conn.send((op, arg))
        return self.conn.recv()

    def stop(self) -> None:
        if self.proc.is_alive():
            self.call("stop")
        self.proc.join(10)


class Bench:
    def __init__(self, directory: Path, selector: StampingSelector, profile: str | None = None) -> None:
        """``selector``: the benchmark loop's (its WATCH clients' chunks are stamped with it)."""
        self.directory, self.selector, self.profile, self.profiles = directory, selector, profile, 0
        self.sim: Devices | None = None
        self.proc: asyncio.subprocess.Process | None = None
        self.control: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._n = 0

    def start_devices(self) -> Path:
        sim = self.sim = Devices()
        config = self.directory / "cardd.toml"
        config.write_text(
            f'[devices]\nshoe = "{sim.shoe_url}"\nshuffler = "{sim.shuffler_url}"\n\n'
            f'[table]\nrules = "{RULES_DIR / "casino-000.toml"}"\n\n'
            f'[journal]\npath = "{self.directory / "journal.sqlite3"}"\n\n'
            f'[api]\nsocket = "{self.directory / "cardd.sock"}"\n'
            f'rate = 10000\nburst = 100000\n\n[log]\nlevel = "warning"\n')
        return config

    async def devices(self, op: str, arg: Any = None) -> Any:
        assert self.sim is not None
        return await asyncio.to_thread(self.sim.call, op, arg)

    @property
    def sock(self) -> Path:
        return self.directory / "cardd.sock"

    async def start_daemon(self, config: Path) -> float:
        """Seconds from process start to the API's VERSION line."""
        began = time.monotonic()
        command = [str(CARDD)]
        if self.profile is not None:  # the daemon under cProfile: one file per daemon process started
            self.profiles += 1
            command = [sys.executable, "-m", "cProfile", "-o", f"{self.profile}.{self.profiles}",
                       "-m", "cardd.daemon.main"]
        # --stop-with-parent: a benchmark killed outright leaves no daemon behind on its ptys and socket
        self.proc = await asyncio.create_subprocess_exec(*command, "--config", str(config), "--log-format", "json",
                                                         "--stop-with-parent", str(os.getpid()),
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
        await self.devices("hand_off", 1.0)  # cut card at the very end: deal the whole stack
        await self.until(lambda s: s["shoe"]["state"] == "burning")
        await self.devices("clear")

    def rss_mb(self) -> float:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def cpu_seconds(self) -> float:
        assert self.proc is not None
        return process_cpu(self.proc.pid)

    def cpu(self) -> "Cpu":
        """The CPU seconds used so far by the daemon, the devices' process and this one."""
        assert self.sim is not None and self.sim.proc.pid is not None
        return Cpu(self.cpu_seconds(), process_cpu(self.sim.proc.pid), time.process_time())


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Cpu:
    """CPU of the three processes of the benchmark: who limits the sustained rate (they share
    this machine's cores; a real shoe has its own processor)."""
    daemon: float = 0.0
    devices: float = 0.0
    subscriber: float = 0.0

    def __add__(self, other: "Cpu") -> "Cpu":
        return Cpu(self.daemon + other.daemon, self.devices + other.devices, self.subscriber + other.subscriber)

    def __sub__(self, other: "Cpu") -> "Cpu":
        return Cpu(self.daemon - other.daemon, self.devices - other.devices, self.subscriber - other.subscriber)

    def __mul__(self, factor: float) -> "Cpu":
        return Cpu(self.daemon * factor, self.devices * factor, self.subscriber * factor)


async def latency(bench: Bench, subscribers: int, cards: int) -> tuple[float, float]:
    """(p50, p99) in ms of ``cards`` cards dealt one at a time, from as many shoes as they take (a
    shoe holds 312: more cards asked for than one shoe holds once waited for a 313th for ever)."""
    watchers = await Watchers.connect(bench.sock, subscribers, bench.selector)
    samples: list[float] = []
    try:
        left = cards
        while left:
            await bench.new_shoe()
            watchers.clear()
            dealt = min(left, await bench.devices("cards_held"))
            for index in range(1, dealt + 1):
                await bench.devices("deal", 1)
                await watchers.wait_for(index)
                await asyncio.sleep(0.005)  # one card at a time: latency, not throughput
            emitted: dict[int, float] = await bench.devices("emitted")  # by index in this shoe
            for n in range(subscribers):
                arrived = watchers.arrived(n)
                samples += [arrived[index] - emitted[index] for index in range(1, dealt + 1)]
            left -= dealt
    finally:
        watchers.close()
    samples.sort()
    return statistics.median(samples) * 1000, samples[int(len(samples) * 0.99)] * 1000


async def deal_shoe(bench: Bench, watchers: Watchers) -> tuple[int, float, float, Cpu]:
    """One whole shoe dealt as fast as the link takes it: (cards, seconds from the shoe's first
    write of a card to the last card's arrival, seconds from the benchmark's deal command to it,
    the CPU seconds each process used meanwhile). The first is the end-to-end figure (device ->
    daemon -> journal -> subscriber, as the latency is stamped); the second adds this process's
    command reaching the devices' process (a pipe and a thread on each side)."""
    await bench.new_shoe()
    watchers.clear()
    cards: int = await bench.devices("cards_held")
    before, began = bench.cpu(), time.monotonic()
    await bench.devices("deal", cards)
    await watchers.wait_for(cards)
    used = bench.cpu() - before
    last = max(watchers.arrived(0).values())
    emitted: dict[int, float] = await bench.devices("emitted")
    return cards, last - min(emitted.values()), last - began, used


async def throughput(bench: Bench, shoes: int) -> tuple[int, float, float, Cpu, list[float]]:
    """(cards, cards/s from the shoe's first write, cards/s from the deal command, CPU microseconds
    per card of each process, each shoe's own cards/s) over ``shoes`` shoes dealt flat out."""
    watchers = await Watchers.connect(bench.sock, 1, bench.selector)
    total, took, took_from_command, cpu, per_shoe = 0, 0.0, 0.0, Cpu(), []
    try:
        for _ in range(shoes):
            cards, seconds, from_command, used = await deal_shoe(bench, watchers)
            total, took, took_from_command = total + cards, took + seconds, took_from_command + from_command
            cpu += used  # CPU in clock ticks: 10 ms steps
            per_shoe.append(cards / seconds)
    finally:
        watchers.close()
    return total, total / took, total / took_from_command, cpu * (1e6 / total), sorted(per_shoe)


async def many_shoes(bench: Bench, shoes: int) -> list[tuple[int, float]]:
    watchers = await Watchers.connect(bench.sock, 1, bench.selector)
    trend = []
    try:
        for n in range(1, shoes + 1):
            await deal_shoe(bench, watchers)
            if n % max(1, shoes // 5) == 0 or n == 1:
                trend.append((n, bench.rss_mb()))
    finally:
        watchers.close()
    return trend


def commit_floor(directory: Path, gap_s: float, commits: int = 300) -> tuple[float, float]:
    """The durable commit alone, in this process, of what one card makes (the event it caused,
    carrying the read: one record) to a fresh journal on the same disk, one every ``gap_s`` seconds (as
    the latency phase deals them): the part of a card's latency the disk and SQLite take,
    whatever the daemon does. (p50, p99) in ms."""
    path = directory / "floor.sqlite3"
    samples: list[float] = []
    with Journal.open(path, create=True) as journal:
        for index in range(1, commits + 1):
            read = {"type": "DeviceMessage", "device": "shoe", "message": f"30{index:04x}0301", "event_index": index}
            entries = [Entry("event", "CARD_DRAWN_IN_ERROR", "shoe", severity="warning",
                             data={"card": "4H", "index": index, "message": f"card {index} drawn in error",
                                   INPUT_KEY: read})]
            began = time.perf_counter()
            journal.append(entries)
            samples.append(time.perf_counter() - began)
            time.sleep(gap_s)
    for leftover in directory.glob("floor.sqlite3*"):
        leftover.unlink()
    samples.sort()
    return statistics.median(samples) * 1000, samples[int(len(samples) * 0.99)] * 1000


def grow_journal(path: Path, records: int) -> int:
    """Pad the daemon's journal to ``records`` with rounds as benchmarks/journal.py writes them
    (group commits of about 500), the latest snapshot written again with the last batch."""
    spec = importlib.util.spec_from_file_location("journal_bench", ROOT / "benchmarks" / "journal.py")
    assert spec is not None and spec.loader is not None
    journal_bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(journal_bench)
    rng, round_id = random.Random(2026), 1_000_000
    with Journal.open(path) as journal:
        latest = journal.latest_snapshot()
        assert latest is not None, "the daemon wrote no snapshot"
        while journal.last_seq < records:
            batch: list[Entry] = []
            while len(batch) < 500:
                batch += journal_bench.round_entries(round_id, rng)
                round_id += 1
            last = journal.last_seq + len(batch) >= records
            journal.append(batch, snapshot=latest[1] if last else None)
        return journal.last_seq


async def main(args: argparse.Namespace, selector: StampingSelector) -> None:
    directory = Path(tempfile.mkdtemp(prefix="cardd-bench-"))
    bench = Bench(directory, selector, args.profile)
    try:
        config = bench.start_devices()
        startup = await bench.start_daemon(config)
        print(f"start-up (empty journal): {startup * 1000:.0f} ms to the API's VERSION line")
        await bench.until(lambda s: all(d["link"] == "up" for d in s["devices"].values()))
        for gap in (0.005, 0.0):
            p50, p99 = commit_floor(directory, gap)
            print(f"the floor: one card's durable commit alone (1 record, same disk), "
                  f"{'one every 5 ms' if gap else 'back to back'}: p50 {p50:.2f} ms, p99 {p99:.2f} ms")
        for subs in (1, 50):
            p50, p99 = await latency(bench, subs, args.cards)
            print(f"latency CardRead written -> subscriber, {subs:2d} subscriber(s), {args.cards} cards: "
                  f"p50 {p50:.2f} ms, p99 {p99:.2f} ms")
        cards, rate, rate_from_command, cpu_us, per_shoe = await throughput(bench, args.rate_shoes)
        print(f"sustained: {cards} card reads ({args.rate_shoes} shoes) end to end at {rate:,.0f} cards/s "
              f"(1 subscriber; {rate_from_command:,.0f} counting from the benchmark's deal command); "
              f"CPU per card: daemon {cpu_us.daemon:.0f} us, simulated devices "
              f"{cpu_us.devices:.0f} us, subscriber {cpu_us.subscriber:.0f} us "
              f"({os.cpu_count()} cores shared)")
        # a shoe pours in within 10-20 ms: each one's rate swings with what else the two cores
        # ran meanwhile, so a few shoes' figure is a poor estimate of the rate (hence 50 by default)
        print(f"  each shoe's own rate: min {per_shoe[0]:,.0f}, median {statistics.median(per_shoe):,.0f}, "
              f"max {per_shoe[-1]:,.0f} cards/s")
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
        if args.journal_records:
            await bench.stop_daemon()
            began = time.monotonic()
            records = grow_journal(directory / "journal.sqlite3", args.journal_records)
            print(f"journal padded to {records:,} records in {time.monotonic() - began:.0f} s")
            startup = await bench.start_daemon(config)
            state = await bench.state()
            print(f"start-up (journal of {records:,} records): {startup * 1000:.0f} ms "
                  f"(STATE answers at seq {state['seq']:,}; this first start after the padding also "
                  f"checkpoints the padding's WAL)")
            for _ in range(2):  # a daemon's own journal keeps a small WAL: the starts a table sees
                await bench.stop_daemon()
                startup = await bench.start_daemon(config)
                print(f"start-up again (journal of {records:,} records): {startup * 1000:.0f} ms")
    finally:
        await bench.stop_daemon()
        if bench.sim is not None:
            bench.sim.stop()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    import logging

    import structlog
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))  # the simulators' logs
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cards", type=int, default=200, help="cards dealt one at a time for each latency figure")
    ap.add_argument("--rate-shoes", type=int, default=50, help="shoes dealt flat out for the sustained rate")
    ap.add_argument("--shoes", type=int, default=100, help="shoes dealt for the memory trend")
    ap.add_argument("--idle-seconds", type=float, default=60.0)
    ap.add_argument("--journal-records", type=int, default=0, metavar="N",
                    help="at the end, pad the journal to N records (5000000: 90 days) and time the start-up")
    ap.add_argument("--profile", metavar="PREFIX", help="run the daemon under cProfile, writing PREFIX.1, PREFIX.2")
    selector = StampingSelector()
    with asyncio.Runner(loop_factory=lambda: asyncio.SelectorEventLoop(selector)) as runner:
        runner.run(main(ap.parse_args(), selector))
