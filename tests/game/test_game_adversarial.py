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
