"""What the house rules allow in a round: each check returns None or (rule, message).

Checks never change anything, so a refused action leaves the round exactly as it was. The
rule names are stable strings (they appear in ACTION_REFUSED events and RuleViolation.rule).
"""
from __future__ import annotations

from fractions import Fraction
from typing import Protocol

from devices.game.hand import Hand, card_value
from devices.game.inputs import CoPlayerChoice
from devices.game.round_types import Action, Target
from devices.game.rules import HouseRules
from devices.game.settlement import units
from core.cards import Card, Rank

Problem = tuple[str, str] | None


def _amount(value: object) -> str:
    """An amount a refusal names: in units like every message (the data keep cents); as it came
    when it is not whole cents at all (a float, a string), since that is what is wrong with it."""
    return units(value) if isinstance(value, int) and not isinstance(value, bool) else repr(value)


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
        return "bet_amount", f"bet {_amount(amount)} on box {box} is not a positive amount in whole cents"
    if player not in stakes and len(stakes) >= t.players_per_box:
        return "players_per_box", f"box {box} already has {len(stakes)} players (at most {t.players_per_box})"
    if stakes.get(player, 0) + amount < t.min_per_player:
        return "table_minimum", f"{player}'s bet {units(stakes.get(player, 0) + amount)} on box {box} is below " \
                                f"the minimum per player {units(t.min_per_player)}"
    total = sum(stakes.values()) + amount
    if total > t.max_per_box:
        owner = next(iter(stakes), player)
        # owner priority at the maximum: the owner's own stake within the maximum passes; the co-players then reduce
        if not (t.owner_priority_at_maximum and player == owner and stakes.get(player, 0) + amount <= t.max_per_box):
            return "box_maximum", f"box {box} would hold {units(total)}, above the maximum per box {units(t.max_per_box)}"
    return None


def reductions_at_maximum(rules: HouseRules, stakes: dict[str, int]) -> dict[str, int]:
    """Who must reduce by how much on a box over its maximum (table.owner_priority_at_maximum).

    The sheet says only "the other players must reduce their stakes"; the tracker announces one
    split, by the same priority of arrival the sheet gives the owner: the latest co-player first,
    each down to the table minimum, then (if still over) the latest withdraw entirely.
    """
    t = rules.table
    over = sum(stakes.values()) - t.max_per_box
    cuts: dict[str, int] = {}
    co_players = list(stakes)[1:][::-1]
    for p in co_players:
        if over <= 0:
            break
        cut = min(over, stakes[p] - t.min_per_player)
        if cut > 0:
            cuts[p], over = cut, over - cut
    for p in co_players:
        if over <= 0:
            break
        over -= stakes[p] - cuts.get(p, 0)
        cuts[p] = stakes[p]
    return cuts


def check_reduce(rules: HouseRules, stakes: dict[str, int], box: int, player: str, amount: int) -> Problem:
    """A player lowers his own bet during betting to ``amount`` (0 withdraws it)."""
    if player not in stakes:
        return "reduce_needs_wager", f"{player} has no bet on box {box} to reduce"
    if isinstance(amount, bool) or not isinstance(amount, int) or not 0 <= amount < stakes[player]:
        return "bet_amount", f"{player}'s new bet {_amount(amount)} on box {box} must be lower than {units(stakes[player])} " \
                             "(0 withdraws it)"
    if 0 < amount < rules.table.min_per_player:
        return "table_minimum", f"{player}'s bet {units(amount)} on box {box} is below the minimum per player " \
                                f"{units(rules.table.min_per_player)} (0 withdraws it)"
    return None


def box_owners(wagers: dict[int, dict[str, int]]) -> dict[int, str]:
    """Each box's owner: the first player on it, in betting order."""
    return {b: next(iter(stakes)) for b, stakes in wagers.items() if stakes}


