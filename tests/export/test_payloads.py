"""The floor payloads: docs/floor.md's examples are what the Structs read and the builders write,
and the card filter's table is the one documented. That no payload of the default filter names a
card over the whole scenario library's journals is checked where the library runs
(tests/bench/test_scenarios.py, with tests/export/card_checks.py)."""
from __future__ import annotations

import dataclasses
import hashlib
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cardd.daemon.backend import journal_reasons
from cardd.export.payloads import (
    CARD_DATA_MODES, CHAIN_START, INPUT_FIELDS, SCHEMA, TREATMENTS, Anchor, Event, Events, State, Status, Will,
    anchor_payload, carries_cards, event_payload, events_payload, settled_round, state_payload, status_payload,
    will_payload,
)
from cardd.floor import contract
from cardd.journal.records import Record, record_hash
from devices.tracker.inputs import RECORDS
from tests.export.card_checks import names_cards

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "floor.md"
#: docs/floor.md's payload headings -> the Struct its examples are
SECTION_TYPES: dict[str, type[msgspec.Struct]] = {"status": Status, "Will": Will, "events": Events, "event": Event,
                                                  "state": State,
                                                  "anchor": Anchor}


# ---- the examples ---------------------------------------------------------------------------

def doc_examples() -> list[tuple[str, str]]:
    """(the ### heading above it, the text) of every ```json block of docs/floor.md."""
    found, heading = [], ""
    for match in re.finditer(r"^### ([^\n]+)$|^```json\n(.*?)^```$", DOC.read_text(encoding="utf-8"), re.M | re.S):
        if match.group(1) is not None:
            heading = match.group(1).strip()
        else:
            found.append((heading, match.group(2)))
    return found


def test_every_json_example_is_its_payload() -> None:
    examples = doc_examples()
    assert {heading for heading, _ in examples} == set(SECTION_TYPES)
    for heading, text in examples:
        payload = msgspec.json.decode(text.encode(), type=SECTION_TYPES[heading])
        assert payload.schema == SCHEMA  # type: ignore[attr-defined]
    # a subscriber of the status topic reads the Will as a Status too
    (will,) = [text for heading, text in examples if heading == "Will"]
    assert msgspec.json.decode(will.encode(), type=Status).online is False


def test_a_payload_with_another_field_or_a_bad_time_is_refused() -> None:
    (anchor,) = [msgspec.json.decode(text.encode()) for heading, text in doc_examples() if heading == "anchor"]
    for wrong in ({**anchor, "extra": 1}, {**anchor, "time": "2026-12-02T04:00:00Z"}, {**anchor, "table": "bj/07"},
                  {**anchor, "schema": "cardd.floor/2"}):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(wrong, Anchor)


def _example(heading: str) -> dict[str, Any]:
    (first, *_) = [msgspec.json.decode(text.encode()) for h, text in doc_examples() if h == heading]
    assert isinstance(first, dict)
    return first


def test_the_builders_write_the_documented_examples() -> None:
    status = _example("status")
    ts_ns = 1796184000123000000  # 2026-12-02T04:00:00.123Z
    built = status_payload(site="floor1", table="bj-07", session=12, release="0.9.0", rules_name="casino-001",
                           rules_sha256=status["rules"]["sha256"],
                           devices={"shoe": "sim://shoe", "shuffler": "sim://shuffler"}, ts_ns=ts_ns)
    assert msgspec.json.decode(built) == status
    assert msgspec.json.decode(will_payload(site="floor1", table="bj-07", session=12)) == _example("Will")
    anchor = _example("anchor")
    assert msgspec.json.decode(anchor_payload(site="floor1", table="bj-07", seq=1234,
                                              chain_hash=bytes.fromhex(anchor["hash"]),
                                              export_hash=anchor["export_hash"], ts_ns=ts_ns - 3_000_000)) == anchor
    state = state_payload(
        site="floor1", table="bj-07", ts_ns=ts_ns,
        devices={"shoe-reader": {"state": "dealing", "link": "up"}, "shuffler": {"state": "idle", "link": "up"}},
        shoe={"state": "in_play", "cards_out": 100, "cards_in_shoe": 312}, rounds_this_shoe=12, rounds_this_hour=40,
        alarms=[{"id": 3, "reason": "FACE_UP_CARD", "source": "table", "message": "card #3 (AC) came out face up"}],
        alarm_since_ns={3: ts_ns - 60_000_000_000},
        export={"delivered_through": 1200, "backlog": 34, "oldest_undelivered_s": 0.8})
    assert msgspec.json.decode(state) == _example("state")
    assert not names_cards(msgspec.json.decode(state))  # an alarm's text ("... (AC) ...") stays at the table


