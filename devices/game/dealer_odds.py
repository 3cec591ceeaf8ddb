"""Exact distribution of the dealer's final total per up card, for a no-hole-card shoe.

The dealer's up card is removed from a full shoe of ``decks`` decks; every further card is
drawn without replacement from what is left. Blackjack is the up card plus the dealer's second
card making 21. Probabilities are exact Fractions, memoised on the remaining composition by
value (ace..ten), so a whole table takes well under a second.

    python -m devices.game.dealer_odds --markdown [--decks 6] [--h17]
"""
from __future__ import annotations

import argparse
import sys
from fractions import Fraction
from functools import lru_cache

OUTCOMES = ("17", "18", "19", "20", "21", "blackjack", "bust")
UP_CARDS = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "T")  # T = any ten-value card


def _full_shoe(decks: int) -> tuple[int, ...]:
    """Counts by value 1 (ace) .. 10 (ten, jack, queen, king)."""
    return tuple(4 * decks if v < 10 else 16 * decks for v in range(1, 11))


@lru_cache(maxsize=None)
def _finish(counts: tuple[int, ...], hard: int, ace: bool, hits_soft_17: bool) -> tuple[Fraction, ...]:
    """Distribution over OUTCOMES (blackjack excluded: decided by the caller) from this point."""
    total = hard + 10 if ace and hard <= 11 else hard
    soft = ace and hard <= 11
    if total > 21:
        return _point("bust")
    if total > 17 or (total == 17 and not (soft and hits_soft_17)):
        return _point(str(total))
    return _draw(counts, hard, ace, hits_soft_17, second=False)


def _draw(counts: tuple[int, ...], hard: int, ace: bool, hits_soft_17: bool, second: bool) -> tuple[Fraction, ...]:
    remaining = sum(counts)
    out = [Fraction(0)] * len(OUTCOMES)
    for i, n in enumerate(counts):
        if n == 0:
            continue
        value = i + 1
        p = Fraction(n, remaining)
        nxt = counts[:i] + (n - 1,) + counts[i + 1:]
        new_hard, new_ace = hard + value, ace or value == 1
        if second and new_ace and new_hard == 11:
            sub = _point("blackjack")
        else:
            sub = _finish(nxt, new_hard, new_ace, hits_soft_17)
        for k in range(len(OUTCOMES)):
            out[k] += p * sub[k]
    return tuple(out)


def _point(outcome: str) -> tuple[Fraction, ...]:
    return tuple(Fraction(1) if o == outcome else Fraction(0) for o in OUTCOMES)


def distribution_from_counts(counts: tuple[int, ...], up_value: int, hits_soft_17: bool = False) -> dict[str, Fraction]:
    """P(final outcome) when the dealer shows ``up_value`` (1 = ace .. 10) and draws from ``counts``
    (cards left by value, ace first; the up card already removed)."""
    if len(counts) != 10 or min(counts) < 0 or not 1 <= up_value <= 10:
        raise ValueError(f"counts must be 10 non-negative numbers (ace..ten) and up_value 1..10, got "
                         f"{counts!r}, {up_value!r}")
    dist = _draw(tuple(counts), up_value, up_value == 1, hits_soft_17, second=True)
    return dict(zip(OUTCOMES, dist))


def dealer_distribution(up: str, decks: int = 6, hits_soft_17: bool = False) -> dict[str, Fraction]:
    """Exact P(final outcome | up card) for the dealer, no hole card."""
    if up not in UP_CARDS:
        raise ValueError(f"up card {up!r} not one of {', '.join(UP_CARDS)}")
    value = UP_CARDS.index(up) + 1
    counts = list(_full_shoe(decks))
    counts[value - 1] -= 1
    return distribution_from_counts(tuple(counts), value, hits_soft_17)


def dealer_table(decks: int = 6, hits_soft_17: bool = False) -> dict[str, dict[str, Fraction]]:
    return {up: dealer_distribution(up, decks, hits_soft_17) for up in UP_CARDS}


def markdown_table(decks: int = 6, hits_soft_17: bool = False) -> str:
    rule = "hits soft 17" if hits_soft_17 else "stands on all 17s"
    head = f"Dealer's final total per up card: {decks} decks, dealer {rule}, no hole card (exact, rounded to 6 places)\n\n"
    rows = ["| up card | " + " | ".join(OUTCOMES) + " |", "|---" * (len(OUTCOMES) + 1) + "|"]
    for up, dist in dealer_table(decks, hits_soft_17).items():
        rows.append(f"| {up} | " + " | ".join(f"{float(dist[o]):.6f}" for o in OUTCOMES) + " |")
    return head + "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    ap.add_argument("--decks", type=int, default=6)
    ap.add_argument("--h17", action="store_true", help="dealer hits soft 17")
    args = ap.parse_args(argv)
    sys.stdout.write(markdown_table(args.decks, args.h17))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
