"""Writing and restoring: group commit, the snapshot in the same transaction, the guards."""
from __future__ import annotations

import enum
import sqlite3
import threading
from contextlib import closing
from types import MappingProxyType

import pytest

from cardd.journal import (Entry, Journal, JournalBusy, JournalConfigError, JournalEntryError, JournalError,
                           JournalNotFound, JournalWriteError)
from cardd.journal import Encoded
from cardd.journal.records import body_bytes, canonical_json, record_hash, round_of
from cardd.journal.schema import LEGACY_APPEND_IN_ORDER
from devices.events import Event, Reason, Severity
from tests.journal.journal_helpers import T0, FakeClock, card, fill


@pytest.fixture
def journal(tmp_path):
    j = Journal.open(tmp_path / "j.db", create=True, clock=FakeClock())
    yield j
    j.close()


def test_group_commit_returns_consecutive_seqs_and_stamps_the_append_time(journal):
    assert journal.append([card(1, i) for i in range(3)]) == [1, 2, 3]
    assert journal.append([card(1, 3)]) == [4]
    records = journal.entries_after(0)
    assert [r.seq for r in records] == [1, 2, 3, 4]
    assert {r.ts_ns for r in records} == {T0}
    assert records[0].data == {"round": 1, "index": 0} and records[0].round == "1"
    assert records[1].prev == records[0].hash and journal.last_seq == 4


def test_an_entry_may_carry_its_own_time_and_data_is_stored_as_canonical_json(journal):
    journal.append([Entry("input", "ACTION", "console", who="dealer:ann", data={"b": 1, "a": "é"}, ts_ns=5)])
    (record,) = journal.entries_after(0)
    assert record.ts_ns == 5 and record.data_json == '{"a":"é","b":1}'
    assert record.time_iso == "1970-01-01T00:00:00.000000005Z"


def test_the_snapshot_is_valid_after_the_last_entry_of_its_append_and_only_the_latest_few_are_kept(tmp_path, journal):
    assert journal.latest_snapshot() is None
    for r in range(1, 6):
        journal.append([card(r, 0), card(r, 1)], snapshot={"round": r})
    assert journal.latest_snapshot() == (10, {"round": 5})
    assert [r.seq for r in journal.entries_after(10)] == []
    journal.append([card(6, 0)])
    assert [r.seq for r in journal.entries_after(10)] == [11]
    kept = sqlite3.connect(tmp_path / "j.db").execute("SELECT seq FROM snapshots ORDER BY seq").fetchall()
    assert kept == [(6,), (8,), (10,)]


def test_a_snapshot_alone_is_valid_after_the_current_head(journal):
    journal.append([card(1, 0)])
    assert journal.append([], snapshot={"idle": True}) == []
    assert journal.latest_snapshot() == (1, {"idle": True})
    assert journal.append([]) == []


def test_a_restart_restores_from_the_snapshot_and_the_records_after_it(tmp_path):
    path = tmp_path / "j.db"
    with Journal.open(path, create=True) as j:
        fill(j, rounds=4, per_round=5)
        j.append([card(5, 0), card(5, 1)])
    with Journal.open(path) as j:
        assert j.last_seq == 22
        seq, state = j.latest_snapshot() or (None, None)
        assert seq == 20 and state == {"round": 4, "seq": [15]}
        assert [(r.seq, r.data["index"]) for r in j.entries_after(seq)] == [(21, 0), (22, 1)]
        assert j.append([card(5, 2)]) == [23]


def test_entry_from_event_keeps_reason_source_severity_and_message(journal):
    event = Event(Reason.FACE_UP_CARD, "shoe", "card 7 came out face up", Severity.ALARM, {"round": 3, "card": "7H"})
    journal.append([Entry.from_event(event, who="system")])
    (r,) = journal.entries_after(0)
    assert (r.kind, r.reason, r.source, r.severity, r.who, r.round) == ("event", "FACE_UP_CARD", "shoe", "alarm",
                                                                         "system", "3")
    assert r.data == {"round": 3, "card": "7H", "message": "card 7 came out face up"}


@pytest.mark.parametrize("entry, complaint", [
    (Entry("Event"), "kind 'Event'"),
    (Entry("export"), "written only by the journal"),
    (Entry("prune"), "written only by the journal"),
    (Entry("event", severity="fatal"), "severity 'fatal'"),
    (Entry("event", reason="A\x1fB"), "entry reason"),
    (Entry("event", who="x\n"), "entry who"),
    (Entry("event", source="s" * 300), "entry source"),
    (Entry("event", data={"x": object()}), "not JSON-serialisable"),
    (Entry("event", data={"x": float("nan")}), "not JSON-serialisable"),
    (Entry("event", ts_ns=-1), "ts_ns -1"),
])
def test_a_bad_entry_is_refused_with_what_is_wrong_and_nothing_is_written(journal, entry, complaint):
    with pytest.raises(JournalEntryError, match=complaint):
        journal.append([card(1, 0), entry])
    assert journal.last_seq == 0 and journal.entries_after(0) == []


