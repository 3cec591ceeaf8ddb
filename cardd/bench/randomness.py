"""Shuffler qualification: shuffles dealt through the shoe's reader, then tested as a lab would.

:class:`ShuffleSource` deals the simulators' own shuffler's stacks through their shoe;
:class:`DeviceShuffleSource` drives a shuffler and a shoe at device URLs (real ones) through the
daemon's protocol session, a person moving the cards between them (the protocol carries no
shuffled order: each order is what the shoe reads);
:func:`qualify` runs the tests at the 99 % level (chi-squared per card and position, runs up and
down, correlation between consecutive shuffles; no SciPy): docs/bench.md, "`cardbench randomness`"."""
from __future__ import annotations

import asyncio
import math
import random
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from core.cards import ALL_CARDS, Card
from core.errors import CarddError
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.messages import (CardRead, DeckCheckResult, DeviceRole, Fault, Message, Refused, ShoeEmpty,
                                      ShoeLoaded, ShuffleComplete, StartShuffle, UnreadableCard)
from firmware_bridge.session import SessionConfig
from simulators.faults import Faults
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler

LEVEL = 0.01  # every test at the 99 % level
_Z99 = 2.5758293035489  # two-sided 99 % normal quantile
_ORDINAL = {card: i for i, card in enumerate(ALL_CARDS)}


class RandomnessError(CarddError, RuntimeError):
    """The devices did not deliver a full shuffled shoe."""


class DeviceOpenError(RandomnessError):
    """A device would not open or shake hands (missing, busy, silent): ``cause`` is the driver's
    or the session's error, ``url`` the device's."""

    def __init__(self, url: str, cause: CarddError) -> None:
        super().__init__(str(cause))
        self.url, self.cause = url, cause


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


#: how long the bench waits for a shuffle to end, or for the person to load the shoe or deal the
#: next card (cardbench run --device waits as long for a move of the cards)
OPERATOR_TIMEOUT = 300.0


