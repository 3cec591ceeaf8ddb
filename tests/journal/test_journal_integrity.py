"""Every kind of damage is one JournalCorrupt naming the file and the first bad seq, at open
(for damage the quick check reaches) and from verify() (anywhere in the chain)."""
from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from cardd.journal import Journal, JournalCorrupt
from tests.journal.journal_helpers import (DAY_NS, FakeClock, damage_page_of, deleted_and_rechained, fill,
                                           forge_head_file, journal_of_cards, tamper)

RECORDS = 200  # 20 rounds of 10


@pytest.fixture
def path(tmp_path):
    return journal_of_cards(tmp_path / "j.db", RECORDS)


def open_error(path, **kw) -> JournalCorrupt:
    with pytest.raises(JournalCorrupt) as caught:
        Journal.open(path, **kw).close()
    error = caught.value
    assert str(path) in str(error) and "\n" not in str(error)
    return error


SWAP = [  # records 150 and 151 change places (each keeps its seq)
    "CREATE TEMP TABLE a AS SELECT * FROM records WHERE seq = 150",
    "CREATE TEMP TABLE b AS SELECT * FROM records WHERE seq = 151",
    "DELETE FROM records WHERE seq IN (150, 151)",
    "INSERT INTO records SELECT 150, ts, kind, source, reason, severity, who, round, data, prev, hash FROM b",
    "INSERT INTO records SELECT 151, ts, kind, source, reason, severity, who, round, data, prev, hash FROM a",
]


@pytest.mark.parametrize("sql, seq, problem", [
    (["UPDATE records SET data = '{\"index\":9,\"round\":99}' WHERE seq = 150"], 150, "does not match its content"),
    (["UPDATE records SET round = '77' WHERE seq = 150"], 150, "does not match its content"),
    (["DELETE FROM records WHERE seq = 150"], 150, "150 missing"),
    (SWAP, 150, "previous-hash does not match"),
    (["DELETE FROM records WHERE seq = 200"], 200, "stored head is seq 200 but the last record is seq 199"),
    (["UPDATE snapshots SET data = '{\"round\":1}' WHERE seq = 200"], 200, "snapshot after this seq is damaged"),
    (["UPDATE anchor SET seq = 10, hash = (SELECT hash FROM records WHERE seq = 10)"], 11,
     "removed without a prune record"),
])
def test_damage_near_the_head_is_refused_at_open(path, sql, seq, problem):
    tamper(path, *sql)
    error = open_error(path)
    assert error.seq == seq and problem in error.problem
    assert f"at seq {seq}" in str(error)


@pytest.mark.parametrize("sql, seq, problem", [
    (["UPDATE records SET data = '{}' WHERE seq = 5"], 5, "does not match its content"),
    (["UPDATE records SET ts = ts + 1 WHERE seq = 5"], 5, "does not match its content"),
    ([s.replace("150", "5").replace("151", "6") for s in SWAP], 5, "previous-hash does not match"),
])
def test_damage_beyond_the_quick_check_is_found_by_verify(path, sql, seq, problem):
    tamper(path, *sql)
    with Journal.open(path, quick_check_records=10) as j:  # the last 10 records are fine
        result = j.verify()
    assert not result.ok and result.first_bad_seq == seq and problem in (result.problem or "")
    with pytest.raises(JournalCorrupt, match=f"is corrupt at seq {seq}: "):
        result.raise_if_bad(path)
    assert open_error(path).seq == seq  # the default check on open reaches back 1,000 records


def test_a_deletion_anywhere_is_found_at_open_by_the_count(path):
    tamper(path, "DELETE FROM records WHERE seq = 3")
    error = open_error(path, quick_check_records=10)
    assert error.seq == 3 and "3 missing" in error.problem


@pytest.mark.parametrize("gone", [1, 2, 100, 190, 199])  # the first, far from the head, in the last 10, next to it
@pytest.mark.parametrize("quick_check_records", [1000, 10])
def test_a_deleted_record_with_the_chain_rehashed_after_it_is_named_at_open(path, gone, quick_check_records):
    """Every hash after it recomputed, the head and its head file rewritten to match, as someone
    holding the files can: each link is sound, only the run of seqs shows the gap."""
    tamper(path, *deleted_and_rechained(path, gone))
    forge_head_file(path)
    for readonly in (True, False):
        error = open_error(path, readonly=readonly, quick_check_records=quick_check_records)
        assert (error.seq, error.problem) == (gone, f"record {gone} missing (deleted?)")


