"""Scenario table: every detection and table procedure (docs/deal-tracking.md), under each rules file.

Each scenario stacks the shoe (the cards read, in order), gives the dealer's and
supervisor's inputs, and checks the reason codes journaled, where the cards went and the
settlement. A stacked round used throughout, boxes 1 and 2 with a wager:
    deal "TH 9S 5D 7C 8H" -> box 1: TH 7C (17), box 2: 9S 8H (17), dealer shows 5D.
"""
from __future__ import annotations

import pytest

from devices.tracker.inputs import (
    Act, CardsToBoxWithoutWager, ClearAlarm, CloseInsurance, DealerChange, DeviceMessage, DrawnInErrorDecision,
    EnterCard, LinkDown, LinkUp, OpenRound, PlacementError, Redeal, Resume, Tick,
)
from devices.events import Reason, Role, Severity
from devices.errors import OverrideRefused, RoundHeld, RuleViolation, TableError
from devices.game.round import Action
from core.cards import Card
from firmware_bridge.messages import (CutCardSeen, DeviceRole, DeviceState, Fault, FaultCleared, FaultCode, Ident,
                                      Status)

from tests.table.table_rig import RULE_FILES, TableRig, cards

pytestmark = pytest.mark.timeout(30)
SUP, DEALER = Role.SUPERVISOR, Role.DEALER


@pytest.fixture(params=RULE_FILES, ids=lambda p: p.stem)
def rig(request) -> TableRig:
    return TableRig.from_file(request.param)


def in_order(reasons: list[Reason], *expected: Reason) -> bool:
    it = iter(reasons)
    return all(any(r is e for r in it) for e in expected)


def start_round(rig: TableRig) -> None:
    rig.bets(1, 2)
    rig.deal("TH 9S 5D 7C 8H")
    assert rig.round.state == "players"


def finish_round(rig: TableRig) -> None:
    """Both boxes stand on 17; the dealer's 5 draws TC (15) then 6S (21): both boxes lose."""
    rig.table.apply(Act(1, Action.STAND, "p1"))
    rig.table.apply(Act(2, Action.STAND, "p2"))
    rig.deal("TC 6S")
    assert rig.round.state == "complete"


def test_plain_round_assigns_every_card_and_settles(rig: TableRig) -> None:
    start_round(rig)
    finish_round(rig)
    stake = rig.rules.table.min_per_player
    assert rig.nets() == {"p1": str(-stake), "p2": str(-stake)}
    assert [str(c) for c in rig.round.dealer_cards] == ["5D", "TC", "6S"]
    assert len(rig.table.burn_pile) == rig.rules.shoe.burn_after_shuffle
    rig.assert_ledger()


def test_shuffler_malfunction_holds_round_until_supervisor_declares_redeal(rig: TableRig) -> None:
    if not rig.table.uses_shuffler:  # hand-shuffled: the shuffler plays no part, its fault holds nothing
        start_round(rig)
        rig.table.apply(DeviceMessage("shuffler", Fault(FaultCode.JAM, 17, "stack jam")))
        assert rig.round.held is None and Reason.SHUFFLER_MALFUNCTION not in rig.reasons()
        return
    start_round(rig)
    mark = len(rig.events)
    rig.table.apply(DeviceMessage("shuffler", Fault(FaultCode.JAM, 17, "stack jam")))
    assert in_order(rig.since(mark), Reason.DEVICE_FAULT, Reason.SHUFFLER_MALFUNCTION, Reason.ROUND_HELD)
    with pytest.raises(RoundHeld):
        rig.table.apply(Act(1, Action.STAND, "p1"))
    with pytest.raises(OverrideRefused):
        rig.table.apply(Redeal("dealer-1", DEALER))
    rig.table.apply(Redeal("sup-1", SUP))
    assert in_order(rig.since(mark), Reason.OVERRIDE, Reason.ROUND_VOID, Reason.REDEAL)
    assert rig.round.state == "void"
    assert rig.find(Reason.OVERRIDE)[-1].who == "sup-1"
    assert rig.round.settlement is None
    rig.assert_ledger()


