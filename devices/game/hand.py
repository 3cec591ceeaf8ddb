"""Blackjack hands: card values, totals, and one hand on a box with each player's stake.

A box holds one hand until its owner splits; every hand carries the stakes of the players
on the box who play it (co-players ride with the box owner's decisions unless they decline).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from core.cards import Card, Rank


# Looked up by the rank's number (an IntEnum indexes a tuple directly): the deal tracker values every
# card several times, and min(int(rank), 10) or Rank.ACE read from the enum class each cost a call.
_VALUE_OF_RANK = tuple(min(number, 10) for number in range(len(Rank) + 1))
_ACE = Rank.ACE


def card_value(card: Card) -> int:
    """Blackjack value with an ace as 1: ten, jack, queen and king are all 10."""
    return _VALUE_OF_RANK[card.rank]


def hand_total(cards: list[Card] | tuple[Card, ...]) -> tuple[int, bool]:
    """Best total and whether it is soft (an ace counted as 11)."""
    hard = 0
    ace = False
    for c in cards:
        rank = c.rank
        hard += _VALUE_OF_RANK[rank]
        if rank is _ACE:
            ace = True
    if ace and hard <= 11:
        return hard + 10, True
    return hard, False


def is_two_card_21(cards: list[Card] | tuple[Card, ...]) -> bool:
    return len(cards) == 2 and hand_total(cards)[0] == 21


@dataclass
class Hand:
    """One player hand on a box. ``stakes`` maps player id -> stake in cents on this hand."""

    box: int
    index: int  # 0 for the original hand, 1.. for hands made by splitting
    stakes: dict[str, int]
    cards: list[Card] = field(default_factory=list)  # read only: change it through add/take_last/reset
    doubled: dict[str, int] = field(default_factory=dict)  # player -> extra stake a double added
    from_split: bool = False
    split_aces: bool = False
    surrendered: bool = False
    stood: bool = False  # stood, or closed by the rules (a double's or a split ace's one card)
    took_double: bool = False
    awaiting_card: bool = False  # a hit or a double asked for a card that has not come yet
    waits_on_21: bool = False  # a split hand whose two-card 21 may still be doubled (play.double_on_split_21)

    _hard: int = field(default=0, init=False, repr=False)  # running hard total and ace flag,
    _ace: bool = field(default=False, init=False, repr=False)  # kept by add/take_last/reset

    def __post_init__(self) -> None:
        given, self.cards = list(self.cards), []
        self._hard, self._ace = 0, False
        for card in given:
            self.add(card)

    def add(self, card: Card) -> None:
        self.cards.append(card)
        rank = card.rank
        self._hard += _VALUE_OF_RANK[rank]
        if rank is _ACE:
            self._ace = True

    def take_last(self) -> Card:
        card = self.cards.pop()
        self._hard, self._ace = self._hard - card_value(card), any(c.rank is _ACE for c in self.cards)
        return card

    def reset(self) -> None:
        self.cards.clear()
        self._hard, self._ace = 0, False

    @property
    def total(self) -> int:
        return self._hard + 10 if self._ace and self._hard <= 11 else self._hard

    @property
    def soft(self) -> bool:
        return self._ace and self._hard <= 11

    @property
    def blackjack(self) -> bool:
        """Ace and a ten-value card as the first two cards of an unsplit hand (split-ace 21 is not)."""
        return not self.from_split and len(self.cards) == 2 and self.total == 21

    @property
    def complete(self) -> bool:
        """No more cards or decisions: stood (or closed), bust, surrendered, or any 21 (no drawing on 21),
        except a split hand's two-card 21 where the rules let it be doubled (it waits for stand or double)."""
        if self.surrendered or self.stood:
            return True
        n = len(self.cards)
        return n >= 2 and self.total >= 21 and not (self.waits_on_21 and n == 2 and self.total == 21)

    @property
    def needs_card(self) -> bool:
        return not self.complete and (len(self.cards) < 2 or self.awaiting_card)

    @property
    def bust(self) -> bool:
        return self._hard > 21

    def stake_of(self, player: str) -> int:
        return self.stakes.get(player, 0) + self.doubled.get(player, 0)

    def label(self) -> str:
        return f"box {self.box} hand {self.index + 1}"