def test_records_deleted_with_the_chain_rehashed_are_named_as_a_range(path):
    tamper(path, *deleted_and_rechained(path, 101))
    tamper(path, *deleted_and_rechained(path, 100))
    forge_head_file(path)
    error = open_error(path)
    assert (error.seq, error.problem) == (100, "records 100..101 missing (deleted?)")


@pytest.mark.parametrize("gone", [1, 66, 67, 100, 133, 150])  # three stretches: 1..66, 67..132, 133..200
@pytest.mark.parametrize("processes", [1, 3])
def test_a_deleted_record_with_the_chain_rehashed_is_named_by_verify_in_stretches(path, gone, processes):
    with Journal.open(path, readonly=True) as journal:
        tamper(path, *deleted_and_rechained(path, gone))
        forge_head_file(path)
        result = journal.verify(processes=processes, parallel_from=0)
    assert (result.ok, result.first_bad_seq, result.problem) == (False, gone, f"record {gone} missing (deleted?)")


def test_a_deleted_record_right_after_the_anchor_with_the_chain_rehashed_is_named(tmp_path):
    clock = FakeClock()
    path = tmp_path / "j.db"
    with Journal.open(path, create=True, clock=clock) as journal:
        fill(journal, rounds=20, per_round=5, clock=clock, step_ns=10 * DAY_NS)
        journal.export(tmp_path / "a.jsonl")
        anchor = journal.prune().through_seq
    tamper(path, *deleted_and_rechained(path, anchor + 1))
    forge_head_file(path)
    error = open_error(path)
    assert (error.seq, error.problem) == (anchor + 1, f"record {anchor + 1} missing (deleted?)")


def test_the_last_record_deleted_with_the_head_rewritten_is_named_by_the_head_file(path):
    """No record after it to show the gap, its snapshot deleted too: only what the head file says
    was committed does."""
    tamper(path, *deleted_and_rechained(path, 200), "DELETE FROM snapshots WHERE seq = 200")
    error = open_error(path)
    assert error.seq == 200 and error.problem.startswith("record 200 was committed but the journal ends at seq 199")


def test_a_file_that_is_not_sqlite(tmp_path):
    path = tmp_path / "j.db"
    path.write_text("this is a shopping list, not a journal\n" * 20)
    error = open_error(path, create=True)  # create never starts a new chain over a damaged file
    assert error.seq is None and "not an SQLite database" in error.problem
    assert "first bad seq unknown" in str(error)
    assert path.read_text().startswith("this is a shopping list")