def check_seats(rules: HouseRules, wagers: dict[int, dict[str, int]], seated: list[str],
                asking: list[str]) -> Problem:
    """The sheets' rules on boxes and seats, checked when the bets close.

    Players at the table are the seated ones and everyone with a wager in the round.
    """
    t = rules.table
    players = set(seated) | {p for stakes in wagers.values() for p in stakes}
    if len(players) == 1 and t.lone_player_min_boxes > 1:
        (lone,) = players
        boxes = sum(1 for stakes in wagers.values() if lone in stakes)
        if boxes < t.lone_player_min_boxes:
            return "lone_player_min_boxes", f"{lone} is the only player at the table: he plays at least " \
                                            f"{t.lone_player_min_boxes} boxes (has {boxes})"
    if t.give_up_boxes and asking:
        owners = box_owners(wagers)
        waiting = [p for p in asking if p not in owners.values()]
        free = [b for b in range(1, t.boxes + 1) if b not in owners]
        several = sorted({o for o in owners.values() if list(owners.values()).count(o) > 1})
        if waiting and not free and several:
            return "give_up_boxes", f"{', '.join(waiting)} wait(s) for a box and none is free: " \
                                    f"{', '.join(several)} must give up boxes (each keeps one)"
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
        with_ = f" (with {units(already)} already)" if already else ""
        return "side_bet_limits", f"Blackjack Pairs bet {_amount(amount)}{with_} outside {units(bp.min)}..{units(bp.max)}"
    return None


def check_insurance(rules: HouseRules, box_hands: dict[int, list[Hand]], box: int, player: str,
                    amount: int, insured: dict[tuple[int, str], int]) -> Problem:
    hands = box_hands.get(box)
    if not hands or player not in hands[0].stakes:
        return "insurance_needs_wager", f"{player} has no wager on box {box}"
    if (box, player) in insured:
        return "insurance_once", f"{player} already insured box {box}"
    if isinstance(amount, bool) or not isinstance(amount, int) or amount < rules.insurance_min:
        return "insurance_minimum", f"insurance {_amount(amount)} is below the minimum {units(rules.insurance_min)}"
    if rules.insurance.max == "half_all_bets":  # one insurance line for all his boxes
        stake = sum(hs[0].stakes.get(player, 0) for hs in box_hands.values())
        already = sum(a for (_, p), a in insured.items() if p == player)
        if 2 * (already + amount) > stake:
            # the limit itself first, then what it is half of: "exceeds half of all p1's bets 100.00" read as
            # if the half were 100.00
            taken = f" with {units(already)} already ({units(already + amount)})" if already else ""
            return "insurance_half_bet", f"insurance {units(amount)}{taken} exceeds {units(Fraction(stake, 2))}, " \
                                         f"half of all {player}'s bets ({units(stake)})"
        return None
    stake = hands[0].stakes[player]
    if 2 * amount > stake:
        return "insurance_half_bet", f"insurance {units(amount)} exceeds {units(Fraction(stake, 2))}, half of " \
                                     f"{player}'s bet on box {box} ({units(stake)})"
    return None


def is_pair(rules: HouseRules, a: Card, b: Card) -> bool:
    if rules.play.split_pairs == "rank":
        return a.rank == b.rank
    return card_value(a) == card_value(b)


def check_action(rules: HouseRules, rnd: RoundView, hand: Hand | None, box: int, action: Action,
                 amount: int | None, player: str | None = None,
                 co_players: tuple[CoPlayerChoice, ...] = ()) -> Problem:
    p = rules.play
    if hand is None:
        turn = rnd.current_hand
        return "not_this_box", f"box {box} has no hand to act on now" + (f" (it is {turn}'s turn)" if turn else "")
    problem = _check_decider(rnd, box, player)  # before the hand's state: a co-player always gets this answer
    if problem:
        return problem
    if co_players and action not in (Action.DOUBLE, Action.SPLIT):
        return "co_player_choice", f"co-players answer only a double or a split, not a {action}"
    if amount is not None and action is not Action.DOUBLE:  # a split is for the stake: an amount was ignored
        return "double_amount", f"an amount is only for a double for less, not a {action} (a split is for the stake)"
    if action is Action.SURRENDER:
        return _check_surrender(rules, rnd, hand, box)
    if hand.complete:
        return _why_complete(rules, hand, action)
    if hand.needs_card:
        return "card_expected", f"{hand.label()} is waiting for a card before any decision"
    owner = next(iter(hand.stakes))
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
        problem = _check_double_amount(rules, hand, amount, hand.stakes[owner])
        if problem:
            return problem
    elif action is Action.SPLIT:
        if len(hand.cards) != 2 or not is_pair(rules, *hand.cards):
            return "split_pairs_only", f"{hand.label()} is not a pair ({' '.join(map(str, hand.cards))})"
        if hand.cards[0].rank is Rank.ACE:  # aces have their own limit (play.ace_splits)
            if p.ace_split_limit is not None and rnd.ace_splits(box) >= p.ace_split_limit:
                return "ace_split_limit", f"aces may be split {p.ace_split_limit} time(s) per box"
        elif p.hand_limit is not None and len(rnd.box_hands[box]) >= p.hand_limit:
            return "split_hands_limit", f"box {box} already has {p.hand_limit} hands (the most allowed)"
    if action in (Action.DOUBLE, Action.SPLIT):
        return _check_co_players(rules, hand, action, co_players)
    return None


