"""Queries for `cardctl log`: every filter, and each answered through its index.

The journal names the index of a round, time, reason or severity query (INDEXED BY), and
SQLite refuses such a statement ("no query solution") when that index cannot serve it: each
of these queries returning is the proof that it ran on its index, not over the whole table."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from cardd.journal import Entry, Journal, JournalError
from tests.journal.journal_helpers import T0, FakeClock, card

SECOND = 1_000_000_000


@pytest.fixture
def journal(tmp_path):
    clock = FakeClock()
    j = Journal.open(tmp_path / "j.db", create=True, clock=clock)
    for r in range(1, 4):
        j.append([card(r, i) for i in range(3)])
        clock.now += 3600 * SECOND
    j.append([Entry("event", "UNREADABLE_CARD", "shoe", "warning", data={"round": 3}),
              Entry("event", "FACE_UP_CARD", "shoe", "alarm", data={"round": "3"}),
              Entry("input", "ACTION", "console", who="dealer:ann", data={"round": 3, "box": 1}),
              Entry("start", "STARTED", "cardd", data={"version": "0.1"})])
    yield j
    j.close()


def seqs(records):
    return [r.seq for r in records]


def test_by_round_matches_ints_and_strings_alike(journal):
    assert seqs(journal.query(round_id=2)) == [4, 5, 6]
    assert seqs(journal.query(round_id="3")) == [7, 8, 9, 10, 11, 12]


def test_by_time_range_is_since_inclusive_until_exclusive(journal):
    assert seqs(journal.query(since=T0 + 3600 * SECOND, until=T0 + 7200 * SECOND)) == [4, 5, 6]
    since = datetime(2020, 1, 1, 2, tzinfo=timezone.utc)
    assert seqs(journal.query(since=since)) == [7, 8, 9, 10, 11, 12, 13]
    assert seqs(journal.query(until=since)) == [1, 2, 3, 4, 5, 6]


def test_naive_datetimes_are_refused(journal):
    with pytest.raises(JournalError, match="no time zone"):
        journal.query(since=datetime(2020, 1, 1))


def test_by_seq_range_reason_kind_source_and_severity(journal):
    assert seqs(journal.query(seq_from=5, seq_to=7)) == [5, 6, 7]
    assert seqs(journal.query(reason="FACE_UP_CARD")) == [11]
    assert seqs(journal.query(kind="input")) == [12]
    assert seqs(journal.query(source="cardd")) == [13]
    assert seqs(journal.query(min_severity="warning")) == [10, 11]
    assert seqs(journal.query(min_severity="alarm")) == [11]
    assert len(journal.query(min_severity="info")) == 13
    assert seqs(journal.query(round_id=3, kind="event", min_severity="warning")) == [10, 11]


def test_limit_and_newest_first(journal):
    assert seqs(journal.query(limit=2)) == [1, 2]
    assert seqs(journal.query(limit=2, newest_first=True)) == [13, 12]
    assert len(journal.query(limit=None)) == 13


def test_an_unknown_severity_is_refused(journal):
    with pytest.raises(JournalError, match="severity 'fatal': one of info, warning, alarm"):
        journal.query(min_severity="fatal")
