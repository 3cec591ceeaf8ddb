"""The shoe's life through the table: verification, burn, cut card, reconciliation, void."""
from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from devices.tracker.inputs import (
    Act, ClearAlarm, DeviceMessage, OpenRound, PlaceBet, ShoeRemainder, ShuffleStarted, VoidShoe,
)
from devices.events import Reason, Role, Severity
from devices.errors import OverrideRefused, TableError
from devices.game.round import Action
from devices.game.rules import HouseRules
from core.cards import ALL_CARDS, Card, shoe_composition
from firmware_bridge.messages import CutCardSeen, DeckCheckResult, ShoeEmpty, ShoeLoaded, ShuffleComplete

from tests.table.table_rig import RULE_FILES, TableRig, cards

pytestmark = pytest.mark.timeout(30)
AUTOMATIC = [p for p in RULE_FILES if TableRig.from_file(p, load=False).table.uses_shuffler]


def composition_with(missing: str = "", extra: str = "", decks: int = 6) -> dict[Card, int]:
    comp = shoe_composition(decks)
    for c in cards(missing):
        comp[c] -= 1
    for c in cards(extra):
        comp[c] += 1
    return comp


@pytest.mark.parametrize("path", AUTOMATIC, ids=lambda p: p.stem)
def test_missing_and_extra_cards_refuse_the_shoe_naming_them(path) -> None:
    rig = TableRig.from_file(path, load=False)
    rig.shuffle(composition_with(missing="AS", extra="7H", decks=rig.rules.decks))
    refused = rig.find(Reason.SHOE_REFUSED)
    assert refused and refused[-1].severity is Severity.ALARM
    assert "missing: AS x1" in refused[-1].message and "extra: 7H x1" in refused[-1].message
    assert rig.table.shoe.state == "refused"
    rig.table.apply(DeviceMessage("shoe-reader", ShoeLoaded(0)))  # loaded anyway: dealing stays blocked
    rig.read("KD")
    assert Reason.DEALING_BLOCKED in rig.reasons()
    with pytest.raises(TableError, match="refused"):
        rig.table.apply(OpenRound())
    assert rig.table.alarms.open  # the alarms wait for a supervisor


def test_the_devices_own_findings_refuse_the_shoe_too() -> None:
    rig = TableRig(HouseRules.default(), load=False)
    check = DeckCheckResult(False, 6, (), (), 2)  # counts look right but two cards were unrecognised
    rig.shuffle(shoe_composition(6), check)
    assert rig.table.shoe.state == "refused"
    assert "unrecognised: 2" in rig.find(Reason.SHOE_REFUSED)[-1].message


def test_count_per_card_not_just_total() -> None:
    """52 cards per deck with one missing and one foreign: the total is right, the shoe is not."""
    rig = TableRig(HouseRules.default(), load=False)
    comp = composition_with(missing="QS", extra="QH")
    assert sum(comp.values()) == 312
    rig.shuffle(comp)
    assert rig.table.shoe.state == "refused"


def test_verified_shoe_burns_then_deals() -> None:
    rig = TableRig(HouseRules.default(), load=False)
    rig.table.apply(ShuffleStarted("dealer-7"))
    rig.shuffle_ok()
    record = rig.find(Reason.SHOE_VERIFIED)[-1].data  # the verification record (NJ, WA)
    assert record["cards"] == 312 and record["decks"] == 6
    assert record["device_serial"] == "shuffler-1" and record["device_model"] == "sim"
    assert record["operator"] == "dealer-7"
    rig.table.apply(DeviceMessage("shoe-reader", ShoeLoaded(0)))
    assert rig.table.shoe.state == "burning"
    rig.read("9H")
    assert rig.find(Reason.BURN) and rig.table.shoe.state == "in_play"
    assert rig.table.burn_pile == [Card.parse("9H")]


def test_host_never_learns_the_order_of_a_stack() -> None:
    """Integrity: what the shuffler reports is a count per card; nothing on the host holds an order."""
    assert {f.name for f in dataclasses.fields(ShuffleComplete)} == {"card_count", "composition"}
    rig = TableRig(HouseRules.default())
    snap = rig.table.shoe.snapshot()
    assert sum(snap["out"].values()) == rig.table.shoe.cards_out  # only what already left the shoe


