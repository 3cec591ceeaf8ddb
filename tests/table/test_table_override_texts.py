"""An override refused inside a round reads as any refused command ("X refused: why: what to do
next", cardd.daemon.commands.refusal_line): the command people send, never the round's own words
for it (not "round 3: void refused: dealer-1 is dealer; supervisor only"). The API
refuses a missing role before the table sees it, so these were never rewritten; a caller of the
table (a recording, a test, the bench) still meets them, and the journal keeps their OVERRIDE_REFUSED."""
from __future__ import annotations

import pytest

from cardd.daemon.commands import refusal_line
from devices.events import Reason, Role
from devices.errors import OverrideRefused
from devices.tracker.inputs import (COMMAND_NAMES, CardsToBoxWithoutWager, ClearAlarm, PlacementError, Redeal, Resume,
                                    TableInput, VoidShoe)
from devices.tracker.inputs import DeviceMessage
from firmware_bridge.messages import Fault, FaultCode, FaultCleared
from tests.table.table_rig import RULES_DIR, TableRig

pytestmark = pytest.mark.timeout(30)
DEALER = Role.DEALER


def refused_as_dealer(rig: TableRig, record: TableInput) -> str:
    """The refusal's line; the OVERRIDE_REFUSED record says the same, and nothing else changed."""
    mark = len(rig.events)
    with pytest.raises(OverrideRefused) as refused:
        rig.table.apply(record)
    name = COMMAND_NAMES[type(record)]
    line = refusal_line(name, refused.value)
    assert str(refused.value) == line
    (event,) = [e for e in rig.events[mark:] if e.reason is Reason.OVERRIDE_REFUSED]
    assert event.message == line and event.who == "dealer-1" and event.data["override"] == name
    assert [e.reason for e in rig.events[mark:]] == [Reason.OVERRIDE_REFUSED]
    return line


def test_every_override_refused_for_its_role_in_a_round_names_the_command_and_who_sends_it() -> None:
    rig = TableRig.from_file(RULES_DIR / "casino-000.toml")
    rig.bets(1, 2)
    rig.deal("TH 9S")  # the initial deal under way: a placement error may be put right now
    lines = [refused_as_dealer(rig, record) for record in (
        PlacementError("dealer-1", DEALER), CardsToBoxWithoutWager("dealer-1", DEALER),
        Redeal("dealer-1", DEALER), VoidShoe("dealer-1", DEALER))]
    rig.deal("5D 7C 8H")
    rig.table.apply(DeviceMessage("shuffler", Fault(FaultCode.JAM, 17, "stack jam")))
    rig.table.apply(DeviceMessage("shuffler", FaultCleared(FaultCode.JAM)))
    assert rig.round.held is not None
    alarm = min(rig.table.alarms.open)
    lines += [refused_as_dealer(rig, Resume("dealer-1", DEALER)), refused_as_dealer(rig, ClearAlarm(alarm, "dealer-1", DEALER))]
    assert lines == [f"{name} refused: dealer-1 acts as dealer: a supervisor sends it" for name in (
        "placement_error", "cards_to_box_without_wager", "redeal", "void_shoe", "resume", "clear_alarm")]


def test_a_placement_error_after_the_initial_deal_says_when_it_is_taken_and_where_the_round_is() -> None:
    rig = TableRig.from_file(RULES_DIR / "casino-000.toml")
    rig.bets(1)
    rig.deal("TH 9S 5D")  # box 1's two cards and the dealer's: the players act
    with pytest.raises(Exception) as refused:
        rig.table.apply(PlacementError("sup-1", Role.SUPERVISOR))
    assert refusal_line("placement_error", refused.value) == (
        "placement_error refused: a placement error is put right only while the initial deal is under way, and the "
        "players act now")
