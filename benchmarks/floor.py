"""A floor of tables against one mosquitto on loopback: a benchmark (prints figures), not a test.

    .venv/bin/python benchmarks/floor.py --tables 100,500,1000 --warmup 60 --seconds 120

For each size, ``cardbench floor`` (cardd/bench/floor.py: each table a journal of its own and
cardd's own Exporter over it, worker processes holding the tables) against a private mosquitto
(benchmarks/export.py's: anonymous, no persistence, one loopback listener), twice:

- **idle**: the tables connected, journaling nothing after their start (``--idle``): the export's
  own cost, its keep-alives, state topic and wake-ups;
- **at pace**: a real table's pace (a card every 1-3 s, rounds of 30-60 s, faults at 2 % of rounds).

Measured over ``--seconds`` after ``--warmup`` (the start's shuffles past): the tables' processes'
CPU (the parent and its workers, /proc/PID/stat) and RSS (their sum at the end), mosquitto's CPU,
and records committed and delivered a second (from cardbench floor's own lines). ``--exporter-wait
poll --tables-per-process N`` measures many exporters in one process (docs/bench.md says why).
``--backlog-hours H`` adds the drain: every table starts H hours behind; how long until the whole
floor's backlog is delivered.

The floor service (cardfloor, its archive and its SSE stream) is measured by
:func:`measure_cardfloor`, not written yet: the same tables, the commit-to-archive and
commit-to-SSE latency.
"""
from __future__ import annotations

import argparse
import os
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))

from daemon import process_cpu  # noqa: E402  (benchmarks/daemon.py)
from core.ctrl_c import end_like_ctrl_c  # noqa: E402
from export import Broker  # noqa: E402  (benchmarks/export.py: a private mosquitto)

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
        found = [self.proc.pid]
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            found += [int(n) for n in (task / "children").read_text().split()]
        return found

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


def measure_cardfloor(broker: Broker, *, site: str, tables: int, journals: Path, seconds: float,
                      dsn: str, config: Path) -> dict[str, float]:
    """Where cardfloor joins the benchmark (cardd/floor/main.py, its archive in PostgreSQL ``dsn``):

    1. start ``cardfloor --config config`` (its broker ``broker.url``, a persistent session on
       ``cardd/v1/#``) and wait for it to be subscribed;
    2. run ``cardbench floor --tables tables --site site --journals journals`` against ``broker``
       for ``seconds`` (the tables at pace; then again with ``--backlog-hours`` for the drain);
    3. commit-to-archive: for each archived record, its archive row's stored time minus the
       record's ``time`` (the journal commit time; same clock, one machine): p50/p99/max;
    4. commit-to-SSE: an SSE client on /api/v1/stream, each record's arrival minus its ``time``;
    5. cardfloor's CPU and RSS, PostgreSQL's CPU, and records archived a second.

    Returns those figures by name. Not written yet: cardfloor is not on this branch."""
    raise NotImplementedError("cardfloor's measurement joins once cardd/floor/main.py exists")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", default="100,500,1000", help="floor sizes, comma-separated")
    ap.add_argument("--warmup", type=float, default=60.0, help="seconds after every table is online")
    ap.add_argument("--seconds", type=float, default=120.0, help="seconds measured")
    ap.add_argument("--backlog-hours", type=float, default=0.0, help="also the drain of this many hours a table")
    ap.add_argument("--journals", type=Path, default=None,
                    help="where the journals go (default: a temporary folder on /tmp's disk)")
    ap.add_argument("--phases", default="idle,pace", help="idle, pace, both, or none (\"\": only the drain)")
    ap.add_argument("extra", nargs="*", help="more options for cardbench floor (after --)")
    args = ap.parse_args()
    end_like_ctrl_c()  # a kill stops cardbench floor and mosquitto as Ctrl-C does
    with tempfile.TemporaryDirectory(prefix="cardd-floor-bench-") as scratch:
        base = args.journals or Path(scratch)
        broker = Broker(Path(scratch))
        try:
            print(f"mosquitto {broker.url}; journals under {base}; {os.cpu_count()} CPUs", flush=True)
            for tables in [int(n) for n in args.tables.split(",")]:
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
