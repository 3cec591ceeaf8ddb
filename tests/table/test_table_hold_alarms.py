"""A held round's alarms (ROUND_HELD) end with the supervisor's decision on that round.

A hold whose ROUND_HELD alarm stayed open after the supervisor resumed the round would leave one
more alarm a hold for good, and every STATE and snapshot would carry them all, slower with every
shoe of a long run (cardbench soak). The alarms
of what caused a hold (a shuffler malfunction, a card from a stale reader) still wait for a
supervisor's ClearAlarm: those are incidents of their own.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from devices.events import Event, Reason, Role, Severity
from devices.errors import OverrideRefused
from devices.tracker.inputs import (Act, CardsToBoxWithoutWager, ClearAlarm, DeviceMessage, LinkDown, LinkUp, Redeal,
                                    Resume, VoidShoe)
from devices.tracker.snapshot import restore, snapshot
from devices.game.round import Action
from firmware_bridge.messages import DeviceRole, Fault, FaultCleared, FaultCode, Ident

from tests.table.table_rig import RULES_DIR, TableRig, connect_devices

pytestmark = pytest.mark.timeout(30)
SUP, DEALER = Role.SUPERVISOR, Role.DEALER
RULES = RULES_DIR / "casino-000.toml"  # an automatic shuffler: its fault holds the round


def open_reasons(rig: TableRig) -> list[str]:
    return [a.reason for a in rig.table.alarms.open.values()]


def held_by_a_malfunction(rig: TableRig) -> None:
    """A round dealt to boxes 1 and 2, then held by a shuffler jam, the jam cleared again."""
    rig.bets(1, 2)
    rig.deal("TH 9S 5D 7C 8H")
    rig.table.apply(DeviceMessage("shuffler", Fault(FaultCode.JAM, 17, "stack jam")))
    rig.table.apply(DeviceMessage("shuffler", FaultCleared(FaultCode.JAM)))
    assert rig.round.held is not None


def cleared(rig: TableRig, mark: int) -> list[Event]:
    return [e for e in rig.events[mark:] if e.reason is Reason.ALARM_CLEARED]


def test_a_resumed_round_closes_its_hold_alarm_in_the_supervisors_name_and_keeps_the_malfunctions() -> None:
    rig = TableRig.from_file(RULES)
    assert rig.table.uses_shuffler
    held_by_a_malfunction(rig)
    assert sorted(open_reasons(rig)) == ["ROUND_HELD", "SHUFFLER_MALFUNCTION"]
    hold_alarm = next(a for a in rig.table.alarms.open.values() if a.reason == "ROUND_HELD")
    assert hold_alarm.round == rig.round.round_id
    mark = len(rig.events)
    with pytest.raises(OverrideRefused):  # a dealer cannot resume: the alarm stays
        rig.table.apply(Resume("dealer-1", DEALER))
    assert sorted(open_reasons(rig)) == ["ROUND_HELD", "SHUFFLER_MALFUNCTION"] and not cleared(rig, mark)
    rig.table.apply(Resume("sup-1", SUP))
    assert open_reasons(rig) == ["SHUFFLER_MALFUNCTION"]  # an incident of its own: cleared one by one
    [event] = cleared(rig, mark)
    assert event.who == "sup-1" and event.severity is Severity.INFO
    assert event.data == {"alarm": hold_alarm.id, "alarm_reason": "ROUND_HELD", "round": rig.round.round_id}
    assert rig.reasons().index(Reason.ROUND_RESUMED) < rig.events.index(event)
    malfunction = next(iter(rig.table.alarms.open))
    rig.table.apply(ClearAlarm(malfunction, "sup-2", SUP))
    assert not rig.table.alarms.open


def test_a_resume_refused_while_a_device_is_down_closes_nothing() -> None:
    rig = TableRig.from_file(RULES)
    rig.bets(1)
    rig.deal("TH 5D")
    rig.table.apply(LinkDown("shoe-reader"))
    assert "ROUND_HELD" in open_reasons(rig)
    mark = len(rig.events)
    with pytest.raises(OverrideRefused):
        rig.table.apply(Resume("sup-1", SUP))
    assert "ROUND_HELD" in open_reasons(rig) and not cleared(rig, mark)
    rig.table.apply(LinkUp("shoe-reader"))
    rig.table.apply(DeviceMessage("shoe-reader", Ident(DeviceRole.SHOE, "sim", "shoe-reader-1", "1.0.0", 1, 0, 7)))
    rig.table.apply(Resume("sup-1", SUP))
    assert "ROUND_HELD" not in open_reasons(rig) and len(cleared(rig, mark)) == 1


@pytest.mark.parametrize("decision", ["redeal", "void_shoe"])
def test_a_supervisors_void_of_the_held_round_closes_its_hold_alarm(decision: str) -> None:
    rig = TableRig.from_file(RULES)
    held_by_a_malfunction(rig)
    mark = len(rig.events)
    rig.table.apply(Redeal("sup-1", SUP) if decision == "redeal" else VoidShoe("sup-1", SUP))
    # the supervisor's void is his decision, journaled with who: no alarm of its own (ROUND_VOID, SHOE_VOID)
    assert open_reasons(rig) == ["SHUFFLER_MALFUNCTION"]
    voids = [e for e in rig.events[mark:] if e.reason in (Reason.ROUND_VOID, Reason.SHOE_VOID)]
    assert voids and all(e.severity is Severity.WARNING and e.who == "sup-1" for e in voids)
    [event] = cleared(rig, mark)
    assert event.who == "sup-1" and "voided" in event.message


def test_a_reconstruction_of_the_held_round_closes_its_hold_alarm() -> None:
    rig = TableRig.from_file(RULES)
    rig.bets(1)
    rig.deal("TH 9S 5D")  # the second card went to box 2, which has no wager
    rig.table.apply(DeviceMessage("shuffler", Fault(FaultCode.JAM, 17, "stack jam")))
    rig.table.apply(DeviceMessage("shuffler", FaultCleared(FaultCode.JAM)))
    mark = len(rig.events)
    rig.table.apply(CardsToBoxWithoutWager("sup-1", SUP))
    assert "ROUND_HELD" not in open_reasons(rig)
    assert [e.who for e in cleared(rig, mark)] == ["sup-1"]


def test_a_hold_alarm_of_another_round_stays_open() -> None:
    rig = TableRig.from_file(RULES)
    # an alarm of round 999 left open (by a rule's void, or an older cardd): not this round's decision
    rig.table.alarms.raise_from(Event(Reason.ROUND_HELD, "round", "round 999: held", Severity.ALARM, {"round": 999}))
    held_by_a_malfunction(rig)
    rig.table.apply(Resume("sup-1", SUP))
    assert [a.round for a in rig.table.alarms.open.values() if a.reason == "ROUND_HELD"] == [999]


def test_hold_after_hold_leaves_no_alarm_behind() -> None:
    """The soak's finding: rounds each held and resumed, no alarm open at the end."""
    rig = TableRig.from_file(RULES)
    for n in range(22):  # 6 decks: 24 of each rank and suit
        suit = "CDHS"[n % 4]
        rig.bets(1)
        rig.deal(f"{'TJQK'[n // 4 % 4]}{suit} 9{suit} 7{suit}")  # box 1: 17, the dealer shows a 9
        rig.table.apply(LinkDown("shoe-reader"))
        rig.table.apply(LinkUp("shoe-reader"))
        rig.table.apply(DeviceMessage("shoe-reader", Ident(DeviceRole.SHOE, "sim", "shoe-reader-1", "1.0.0", 1, 0, 7)))
        rig.table.apply(Resume("sup-1", SUP))
        rig.table.apply(Act(1, Action.STAND, "p1"))
        rig.deal(f"8{suit}")  # the dealer's 17
        assert rig.round.state == "complete"
    assert len(rig.find(Reason.ROUND_HELD)) == 22
    assert not rig.table.alarms.open


