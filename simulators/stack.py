"""Card stacks inside the simulated devices: the unbiased shuffle and the physical misloads.

A stack is a list of :data:`StackCard`: a :class:`Card`, or ``None`` for a foreign card
(another back, a damaged card) that no camera can identify. Stacks never leave the
simulators; the host learns about cards only as the shoe reads them.
"""
from __future__ import annotations

import random
import secrets
from collections import Counter
from typing import Iterable, MutableSequence, Sequence, TypeVar

from core.cards import ALL_CARDS, Card, shoe_composition

from simulators.faults import Faults

StackCard = Card | None
T = TypeVar("T")

_SYSTEM_RANDOM = secrets.SystemRandom()


def stack_text(stack: Sequence[StackCard]) -> list[str | None]:
    """A stack as JSON keeps it (a device's memory, simulators/nvram.py): card codes, None for a foreign card."""
    return [None if card is None else str(card) for card in stack]


def stack_from_text(data: object, where: str) -> list[StackCard]:
    """:func:`stack_text`'s list back; ValueError naming ``where`` for anything else."""
    if not isinstance(data, list):
        raise ValueError(f"{where}: expected a list of cards")
    try:
        return [None if card is None else Card.parse(card) for card in data]
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{where}: {exc}") from None


def fisher_yates(items: Iterable[T], rng: random.Random = _SYSTEM_RANDOM) -> list[T]:
    """A uniformly random permutation of ``items`` (Durstenfeld's Fisher-Yates).

    ``randrange`` draws by rejection sampling, so each index is unbiased; swapping with
    ``j`` in ``0..i`` (never ``0..n-1``) is what makes all n! orders equally likely.
    """
    out = list(items)
    for i in range(len(out) - 1, 0, -1):
        j = rng.randrange(i + 1)
        out[i], out[j] = out[j], out[i]
    return out


def riffle_once(items: Iterable[T], rng: random.Random = _SYSTEM_RANDOM) -> list[T]:
    """One riffle (the Gilbert-Shannon-Reeds model): a binomial cut, then cards drop from each
    packet with probability proportional to its size. Far from random: the output is two
    interleaved runs of the input order (the ``riffle_once`` fault switch)."""
    cards = list(items)
    cut = sum(rng.random() < 0.5 for _ in cards)
    left, right = cards[:cut], cards[cut:]
    out: list[T] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if rng.random() * (len(left) - i + len(right) - j) < len(left) - i:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    return out


def full_shoe(decks: int) -> list[Card]:
    """``decks`` fresh decks in deck order."""
    return [card for _ in range(decks) for card in shoe_composition(1)]


def misload(stack: Sequence[StackCard], faults: Faults, rng: random.Random) -> list[StackCard]:
    """``stack`` as the physical faults leave it: missing cards out, extra/foreign/duplicates in."""
    out: MutableSequence[StackCard] = list(stack)
    for card in faults.missing:
        if card in out:
            out.remove(card)
    for card in faults.extra:
        out.insert(rng.randrange(len(out) + 1), card)
    for _ in range(faults.foreign):
        out.insert(rng.randrange(len(out) + 1), None)
    for card in faults.duplicate:
        at = out.index(card) + 1 if card in out else len(out)
        out.insert(at, card)
    return list(out)


def composition(stack: Sequence[StackCard]) -> dict[Card, int]:
    """How many of each identified card the stack holds (foreign cards are not counted), in
    the canonical card order: a dict keeps insertion order, so counting in stack order would
    hand the stack's order to whoever iterates it."""
    counts = Counter(card for card in stack if card is not None)
    return {card: counts[card] for card in ALL_CARDS if counts[card]}


def deck_check(stack: Sequence[StackCard], decks: int) -> tuple[tuple[tuple[Card, int], ...], tuple[tuple[Card, int], ...], int]:
    """(missing, extra, unrecognised) of ``stack`` against ``decks`` full decks."""
    found = Counter(composition(stack))
    expected = Counter(shoe_composition(decks))
    missing = tuple(sorted((expected - found).items()))
    extra = tuple(sorted((found - expected).items()))
    return missing, extra, sum(1 for card in stack if card is None)