def play_round(rig: TableRig) -> None:
    rig.bets(1)
    rig.deal("TH 5D 7C")
    rig.table.apply(Act(1, Action.STAND, "p1"))
    rig.deal("TC 6S")


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.stem)
def test_reconciliation_ok_and_failure_alarm(path) -> None:
    for missing_one in (False, True):
        rig = TableRig.from_file(path)
        play_round(rig)
        rig.table.apply(DeviceMessage("shoe-reader", CutCardSeen(rig.index, 0)))
        assert rig.table.shoe.state == "last_round"  # between rounds: the next round is the last
        play_round(rig)
        assert rig.table.shoe.state == "complete"
        remainder = Counter(shoe_composition(rig.rules.decks))
        remainder.subtract(rig.table.shoe.out)
        if missing_one:
            remainder[Card.parse("AC")] -= 1
        caused = rig.table.apply(ShoeRemainder(dict(remainder), "dealer-1"))
        ok = Reason.RECONCILED in [e.reason for e in caused]
        assert ok is not missing_one
        if missing_one:
            failed = rig.find(Reason.RECONCILIATION_FAILED)[-1]
            assert failed.severity is Severity.ALARM and "missing: AC x1" in failed.message
        else:
            assert rig.find(Reason.RECONCILED)


def test_next_shuffle_during_play_waits_for_this_shoes_reconciliation() -> None:
    rig = TableRig(HouseRules.default())
    play_round(rig)
    rig.shuffle(shoe_composition(6))  # the other set of cards, shuffled while this shoe plays
    assert rig.table.shoe.state == "in_play" and len(rig.table.shoe.deferred) == 3
    rig.table.apply(DeviceMessage("shoe-reader", ShoeEmpty(rig.index, 0)))
    assert rig.table.shoe.state == "complete"
    rig.table.apply(DeviceMessage("shoe-reader", ShoeLoaded(0)))  # the next shoe, before this one is reconciled: waits
    remainder = Counter(shoe_composition(6))
    remainder.subtract(rig.table.shoe.out)
    rig.table.apply(ShoeRemainder(dict(remainder), "dealer-1"))
    assert rig.table.shoe.state == "burning"  # verified and loaded from the deferred messages
    assert rig.table.shoe.cards_out == 0


def test_void_shoe_needs_a_supervisor() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1)
    with pytest.raises(OverrideRefused):
        rig.table.apply(VoidShoe("dealer-1", Role.DEALER))
    rig.table.apply(VoidShoe("sup-1", Role.SUPERVISOR))
    assert rig.table.shoe.state == "void" and rig.round.state == "void"
    assert rig.find(Reason.SHOE_VOID)[-1].who == "sup-1"


def test_alarm_survives_until_a_supervisor_clears_it() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1)
    rig.read("QD", face_up=True)
    alarm_id = next(a.id for a in rig.table.alarms.open.values() if a.reason == "FACE_UP_CARD")
    with pytest.raises(OverrideRefused):
        rig.table.apply(ClearAlarm(alarm_id, "dealer-1", Role.DEALER))
    rig.table.apply(ClearAlarm(alarm_id, "sup-1", Role.SUPERVISOR))
    assert alarm_id not in rig.table.alarms.open
    assert rig.find(Reason.ALARM_CLEARED)[-1].who == "sup-1"


def test_every_card_code_is_countable() -> None:
    assert len(ALL_CARDS) == 52 and sum(shoe_composition(8).values()) == 416


def test_round_inputs_without_a_round_get_one_clear_error() -> None:
    rig = TableRig(HouseRules.default())
    with pytest.raises(TableError) as refused:
        rig.table.apply(PlaceBet(1, "p1", 1000))
    # what cardctl round bet prints after "cardctl: ": no class names (PlaceBet, OpenRound) a dealer never typed
    assert str(refused.value) == "no round is open: open one with open_round first"


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.stem)
@pytest.mark.parametrize("where,misplaced", [("aim", False), ("early", True), ("last_deck", True)])
def test_the_cut_card_must_come_out_where_the_cut_rules_put_it(path, where: str, misplaced: bool) -> None:
    rig = TableRig.from_file(path)
    shoe, total = rig.table.shoe, 52 * rig.rules.decks
    at = {"aim": round(total * rig.rules.shoe.penetration), "early": 40, "last_deck": total - 30}[where]
    stack = [c for c, n in shoe_composition(rig.rules.decks).items() for _ in range(n)]
    for card in stack[shoe.cards_out:at]:  # cards counted out by the shoe (no round: only the count matters)
        shoe.card_out(card)
    rig.table.apply(DeviceMessage("shoe-reader", CutCardSeen(at, 0)))
    assert shoe.state == "last_round"
    found = rig.find(Reason.CUT_CARD_MISPLACED)
    assert bool(found) is misplaced
    if misplaced:
        lo, hi = shoe.cut_window()
        assert found[0].severity is Severity.WARNING and f"after {at} cards" in found[0].message
        assert f"{lo}..{hi}" in found[0].message and lo >= 52 * rig.rules.shoe.min_cut_decks
