"""The journal's write path: CPU per record and per commit (a benchmark, not a test).

What the daemon's journal writer thread spends: :meth:`Journal.append_encoded` of entries the
loop already checked and encoded (``Journal.encode``, not timed), on a real journal (WAL,
synchronous=FULL, its triggers and indexes) in a fresh directory. Each card read is one record,
as the daemon journals it since schema version 2: the ``event`` it caused carrying the read
(the device message) under ``data["input"]`` (``no-round``: a card drawn in error, a warning
with no round, as ``benchmarks/daemon.py`` deals; ``rounds``: a card assigned in a round, info,
indexed by its round).

For each batch size (records a commit) it prints the CPU microseconds (``process_time``: user
and system, so the fsync's kernel time too) per commit and per record, then the straight line
through them: a fixed cost per commit plus a cost per record. The machine is shared: quote CPU
time, in interleaved runs, or instructions (``valgrind --tool=callgrind``: the kernel's share is
not counted there; ``--records`` small, two sizes, subtract).

    .venv/bin/python benchmarks/journal_append.py [--batches 2,16,64,256] [--records 8192] [--rounds 3]
                                                  [--stream no-round|rounds] [--dir DIR]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cardd.journal import INPUT_KEY, Entry, Journal  # noqa: E402

T0_NS = 1_795_000_000_000_000_000


def card_entries(index: int, stream: str) -> list[Entry]:
    """One card read's record, as the daemon writes it: the event, carrying the read."""
    read = {"type": "DeviceMessage", "device": "shoe-reader", "message": f"30{index % 65536:04x}0301",
            "event_index": index}
    if stream == "rounds":
        return [Entry("event", "CARD_ASSIGNED", "shoe-reader", data={
            "round": index // 20, "card": "4H", "box": index % 7, "index": index % 20, INPUT_KEY: read,
            "message": f"round {index // 20}: card 4H to box {index % 7}"}, ts_ns=T0_NS + index * 1000)]
    return [Entry("event", "CARD_DRAWN_IN_ERROR", "shoe-reader", severity="warning", ts_ns=T0_NS + index * 1000,
                  data={"card": "4H", "index": index, INPUT_KEY: read,
                        "message": f"card 4H drawn in error (read {index})"})]


def measure(directory: Path, batch: int, records: int, stream: str) -> float:
    """CPU seconds of ``records // batch`` commits of ``batch`` records each, on a new journal."""
    path = directory / f"append-{batch}.db"
    for stale in directory.glob(path.name + "*"):
        stale.unlink()
    with Journal.open(path, create=True) as journal:
        commits, card = max(1, records // batch), 0
        encoded = []
        for _ in range(commits):
            entries: list[Entry] = []
            while len(entries) < batch:
                entries += card_entries(card, stream)
                card += 1
            encoded.append(journal.encode(entries[:batch]))
        cpu = time.process_time()
        for one in encoded:
            journal.append_encoded(one)
        return time.process_time() - cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="2,16,64,256", help="records a commit, comma-separated")
    ap.add_argument("--records", type=int, default=8192, help="records written for each batch size")
    ap.add_argument("--rounds", type=int, default=3, help="runs of every batch size, interleaved; the least CPU counts")
    ap.add_argument("--stream", choices=("no-round", "rounds"), default="no-round")
    ap.add_argument("--dir", type=Path, default=None, help="where the journals go (default: a new directory in /tmp)")
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]

    best: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="cardd-append-bench-", dir=args.dir) as scratch:
        for _ in range(args.rounds):
            for batch in batches:
                cpu = measure(Path(scratch), batch, args.records, args.stream)
                best[batch] = min(best.get(batch, cpu), cpu)
    points = []
    for batch in batches:
        commits = max(1, args.records // batch)
        per_commit = best[batch] / commits * 1e6
        points.append((batch, per_commit))
        print(f"batch {batch:4d}: {per_commit:9.1f} us CPU per commit, {per_commit / batch:6.2f} us per record "
              f"({commits} commits)")
    if len(points) > 1:  # least squares: per commit = fixed + per_record * batch
        n = len(points)
        mean_x = sum(x for x, _ in points) / n
        mean_y = sum(y for _, y in points) / n
        slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
        print(f"fit: {mean_y - slope * mean_x:.1f} us per commit + {slope:.2f} us per record "
              f"({args.stream}, least CPU of {args.rounds} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
