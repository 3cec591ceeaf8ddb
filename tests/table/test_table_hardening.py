"""Hostile and broken devices through the tracker's own input path (Table.apply with records).

Each test names one thing such a device does and what the table must do about it.
"""
from __future__ import annotations

import json
from collections import Counter

import pytest
from tests.table.table_rig import TableRig, cards

from core.cards import Card, Orientation, shoe_composition
from devices.events import Reason, Role, Severity
from devices.game.rules import HouseRules
from devices.tracker.inputs import (ClearAlarm, DeviceMessage, LinkDown, LinkUp, OpenRound, Redeal, Resume,
                                    ShoeRemainder, Tick, VoidShoe)
from devices.tracker.snapshot import SnapshotError, restore, snapshot
from devices.errors import OverrideRefused, RemainderError, TableError
from devices.tracker.table import Table
from firmware_bridge.messages import (
    CardRead, DeckCheckResult, DeviceRole, DeviceState, Fault, FaultCleared, FaultCode, Heartbeat, Ident, ShoeEmpty, ShoeLoaded, ShuffleComplete,
    ShuffleProgress, Status, UnreadableCard,
)


def shoe(rig: TableRig, msg) -> list:
    return rig.table.apply(DeviceMessage("shoe-reader", msg))


# ---- 1. a fault before identification --------------------------------------------------------

def bare_table(clock) -> Table:
    """A new table whose devices' links are up but that have not identified."""
    t = Table(HouseRules.default(), lambda e: None, clock=clock)
    t.apply(LinkUp("shoe-reader"))
    return t


@pytest.mark.parametrize("first", ["fault_before_ident", "fault_while_updating"])
def test_a_fault_before_ident_then_silence_heartbeat_and_clear_never_escapes(first: str) -> None:
    rig = TableRig(HouseRules.default(), load=False)
    t = rig.table
    if first == "fault_before_ident":
        t = bare_table(rig.clock)
    else:
        shoe(rig, Status(DeviceState.UPDATING, 0, 0, 0))
        assert t.reader.state == "updating"
    t.apply(DeviceMessage("shoe-reader", Fault(FaultCode.COVER_OPEN, 0, "lid")))
    rig.clock.now += 10
    t.apply(Tick())
    assert t.reader.state == "stale"
    t.apply(DeviceMessage("shoe-reader", Heartbeat(5)))
    t.apply(DeviceMessage("shoe-reader", FaultCleared(FaultCode.COVER_OPEN)))  # raised MachineError before
    assert not t.reader.usable and t.reader.state in ("connecting", "updating")


def test_a_reader_that_never_identified_is_never_usable_and_its_reads_are_not_dealt() -> None:
    rig = TableRig(HouseRules.default(), load=False)
    t = bare_table(rig.clock)
    t.apply(DeviceMessage("shoe-reader", Fault(FaultCode.COVER_OPEN, 0, "lid")))
    rig.clock.now += 10
    t.apply(Tick())
    t.apply(DeviceMessage("shoe-reader", Heartbeat(1)))
    t.apply(DeviceMessage("shoe-reader", Status(DeviceState.FAULT, 1, 0, 0)))
    assert t.reader.ident is None and not t.reader.usable and not t.reader.accepts_reads
    t.apply(DeviceMessage("shoe-reader", CardRead(1, Card.parse("AS"), Orientation.FACE_DOWN, 0)))
    assert t.discard == [Card.parse("AS")]


# ---- 2. shuffler reports out of order --------------------------------------------------------

@pytest.mark.parametrize("late", [ShuffleProgress(10, 5), ShuffleComplete(312, shoe_composition(6))],
                         ids=["progress", "second_complete"])
def test_a_shuffler_report_after_shuffle_complete_is_journaled_out_of_order_and_later_inputs_work(late) -> None:
    rig = TableRig(HouseRules.default(), load=False)
    t = rig.table
    comp = shoe_composition(rig.rules.decks)
    t.apply(DeviceMessage("shuffler", ShuffleProgress(0, 0)))
    t.apply(DeviceMessage("shuffler", ShuffleComplete(sum(comp.values()), comp)))
    caused = t.apply(DeviceMessage("shuffler", late))
    assert [e.reason for e in caused if e.reason is Reason.OUT_OF_ORDER_REPORT] == [Reason.OUT_OF_ORDER_REPORT]
    assert t.shoe.state == "verifying"
    t.apply(DeviceMessage("shuffler", DeckCheckResult(True, rig.rules.decks, (), (), 0)))
    assert t.shoe.state == "verified"  # the counted stack was not lost


def test_held_back_out_of_order_reports_replay_after_void_shoe_without_losing_any() -> None:
    rig = TableRig(HouseRules.default())  # a shoe in play: the next shoe's reports wait
    t = rig.table
    comp = shoe_composition(rig.rules.decks)
    for msg in (ShuffleComplete(312, comp), ShuffleProgress(5, 1), ShuffleComplete(312, comp)):
        t.apply(DeviceMessage("shuffler", msg))
    assert len(t.shoe.deferred) == 3
    caused = t.apply(VoidShoe("sup-1", Role.SUPERVISOR))
    assert t.shoe.state == "verifying" and t.shoe.deferred == []
    assert sum(e.reason is Reason.OUT_OF_ORDER_REPORT for e in caused) == 2


