"""``cardbench floor``: N simulated tables publishing to a real broker through cardd's own export.

Each table is what a daemon's export is: a journal file of its own (cardd.journal, written with
``Journal.append`` one commit a step, as the daemon's writer commits) and an
:class:`~cardd.export.exporter.Exporter` over it (its thread, its paho client, its read-only
connection, cursor, session, chain, backoff and Will), told of each commit (``notify``) and given
the table's summary (``offer_state``) as the daemon's export service does. Only the tracker is
simulated: :mod:`cardd.bench.tables` writes what a real table journals, at a real table's pace.

A daemon a table would be far too heavy for a thousand tables on two cores, so tables are held by
worker processes, each running one scheduler thread that commits every table's next step when it
is due, beside its tables' exporters. A process holds at most ``--tables-per-process`` (by default
:data:`TABLES_PER_PROCESS`): one process is held to one core by the GIL, and a thousand tables at
pace need more than one. A table holds about :data:`FDS_PER_TABLE` file descriptors (the
journal's writer and reader connections, their WAL and shared-memory files, the lock, the head
file, the wake-up pair and the broker's socket), and the worker's limit is raised to fit them.

The parent asks each worker for its figures every second, prints a line every ``every_s`` (tables
online, records committed and delivered, the backlog) and stops them all at the end (``--duration``
or Ctrl-C): each table journals DAEMON_STOP and its exporter stops as the daemon's does (what is in
flight flushed, the status offline).
"""
from __future__ import annotations

import heapq
import multiprocessing
import os
import random
import resource
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import msgspec

from cardd.bench.tables import Step, TableStory
from cardd.config import ExportConfig, broker_url_problem
from cardd.journal import Entry, Journal, JournalError

#: a table's file descriptors, about (see the module's docstring); measured 11 with a connection up
FDS_PER_TABLE = 12
#: tables a worker process holds by default: enough processes to spread a thousand tables over the cores
TABLES_PER_PROCESS = 68
#: a backlog is written this many records a commit (the daemon's own group commits are this size)
BACKLOG_COMMIT = 500
#: the worker's figures are asked for this often
POLL_S = 1.0
#: a worker may take this long to stop its tables (each exporter flushes up to 2 s, all at once)
STOP_S = 20.0
#: a table's summary goes to its exporter this often (the daemon's export service: each second)
OFFER_EVERY_S = 1.0
_STEP, _OFFER = 0, 1
#: the release the tables' status says
RELEASE = "cardbench floor"


class FloorError(Exception):
    """What stops the floor bench before it runs, in one line."""


@dataclass(frozen=True)
class FloorOptions:
    tables: int
    brokers: list[str]
    site: str
    mqtt_version: str = "5"
    #: ``{table}`` (and ``{site}``) in these are each table's own: a broker user per table
    username: str | None = None
    password_file: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    timeout_s: float = 10.0
    duration_s: float | None = None
    backlog_hours: float = 0.0
    fault_rate: float = 0.02
    seed: int = 1
    journals: Path | None = None  # None: a temporary folder, removed at the end
    per_process: int = TABLES_PER_PROCESS
    every_s: float = 60.0
    prefix: str = "t"
    #: the tables connect and journal nothing after their start: the export's own cost, idle
    idle: bool = False

    def table_names(self) -> list[str]:
        width = max(4, len(str(self.tables)))
        return [f"{self.prefix}{n:0{width}d}" for n in range(1, self.tables + 1)]

    def export_config(self, table: str) -> ExportConfig:
        """Table ``table``'s ``[export]``, as msgspec checks a configuration's; FloorError in one line."""
        def filled(value: str | None) -> str | None:
            return None if value is None else value.replace("{site}", self.site).replace("{table}", table)

        raw: dict[str, Any] = {"brokers": self.brokers, "site": self.site, "table": table,
                               "mqtt_version": self.mqtt_version, "timeout_s": self.timeout_s}
        for key in ("username", "password_file", "ca_file", "cert_file", "key_file"):
            value = filled(getattr(self, key))
            if value is not None:
                raw[key] = value
        try:
            return msgspec.convert(raw, ExportConfig, dec_hook=lambda kind, value: Path(value) if kind is Path else value,
                                   strict=False)
        except msgspec.ValidationError as exc:
            raise FloorError(f"the export of table {table}: {exc}") from None

    def check(self) -> None:
        """Refuse what would not run, naming the option, before any process starts."""
        for url in self.brokers:
            problem = broker_url_problem(url)
            if problem is not None:
                raise FloorError(f"--broker {url}: {problem}")
        if self.password_file is not None and self.username is None:
            raise FloorError("--password-file goes with --username (the broker's user of each table)")
        for table in {self.table_names()[0], self.table_names()[-1]}:
            config = self.export_config(table)
            for key in ("password_file", "ca_file", "cert_file", "key_file"):
                path = getattr(config, key)
                if path is not None and not path.is_file():
                    raise FloorError(f"--{key.replace('_', '-')} {path}: no such file")


