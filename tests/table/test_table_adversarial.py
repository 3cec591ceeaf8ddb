"""Adversarial QA of the deal tracker: odd input orders, power losses at awkward moments, overrides."""
from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from devices.tracker.inputs import (
    Act, CardsToBoxWithoutWager, DealerChange, DeviceMessage, DrawnInErrorDecision, HandShuffled, LinkDown, LinkUp,
    NoMoreBets, OpenRound, PlaceBet, Redeal, Resume, ShoeRemainder, ShuffleStarted, VoidShoe,
)
from devices.events import Reason, Role
from devices.game.round import Action
from devices.errors import RuleViolation, TableError
from devices.game.rules import HouseRules
from devices.tracker.snapshot import restore, snapshot
from cardd.daemon.state import table_state
from core.cards import Card
from firmware_bridge.messages import CutCardSeen, Fault, FaultCode, ShoeEmpty, ShoeLoaded

from tests.table.table_rig import RULES_DIR, TableRig, cards

pytestmark = pytest.mark.timeout(60)


def _power_cycle(rig: TableRig):
    snap = json.loads(json.dumps(snapshot(rig.table)))
    return restore(rig.rules, lambda e: None, snap, clock=rig.clock)


def test_a_round_voided_by_a_face_up_card_stays_void_after_a_power_loss() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1, 2)
    rig.deal("5H 6H")
    rig.read("7H", face_up=True)  # misload: the round is void by rule
    assert rig.round.state == "void"
    t = _power_cycle(rig)
    assert t.round.state == "void" and not t.round_live
    assert t.placed() == +t.shoe.out  # the void round's cards are in the discard, once


def test_a_round_voided_by_a_supervisors_redeal_stays_void_after_a_power_loss() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1)
    rig.deal("5H 6H 7H 8H")
    rig.table.apply(Redeal("sup-1", Role.SUPERVISOR))
    t = _power_cycle(rig)
    assert t.round.state == "void" and not t.round_live
    assert t.placed() == +t.shoe.out


@pytest.mark.parametrize("load", [False, True])
def test_voiding_a_shoe_that_cannot_be_void_is_one_clear_refusal_and_no_override(load: bool) -> None:
    rig = TableRig(HouseRules.default(), load=load)
    if load:
        rig.table.apply(VoidShoe("sup-1", Role.SUPERVISOR))  # void already
    mark, before = len(rig.events), json.dumps(snapshot(rig.table))
    with pytest.raises(TableError, match=f"the shoe is {rig.table.shoe.state}"):
        rig.table.apply(VoidShoe("sup-1", Role.SUPERVISOR))
    assert rig.since(mark) == []  # no OVERRIDE journaled for a void that did not happen
    assert json.dumps(snapshot(rig.table)) == before


def test_a_hand_shuffle_cannot_stand_in_for_the_shufflers_count_at_an_automatic_table() -> None:
    rig = TableRig(HouseRules.default())  # shuffle = "automatic"
    rig.table.apply(VoidShoe("sup-1", Role.SUPERVISOR))
    before = json.dumps(snapshot(rig.table))
    with pytest.raises(TableError, match='shuffle = "automatic"'):
        rig.table.apply(HandShuffled("dealer-1"))
    assert json.dumps(snapshot(rig.table)) == before and rig.table.shoe.state == "void"


def test_a_hand_shuffle_declared_mid_shoe_is_one_clear_refusal() -> None:
    rig = TableRig.from_file(RULES_DIR / "casino-003.toml")  # hand-shuffled
    assert rig.table.shoe.state == "in_play"
    before = json.dumps(snapshot(rig.table))
    with pytest.raises(TableError, match="the shoe is in_play"):
        rig.table.apply(HandShuffled("dealer-1"))
    assert json.dumps(snapshot(rig.table)) == before


def test_a_machine_shuffle_at_a_hand_shuffle_table_is_refused_naming_the_rule_and_hand_shuffled() -> None:
    rig = TableRig.from_file(RULES_DIR / "casino-003.toml", load=False)  # shoe.shuffle = "hand"
    before = json.dumps(snapshot(rig.table))
    assert rig.table.machine_shuffle_refused() is not None
    with pytest.raises(TableError, match=r'\(casino-003\) say \[shoe\] shuffle = "hand".*declare the shoe with hand_shuffled'):
        rig.table.apply(ShuffleStarted("tech-1"))
    assert json.dumps(snapshot(rig.table)) == before
    assert TableRig.from_file(RULES_DIR / "casino-000.toml", load=False).table.machine_shuffle_refused() is None


