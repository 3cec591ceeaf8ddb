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
from decimal import Decimal
from fractions import Fraction
from typing import Any, Iterable

from devices.game.hand import Hand, hand_total, is_two_card_21
from devices.game.rules import HouseRules
from core.cards import Card, Rank, Suit

_RED = {Suit.DIAMONDS, Suit.HEARTS}
Money = int | Fraction  # cents; a Fraction only where a pay ratio leaves part of a cent


def units(amount: Money, *, grouping: bool = False) -> str:
    """Cents as the units people bet in (and cardctl takes): ``2500`` -> ``25.00``; part of a cent
    (3:2 on an odd stake) as the further decimals it needs, ``1/2`` -> ``0.005``. Exact: never a
    float. The one money formatter: the journal's message text (the data fields keep cents) and
    cardctl's views. ``grouping`` puts thousands separators in (``1,250.00``) for a person reading
    a view; messages go without, so an amount in one can be typed back to cardctl as it stands."""
    separator = "," if grouping else ""
    if amount.denominator == 1:  # whole cents, nearly every amount: no Decimal (a message per bet and hand)
        whole, cents = divmod(abs(int(amount.numerator)), 100)
        return f"{'-' if amount < 0 else ''}{whole:{separator}}.{cents:02d}"
    value = Decimal(amount.numerator) / Decimal(amount.denominator) / 100
    return f"{value:{separator}.2f}" if value == round(value, 2) else f"{value.normalize():{separator}f}"



def money(cents: int | str | Fraction | None) -> str:
    """An amount as a view shows it, with thousands separators: cents as an int, a Fraction, or the
    "p/q" of STATE where a pay ratio leaves part of a cent; ``125050`` -> ``1,250.50``; ``-`` for none.
    cardctl's views, the demo and the bench show money with it."""
    return "-" if cents is None else units(Fraction(cents), grouping=True)


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
        return f"{self.player} {self.kind} at {where}: {self.outcome}, stake {units(self.stake)}, net {units(self.net)}"

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


def instant_bonuses(rules: HouseRules, hand: Hand) -> list[tuple[str, str, Fraction]]:
    """The bonuses (side_bets: seven_seven_seven, five_card_21, seven_card_hand) won by the card just
    added to ``hand``, paid at once: (kind, outcome, multiple).

    Each can be won once per hand: 77 on its first two cards, five-card 21 when 21 closes the hand,
    seven-card hand on the seventh card. A later bust or split does not take them back.
    """
    sb, cards, won = rules.side_bets, hand.cards, []
    n = len(cards)
    if n == 2 and sb.seven_seven_seven.enabled and not hand.from_split and \
            cards[0].rank is cards[1].rank is Rank.SEVEN and cards[0].suit == cards[1].suit:
        won.append(("bonus_77", "suited_77", sb.seven_seven_seven.suited_77))
    if n >= 5 and sb.five_card_21.enabled and hand.total == 21:
        won.append(("five_card_21", "win", sb.five_card_21.pays))
    if n == 7 and sb.seven_card_hand.enabled and hand.total <= 21:
        won.append(("seven_card_hand", "win", sb.seven_card_hand.pays))
    return won


def instant_lines(rules: HouseRules, hand: Hand) -> list[Line]:
    """The lines of :func:`instant_bonuses`, one per player on the hand, on their base stake."""
    return [Line(player, hand.box, hand.index, kind, base, _times(mult, base), outcome)
            for kind, outcome, mult in instant_bonuses(rules, hand) for player, base in hand.stakes.items()]


def even_money_line(hand: Hand, player: str) -> Line:
    """Even money: the player's blackjack paid 1:1 at once against the dealer's ace."""
    stake = hand.stake_of(player)
    return Line(player, hand.box, hand.index, "even_money", stake, stake, "even_money")


def blackjack_lines(hand: Hand, up: Card) -> list[Line]:
    """A blackjack against an up card that cannot make blackjack (2 to 9) is won for certain: its
    3:2 is paid at once, one line per player on the hand."""
    if not hand.blackjack or up.rank is Rank.ACE or int(up.rank) >= 10:
        return []
    return [Line(p, hand.box, hand.index, "main", hand.stake_of(p), _times(_THREE_HALVES, hand.stake_of(p)),
                 "blackjack") for p in hand.stakes]


def _bonus_777(rules: HouseRules, hand: Hand, dealer_bj: bool) -> tuple[str, Fraction] | None:
    """7-7-7 as the first three cards of an unsplit hand: settled at the end (a dealer blackjack beats it)."""
    t, cards = rules.side_bets.seven_seven_seven, hand.cards
    if not t.enabled or dealer_bj or len(cards) != 3 or hand.from_split or any(c.rank is not Rank.SEVEN for c in cards):
        return None
    suited = len({c.suit for c in cards}) == 1
    return ("suited_777", t.suited_777) if suited else ("mixed_777", t.mixed_777)


def settle(rules: HouseRules, hands: list[Hand], dealer: list[Card], insurance: dict[tuple[int, str], int],
           even_money: set[tuple[int, str]], pairs_bets: dict[tuple[int, str], int],
           initial_cards: dict[int, list[Card]], paid: Iterable[Line] = ()) -> Settlement:
    """Every line of the round; ``paid`` (lines already paid at once: bonuses, even money, a sure
    blackjack) come first, as they were, and their hands' main lines are not settled again."""
    lines: list[Line] = list(paid)
    done = {(ln.player, ln.box, ln.hand) for ln in lines if ln.kind in ("main", "even_money")}
    dealer_total, dealer_bj = hand_total(dealer)[0], is_two_card_21(dealer)
    for hand in hands:
        main = _main(hand, dealer_total, dealer_bj)
        b777 = _bonus_777(rules, hand, dealer_bj)
        for player, base in hand.stakes.items():
            stake = hand.stake_of(player)
            if (player, hand.box, hand.index) in done:
                pass  # paid at once
            elif hand.index == 0 and (hand.box, player) in even_money:
                lines.append(even_money_line(hand, player))
            else:
                kind, outcome, mult = main
                lines.append(Line(player, hand.box, hand.index, kind, stake, _times(mult, stake), outcome))
            if b777 is not None:
                lines.append(Line(player, hand.box, hand.index, "bonus_777", base, _times(b777[1], base), b777[0]))
    for (box, player), amount in insurance.items():
        lines.append(Line(player, box, None, "insurance", amount, 2 * amount if dealer_bj else -amount,
                          "win" if dealer_bj else "lose"))
    pays = rules.side_bets.blackjack_pairs
    for (box, player), amount in pairs_bets.items():
        first_two = initial_cards.get(box, [])[:2]
        pair = _pair_kind(*first_two) if len(first_two) == 2 else None
        net = -amount if pair is None else _times(getattr(pays, pair), amount)
        lines.append(Line(player, box, None, "pairs", amount, net, pair or "lose"))
    return Settlement(tuple(lines))