def test_an_alarms_round_survives_a_snapshot_and_an_older_snapshot_restores() -> None:
    rig = TableRig.from_file(RULES)
    held_by_a_malfunction(rig)
    snap = json.loads(json.dumps(snapshot(rig.table)))
    assert {a["reason"]: a.get("round") for a in snap["alarms"]["open"]} == {
        "SHUFFLER_MALFUNCTION": rig.round.round_id, "ROUND_HELD": rig.round.round_id}
    back = restore(rig.rules, rig.events.append, snap, clock=rig.clock, stale_after_s=3.0, hold=False)
    assert {a.reason: a.round for a in back.alarms.open.values()} == {
        "SHUFFLER_MALFUNCTION": rig.round.round_id, "ROUND_HELD": rig.round.round_id}
    for alarm in snap["alarms"]["open"]:  # what an older cardd wrote: version 4, no round
        alarm.pop("round", None)
    older = restore(rig.rules, rig.events.append, {**snap, "version": 4}, clock=rig.clock, stale_after_s=3.0,
                    hold=False)
    assert {a.reason: a.round for a in older.alarms.open.values()} == {"SHUFFLER_MALFUNCTION": None, "ROUND_HELD": None}


def test_a_round_restored_held_after_a_restart_has_its_hold_alarm_closed_by_the_resume() -> None:
    """A restart brings a live round back held (a ROUND_HELD of that round): the supervisor's
    resume, once the devices are back, closes its alarm."""
    rig = TableRig.from_file(RULES)
    rig.bets(1, 2)
    rig.deal("TH 9S 5D 7C 8H")
    snap = json.loads(json.dumps(snapshot(rig.table)))
    events: list[Event] = []
    back = restore(rig.rules, events.append, snap, clock=rig.clock, stale_after_s=3.0)
    [alarm] = back.alarms.open.values()
    assert (alarm.reason, alarm.round) == ("ROUND_HELD", rig.round.round_id)
    connect_devices(back)
    back.apply(Resume("sup-1", SUP))
    assert not back.alarms.open
    assert [(e.who, e.data["alarm"]) for e in events if e.reason is Reason.ALARM_CLEARED] == [("sup-1", alarm.id)]


def test_a_void_the_rule_decides_stays_an_alarm() -> None:
    """A face-up card voids the round by the rule (seed 000 section 7): the table decided, a supervisor looks."""
    rig = TableRig.from_file(RULES)
    rig.bets(1)
    rig.deal("TH")
    rig.read("9S", face_up=True)
    [void] = rig.find(Reason.ROUND_VOID)
    assert void.severity is Severity.ALARM and void.data["by_rule"]
    assert "ROUND_VOID" in open_reasons(rig)