# ---- 3. CardRead.index ------------------------------------------------------------------------

def test_a_repeated_index_is_never_dealt_twice() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1)
    rig.read("TH")
    before = Counter(rig.table.shoe.out)
    caused = shoe(rig, CardRead(rig.index, Card.parse("TH"), Orientation.FACE_DOWN, 0))  # the same read again
    assert [e.reason for e in caused] == [Reason.REPEATED_READ]
    assert rig.table.shoe.out == before
    assert [c for c, _ in rig.round.assignments] == cards("TH")
    rig.read("9S")  # the next index goes on normally, to the dealer
    assert [c for c, _ in rig.round.assignments] == cards("TH 9S")
    rig.assert_ledger()


def test_a_repeated_index_that_carries_another_card_is_an_integrity_alarm_not_a_repeat() -> None:
    """A resend carries the card its index was first read as. #3 read again as another card is a
    damaged or forged read: journaled as a plain REPEATED_READ it passed as a duplicate. The first
    read stands, this one goes nowhere, the round is held and no round opens until a supervisor has
    looked at the shoe."""
    rig = TableRig(HouseRules.default())
    rig.bets(1)
    rig.deal("TH 9S")
    before = Counter(rig.table.shoe.out)
    caused = shoe(rig, CardRead(3, Card.parse("AS"), Orientation.FACE_DOWN, 0))  # #1 the burn card, #3 9S
    assert [e.reason for e in caused] == [Reason.CONFLICTING_READ, Reason.ROUND_HELD]
    alarm = caused[0]
    assert alarm.severity is Severity.ALARM
    assert alarm.data == {"index": 3, "card": "AS", "first_card": "9S", "last": 3}
    assert alarm.message.startswith("card #3 read again as AS, first read as 9S: one index, two cards (a damaged "
                                    "or forged read); the first read stands, this one is not dealt")
    assert rig.table.shoe.out == before and [c for c, _ in rig.round.assignments] == cards("TH 9S")
    assert [e.reason for e in shoe(rig, CardRead(3, Card.parse("9S"), Orientation.FACE_DOWN, 0))] == [
        Reason.REPEATED_READ]  # the same card again: a resend
    rig.table.apply(Redeal("sup-1", Role.SUPERVISOR))
    [alarm_id] = [a.id for a in rig.table.alarms.of(Reason.CONFLICTING_READ)]
    with pytest.raises(TableError, match=f"conflicting read alarm {alarm_id} is open: a supervisor looks at the shoe "
                                         f"and clears it with clear_alarm first"):
        rig.table.apply(OpenRound())
    rig.table.apply(ClearAlarm(alarm_id, "sup-1", Role.SUPERVISOR))
    rig.table.apply(OpenRound())
    rig.assert_ledger()


def test_the_cards_read_by_index_survive_a_snapshot_an_older_one_compares_none_a_bad_one_is_refused() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1)
    rig.deal("TH")
    rig.unreadable()
    snap = json.loads(json.dumps(snapshot(rig.table)))
    assert snap["read_cards"] == {"1": "2C", "2": "TH"}  # the burn card, the box's card (#3: unreadable)
    table = restore(rig.table.rules, rig.events.append, snap, hold=False, clock=rig.clock)
    caused = table.apply(DeviceMessage("shoe-reader", CardRead(2, Card.parse("TD"), Orientation.FACE_DOWN, 0)))
    assert Reason.CONFLICTING_READ in [e.reason for e in caused]
    older = {key: value for key, value in snap.items() if key not in ("read_cards", "shoe_count_short")}
    table = restore(rig.table.rules, rig.events.append, {**older, "version": 6}, hold=False, clock=rig.clock)
    assert table.read_cards == {}  # not known: a repeat of these is not compared
    caused = table.apply(DeviceMessage("shoe-reader", CardRead(2, Card.parse("TD"), Orientation.FACE_DOWN, 0)))
    reasons = [e.reason for e in caused]
    assert Reason.REPEATED_READ in reasons and Reason.CONFLICTING_READ not in reasons
    for key in ("4", "0", "x", "١"):  # beyond the last index, none, no number, a digit that is not ASCII
        with pytest.raises(SnapshotError, match=rf"\$.read_cards key '{key}' is not an index read since the load "
                                                r"\(1..3\)"):
            restore(rig.table.rules, rig.events.append, {**snap, "read_cards": {key: "2C"}}, clock=rig.clock)
    with pytest.raises(SnapshotError, match=r"\$.read_cards\['2'\]: 'XX' is not a card"):
        restore(rig.table.rules, rig.events.append, {**snap, "read_cards": {"2": "XX"}}, clock=rig.clock)


