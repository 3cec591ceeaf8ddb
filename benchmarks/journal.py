"""How fast the journal is (a benchmark, not a test): append, start-up, queries, verify.

Builds a 5,000,000-record journal once (90 days of a busy table: rounds of card events,
written with group commits and a snapshot per round) into /tmp and reuses it, then prints
the group-commit append rate, the single-record commit latency with synchronous=FULL, the
open time (quick check and latest snapshot), the query time for one round and for one hour,
and the verify speed, each with its target.

    .venv/bin/python benchmarks/journal.py [--records 5000000] [--path /tmp/cardd-journal-5M.db] [--rebuild]
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cardd.journal import Entry, Journal, JournalError, journal_files  # noqa: E402
from cardd.journal.integrity import PARALLEL_VERIFY_RECORDS, VERIFY_PROCESSES  # noqa: E402

STARTUP_TARGET_S = 1.0
QUERY_TARGET_MS = 100.0
VERIFY_TARGET = 500_000
DAYS = 90
GROUP = 500  # records per commit while building
CARDS = [f"{r}{s}" for r in "A23456789TJQK" for s in "CDHS"]


def round_entries(round_id: int, rng: random.Random) -> list[Entry]:
    """One blackjack round as the tracker journals it: state changes, cards, actions, settlement."""
    boxes = rng.randint(1, 7)
    entries = [Entry("event", "ROUND_STATE", "round", data={"round": round_id, "state": "betting",
                                                             "message": f"round {round_id}: betting open"})]
    entries += [Entry("input", "ACTION", "console", who="dealer:d17",
                      data={"round": round_id, "box": b, "wager": rng.choice((10, 25, 100))}) for b in range(1, boxes + 1)]
    for n in range(boxes * 2 + rng.randint(2, 2 + boxes)):
        entries.append(Entry("event", "CARD_ASSIGNED", "shoe", data={
            "round": round_id, "card": rng.choice(CARDS), "box": n % (boxes + 1), "index": n,
            "message": f"round {round_id}: card {n} assigned"}))
    entries += [Entry("event", "SETTLED", "round", data={"round": round_id, "box": b, "result": rng.choice(("win", "lose", "push"))})
                for b in range(1, boxes + 1)]
    if rng.random() < 0.01:
        entries.append(Entry("event", "UNREADABLE_CARD", "shoe", severity="warning", data={"round": round_id}))
    return entries


def build(path: Path, records: int) -> None:
    for stale in (*journal_files(path), Path(f"{path}-lock")):
        stale.unlink(missing_ok=True)
    start_ns = time.time_ns() - DAYS * 86_400 * 1_000_000_000
    step_ns = DAYS * 86_400 * 1_000_000_000 // records
    rng = random.Random(2026)
    t0 = time.perf_counter()
    with Journal.open(path, create=True) as journal:
        round_id, written = 0, 0
        pending: list[Entry] = []
        while written < records:
            round_id += 1
            for entry in round_entries(round_id, rng)[: records - written - len(pending)]:
                pending.append(Entry(entry.kind, entry.reason, entry.source, entry.severity, entry.who, entry.data,
                                     ts_ns=start_ns + (written + len(pending)) * step_ns))
            if len(pending) >= GROUP or written + len(pending) >= records:
                journal.append(pending, snapshot={"round": round_id, "shoe": {"dealt": round_id % 300}})
                written += len(pending)
                pending = []
                if written % 500_000 < GROUP:
                    print(f"  built {written:,} records ({written / (time.perf_counter() - t0):,.0f}/s)", flush=True)
    print(f"built {records:,} records in {time.perf_counter() - t0:.0f} s")


def usable(path: Path, records: int) -> bool:
    try:
        with Journal.open(path, readonly=True) as journal:
            return journal.last_seq == records
    except JournalError:
        return False


def timed(action: Callable[[], object], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        action()
        times.append(time.perf_counter() - t)
    return times


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def append_figures(directory: Path) -> None:
    path = directory / "append.db"
    entries = round_entries(1, random.Random(1))
    with Journal.open(path, create=True) as journal:
        batch = (entries * (100 // len(entries) + 1))[:100]
        commits = 200
        t = time.perf_counter()
        for _ in range(commits):
            journal.append(batch, snapshot={"round": 1})
        elapsed = time.perf_counter() - t
        print(f"append, group commit of 100 + snapshot: {commits * 100 / elapsed:,.0f} records/s "
              f"({elapsed / commits * 1e3:.2f} ms per commit)")
        single = timed(lambda: journal.append([entries[0]]), 2000)
        single.sort()
        print(f"append, one record per commit (synchronous=FULL): p50 {single[len(single) // 2] * 1e3:.2f} ms, "
              f"p99 {single[int(len(single) * 0.99)] * 1e3:.2f} ms")


def open_and_restore(path: Path) -> None:
    with Journal.open(path) as journal:
        snapshot = journal.latest_snapshot()
        assert snapshot is not None
        journal.entries_after(snapshot[0])


def hours(journal: Journal) -> Iterator[tuple[int, int]]:
    first = journal.query(limit=1)[0].ts_ns
    last = journal.query(limit=1, newest_first=True)[0].ts_ns
    rng = random.Random(7)
    while True:
        start = rng.randrange(first, last - 3_600_000_000_000)
        yield start, start + 3_600_000_000_000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--path", type=Path, default=Path(tempfile.gettempdir()) / "cardd-journal-5M.db")
    ap.add_argument("--rebuild", action="store_true", help="build the big journal even if a usable one exists")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="cardd-journal-bench-") as scratch:
        append_figures(Path(scratch))
    if args.rebuild or not usable(args.path, args.records):
        print(f"building {args.path} ({args.records:,} records, done once and reused)")
        build(args.path, args.records)
    size_mb = sum(p.stat().st_size for p in args.path.parent.glob(args.path.name + "*")) / 1e6
    print(f"journal {args.path}: {args.records:,} records, {size_mb:,.0f} MB")

    open_and_restore(args.path)  # the first open after a build checkpoints its WAL
    startup = timed(lambda: open_and_restore(args.path), 5)
    print(f"start-up (open, quick check, latest snapshot, records after it): median {statistics.median(startup):.3f} s, "
          f"max {max(startup):.3f} s  [target <= {STARTUP_TARGET_S} s: {verdict(max(startup) <= STARTUP_TARGET_S)}]")

    with Journal.open(args.path, readonly=True) as journal:
        rng = random.Random(3)
        last_round = journal.query(limit=1, newest_first=True, kind="event")[0].data["round"]
        round_counts: list[int] = []
        round_times = timed(lambda: round_counts.append(len(journal.query(round_id=rng.randint(1, last_round),
                                                                          limit=None))), args.repeat)
        hour_iter, hour_counts = hours(journal), []
        hour_times = timed(lambda: hour_counts.append(len(journal.query(since=(h := next(hour_iter))[0],
                                                                        until=h[1], limit=None))), args.repeat)
    for what, times, counts in (("one round", round_times, round_counts), ("one hour", hour_times, hour_counts)):
        worst = max(times) * 1e3
        print(f"query {what} ({statistics.mean(counts):,.0f} records): median {statistics.median(times) * 1e3:.1f} ms, "
              f"max {worst:.1f} ms  [target <= {QUERY_TARGET_MS:.0f} ms: {verdict(worst <= QUERY_TARGET_MS)}]")

    # verify as cardd does it (the chain in stretches, one process per CPU) and in one process;
    # CPU counts the stretches' processes too
    with Journal.open(args.path, readonly=True) as journal:
        for processes in (None, 1):
            t, cpu = time.perf_counter(), _cpu_with_children()
            result = journal.verify(processes=processes)
            elapsed, cpu = time.perf_counter() - t, _cpu_with_children() - cpu
            assert result.ok, result
            rate = result.checked / elapsed
            spread = min(len(os.sched_getaffinity(0)), VERIFY_PROCESSES)
            how = "one process" if processes == 1 or spread == 1 or result.checked < PARALLEL_VERIFY_RECORDS \
                else f"{spread} processes"
            # the CPU clocks tick every 10 ms: a small journal's verify may use none of them
            per_cpu = f"{result.checked / cpu:,.0f} per CPU-second" if cpu > 0 else "less CPU than the clock's tick"
            print(f"verify ({how}): {result.checked:,} records in {elapsed:.2f} s = {rate:,.0f} records/s "
                  f"({per_cpu})"
                  + (f"  [target >= {VERIFY_TARGET:,}: {verdict(rate >= VERIFY_TARGET)}]" if processes is None else ""))
    return 0


def _cpu_with_children() -> float:
    used = os.times()
    return used.user + used.system + used.children_user + used.children_system


if __name__ == "__main__":
    sys.exit(main())
