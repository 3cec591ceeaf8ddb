"""The settlement checked independently of the settlement code.

``house == -sum(per player)`` is true by definition (both are sums of the same lines). Here every
main, surrender and even-money line is recomputed in the test from the cards themselves (totals
counted here, not by Hand), the stake the player put on the hand (its base stake plus any double)
and the fixed payouts (3:2 blackjack, 1:1, half back on surrender), and the house's result must
equal minus the money the test computed for all lines, side bets included as paid.
"""
from __future__ import annotations

import os
import random
from fractions import Fraction

from hypothesis import HealthCheck, given, settings, strategies as st
from tests.game.game_helpers import CASINOS, rules_for
from tests.game.game_sim import play_round

from core.cards import Card, Rank

RULES = {c: rules_for(c) for c in CASINOS}
FULL = os.environ.get("CARDD_FULL") == "1"


def total(cards: list[Card]) -> int:
    hard = sum(min(int(c.rank), 10) for c in cards)
    return hard + 10 if any(c.rank is Rank.ACE for c in cards) and hard + 10 <= 21 else hard


def expected_multiple(cards: list[Card], from_split: bool, dealer: list[Card]) -> Fraction:
    mine, theirs = total(cards), total(dealer)
    natural = len(cards) == 2 and mine == 21 and not from_split
    dealer_natural = len(dealer) == 2 and theirs == 21
    if mine > 21:
        return Fraction(-1)
    if dealer_natural:
        return Fraction(0) if natural else Fraction(-1)
    if natural:
        return Fraction(3, 2)
    if theirs > 21 or mine > theirs:
        return Fraction(1)
    return Fraction(-1) if mine < theirs else Fraction(0)


@settings(max_examples=1_500 if FULL else 200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), casino=st.sampled_from(CASINOS))
def test_each_hands_money_recomputed_from_its_cards_and_stakes(seed: int, casino: str) -> None:
    rng = random.Random(seed)
    r = play_round(RULES[casino], rng, boxes=rng.randint(1, 5))
    s = r.settlement
    assert s is not None
    hands = {(h.box, h.index): h for h in r.hands}
    money = Fraction(0)
    for ln in s.lines:
        if ln.kind in ("main", "surrender", "even_money"):
            assert ln.hand is not None, f"{ln}: a main line names its hand"
            h = hands[(ln.box, ln.hand)]
            stake = h.stake_of(ln.player)
            assert ln.stake == stake, f"{ln}: the player put {stake} on the hand"
            if ln.kind == "surrender":
                expected = Fraction(-stake, 2)
            elif ln.kind == "even_money":
                expected = Fraction(stake)
            else:
                expected = expected_multiple(h.cards, h.from_split, r.dealer_cards) * stake
            assert ln.net == expected, f"{ln}: cards {h.cards} vs dealer {r.dealer_cards}"
        money += Fraction(ln.net)
    assert s.house == -money