def test_a_dealer_change_during_the_last_round_journals_that_no_card_burns() -> None:
    rig = TableRig.from_file(RULES_DIR / "casino-003.toml")  # burns one card on a dealer change
    rig.bets(1)
    rig.read("5H")
    rig.table.apply(DeviceMessage("shoe-reader", CutCardSeen(rig.index + 1, 0)))  # this round is the last of the shoe
    rig.deal("6H 7H")
    rig.table.apply(DealerChange("dealer-2"))  # "one card burns after this round" ...
    rig.table.apply(Act(1, Action.STAND, "p1"))
    rig.deal("TC 5C")
    assert rig.table.shoe.state == "complete"
    changes = rig.find(Reason.DEALER_CHANGE_BURN)
    assert len(changes) == 2 and "no burn" in changes[-1].message and changes[-1].who == "dealer-2"


@pytest.mark.parametrize("trouble", ["fault", "connecting"])
def test_a_shoe_loaded_from_a_reader_in_fault_or_not_yet_identified_is_taken_without_a_crash(trouble: str) -> None:
    rig = TableRig(HouseRules.default(), load=False)
    rig.shuffle_ok()
    if trouble == "fault":
        rig.table.apply(DeviceMessage("shoe-reader", Fault(FaultCode.COVER_OPEN, 0, "lid open")))
    else:
        rig.table.apply(LinkDown("shoe-reader"))
        rig.table.apply(LinkUp("shoe-reader"))
    assert rig.table.reader.state == trouble
    rig.table.apply(DeviceMessage("shoe-reader", ShoeLoaded(0)))  # the device's message: never a crash on the host
    assert rig.table.reader.state == trouble and rig.table.shoe.state == "burning"


def test_a_supervisor_who_resumes_a_redeal_that_got_another_card_continues_with_the_cards_as_they_come() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1)
    rig.deal("TH 9S 5D")
    rig.table.apply(CardsToBoxWithoutWager("sup-1", Role.SUPERVISOR))  # TH 9S 5D go back on the shoe
    rig.read("9S")  # the dealer put them back in another order: held, one alarm
    assert rig.round.held is not None
    mark = len(rig.events)
    rig.table.apply(Resume("sup-1", Role.SUPERVISOR))
    assert rig.round.held is None  # not held again by the same card at once
    assert Reason.ROUND_HELD not in rig.since(mark)
    decided = [e for e in rig.events[mark:] if e.reason is Reason.CARDS_TO_BOX_WITHOUT_WAGER]
    assert len(decided) == 1 and decided[0].who == "sup-1"
    rig.deal("TH 5D")
    r = rig.round
    assert r.state == "players" and r.box_hands[1][0].cards == cards("9S 5D") and r.dealer_cards == cards("TH")
    rig.assert_ledger()
    assert _power_cycle(rig).round.box_hands[1][0].cards == cards("9S 5D")


def test_a_redeal_of_a_held_redeal_leaves_no_hold_in_the_round_the_state_or_the_snapshot() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1)
    rig.deal("TH 9S 5D")
    rig.table.apply(CardsToBoxWithoutWager("sup-1", Role.SUPERVISOR))
    rig.read("9S")  # back in another order: held
    assert rig.round.hold_cause is Reason.CARDS_TO_BOX_WITHOUT_WAGER
    rig.table.apply(CardsToBoxWithoutWager("sup-1", Role.SUPERVISOR))  # the supervisor takes them back again
    r = rig.round
    assert (r.held, r.hold_cause, rig.table.holds) == (None, None, {})
    assert table_state(rig.table, {"shuffler": True, "shoe-reader": True}, 0)["round"]["held"] is None
    restored = restore(rig.rules, lambda e: None, json.loads(json.dumps(snapshot(rig.table))), hold=False,
                       clock=rig.clock).round
    assert restored is not None and (restored.held, restored.hold_cause) == (None, None)