def test_the_state_shows_no_shoe_between_shoes_and_penetration_in_quarters() -> None:
    def shoe_of(shoe: dict[str, Any]) -> Any:
        return msgspec.json.decode(state_payload(
            site="s", table="t", ts_ns=0, devices={}, shoe=shoe, rounds_this_shoe=0, rounds_this_hour=0,
            alarms=[], alarm_since_ns={}, export={"delivered_through": 0, "backlog": 0,
                                                  "oldest_undelivered_s": None}))["shoe"]

    assert shoe_of({"state": "verified", "cards_out": 0, "cards_in_shoe": 312}) is None
    steps = [shoe_of({"state": "in_play", "cards_out": n, "cards_in_shoe": 312})["penetration"]
             for n in (0, 77, 78, 155, 156, 233, 234, 312)]
    assert steps == ["0-25%", "0-25%", "25-50%", "25-50%", "50-75%", "50-75%", "75-100%", "75-100%"]


# ---- the filter's table -----------------------------------------------------------------------

#: what the default filter does with each reason the daemon journals: its message as journaled, or
#: rebuilt from the fields sent; and the reasons whose card lists are sent as counts
MESSAGE_AS_JOURNALED = {
    "DAEMON_START", "DAEMON_STOP", "JOURNAL_EXPORTED", "JOURNAL_PRUNED", "JOURNAL_WRITE_FAILED",
    "JOURNAL_WRITE_RESUMED", "EXPORT_BACKLOG", "EXPORT_DRAINED", "DEVICE_FLAPPING", "DEVICE_FLOODING", "DEVICE_NOT_TRUSTED", "EVENT_GAP", "EVENTS_LOST",
    "DEVICE_DROPPED_EVENTS", "OUT_OF_ORDER_REPORT", "ACTION", "REDEAL", "BOX_OVER_MAXIMUM",
    "SHUFFLER_MALFUNCTION", "UNREADABLE_CARD", "OVERRIDE"}
MESSAGE_REBUILT = {
    "RULES_CHANGED", "START_SHUFFLE", "CLEAR_FAULT", "COUNTERS", "SELFTEST", "FIRMWARE_UPDATE", "ENROLL", "RETRY_TRUST", "EXPORT_JOURNAL",
    "VERIFY_JOURNAL", "SIM_DEAL", "SIM_FAULT", "SIM_LOAD_SHOE", "SIM_SWITCHES", "SIM_UNLOAD_SHOE", "COMMAND_REFUSED",
    "DEVICE_STATE", "DEVICE_STALE", "DEVICE_OFFLINE", "DEVICE_FAULT", "DEVICE_RECOVERED", "WRONG_DEVICE",
    "SHOE_STATE", "SHOE_VERIFIED", "SHOE_REFUSED", "CUT_CARD_OUT", "DEALER_CHANGE_BURN", "RECONCILED",
    "RECONCILIATION_FAILED", "SHOE_VOID", "NEXT_SHOE_TAKES_OVER", "SHOE_COUNT_MISMATCH", "CUT_CARD_MISPLACED",
    "BURN", "DEALING_BLOCKED", "ROUND_STATE", "CARD_ASSIGNED", "ACTION_REFUSED", "SETTLED", "ROUND_HELD",
    "ROUND_RESUMED", "ROUND_VOID", "FACE_UP_CARD", "FOREIGN_CARD", "CARD_ENTERED_BY_DEALER", "CARD_EXPOSED_IN_ERROR",
    "CARD_DRAWN_IN_ERROR", "PLACEMENT_ERROR", "CARDS_TO_BOX_WITHOUT_WAGER", "READ_FROM_STALE_DEVICE",
    "REPEATED_READ", "CONFLICTING_READ", "MISSING_READ", "OVERRIDE_REFUSED", "ALARM_CLEARED"}
CARDS_COUNTED = {"PLACEMENT_ERROR": {"layout"}, "CARDS_TO_BOX_WITHOUT_WAGER": {"cards"}}
#: fields that hold a card, a hand's cards or a composition: never kept, for any reason or input
CARD_FIELDS = {"card", "first_card", "cards_in_play", "layout", "problems", "detail", "args", "result", "refused",
               "message", "input", "returned_cards", "assignments", "also", "composition"}


def test_every_reason_the_daemon_journals_has_the_treatment_listed_here() -> None:
    assert MESSAGE_AS_JOURNALED.isdisjoint(MESSAGE_REBUILT)
    assert set(TREATMENTS) == MESSAGE_AS_JOURNALED | MESSAGE_REBUILT == set(journal_reasons())
    assert {r for r, t in TREATMENTS.items() if t.message is None} == MESSAGE_AS_JOURNALED
    assert {r: set(t.counted) for r, t in TREATMENTS.items() if t.counted} == CARDS_COUNTED
    assert all(not (t.keep & CARD_FIELDS) for t in TREATMENTS.values())


