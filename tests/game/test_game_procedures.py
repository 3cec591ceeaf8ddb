"""Holds, overrides and the seed procedures on a round: each journaled, each with who."""
from __future__ import annotations

import dataclasses

import pytest

from devices.events import Reason, Role, Severity
from devices.errors import CardMismatch, OverrideRefused, RoundHeld, RuleViolation
from devices.game.round import Action, Round, Target
from devices.game.rules import DealerRules, HouseRules

from tests.game.game_helpers import Recorder, cards, deal, new_round, settlement_of, snapshot

RULES = HouseRules.default()
AB = [(1, "a", 10000), (2, "b", 10000)]


def started(bets=AB, rules=RULES) -> tuple[Round, Recorder]:
    rec = Recorder()
    r = new_round(rules, bets, rec)
    r.no_more_bets("dealer-1")
    return r, rec


def test_every_state_change_and_card_is_an_event() -> None:
    r, rec = started([(1, "a", 10000)])
    deal(r, "TS 7H 9C")
    r.act(1, Action.STAND, who="dealer-1")
    deal(r, "TD")
    states = [e.data["state"] for e in rec.of(Reason.ROUND_STATE)]
    assert states == ["initial_deal", "players", "dealer", "complete"]
    assert [e.data["card"] for e in rec.of(Reason.CARD_ASSIGNED)] == ["TS", "7H", "9C", "TD"]
    assert [e.data["target"] for e in rec.of(Reason.CARD_ASSIGNED)] == ["box 1 hand 1", "dealer", "box 1 hand 1",
                                                                         "dealer"]
    assert any(e.who == "dealer-1" and e.data.get("action") == "stand" for e in rec.of(Reason.ACTION))


def test_initial_deal_order_left_to_right_dealer_once_no_hole_card() -> None:
    r, _ = started([(5, "e", 10000), (2, "b", 10000), (3, "c", 10000)])
    seen = []
    for c in cards("2S 3S 4S 5S 6S 7S 8S"):
        seen.append(str(r.expected_next()))
        r.card_dealt(c)
    assert seen == ["box 2 hand 1", "box 3 hand 1", "box 5 hand 1", "dealer", "box 2 hand 1", "box 3 hand 1",
                    "box 5 hand 1"]
    assert len(r.dealer_cards) == 1 and r.state == "players"


def test_hold_blocks_cards_and_actions_until_a_supervisor_resumes() -> None:
    r, rec = started()
    deal(r, "TS 9S 6H")
    r.hold(Reason.SHUFFLER_MALFUNCTION, "shuffler reported a jam")
    assert rec.events[-1].reason == Reason.ROUND_HELD and rec.events[-1].severity == Severity.ALARM
    assert r.expected_next() is None
    before = snapshot(r)
    with pytest.raises(RoundHeld):
        r.card_dealt(cards("5C")[0])
    assert snapshot(r) == before
    with pytest.raises(OverrideRefused):
        r.resume("dealer-1", Role.DEALER)
    assert rec.events[-1].reason == Reason.OVERRIDE_REFUSED and r.held
    r.resume("sup-9", Role.SUPERVISOR)
    assert rec.events[-1].reason == Reason.ROUND_RESUMED and rec.events[-1].who == "sup-9"
    assert any(e.reason == Reason.OVERRIDE and e.who == "sup-9" for e in rec.events)
    deal(r, "5C 7C")
    assert r.state == "players"


def test_action_while_held_is_refused_and_journaled() -> None:
    r, rec = started()
    deal(r, "TS 9S 6H 5C 7C")
    r.hold(Reason.DEVICE_STALE, "shoe reader stale")
    before = snapshot(r)
    with pytest.raises(RoundHeld):
        r.act(1, Action.HIT, who="dealer-1")
    assert snapshot(r) == before
    assert rec.events[-1].reason == Reason.ACTION_REFUSED and rec.events[-1].data["rule"] == "round_held"