def _check_decider(rnd: RoundView, box: int, player: str | None) -> Problem:
    """Box control: only the box owner (the first player on the box) hits, stands, doubles, splits
    or surrenders; on a shared box the input must name him."""
    hands = rnd.box_hands[box]
    owner = next(iter(hands[0].stakes))
    on_box = {p for h in hands for p in h.stakes}
    if player is None and len(on_box) > 1:
        return "box_owner_decides", f"box {box} has co-players: name the player deciding (the box owner {owner})"
    if player is not None and player != owner:
        return "box_owner_decides", f"{player} cannot decide at box {box}: only the box owner {owner} calls the cards"
    return None


def _check_double_amount(rules: HouseRules, hand: Hand, amount: int | None, stake: int) -> Problem:
    """A double is the stake again, or (where the rules allow a double for less) table minimum..stake."""
    whole = amount is None or isinstance(amount, int) and not isinstance(amount, bool)  # cents, never a float
    if not whole or amount is not None and amount != stake and not (
            rules.play.double_for_less and rules.table.min_per_player <= amount <= stake):
        allowed = (f"{units(rules.table.min_per_player)}..{units(stake)}" if rules.play.double_for_less
                   else f"exactly {units(stake)}")
        return "double_amount", f"double for {_amount(amount)} at {hand.label()}: allowed {allowed}"
    return None


def _check_co_players(rules: HouseRules, hand: Hand, action: Action,
                      choices: tuple[CoPlayerChoice, ...]) -> Problem:
    """One answer per co-player on the hand: he joins or declines the owner's double or split."""
    co = list(hand.stakes)[1:]
    named = [c.player for c in choices]
    if sorted(named) != sorted(co):
        return "co_player_choice", f"each co-player on {hand.label()} answers the {action} once: " \
                                   f"{', '.join(co) or 'none'} (answers from {', '.join(named) or 'none'})"
    for c in choices:
        if action is Action.DOUBLE:
            if c.stays_on is not None:
                return "split_hand_choice", f"{c.player}: a hand to stay on is only for a declined split"
            if c.amount is not None:
                if not c.joins:
                    return "double_amount", f"{c.player} declines the double: no amount"
                problem = _check_double_amount(rules, hand, c.amount, hand.stakes[c.player])
                if problem:
                    return problem
        else:
            if c.amount is not None:
                return "co_player_choice", f"{c.player}: a split is always for his stake (no amount)"
            if c.joins:
                if c.stays_on is not None:
                    return "split_hand_choice", f"{c.player} joins the split: he plays both hands"
            elif rules.play.declined_split_stays_on == "player_chooses":
                if c.stays_on not in (1, 2):
                    return "split_hand_choice", f"{c.player} declines the split: he must choose the card to " \
                                                "leave his bet on (1 or 2)"
            elif c.stays_on not in (None, 1):
                return "split_hand_choice", f"{c.player} declines the split: he continues on the first hand"
    return None


def _why_complete(rules: HouseRules, hand: Hand, action: Action) -> tuple[str, str]:
    """The rule that closed a hand, named for an action asked on it."""
    if hand.total == 21 and action in (Action.HIT, Action.DOUBLE):
        return "no_draw_on_21", f"{hand.label()} has {'blackjack' if hand.blackjack else '21'}: no drawing on any 21"
    if hand.split_aces and action is Action.SPLIT and hand.cards[-1].rank is Rank.ACE:
        return "ace_split_limit", f"aces may be split {rules.play.ace_split_limit} time(s) per box"
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
    if rnd.dealer_cards[0].rank is Rank.ACE and not rules.play.surrender_against_ace:
        return "no_surrender_against_ace", "no surrender when the dealer shows an ace"
    if hand.from_split or len(rnd.box_hands[box]) > 1:
        return "no_surrender_after_split", f"box {box} has split: no surrender"
    if len(hand.cards) != 2 or hand.took_double or hand.awaiting_card or hand.complete:  # a hit is a decision
        return "surrender_first_two_cards", f"{hand.label()}: surrender only on the first two cards"
    if rules.play.surrender_window == "before_first_draw" and rnd.draw_seen:
        return "surrender_window", "surrender closed: the third card has already left the shoe"
    return None