class DeviceShuffleSource:
    """Shuffles from a shuffler at ``shuffler_url``, each order read by the shoe at ``shoe_url`` as a
    person deals the shuffled stack out of it. Both devices are opened as the daemon opens them
    (DeviceConnection: the serial or USB driver, the link, the session's handshake). ``say`` gives the
    person each move of the cards (a ``hands:`` line), as ``cardbench run --device`` does.

    The protocol carries no order of undealt cards (docs/protocol.md, section 4): ShuffleComplete
    and DeckCheckResult carry counts per card, a CardRead the card that has just left the shoe. So
    one shuffle is: StartShuffle(decks) and the shuffler's DeckCheckResult (all ``decks`` decks,
    nothing missing or extra); the stack into the shoe without a cut card, every card dealt, the
    CardReads from index 1 to the last (ShoeEmpty) its order; the dealt pile back into the shuffler
    as it is, the next shuffle's input. The first shuffle's order is only the second one's input:
    :meth:`orders` shuffles ``shuffles + 1`` times and returns the last ``shuffles`` orders with
    the order each was loaded in, for the runs test."""

    def __init__(self, shuffler_url: str, shoe_url: str, decks: int, say: Callable[[str], None],
                 confirm: Callable[[], str], timeout: float = OPERATOR_TIMEOUT) -> None:
        self.shuffler_url, self.shoe_url, self.decks, self.say, self.timeout = shuffler_url, shoe_url, decks, say, timeout
        self.confirm = confirm
        self.cards = 52 * decks

    def orders(self, shuffles: int) -> tuple[list[list[Card]], list[list[Card]]]:
        """(orders, loaded): each shuffle's dealt order and the order it was loaded in."""
        return asyncio.run(self._run(shuffles))

    async def _run(self, shuffles: int) -> tuple[list[list[Card]], list[list[Card]]]:
        config = SessionConfig(host_name="cardbench randomness")
        self._from_shuffler: asyncio.Queue[Message] = asyncio.Queue()
        self._from_shoe: asyncio.Queue[Message] = asyncio.Queue()
        shuffler = DeviceConnection(self.shuffler_url, self._from_shuffler.put_nowait, None, config)
        shoe = DeviceConnection(self.shoe_url, self._from_shoe.put_nowait, None, config)
        orders: list[list[Card]] = []
        loaded: list[list[Card]] = []
        try:
            await _open(shuffler, self.shuffler_url, DeviceRole.SHUFFLER)
            await _open(shoe, self.shoe_url, DeviceRole.SHOE)
            await self._ask(f"hands: load {self.decks} full deck(s) into the shuffler, in any order; the shoe empty")
            previous: list[Card] | None = None
            for number in range(shuffles + 1):
                await self._shuffle(shuffler, number)
                order = await self._deal(number)
                if previous is not None:
                    orders.append(order)
                    loaded.append(previous)
                previous = order
                if number < shuffles:
                    await self._ask(f"hands: put the {self.cards} dealt cards back into the shuffler as one pile, "
                                    "as they came out of the shoe (not cut or mixed)")
        finally:
            await shoe.close()
            await shuffler.close()
        return orders, loaded

    async def _ask(self, move: str) -> None:
        """Say ``move`` and wait for the person's Enter. The protocol has no tray sensor, so only the
        person knows when the cards are in the shuffler: a shuffle started sooner would take whatever
        is in the tray, not the order the bench read. ``confirm`` blocks (a line of stdin), so it runs
        on a daemon thread that a timeout can leave behind."""
        self.say(f"{move}; then press Enter")
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[str] = loop.create_future()

        def wait() -> None:
            try:
                line = self.confirm()
            except (OSError, ValueError):  # stdin closed or unreadable: as an end of input
                line = ""
            loop.call_soon_threadsafe(_settle, answer, line)

        threading.Thread(target=wait, name="cardbench-confirm", daemon=True).start()
        try:
            async with asyncio.timeout(self.timeout):
                line = await answer
        except TimeoutError:
            raise RandomnessError(f"{move[len('hands: '):]}: no Enter within {self.timeout:g} s") from None
        if not line:
            raise RandomnessError("stdin ended before the cards were moved: the run needs a person at the "
                                  "devices pressing Enter after each move")

    async def _next(self, queue: asyncio.Queue[Message], what: str) -> Message:
        try:
            async with asyncio.timeout(self.timeout):
                return await queue.get()
        except TimeoutError:
            raise RandomnessError(f"{what}: nothing within {self.timeout:g} s") from None

    async def _shuffle(self, shuffler: DeviceConnection, number: int) -> None:
        """StartShuffle, then until the shuffler's deck check: all its decks, in full."""
        what = f"shuffle {number}" + (" (the first, whose order the next is loaded in)" if number == 0 else "")
        _drain(self._from_shuffler)
        await shuffler.send(StartShuffle(self.decks))
        while True:
            msg = await self._next(self._from_shuffler, f"{what}: the shuffler's deck check")
            if isinstance(msg, Refused) and msg.request_type == StartShuffle.TYPE:
                raise RandomnessError(f"{what}: the shuffler refused to shuffle: {msg.reason}")
            if isinstance(msg, Fault):
                raise RandomnessError(f"{what}: the shuffler reports {msg.code.name} at card {msg.position}: "
                                      f"{msg.detail}")
            if isinstance(msg, ShuffleComplete) and msg.card_count != self.cards:
                raise RandomnessError(f"{what}: the shuffler counted {msg.card_count} cards, not {self.cards}")
            if isinstance(msg, DeckCheckResult):
                if not msg.ok:
                    missing = ", ".join(f"{card} x{n}" for card, n in msg.missing) or "none"
                    extra = ", ".join(f"{card} x{n}" for card, n in msg.extra) or "none"
                    raise RandomnessError(f"{what}: the deck check failed (missing {missing}; extra {extra}; "
                                          f"{msg.unrecognised} unrecognised): load {self.decks} full deck(s)")
                return

    async def _deal(self, number: int) -> list[Card]:
        """The order the shoe reads: ShoeLoaded, then CardRead 1..n, until ShoeEmpty."""
        _drain(self._from_shoe)  # what the shoe resent at its handshake, or said before this shoe
        self.say(f"hands: put the shuffled stack into the shoe without a cut card and deal all {self.cards} cards")
        reads: dict[int, Card] = {}
        loaded = False
        while True:
            msg = await self._next(self._from_shoe, f"shuffle {number}: the shoe "
                                   + (f"after {len(reads)} of {self.cards} cards" if loaded else "loaded"))
            if isinstance(msg, ShoeLoaded):
                loaded, reads = True, {}
            elif not loaded:
                continue
            elif isinstance(msg, CardRead):
                reads[msg.index] = msg.card
            elif isinstance(msg, UnreadableCard):
                raise RandomnessError(f"shuffle {number}: the shoe could not read card {msg.index}: its order "
                                      "is not known (a damaged card: replace it and start again)")
            elif isinstance(msg, ShoeEmpty):
                break
        if sorted(reads) != list(range(1, self.cards + 1)):
            raise RandomnessError(f"shuffle {number}: the shoe read {len(reads)} cards, not {self.cards} "
                                  "(the whole stack, without a cut card)")
        return [reads[index] for index in range(1, self.cards + 1)]