def test_shuffler_malfunction_never_continues_silently(rig: TableRig) -> None:
    start_round(rig)
    rig.table.apply(DeviceMessage("shuffler", Fault(FaultCode.MOTOR, 0, "")))
    if not rig.table.uses_shuffler:
        assert rig.round.held is None
        return
    with pytest.raises(OverrideRefused):  # the device is still in fault
        rig.table.apply(Resume("sup-1", SUP))
    rig.table.apply(DeviceMessage("shuffler", FaultCleared(FaultCode.MOTOR)))
    assert rig.round.held is not None  # the fault clearing alone does not resume
    with pytest.raises(OverrideRefused):
        rig.table.apply(Resume("dealer-1", DEALER))
    rig.table.apply(Resume("sup-1", SUP))
    assert Reason.ROUND_RESUMED in rig.reasons()
    finish_round(rig)
    rig.assert_ledger()


def test_face_up_card_is_a_misload_redeal_and_assigned_to_no_hand(rig: TableRig) -> None:
    rig.bets(1, 2)
    rig.deal("TH 9S")
    mark = len(rig.events)
    rig.read("QD", face_up=True)
    assert in_order(rig.since(mark), Reason.FACE_UP_CARD, Reason.REDEAL, Reason.ROUND_VOID)
    assert rig.round.state == "void"
    assert Card.parse("QD") in rig.table.discard
    assert all(str(c) != "QD" for c, _ in rig.round.assignments)
    assert Reason.OVERRIDE not in rig.since(mark)  # the rule voids it, no one overrides anything
    rig.assert_ledger()
    rig.table.apply(OpenRound())  # the re-deal can start


def test_card_seen_more_often_than_the_shoe_holds_is_foreign(rig: TableRig) -> None:
    decks = rig.rules.decks
    rig.bets(1)
    rig.deal("TC 5D 2H")  # box 1: 12, dealer 5
    for _ in range(decks):  # every ace of spades the shoe holds: 12 + decks stays under 21
        rig.table.apply(Act(1, Action.HIT, "p1"))
        rig.read("AS")
    assert Reason.FOREIGN_CARD not in rig.reasons()
    rig.table.apply(Act(1, Action.HIT, "p1"))
    mark = len(rig.events)
    rig.read("AS")  # one more than the shoe holds
    assert in_order(rig.since(mark), Reason.FOREIGN_CARD, Reason.ROUND_HELD)
    foreign = rig.find(Reason.FOREIGN_CARD)[-1]
    assert foreign.severity is Severity.ALARM and foreign.data["seen"] == decks + 1
    assert rig.table.discard[-1] == Card.parse("AS")
    assert rig.round.held is not None
    rig.assert_ledger()
    rig.table.apply(Redeal("sup-1", SUP))
    with pytest.raises(TableError, match="foreign card alarm"):  # no more dealing until a supervisor looked
        rig.table.apply(OpenRound())
    alarm = next(a.id for a in rig.table.alarms.open.values() if a.reason == "FOREIGN_CARD")
    rig.table.apply(ClearAlarm(alarm, "sup-1", SUP))
    rig.table.apply(OpenRound())


def test_stale_shoe_reader_holds_round_refuses_its_reads_and_needs_device_and_supervisor(rig: TableRig) -> None:
    start_round(rig)
    mark = len(rig.events)
    rig.clock.now += 10
    rig.table.apply(Tick())
    assert in_order(rig.since(mark), Reason.DEVICE_STALE, Reason.ROUND_HELD)
    rig.read("4S")
    assert Reason.READ_FROM_STALE_DEVICE in rig.since(mark)
    assert rig.table.discard[-1] == Card.parse("4S")
    with pytest.raises(OverrideRefused, match="shoe-reader is stale"):
        rig.table.apply(Resume("sup-1", SUP))
    rig.heartbeat()  # the device is back ...
    assert rig.round.held is not None  # ... but the round waits for the supervisor
    with pytest.raises(OverrideRefused):
        rig.table.apply(Resume("dealer-1", DEALER))
    rig.table.apply(Resume("sup-1", SUP))
    finish_round(rig)
    rig.assert_ledger()


