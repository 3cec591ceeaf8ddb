"""A floor of tables against one mosquitto on loopback: a benchmark (prints figures), not a test.

    .venv/bin/python benchmarks/floor.py --tables 100,500,1000 --warmup 60 --seconds 120
    .venv/bin/python benchmarks/floor.py --part cardfloor --tables 1000 --backlog-hours 1
    .venv/bin/python benchmarks/floor.py --part browsers --tables 1000 --browsers 10 --seconds 3600

For each size, ``cardbench floor`` (cardd/bench/floor.py: each table a journal of its own and
cardd's own Exporter over it, worker processes holding the tables) against a private mosquitto
(benchmarks/export.py's: anonymous, no persistence, one loopback listener), twice:

- **idle**: the tables connected, journaling nothing after their start (``--idle``): the export's
  own cost, its keep-alives, state topic and wake-ups;
- **at pace**: a real table's pace (a card every 1-3 s, rounds of 30-60 s, faults at 2 % of rounds).

Measured over ``--seconds`` after ``--warmup`` (the start's shuffles past): the tables' processes'
CPU (the parent and its workers, /proc/PID/stat) and RSS (their sum at the end), mosquitto's CPU,
and records committed and delivered a second (from cardbench floor's own lines).
``--backlog-hours H`` adds the drain: every table starts H hours behind; how long until the whole
floor's backlog is delivered.

The floor service (``--part cardfloor``): for each size, a fresh cardfloor and database (a private
PostgreSQL, fsync on, ``track_commit_timestamp`` on) behind the same mosquitto (given room to queue
what the floor's session has not taken), the tables published by benchmarks/_paced_tables.py (the
same stories and the export's own payloads, from one light process, so the two cores are left to
cardfloor and PostgreSQL), an SSE client on /api/v1/stream:

- commit-to-archive: each record's ``time`` (its commit at the table) to the commit of its row
  (``pg_xact_commit_timestamp``), p50/p99/max;
- commit-to-SSE: to the ``records`` change that names it at the stream client;
- cardfloor's CPU and RSS, PostgreSQL's CPU, the archive's bytes a record and a table's day;
- with ``--backlog-hours H``, every table H hours behind at once: from the first message to the
  archive holding the whole backlog, and the rows a second.

The floor page (``--part browsers``): the same cardfloor, database and paced tables, and
``--browsers N`` pages of one Chromium (Debian's, through Playwright; a context each, logged in
through the log-in page as a surveillance user made with ``cardfloor user add``) on the floor
page, all 1,000 tiles:

- change-to-painted: each new state of a table (its ``time``, set by the table as it publishes
  it: the change at the table) to each page's first paint that shows it, by the page's own
  clock (``data-painted-at``: performance.timeOrigin + now, in the paint's animation frame) and
  the id of the newest change it applied (``data-painted-through``), said on the page's
  console by an observer the benchmark adds; which states there were, and their ids, from the
  bench's own stream client; p50/p99/max over every state and page, and how many a page had
  not painted by the end;
- each page's JS heap in use after a full collection (CDP ``HeapProfiler.collectGarbage``,
  ``Performance.getMetrics`` JSHeapUsedSize), at the start and every ``--heap-every`` s;
- cardfloor's CPU with the pages connected, its RSS at the start, its peak and at the end,
  Chromium's CPU (every process), PostgreSQL's, the load average (the machine is shared: the
  figures move with it). A line a minute says the latency so far.

Chromium runs at ``--browser-nice`` (10 unless told): on a floor the pages are on pit
terminals and tablets, not on cardfloor's machine, so on the bench's one machine cardfloor is
given the share its own machine would give it, and the pages take what is left (their paints
are timed all the same: a page starved of CPU paints late, and that is counted).
"""
from __future__ import annotations

import argparse
import bisect
import datetime as dt
import os
import statistics
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))

from daemon import process_cpu  # noqa: E402  (benchmarks/daemon.py)
from core.ctrl_c import end_like_ctrl_c  # noqa: E402
from export import Broker  # noqa: E402  (benchmarks/export.py: a private mosquitto)
from _procs import stop_process  # noqa: E402

