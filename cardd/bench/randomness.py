"""Shuffler qualification: shuffles dealt through the shoe's reader, then tested as a lab would.

:class:`ShuffleSource` deals the simulators' own shuffler's stacks through their shoe;
:func:`qualify` runs the tests at the 99 % level (chi-squared per card and position, runs up and
down, correlation between consecutive shuffles; no SciPy): docs/bench.md, "`cardbench randomness`"."""
from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from core.cards import ALL_CARDS, Card
from core.errors import CarddError
from firmware_bridge.messages import CardRead, Message, ShoeEmpty, StartShuffle
from simulators.faults import Faults
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler

LEVEL = 0.01  # every test at the 99 % level
_Z99 = 2.5758293035489  # two-sided 99 % normal quantile
_ORDINAL = {card: i for i, card in enumerate(ALL_CARDS)}


class RandomnessError(CarddError, RuntimeError):
    """The simulated devices did not deliver a full shuffled shoe."""


class ShuffleSource:
    """Shuffles from the simulated shuffler, each dealt card by card through the simulated shoe."""

    def __init__(self, decks: int = 1, fault: str | None = None, seed: int | None = None) -> None:
        self.decks = decks
        faults = Faults.parse(fault) if fault else Faults()
        self.shuffler = SimulatedShuffler(faults=faults, heartbeat_s=0,
                                          shuffle_rng=random.Random(seed) if seed is not None else None)
        self.shoe = SimulatedShoe(heartbeat_s=0)

    def orders(self, shuffles: int) -> list[list[Card]]:
        return asyncio.run(self._run(shuffles))

    async def _run(self, shuffles: int) -> list[list[Card]]:
        from_shuffler: list[Message] = []
        from_shoe: list[Message] = []
        self.shuffler.attach(from_shuffler.append)
        self.shoe.attach(from_shoe.append)
        orders = []
        try:
            for number in range(1, shuffles + 1):
                from_shuffler.clear()
                from_shoe.clear()
                refused = self.shuffler.handle(StartShuffle(self.decks))
                if refused:
                    raise RandomnessError(f"shuffle {number}: the shuffler refused: {refused}")
                await _until(lambda: self.shuffler.cards_held() == 52 * self.decks and
                             self.shuffler.device_state.name == "READY", f"shuffle {number}")
                stack = self.shuffler.unload()
                self.shoe.load(stack)
                self.shoe.deal(len(stack))
                await _until(lambda: any(isinstance(m, ShoeEmpty) for m in from_shoe), f"dealing shuffle {number}")
                order = [m.card for m in from_shoe if isinstance(m, CardRead)]
                if len(order) != 52 * self.decks:
                    raise RandomnessError(f"shuffle {number}: the shoe read {len(order)} cards, "
                                          f"not {52 * self.decks}")
                orders.append(order)
        finally:
            self.shuffler.close()
            self.shoe.close()
        return orders


async def _until(done: Any, what: str, turns: int = 100_000) -> None:
    for _ in range(turns):
        if done():
            return
        await asyncio.sleep(0)
    raise RandomnessError(f"{what}: the simulated device never finished")


@dataclass(frozen=True)
class TestResult:
    name: str
    statistic: float
    p_value: float
    passed: bool
    detail: str
    #: False when the sample is too small for the test's approximation: its outcome is no evidence
    conclusive: bool = True

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "statistic": self.statistic, "p_value": self.p_value, "passed": self.passed,
                "conclusive": self.conclusive, "detail": self.detail}


