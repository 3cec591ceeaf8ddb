"""What the house rules allow in a round: each check returns None or (rule, message).

Checks never change anything, so a refused action leaves the round exactly as it was. The
rule names are stable strings (they appear in ACTION_REFUSED events and RuleViolation.rule).
"""
from __future__ import annotations

from typing import Protocol

from devices.game.hand import Hand, card_value
from devices.game.round_types import Action, Target
from devices.game.rules import HouseRules
from core.cards import Card, Rank

Problem = tuple[str, str] | None


class RoundView(Protocol):
    """What a check reads of a round (a Round is one); checks never write through it."""

    box_hands: dict[int, list[Hand]]
    dealer_cards: list[Card]
    draw_seen: bool

    @property
    def current_hand(self) -> Target | None: ...

    def ace_splits(self, box: int) -> int: ...


def check_bet(rules: HouseRules, stakes: dict[str, int], box: int, player: str, amount: int) -> Problem:
    t = rules.table
    if not 1 <= box <= t.boxes:
        return "no_such_box", f"box {box} does not exist (boxes 1..{t.boxes})"
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        return "bet_amount", f"bet {amount!r} on box {box} is not a positive whole number of cents"
    if player not in stakes and len(stakes) >= t.players_per_box:
        return "players_per_box", f"box {box} already has {len(stakes)} players (at most {t.players_per_box})"
    if stakes.get(player, 0) + amount < t.min_per_player:
        return "table_minimum", f"{player}'s bet {stakes.get(player, 0) + amount} on box {box} is below " \
                                f"the minimum per player {t.min_per_player}"
    if sum(stakes.values()) + amount > t.max_per_box:
        return "box_maximum", f"box {box} would hold {sum(stakes.values()) + amount}, above the maximum " \
                              f"per box {t.max_per_box}"
    return None


def check_pairs_bet(rules: HouseRules, stakes: dict[str, int], box: int, player: str, amount: int,
                    already: int = 0) -> Problem:
    """``already``: the player's Blackjack Pairs stake on the box so far; a second bet adds to it."""
    bp = rules.side_bets.blackjack_pairs
    if not bp.enabled:
        return "side_bet_not_offered", "Blackjack Pairs is not offered at this table"
    if player not in stakes:
        return "side_bet_needs_wager", f"{player} has no wager on box {box}"
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0 or not bp.min <= already + amount <= bp.max:
        with_ = f" (with {already} already)" if already else ""
        return "side_bet_limits", f"Blackjack Pairs bet {amount!r}{with_} outside {bp.min}..{bp.max}"
    return None


def check_insurance(rules: HouseRules, box_hands: dict[int, list[Hand]], box: int, player: str,
                    amount: int, insured: dict[tuple[int, str], int]) -> Problem:
    hands = box_hands.get(box)
    if not hands or player not in hands[0].stakes:
        return "insurance_needs_wager", f"{player} has no wager on box {box}"
    if (box, player) in insured:
        return "insurance_once", f"{player} already insured box {box}"
    if isinstance(amount, bool) or not isinstance(amount, int) or amount < rules.insurance.min:
        return "insurance_minimum", f"insurance {amount!r} is below the minimum {rules.insurance.min}"
    if rules.insurance.max == "half_all_bets":  # one insurance line for all his boxes
        stake = sum(hs[0].stakes.get(player, 0) for hs in box_hands.values())
        already = sum(a for (_, p), a in insured.items() if p == player)
        if 2 * (already + amount) > stake:
            return "insurance_half_bet", f"insurance {amount} (with {already} already) exceeds half of all " \
                                         f"{player}'s bets {stake}"
        return None
    stake = hands[0].stakes[player]
    if 2 * amount > stake:
        return "insurance_half_bet", f"insurance {amount} exceeds half of {player}'s bet {stake} on box {box}"
    return None


def is_pair(rules: HouseRules, a: Card, b: Card) -> bool:
    if rules.play.split_pairs == "rank":
        return a.rank == b.rank
    return card_value(a) == card_value(b)