def test_a_header_that_passed_once_is_still_checked_for_what_it_may_not_do(journal):
    """Entry.check remembers headers that passed: a reserved kind the journal itself wrote stays
    refused to everyone else, and data and time are checked every time."""
    Entry("export", source="journal").check(journal_internal=True)
    Entry("event", source="table").check()
    for entry, complaint in [(Entry("export", source="journal"), "written only by the journal"),
                             (Entry("event", source="table", data=[1]), "must be a JSON object"),  # type: ignore[arg-type]  # what a caller's bug passes
                             (Entry("event", source="table", ts_ns=True), "ts_ns True")]:
        with pytest.raises(JournalEntryError, match=complaint):
            journal.append([entry])
    assert journal.last_seq == 0


def test_a_snapshot_that_is_not_json_is_refused_and_nothing_is_written(journal):
    with pytest.raises(JournalEntryError, match="the snapshot is not JSON-serialisable"):
        journal.append([card(1, 0)], snapshot={"x": {1, 2}})
    assert journal.last_seq == 0


def test_open_creates_only_where_no_file_is_and_refuses_a_short_horizon(tmp_path):
    with pytest.raises(JournalNotFound, match="does not exist"):
        Journal.open(tmp_path / "absent.db")
    with pytest.raises(JournalConfigError, match="89 days is under the legal minimum of 90"):
        Journal.open(tmp_path / "j.db", create=True, retention_days=89)
    assert not (tmp_path / "j.db").exists()
    with Journal.open(tmp_path / "j.db", create=True) as j:
        j.append([card(1, 0)])
    with Journal.open(tmp_path / "j.db", create=True) as j:  # an existing journal is opened, never replaced
        assert j.last_seq == 1
    assert not list(tmp_path.glob("*.creating*"))


def test_one_writer_at_a_time_and_readers_may_not_write(tmp_path, journal):
    with pytest.raises(JournalBusy, match="open for writing elsewhere"):
        Journal.open(tmp_path / "j.db")
    journal.append([card(1, 0)])
    with Journal.open(tmp_path / "j.db", readonly=True) as reader:
        assert [r.seq for r in reader.query()] == [1]
        with pytest.raises(JournalError, match="open read-only"):
            reader.append([card(1, 1)])


@pytest.mark.parametrize("statement, guard", [
    ("UPDATE records SET data = '{}' WHERE seq = 2", "append-only"),
    ("DELETE FROM records WHERE seq = 3", "deleted only by prune"),
    ("INSERT INTO records SELECT seq + 10, ts, kind, source, reason, severity, who, round, data, prev, hash "
     "FROM records WHERE seq = 3", "the next seq and the previous record's hash"),
    ("INSERT INTO records SELECT seq + 1, ts, kind, source, reason, severity, who, round, data, prev, hash "
     "FROM records WHERE seq = 3", "the next seq and the previous record's hash"),
    ("INSERT INTO records SELECT seq + 1, ts, kind || char(31), source, reason, severity, who, round, data, hash, "
     "hash FROM records WHERE seq = 3", "may not contain the separator"),
    ("UPDATE head SET seq = 1", "only moves forward"),
    ("DELETE FROM head", "never deleted"),
    ("UPDATE anchor SET seq = 2, hash = (SELECT hash FROM records WHERE seq = 2)", "exported record older than"),
    ("DELETE FROM anchor", "never deleted"),
])
def test_the_sql_guards_refuse_edits_behind_the_journals_back(tmp_path, journal, statement, guard):
    fill(journal, rounds=1, per_round=3)
    conn = sqlite3.connect(tmp_path / "j.db")
    try:
        with pytest.raises(sqlite3.IntegrityError, match=guard):
            conn.execute(statement)
    finally:
        conn.close()
    assert journal.verify().ok