CARDBENCH = Path(sys.executable).with_name("cardbench")
READY = re.compile(r"^(?P<tables>\d+) tables in .*, (?P<records>[\d,]+) records at the start")
LINE = re.compile(r"^(?P<at>[\d,]+) s: (?P<online>\d+)/(?P<tables>\d+) tables online, (?P<committed>[\d,]+) records "
                  r"committed.*?, (?P<delivered>[\d,]+) delivered.*?, backlog (?P<backlog>[\d,]+)")


def number(text: str) -> int:
    return int(text.replace(",", ""))


@dataclass
class Sample:
    at: float  # time.monotonic()
    committed: int
    delivered: int
    backlog: int
    online: int


class FloorRun:
    """``cardbench floor`` as a child, each figures line it prints kept with when it came."""

    def __init__(self, broker: Broker, tables: int, journals: Path, extra: list[str]) -> None:
        self.tables = tables
        self.samples: list[Sample] = []
        self.lines: list[str] = []
        self.ready: tuple[float, int] | None = None  # when the tables started, and the records they held
        self.proc = subprocess.Popen([str(CARDBENCH), "floor", "--tables", str(tables), "--broker", broker.url,
                                      "--every", "1", "--journals", str(journals), *extra],
                                     cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())
            ready = READY.match(line)
            if ready:
                self.ready = (time.monotonic(), number(ready["records"]))
            found = LINE.match(line)
            if found:
                self.samples.append(Sample(time.monotonic(), number(found["committed"]), number(found["delivered"]),
                                           number(found["backlog"]), int(found["online"])))

    def wait(self, check: Callable[[Sample], bool], timeout: float, what: str) -> Sample:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.samples and check(self.samples[-1]):
                return self.samples[-1]
            if self.proc.poll() is not None:
                raise RuntimeError(f"cardbench floor ended ({self.proc.returncode}): {self.lines[-5:]}")
            time.sleep(0.1)
        raise RuntimeError(f"cardbench floor: no {what} within {timeout:.0f} s: {self.lines[-3:]}")

    def pids(self) -> list[int]:
        """The parent and its worker processes."""
        return [self.proc.pid, *_children_of(self.proc.pid)]

    def cpu(self) -> float:
        total = 0.0
        for pid in self.pids():
            try:
                total += process_cpu(pid)
            except FileNotFoundError:
                pass
        return total

    def rss_mb(self) -> float:
        total = 0
        for pid in self.pids():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            except FileNotFoundError:
                pass
        return total / 1024

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # as Ctrl-C (a background job ignores SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)


def phase(broker: Broker, tables: int, journals: Path, extra: list[str], warmup: float, seconds: float,
          name: str) -> None:
    """One run: started, warmed up, measured over ``seconds``, stopped; one line of figures."""
    began = time.monotonic()
    run = FloorRun(broker, tables, journals, extra)
    try:
        run.wait(lambda s: s.online == tables, 600, f"{tables}/{tables} tables online")
        up_s = time.monotonic() - began
        time.sleep(warmup)
        first = run.samples[-1]
        cpu0, broker0 = run.cpu(), process_cpu(broker.proc.pid)
        time.sleep(seconds)
        last = run.samples[-1]
        cpu, broker_cpu = run.cpu() - cpu0, process_cpu(broker.proc.pid) - broker0
        rss = run.rss_mb()
        span = max(1e-9, last.at - first.at)
        committed, delivered = (last.committed - first.committed) / span, (last.delivered - first.delivered) / span
        per_record = f", {cpu / max(1, last.delivered - first.delivered) * 1e6:,.0f} us a record" \
            if last.delivered > first.delivered else ""
        print(f"{tables} tables {name}: up in {up_s:.0f} s; {committed:,.1f} records/s committed, "
              f"{delivered:,.1f} delivered, backlog {last.backlog:,}; the tables' CPU {cpu / seconds * 100:.1f} % of "
              f"a core ({cpu / seconds / tables * 1e3:.2f} ms a second a table{per_record}); RSS {rss:,.0f} MB "
              f"({rss / tables:.2f} MB a table); mosquitto {broker_cpu / seconds * 100:.1f} % of a core", flush=True)
    finally:
        run.stop()


