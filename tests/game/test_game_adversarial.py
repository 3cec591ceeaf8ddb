"""Adversarial QA of the round: inputs in odd orders and rounds settled by hand from the seed sheets."""
from __future__ import annotations

import pytest

from devices.round import Action, RuleViolation
from game_helpers import Recorder, deal, new_round, rules_for, snapshot


@pytest.mark.parametrize("casino", ["casino-000", "casino-004"])  # both surrender windows
def test_no_surrender_once_the_player_has_asked_for_a_third_card(casino: str) -> None:
    rec = Recorder()
    r = new_round(rules_for(casino), [(1, "a", 1000), (2, "b", 1000)], rec)
    r.no_more_bets("dealer-1")
    deal(r, "5H 6H 9C 7D 8S")  # box 1: 12 against a 9
    r.act(1, Action.HIT, "a")  # the third card is asked for, not yet out of the shoe
    before = snapshot(r)
    with pytest.raises(RuleViolation) as exc:
        r.act(1, Action.SURRENDER, "a")
    assert exc.value.rule == "surrender_first_two_cards"
    assert snapshot(r) == before


def test_a_second_blackjack_pairs_bet_adds_to_the_first_and_is_settled_whole() -> None:
    rules = rules_for("casino-002")
    bp = rules.side_bets.blackjack_pairs
    r = new_round(rules, [(1, "a", 2000)])
    r.place_pairs_bet(1, "a", bp.min)
    r.place_pairs_bet(1, "a", bp.min)  # more chips on the same spot, as with a main bet
    r.no_more_bets("dealer-1")
    deal(r, "8H 6C 9S")  # box 1: 8 9, no pair
    r.act(1, Action.STAND, "a")
    deal(r, "TC 5D")  # dealer 6 10 5
    pairs = [ln for ln in r.settlement.lines if ln.kind == "pairs"]
    assert [(ln.stake, ln.net) for ln in pairs] == [(2 * bp.min, -2 * bp.min)]


def test_blackjack_pairs_bets_together_stay_within_the_maximum() -> None:
    rules = rules_for("casino-002")
    bp = rules.side_bets.blackjack_pairs
    r = new_round(rules, [(1, "a", 2000)])
    r.place_pairs_bet(1, "a", bp.max)
    before = snapshot(r)
    with pytest.raises(RuleViolation) as exc:
        r.place_pairs_bet(1, "a", bp.min)
    assert exc.value.rule == "side_bet_limits" and snapshot(r) == before