def test_an_append_of_any_size_writes_the_records_one_at_a_time_would(tmp_path, journal):
    """Long appends go to SQLite in statements of many rows (journal._insert_records): the same
    records, hashes and seqs as appends of one record each."""
    sizes = [1, 2, 7, 8, 9, 63, 64, 65, 130]
    batches, index = [], 0
    for size in sizes:
        batches.append([card(index // 10, i, reason_text=f"r{i}") for i in range(index, index + size)])
        index += size
    with Journal.open(tmp_path / "single.db", create=True, clock=FakeClock()) as single:
        for batch in batches:
            assert journal.append(batch) == [single.append([entry])[0] for entry in batch]
        assert journal.entries_after(0) == single.entries_after(0)
    assert journal.last_seq == sum(sizes) and journal.verify().ok


def test_each_record_is_hashed_over_the_documented_body_whatever_its_round(journal):
    """The writer's unrolled loop (records.chain_rows) against the reference: round_of, body_bytes
    and record_hash, over every kind of round value and texts that are str subclasses."""
    class Box(enum.IntEnum):
        ONE = 1

    class Text(str):
        def __str__(self) -> str:
            return "not what is stored"

    rounds: list[object] = [None, "", "7", 7, -3, True, False, 7.5, Box.ONE, Text("9"), [1], {"n": 1}, 10**30]
    entries = [Entry("event", Reason.CARD_DRAWN_IN_ERROR, Text("shoe"), Severity.WARNING, who="dealer:é",
                     data={"round": r, "i": i}) for i, r in enumerate(rounds)]
    entries += [Entry("input", data=MappingProxyType({"round": 4})), Entry("input", ts_ns=0)]
    journal.append(entries[:5])
    journal.append(entries[5:])
    prev = bytes(32)
    for entry, record in zip(entries, journal.entries_after(0), strict=True):
        assert record.round == round_of(entry.data)
        body = body_bytes(record.seq, record.ts_ns, entry.kind, entry.source, entry.reason, entry.severity,
                          entry.who, round_of(entry.data), canonical_json(dict(entry.data), "data"))
        assert (record.prev, record.hash) == (prev, record_hash(prev, body))
        prev = record.hash
    assert journal.verify().ok


@pytest.mark.parametrize("size", [3, 20, 130])
def test_a_record_the_sql_guards_refuse_inside_a_long_append_fails_all_of_it(journal, size):
    """A row SQLite's triggers refuse, in the middle of a statement of many rows, fails the whole
    append: nothing of it is stored, and the journal goes on (Entry.check is bypassed here)."""
    fill(journal, rounds=1, per_round=3)
    entries = [card(2, i) for i in range(size)]
    entries[size // 2] = entries[size // 2]._replace(source="sh\x1foe")
    encoded = Encoded(entries, [canonical_json(dict(e.data), "data") for e in entries], None)
    with pytest.raises(JournalWriteError, match=f"append of {size} record.s. failed, nothing written: "
                                                "a journal record field may not contain the separator"):
        journal.append_encoded(encoded)
    head = journal._head
    journal._head = (head[0], bytes(32))  # a writer that lost track of the head
    with pytest.raises(JournalWriteError, match="the next seq and the previous record's hash"):
        journal.append([card(2, i) for i in range(size)])
    journal._head = head
    assert journal.last_seq == 3 and len(journal.entries_after(0)) == 3
    assert journal.append([card(2, i) for i in range(size)])[-1] == 3 + size and journal.verify().ok


def _append_guard_in_form(path, form: str) -> None:
    """A new journal at ``path`` whose records_append_in_order is in ``form``: "current" (what
    Journal.open creates) or "legacy" (as older journals hold it)."""
    Journal.open(path, create=True).close()
    if form == "legacy":
        with closing(sqlite3.connect(path, isolation_level=None)) as conn:
            conn.execute("DROP TRIGGER records_append_in_order")
            conn.execute(LEGACY_APPEND_IN_ORDER)


@pytest.mark.parametrize("form", ["current", "legacy"])
def test_the_append_guard_wants_the_next_seq_and_the_previous_hash_in_both_its_forms(tmp_path, form):
    path = tmp_path / "j.db"
    _append_guard_in_form(path, form)
    conn = sqlite3.connect(path, isolation_level=None)
    insert = "INSERT INTO records VALUES (?, 0, 'event', '', '', 'info', '', NULL, '{}', ?, ?)"
    h1, h2, anchor = b"1" * 32, b"2" * 32, b"a" * 32
    try:
        first_wrong: list[tuple[int, object]] = [(2, bytes(32)), (1, h1), (0, bytes(32)), (1, None)]
        for seq, prev in first_wrong:  # the first record: seq 1, zero prev
            with pytest.raises(sqlite3.IntegrityError, match="the next seq and the previous record's hash"):
                conn.execute(insert, (seq, prev, h1))
        conn.execute(insert, (1, bytes(32), h1))
        second_wrong: list[tuple[int, object]] = [(1, bytes(32)), (3, h1), (2, bytes(32)), (2, h2), (2, h1.hex())]
        for seq, prev in second_wrong:
            with pytest.raises(sqlite3.IntegrityError, match="the next seq and the previous record's hash"):
                conn.execute(insert, (seq, prev, h2))
        conn.execute(insert, (2, h1, h2))
        # no record left after a prune: the anchor is the record before
        conn.execute("DROP TRIGGER records_delete_only_pruned")
        conn.execute("DROP TRIGGER anchor_forward")
        conn.execute("DELETE FROM records")
        conn.execute("UPDATE anchor SET seq = 5, hash = ?", (anchor,))
        after_prune_wrong: list[tuple[int, object]] = [(3, h2), (6, h2), (5, anchor), (7, anchor)]
        for seq, prev in after_prune_wrong:
            with pytest.raises(sqlite3.IntegrityError, match="the next seq and the previous record's hash"):
                conn.execute(insert, (seq, prev, h1))
        conn.execute(insert, (6, anchor, h1))
    finally:
        conn.close()


@pytest.mark.parametrize("form", ["current", "legacy"])
def test_a_journal_opens_and_appends_whichever_form_of_the_append_guard_it_holds(tmp_path, form):
    path = tmp_path / "j.db"
    _append_guard_in_form(path, form)
    with Journal.open(path) as journal:
        fill(journal, rounds=2, per_round=9)
        assert journal.verify().ok and journal.last_seq == 18
    with closing(sqlite3.connect(path)) as conn:
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'records_append_in_order'").fetchone()
    assert ("max(seq)" in sql) == (form == "legacy")  # a journal keeps the form it was made with


def test_appends_from_several_threads_interleave_whole_and_the_chain_holds(journal):
    def writer(n: int) -> None:
        for i in range(50):
            journal.append([card(n, i), card(n, i + 1000)])

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    records = journal.entries_after(0)
    assert len(records) == 400 and journal.verify().ok
    pairs = list(zip(records[::2], records[1::2]))  # each append's two records stay together
    assert all(a.round == b.round and b.data["index"] == a.data["index"] + 1000 for a, b in pairs)


def test_a_full_disk_fails_the_whole_append_and_the_journal_goes_on_after(journal):
    """SQLite's page limit stands in for a full disk: the same error path ("database or disk is full")."""
    fill(journal, rounds=2, per_round=3)
    pages = journal._conn.execute("PRAGMA page_count").fetchone()[0]
    journal._conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(JournalWriteError, match=r"append of 400 record.s. failed, nothing written: the database or "
                                                r"the disk is full \(SQLITE_FULL\)"):
        journal.append([card(3, i, pad="x" * 500) for i in range(400)], snapshot={"round": 3})
    assert journal.last_seq == 6 and journal.latest_snapshot() == (6, {"round": 2, "seq": [3]})
    journal._conn.execute("PRAGMA max_page_count = 1073741823")
    assert journal.append([card(3, 0)]) == [7]
    assert journal.verify().ok


def _db_and_wal_bytes(path) -> tuple[int, int]:
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size, wal.stat().st_size if wal.exists() else 0


def test_checkpoints_off_the_card_path_keep_sqlites_own_out_of_every_commit(tmp_path, journal):
    # SQLite checkpoints inside the commit that takes the WAL past 1,000 pages (about every
    # 200th lone card: the whole WAL copied and the database fsynced on one card's path); a
    # checkpoint every 50 commits (the daemon: each second) keeps every commit from doing it
    path = tmp_path / "j.db"
    for index in range(600):  # ~5 WAL pages a commit: 3,000 pages
        db_before = _db_and_wal_bytes(path)[0]
        journal.append([card(1, index), card(1, index)])
        assert _db_and_wal_bytes(path)[0] == db_before, f"commit {index + 1} copied WAL pages into the database"
        if index % 50 == 49:
            assert journal.checkpoint() == 0  # nobody reads: every page copied
    assert _db_and_wal_bytes(path)[1] < 400 * 4096  # the WAL started over after each checkpoint
    assert journal.verify().ok and journal.last_seq == 1200


def test_without_checkpoints_sqlites_own_keeps_the_wal_bounded(tmp_path, journal):
    path = tmp_path / "j.db"
    db_before = _db_and_wal_bytes(path)[0]
    for index in range(600):  # ~3,000 WAL pages
        journal.append([card(1, index), card(1, index)])
    db_bytes, wal_bytes = _db_and_wal_bytes(path)
    assert wal_bytes < 1100 * (4096 + 24) and db_bytes > db_before
    assert journal.verify().ok


def test_a_checkpoint_runs_beside_the_writer_and_not_after_close(tmp_path, journal):
    writer = threading.Thread(target=lambda: [journal.append([card(1, i)]) for i in range(200)])
    writer.start()
    while writer.is_alive():
        journal.checkpoint()
    writer.join()
    assert journal.verify().ok and journal.last_seq == 200
    journal.close()
    with pytest.raises(JournalError, match="no checkpoint"):
        journal.checkpoint()


def test_a_read_only_journal_does_not_checkpoint(tmp_path, journal):
    journal.append([card(1, 0)])
    with Journal.open(tmp_path / "j.db", readonly=True) as reader:
        with pytest.raises(JournalError, match="read-only: no checkpoint"):
            reader.checkpoint()