def test_unreadable_card_from_a_stale_reader_goes_to_no_hand(rig: TableRig) -> None:
    start_round(rig)
    rig.clock.now += 10
    rig.table.apply(Tick())
    mark = len(rig.events)
    rig.unreadable()
    refused = rig.find(Reason.READ_FROM_STALE_DEVICE)
    assert refused and refused[-1].severity is Severity.ALARM and Reason.UNREADABLE_CARD not in rig.since(mark)
    assert rig.round.flags == []  # not the round's card: nothing to flag
    rig.table.apply(EnterCard(Card.parse("4S"), "dealer-1"))  # entered only so the count stays right
    assert rig.table.discard[-1] == Card.parse("4S") and rig.table.pending == []
    assert rig.find(Reason.CARD_ENTERED_BY_DEALER)[-1].data["to_discard"] is True
    rig.assert_ledger()
    rig.heartbeat()
    rig.table.apply(Resume("sup-1", SUP))
    finish_round(rig)
    assert all(c != Card.parse("4S") for c, _ in rig.round.assignments)
    rig.assert_ledger()


def test_offline_device_mid_round_holds_until_it_is_back(rig: TableRig) -> None:
    start_round(rig)
    rig.table.apply(LinkDown("shoe-reader"))
    assert rig.round.held is not None and Reason.DEVICE_OFFLINE in rig.reasons()
    rig.table.apply(LinkUp("shoe-reader"))
    with pytest.raises(OverrideRefused, match="connecting"):
        rig.table.apply(Resume("sup-1", SUP))
    rig.table.apply(DeviceMessage("shoe-reader", Ident(DeviceRole.SHOE, "sim", "shoe-reader-1", "1.0.0", 1, 0, 8)))
    rig.table.apply(Resume("sup-1", SUP))
    finish_round(rig)


def test_card_exposed_in_error_is_used_as_the_next_card(rig: TableRig) -> None:
    start_round(rig)
    mark = len(rig.events)
    rig.read("2S")  # nobody asked for a card: box 1 has not decided yet
    assert Reason.CARD_EXPOSED_IN_ERROR in rig.since(mark)
    assert rig.table.pending == [Card.parse("2S")]
    rig.table.apply(Act(1, Action.HIT, "p1"))  # the exposed card is box 1's hit card: 19
    assert rig.round.box_hands[1][0].cards[-1] == Card.parse("2S")
    assert rig.table.pending == []
    rig.table.apply(Act(1, Action.STAND, "p1"))
    rig.table.apply(Act(2, Action.STAND, "p2"))
    rig.deal("TC 6S")
    stake = rig.rules.table.min_per_player
    assert rig.nets() == {"p1": str(-stake), "p2": str(-stake)}  # dealer 21
    rig.assert_ledger()


def test_cards_exposed_in_error_go_to_the_dealer_next_and_one_not_needed_waits_for_the_dealer(rig: TableRig) -> None:
    start_round(rig)
    rig.deal("2S 3S 4S 5S 6S")  # all exposed while box 1 decides
    assert len(rig.find(Reason.CARD_EXPOSED_IN_ERROR)) == 5
    rig.table.apply(Act(1, Action.STAND, "p1"))
    rig.table.apply(Act(2, Action.STAND, "p2"))  # the dealer's 5D takes 2S 3S 4S 5S: 19, stands
    assert [str(c) for c in rig.round.dealer_cards] == "5D 2S 3S 4S 5S".split()
    assert rig.round.state == "complete" and rig.table.drawn_in_error == [Card.parse("6S")]
    assert "#" not in rig.find(Reason.CARD_DRAWN_IN_ERROR)[-1].message
    rig.table.apply(DrawnInErrorDecision(True, "dealer-1"))
    rig.assert_ledger()


@pytest.mark.parametrize("exposed", [True, False], ids=["exposed", "not-exposed"])
def test_card_drawn_in_error_after_dealers_finished_hand(rig: TableRig, exposed: bool) -> None:
    start_round(rig)
    finish_round(rig)
    burn_before = len(rig.table.burn_pile)
    rig.read("KC")
    assert rig.find(Reason.CARD_DRAWN_IN_ERROR)
    with pytest.raises(TableError, match="drawn in error"):
        rig.table.apply(OpenRound())  # the dealer must say first
    rig.table.apply(DrawnInErrorDecision(exposed, "dealer-1"))
    if exposed:
        assert rig.table.discard[-1] == Card.parse("KC")
    else:
        assert rig.table.burn_pile[-1] == Card.parse("KC") and len(rig.table.burn_pile) == burn_before + 1
    rig.assert_ledger()
    rig.table.apply(OpenRound())


