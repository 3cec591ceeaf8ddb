"""The head file (cardd/journal/head_file.py): what the journal committed, known outside SQLite.

A WAL damaged in its middle is read by SQLite only up to the damage: the commits after it are
gone and what is left is a shorter chain, sound in itself. The journal refuses it at open and in
verify(), naming the records lost, and leaves the file as it found it (its WAL too: the records
in the frames after the damage may still be recovered from it). A head file behind the journal
(what a power cut can leave of it) is no damage; one that is missing is made from the head."""
from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from contextlib import closing
from pathlib import Path

import pytest

from cardd.journal import Entry, Journal, JournalCorrupt, JournalWriteError
from cardd.journal.head_file import CommittedHead, head_file_path, read_head_file, write_new
from tests.cli.cli_rig import cardctl
from tests.journal.journal_helpers import fill, journal_of_cards
from tests.support.powercut import flip_bytes, stored_head

COMMITS = 63  # one card a commit, each with a snapshot: a WAL of some 300 frames, never checkpointed


def journal_as_a_kill_leaves_it(tmp_path: Path) -> Path:
    """A journal whose writer was killed while it dealt: its files as the disk holds them (copied
    while the writer still had them open, so nothing was checkpointed or removed), the -shm
    aside (the next open rebuilds it from the WAL)."""
    live, left = tmp_path / "live" / "journal.sqlite3", tmp_path / "left" / "journal.sqlite3"
    live.parent.mkdir()
    left.parent.mkdir()
    with Journal.open(live, create=True) as journal:
        for n in range(COMMITS):
            journal.append([Entry("event", "CARD_ASSIGNED", "shoe", data={"round": n, "card": "4H"})],
                           snapshot={"round": n})
        for suffix in ("", "-wal", "-head"):
            shutil.copyfile(f"{live}{suffix}", f"{left}{suffix}")
    return left