async def _open(connection: DeviceConnection, url: str, role: DeviceRole) -> None:
    """Open and shake hands; the device must be a ``role``."""
    try:
        ident = await connection.open()
    except CarddError as exc:
        raise DeviceOpenError(url, exc) from None
    if ident.role is not role:
        await connection.close()
        raise RandomnessError(f"{url}: a {ident.role.name.lower()} ({ident.model} {ident.serial}), "
                              f"not a {role.name.lower()}")


def _settle(answer: asyncio.Future[str], line: str) -> None:
    if not answer.done():  # a timeout may have given up on it
        answer.set_result(line)


def _drain(queue: asyncio.Queue[Message]) -> None:
    while not queue.empty():
        queue.get_nowait()


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


def qualify(orders: Iterable[list[Card]], decks: int, loaded: Sequence[list[Card]] | None = None) -> Report:
    """The three tests over ``orders``; ``loaded``: the order each shuffle was loaded in (default:
    fresh decks, as the simulated shuffler is), the runs test's reference."""
    orders = list(orders)
    shuffles, n = len(orders), 52 * decks
    if shuffles < 2 or any(len(o) != n for o in orders):
        raise RandomnessError(f"qualification needs at least 2 shuffles of {n} cards")
    return Report(shuffles, decks, (_chi_squared(orders, n), _runs(orders, decks, loaded), _correlation(orders, n)))


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


def _places(order: list[Card], decks: int, loaded: list[Card] | None = None) -> list[int]:
    """Each dealt card's place in the loaded order (default fresh decks; the k-th copy seen is the
    k-th loaded)."""
    at: dict[Card, list[int]] = {}
    for place, card in enumerate(loaded or []):
        at.setdefault(card, []).append(place)
    seen: dict[Card, int] = {}
    out = []
    for card in order:
        copy = seen.get(card, 0)
        seen[card] = copy + 1
        out.append(at[card][copy] if loaded else copy * 52 + _ORDINAL[card])
    return out


def _runs(orders: list[list[Card]], decks: int, loaded: Sequence[list[Card]] | None = None) -> TestResult:
    """Runs up and down of the dealt cards' places in the loaded order. A reference reversed (the
    dealt pile put back either way up) has the same runs: ups and downs swap."""
    runs, n = 0, 52 * decks
    for i, order in enumerate(orders):
        places = _places(order, decks, loaded[i] if loaded is not None else None)
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