def test_placement_error_in_initial_deal_is_reconstructed(rig: TableRig) -> None:
    rig.bets(1, 2)
    rig.deal("TH 9S")
    with pytest.raises(OverrideRefused):
        rig.table.apply(PlacementError("dealer-1", DEALER))
    rig.table.apply(PlacementError("sup-1", SUP))
    assert Reason.PLACEMENT_ERROR in rig.reasons()
    rig.deal("5D 7C 8H")
    finish_round(rig)
    rig.assert_ledger()


def test_cards_to_box_without_wager_are_reconstructed_and_redealt(rig: TableRig) -> None:
    start_round(rig)
    out_before = rig.table.shoe.cards_out
    rig.table.apply(CardsToBoxWithoutWager("sup-1", SUP))
    assert Reason.CARDS_TO_BOX_WITHOUT_WAGER in rig.reasons()
    assert rig.table.shoe.cards_out == out_before - 5  # back on top of the shoe
    rig.deal("TH 9S 5D 7C 8H")  # read again, in the same order
    assert rig.round.state == "players"
    finish_round(rig)
    assert rig.table.shoe.cards_out == out_before + 2
    rig.assert_ledger()


def test_a_redeal_takes_back_a_card_exposed_in_error_too(rig: TableRig) -> None:
    start_round(rig)
    rig.read("2S")  # exposed in error: in play, waiting to be the next card
    out_before = rig.table.shoe.cards_out
    rig.table.apply(CardsToBoxWithoutWager("sup-1", SUP))
    assert rig.table.pending == [] and rig.table.shoe.cards_out == out_before - 6
    assert rig.find(Reason.CARDS_TO_BOX_WITHOUT_WAGER)[-1].data["cards"][-1] == "2S"
    rig.deal("TH 9S 5D 7C 8H")  # the same cards again, in the order they left the shoe
    rig.table.apply(Act(1, Action.HIT, "p1"))
    rig.read("2S")
    assert rig.round.box_hands[1][0].cards[-1] == Card.parse("2S")
    assert Reason.ROUND_HELD not in rig.reasons()
    rig.assert_ledger()


def test_a_misload_redeal_discards_a_card_exposed_in_error(rig: TableRig) -> None:
    start_round(rig)
    rig.read("2S")  # exposed in error, waiting
    rig.read("QD", face_up=True)  # misload: the round is void
    assert rig.round.state == "void" and rig.table.pending == []
    assert rig.table.discard[-1] == Card.parse("2S")  # after the misload and the round's cards
    rig.assert_ledger()
    rig.table.apply(OpenRound())


def test_dealer_change_mid_shoe_burns_one_card(rig: TableRig) -> None:
    start_round(rig)
    rig.table.apply(DealerChange("dealer-2"))  # mid-round: the burn waits for the round's end
    finish_round(rig)
    burns_before = len(rig.table.burn_pile)
    if rig.rules.shoe.burn_on_dealer_change == 0:
        assert rig.table.shoe.state == "in_play"
        return
    assert rig.table.shoe.state == "burning"
    rig.read("9D")
    assert len(rig.table.burn_pile) == burns_before + 1 and rig.table.burn_pile[-1] == Card.parse("9D")
    assert rig.table.shoe.state == "in_play"
    assert in_order(rig.reasons(), Reason.DEALER_CHANGE_BURN, Reason.DEALER_CHANGE_BURN, Reason.BURN)
    rig.assert_ledger()


def test_unreadable_card_is_entered_by_the_dealer_and_the_round_flagged(rig: TableRig) -> None:
    rig.bets(1, 2)
    rig.deal("TH")
    rig.unreadable()
    rig.deal("5D 7C")  # keep coming while the dealer looks: queued in order
    assert rig.round.assignments[-1][0] == Card.parse("TH")
    rig.table.apply(EnterCard(Card.parse("9S"), "dealer-1"))
    rig.deal("8H")
    assert in_order(rig.reasons(), Reason.UNREADABLE_CARD, Reason.CARD_ENTERED_BY_DEALER)
    assert rig.round.flags and rig.round.flags[0]["reason"] == "UNREADABLE_CARD"
    assert [str(c) for c in rig.round.box_hands[2][0].cards] == ["9S", "8H"]
    finish_round(rig)
    rig.assert_ledger()


