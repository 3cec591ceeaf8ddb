"""Retention: export writes and journals a file; prune deletes only exported records past the
horizon, keeps the chain verifiable from its anchor, and never goes past the latest snapshot."""
from __future__ import annotations

import csv
import hashlib
import json

import pytest

from cardd.journal import Journal, JournalError, JournalExportError
from tests.journal.journal_helpers import DAY_NS, T0, FakeClock, card, fill

DAYS = 200


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def journal(tmp_path, clock):
    """One round of 2 records a day for 200 days: seqs 2d-1 and 2d are day d-1 (T0 + (d-1) days)."""
    j = Journal.open(tmp_path / "j.db", create=True, clock=clock)
    fill(j, rounds=DAYS, per_round=2, clock=clock, step_ns=DAY_NS)
    yield j
    j.close()


def test_export_writes_json_lines_and_journals_the_file_and_its_sha256(tmp_path, journal):
    target = tmp_path / "first-week.jsonl"
    result = journal.export(target, since=T0, until=T0 + 7 * DAY_NS, who="tech:bo")
    assert (result.first_seq, result.last_seq, result.count) == (1, 14, 14)
    assert result.sha256 == hashlib.sha256(target.read_bytes()).hexdigest()
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert [line["seq"] for line in lines] == list(range(1, 15))
    assert lines[0]["time"] == "2020-01-01T00:00:00.000000000Z" and lines[0]["data"] == {"round": 1, "index": 0}
    assert lines[1]["prev"] == lines[0]["hash"]
    (note,) = journal.query(kind="export")
    assert note.seq == result.record_seq == journal.last_seq and note.who == "tech:bo"
    assert note.reason == "JOURNAL_EXPORTED"
    assert note.data == {"file": str(target), "format": "jsonl", "sha256": result.sha256, "first_seq": 1,
                         "last_seq": 14, "count": 14, "message": f"exported 14 record(s) (seq 1..14) to {target}"}
    assert journal.verify().ok


def test_export_as_csv(tmp_path, journal):
    target = tmp_path / "all.csv"
    result = journal.export(target, "csv")
    rows = list(csv.DictReader(target.open(newline="")))
    assert len(rows) == result.count == 2 * DAYS and rows[-1]["seq"] == str(2 * DAYS)
    assert json.loads(rows[0]["data"]) == {"round": 1, "index": 0} and rows[0]["round"] == "1"


def test_export_never_overwrites_and_refuses_an_empty_range_or_an_unknown_format(tmp_path, journal):
    target = tmp_path / "x.jsonl"
    target.write_text("keep me")
    with pytest.raises(JournalExportError, match="exists"):
        journal.export(target)
    assert target.read_text() == "keep me"
    with pytest.raises(JournalExportError, match="no records to export"):
        journal.export(tmp_path / "y.jsonl", since=T0 + 1000 * DAY_NS)
    with pytest.raises(JournalExportError, match="format 'xml'"):
        journal.export(tmp_path / "z.xml", "xml")
    assert not (tmp_path / "z.xml").exists() and journal.query(kind="export") == []


def test_nothing_is_pruned_that_was_not_exported(journal, clock):
    assert journal.prune().pruned == 0
    assert journal.query(limit=1)[0].seq == 1 and journal.query(kind="prune") == []


def test_prune_deletes_exported_records_past_the_horizon_and_the_chain_still_verifies(tmp_path, journal, clock):
    journal.export(tmp_path / "a.jsonl", until=T0 + 150 * DAY_NS)  # days 0..149 = seqs 1..300
    now = clock.now  # T0 + 200 days: the 90-day horizon cuts at day 110 = seq 221
    result = journal.prune(who="system")
    assert (result.pruned, result.through_seq) == (220, 220)
    assert journal.query(limit=1)[0].seq == 221
    note = journal.query(kind="prune")[0]
    assert note.seq == result.record_seq and note.data["through_seq"] == 220 and note.data["count"] == 220
    assert note.data["horizon_days"] == 90 and note.data["cutoff"] == "2020-04-20T00:00:00.000000000Z"
    assert note.data["message"] == "pruned 220 record(s) (seq 1..220): exported, older than 90 days"
    assert journal.verify().ok
    assert journal.prune(now).pruned == 0  # nothing more is old enough
    with pytest.raises(JournalError, match="records up to seq 220 were pruned"):
        journal.entries_after(100)
    journal.close()
    with Journal.open(tmp_path / "j.db") as reopened:
        assert reopened.verify().ok and reopened.latest_snapshot() is not None
        assert reopened.append([card(999, 0)]) == [note.seq + 1]


