"""The dealer's play, checked statistically against the exact table (docs/rules.md explains why
rounds through the real Round, with random legal player decisions, must match it).

Size: 30,000 rounds by default; CARDD_FULL=1 runs 200,000 (``CARDD_FULL=1 .venv/bin/python -m
pytest tests/game -m soak``). CARDD_SEED picks the random seed (default fixed, reproducible).
"""
from __future__ import annotations

import dataclasses
import os
import random

import pytest

from devices.game.dealer_odds import OUTCOMES, UP_CARDS, dealer_table
from devices.game.hand import card_value, hand_total
from devices.game.rules import DealerRules, HouseRules

from tests.game.game_sim import play_round
from tests.game.game_stats import chi2_sf, chi2_statistic

FULL = os.environ.get("CARDD_FULL") == "1"
ROUNDS = 200_000 if FULL else 30_000
SEED = int(os.environ.get("CARDD_SEED", "20261121"))


def _outcome(dealer: list) -> str:
    total, _ = hand_total(dealer)
    if len(dealer) == 2 and total == 21:
        return "blackjack"
    return "bust" if total > 21 else str(total)


def _simulate(rules: HouseRules, rounds: int, seed: int) -> dict[str, list[int]]:
    """Counts of the dealer's final outcome per up card; a fresh shuffled shoe every round."""
    rng = random.Random(seed)
    counts = {up: [0] * len(OUTCOMES) for up in UP_CARDS}
    for _ in range(rounds):
        r = play_round(rules, rng)
        counts[UP_CARDS[card_value(r.dealer_cards[0]) - 1]][OUTCOMES.index(_outcome(r.dealer_cards))] += 1
    return counts


def _fit(counts: dict[str, list[int]], hits_soft_17: bool) -> tuple[float, int, float]:
    """One chi-squared over every up card: (statistic, degrees of freedom, p)."""
    table = dealer_table(6, hits_soft_17)
    stat, df = 0.0, 0
    for up in UP_CARDS:
        s, d = chi2_statistic(counts[up], [float(table[up][o]) for o in OUTCOMES])
        stat, df = stat + s, df + d
    return stat, df, chi2_sf(stat, df)


@pytest.mark.soak
@pytest.mark.timeout(600 if FULL else 120)
def test_dealer_final_totals_match_the_exact_table() -> None:
    counts = _simulate(HouseRules.default(), ROUNDS, SEED)
    stat, df, p = _fit(counts, hits_soft_17=False)
    assert sum(map(sum, counts.values())) == ROUNDS
    assert p > 0.001, f"chi2 {stat:.1f} on {df} df, p {p:.2e} over {ROUNDS} rounds (seed {SEED})"


@pytest.mark.soak
def test_the_check_catches_a_dealer_that_hits_soft_17() -> None:
    """The same check must reject play from the wrong rule, or it proves nothing."""
    rules = dataclasses.replace(HouseRules.default(), dealer=DealerRules(hits_soft_17=True))
    counts = _simulate(rules, ROUNDS // 3, SEED + 1)
    stat, df, p = _fit(counts, hits_soft_17=False)
    assert p < 0.001, f"a soft-17 hitter passed: chi2 {stat:.1f} on {df} df, p {p:.2e}"
    assert _fit(counts, hits_soft_17=True)[2] > 0.001  # and it matches its own table
