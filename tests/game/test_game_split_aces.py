"""Hitting a split ace that still waits to be re-split.

AS 9H AC, split, AD: the first hand is AS AD, a pair of aces that may be split again, so it is
not complete yet; a hit there must still be refused. Removing the split-ace check from the hit
rule (round_checks: ``if hand.split_aces`` under ``Action.HIT``) let the hit through and no test
failed; this one does.
"""
from __future__ import annotations

import pytest
from tests.game.game_helpers import new_round, rules_for, run

from devices.game.round import Action
from devices.errors import RuleViolation


@pytest.mark.parametrize("casino", ["casino-000", "casino-003"])  # aces re-split: twice; unlimited
def test_a_hit_on_a_split_ace_waiting_to_be_resplit_is_refused(casino: str) -> None:
    rules = rules_for(casino)
    r = new_round(rules, [(1, "p1", rules.table.min_per_player)])
    run(r, [("no_more_bets",), ("deal", "AS 9H AC"), ("act", 1, "split"), ("deal", "AD")])
    target = r.current_hand
    assert target is not None and (target.box, target.hand) == (1, 0)
    hand = r.box_hands[1][0]
    assert [str(c) for c in hand.cards] == ["AS", "AD"] and not hand.complete
    with pytest.raises(RuleViolation) as err:
        r.act(1, Action.HIT, who="p1")
    assert err.value.rule == "split_aces_one_card"
    run(r, [("act", 1, "split")])  # re-splitting is still allowed