def check_action(rules: HouseRules, rnd: RoundView, hand: Hand | None, box: int, action: Action,
                 amount: int | None, declined: frozenset[str]) -> Problem:
    p = rules.play
    if hand is None:
        return "not_this_box", f"box {box} has no hand to act on now (current: {rnd.current_hand})"
    if action is Action.SURRENDER:
        return _check_surrender(rules, rnd, hand, box)
    if hand.complete:
        return _why_complete(rules, hand, action)
    if hand.needs_card:
        return "card_expected", f"{hand.label()} is waiting for a card before any decision"
    owner = next(iter(hand.stakes), None)
    if owner in declined or not declined <= set(hand.stakes):
        return "declined_players", f"only co-players on box {box} may decline (owner {owner} decides)"
    if action is Action.HIT:
        if hand.total == 21:
            return "no_draw_on_21", f"{hand.label()} has 21: no drawing on any 21"
        if hand.split_aces:
            return "split_aces_one_card", f"{hand.label()} is a split ace: one card only"
    elif action is Action.DOUBLE:
        if len(hand.cards) != 2:
            return "double_on_two_cards", f"{hand.label()} has {len(hand.cards)} cards: double on two cards only"
        if hand.split_aces:
            return "no_double_on_split_aces", f"{hand.label()} is a split ace: one card only"
        if hand.from_split and not p.double_after_split:
            return "no_double_after_split", f"{hand.label()} comes from a split: no double after split here"
        stake = hand.stakes[owner]  # type: ignore[index]
        whole = amount is None or isinstance(amount, int) and not isinstance(amount, bool)  # cents, never a float
        if not whole or amount is not None and amount != stake and not (
                p.double_for_less and rules.table.min_per_player <= amount <= stake):
            allowed = f"{rules.table.min_per_player}..{stake}" if p.double_for_less else f"exactly {stake}"
            return "double_amount", f"double for {amount} at {hand.label()}: allowed {allowed}"
    elif action is Action.SPLIT:
        if len(hand.cards) != 2 or not is_pair(rules, *hand.cards):
            return "split_pairs_only", f"{hand.label()} is not a pair ({' '.join(map(str, hand.cards))})"
        if len(rnd.box_hands[box]) >= p.hands_per_box:
            return "split_hands_limit", f"box {box} already has {p.hands_per_box} hands (the most allowed)"
        if hand.cards[0].rank is Rank.ACE and rnd.ace_splits(box) >= p.max_ace_splits:
            return "ace_split_limit", f"aces may be split {p.max_ace_splits} time(s) per box"
    return None


def _why_complete(rules: HouseRules, hand: Hand, action: Action) -> tuple[str, str]:
    """The rule that closed a hand, named for an action asked on it."""
    if hand.total == 21 and action in (Action.HIT, Action.DOUBLE):
        return "no_draw_on_21", f"{hand.label()} has {'blackjack' if hand.blackjack else '21'}: no drawing on any 21"
    if hand.split_aces and action is Action.SPLIT and hand.cards[-1].rank is Rank.ACE:
        return "ace_split_limit", f"aces may be split {rules.play.max_ace_splits} time(s) per box " \
                                  f"within {rules.play.hands_per_box} hands"
    if hand.split_aces and action in (Action.HIT, Action.DOUBLE):
        return "split_aces_one_card", f"{hand.label()} is a split ace: one card only"
    if hand.took_double and action in (Action.HIT, Action.DOUBLE):
        return "double_one_card", f"{hand.label()} doubled: one card only"
    if action is Action.DOUBLE and len(hand.cards) != 2:
        return "double_on_two_cards", f"{hand.label()} has {len(hand.cards)} cards: double on two cards only"
    return "hand_complete", f"{hand.label()} is complete (total {hand.total})"


def _check_surrender(rules: HouseRules, rnd: RoundView, hand: Hand, box: int) -> Problem:
    if not rules.play.surrender:
        return "surrender_not_offered", "surrender is not offered at this table"
    if rnd.dealer_cards[0].rank is Rank.ACE:
        return "no_surrender_against_ace", "no surrender when the dealer shows an ace"
    if hand.from_split or len(rnd.box_hands[box]) > 1:
        return "no_surrender_after_split", f"box {box} has split: no surrender"
    if len(hand.cards) != 2 or hand.took_double or hand.awaiting_card or hand.complete:  # a hit is a decision
        return "surrender_first_two_cards", f"{hand.label()}: surrender only on the first two cards"
    if rules.play.surrender_window == "before_first_draw" and rnd.draw_seen:
        return "surrender_window", "surrender closed: the third card has already left the shoe"
    return None
