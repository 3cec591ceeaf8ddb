"""The chain checks as pure functions (cardd/floor/chain.py): no database."""
from __future__ import annotations

import msgspec

from cardd.floor.chain import ChainProblem, Link, Span, check_anchor, check_records, check_session, extend, \
    gap_problem, neighbours
from cardd.floor.contract import Event
from tests.floor.records import Table, rewritten


def links(*events: Event) -> dict[int, Link]:
    return {e.seq: Link(e.hash, e.prev) for e in events}


def test_a_batch_links_within_itself_and_to_what_is_stored() -> None:
    table = Table()
    records = table.records(6)
    verdict = check_records("floor1", "bj-07", records[3:], links(*records[:3]))
    assert [e.seq for e, _ in verdict.accepted] == [4, 5, 6] and verdict.refused == []
    # a batch out of order is checked in seq order: 5 links to 4 taken just before it
    verdict = check_records("floor1", "bj-07", [records[4], records[3]], links(records[2]))
    assert [e.seq for e, _ in verdict.accepted] == [4, 5]


def test_the_first_record_of_a_table_is_trusted_whatever_its_prev() -> None:
    records = Table().records(50)
    verdict = check_records("floor1", "bj-07", records[40:], {})
    assert [e.seq for e, _ in verdict.accepted] == list(range(41, 51))


def test_record_one_must_start_the_chain() -> None:
    first = Table().records(1)[0]
    verdict = check_records("floor1", "bj-07", [rewritten(first, prev="e" * 64)], {})
    assert [(p.kind, p.seq) for p in verdict.problems] == [("break", 1)]


def test_a_batch_with_one_record_twice_takes_the_first() -> None:
    records = Table().records(2)
    other = rewritten(records[1], message="round 1: another")
    verdict = check_records("floor1", "bj-07", [records[0], records[1], other, records[1]], {})
    assert [e.seq for e, _ in verdict.accepted] == [1, 2] and verdict.duplicates == 1
    assert [(p.kind, p.seq) for p in verdict.problems] == [("rewritten", 2)]


def test_a_bad_hash_is_found_before_anything_else() -> None:
    records = Table().records(2)
    stored = links(*records)
    forged = msgspec.structs.replace(records[1], message="changed")  # its hash not made again
    verdict = check_records("floor1", "bj-07", [forged], stored)
    assert [(p.kind, p.seq) for p in verdict.problems] == [("bad_hash", 2)]


def test_neighbours_are_each_seq_and_those_either_side() -> None:
    records = Table().records(3)
    assert neighbours([records[0], records[2]]) == {1, 2, 3, 4}


def test_extend_opens_shrinks_and_splits_gaps() -> None:
    span = extend(Span(None, 0, []), [10, 11])
    assert span == Span(10, 11, [])
    span = extend(span, [15])
    assert span == Span(10, 15, [(12, 14)])
    span = extend(span, [13])
    assert span == Span(10, 15, [(12, 12), (14, 14)])
    span = extend(span, [5])
    assert span == Span(5, 15, [(6, 9), (12, 12), (14, 14)])
    span = extend(span, [14, 12, 6, 7, 8, 9])
    assert span == Span(5, 15, [])


def test_anchor_and_session_checks() -> None:
    assert check_anchor("floor1", "bj-07", 5, "a" * 64, None) is None
    assert check_anchor("floor1", "bj-07", 5, "a" * 64, "a" * 64) is None
    problem = check_anchor("floor1", "bj-07", 5, "a" * 64, "b" * 64)
    assert problem is not None and problem.line() == (
        "floor1/bj-07 seq 5: anchor_mismatch: the anchor at record 5 names export hash aaaaaaaaaaaa…, "
        "the archive's record 5 hashes to bbbbbbbbbbbb…")
    assert check_session("floor1", "bj-07", None, 3, 0) is None
    assert check_session("floor1", "bj-07", 3, 3, 0) is None
    assert check_session("floor1", "bj-07", 3, 2, 70) == ChainProblem(
        "session_backwards", "floor1", "bj-07", 70,
        "session 2 after session 3: the table's connection counter went backwards")
    assert gap_problem("floor1", "bj-07", 4, 8).line() == \
        "floor1/bj-07 seq 4: gap: records 4..8 are missing from the archive"