def test_void_returns_every_bet_and_settles_nothing() -> None:
    r, rec = started()
    deal(r, "TS 9S 6H")
    r.hold(Reason.FACE_UP_CARD, "face-up card from the shoe")
    with pytest.raises(OverrideRefused):
        r.void(Reason.FACE_UP_CARD, "dealer-1", Role.DEALER)
    assert r.state == "initial_deal"
    r.void(Reason.FACE_UP_CARD, "sup-9", Role.SUPERVISOR)
    assert r.state == "void" and r.settlement is None and r.held is None
    ev = rec.of(Reason.ROUND_VOID)[-1]
    assert ev.who == "sup-9" and ev.data["returned"] == {"1:a": 10000, "2:b": 10000}
    with pytest.raises(RuleViolation) as e:
        r.void(Reason.FACE_UP_CARD, "sup-9", Role.SUPERVISOR)
    assert e.value.rule == "round_state"


def test_a_card_nobody_expects_is_not_taken() -> None:
    r, _ = started([(1, "a", 10000)])
    deal(r, "TS 7H 9C")  # players' turn: a decision is due, not a card
    before = snapshot(r)
    assert r.card_dealt(cards("4D")[0]) is None and snapshot(r) == before
    r.act(1, Action.STAND)
    deal(r, "TD")
    assert r.state == "complete"
    # a card drawn in error to the dealer's finished hand: the table discards it or burns it next round
    before = snapshot(r)
    assert r.card_dealt(cards("5D")[0]) is None and snapshot(r) == before


def test_card_exposed_in_error_is_used_as_the_next_card() -> None:
    """Seed 003: the table offers the exposed card again when the round next expects a card."""
    r, _ = started([(1, "a", 10000)])
    deal(r, "TS 7H 5C")
    exposed = cards("6D")[0]
    assert r.card_dealt(exposed) is None  # exposed while the player decides
    r.act(1, Action.HIT)
    assert r.card_dealt(exposed) == Target("box", 1, 0)
    assert r.box_hands[1][0].cards == cards("TS 5C 6D")


def test_reconstruct_and_redeal_takes_the_same_cards_back_in_order() -> None:
    r, rec = started()
    deal(r, "TS 9S 6H 5C 7C")
    r.act(1, Action.HIT)
    deal(r, "2D")
    with pytest.raises(OverrideRefused):
        r.reconstruct_and_redeal("dealer-1", Role.DEALER)
    back = r.reconstruct_and_redeal("sup-9", Role.SUPERVISOR)
    assert [str(c) for c in back] == "TS 9S 6H 5C 7C 2D".split()
    assert r.state == "initial_deal" and r.expected_next() == Target("box", 1, 0)
    assert all(not h.cards for h in r.hands) and r.dealer_cards == []
    assert rec.of(Reason.CARDS_TO_BOX_WITHOUT_WAGER)[-1].who == "sup-9"
    before = snapshot(r)
    with pytest.raises(CardMismatch):
        r.card_dealt(cards("AS")[0])
    assert snapshot(r) == before
    deal(r, "TS 9S 6H 5C 7C")
    r.act(1, Action.HIT)
    deal(r, "2D")  # the last card back, now to the same place
    r.act(1, Action.STAND)
    r.act(2, Action.STAND)
    deal(r, "TD AC")
    assert settlement_of(r).per_player() == {"a": 0, "b": -10000}


def test_a_redeal_or_a_void_ends_the_hold_and_its_cause() -> None:
    """Both clear ``held``; they left ``hold_cause`` behind, a round without a hold that still named why."""
    r, _ = started()
    deal(r, "TS 9S 6H")
    r.hold(Reason.CARDS_TO_BOX_WITHOUT_WAGER, "a card on box 3, which has no wager")
    r.reconstruct_and_redeal("sup-9", Role.SUPERVISOR)
    assert (r.held, r.hold_cause) == (None, None)
    deal(r, "TS 9S 6H")
    r.hold(Reason.FACE_UP_CARD, "face-up card from the shoe")
    r.void(Reason.FACE_UP_CARD, "sup-9", Role.SUPERVISOR)
    assert (r.state, r.held, r.hold_cause) == ("void", None, None)