def test_prune_stops_at_the_first_gap_in_the_exports(tmp_path, journal):
    journal.export(tmp_path / "a.jsonl", until=T0 + 10 * DAY_NS)  # seqs 1..20
    journal.export(tmp_path / "b.jsonl", since=T0 + 20 * DAY_NS, until=T0 + 30 * DAY_NS)  # seqs 41..60
    assert journal.prune().through_seq == 20
    journal.export(tmp_path / "c.jsonl", since=T0 + 10 * DAY_NS, until=T0 + 20 * DAY_NS)  # seqs 21..40
    assert journal.prune().through_seq == 60
    # the second prune's message names its own range, from the anchor on
    assert journal.query(kind="prune")[-1].data["message"].startswith("pruned 40 record(s) (seq 21..60)")
    assert journal.verify().ok


def test_a_longer_horizon_keeps_more_and_prune_never_passes_the_latest_snapshot(tmp_path, clock):
    with Journal.open(tmp_path / "j.db", create=True, clock=clock, retention_days=120) as j:
        fill(j, rounds=DAYS, per_round=2, clock=clock, step_ns=DAY_NS)
        j.export(tmp_path / "all.jsonl")
        assert j.prune().through_seq == 2 * (DAYS - 120)
    with Journal.open(tmp_path / "k.db", create=True, clock=clock) as k:
        k.append([card(1, 0)], snapshot={"round": 1})
        k.append([card(1, i) for i in range(1, 50)])
        clock.now += 365 * DAY_NS
        k.export(tmp_path / "k.jsonl")
        assert k.prune().through_seq == 1  # records after the snapshot are what a restart replays
        assert [r.seq for r in k.entries_after(1)][:2] == [2, 3]


def test_an_export_in_two_steps_writes_the_file_first_and_only_the_note_makes_it_prunable(tmp_path, journal, clock):
    written = journal.write_export_file(tmp_path / "a.jsonl", until=T0 + 150 * DAY_NS)
    assert (written.first_seq, written.last_seq, written.count) == (1, 300, 300)
    assert written.sha256 == hashlib.sha256((tmp_path / "a.jsonl").read_bytes()).hexdigest()
    assert journal.query(kind="export") == [] and journal.prune().pruned == 0  # a file alone is no export
    journal.append([card(999, 0)])  # appends go on between the two steps
    noted = journal.note_export(written, who="tech:bo")
    assert noted.record_seq == journal.last_seq and journal.query(kind="export")[0].data["sha256"] == written.sha256
    assert journal.prune().through_seq == 220 and journal.verify().ok


def test_a_bounded_prune_takes_its_chunk_and_the_next_call_the_rest(tmp_path, journal):
    journal.export(tmp_path / "a.jsonl")
    chunks = []
    while (result := journal.prune(max_records=100)).pruned:
        chunks.append((result.pruned, result.through_seq))
    assert chunks == [(100, 100), (100, 200), (20, 220)]
    assert len(journal.query(kind="prune")) == 3 and journal.verify().ok


def test_the_retention_status_says_what_is_unexported_and_whether_it_is_past_the_horizon(tmp_path, journal, clock):
    status = journal.retention()
    assert (status.pruned_through, status.exported_through, status.unexported) == (0, 0, 2 * DAYS)
    assert status.oldest_unexported == "2020-01-01T00:00:00.000000000Z" and status.unexported_past_horizon
    journal.export(tmp_path / "a.jsonl", until=T0 + 150 * DAY_NS)  # seqs 1..300, and the export record 401
    journal.prune()  # through 220, and the prune record 402
    status = journal.retention()
    assert (status.pruned_through, status.exported_through, status.unexported) == (220, 300, 102)
    assert status.oldest_unexported == "2020-05-30T00:00:00.000000000Z"  # day 150: 50 days old, inside the horizon
    assert not status.unexported_past_horizon
    assert status.to_json_dict()["unexported"] == 102
