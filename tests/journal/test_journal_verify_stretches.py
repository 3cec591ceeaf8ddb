"""A long chain is verified in stretches, one process each: the result is always the one a
single walk gives (the same first bad seq, problem and count), wherever the damage is, at a
seam between stretches too, and when a stretch's process fails or finds the anchor moved."""
from __future__ import annotations

import sqlite3
from contextlib import closing
import subprocess
import sys

import pytest

from cardd.journal import Journal
from cardd.journal import chain
from cardd.journal.records import GENESIS_HASH
from cardd.journal.chain import ChainBreak, Stretch, WalkResult, stretch_from_json, stretch_to_json
from cardd.journal.stretch_walker import walk_file
from tests.journal.journal_helpers import (DAY_NS, FakeClock, damage_page_of, fill, forge_head_file, journal_of_cards,
                                           rechained_from, tamper)

RECORDS = 200  # three processes: stretches 1..66 and 67..132 in two processes, 133..200 in the caller's


@pytest.fixture
def path(tmp_path):
    return journal_of_cards(tmp_path / "j.db", RECORDS)


def verify(path, processes):
    with Journal.open(path, quick_check_records=1) as j:
        return j.verify(processes=processes, parallel_from=0)


def swap(a: int, b: int) -> list[str]:
    """records a and b change places (each keeps its seq): both carry the wrong previous-hash"""
    return [f"CREATE TEMP TABLE a AS SELECT * FROM records WHERE seq = {a}",
            f"CREATE TEMP TABLE b AS SELECT * FROM records WHERE seq = {b}",
            f"DELETE FROM records WHERE seq IN ({a}, {b})",
            f"INSERT INTO records SELECT {a}, ts, kind, source, reason, severity, who, round, data, prev, hash FROM b",
            f"INSERT INTO records SELECT {b}, ts, kind, source, reason, severity, who, round, data, prev, hash FROM a"]


@pytest.mark.parametrize("processes", [2, 3, 4])
def test_a_sound_chain_verifies_in_stretches(path, processes):
    result = verify(path, processes)
    assert result.ok and result.checked == RECORDS and result.first_bad_seq is None


@pytest.mark.parametrize("sql, seq, problem", [
    (["UPDATE records SET data = '{}' WHERE seq = 5"], 5, "does not match its content"),
    (["UPDATE records SET data = '{}' WHERE seq = 66"], 66, "does not match its content"),  # the end of a stretch
    (["UPDATE records SET data = '{}' WHERE seq = 67"], 67, "does not match its content"),  # the start of one
    (["UPDATE records SET ts = ts + 1 WHERE seq = 100"], 100, "does not match its content"),
    (["UPDATE records SET data = '{}' WHERE seq = 150"], 150, "does not match its content"),  # the caller's stretch
    (["DELETE FROM records WHERE seq = 67"], 67, "67 missing"),
    (["DELETE FROM records WHERE seq = 133"], 133, "133 missing"),
    (["DELETE FROM records WHERE seq IN (66, 67)"], 66, "66..67 missing"),
    (swap(66, 67), 66, "previous-hash does not match"),
    (swap(132, 133), 132, "previous-hash does not match"),
    (swap(67, 68), 67, "previous-hash does not match"),
    # a record inserted at a seam with a chain of its own: the seam's check finds it
    (["UPDATE records SET prev = zeroblob(32) WHERE seq = 67",
      "UPDATE records SET hash = zeroblob(32) WHERE seq = 66"], 66, "does not match its content"),
    (["UPDATE records SET data = '{}' WHERE seq = 20", "DELETE FROM records WHERE seq = 140"], 20,
     "does not match its content"),  # two breaks: the first is named
])
@pytest.mark.parametrize("processes", [2, 3])
def test_damage_anywhere_is_found_in_stretches_as_one_walk_finds_it(path, sql, seq, problem, processes):
    """On the chain itself (a deletion is refused by Journal.open's count before verify runs)."""
    tamper(path, *sql)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    try:
        conn.execute("BEGIN")
        one_walk = chain.walk(conn, 0, GENESIS_HASH)
        assert one_walk.broken is not None and one_walk.broken.seq == seq and problem in one_walk.broken.problem
        assert one_walk.checked == seq - 1 and one_walk.last_seq == seq - 1
        assert chain.walk_in_processes(path, conn, 0, GENESIS_HASH, RECORDS, processes) == one_walk
    finally:
        conn.close()
    if "DELETE" not in sql[-1]:
        assert verify(path, processes) == verify(path, 1)  # and through verify() on the journal


def test_a_chain_cut_and_rejoined_at_a_seam_is_found_at_the_seam(path):
    """Records 67 on chained from another previous-hash: every stretch is sound in itself, only
    the check at the seam between 66 and 67 sees the cut."""
    tamper(path, *rechained_from(path, 67, b"\x07" * 32))
    forge_head_file(path)  # as the rewriter can: else the open names the rewrite at the head
    result = verify(path, 3)
    assert (result.ok, result.first_bad_seq, result.checked) == (False, 67, 66)
    assert "previous-hash does not match" in (result.problem or "") and verify(path, 1) == result