def test_a_wal_damaged_in_its_middle_is_refused_naming_the_records_it_lost(tmp_path):
    path = journal_as_a_kill_leaves_it(tmp_path)
    wal = Path(f"{path}-wal")
    assert stored_head(path) == COMMITS
    flip_bytes(wal, wal.stat().st_size // 2)  # 8 bytes in the middle of the WAL
    first = stored_head(path) + 1  # SQLite reads the WAL up to the damage and stops there
    assert 1 < first <= COMMITS
    damaged = wal.read_bytes()
    for readonly in (False, True):
        with pytest.raises(JournalCorrupt) as caught:
            Journal.open(path, readonly=readonly).close()
        error = caught.value
        assert error.seq == first and "\n" not in str(error)
        assert error.problem.startswith(f"records {first}..{COMMITS} were committed but the journal ends at seq "
                                        f"{first - 1} (its head file journal.sqlite3-head holds seq {COMMITS}): "
                                        "its WAL was damaged"), error.problem
        assert wal.read_bytes() == damaged  # left as found: the lost records' frames are still in it
    run = cardctl(None, "verify-journal", "--file", str(path))
    assert run.code == 5 and f"records {first}..{COMMITS} were committed" in run.one_line_error()
    assert wal.read_bytes() == damaged


def test_the_same_records_lost_with_the_wal_removed(tmp_path):
    path = journal_as_a_kill_leaves_it(tmp_path)
    Path(f"{path}-wal").unlink()  # every commit since the last checkpoint: here, all of them
    with pytest.raises(JournalCorrupt) as caught:
        Journal.open(path).close()
    assert caught.value.seq == 1 and caught.value.problem.startswith(f"records 1..{COMMITS} were committed")


def test_verify_checks_the_head_file_as_the_open_does(tmp_path):
    """The file replaced by an older copy of itself under a reader that had opened it (verify
    reads the file anew through a connection of its own)."""
    path = journal_of_cards(tmp_path / "j.db", 30)
    older = tmp_path / "older.db"
    shutil.copyfile(path, older)
    with Journal.open(path) as journal:
        fill(journal, rounds=1)
    with Journal.open(path, readonly=True) as journal:
        assert journal.verify().ok
        os.rename(older, path)
        result = journal.verify()
    assert (result.ok, result.first_bad_seq) == (False, 31)
    assert (result.problem or "").startswith("records 31..40 were committed but the journal ends at seq 30 "
                                             "(its head file j.db-head holds seq 40): ")


def test_a_chain_replaced_by_another_as_long_is_refused_at_the_record_committed(tmp_path):
    path = journal_of_cards(tmp_path / "j.db", 50)
    other = journal_of_cards(tmp_path / "other.db", 50)  # the same entries, stamped at other times
    for suffix in ("", "-wal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.rename(other, path)  # its head file stays other.db's: this one's remains beside path
    with pytest.raises(JournalCorrupt) as caught:
        Journal.open(path).close()
    assert caught.value.seq == 50
    assert caught.value.problem.startswith("record 50 is not the record committed as seq 50 (its head file j.db-head "
                                           "holds seq 50 with another hash)")


def test_a_head_file_behind_the_journal_is_no_damage_and_is_brought_to_the_head(tmp_path):
    """What a power cut can leave of it: it is fsynced each second, not at every commit."""
    path = journal_of_cards(tmp_path / "j.db", 100)
    with closing(sqlite3.connect(path)) as conn:
        (hash_40,) = conn.execute("SELECT hash FROM records WHERE seq = 40").fetchone()
        (hash_100,) = conn.execute("SELECT hash FROM records WHERE seq = 100").fetchone()
    write_new(path, CommittedHead(40, hash_40), like=path)
    with Journal.open(path, readonly=True) as journal:
        assert journal.verify().ok
    assert read_head_file(path) == CommittedHead(40, hash_40)  # a reader writes nothing
    with Journal.open(path) as journal:
        assert journal.last_seq == 100
        assert read_head_file(path) == CommittedHead(100, hash_100)
        fill(journal, rounds=1)
        assert read_head_file(path) == CommittedHead(journal.last_seq, journal.head_hash)


def test_a_head_file_behind_the_journal_with_another_hash_is_refused(tmp_path):
    path = journal_of_cards(tmp_path / "j.db", 100)
    write_new(path, CommittedHead(40, bytes(range(32))), like=path)
    with pytest.raises(JournalCorrupt) as caught:
        Journal.open(path).close()
    assert caught.value.seq == 40 and "record 40 is not the record committed as seq 40" in caught.value.problem


def test_a_missing_head_file_is_made_from_the_head(tmp_path):
    """A journal of a release before the head file, or a copy made without it."""
    path = journal_of_cards(tmp_path / "j.db", 30)
    head_file_path(path).unlink()
    with Journal.open(path, readonly=True) as journal:
        assert journal.verify().ok
    assert not head_file_path(path).exists()
    with Journal.open(path) as journal:
        assert read_head_file(path) == CommittedHead(30, journal.head_hash)
    assert head_file_path(path).stat().st_mode & 0o777 == path.stat().st_mode & 0o777


def test_a_slot_torn_is_read_from_the_other_and_both_damaged_is_refused(tmp_path):
    path = journal_of_cards(tmp_path / "j.db", 30)
    with Journal.open(path) as journal:
        fill(journal, rounds=2)  # two commits: each slot holds one of them
        last, last_hash = journal.last_seq, journal.head_hash
    head_file = head_file_path(path)
    text = head_file.read_bytes()
    newer = 0 if f"seq={last:020d}".encode() in text[:4096] else 4096
    with open(head_file, "r+b") as file:  # the slot being written when the power went
        file.seek(newer + 30)
        file.write(b"\x00" * 40)
    assert read_head_file(path) == CommittedHead(last - 10, read_hash(path, last - 10))
    with Journal.open(path) as journal:
        assert journal.last_seq == last
    assert read_head_file(path) == CommittedHead(last, last_hash)
    head_file.write_bytes(b"\x00" * len(text))
    with pytest.raises(JournalCorrupt) as caught:
        Journal.open(path).close()
    assert caught.value.seq is None
    assert caught.value.problem == (f"its head file {head_file} is damaged (neither of its slots reads back whole): "
                                    "what was committed cannot be checked")


def read_hash(path: Path, seq: int) -> bytes:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return bytes(conn.execute("SELECT hash FROM records WHERE seq = ?", (seq,)).fetchone()[0])


def test_a_new_journal_over_a_head_file_left_behind_starts_its_own(tmp_path):
    """The journal moved aside, its head file not: the new journal's is its own."""
    path = journal_of_cards(tmp_path / "j.db", 30)
    os.rename(path, tmp_path / "aside.db")
    with Journal.open(path, create=True) as journal:
        assert journal.last_seq == 0
    with Journal.open(path) as journal:
        assert journal.last_seq == 0


def test_verify_while_the_writer_commits_and_checkpoints_finds_nothing_lost(tmp_path):
    """The head file is written after each commit, so verify reads it before its read snapshot
    begins: read after, it can hold a commit the snapshot does not."""
    path = journal_of_cards(tmp_path / "j.db", 10)
    stop = threading.Event()
    results = []
    with Journal.open(path) as journal:
        def write() -> None:
            while not stop.is_set():
                journal.append([Entry("event", "CARD_ASSIGNED", "shoe", data={"n": journal.last_seq})])
                journal.checkpoint()
        writer = threading.Thread(target=write)
        writer.start()
        try:
            while journal.last_seq < 400:
                results.append(journal.verify(processes=1))
        finally:
            stop.set()
            writer.join()
    assert len(results) > 1 and [r for r in results if not r.ok] == []


def test_the_head_file_survives_a_kill_of_its_writer(tmp_path):
    """A real SIGKILL: the head file the killed writer left says what it committed."""
    path = tmp_path / "j.db"
    script = ("import os, sys; sys.path.insert(0, sys.argv[2]); from cardd.journal import Journal, Entry\n"
              "j = Journal.open(sys.argv[1], create=True)\n"
              "for n in range(25): j.append([Entry('event', 'CARD_ASSIGNED', 'shoe', data={'n': n})])\n"
              "os.kill(os.getpid(), 9)\n")
    done = subprocess.run([sys.executable, "-c", script, str(path), str(Path(__file__).resolve().parents[2])],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == -9, done.stderr
    left = read_head_file(path)
    assert left is not None and left.seq == 25
    Path(f"{path}-wal").unlink()
    with pytest.raises(JournalCorrupt, match="records 1..25 were committed"):
        Journal.open(path).close()


def test_no_room_to_make_a_missing_head_file_is_a_full_disk_not_damage(tmp_path, mocker):
    """A journal of a release before the head file, opened on a disk with room for the -shm and not
    for it (the boundary mocked: the file system's answer to making it)."""
    path = journal_of_cards(tmp_path / "j.db", 30)
    head_file_path(path).unlink()
    real_open = os.open

    def no_room(file: str, flags: int, *args: int) -> int:
        if os.fspath(file).endswith("-head.new"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_open(file, flags, *args)

    mocker.patch("cardd.journal.head_file.os.open", side_effect=no_room)
    with pytest.raises(JournalWriteError) as caught:
        Journal.open(path).close()
    assert str(caught.value).startswith(f"journal {path}: the disk holding it is full (")
    assert str(caught.value).endswith("No space left on device): free space there; the journal is not damaged")
    mocker.stopall()
    assert sorted(p.name for p in tmp_path.iterdir() if "head" in p.name) == []
    with Journal.open(path) as journal:
        assert journal.last_seq == 30 and read_head_file(path) == CommittedHead(30, journal.head_hash)
