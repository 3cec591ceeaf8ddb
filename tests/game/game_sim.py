"""Random rounds through the real Round: random shoes, random legal decisions (for the property
and statistical tests). Decisions look only at the cards already seen and at the RNG."""
from __future__ import annotations

import random
from typing import Callable

from devices.events import Event
from devices.game.hand import Hand
from devices.game.inputs import CoPlayerChoice
from devices.game.round import Action, Round
from devices.errors import RuleViolation
from devices.game.rules import HouseRules
from core.cards import ALL_CARDS, Card

ACTIONS = (Action.HIT, Action.STAND, Action.DOUBLE, Action.SPLIT, Action.SURRENDER)


def _drop(_e: Event) -> None:
    """Events are checked elsewhere; the simulation discards them."""


class LazyShoe:
    """A uniformly shuffled shoe, drawn one card at a time (lazy Fisher-Yates: no full shuffle)."""

    def __init__(self, decks: int, rng: random.Random) -> None:
        self.cards: list[Card] = list(ALL_CARDS) * decks
        self.rng, self.i = rng, 0

    def draw(self) -> Card:
        j = self.rng.randrange(self.i, len(self.cards))
        c = self.cards
        c[self.i], c[j] = c[j], c[self.i]
        self.i += 1
        return c[self.i - 1]


def play_round(rules: HouseRules, rng: random.Random, shoe: LazyShoe | None = None,
               sink: Callable[[Event], None] = _drop, boxes: int | None = None,
               on_card: Callable[[Round, Card], None] | None = None,
               on_act: Callable[[Round], None] | None = None) -> Round:
    """One complete round; returns it (state 'complete')."""
    shoe = shoe or LazyShoe(rules.decks, rng)
    r = Round(rules, sink)
    unit = rules.table.min_per_player
    for box in rng.sample(range(1, rules.table.boxes + 1), boxes or rng.randint(1, 3)):
        r.place_bet(box, f"p{box}", rng.choice((1, 2, 4)) * unit)
        if rng.random() < 0.3:  # co-players on the box
            r.place_bet(box, f"q{box}", rng.choice((1, 2)) * unit)
            if rng.random() < 0.3:
                r.place_bet(box, f"s{box}", unit)
            _reduce(r, box, rng)
    r.no_more_bets()
    while r.state != "complete":
        if r.expected_next() is not None:
            card = shoe.draw()
            if on_card:
                on_card(r, card)
            r.card_dealt(card)
        elif r.state == "insurance":
            _insurance(r, rng)
        else:
            if on_act:
                on_act(r)  # may try any action, legal or not
            if r.state == "players" and r.current_hand is not None and r.expected_next() is None:
                _decide(r, rng)
    return r


def _reduce(r: Round, box: int, rng: random.Random) -> None:
    """Stake reductions: at a table where the owner has priority at the box maximum, he sometimes
    raises to it and the co-players reduce as announced; elsewhere a co-player sometimes lowers his bet."""
    t, stakes = r.rules.table, r.wagers[box]
    owner, *co = stakes
    if t.owner_priority_at_maximum and rng.random() < 0.3:
        r.place_bet(box, owner, t.max_per_box - rng.choice((0, 1, 3)) * t.min_per_player - stakes[owner])
        for player, cut in r.reductions_at_maximum(box).items():
            r.reduce_bet(box, player, stakes[player] - cut)
    elif rng.random() < 0.3:
        player = rng.choice(co)
        r.reduce_bet(box, player, rng.choice([0] + [t.min_per_player] * (stakes[player] > t.min_per_player)))


def _answer(r: Round, hand: Hand, player: str, action: Action, rng: random.Random) -> CoPlayerChoice:
    """A co-player's random answer to the owner's double or split."""
    p = r.rules.play
    if rng.random() < 0.5:
        less = action is Action.DOUBLE and p.double_for_less and rng.random() < 0.5
        return CoPlayerChoice(player, True, amount=r.rules.table.min_per_player if less else None)
    if action is Action.SPLIT and p.declined_split_stays_on == "player_chooses":
        return CoPlayerChoice(player, False, stays_on=rng.choice((1, 2)))
    return CoPlayerChoice(player, False)


def _insurance(r: Round, rng: random.Random) -> None:
    for box, stakes in r.wagers.items():
        for player, stake in stakes.items():
            try:
                if r.box_hands[box][0].blackjack and rng.random() < 0.5:
                    r.even_money(box, player)
                elif rng.random() < 0.5:
                    r.insure(box, player, stake // 2)
            except RuleViolation:
                pass  # e.g. half the stake is below this table's insurance minimum
    r.close_insurance()


def _decide(r: Round, rng: random.Random) -> None:
    t = r.current_hand
    assert t is not None and t.box is not None, f"round stuck in {r.state}"
    choices = list(ACTIONS)
    rng.shuffle(choices)
    hands = r.box_hands[t.box]
    hand = hands[t.hand]  # type: ignore[index]
    owner = next(iter(hands[0].stakes))
    for action in choices:
        co = tuple(_answer(r, hand, p, action, rng) for p in list(hand.stakes)[1:]) \
            if action in (Action.DOUBLE, Action.SPLIT) else ()
        try:
            r.act(t.box, action, player=owner, co_players=co)
            return
        except RuleViolation:
            continue
    raise AssertionError(f"no legal action at {t}")  # STAND is always legal on an open hand
