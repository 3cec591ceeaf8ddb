"""A journal checked against the anchors it published (cardd/journal/anchors.py): a chain
rewritten after the fact passes a plain verify, and the anchors kept elsewhere name it."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cardd.journal import Journal
from cardd.journal.anchors import (AnchorsFileError, MixedTables, check_anchors, parse_anchors, parse_table,
                                   read_anchors, select_table)
from cardd.journal.integrity import verify_file
from tests.journal.journal_helpers import (DAY_NS, FakeClock, anchor_payloads, fill, forge_edit, journal_of_cards,
                                           tamper, truncate, write_anchors)

SEQS = [10, 50, 100, 150, 200]


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    return journal_of_cards(tmp_path / "journal.sqlite3", 200)


@pytest.fixture
def anchors_path(tmp_path: Path, journal_path: Path) -> Path:
    """The anchors the table published at SEQS, kept by a subscriber, out of order and one twice."""
    payloads = anchor_payloads(journal_path, SEQS)
    return write_anchors(tmp_path / "anchors.jsonl", [payloads[3], *payloads, payloads[0]])


def forged_copy(journal_path: Path, edited_seq: int) -> Path:
    copy = journal_path.with_name("forged.sqlite3")
    shutil.copy(journal_path, copy)
    forge_edit(copy, edited_seq, {"round": 12, "index": 9, "card": "AS"})
    return copy


def anchors_of(path: Path) -> list:
    return select_table(read_anchors(path), None)[2]


def test_a_journal_that_published_the_anchors_reproduces_every_one(journal_path, anchors_path):
    result = check_anchors(journal_path, anchors_of(anchors_path))
    assert result.ok and result.verify.ok
    assert (result.checked, result.matched, result.not_checkable, result.mismatched) == (5, 5, 0, 0)
    assert result.line() == "anchors: 5 checked, every one reproduced by the journal"


@pytest.mark.parametrize(("edited", "named"), [(120, 150), (100, 100), (1, 10), (200, 200)])
def test_a_rewritten_chain_passes_verify_and_the_anchors_name_the_first_one_at_or_after_the_edit(
        journal_path, anchors_path, edited, named):
    copy = forged_copy(journal_path, edited)
    assert verify_file(copy).ok  # the chain alone: sound, head and head file included
    with Journal.open(copy, readonly=True) as journal:
        assert journal.verify().ok
        result = check_anchors(journal, anchors_of(anchors_path))
    assert result.verify.ok and not result.ok
    first = result.first_mismatch
    assert first is not None and (first.kind, first.seq) == ("differs", named)
    published = {a.seq: a.hash for a in anchors_of(anchors_path)}
    with Journal.open(copy, readonly=True) as journal:
        forged = journal.chain_hashes([named]).hashes[named]
    assert (first.anchor_hash, first.journal_hash) == (published[named], forged) and forged != published[named]
    assert result.mismatched == len([s for s in SEQS if s >= edited]) and result.checked == 5
    assert f"anchor seq {named} ({first.time}): the journal's record {named} hashes {forged.hex()[:6]}…, " \
           f"the anchor says {published[named].hex()[:6]}…" in result.line()


def test_a_journal_cut_short_with_its_head_moved_back_ends_before_an_anchor(journal_path, anchors_path):
    truncate(journal_path, 160)
    assert verify_file(journal_path).ok
    result = check_anchors(journal_path, anchors_of(anchors_path))
    first = result.first_mismatch
    assert not result.ok and first is not None and (first.kind, first.seq, first.journal_hash) == ("beyond_head", 200,
                                                                                                   None)
    assert result.line().endswith("not reproduced: anchor seq 200 (" + first.time + "): the journal ends at seq 160, "
                                  "before it (records were removed from its end, or it was replaced by an older copy)")


def test_a_broken_chain_is_the_verify_answer_and_no_anchor_is_compared(journal_path, anchors_path):
    tamper(journal_path, "UPDATE records SET reason = 'TAMPERED' WHERE seq = 30")
    with Journal.open(journal_path, readonly=True, quick_check_records=0) as journal:
        result = check_anchors(journal, anchors_of(anchors_path))
    assert not result.ok and (result.verify.first_bad_seq, result.checked, result.first_mismatch) == (30, 0, None)


def test_two_hashes_for_one_seq_in_the_file_are_reported(journal_path, tmp_path):
    payloads = anchor_payloads(journal_path, [50, 100])
    other = {**payloads[0], "hash": "9b01d4" + "0" * 58}
    result = check_anchors(journal_path, anchors_of(write_anchors(tmp_path / "a.jsonl", [other, *payloads])))
    first = result.first_mismatch
    assert not result.ok and first is not None and (first.kind, first.seq) == ("conflict", 50)
    assert first.anchor_hash.hex() == payloads[0]["hash"] and first.journal_hash == first.anchor_hash
    assert first.other_hashes == (bytes.fromhex(str(other["hash"])),)
    assert (result.checked, result.matched, result.mismatched) == (3, 2, 1)
    assert "the anchors file holds 2 hashes for it (" in result.line() and "9b01d4…" in result.line()


def test_anchors_before_the_pruned_start_are_not_checkable_and_the_prune_anchor_is_checked(tmp_path):
    clock = FakeClock()
    path = tmp_path / "j.sqlite3"
    with Journal.open(path, create=True, clock=clock) as journal:
        fill(journal, rounds=200, per_round=2, clock=clock, step_ns=DAY_NS)  # 2 records a day
        payloads = anchor_payloads(path, [20, 100, 220, 300, 400])
        journal.export(tmp_path / "all.jsonl")
        assert journal.prune().through_seq == 220
        result = check_anchors(journal, anchors_of(write_anchors(tmp_path / "a.jsonl", payloads)))
        assert result.ok and (result.checked, result.matched, result.not_checkable) == (3, 3, 2)
        assert result.pruned_through == 220
        assert result.line() == ("anchors: 3 checked, 2 before the pruned start (seq 220; not checkable), every one "
                                 "reproduced by the journal")
        forged = {**payloads[2], "hash": "ab" * 32}  # the prune anchor's seq with another hash
        result = check_anchors(journal, anchors_of(write_anchors(tmp_path / "b.jsonl", [forged])))
        assert not result.ok and result.first_mismatch is not None
        assert (result.first_mismatch.kind, result.first_mismatch.seq) == ("differs", 220)
        twice = {**payloads[0], "hash": "cd" * 32}  # two hashes for a pruned seq: reported all the same
        result = check_anchors(journal, anchors_of(write_anchors(tmp_path / "c.jsonl", [payloads[0], twice])))
        assert not result.ok and (result.checked, result.not_checkable, result.mismatched) == (0, 2, 1)
        assert result.first_mismatch is not None and result.first_mismatch.kind == "conflict"
        assert result.first_mismatch.journal_hash is None and result.first_mismatch.seq == 20


def test_a_line_with_its_topic_reads_as_its_payload(journal_path, tmp_path):
    payloads = anchor_payloads(journal_path, SEQS)
    plain, wrapped = (read_anchors(write_anchors(tmp_path / f"{name}.jsonl", payloads, with_topic=name == "wrapped"))
                      for name in ("plain", "wrapped"))
    assert [(a.seq, a.hash, a.time) for a in plain] == [(a.seq, a.hash, a.time) for a in wrapped]
    assert check_anchors(journal_path, wrapped).ok


@pytest.mark.parametrize(("line", "said"), [
    (b"{not json", "not a JSON document (an anchor payload, or an object with \"topic\" and \"payload\", one a line)"),
    (b"[1, 2]", "not an anchor: expected an object, got an array"),
    (b'{"schema": "cardd.floor/1", "site": "floor1", "table": "bj-07", "seq": 3, "time": "t"}',
     "not an anchor: field 'hash' is missing"),
    (b'{"schema": "cardd.floor/1", "site": "floor1", "table": "bj-07", "seq": 3, "hash": "3fa2", "time": "t"}',
     "not an anchor: hash: expected 64 hex digits (the record's chain hash)"),
    (b'{"topic": "x", "payload": {"schema": "cardd.floor/2", "site": "f", "table": "t", "seq": 3, "hash": "'
     + b"a" * 64 + b'", "time": "t"}}', "not an anchor: payload.schema: 'cardd.floor/2': expected one of cardd.floor/1"),
    (b'{"schema": "cardd.floor/1", "site": "floor1", "table": "bj-07", "seq": 0, "hash": "' + b"a" * 64
     + b'", "time": "t"}', "not an anchor: seq: expected a whole number of at least 1"),
])
def test_a_malformed_line_is_one_error_naming_its_number(line, said):
    good = json.dumps({"schema": "cardd.floor/1", "site": "floor1", "table": "bj-07", "seq": 3, "hash": "a" * 64,
                       "time": "t"}).encode()
    with pytest.raises(AnchorsFileError) as refused:
        parse_anchors([good, b"", b"   ", line, good], "anchors.jsonl")
    assert str(refused.value) == f"anchors.jsonl, line 4: {said}"


def test_anchors_of_several_tables_need_one_chosen(journal_path, tmp_path):
    payloads = anchor_payloads(journal_path, SEQS) + anchor_payloads(journal_path, [5], table="bj-08")
    anchors = read_anchors(write_anchors(tmp_path / "mixed.jsonl", payloads))
    with pytest.raises(MixedTables) as mixed:
        select_table(anchors, None, "mixed.jsonl")
    assert mixed.value.tables == (("floor1", "bj-07"), ("floor1", "bj-08"))
    assert str(mixed.value) == "mixed.jsonl holds the anchors of 2 tables (floor1/bj-07, floor1/bj-08): a journal is " \
                               "one table's"
    site, table, mine = select_table(anchors, parse_table("floor1/bj-07"), "mixed.jsonl")
    assert (site, table, sorted(a.seq for a in mine)) == ("floor1", "bj-07", SEQS)
    with pytest.raises(AnchorsFileError, match=r"^mixed.jsonl holds no anchors of floor1/bj-09 \(it holds "):
        select_table(anchors, ("floor1", "bj-09"), "mixed.jsonl")
    with pytest.raises(AnchorsFileError, match="holds no anchors: nothing to check the journal against"):
        select_table([], None, "empty.jsonl")
    with pytest.raises(ValueError, match="expected SITE/TABLE"):
        parse_table("floor1/bj/07")