def drain(broker: Broker, tables: int, journals: Path, hours: float, extra: list[str]) -> None:
    """Every table ``hours`` behind at once: from the start to the whole floor delivered."""
    began = time.monotonic()
    run = FloorRun(broker, tables, journals, ["--backlog-hours", str(hours), *extra])
    try:
        run.wait(lambda s: True, 3600, "journals written")
        assert run.ready is not None
        started, behind = run.ready
        written_s = started - began
        cpu0, broker0 = run.cpu(), process_cpu(broker.proc.pid)  # a second late: the first figures line
        done = run.wait(lambda s: s.delivered >= behind, 3600, "backlog drained")
        took = done.at - started
        cpu, broker_cpu = run.cpu() - cpu0, process_cpu(broker.proc.pid) - broker0
        print(f"{tables} tables each {hours:g} h behind: {behind:,} records written in {written_s:.0f} s; "
              f"delivered within {took:.1f} s of the start (figures a second apart) = at least "
              f"{behind / max(took, 1e-9):,.0f} records/s; the tables' CPU {cpu / max(took - 1, 1e-9) * 100:.0f} % "
              f"of a core, mosquitto {broker_cpu / max(1, behind) * 1e6:.1f} us a record", flush=True)
    finally:
        run.stop()


# ---- cardfloor: the floor service, its archive and its stream ---------------------------------

PACED = ROOT / "benchmarks" / "_paced_tables.py"
CARDFLOOR = Path(sys.executable).with_name("cardfloor")
#: the bench broker keeps whatever the floor's session has not taken yet (a drain queues thousands)
BROKER_ROOM = "max_queued_messages 0\nmax_queued_bytes 0\n"
#: a busy table's records a day (docs/floor.md, "How this scales to 5,000 tables")
RECORDS_A_TABLE_A_DAY = 55_600
TOKEN = "bench-token-0123456789abcdef"
VIEWER, VIEWER_PASSWORD = "bench-eye", "bench viewer password"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its children now (PostgreSQL: the postmaster and its backends)."""
    total = 0.0
    for one in [pid, *_children_of(pid)]:
        try:
            total += process_cpu(one)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def _children_of(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(n) for n in (task / "children").read_text().split()]
        except FileNotFoundError:
            pass
    return found


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


class StreamClient:
    """An SSE client on cardfloor's /api/v1/stream: when each ``records`` change arrived."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.arrivals: list[tuple[float, str, list[int]]] = []  # time.time(), table, seqs
        #: each ``table`` change carrying a state newer than its table's last: (its id, the state's
        #: time at the table, time.time() at arrival)
        self.states: list[tuple[int, float, float]] = []
        self._state_time: dict[str, str] = {}
        self.connected = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import httpx
        import msgspec
        event, data = "", ""
        try:
            self._read(httpx, msgspec)
        except httpx.HTTPError:  # cardfloor stopped at the end
            pass

    def _read(self, httpx: Any, msgspec: Any) -> None:
        event, data, event_id = "", "", ""
        with httpx.stream("GET", self.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=None) as answer:
            self.connected.set()
            for line in answer.iter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data = line[5:].strip()
                elif line.startswith("id:"):
                    event_id = line[3:].strip()
                elif not line:
                    if event == "records":
                        change = msgspec.json.decode(data)
                        self.arrivals.append((time.time(), change["table"], change["seqs"]))
                    elif event == "table":
                        self._table_change(msgspec.json.decode(data), int(event_id))
                    event, data = "", ""

    def _table_change(self, change: dict[str, Any], event_id: int) -> None:
        """A new state from a table (a status change re-sends the last state: not a new change)."""
        state = change.get("state")
        if not state:
            return
        name = f"{change['site']}/{change['table']}"
        if state["time"] == self._state_time.get(name):
            return
        self._state_time[name] = state["time"]
        at = dt.datetime.fromisoformat(state["time"]).timestamp()
        self.states.append((event_id, at, time.time()))