def test_every_input_type_has_its_fields_and_no_card() -> None:
    assert set(INPUT_FIELDS) == set(RECORDS)
    assert all(not (t.keep & CARD_FIELDS) and {"type", "v"} <= t.keep for t in INPUT_FIELDS.values())
    assert {name for name, t in INPUT_FIELDS.items() if t.counted} == {
        "PlacementError", "ReconstructInitialDeal", "ReconstructAndRedeal", "ShoeRemainder"}


def _doc_table(first_header: str) -> dict[str, tuple[set[str], set[str], str | None]]:
    """docs/floor.md's table whose first header is ``first_header``: name -> (fields, counted, message)."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index(next(line for line in lines if line.startswith(f"| {first_header} |"))) + 2
    table: dict[str, tuple[set[str], set[str], str | None]] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        fields, counted = ({m for m in re.findall(r"`(\w+)`", cell)} for cell in cells[1:3])
        for name in re.findall(r"`(\w+)`", cells[0]):
            table[name] = (fields, counted, cells[3] if len(cells) > 3 else None)
    return table


def test_the_documented_tables_are_the_filters() -> None:
    assert _doc_table("reason") == {
        name: (set(t.keep), set(t.counted), "as journaled" if t.message is None else "rebuilt")
        for name, t in TREATMENTS.items()}
    assert _doc_table("input type") == {name: (set(t.keep), set(t.counted), None) for name, t in INPUT_FIELDS.items()}


# ---- records made here: after_round, an unknown reason, the settling record -------------------

def record(seq: int, kind: str, reason: str, data: dict[str, Any], source: str = "round", who: str = "",
           round_id: str | None = None) -> Record:
    data_json = msgspec.json.encode(data, order="sorted").decode()
    return Record(seq, 1796184000123456789, kind, source, reason, "info", who, round_id, data_json, bytes(32),
                  record_hash(bytes(32), data_json.encode()))


def sent(record: Record, card_data: str = "none", *, replay: bool = False, site: str = "floor1",
         table: str = "bj-07", prev: str = CHAIN_START) -> bytes:
    """The event the table sends of ``record``, the first of its export chain unless ``prev``."""
    return event_payload(record, site=site, table=table, card_data=card_data, replay=replay, prev=prev)[0]


ASSIGNED = record(48, "event", "CARD_ASSIGNED",
                  {"card": "TH", "message": "round 1: TH to box 1 hand 1", "round": 1, "target": "box 1 hand 1"},
                  round_id="1")


def test_after_round_sends_the_record_whole() -> None:
    whole = msgspec.json.decode(sent(ASSIGNED, "after_round", replay=True), type=Event)
    assert (whole.message, whole.data, whole.replay) == ("round 1: TH to box 1 hand 1", ASSIGNED.data, True)
    assert (whole.seq, whole.time, whole.round, whole.who) == (48, "2026-12-02T04:00:00.123Z", "1", None)
    cut = msgspec.json.decode(sent(ASSIGNED), type=Event)
    assert (cut.message, cut.data) == ("round 1: a card to box 1 hand 1", {"round": 1, "target": "box 1 hand 1"})
    assert carries_cards(ASSIGNED)


def test_carries_cards_sees_a_card_in_any_text_or_key_of_the_data() -> None:
    def carries(data: dict[str, Any]) -> bool:
        return carries_cards(record(5, "event", "REDEAL", data))

    assert carries({"message": "two lines:\nAS first"}) and carries({"returned": {"10H": 1}})
    assert carries({"message": "card\u00a0QS"}) and carries({"layout": [["4H", "dealer"]]})
    assert not carries({"message": "re-deal declared by root: FACE_UP_CARD as 10 cards"})


def test_a_card_data_mode_not_known_is_refused_in_one_line() -> None:
    assert CARD_DATA_MODES == ("none", "after_round")
    with pytest.raises(ValueError, match=r"^export.card_data 'all': expected one of none, after_round$"):
        sent(ASSIGNED, "all")


def test_an_unknown_reason_is_sent_as_its_header_alone() -> None:
    odd = record(7, "event", "CARD_PEEKED", {"card": "AS", "message": "AS peeked", "round": 2}, who="dealer:ann",
                 round_id="2")
    header = msgspec.json.decode(sent(odd))
    assert header == {"schema": SCHEMA, "site": "floor1", "table": "bj-07", "seq": 7, "time": "2026-12-02T04:00:00.123Z",
                      "kind": "event", "source": "round", "reason": "CARD_PEEKED", "severity": "info",
                      "who": "dealer:ann", "round": "2", "message": "", "data": {}, "prev": CHAIN_START,
                      "hash": header["hash"], "replay": False}


def test_settled_round_is_the_rounds_complete_or_void_record() -> None:
    def state(seq: int, value: str) -> Record:
        return record(seq, "event", "ROUND_STATE", {"message": f"round 3: now {value}", "round": 3, "state": value},
                      round_id="3")

    assert [settled_round(state(i, s)) for i, s in enumerate(("players", "dealer", "complete", "void"), 1)] == \
        [None, None, "3", "3"]
    assert settled_round(ASSIGNED) is None


def test_a_side_bets_outcome_naming_its_cards_pattern_is_not_sent() -> None:
    pairs = record(9, "event", "SETTLED", {"box": 1, "hand": 0, "kind": "pairs", "net": "2500",
                                           "outcome": "perfect_pair", "player": "p1", "round": 4, "stake": 100,
                                           "message": "p1 pairs at box 1 hand 1: perfect_pair, stake 1.00, net 25.00"},
                   round_id="4")
    cut = msgspec.json.decode(sent(pairs, site="f", table="t"), type=Event)
    assert "outcome" not in cut.data and "perfect_pair" not in cut.message and cut.data["net"] == "2500"


def test_an_events_message_is_its_records_in_order_and_matches_the_documented_one() -> None:
    documented = _example("events")
    (event,) = documented["events"]
    ts_ns = round(datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp() * 1e3) * 1_000_000
    state = record(47, "event", "ROUND_STATE", {"round": 1, "state": "initial_deal",
                                                "message": "round 1: betting -> initial_deal"}, round_id="1")
    state = dataclasses.replace(state, ts_ns=ts_ns)
    one = sent(state, prev=event["prev"])
    assert msgspec.json.decode(events_payload([one], site="floor1", table="bj-07")) == documented
    more = [sent(record(seq, "event", "ROUND_STATE", {"round": 2, "state": "betting"}, round_id="2"), replay=True)
            for seq in (90, 91, 92)]
    message = msgspec.json.decode(events_payload(more, site="floor1", table="bj-07"), type=Events)
    assert [e.seq for e in message.events] == [90, 91, 92] and all(e.replay for e in message.events)
    assert event["seq"] == 47


# ---- the export chain ---------------------------------------------------------------------------

def test_the_floors_contract_reads_every_documented_example_and_recomputes_each_hash() -> None:
    """docs/floor.md's examples as the floor reads them (cardd.floor.contract, strictly): each
    event's hash is the SHA-256 of what it shows, and the seq 48 of the default filter links to
    the seq 47 of the events example."""
    events = []
    for heading, text in doc_examples():
        leaf = {"Will": "status", "event": "events"}.get(heading, heading)
        body = text.encode() if heading != "event" else \
            events_payload([text.encode()], site="floor1", table="bj-07")  # an event alone: in its envelope
        decoded = contract.decode(contract.parse_topic(f"cardd/v1/floor1/bj-07/{leaf}"), body)
        if isinstance(decoded, contract.Events):
            events += decoded.events
    assert len(events) == 4
    assert all(contract.event_hash(e) == e.hash for e in events)
    (first, cut) = [e for e in events if e.seq in (47, 48) and e.message != "round 1: TH to box 1 hand 1"]
    assert cut.prev == first.hash


def test_an_events_hash_is_its_fields_but_hash_and_replay_keys_sorted_and_a_resend_keeps_it() -> None:
    unsorted = dataclasses.replace(ASSIGNED, data_json='{"target":"box 1 hand 1","round":1,"card":"TH",'
                                                      '"message":"round 1: TH to box 1 hand 1"}')
    for mode in CARD_DATA_MODES:
        text, digest = event_payload(unsorted, site="floor1", table="bj-07", card_data=mode, replay=False,
                                     prev=CHAIN_START)
        resent, again = event_payload(unsorted, site="floor1", table="bj-07", card_data=mode, replay=True,
                                      prev=CHAIN_START)
        assert again == digest and resent == text.replace(b'"replay":false', b'"replay":true')
        event = msgspec.json.decode(text)
        fields = {k: v for k, v in event.items() if k not in ("hash", "replay")}
        assert event["prev"] == CHAIN_START and event["hash"] == digest == \
            hashlib.sha256(msgspec.json.encode(fields, order="sorted")).hexdigest()
        assert contract.event_hash(msgspec.json.decode(text, type=contract.Event)) == digest
        linked = event_payload(unsorted, site="floor1", table="bj-07", card_data=mode, replay=False, prev=digest)
        assert linked[1] != digest  # prev is inside what is hashed
    whole = msgspec.json.decode(sent(unsorted, "after_round"), type=contract.Event)
    assert list(whole.data) == ["target", "round", "card", "message"]  # sent as stored, hashed sorted