@pytest.mark.parametrize("key, count", [("AS", 1), (Card.parse("AS"), -1), (Card.parse("AS"), 1.0), (Card.parse("AS"), True)])
def test_a_remainder_count_that_is_not_a_card_with_a_count_is_one_clear_error(key, count) -> None:
    rig = TableRig(HouseRules.default())
    rig.table.apply(DeviceMessage("shoe-reader", ShoeEmpty(rig.index, 0)))
    assert rig.table.shoe.state == "complete"
    remainder = Counter(rig.table.shoe.counted)
    remainder.subtract(rig.table.shoe.out)
    returned = dict(+remainder)
    returned[key] = count  # e.g. a card given as text: it was ignored and the shoe "reconciled"
    with pytest.raises(ValueError, match=re.escape(f"{key if isinstance(key, Card) else repr(key)}: {count!r}")):
        rig.table.apply(ShoeRemainder(returned, "dealer-1"))
    assert rig.table.shoe.state == "complete"  # nothing decided on a bad count


def test_no_bet_is_taken_once_a_card_of_the_round_has_left_the_shoe() -> None:
    # seed 000 3.5: no bet placed or raised after the first card of the round has been dealt; a card
    # out during betting is the next card (box 1's here): a bet placed after seeing it is refused
    rig = TableRig(HouseRules.default())
    rig.table.apply(OpenRound())
    rig.table.apply(PlaceBet(2, "p2", 1000))
    rig.read("AS")  # out during betting, face down but seen leaving the shoe
    before = json.dumps(snapshot(rig.table), sort_keys=True)
    mark = len(rig.events)
    for bet in (lambda: rig.table.apply(PlaceBet(1, "p1", 1000)), lambda: rig.table.apply(PlaceBet(2, "p2", 1000))):
        with pytest.raises(RuleViolation) as exc:
            bet()
        assert exc.value.rule == "card_out"
    assert json.dumps(snapshot(rig.table), sort_keys=True) == before
    refused = rig.events[mark:]
    assert [e.reason for e in refused] == [Reason.ACTION_REFUSED] * 2 and [e.who for e in refused] == ["p1", "p2"]
    rig.table.apply(NoMoreBets("dealer-1"))
    assert rig.round.box_hands[2][0].cards == cards("AS")


def test_every_card_drawn_in_error_is_named_in_the_journal_from_its_draw_to_its_place() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1)
    rig.deal("TH 5D 9S")
    rig.deal("2S 3S")  # exposed in error while box 1 decides
    rig.table.apply(Act(1, Action.STAND, "p1"))  # the dealer's 5D takes 2S: 7 ... then 3S: 10, and draws on
    rig.deal("8C")  # dealer 18: complete
    rig.read("KC")  # after the dealer's finished hand
    drawn = rig.find(Reason.CARD_DRAWN_IN_ERROR)
    assert [e.data["card"] for e in drawn] == ["KC"]
    rig.table.apply(DrawnInErrorDecision(False, "dealer-1"))
    last = rig.find(Reason.CARD_DRAWN_IN_ERROR)[-1]
    assert last.data["card"] == "KC" and "KC" in last.message and last.who == "dealer-1"


def test_the_cut_card_coming_out_during_the_burn_does_not_end_the_burn() -> None:
    rig = TableRig.from_file(RULES_DIR / "casino-003.toml", load=False)  # burns three cards
    rig.shuffle_ok()
    rig.table.apply(DeviceMessage("shoe-reader", ShoeLoaded(0)))
    rig.read("2C")
    rig.table.apply(DeviceMessage("shoe-reader", CutCardSeen(2, 0)))  # a bad cut: the cut card right behind the first burn card
    with pytest.raises(TableError, match="burn"):
        rig.table.apply(OpenRound())  # two burn cards still to come
    rig.deal("3C 4C")
    assert rig.table.burn_pile == cards("2C 3C 4C") and rig.table.drawn_in_error == []
    assert len(rig.find(Reason.BURN)) == 3 and not rig.find(Reason.CARD_DRAWN_IN_ERROR)
    rig.bets(1)  # the one round the cut card leaves, then the shoe ends
    rig.deal("TH 9S 8D")
    rig.table.apply(Act(1, Action.STAND, "p1"))
    rig.deal("9C")
    assert rig.table.shoe.state == "complete"
    rig.assert_ledger()