class Cardfloor:
    """cardfloor on a configuration of its own (the bench broker, a database, an HTTP port)."""

    def __init__(self, folder: Path, broker: Broker, dsn: str, client_id: str, *, pages: bool = False) -> None:
        from tests.support.brokers import free_port
        folder.mkdir(parents=True, exist_ok=True)
        tokens = folder / "tokens"
        tokens.write_text(f"{TOKEN} surveillance bench\n")
        tokens.chmod(0o600)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = folder / "cardfloor.toml"
        users = f'users_file = "{folder / "users"}"\n' if pages else ""
        config.write_text(f'[broker]\nurls = ["{broker.url}"]\nclient_id = "{client_id}"\n'
                          f'[archive]\ndsn = "{dsn}"\n[http]\nlisten = "127.0.0.1:{self.port}"\n'
                          f'tokens_file = "{tokens}"\n{users}')
        if pages:  # the pit page's viewer, made as a person makes one
            subprocess.run([str(CARDFLOOR), "user", "--config", str(config), "add", VIEWER, "--role", "surveillance",
                            "--password-stdin"], input=VIEWER_PASSWORD + "\n", text=True, check=True,
                           capture_output=True, timeout=60)
        self.log = folder / "cardfloor.log"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen([str(CARDFLOOR), "--config", str(config), "--log-format", "json"],
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while "floor_broker_connected" not in self.log.read_text() or "cardfloor_running" not in self.log.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"cardfloor did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)
        time.sleep(1.0)  # its SUBACK

    def stop(self) -> None:
        stop_process(self.proc)


class Paced:
    """benchmarks/_paced_tables.py as a child, its lines kept."""

    def __init__(self, broker: Broker, tables: int, *extra: str) -> None:
        self.lines: list[tuple[float, str]] = []
        self.proc = subprocess.Popen([sys.executable, str(PACED), "--broker", broker.url, "--tables", str(tables),
                                      *extra], text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                self.lines.append((time.monotonic(), line.rstrip()))
        except ValueError:  # its pipe closed by stop()
            pass

    def wait_for(self, start: str, timeout: float) -> tuple[float, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for at, line in self.lines:
                if line.startswith(start):
                    return at, line
            if self.proc.poll() is not None:
                raise RuntimeError(f"paced tables ended: {self.lines[-5:]}")
            time.sleep(0.1)
        raise RuntimeError(f"paced tables: no {start!r} within {timeout:.0f} s")

    def stop(self) -> None:
        stop_process(self.proc)


def measure_cardfloor(broker: Broker, server: Any, folder: Path, tables: int, warmup: float,
                      seconds: float, load: str = "paced") -> None:
    """``tables`` at pace into a fresh cardfloor and database: commit-to-archive (the record's
    time to its row's commit, PostgreSQL's track_commit_timestamp) and commit-to-SSE (to its
    ``records`` change at a stream client), p50/p99/max over ``seconds`` after ``warmup``;
    cardfloor's and PostgreSQL's CPU, cardfloor's RSS; the archive's disk a record. ``load``:
    "paced" (benchmarks/_paced_tables.py) or "cardbench" (``cardbench floor``: real exporters over
    real journals, whose own CPU then shares the machine with cardfloor's)."""
    import psycopg
    dsn = server.create_database()
    floor = Cardfloor(folder / f"floor-{tables}", broker, dsn, f"cardfloor-bench-{tables}")
    stream = StreamClient(f"http://127.0.0.1:{floor.port}/api/v1/stream")
    stream.connected.wait(30)
    source: Paced | FloorRun
    if load == "paced":
        source = paced = Paced(broker, tables, "--duration", str(warmup + seconds + 30))
        paced.wait_for(f"{tables} tables at pace", 120)
        load_cpu: Callable[[], float] = lambda: process_cpu(paced.proc.pid)
    else:
        source = run = FloorRun(broker, tables, folder / f"journals-{tables}", [])
        run.wait(lambda s: s.online == tables, 600, f"{tables}/{tables} tables online")
        load_cpu = run.cpu
    try:
        time.sleep(warmup)
        w0, c0, p0, t0 = time.time(), tree_cpu(floor.proc.pid), tree_cpu(server.proc.pid), load_cpu()
        b0 = process_cpu(broker.proc.pid)
        time.sleep(seconds)
        w1, c1, p1, t1 = time.time(), tree_cpu(floor.proc.pid), tree_cpu(server.proc.pid), load_cpu()
        b1 = process_cpu(broker.proc.pid)
        rss, peak = rss_mb(floor.proc.pid), rss_mb(floor.proc.pid, "VmHWM")
        time.sleep(5)  # what was committed by the window's end reaches the stream
    finally:
        source.stop()
    with psycopg.connect(dsn) as db:
        rows = db.execute(
            "SELECT t.table_name, r.seq, extract(epoch FROM r.time)::float8, "
            "extract(epoch FROM pg_xact_commit_timestamp(r.xmin))::float8 FROM records r "
            "JOIN floor_tables t ON t.id = r.tid WHERE r.time >= to_timestamp(%s) AND r.time < to_timestamp(%s)",
            (w0, w1)).fetchall()
        stored = db.execute("SELECT count(*) FROM records").fetchone()
        size = db.execute("SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits "
                          "WHERE inhparent = 'records'::regclass").fetchone()
        chain = db.execute("SELECT pg_total_relation_size('chain')").fetchone()
    floor.stop()
    assert stored is not None and size is not None and chain is not None
    times = {(name, seq): at for name, seq, at, _ in rows}
    archive = [(committed - at) * 1e3 for _, _, at, committed in rows if committed is not None]
    sse = [(arrived - times[(name, seq)]) * 1e3 for arrived, name, seqs in stream.arrivals
           for seq in seqs if (name, seq) in times]
    per_record = (int(size[0]) + int(chain[0])) / max(1, int(stored[0]))
    print(f"cardfloor, {tables} tables at pace: {len(rows) / seconds:,.0f} records/s archived; "
          f"commit-to-archive p50 {percentile(archive, 0.5):.0f} ms, p99 {percentile(archive, 0.99):.0f} ms, "
          f"max {max(archive, default=float('nan')):.0f} ms ({len(archive):,} records); commit-to-SSE p50 "
          f"{percentile(sse, 0.5):.0f} ms, p99 {percentile(sse, 0.99):.0f} ms ({len(sse):,}); cardfloor CPU "
          f"{(c1 - c0) / (w1 - w0) * 100:.1f} % of a core, RSS {rss:.0f} MB (peak {peak:.0f}); PostgreSQL "
          f"{(p1 - p0) / (w1 - w0) * 100:.1f} %; the tables ({load}) {(t1 - t0) / (w1 - w0) * 100:.1f} %, "
          f"mosquitto {(b1 - b0) / (w1 - w0) * 100:.1f} %; the archive {per_record:.0f} bytes a record "
          f"(records and chain, indexes in), {per_record * RECORDS_A_TABLE_A_DAY / 1e6:.1f} MB a table a day "
          f"at {RECORDS_A_TABLE_A_DAY:,} records", flush=True)


def cardfloor_drain(broker: Broker, server: Any, folder: Path, tables: int, hours: float) -> None:
    """Every table ``hours`` behind at once into a fresh cardfloor and database: from the first
    message published until the archive holds every record of the backlog."""
    import psycopg
    dsn = server.create_database()
    floor = Cardfloor(folder / f"drain-{tables}", broker, dsn, f"cardfloor-drain-{tables}")
    paced = Paced(broker, tables, "--backlog-hours", str(hours), "--duration", "3600")
    try:
        at, line = paced.wait_for("backlog ", 1800)
        behind = int(line.split()[1])
        c0, p0 = tree_cpu(floor.proc.pid), tree_cpu(server.proc.pid)
        with psycopg.connect(dsn, autocommit=True) as db:
            while True:
                held = db.execute("SELECT coalesce(sum(head_seq), 0) FROM floor_tables").fetchone()
                if held is not None and int(held[0]) >= behind:
                    took = time.monotonic() - at
                    break
                if time.monotonic() - at > 3600:
                    raise RuntimeError(f"the drain: {held} of {behind} archived in an hour")
                time.sleep(1.0)
        cpu, pg = tree_cpu(floor.proc.pid) - c0, tree_cpu(server.proc.pid) - p0
        published = next((float(text.split()[2]) for _, text in paced.lines if text.startswith("published in")),
                         float("nan"))
        print(f"cardfloor, {tables} tables each {hours:g} h behind: {behind:,} records archived within {took:.0f} s "
              f"of the first message ({behind / took:,.0f} records/s; the broker had them all after "
              f"{published:.0f} s); cardfloor CPU {cpu / took * 100:.0f} % of a core, RSS peak "
              f"{rss_mb(floor.proc.pid, 'VmHWM'):.0f} MB; PostgreSQL {pg / took * 100:.0f} %", flush=True)
    finally:
        paced.stop()
        floor.stop()


# ---- the pit page: browsers on the floor page ----------------------------------------------------

#: each paint said on the page's console as it happens (no round trip to wait on: a page behind
#: answers nothing soon): the page's own paint time (performance.timeOrigin + now) and the id of
#: the newest change it shows. DevTools keeps the last 1,000 console messages: a bounded heap.
WATCH_PAINTS = """() => new MutationObserver(() => { const d = document.body.dataset;
  console.debug(`bench-paint ${d.paintedAt} ${d.paintedThrough}`); })
  .observe(document.body, { attributes: true, attributeFilter: ["data-painted"] })"""


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in _children_of(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def _chromium_cpu() -> float:
    """CPU seconds of every Chromium process under this one (Playwright's driver starts it)."""
    total = 0.0
    for pid in _descendants(os.getpid()):
        try:
            if "chrom" in Path(f"/proc/{pid}/comm").read_text():
                total += process_cpu(pid)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def _heap_mb(cdp: Any) -> float:
    """The page's JavaScript heap in use after a full collection."""
    cdp.send("HeapProfiler.collectGarbage")
    metrics = cdp.send("Performance.getMetrics")["metrics"]
    return next(m["value"] for m in metrics if m["name"] == "JSHeapUsedSize") / 1e6


def niced(executable: str, folder: Path, niceness: int) -> str:
    """A launcher that starts ``executable`` at ``niceness`` (its children inherit it)."""
    if not niceness:
        return executable
    launcher = folder / "chromium-niced"
    launcher.write_text(f'#!/bin/sh\nexec nice -n {niceness} {executable} "$@"\n')
    launcher.chmod(0o755)
    return str(launcher)


def measure_browsers(broker: Broker, server: Any, folder: Path, tables: int, warmup: float, seconds: float,
                     browsers: int, heap_every: float, browser_nice: int = 10) -> None:
    """``tables`` at pace into a fresh cardfloor and ``browsers`` pages on its floor page (one
    Chromium, a context and log-in each, as the surveillance user): each new table state's time
    at the table to the first paint of each page that shows it (the page's own paint time and
    the id of the newest change it painted); each page's JS heap after a collection, at the
    start and every ``heap_every`` s; cardfloor's, Chromium's and PostgreSQL's CPU; the load."""
    import faulthandler
    from playwright.sync_api import ConsoleMessage, sync_playwright
    from tests.floor.browser.pit_rig import CHROMIUM, log_in_at
    dsn = server.create_database()
    floor = Cardfloor(folder / f"pages-{tables}", broker, dsn, f"cardfloor-pages-{tables}", pages=True)
    paced: Paced | None = None
    faulthandler.dump_traceback_later(900)  # a stall says where it is (re-armed each second below)
    try:
        stream = StreamClient(f"{floor.url}/api/v1/stream")
        stream.connected.wait(30)
        paced = Paced(broker, tables, "--duration", str(warmup + seconds + 300))
        paced.wait_for(f"{tables} tables at pace", 120)
        paced_pid = paced.proc.pid
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=niced(CHROMIUM, folder, browser_nice))
            try:
                paints: list[list[tuple[float, int]]] = [[] for _ in range(browsers)]
                pages = []
                for index in range(browsers):
                    page = log_in_at(chromium, floor.url, VIEWER, VIEWER_PASSWORD, timeout_ms=120_000)
                    page.locator("li.tile").nth(tables - 1).wait_for(state="attached", timeout=300_000)

                    def said(message: ConsoleMessage, into: list[tuple[float, int]] = paints[index]) -> None:
                        if message.text.startswith("bench-paint "):
                            _, at, through = message.text.split()
                            into.append((float(at) / 1e3, int(through)))
                    page.on("console", said)
                    page.evaluate(WATCH_PAINTS)
                    pages.append(page)
                cdps = [page.context.new_cdp_session(page) for page in pages]
                for cdp in cdps:
                    cdp.send("Performance.enable")
                pages[0].wait_for_timeout(warmup * 1000)  # Playwright's events arrive meanwhile
                heaps: list[tuple[float, list[float]]] = [(0.0, [_heap_mb(cdp) for cdp in cdps])]
                loads = [os.getloadavg()[0]]
                rss_start = rss_mb(floor.proc.pid)
                began = time.monotonic()
                w0, c0, g0, p0, t0 = (time.time(), tree_cpu(floor.proc.pid), _chromium_cpu(),
                                      tree_cpu(server.proc.pid), process_cpu(paced_pid))
                next_heap, next_line, since = began + heap_every, began + 60, w0
                while time.monotonic() < began + seconds:
                    pages[0].wait_for_timeout(1000)
                    faulthandler.dump_traceback_later(900)
                    if time.monotonic() >= next_heap:
                        heaps.append((time.monotonic() - began, [_heap_mb(cdp) for cdp in cdps]))
                        next_heap += heap_every
                    if time.monotonic() >= next_line:
                        next_line += 60
                        loads.append(os.getloadavg()[0])
                        lat, behind, lag = _change_to_painted(stream.states, paints, since, time.time() - 5)
                        since = time.time() - 5
                        print(f"  {(time.monotonic() - began) / 60:.0f} min: change-to-painted over the last minute "
                              f"p50 {percentile(lat, 0.5):.0f} ms, p99 {percentile(lat, 0.99):.0f} ms ({len(lat):,}, "
                              f"{behind:,} not painted yet), to the stream p99 {percentile(lag, 0.99):.0f} ms; JS heap {statistics.median(heaps[-1][1]):.1f} MB at "
                              f"{heaps[-1][0] / 60:.0f} min (median of pages); cardfloor RSS {rss_mb(floor.proc.pid):.0f} MB; "
                              f"load average {loads[-1]:.2f}",
                              flush=True)
                w1, c1, g1, p1, t1 = (time.time(), tree_cpu(floor.proc.pid), _chromium_cpu(),
                                      tree_cpu(server.proc.pid), process_cpu(paced_pid))
                rss, rss_peak = rss_mb(floor.proc.pid), rss_mb(floor.proc.pid, "VmHWM")
                if heaps[-1][0] < seconds - 1:
                    heaps.append((time.monotonic() - began, [_heap_mb(cdp) for cdp in cdps]))
                loads.append(os.getloadavg()[0])
                pages[0].wait_for_timeout(5000)  # what changed by the window's end is painted
            finally:
                chromium.close()
    finally:
        faulthandler.cancel_dump_traceback_later()
        if paced is not None:
            paced.stop()
        floor.stop()
    latencies, unpainted, lags = _change_to_painted(stream.states, paints, w0, w1)
    span = w1 - w0
    first, last = statistics.median(heaps[0][1]), statistics.median(heaps[-1][1])
    print(f"floor page, {tables} tables, {browsers} browsers (one Chromium, a context each), {span:.0f} s: "
          f"change-to-painted p50 {percentile(latencies, 0.5):.0f} ms, p99 {percentile(latencies, 0.99):.0f} ms, "
          f"max {max(latencies, default=float('nan')):.0f} ms ({len(latencies):,} changes x pages, "
          f"{unpainted:,} unpainted; to cardfloor's stream p50 {percentile(lags, 0.5):.0f} ms, p99 "
          f"{percentile(lags, 0.99):.0f} ms); JS heap after GC {first:.1f} MB at the start, {last:.1f} MB after "
          f"{heaps[-1][0] / 60:.0f} min (median of pages, {(last - first) / max(first, 1e-9) * 100:+.1f} %); "
          f"cardfloor CPU {(c1 - c0) / span * 100:.1f} % of a core, RSS {rss_start:.0f} MB at the start, "
          f"{rss:.0f} MB at the end (peak {rss_peak:.0f}); Chromium at nice {browser_nice} "
          f"{(g1 - g0) / span * 100:.1f} %; PostgreSQL {(p1 - p0) / span * 100:.1f} %; the tables "
          f"{(t1 - t0) / span * 100:.1f} %; load average {min(loads):.2f}-{max(loads):.2f} "
          f"(mean {statistics.mean(loads):.2f}, {os.cpu_count()} CPUs)", flush=True)
    print("JS heap after GC, MB, median (min-max) of pages: " + ", ".join(
        f"{at / 60:.0f} min {statistics.median(mb):.1f} ({min(mb):.1f}-{max(mb):.1f})" for at, mb in heaps), flush=True)


def _change_to_painted(states: list[tuple[int, float, float]], paints: list[list[tuple[float, int]]],
                       start: float, end: float) -> tuple[list[float], int, list[float]]:
    """For each table state the bench's own stream client got in [start, end) (chosen by its
    arrival, so a floor service minutes behind still gives figures) and each page: ms from its
    time at the table to the page's first paint showing it; how many a page never painted; and
    each state's time at the table to its arrival at that client (cardfloor's share), ms."""
    chosen = [(event_id, made, arrived) for event_id, made, arrived in list(states) if start <= arrived < end]
    latencies, unpainted = [], 0
    for page in paints:
        throughs = [through for _, through in page]  # a paint shows every change up to its id
        for event_id, made, _ in chosen:
            at = bisect.bisect_left(throughs, event_id)
            if at < len(page):
                latencies.append((page[at][0] - made) * 1e3)
            else:
                unpainted += 1
    return latencies, unpainted, [(arrived - made) * 1e3 for _, made, arrived in chosen]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", default="100,500,1000", help="floor sizes, comma-separated")
    ap.add_argument("--warmup", type=float, default=60.0, help="seconds after every table is online")
    ap.add_argument("--seconds", type=float, default=120.0, help="seconds measured")
    ap.add_argument("--backlog-hours", type=float, default=0.0, help="also the drain of this many hours a table")
    ap.add_argument("--journals", type=Path, default=None,
                    help="where the journals go (default: a temporary folder on /tmp's disk)")
    ap.add_argument("--phases", default="idle,pace", help="idle, pace, both, or none (\"\": only the drain)")
    ap.add_argument("--part", default="tables,cardfloor",
                    help="tables (cardbench floor: the tables' export), cardfloor (the floor service), "
                         "browsers (the floor page in Chromium), comma-separated")
    ap.add_argument("--browsers", type=int, default=10, help="pages on the floor page (--part browsers)")
    ap.add_argument("--heap-every", type=float, default=300.0, help="seconds between JS heap samples")
    ap.add_argument("--browser-nice", type=int, default=10,
                    help="Chromium's niceness (--part browsers; 0: as cardfloor)")
    ap.add_argument("--load", choices=["paced", "cardbench"], default="paced",
                    help="cardfloor's tables: _paced_tables.py's light publisher, or cardbench floor's exporters")
    ap.add_argument("extra", nargs="*", help="more options for cardbench floor (after --)")
    args = ap.parse_args()
    end_like_ctrl_c()  # a kill stops cardbench floor and mosquitto as Ctrl-C does
    parts = set(args.part.split(","))
    with tempfile.TemporaryDirectory(prefix="cardd-floor-bench-") as scratch:
        base = args.journals or Path(scratch)
        broker = Broker(Path(scratch), BROKER_ROOM)
        server = None
        try:
            print(f"mosquitto {broker.url}; journals under {base}; {os.cpu_count()} CPUs", flush=True)
            if parts & {"cardfloor", "browsers"}:
                from tests.support.postgres import PostgresServer
                server = PostgresServer({"track_commit_timestamp": "on"}).start()
                print(f"PostgreSQL {server.dsn} (fsync on, track_commit_timestamp on)", flush=True)
            for tables in [int(n) for n in args.tables.split(",")]:
                if "browsers" in parts:
                    measure_browsers(broker, server, Path(scratch), tables, args.warmup, args.seconds, args.browsers,
                                     args.heap_every, args.browser_nice)
                if "cardfloor" in parts:
                    measure_cardfloor(broker, server, Path(scratch), tables, args.warmup, args.seconds, args.load)
                    if args.backlog_hours:
                        cardfloor_drain(broker, server, Path(scratch), tables, args.backlog_hours)
                if "tables" not in parts:
                    continue
                for name in [p for p in args.phases.split(",") if p]:
                    journals = base / f"{tables}-{name}"
                    phase(broker, tables, journals, (["--idle"] if name == "idle" else []) + args.extra,
                          args.warmup, args.seconds,
                          "idle" if name == "idle" else "at pace")
                    _remove(journals)
                if args.backlog_hours:
                    journals = base / f"{tables}-drain"
                    drain(broker, tables, journals, args.backlog_hours, args.extra)
                    _remove(journals)
        finally:
            if server is not None:
                server.close()
            broker.stop()
    return 0


def _remove(folder: Path) -> None:
    import shutil
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # what it started is stopped (the finally blocks)
        sys.exit(130)