def test_an_sqlite_file_that_is_not_a_journal(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    assert "not a cardd journal" in open_error(path).problem


def test_a_truncated_main_file(path):
    os.truncate(path, os.path.getsize(path) // 2)
    error = open_error(path)
    assert "malformed" in error.problem and error.seq is None  # SQLite reads nothing at all: no seq to name


@pytest.mark.parametrize("appended", [5000, 2 * 4096, 1])  # random bytes; two whole pages of them; one
def test_bytes_appended_to_the_file_are_refused_at_open_and_left_there(path, appended):
    """SQLite reads the file only up to the size its header states: what follows passed every check."""
    size = path.stat().st_size
    with open(path, "ab") as file:
        file.write(os.urandom(appended))
    for readonly in (True, False):
        error = open_error(path, readonly=readonly)
        assert error.seq is None and error.problem == (
            f"{appended} bytes follow the last of its {size // 4096} pages (byte {size} on, of {size + appended}): "
            "appended to the file, or its WAL lost pages it had")
        assert path.stat().st_size == size + appended  # a refused open cuts nothing off


def test_bytes_appended_under_an_open_journal_are_found_by_verify(path):
    with Journal.open(path) as journal:
        fill(journal, rounds=1)
        journal.checkpoint()  # the WAL copied into the file: what is appended now follows its pages
        assert journal.verify().ok
        size = path.stat().st_size
        with open(path, "ab") as file:
            file.write(os.urandom(5000))
        result = journal.verify()
        assert (result.ok, result.first_bad_seq) == (False, None)
        assert (result.problem or "").startswith(f"5000 bytes follow the last of its {size // 4096} pages")


def test_a_damaged_page_names_the_first_record_that_cannot_be_read(path):
    damage_page_of(path, 100)  # the leaf page that holds record 100
    with Journal.open(path, quick_check_records=10) as j:
        result = j.verify()
    assert not result.ok and result.first_bad_seq is not None and 80 <= result.first_bad_seq <= 100
    assert "damaged SQLite file" in (result.problem or "")
    error = open_error(path)
    assert error.seq == result.first_bad_seq and "damaged" in error.problem


def test_removed_guards_are_refused(path):
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER records_no_update")
    conn.close()
    error = open_error(path)
    assert "records_no_update" in error.problem and error.seq is None


def test_a_guard_rewritten_to_guard_nothing_is_refused_like_a_removed_one(path):
    """The same name, no guard: the check by names alone let it pass."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("DROP TRIGGER records_no_update")
        conn.execute("CREATE TRIGGER records_no_update BEFORE UPDATE ON records BEGIN SELECT 1; END")
    error = open_error(path)
    assert "records_no_update" in error.problem and "rewritten" in error.problem and error.seq is None


def test_a_trigger_cardd_does_not_make_is_refused(path):
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("CREATE TRIGGER records_quietly AFTER INSERT ON records BEGIN SELECT 1; END")
    error = open_error(path)
    assert "records_quietly" in error.problem and error.seq is None


def test_a_copy_in_a_directory_that_cannot_be_written_is_read_as_it_stands(path, mocker):
    """A copy on a read-only disk (an archive, a mounted backup): SQLite could not make the -shm a WAL
    reader writes beside the file, so cardctl verify-journal --file failed on a journal that was fine.
    The directory's answer is the boundary mocked here (root writes anywhere): what is checked is that
    nothing is written beside the file and that damage is still found."""
    for side in ("-wal", "-shm", "-lock", "-head"):  # the file alone, as copied
        path.with_name(path.name + side).unlink(missing_ok=True)
    writable = os.access
    mocker.patch("cardd.journal.connection.os.access",
                 side_effect=lambda p, mode: False if os.fspath(p) == os.fspath(path.parent) else writable(p, mode))
    with Journal.open(path, readonly=True) as journal:
        result = journal.verify()
    assert result.ok and result.checked == RECORDS
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no -shm, no -wal made beside it
    tamper(path, "UPDATE records SET reason = 'TAMPERED' WHERE seq = 190")
    for side in ("-wal", "-shm"):
        path.with_name(path.name + side).unlink(missing_ok=True)
    assert open_error(path, readonly=True).seq == 190


def test_a_wal_removed_while_a_copy_is_opened_read_only_is_no_wal(path, mocker):
    """A read-only open looked at the -wal twice (there? its size?): a daemon stopping in between
    removes it, and a raw FileNotFoundError reached cardctl verify-journal --file. Here the WAL goes
    the moment it is seen (the boundaries: the directory's answer, root writes anywhere; and the
    moment of the look)."""
    for side in ("-wal", "-shm", "-lock"):
        path.with_name(path.name + side).unlink(missing_ok=True)
    wal = path.with_name(path.name + "-wal")
    wal.touch()
    writable, exists = os.access, Path.exists

    def seen_then_removed(self: Path, *args: object, **kwargs: object) -> bool:
        there = exists(self)
        if self == wal:
            wal.unlink(missing_ok=True)  # the daemon stops just after the look
        return there

    mocker.patch("cardd.journal.connection.os.access",
                 side_effect=lambda p, mode: False if os.fspath(p) == os.fspath(path.parent) else writable(p, mode))
    mocker.patch.object(Path, "exists", autospec=True, side_effect=seen_then_removed)
    with Journal.open(path, readonly=True) as journal:
        result = journal.verify()
    assert result.ok and result.checked == RECORDS