def test_a_damaged_page_in_a_stretch_of_another_process(path):
    damage_page_of(path, 100)  # the leaf page that holds record 100
    one_walk = verify(path, processes=1)
    assert not one_walk.ok and "damaged SQLite file" in (one_walk.problem or "")
    assert verify(path, 3) == one_walk


def test_a_pruned_chain_verifies_in_stretches_from_its_anchor(tmp_path):
    clock = FakeClock()
    with Journal.open(tmp_path / "j.db", create=True, clock=clock) as j:
        fill(j, rounds=200, per_round=2, clock=clock, step_ns=DAY_NS)
        j.export(tmp_path / "a.jsonl")
        assert j.prune().through_seq == 220
        result = j.verify(processes=3, parallel_from=0)
    assert result.ok and result.checked == 400 - 220 + 2  # the export and prune records too


def test_stretches_whose_processes_cannot_run_are_walked_by_the_caller(path, monkeypatch):
    tamper(path, "UPDATE records SET data = '{}' WHERE seq = 100")
    one_walk = verify(path, processes=1)
    monkeypatch.setattr(chain, "STRETCH_WALKER", "cardd.journal.no_such_module")
    assert verify(path, 3) == one_walk
    monkeypatch.setattr(chain.sys, "executable", "/nonexistent/python")
    assert verify(path, 3) == one_walk


def test_a_process_that_finds_another_anchor_walks_nothing_and_says_so(path):
    genesis = bytes(32)
    assert walk_file(path, 67, 132, 0, genesis) is not None
    assert walk_file(path, 67, 132, 10, genesis) is None  # a prune since the caller's snapshot began
    done = subprocess.run([sys.executable, "-m", chain.STRETCH_WALKER, str(path), "67", "132", "10", genesis.hex()],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "null"
    done = subprocess.run([sys.executable, "-m", chain.STRETCH_WALKER, str(path), "67", "132", "0", genesis.hex()],
                          capture_output=True, text=True, check=True)
    found = stretch_from_json(done.stdout)
    assert found is not None and (found.first, found.through, found.walked.checked) == (67, 132, 66)
    assert found.walked.broken is None and found.first_prev is not None and len(found.first_prev) == 32


def test_a_stretch_goes_to_the_caller_and_back_whole_and_anything_else_is_refused():
    stretch = Stretch(67, 132, b"\x01" * 32, WalkResult(3, 69, b"\x02" * 32, ChainBreak(70, "its hash does not match")))
    assert stretch_from_json(stretch_to_json(stretch)) == stretch
    clean = Stretch(1, 66, None, WalkResult(66, 66, b"\x03" * 32, None))
    assert stretch_from_json(stretch_to_json(clean)) == clean
    for garbage in ("", "null", "[]", '{"first": 1}', "{" * 3, '{"first": "x", "through": 2}'):
        assert stretch_from_json(garbage) is None


def read_only(path):
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    conn.execute("BEGIN")
    return conn


def test_the_stretches_of_other_processes_are_taken_from_them_when_they_tie_to_the_callers_chain(path, tmp_path,
                                                                                                  monkeypatch):
    """The caller's own snapshot (a copy whose record 30 was edited under its stored hash) and the
    file the processes read (the original) differ only inside the first stretch: the caller's
    walk finds the edit only when it walks that stretch itself, so a sound result shows the
    process's answer was taken, and a process that cannot run shows the fallback."""
    edited = tmp_path / "edited.db"
    edited.write_bytes(path.read_bytes())
    tamper(edited, "UPDATE records SET data = '{}' WHERE seq = 30")
    conn = read_only(edited)
    try:
        assert chain.walk(conn, 0, GENESIS_HASH).broken == ChainBreak(30, "its hash does not match its content (edited?)")
        assert chain.walk_in_processes(path, conn, 0, GENESIS_HASH, RECORDS, 3).broken is None
        monkeypatch.setattr(chain, "STRETCH_WALKER", "cardd.journal.no_such_module")
        assert chain.walk_in_processes(path, conn, 0, GENESIS_HASH, RECORDS, 3).broken == \
            ChainBreak(30, "its hash does not match its content (edited?)")
    finally:
        conn.close()


def test_a_stretch_that_does_not_tie_to_the_callers_chain_is_walked_by_the_caller(path, tmp_path):
    """The processes read a journal whose record 100 says something else, chained on soundly from
    there: its stretch 67..132 is sound in itself but does not end on the caller's hash of 132, so
    the caller walks it and finds its own chain sound (taken as it was, the next seam would not
    join and the caller's sound chain would be reported broken at 133)."""
    other = tmp_path / "other.db"
    other.write_bytes(path.read_bytes())
    tamper(other, "UPDATE records SET data = '{\"said\":\"else\"}' WHERE seq = 100")
    with closing(sqlite3.connect(other)) as peek:
        (hash_99,) = peek.execute("SELECT hash FROM records WHERE seq = 99").fetchone()
    tamper(other, *rechained_from(other, 100, hash_99))
    conn = read_only(path)
    try:
        result = chain.walk_in_processes(other, conn, 0, GENESIS_HASH, RECORDS, 3)
        assert result == chain.walk(conn, 0, GENESIS_HASH) and result.broken is None
    finally:
        conn.close()
