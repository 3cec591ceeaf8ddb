"""Playing cards as the protocol carries them: one byte per card.

Byte layout: high nibble = suit (0..3), low nibble = rank (1..13). Any other byte is not
a card, and decoding it raises :class:`CardCodeError` with the byte in hex.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from core.errors import CarddError


class Suit(IntEnum):
    CLUBS = 0
    DIAMONDS = 1
    HEARTS = 2
    SPADES = 3

    @property
    def symbol(self) -> str:
        return "CDHS"[self]


class Rank(IntEnum):
    ACE = 1
    TWO = 2
    THREE = 3
    FOUR = 4
    FIVE = 5
    SIX = 6
    SEVEN = 7
    EIGHT = 8
    NINE = 9
    TEN = 10
    JACK = 11
    QUEEN = 12
    KING = 13

    @property
    def symbol(self) -> str:
        return {1: "A", 10: "T", 11: "J", 12: "Q", 13: "K"}.get(self.value, str(self.value))


class Orientation(IntEnum):
    FACE_DOWN = 0
    FACE_UP = 1


class CardCodeError(CarddError, ValueError):
    """A byte that does not name a card."""


@dataclass(frozen=True, order=True, slots=True)
class Card:
    rank: Rank
    suit: Suit
    # hash((rank, suit)), what the generated __hash__ computed per call, computed once: the deal
    # tracker counts and looks cards up by Card many times per card read. Not compared, not shown.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.rank, self.suit)))

    def __hash__(self) -> int:
        return self._hash

    def to_byte(self) -> int:
        return (int(self.suit) << 4) | int(self.rank)

    @classmethod
    def from_byte(cls, code: int) -> "Card":
        suit, rank = code >> 4, code & 0x0F
        if suit > 3 or not 1 <= rank <= 13:
            raise CardCodeError(f"byte 0x{code:02x} is not a card (suit nibble 0-3, rank nibble 1-13)")
        return _BY_CODE[code]

    @classmethod
    def parse(cls, text: str) -> "Card":
        """Parse the short form used in docs, scenarios and the CLI: 'AS', 'TD', '10D', '7h'."""
        t = text.strip().upper()
        rank_text, suit_text = t[:-1], t[-1:]
        ranks = {r.symbol: r for r in Rank} | {"10": Rank.TEN}
        suits = {s.symbol: s for s in Suit}
        if rank_text not in ranks or suit_text not in suits:
            raise CardCodeError(f"{text!r} is not a card: expected rank A,2-9,T(10),J,Q,K then suit C,D,H,S, e.g. 'AS'")
        return cls(ranks[rank_text], suits[suit_text])

    def __str__(self) -> str:
        return _TEXT[self.suit][self.rank]  # a table: every snapshot and event names cards by text


_TEXT: tuple[tuple[str, ...], ...] = tuple(tuple([""] + [r.symbol + s.symbol for r in Rank]) for s in Suit)
ALL_CARDS: tuple[Card, ...] = tuple(Card(r, s) for s in Suit for r in Rank)
_BY_CODE: dict[int, Card] = {card.to_byte(): card for card in ALL_CARDS}  # cards are values: one of each


def shoe_composition(decks: int) -> dict[Card, int]:
    """How many of each card a shoe of ``decks`` full decks holds."""
    return {card: decks for card in ALL_CARDS}
