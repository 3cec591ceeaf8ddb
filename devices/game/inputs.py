"""Everything a round takes, as typed records: what :meth:`devices.game.round.Round.apply` applies.

The players' and the dealer's inputs (bets, insurance, decisions) are also inputs of the table
(:mod:`devices.tracker.inputs` re-exports them); the others are what the table decides for the
round (a card dealt, a hold, a flag, a void, a reconstruction). The table's round log is a list of
these records: replaying it into a fresh round rebuilds the round exactly (the snapshot does).
Frozen values: a record never changes once made, so a log, a journal and a recording can share it.
"""
from __future__ import annotations

from dataclasses import dataclass

from core.cards import Card
from devices.events import Reason, Role
from devices.game.round_types import Action, Target


@dataclass(frozen=True, slots=True)
class PlaceBet:
    box: int
    player: str
    amount: int  # cents


@dataclass(frozen=True, slots=True)
class ReduceBet:
    """A player lowers his own bet during betting: ``amount`` is his new stake, 0 withdraws it
    (co-players reduce when the box owner's priority takes the box over its maximum:
    table.owner_priority_at_maximum; an owner gives a box up: table.give_up_boxes)."""

    box: int
    player: str
    amount: int


@dataclass(frozen=True, slots=True)
class PlacePairsBet:
    """A Blackjack Pairs side wager, where the house rules offer it."""

    box: int
    player: str
    amount: int


@dataclass(frozen=True, slots=True)
class NoMoreBets:
    who: str


@dataclass(frozen=True, slots=True)
class Insure:
    box: int
    player: str
    amount: int


@dataclass(frozen=True, slots=True)
class EvenMoney:
    box: int
    player: str


@dataclass(frozen=True, slots=True)
class CloseInsurance:
    who: str


@dataclass(frozen=True, slots=True)
class CoPlayerChoice:
    """A co-player's own answer to the box owner's double or split (his money depends on it)."""

    player: str
    joins: bool  # adds his own chips to follow the double or split
    amount: int | None = None  # a double he joins for less, where the rules allow a double for less
    stays_on: int | None = None  # a split he declines: 1 = the first card's hand, 2 = the second's


@dataclass(frozen=True, slots=True)
class Act:
    """The box owner's decision for the box's hand in turn (surrender: any unplayed box).

    ``player`` is who decides: the box owner (the first player on the box). It may be left out
    only on a box with one player. ``co_players`` holds one answer per co-player on the hand to a
    double or a split; ``who`` is the person who keyed the input.
    """

    box: int
    action: Action
    who: str
    amount: int | None = None  # the owner's double for less
    player: str | None = None
    co_players: tuple[CoPlayerChoice, ...] = ()


@dataclass(frozen=True, slots=True)
class Resume:
    """A supervisor continues a held round."""

    who: str
    role: Role


@dataclass(frozen=True, slots=True)
class CardDealt:
    """A card from the shoe for the hand that expects it now."""

    card: Card


@dataclass(frozen=True, slots=True)
class Hold:
    reason: Reason
    detail: str


@dataclass(frozen=True, slots=True)
class Flag:
    """Something the round carries on its record (e.g. an unreadable card the dealer entered)."""

    reason: Reason
    detail: str
    who: str | None = None


@dataclass(frozen=True, slots=True)
class Void:
    """The round is void; ``by_rule`` names a house rule that voids it without a supervisor."""

    reason: Reason
    who: str
    role: Role
    by_rule: str | None = None


@dataclass(frozen=True, slots=True)
class ReconstructInitialDeal:
    """A placement error: the initial deal is put back as the deal order (or ``assignments``) says."""

    who: str
    role: Role
    assignments: tuple[tuple[Card, Target], ...] | None = None


@dataclass(frozen=True, slots=True)
class ReconstructAndRedeal:
    """Cards to a box without a wager: every card in play (``also``: exposed, not yet taken) is dealt again."""

    who: str
    role: Role
    also: tuple[Card, ...] = ()


RoundInput = (PlaceBet | ReduceBet | PlacePairsBet | NoMoreBets | Insure | EvenMoney | CloseInsurance | Act | Resume
              | CardDealt | Hold | Flag | Void | ReconstructInitialDeal | ReconstructAndRedeal)
ROUND_INPUTS: tuple[type, ...] = (
    PlaceBet, ReduceBet, PlacePairsBet, NoMoreBets, Insure, EvenMoney, CloseInsurance, Act, Resume, CardDealt, Hold, Flag,
    Void, ReconstructInitialDeal, ReconstructAndRedeal,
)