def test_redeal_undoes_splits_and_doubles() -> None:
    r, _ = started([(1, "a", 10000)])
    deal(r, "8S 6H 8C")
    r.act(1, Action.SPLIT)
    deal(r, "3D")
    r.act(1, Action.DOUBLE)
    r.reconstruct_and_redeal("sup-9", Role.SUPERVISOR)
    assert len(r.hands) == 1 and r.hands[0].stakes == {"a": 10000} and not r.hands[0].doubled


def test_reconstruct_initial_deal_places_cards_as_confirmed() -> None:
    r, rec = started()
    deal(r, "TS 9S 6H")
    layout = [(cards("9S")[0], Target("box", 1, 0)), (cards("TS")[0], Target("box", 2, 0)),
              (cards("6H")[0], Target("dealer"))]
    bad = [(cards("AS")[0], Target("box", 1, 0))] + layout[1:]
    before = snapshot(r)
    with pytest.raises(RuleViolation) as e:
        r.reconstruct_initial_deal("sup-9", Role.SUPERVISOR, bad)
    assert e.value.rule == "reconstruct_cards" and snapshot(r) == before
    three_on_one = [(c, Target("box", 1, 0)) for c, _ in layout]  # a box takes two cards in the initial deal
    with pytest.raises(RuleViolation) as e:
        r.reconstruct_initial_deal("sup-9", Role.SUPERVISOR, three_on_one)
    assert e.value.rule == "reconstruct_places" and snapshot(r) == before
    r.reconstruct_initial_deal("sup-9", Role.SUPERVISOR, layout)
    assert rec.of(Reason.PLACEMENT_ERROR)[-1].who == "sup-9"
    assert r.expected_next() == Target("box", 1, 0)
    deal(r, "5C 7C")
    assert r.box_hands[1][0].cards == cards("9S 5C") and r.box_hands[2][0].cards == cards("TS 7C")


def test_reconstruct_initial_deal_only_during_the_initial_deal() -> None:
    r, _ = started()
    deal(r, "TS 9S 6H 5C 7C")
    with pytest.raises(RuleViolation) as e:
        r.reconstruct_initial_deal("sup-9", Role.SUPERVISOR)
    assert e.value.rule == "reconstruct_initial_deal"


def test_unreadable_card_entered_by_the_dealer_flags_the_round() -> None:
    r, rec = started()
    r.flag(Reason.UNREADABLE_CARD, "card 1 unreadable; dealer entered TS", who="dealer-1")
    r.card_dealt(cards("TS")[0])
    assert r.flags == [{"reason": "UNREADABLE_CARD", "detail": "card 1 unreadable; dealer entered TS",
                        "who": "dealer-1"}]
    assert rec.of(Reason.UNREADABLE_CARD)[-1].who == "dealer-1"


def test_no_more_bets_needs_a_wager() -> None:
    r = Round(RULES, Recorder())
    with pytest.raises(RuleViolation) as e:
        r.no_more_bets("dealer-1")
    assert e.value.rule == "no_wager" and r.state == "betting"


def test_actions_out_of_phase_are_refused() -> None:
    r, _ = started()
    for call in (lambda: r.act(1, Action.HIT), lambda: r.insure(1, "a", 1000), lambda: r.close_insurance(),
                 lambda: r.place_bet(3, "c", 10000)):
        before = snapshot(r)
        with pytest.raises(RuleViolation) as e:
            call()
        assert e.value.rule == "round_state" and snapshot(r) == before


def test_insurance_state_only_when_the_dealer_shows_an_ace() -> None:
    r, _ = started([(1, "a", 10000)])
    deal(r, "TS AH 9C")
    assert r.state == "insurance" and r.expected_next() is None
    r.close_insurance("dealer-1")
    assert r.state == "players"


def test_dealer_hits_soft_17_when_the_rules_say_so() -> None:
    rules = dataclasses.replace(RULES, dealer=DealerRules(hits_soft_17=True))
    r, _ = started([(1, "a", 10000)], rules)
    deal(r, "TS 6H 9C")
    r.act(1, Action.STAND)
    deal(r, "AD")
    assert r.state == "dealer" and r.expected_next() == Target("dealer")
    deal(r, "2C")  # soft 19
    assert settlement_of(r).per_player() == {"a": 0}
