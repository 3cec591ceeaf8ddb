"""The floor export's cursor in the journal file: outside the chain, forward only with the export
chain's hash of its record, kept across a reopen, made (or given its chain column) in a journal
older than it, and holding back prune while records wait for a broker."""
from __future__ import annotations

import sqlite3

import pytest

from cardd.journal import Delivery, Journal, JournalError
from tests.journal.journal_helpers import DAY_NS, T0, FakeClock, fill


def test_the_cursor_moves_forward_only_and_survives_a_reopen(tmp_path):
    path = tmp_path / "j.db"
    with Journal.open(path, create=True) as journal:
        fill(journal, rounds=3)
        assert journal.delivery() == Delivery(0, 0)
        assert journal.next_export_session() == 1 and journal.next_export_session() == 2
        journal.note_delivered(20, "b" * 64)
        journal.note_delivered(7, "7" * 64)  # an older acknowledgement arriving late: never back
        assert journal.delivery() == Delivery(20, 2, "b" * 64)
        head = journal.last_seq
    with Journal.open(path) as journal:
        assert journal.delivery() == Delivery(20, 2, "b" * 64)
        assert journal.last_seq == head and journal.verify().ok  # not a record: the chain is as it was


def test_a_journal_made_before_the_cursor_gets_it_when_opened_for_writing(tmp_path):
    path = tmp_path / "j.db"
    with Journal.open(path, create=True) as journal:
        fill(journal, rounds=1)
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE delivery")
    conn.commit()
    conn.close()
    with Journal.open(path, readonly=True) as reader:
        assert reader.delivery() == Delivery(0, 0)  # read-only: nothing made, nothing delivered
    with Journal.open(path) as journal:
        journal.note_delivered(5, "5" * 64)
        assert journal.delivery() == Delivery(5, 0, "5" * 64)


def test_a_cursor_made_before_the_export_chain_gets_its_column_when_opened_for_writing(tmp_path):
    path = tmp_path / "j.db"
    with Journal.open(path, create=True) as journal:
        fill(journal, rounds=1)
    conn = sqlite3.connect(path)  # the cursor as a release before the chain made it, 9 records delivered
    conn.executescript("DROP TABLE delivery; CREATE TABLE delivery (id INTEGER PRIMARY KEY CHECK (id = 1), "
                       "delivered_through INTEGER NOT NULL, session INTEGER NOT NULL); "
                       "INSERT INTO delivery VALUES (1, 9, 3);")
    conn.close()
    with Journal.open(path, readonly=True) as reader:
        assert reader.delivery() == Delivery(9, 3, None)  # read as it is: no chain noted
    with Journal.open(path) as journal:
        assert journal.delivery() == Delivery(9, 3, None)  # upgraded in place, the cursor kept
        journal.note_delivered(12, "c" * 64)
        assert journal.delivery() == Delivery(12, 3, "c" * 64)
        assert journal.verify().ok
    with Journal.open(path, readonly=True) as reader:
        assert reader.delivery() == Delivery(12, 3, "c" * 64)


def test_a_read_only_journal_refuses_to_move_the_cursor(tmp_path):
    path = tmp_path / "j.db"
    Journal.open(path, create=True).close()
    with Journal.open(path, readonly=True) as reader, pytest.raises(JournalError, match="read-only"):
        reader.note_delivered(1, "1" * 64)


def test_prune_keeps_every_record_after_what_was_delivered(tmp_path):
    clock = FakeClock()
    with Journal.open(tmp_path / "j.db", create=True, clock=clock) as journal:
        fill(journal, rounds=200, per_round=2, clock=clock, step_ns=DAY_NS)
        journal.export(tmp_path / "all.jsonl", until=T0 + 150 * DAY_NS)  # seqs 1..300 exported to a file
        assert journal.prune(keep_after=40).through_seq == 40  # the floor has only 40: the rest waits
        assert journal.prune(keep_after=40).pruned == 0
        assert journal.prune(keep_after=1000).through_seq == 220  # delivered past the horizon: the file rule stands
        assert journal.verify().ok
