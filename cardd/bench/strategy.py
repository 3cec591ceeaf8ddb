"""Players' strategies for the Monte Carlo: what a player does with a hand against the dealer's up
card, as actions in order of preference (the round refuses what the house rules forbid).
``BasicStrategy`` is the multi-deck S17/DAS no-hole-card chart; its source and its cells:
docs/bench.md, "`cardbench simulate`"."""
from __future__ import annotations

from typing import Protocol

from core.cards import Card, Rank
from devices.game.hand import card_value
from devices.game.round_types import Action

H, S, D, P = Action.HIT, Action.STAND, Action.DOUBLE, Action.SPLIT
#: the dealer's up card as a column: 2..9, T (any ten-value card), A
UP_COLUMNS = ("2", "3", "4", "5", "6", "7", "8", "9", "T", "A")


def up_column(card: Card) -> str:
    value = card_value(card)
    return "A" if value == 1 else "T" if value == 10 else str(value)


def _row(cells: str) -> dict[str, str]:
    """A chart row written as ten letters for the up cards 2..9, T, A."""
    letters = cells.split()
    assert len(letters) == len(UP_COLUMNS), cells
    return dict(zip(UP_COLUMNS, letters))


# Letters: H hit, S stand, D double else hit, Ds double else stand, P split.
#                        2  3  4  5  6  7  8  9  T  A
HARD: dict[int, dict[str, str]] = {
    **{t: _row("H  H  H  H  H  H  H  H  H  H") for t in range(4, 9)},
    9: _row("H  D  D  D  D  H  H  H  H  H"),
    10: _row("D  D  D  D  D  D  D  D  H  H"),   # ENHC: not against T or A
    11: _row("D  D  D  D  D  D  D  D  H  H"),   # ENHC: not against T or A
    12: _row("H  H  S  S  S  H  H  H  H  H"),
    **{t: _row("S  S  S  S  S  H  H  H  H  H") for t in range(13, 17)},
    **{t: _row("S  S  S  S  S  S  S  S  S  S") for t in range(17, 22)},
}
#: soft totals (an ace counted as 11), 13 = A,2 .. 21
SOFT: dict[int, dict[str, str]] = {
    13: _row("H  H  H  D  D  H  H  H  H  H"),
    14: _row("H  H  H  D  D  H  H  H  H  H"),
    15: _row("H  H  D  D  D  H  H  H  H  H"),
    16: _row("H  H  D  D  D  H  H  H  H  H"),
    17: _row("H  D  D  D  D  H  H  H  H  H"),
    18: _row("S  Ds Ds Ds Ds S  S  H  H  H"),
    19: _row("S  S  S  S  S  S  S  S  S  S"),
    20: _row("S  S  S  S  S  S  S  S  S  S"),
    21: _row("S  S  S  S  S  S  S  S  S  S"),
}
#: pairs by card value (1 = aces); a pair not split is played by its total (5,5 as hard 10)
PAIRS: dict[int, dict[str, str]] = {
    1: _row("P  P  P  P  P  P  P  P  P  H"),    # ENHC: not against an ace
    2: _row("P  P  P  P  P  P  H  H  H  H"),
    3: _row("P  P  P  P  P  P  H  H  H  H"),
    4: _row("H  H  H  P  P  H  H  H  H  H"),
    5: _row("-  -  -  -  -  -  -  -  -  -"),
    6: _row("P  P  P  P  P  H  H  H  H  H"),
    7: _row("P  P  P  P  P  P  H  H  H  H"),
    8: _row("P  P  P  P  P  P  P  P  H  H"),    # ENHC: not against T or A
    9: _row("P  P  P  P  P  S  P  P  S  S"),
    10: _row("-  -  -  -  -  -  -  -  -  -"),
}
_LETTERS: dict[str, tuple[Action, ...]] = {
    "H": (H,), "S": (S,), "D": (D, H), "Ds": (D, S), "P": (P,),
}


class Strategy(Protocol):
    name: str

    def decide(self, cards: list[Card], up: Card) -> tuple[Action, ...]:
        """Actions in order of preference; the round refuses those the rules forbid, the next is tried."""
        ...


class AlwaysStand:
    name = "stand"

    def decide(self, cards: list[Card], up: Card) -> tuple[Action, ...]:
        return (S,)


class BasicStrategy:
    name = "basic"

    def decide(self, cards: list[Card], up: Card) -> tuple[Action, ...]:
        column = up_column(up)
        hard = sum(card_value(c) for c in cards)
        ace = any(c.rank is Rank.ACE for c in cards)
        by_total = _total_play(hard, ace, column)
        if len(cards) == 2 and card_value(cards[0]) == card_value(cards[1]):
            letter = PAIRS[card_value(cards[0])][column]
            if letter == "P":  # a split the rules refuse (limit, rank-only pairs) plays the total
                return (P, *by_total)
        return by_total


def _total_play(hard: int, ace: bool, column: str) -> tuple[Action, ...]:
    if ace and hard + 10 <= 21:
        return _LETTERS[SOFT[hard + 10][column]] if hard + 10 >= 13 else (H,)
    return _LETTERS[HARD[min(hard, 21)][column]] if hard <= 21 else (S,)


STRATEGIES: dict[str, type[AlwaysStand] | type[BasicStrategy]] = {"stand": AlwaysStand, "basic": BasicStrategy}
