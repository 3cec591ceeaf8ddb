"""The writer the power-cut test kills: appends group commits until SIGKILL, reporting each.

    python powercut_child.py JOURNAL REPORT SEED

After every append() returns it appends one line to REPORT and fsyncs it: the last seq
committed, then the WAL position SQLite had reached (mxFrame and the salts of the
wal-index header in the -shm file), which tells the test where the durable part of the WAL ends.
Each record's data carries its own expected seq (``n``) and the snapshot names the last seq it
covers, so the test can tell a record that was invented or misplaced from one that was kept.
"""
from __future__ import annotations

import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cardd.journal import Entry, Journal  # noqa: E402
from tests.support.powercut import wal_position  # noqa: E402


def main() -> None:
    journal_path, report_path, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(seed)
    report = os.open(report_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    with Journal.open(journal_path, create=True) as journal:
        while True:
            first = journal.last_seq + 1
            count = rng.choice((1, 1, 3, 20, 120))
            entries = [Entry("event", "CARD_ASSIGNED", "shoe", data={"n": first + i, "round": seed,
                                                                     "pad": "x" * rng.randrange(0, 400)})
                       for i in range(count)]
            seqs = journal.append(entries, snapshot={"through": first + count - 1, "pad": "s" * rng.randrange(0, 3000)})
            mx_frame, salts = wal_position(journal_path)
            os.write(report, f"{seqs[-1]} {mx_frame} {salts}\n".encode())
            os.fsync(report)


if __name__ == "__main__":
    main()
