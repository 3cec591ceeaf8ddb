"""The shuffle is an unbiased permutation; misloads change a stack as documented."""
from __future__ import annotations

import itertools
import os
import random
from collections import Counter

import pytest

from core.cards import Card, shoe_composition
from simulators.faults import Faults
from simulators.stack import composition, deck_check, fisher_yates, full_shoe, misload

# chi-squared 0.999999 quantiles: a fair shuffle (the system RNG, unseedable) fails each test
# one run in a million, so CI does not go red by chance; the biased shuffle below still fails them
CHI2_LIMIT = {16: 58.324, 23: 70.550}
SHUFFLES = 240_000 if os.environ.get("CARDD_FULL") == "1" else 24_000


def chi2(observed: list[int], expected: float) -> float:
    return sum((o - expected) ** 2 / expected for o in observed)


def naive_shuffle(items, rng):
    """The classic wrong shuffle (swap with any position): biased, so the tests must catch it."""
    out = list(items)
    for i in range(len(out)):
        j = rng.randrange(len(out))
        out[i], out[j] = out[j], out[i]
    return out


def position_chi2(shuffle, n_cards: int, shuffles: int) -> float:
    counts: Counter[tuple[int, int]] = Counter()
    for _ in range(shuffles):
        for pos, card in enumerate(shuffle(range(n_cards))):
            counts[card, pos] += 1
    cells = [counts[c, p] for c in range(n_cards) for p in range(n_cards)]
    # Each shuffle adds a whole permutation matrix, so cells are not independent: the raw sum
    # has mean n(n-1) spread evenly over (n-1)^2 dimensions; scaled by (n-1)/n it is
    # chi-squared with (n-1)^2 degrees of freedom.
    return chi2(cells, shuffles / n_cards) * (n_cards - 1) / n_cards


def permutation_chi2(shuffle, shuffles: int) -> float:
    counts = Counter(tuple(shuffle(range(4))) for _ in range(shuffles))
    return chi2([counts[p] for p in itertools.permutations(range(4))], shuffles / 24)


@pytest.mark.soak
def test_card_positions_are_uniform():
    # 5 cards x 5 positions: (5-1)*(5-1) = 16 degrees of freedom
    assert position_chi2(fisher_yates, 5, SHUFFLES) < CHI2_LIMIT[16]


@pytest.mark.soak
def test_all_orders_of_a_small_deck_are_equally_likely():
    assert permutation_chi2(fisher_yates, SHUFFLES) < CHI2_LIMIT[23]


def test_the_chi_squared_tests_catch_a_biased_shuffle():
    rng = random.Random(7)
    biased = lambda items: naive_shuffle(items, rng)  # noqa: E731
    assert position_chi2(biased, 5, 24_000) > CHI2_LIMIT[16]
    assert permutation_chi2(biased, 24_000) > CHI2_LIMIT[23]


# A six-deck shoe: 312 positions in 12 bins of 26, so every cell of the (card bin, position
# bin) table expects SHOE_SHUFFLES * 26 / 12 hits. Seeded: the run is the same every time.
SHOE, BINS = 312, 12
SHOE_SHUFFLES = 40_000 if os.environ.get("CARDD_FULL") == "1" else 3_000


def chi2_limit(dof: int, z: float = 4.753) -> float:
    """The chi-squared quantile at 1 - 1e-6 (z is that normal quantile), by Wilson-Hilferty:
    within 1 % of the exact value at 100 degrees of freedom and more."""
    return dof * (1 - 2 / (9 * dof) + z * (2 / (9 * dof)) ** 0.5) ** 3


def binned_position_chi2(shuffle, n_cards: int, bins: int, shuffles: int) -> float:
    """Chi-squared of where the cards of each bin of starting positions end up, by bin. Each
    shuffle adds a table with fixed margins, so as in position_chi2 the raw sum has mean
    (bins-1)^2 * n/(n-1): scaled by (n-1)/n it is chi-squared with (bins-1)^2 degrees of freedom."""
    width = n_cards // bins
    counts: Counter[tuple[int, int]] = Counter()
    for _ in range(shuffles):
        for pos, card in enumerate(shuffle(range(n_cards))):
            counts[card // width, pos // width] += 1
    cells = [counts[a, b] for a in range(bins) for b in range(bins)]
    return chi2(cells, shuffles * width / bins) * (n_cards - 1) / n_cards


class ByteModuloRandom(random.Random):
    """The classic biased draw: one random byte modulo i+1 (never above 255, and the low
    values more likely): on 312 cards, the last 56 positions are never drawn."""

    def randrange(self, stop, *args, **kwargs):  # type: ignore[override]
        return self.getrandbits(8) % stop


@pytest.mark.soak
def test_a_six_deck_shoe_is_shuffled_uniformly():
    rng = random.Random(20261123)
    fair = lambda items: fisher_yates(items, rng)  # noqa: E731
    assert binned_position_chi2(fair, SHOE, BINS, SHOE_SHUFFLES) < chi2_limit((BINS - 1) ** 2)


def test_the_six_deck_test_catches_a_byte_modulo_index():
    rng = ByteModuloRandom(20261123)
    biased = lambda items: fisher_yates(items, rng)  # noqa: E731  (the real code, the biased draw)
    assert binned_position_chi2(biased, SHOE, BINS, SHOE_SHUFFLES) > chi2_limit((BINS - 1) ** 2)


def test_shuffle_is_a_permutation_of_a_six_deck_shoe():
    shoe = full_shoe(6)
    shuffled = fisher_yates(shoe)
    assert len(shuffled) == 312
    assert Counter(shuffled) == Counter(shoe) == Counter(shoe_composition(6))
    assert shuffled != shoe  # 1 in 312! chance of a false failure


def test_shuffle_uses_the_system_rng_by_default():
    import inspect
    import secrets

    default_rng = inspect.signature(fisher_yates).parameters["rng"].default
    assert isinstance(default_rng, secrets.SystemRandom)


def test_misload_removes_adds_and_duplicates():
    AS, SEVEN_H, QS = Card.parse("AS"), Card.parse("7H"), Card.parse("QS")
    faults = Faults(missing=(AS,), extra=(SEVEN_H,), foreign=2, duplicate=(QS,))
    stack = misload(full_shoe(1), faults, random.Random(1))
    assert len(stack) == 52 - 1 + 1 + 2 + 1
    assert stack.count(None) == 2
    first = stack.index(QS)
    assert stack[first + 1] == QS
    missing, extra, unrecognised = deck_check(stack, 1)
    assert missing == ((AS, 1),)
    assert extra == tuple(sorted([(SEVEN_H, 1), (QS, 1)]))
    assert unrecognised == 2
    assert sum(composition(stack).values()) == 52 - 1 + 1 + 1


def test_an_intact_shoe_checks_clean():
    assert deck_check(fisher_yates(full_shoe(6)), 6) == ((), (), 0)
