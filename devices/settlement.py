"""Settlement of a finished round: per hand and per player, exact money (Fractions of cents).

Main bets: win 1:1, blackjack 3:2, push, surrender half back, blackjack beats 21, a dealer
blackjack beats every other hand (doubled and split stakes included: no hole card), both
blackjack push. Insurance pays 2:1; even money is paid 1:1 at once instead of the hand.
Side bets and bonuses as configured (docs/rules.md). ``net`` is what the player gains (+) or
loses (-), in cents: an int, or an exact Fraction where a ratio leaves part of a cent (3:2 on an
odd stake); never a float. The house result is minus the sum of the players' nets.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable

from devices.hand import Hand, hand_total, is_two_card_21
from devices.rules import HouseRules
from firmware_bridge.cards import Card, Rank, Suit

_RED = {Suit.DIAMONDS, Suit.HEARTS}
Money = int | Fraction  # cents; a Fraction only where a pay ratio leaves part of a cent


@dataclass(frozen=True, slots=True)
class Line:
    player: str
    box: int
    hand: int | None  # None for per-box bets (insurance, pairs)
    kind: str  # main, surrender, even_money, insurance, pairs, bonus_77, bonus_777, five_card_21, seven_card_hand
    stake: int
    net: Money
    outcome: str  # win, blackjack, push, lose, ...

    def describe(self) -> str:
        where = f"box {self.box}" + (f" hand {self.hand + 1}" if self.hand is not None else "")
        return f"{self.player} {self.kind} at {where}: {self.outcome}, stake {self.stake}, net {self.net}"

    def as_data(self) -> dict[str, Any]:
        return {"player": self.player, "box": self.box, "hand": self.hand, "kind": self.kind,
                "stake": self.stake, "net": str(self.net), "outcome": self.outcome}


@dataclass(frozen=True, slots=True)
class Settlement:
    lines: tuple[Line, ...]

    def per_player(self) -> dict[str, Money]:
        out: dict[str, Money] = {}
        for line in self.lines:
            out[line.player] = out.get(line.player, 0) + line.net
        return out

    @property
    def house(self) -> Money:
        """The house's result: what the players lost minus what they won."""
        return -sum(line.net for line in self.lines)


def dealer_blackjack(dealer: list[Card]) -> bool:
    return is_two_card_21(dealer)


_HALF_LOSS, _THREE_HALVES = Fraction(-1, 2), Fraction(3, 2)


def _times(ratio: Fraction | int, stake: int) -> Money:
    """ratio x stake, kept an int whenever it is whole (most lines), else an exact Fraction."""
    if isinstance(ratio, int):
        return ratio * stake
    num, den = ratio.numerator * stake, ratio.denominator
    return num // den if num % den == 0 else Fraction(num, den)


def _main(hand: Hand, dealer_total: int, dealer_bj: bool) -> tuple[str, str, Fraction | int]:
    """(kind, outcome, multiple of the player's whole stake on the hand)."""
    if hand.surrendered:
        return "surrender", "surrender", _HALF_LOSS
    if hand.bust:
        return "main", "bust", -1
    if dealer_bj:
        return ("main", "push", 0) if hand.blackjack else ("main", "dealer_blackjack", -1)
    if hand.blackjack:
        return "main", "blackjack", _THREE_HALVES
    total = hand.total
    if dealer_total > 21 or total > dealer_total:
        return "main", "win", 1
    return ("main", "lose", -1) if total < dealer_total else ("main", "push", 0)


def _pair_kind(a: Card, b: Card) -> str | None:
    if a.rank != b.rank:
        return None
    if a.suit == b.suit:
        return "perfect_pair"
    return "colored_pair" if (a.suit in _RED) == (b.suit in _RED) else "mixed_pair"


def _bonuses(rules: HouseRules, hand: Hand, dealer: list[Card]) -> Iterable[tuple[str, str, Fraction]]:
    """Seed 001's bonuses on the hand's own stake: (kind, outcome, pay multiple); only wins are listed."""
    sb, cards = rules.side_bets, hand.cards
    if sb.seven_seven_seven.enabled:
        t = sb.seven_seven_seven
        sevens = sum(1 for c in cards[:3] if c.rank is Rank.SEVEN)
        if len(cards) >= 2 and cards[0].rank is cards[1].rank is Rank.SEVEN and cards[0].suit == cards[1].suit:
            yield "bonus_77", "suited_77", t.suited_77  # paid at once: stands whatever the dealer makes
        if len(cards) == 3 and sevens == 3 and not dealer_blackjack(dealer):
            suited = len({c.suit for c in cards}) == 1
            yield "bonus_777", "suited_777" if suited else "mixed_777", t.suited_777 if suited else t.mixed_777
    total = hand.total
    if sb.five_card_21.enabled and len(cards) >= 5 and total == 21:
        yield "five_card_21", "win", sb.five_card_21.pays
    if sb.seven_card_hand.enabled and len(cards) >= 7 and total <= 21:
        yield "seven_card_hand", "win", sb.seven_card_hand.pays


def settle(rules: HouseRules, hands: list[Hand], dealer: list[Card], insurance: dict[tuple[int, str], int],
           even_money: set[tuple[int, str]], pairs_bets: dict[tuple[int, str], int],
           initial_cards: dict[int, list[Card]]) -> Settlement:
    lines: list[Line] = []
    dealer_total, dealer_bj = hand_total(dealer)[0], dealer_blackjack(dealer)
    for hand in hands:
        main = _main(hand, dealer_total, dealer_bj)
        bonuses = list(_bonuses(rules, hand, dealer))
        for player, base in hand.stakes.items():
            stake = hand.stake_of(player)
            if hand.index == 0 and (hand.box, player) in even_money:
                lines.append(Line(player, hand.box, 0, "even_money", stake, stake, "even_money"))
            else:
                kind, outcome, mult = main
                lines.append(Line(player, hand.box, hand.index, kind, stake, _times(mult, stake), outcome))
            for kind, outcome, mult in bonuses:
                lines.append(Line(player, hand.box, hand.index, kind, base, _times(mult, base), outcome))
    for (box, player), amount in insurance.items():
        lines.append(Line(player, box, None, "insurance", amount, 2 * amount if dealer_bj else -amount,
                          "win" if dealer_bj else "lose"))
    pays = rules.side_bets.blackjack_pairs
    for (box, player), amount in pairs_bets.items():
        first_two = initial_cards.get(box, [])[:2]
        kind = _pair_kind(*first_two) if len(first_two) == 2 else None
        net = -amount if kind is None else _times(getattr(pays, kind), amount)
        lines.append(Line(player, box, None, "pairs", amount, net, kind or "lose"))
    return Settlement(tuple(lines))
