"""Settlement of a finished round: per hand and per player, exact money (Fractions of cents).

Main bets: win 1:1, blackjack 3:2, push, surrender half back, blackjack beats 21, a dealer
blackjack beats every other hand (doubled and split stakes included: no hole card), both
blackjack push. Insurance pays 2:1; even money is paid 1:1 at once instead of the hand.
Side bets and bonuses as configured (docs/rules.md). ``net`` is what the player gains (+) or
loses (-); the house result is minus the sum of the players' nets, so it always adds up.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable

from devices.hand import Hand, hand_total, is_two_card_21
from devices.rules import HouseRules
from firmware_bridge.cards import Card, Rank, Suit

_RED = {Suit.DIAMONDS, Suit.HEARTS}


@dataclass(frozen=True, slots=True)
class Line:
    player: str
    box: int
    hand: int | None  # None for per-box bets (insurance, pairs)
    kind: str  # main, surrender, even_money, insurance, pairs, bonus_77, bonus_777, five_card_21, seven_card_hand
    stake: int
    net: Fraction
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

    def per_player(self) -> dict[str, Fraction]:
        out: dict[str, Fraction] = {}
        for line in self.lines:
            out[line.player] = out.get(line.player, Fraction(0)) + line.net
        return out

    @property
    def house(self) -> Fraction:
        """The house's result: what the players lost minus what they won."""
        return -sum((line.net for line in self.lines), Fraction(0))


def dealer_blackjack(dealer: list[Card]) -> bool:
    return is_two_card_21(dealer)


def _main(hand: Hand, player: str, dealer: list[Card]) -> tuple[str, str, Fraction]:
    """(kind, outcome, multiple of the player's whole stake on the hand)."""
    if hand.surrendered:
        return "surrender", "surrender", Fraction(-1, 2)
    if hand.bust:
        return "main", "bust", Fraction(-1)
    dealer_total = hand_total(dealer)[0]
    if dealer_blackjack(dealer):
        return ("main", "push", Fraction(0)) if hand.blackjack else ("main", "dealer_blackjack", Fraction(-1))
    if hand.blackjack:
        return "main", "blackjack", Fraction(3, 2)
    if dealer_total > 21:
        return "main", "win", Fraction(1)
    if hand.total > dealer_total:
        return "main", "win", Fraction(1)
    if hand.total < dealer_total:
        return "main", "lose", Fraction(-1)
    return "main", "push", Fraction(0)


def _pair_kind(a: Card, b: Card) -> str | None:
    if a.rank != b.rank:
        return None
    if a.suit == b.suit:
        return "perfect_pair"
    return "colored_pair" if (a.suit in _RED) == (b.suit in _RED) else "mixed_pair"


def _bonuses(rules: HouseRules, hand: Hand, dealer: list[Card]) -> Iterable[tuple[str, str, Fraction]]:
    """Seed 001's bonuses on the hand's own stake: (kind, outcome, pay multiple); only wins are listed."""
    sb, cards = rules.side_bets, hand.cards
    sevens = [c for c in cards[:3] if c.rank is Rank.SEVEN]
    if sb.seven_seven_seven.enabled:
        t = sb.seven_seven_seven
        if len(cards) >= 2 and len(sevens) >= 2 and cards[0].rank is cards[1].rank is Rank.SEVEN \
                and cards[0].suit == cards[1].suit:
            yield "bonus_77", "suited_77", t.suited_77  # paid at once: stands whatever the dealer makes
        if len(cards) == 3 and len(sevens) == 3 and not dealer_blackjack(dealer):
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
    for hand in hands:
        for player, base in hand.stakes.items():
            stake = hand.stake_of(player)
            if hand.index == 0 and (hand.box, player) in even_money:
                lines.append(Line(player, hand.box, 0, "even_money", stake, Fraction(stake), "even_money"))
            else:
                kind, outcome, mult = _main(hand, player, dealer)
                lines.append(Line(player, hand.box, hand.index, kind, stake, mult * stake, outcome))
            for kind, outcome, mult in _bonuses(rules, hand, dealer):
                lines.append(Line(player, hand.box, hand.index, kind, base, mult * base, outcome))
    dealer_bj = dealer_blackjack(dealer)
    for (box, player), amount in insurance.items():
        lines.append(Line(player, box, None, "insurance", amount,
                          Fraction(2 * amount if dealer_bj else -amount), "win" if dealer_bj else "lose"))
    pays = rules.side_bets.blackjack_pairs
    for (box, player), amount in pairs_bets.items():
        first_two = initial_cards.get(box, [])[:2]
        kind = _pair_kind(*first_two) if len(first_two) == 2 else None
        net = Fraction(-amount) if kind is None else getattr(pays, kind) * amount
        lines.append(Line(player, box, None, "pairs", amount, net, kind or "lose"))
    return Settlement(tuple(lines))