@dataclass
class Figures:
    """What the tables of a worker (or the whole floor) did, as of ``at``."""
    tables: int = 0
    online: int = 0
    committed: int = 0  # records in the journals
    delivered: int = 0  # records the broker acknowledged
    backlog: int = 0
    oldest_s: float | None = None
    problem: str | None = None  # one table's broker problem, when some table has one
    faults: dict[str, int] = field(default_factory=dict)
    cpu_s: float = 0.0  # the workers' own CPU, user and system
    rss_kib: int = 0

    def add(self, other: Figures) -> None:
        self.tables += other.tables
        self.online += other.online
        self.committed += other.committed
        self.delivered += other.delivered
        self.backlog += other.backlog
        if other.oldest_s is not None:
            self.oldest_s = max(self.oldest_s or 0.0, other.oldest_s)
        self.problem = self.problem or other.problem
        for name, count in other.faults.items():
            self.faults[name] = self.faults.get(name, 0) + count
        self.cpu_s += other.cpu_s
        self.rss_kib += other.rss_kib


# ---- a worker: its tables' journals, their exporters, one scheduler ------------------------------

@dataclass
class _Table:
    name: str
    story: TableStory
    steps: Iterator[Step]
    journal: Journal
    exporter: Any  # cardd.export.exporter.Exporter (imported in the worker: paho is the worker's)
    next_step: Step | None = None
    summary: dict[str, Any] = field(default_factory=dict)  # after the last step committed
    raised_ns: dict[int, int] = field(default_factory=dict)

    def offer(self, summary: dict[str, Any]) -> None:
        """The state topic's side, as the daemon's export service makes it (export_service.floor_part):
        an open alarm's since is when it was first seen open."""
        now = time.time_ns()
        open_ids = {alarm["id"] for alarm in summary["alarms"]}
        for alarm in open_ids - self.raised_ns.keys():
            self.raised_ns[alarm] = now
        for alarm in self.raised_ns.keys() - open_ids:
            del self.raised_ns[alarm]
        self.exporter.offer_state({**summary, "alarm_since_ns": dict(self.raised_ns)})


@dataclass(frozen=True)
class _Shard:
    options: FloorOptions
    names: list[str]
    journals: Path
    first_index: int  # the tables' numbers in the whole floor, for their seeds


def _story(options: FloorOptions, index: int) -> TableStory:
    return TableStory(random.Random(options.seed * 1_000_003 + index), fault_rate=options.fault_rate)


