"""The exact dealer table: checked against brute force on small shoes, exact blackjack odds,
published bust rates, and the copy printed in docs/rules.md."""
from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from devices.game.dealer_odds import (OUTCOMES, UP_CARDS, dealer_distribution, dealer_table, distribution_from_counts,
                                 main, markdown_table)
from devices.game.hand import hand_total
from core.cards import Card, Rank, Suit

from tests.game.game_helpers import ROOT


def _card(value: int) -> Card:
    return Card(Rank(value), Suit.SPADES)


def _brute(counts: tuple[int, ...], up: int, h17: bool) -> dict[str, Fraction]:
    """Every ordering of a small shoe, the dealer played by hand_total (independent of dealer_odds)."""
    shoe = [v for v, n in zip(range(1, 11), counts) for _ in range(n)]
    out = {o: 0 for o in OUTCOMES}
    orders = list(itertools.permutations(range(len(shoe))))
    for order in orders:
        hand = [_card(up)]
        for i in order:
            total, soft = hand_total(hand)
            if len(hand) >= 2 and (total > 17 or total == 17 and not (soft and h17)):
                break
            hand.append(_card(shoe[i]))
        total, _ = hand_total(hand)
        out["blackjack" if len(hand) == 2 and total == 21 else "bust" if total > 21 else str(total)] += 1
    return {o: Fraction(n, len(orders)) for o, n in out.items()}


SMALL = [((2, 0, 0, 0, 1, 2, 0, 0, 0, 2), 10), ((1, 1, 1, 1, 1, 0, 0, 0, 0, 3), 1), ((0, 2, 0, 1, 0, 1, 1, 0, 0, 2), 6),
         ((3, 0, 0, 0, 0, 1, 0, 0, 0, 3), 6)]


@pytest.mark.parametrize("h17", [False, True])
@pytest.mark.parametrize("counts,up", SMALL)
def test_exact_matches_brute_force_on_small_shoes(counts: tuple[int, ...], up: int, h17: bool) -> None:
    exact = distribution_from_counts(counts, up, h17)
    brute = _brute(counts, up, h17)
    assert exact == brute
    assert sum(exact.values()) == 1


def test_each_row_sums_to_one_and_blackjack_odds_are_exact() -> None:
    table = dealer_table(6)
    for up, row in table.items():
        assert sum(row.values()) == 1, up
    assert table["A"]["blackjack"] == Fraction(96, 311)  # 96 tens left in 311 cards
    assert table["T"]["blackjack"] == Fraction(24, 311)  # 24 aces left
    assert all(table[u]["blackjack"] == 0 for u in UP_CARDS[1:9])


def test_bust_rates_match_published_six_deck_figures() -> None:
    # 6 decks, dealer stands on soft 17 (widely published: 2 35.4%, 4 39.6%, 6 42.3%, 7 26.2%, 9 22.9%)
    published = {"2": 0.3536, "4": 0.3958, "6": 0.4228, "7": 0.2619, "9": 0.2292}
    table = dealer_table(6)
    for up, bust in published.items():
        assert abs(float(table[up]["bust"]) - bust) < 0.0005, up


def test_hitting_soft_17_changes_only_what_soft_17_reaches() -> None:
    s17, h17 = dealer_table(6, False), dealer_table(6, True)
    assert h17["A"]["17"] < s17["A"]["17"] and h17["6"]["17"] < s17["6"]["17"]
    assert h17["A"]["blackjack"] == s17["A"]["blackjack"]
    assert all(sum(h17[u].values()) == 1 for u in UP_CARDS)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="up card 'Z'"):
        dealer_distribution("Z")
    with pytest.raises(ValueError, match="10 non-negative"):
        distribution_from_counts((1, 2), 1)


def test_docs_print_the_current_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--markdown"]) == 0
    printed = capsys.readouterr().out
    assert printed == markdown_table(6, False)
    docs = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert printed in docs, "docs/rules.md is stale: paste `python -m devices.game.dealer_odds --markdown`"