def test_a_skipped_index_is_an_alarm_naming_the_missing_read_and_holds_the_round() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1)
    rig.read("TH")
    rig.index += 1  # #k never arrives
    missing = rig.index
    rig.read("9S")
    alarm = rig.find(Reason.MISSING_READ)
    assert len(alarm) == 1 and alarm[0].severity is Severity.ALARM and f"#{missing}" in alarm[0].message
    assert alarm[0].data["first_missing"] == missing == alarm[0].data["last_missing"]
    assert rig.round.held is not None
    assert [c for c, _ in rig.round.assignments] == cards("TH")  # held: 9S waits, not dealt
    rig.assert_ledger()


def test_an_unreadable_card_takes_its_index_too() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1)
    rig.unreadable()
    caused = shoe(rig, UnreadableCard(rig.index, 0))
    assert [e.reason for e in caused] == [Reason.REPEATED_READ]


def test_a_shoe_loaded_mid_round_really_blocks_dealing() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1)
    rig.read("TH")
    shoe(rig, ShoeLoaded(0))
    assert rig.table.shoe.state == "refused" and rig.round.held is not None
    rig.index = 0
    rig.read("9S")  # the reloaded shoe counts from 1 again: not a repeat, but never dealt
    assert [c for c, _ in rig.round.assignments] == cards("TH")
    assert rig.find(Reason.DEALING_BLOCKED)[-1].data["card"] == "9S"
    rig.assert_ledger()


def test_a_shuffler_identifying_on_the_shoe_readers_port_is_refused_with_one_event_and_its_reads_not_dealt() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1)
    caused = shoe(rig, Ident(DeviceRole.SHUFFLER, "sim", "imposter", "1.0.0", 1, 0, 99))
    wrong = [e for e in caused if e.reason is Reason.WRONG_DEVICE]
    assert len(wrong) == 1 and wrong[0].severity is Severity.ALARM and "SHUFFLER" in wrong[0].message
    assert not rig.table.reader.usable and rig.round.held is not None
    shoe(rig, Heartbeat(1))
    rig.read("TH")
    assert rig.round.assignments == []
    rig.assert_ledger()
    with pytest.raises(OverrideRefused, match="shoe-reader is connecting"):
        rig.table.apply(Resume("sup-1", Role.SUPERVISOR))
    # the right device identifies again: usable
    shoe(rig, Ident(DeviceRole.SHOE, "sim", "shoe-reader-1", "1.0.0", 1, 0, 7))
    assert rig.table.reader.usable



def test_a_shuffler_on_the_shoe_readers_port_after_an_unplug_holds_the_round_as_wrong_device_once() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1)
    rig.table.apply(LinkDown("shoe-reader"))
    assert rig.round.held == "DEVICE_OFFLINE: shoe-reader offline"
    rig.table.apply(LinkUp("shoe-reader"))  # offline -> connecting: no refusal is a transition now
    imposter = Ident(DeviceRole.SHUFFLER, "sim", "imposter", "1.0.0", 1, 0, 99)
    caused = shoe(rig, imposter) + shoe(rig, imposter)  # a handshake's IDENT comes twice
    assert [e.reason for e in caused if e.reason in (Reason.WRONG_DEVICE, Reason.ROUND_HELD)] == \
        [Reason.WRONG_DEVICE, Reason.ROUND_HELD]
    assert rig.round.held == "WRONG_DEVICE: shoe-reader: a device of another role on its port"
    assert set(rig.table.holds) == {"DEVICE_OFFLINE", "WRONG_DEVICE"}
    rig.table.apply(LinkDown("shoe-reader"))  # plugged in again: another connection, another alarm
    rig.table.apply(LinkUp("shoe-reader"))
    assert [e.reason for e in shoe(rig, imposter)].count(Reason.WRONG_DEVICE) == 1



def test_a_reader_back_from_stale_while_it_waits_for_its_ident_is_no_wrong_device() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1)
    rig.table.apply(LinkDown("shoe-reader"))
    rig.table.apply(LinkUp("shoe-reader"))
    rig.clock.now += 10
    rig.table.apply(Tick())
    assert rig.table.reader.state == "stale"
    shoe(rig, Heartbeat(1))  # back to connecting: the same device, still to identify
    assert rig.table.reader.state == "connecting" and "WRONG_DEVICE" not in rig.table.holds


# ---- what the hostile property test (test_table_hostile.py) explores, pinned one by one ------

def test_a_negative_remainder_count_is_a_documented_refusal_not_a_bare_value_error() -> None:
    rig = TableRig(HouseRules.default())
    shoe(rig, ShoeEmpty(rig.index, 0))
    assert rig.table.shoe.state == "complete"
    with pytest.raises(RemainderError, match="AC: -1"):
        rig.table.apply(ShoeRemainder({Card.parse("AC"): -1}, "dealer-1"))
    assert rig.table.shoe.state == "complete"