@dataclass(frozen=True)
class Report:
    shuffles: int
    decks: int
    tests: tuple[TestResult, ...]

    @property
    def verdict(self) -> Literal["PASS", "FAIL", "INCONCLUSIVE"]:
        """FAIL when a test that can judge fails; else INCONCLUSIVE when one cannot judge (too few
        shuffles); PASS only when every test judged and passed."""
        if any(t.conclusive and not t.passed for t in self.tests):
            return "FAIL"
        return "PASS" if all(t.conclusive for t in self.tests) else "INCONCLUSIVE"

    @property
    def passed(self) -> bool:
        return self.verdict == "PASS"

    def as_json(self) -> dict[str, Any]:
        return {"shuffles": self.shuffles, "decks": self.decks, "verdict": self.verdict, "passed": self.passed,
                "minimum_shuffles": MINIMUM_SHUFFLES, "level": 1 - LEVEL, "tests": [t.as_json() for t in self.tests]}


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for chi-squared with ``df`` degrees of freedom (Wilson-Hilferty)."""
    if x <= 0:
        return 1.0
    k = 2.0 / (9.0 * df)
    z = ((x / df) ** (1.0 / 3.0) - (1.0 - k)) / math.sqrt(k)
    return normal_sf(z)


def normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def binomial_allowance(n: int, p: float, level: float = LEVEL) -> int:
    """The most failures out of ``n`` tests at level ``p`` that chance explains at ``level``."""
    m, tail = 0, 1.0
    while True:
        tail -= math.comb(n, m) * p ** m * (1 - p) ** (n - m)  # now P(X > m)
        if tail < level:
            return m
        m += 1


#: 5 expected per cell of the card-by-position table (the chi-squared rule of thumb), whatever the decks
MINIMUM_SHUFFLES = 5 * 52


def qualify(orders: Iterable[list[Card]], decks: int) -> Report:
    orders = list(orders)
    shuffles, n = len(orders), 52 * decks
    if shuffles < 2 or any(len(o) != n for o in orders):
        raise RandomnessError(f"qualification needs at least 2 shuffles of {n} cards")
    return Report(shuffles, decks, (_chi_squared(orders, n), _runs(orders, decks), _correlation(orders, n)))


def _chi_squared(orders: list[list[Card]], n: int) -> TestResult:
    counts = [[0] * n for _ in ALL_CARDS]
    for order in orders:
        for position, card in enumerate(order):
            counts[_ORDINAL[card]][position] += 1
    expected = len(orders) * (n // 52) / n
    # Each shuffle is a permutation: a cell is binomial(shuffles, decks / n), so the raw statistic's
    # mean is 51 n per table and 51 n / 52 per card. Scaled to the degrees of freedom (for one deck the
    # table's factor is (n - 1) / n, the known correction for permutation tables; a card's is 1).
    row_scale, table_scale = (n - 1) * 52 / (51 * n), (n - 1) / n
    raw = [sum((o - expected) ** 2 for o in row) / expected for row in counts]
    failing = [str(ALL_CARDS[i]) for i, x in enumerate(raw) if chi2_sf(x * row_scale, n - 1) < LEVEL]
    allowed = binomial_allowance(len(ALL_CARDS), LEVEL)
    total, df = sum(raw) * table_scale, (len(ALL_CARDS) - 1) * (n - 1)
    p = chi2_sf(total, df)
    passed = len(failing) <= allowed and p >= LEVEL
    conclusive = len(orders) >= MINIMUM_SHUFFLES  # expected = shuffles / 52 per cell, whatever the decks
    low = "" if conclusive else (f"; not judged: {expected:.2f} expected per cell, the chi-squared tail needs 5 "
                                 f"(at least {MINIMUM_SHUFFLES} shuffles)")
    return TestResult("chi-squared card x position", total, p, passed,
                      f"table chi2 {total:.1f} on {df} df, p = {p:.4f}; cards failing at 99 %: {len(failing)} "
                      f"(chance allows {allowed}){': ' + ', '.join(failing[:8]) if failing else ''}{low}", conclusive)


def _places(order: list[Card], decks: int) -> list[int]:
    """Each dealt card's place in the loaded order (fresh decks; the k-th copy seen is the k-th loaded)."""
    seen: dict[Card, int] = {}
    out = []
    for card in order:
        copy = seen.get(card, 0)
        seen[card] = copy + 1
        out.append(copy * 52 + _ORDINAL[card])
    return out


def _runs(orders: list[list[Card]], decks: int) -> TestResult:
    runs, n = 0, 52 * decks
    for order in orders:
        places = _places(order, decks)
        ups = [b > a for a, b in zip(places, places[1:])]
        runs += 1 + sum(1 for a, b in zip(ups, ups[1:]) if a != b)
    mean, var = len(orders) * (2 * n - 1) / 3, len(orders) * (16 * n - 29) / 90
    z = (runs - mean) / math.sqrt(var)
    p = 2 * normal_sf(abs(z))
    return TestResult("runs up and down", z, p, abs(z) < _Z99,
                      f"{runs} runs, expected {mean:.1f}; z = {z:.2f}, p = {p:.4f}")


def _correlation(orders: list[list[Card]], n: int) -> TestResult:
    """Pearson's r of each card's mean position (over its copies) in one shuffle and the next."""
    def mean_positions(order: list[Card]) -> list[float]:
        at = [0.0] * len(ALL_CARDS)
        for position, card in enumerate(order):
            at[_ORDINAL[card]] += position
        return [x * 52 / n for x in at]

    k = len(ALL_CARDS)
    rs = []
    previous = mean_positions(orders[0])
    for order in orders[1:]:
        current = mean_positions(order)
        ma, mb = sum(previous) / k, sum(current) / k
        cov = sum((a - ma) * (b - mb) for a, b in zip(previous, current))
        va = sum((a - ma) ** 2 for a in previous)
        vb = sum((b - mb) ** 2 for b in current)
        rs.append(cov / math.sqrt(va * vb))
        previous = current
    mean_r = sum(rs) / len(rs)
    z = mean_r * math.sqrt((k - 1) * len(rs))  # each r: mean 0, variance 1 / (52 - 1) under independence
    p = 2 * normal_sf(abs(z))
    return TestResult("correlation of consecutive shuffles", mean_r, p, abs(z) < _Z99,
                      f"mean r = {mean_r:.4f} over {len(rs)} pairs; z = {z:.2f}, p = {p:.4f}")