def test_forbidden_actions_are_refused_with_the_rule_and_change_nothing(rig: TableRig) -> None:
    rig.bets(1, 2)
    rig.deal("AH 9S 6D 5C 8H")  # box 1: A5 soft 16, box 2: 17, dealer 6
    rig.table.apply(Act(1, Action.HIT, "p1"))
    rig.read("3C")  # three cards: soft 19

    def state() -> tuple:
        r = rig.round
        return r.state, [list(h.cards) for h in r.hands], len(rig.table.round_log), r.current_hand

    before = state()
    with pytest.raises(RuleViolation) as double:
        rig.table.apply(Act(1, Action.DOUBLE, "p1"))  # a double on three cards
    assert double.value.rule == "double_on_two_cards" and state() == before
    refused = rig.find(Reason.ACTION_REFUSED)[-1]
    assert refused.data["rule"] == double.value.rule
    rig.table.apply(Act(1, Action.HIT, "p1"))
    rig.read("2D")  # soft 21: the hand is over, no drawing on any 21
    hand = rig.round.current_hand
    assert hand is not None and hand.box == 2
    before = state()
    with pytest.raises(RuleViolation) as hit:
        rig.table.apply(Act(1, Action.HIT, "p1"))  # a hit on 21
    assert hit.value.rule == "no_draw_on_21" and state() == before
    assert rig.find(Reason.ACTION_REFUSED)[-1].data["rule"] == "no_draw_on_21"


def test_surrender_against_an_ace_only_where_the_sheet_allows_it(rig: TableRig) -> None:
    rig.bets(1)
    rig.deal("TH AD 6C")  # dealer shows an ace
    if rig.round.state == "insurance":
        rig.table.apply(CloseInsurance("dealer-1"))
    if rig.rules.play.surrender_against_ace:  # seed 004: its surrender names no exception for the ace
        rig.table.apply(Act(1, Action.SURRENDER, "p1"))
        assert rig.round.hands[0].surrendered
        return
    with pytest.raises(RuleViolation) as e:
        rig.table.apply(Act(1, Action.SURRENDER, "p1"))
    rule = "no_surrender_against_ace" if rig.rules.play.surrender else "surrender_not_offered"
    assert e.value.rule == rule and rig.find(Reason.ACTION_REFUSED)[-1].data["rule"] == rule
    assert not rig.round.hands[0].surrendered


def test_cut_card_makes_the_round_in_progress_the_last(rig: TableRig) -> None:
    start_round(rig)
    rig.table.apply(DeviceMessage("shoe-reader", CutCardSeen(rig.index, 0)))
    assert rig.table.shoe.state == "last_round"
    finish_round(rig)
    assert rig.table.shoe.state == "complete"
    with pytest.raises(TableError, match="complete"):
        rig.table.apply(OpenRound())
    rig.read("3D")  # nothing may be dealt from a finished shoe
    assert Reason.DEALING_BLOCKED in rig.reasons()
    rig.assert_ledger()


def test_a_firmware_update_mid_round_holds_it(rig: TableRig) -> None:
    start_round(rig)
    rig.table.apply(DeviceMessage("shoe-reader", Status(DeviceState.UPDATING, 0, 0, 0)))
    assert rig.round.held is not None and "updating" in rig.round.held
    with pytest.raises(OverrideRefused, match="updating"):
        rig.table.apply(Resume("sup-1", SUP))
    rig.table.apply(DeviceMessage("shoe-reader", Ident(DeviceRole.SHOE, "sim", "shoe-reader-1", "1.1.0", 1, 0, 8)))  # back, new firmware
    rig.table.apply(Resume("sup-1", SUP))
    finish_round(rig)
    rig.assert_ledger()


def test_device_reboot_mid_round_holds_it(rig: TableRig) -> None:
    start_round(rig)
    rig.table.apply(DeviceMessage("shoe-reader", Ident(DeviceRole.SHOE, "sim", "shoe-reader-1", "1.0.0", 1, 0, 99)))  # new boot id
    assert rig.round.held is not None and "rebooted" in rig.round.held
    rig.table.apply(Resume("sup-1", SUP))
    finish_round(rig)