def _write_backlog(journal: Journal, story: TableStory, steps: Iterator[Step], hours: float) -> Step:
    """``hours`` of the table's records, journaled with their own past times (at the table's pace,
    up to now) in group commits; the step that is due after now is returned, to come live."""
    start_ns = time.time_ns() - int(hours * 3600e9)
    now_ns = time.time_ns()
    pending: list[Entry] = []
    base_s = story.now_s
    while True:
        step = next(steps)
        at_ns = start_ns + int((story.now_s - base_s) * 1e9)
        if at_ns >= now_ns:
            if pending:
                journal.append(pending)
            return replace(step, delay_s=(at_ns - now_ns) / 1e9)
        pending.extend(entry._replace(ts_ns=at_ns + n) for n, entry in enumerate(step.entries))
        if len(pending) >= BACKLOG_COMMIT:
            journal.append(pending)
            pending = []


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _worker(shard: _Shard, conn: Connection) -> None:
    """A worker process: builds its tables, runs them until the parent says stop (or is gone)."""
    # the terminal's Ctrl-C reaches the whole process group: the parent alone decides the end
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    import logging

    import structlog
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    from cardd.export.exporter import Exporter, TableFacts

    options = shard.options
    facts = TableFacts(RELEASE, "casino-000", "0" * 64, (("shoe", "sim://shoe"), ("shuffler", "sim://shuffler")))
    tables: list[_Table] = []
    try:
        for offset, name in enumerate(shard.names):
            story = _story(options, shard.first_index + offset)
            steps = story.steps()
            journal = Journal.open(shard.journals / f"{name}.sqlite3", create=True)
            first = next(steps)
            journal.append(first.entries)
            pending = _write_backlog(journal, story, steps, options.backlog_hours) if options.backlog_hours else None
            table = _Table(name, story, steps, journal, Exporter(options.export_config(name), journal, facts))
            table.next_step, table.summary = pending, first.summary
            tables.append(table)
    except (JournalError, OSError) as exc:
        conn.send(("error", f"the journals in {shard.journals}: {exc}"))
        return
    conn.send(("ready", sum(t.journal.last_seq for t in tables)))
    if conn.recv() != "go":  # every worker's tables start together: a floor-wide drain starts at once
        _stop_tables(tables)
        return
    for table in tables:
        table.exporter.start()
        table.exporter.notify(table.journal.last_seq)
    rng = random.Random(shard.first_index)
    #: (when, table, what): a step of the table's story, or its summary offered to the state topic
    #: once a second as the daemon's export service does (export_service.WATCH_EVERY_S)
    due: list[tuple[float, int, int]] = []
    began = time.monotonic()
    for n, table in enumerate(tables):
        heapq.heappush(due, (began + rng.uniform(0.0, OFFER_EVERY_S), n, _OFFER))
        if options.idle:
            continue
        if table.next_step is None:
            table.next_step = next(table.steps)
            # the tables of a floor do not all start in the same second
            table.next_step = replace(table.next_step, delay_s=table.next_step.delay_s + rng.uniform(0.0, 3.0))
        heapq.heappush(due, (began + table.next_step.delay_s, n, _STEP))
    try:
        while True:
            now = time.monotonic()
            while due and due[0][0] <= now:
                at, n, what = heapq.heappop(due)
                table = tables[n]
                if what == _OFFER:
                    table.offer(table.summary)
                    heapq.heappush(due, (at + OFFER_EVERY_S, n, _OFFER))
                    continue
                step = table.next_step
                assert step is not None
                if step.entries:
                    table.journal.append(step.entries)
                    table.exporter.notify(table.journal.last_seq)
                table.summary = step.summary
                table.next_step = next(table.steps)
                heapq.heappush(due, (at + table.next_step.delay_s, n, _STEP))
            wait = max(0.0, min(POLL_S, (due[0][0] if due else now + POLL_S) - time.monotonic()))
            if conn.poll(wait):
                try:
                    message = conn.recv()
                except EOFError:  # the parent is gone: stop as on its word
                    message = "stop"
                if message == "stop":
                    break
                conn.send(("figures", _figures(tables)))
    except JournalError as exc:
        conn.send(("error", str(exc)))
    finally:
        _stop_tables(tables)
    try:
        conn.send(("stopped", _figures(tables)))
    except (BrokenPipeError, OSError):
        pass


def _stop_tables(tables: list[_Table]) -> None:
    """As the daemon stops: DAEMON_STOP journaled and exported, then every exporter stopped at once."""
    for table in tables:
        try:
            table.journal.append([Entry("stop", "DAEMON_STOP", "cardd", data={"message": "cardd 0.1.0 stopping",
                                                                             "release": "cardd 0.1.0"})])
            table.exporter.notify(table.journal.last_seq)
        except JournalError:
            pass
    for table in tables:
        table.exporter.stop(timeout=0.0)  # each is told first, so their flushes run side by side
    for table in tables:
        table.exporter.stop()
        table.journal.close()


def _figures(tables: list[_Table]) -> Figures:
    figures = Figures(tables=len(tables), rss_kib=_rss_kib())
    times = os.times()
    figures.cpu_s = times.user + times.system
    for table in tables:
        status = table.exporter.status()
        figures.online += status.connected
        figures.committed += table.journal.last_seq
        figures.delivered += status.delivered_through
        figures.backlog += status.backlog
        if status.oldest_undelivered_s is not None:
            figures.oldest_s = max(figures.oldest_s or 0.0, status.oldest_undelivered_s)
        if status.problem and not status.connected:
            figures.problem = figures.problem or status.problem
        for name, count in table.story.faults.items():
            figures.faults[name] = figures.faults.get(name, 0) + count
    return figures


# ---- the parent -------------------------------------------------------------------------------------

@dataclass
class _Worker:
    process: Any  # multiprocessing's SpawnProcess
    conn: Connection
    figures: Figures = field(default_factory=Figures)
    stopped: bool = False


def figures_line(figures: Figures, elapsed_s: float, previous: Figures | None, interval_s: float) -> str:
    """One line of the run: tables online, records committed and delivered (and their rates over
    the interval), the backlog and its oldest record's age."""
    def rate(now: int, before: int | None) -> str:
        if before is None or interval_s <= 0:
            return ""
        return f" ({(now - before) / interval_s:,.1f}/s)"

    oldest = "" if figures.oldest_s is None else f", oldest {figures.oldest_s:,.1f} s"
    return (f"{elapsed_s:,.0f} s: {figures.online}/{figures.tables} tables online, "
            f"{figures.committed:,} records committed{rate(figures.committed, previous.committed if previous else None)}, "
            f"{figures.delivered:,} delivered{rate(figures.delivered, previous.delivered if previous else None)}, "
            f"backlog {figures.backlog:,}{oldest}; workers' CPU {figures.cpu_s:,.1f} s, RSS {figures.rss_kib // 1024:,} MiB")


