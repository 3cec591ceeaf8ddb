"""Crashes and power cuts lose nothing that append() had returned, and invent nothing.

A child process (powercut_child.py) appends group commits with snapshots and reports every
append that returned (fsynced). The test kills it with SIGKILL at a random moment, then:

- **kill**: the journal as the kill left it (the page cache survives a killed process) must
  open, verify, and hold every reported record; the next child goes on writing it.
- **power cut**: a copy of the journal and its WAL (not the -shm, which a reboot loses) is
  damaged the way a power cut mid-write leaves it, in the part of the WAL written after the
  last fsync that had returned: cut at a random byte, or the last page torn (its tail
  overwritten with zeros or garbage). Where that part begins is known from the child's report:
  the WAL frame count SQLite had reached when the append returned, in the WAL generation named
  by its salts (a WAL restarted since then is all unsynced, after its header, which
  synchronous=FULL syncs before any frame). The copy must open, verify, and hold every
  reported record.

Each record's data carries the seq it was written as, and each snapshot the last seq it
covers: a record moved, lost or invented, or a snapshot out of step with its records, fails.
CI makes 20 cuts; ``CARDD_FULL=1 .venv/bin/python -m pytest tests/journal -m soak`` makes 100.
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cardd.journal import Journal
from tests.support.powercut import Committed, cut_wal

FULL = os.environ.get("CARDD_FULL") == "1"
CUTS = 100 if FULL else 20
CHILD = Path(__file__).with_name("powercut_child.py")


def read_report(path: Path) -> Committed | None:
    lines = path.read_text().splitlines() if path.exists() else []
    if not lines:
        return None
    seq, mx_frame, salts = lines[-1].split()
    return Committed(int(seq), int(mx_frame), bytes.fromhex(salts))


def run_child_until_killed(journal: Path, report: Path, seed: int, rng: random.Random) -> Committed:
    """Start a writer, let it commit at least once more, kill it at a random moment."""
    before = read_report(report)
    stderr = journal.with_name(f"child-{seed}.err")
    with open(stderr, "wb") as err:
        child = subprocess.Popen([sys.executable, str(CHILD), str(journal), str(report), str(seed)],
                                 stdout=subprocess.DEVNULL, stderr=err)
    try:
        while (now := read_report(report)) is None or now == before:
            assert child.poll() is None, f"the writer died: {stderr.read_text()}"
            try:
                child.wait(0.01)
            except subprocess.TimeoutExpired:
                pass
        try:
            child.wait(rng.uniform(0, 0.15))  # the random moment of the cut
        except subprocess.TimeoutExpired:
            pass
        assert child.poll() is None, f"the writer died: {stderr.read_text()}"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    committed = read_report(report)
    assert committed is not None
    return committed


def check_survivor(path: Path, committed: Committed, what: str) -> int:
    """The journal opens, verifies, holds every reported record and nothing out of place."""
    with Journal.open(path) as journal:
        assert journal.last_seq >= committed.seq, f"{what}: records up to {committed.seq} were confirmed, " \
                                                  f"the journal ends at {journal.last_seq}"
        result = journal.verify()
        assert result.ok, f"{what}: {result}"
        records = journal.query(limit=None)
        assert [r.seq for r in records] == list(range(1, journal.last_seq + 1)), what
        misplaced = [r.seq for r in records if r.data["n"] != r.seq]
        assert not misplaced, f"{what}: records not where they were written: {misplaced[:5]}"
        snapshot = journal.latest_snapshot()
        assert snapshot is not None and snapshot[1]["through"] == snapshot[0], f"{what}: {snapshot}"
        assert [r.seq for r in journal.entries_after(snapshot[0])] == list(range(snapshot[0] + 1,
                                                                                  journal.last_seq + 1))
        return journal.last_seq


def power_cuts(tmp_path: Path, cuts: int) -> None:
    rng = random.Random(20261123)
    journal, report = tmp_path / "journal.db", tmp_path / "committed.txt"
    damaged = 0
    for n in range(cuts):
        committed = run_child_until_killed(journal, report, seed=n, rng=rng)
        copy = tmp_path / f"cut-{n}" / "journal.db"
        copy.parent.mkdir()
        for suffix in ("", "-wal"):
            if Path(f"{journal}{suffix}").exists():
                shutil.copyfile(f"{journal}{suffix}", f"{copy}{suffix}")
        done = cut_wal(Path(f"{copy}-wal"), committed, rng, tear=n % 2 == 1)
        damaged += done is not None
        check_survivor(copy, committed, f"power cut {n} ({done or 'WAL untouched'})")
        shutil.rmtree(copy.parent)
        check_survivor(journal, committed, f"kill {n}")  # the next writer goes on with this file
    # a kill between two commits leaves nothing unsynced; about half the kills land inside one
    assert damaged >= cuts // 4, f"only {damaged} of {cuts} cuts found unsynced WAL bytes to damage"


@pytest.mark.soak
@pytest.mark.timeout(3600 if FULL else 300)
def test_power_cuts_and_kills_lose_no_confirmed_record(tmp_path):
    power_cuts(tmp_path, CUTS)