def run(options: FloorOptions, say: Callable[[str], None]) -> Figures:
    """Run the floor until ``options.duration_s`` (or a KeyboardInterrupt, re-raised once every
    worker has stopped); the last figures."""
    options.check()
    names = options.table_names()
    need = min(options.per_process, len(names)) * FDS_PER_TABLE + 100
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, need), hard))
    folder = options.journals or Path(tempfile.mkdtemp(prefix="cardbench-floor-"))
    folder.mkdir(parents=True, exist_ok=True)
    context = multiprocessing.get_context("spawn")
    workers: list[_Worker] = []
    try:
        began = time.monotonic()
        for first in range(0, len(names), options.per_process):
            parent_end, child_end = context.Pipe()
            shard = _Shard(options, names[first:first + options.per_process], folder, first)
            process = context.Process(target=_worker, args=(shard, child_end), name=f"cardbench-floor-{first}",
                                      daemon=True)
            process.start()
            child_end.close()
            workers.append(_Worker(process, parent_end))
        backlog = 0
        for worker in workers:
            kind, value = _receive(worker, timeout=None)
            if kind != "ready":
                raise FloorError(str(value))
            backlog += value
        for worker in workers:
            worker.conn.send("go")
        say(f"{len(names)} tables in {len(workers)} process(es) publishing to {', '.join(options.brokers)} "
            f"(site {options.site}); journals in {folder}, {backlog:,} records at the start "
            f"({time.monotonic() - began:,.1f} s to write)")
        watched = _watch(options, workers, say)
    finally:  # Ctrl-C too: every table stops as a daemon does, then the line of what they did
        stopped = _stop_workers(workers)
        if options.journals is None:
            shutil.rmtree(folder, ignore_errors=True)
        if stopped.tables:
            say(f"stopped: {stopped.tables} tables, {stopped.committed:,} records committed, "
                f"{stopped.delivered:,} delivered, backlog {stopped.backlog:,}; faults: "
                + (", ".join(f"{name} {count}" for name, count in sorted(stopped.faults.items())) or "none"))
    return watched


def _receive(worker: _Worker, timeout: float | None) -> tuple[str, Any]:
    if timeout is not None and not worker.conn.poll(timeout):
        return "silent", None
    try:
        kind, value = worker.conn.recv()
    except (EOFError, OSError):
        worker.stopped = True
        return "gone", f"a worker process ended (exit {worker.process.exitcode})"
    return kind, value


def _watch(options: FloorOptions, workers: list[_Worker], say: Callable[[str], None]) -> Figures:
    began = time.monotonic()
    last_line, previous = began, None
    told_problem = False
    while True:
        time.sleep(max(0.0, POLL_S - (time.monotonic() - began) % POLL_S))
        total = _collect(workers)
        now = time.monotonic()
        if total.online == 0 and total.problem and not told_problem:  # once, until a table is back online
            say(f"no table is connected: {total.problem} (every table keeps trying, with its backoff)")
            told_problem = True
        elif total.online:
            told_problem = False
        done = options.duration_s is not None and now - began >= options.duration_s
        if now - last_line >= options.every_s - POLL_S / 2 or done:
            say(figures_line(total, now - began, previous, now - last_line))
            last_line, previous = now, total
        if done:
            return total


def _collect(workers: list[_Worker]) -> Figures:
    total = Figures()
    for worker in workers:
        if not worker.stopped:
            worker.conn.send("figures")
    for worker in workers:
        if not worker.stopped:
            kind, value = _receive(worker, timeout=30.0)
            if kind == "figures":
                worker.figures = value
            elif kind in ("error", "gone"):
                raise FloorError(str(value))
        total.add(worker.figures)
    return total


def _stop_workers(workers: list[_Worker]) -> Figures:
    """Every worker stopped (its tables as daemons stop); their figures at the end."""
    for worker in workers:
        if not worker.stopped:
            try:
                worker.conn.send("stop")
            except (BrokenPipeError, OSError):
                worker.stopped = True
    deadline = time.monotonic() + STOP_S
    total = Figures()
    for worker in workers:
        while not worker.stopped:
            kind, value = _receive(worker, timeout=max(0.0, deadline - time.monotonic()))
            if kind == "stopped":
                worker.figures, worker.stopped = value, True
            elif kind in ("silent", "gone", "error"):
                break
        total.add(worker.figures)
        worker.process.join(max(0.0, deadline - time.monotonic()))
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.conn.close()
    return total
