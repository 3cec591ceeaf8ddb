"""Shared helpers for the game tests: the seed casinos' rules, card strings, a scripted round."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from cardd.config import RULES_DIR
from devices.events import Event, Reason
from devices.game.round import Action, Round
from devices.game.rules import HouseRules, load_rules
from devices.game.settlement import Money, Settlement
from core.cards import Card

ROOT = Path(__file__).resolve().parents[2]
RULES_FILES = sorted((RULES_DIR).glob("casino-*.toml"))
CASINOS = [p.stem for p in RULES_FILES]

# What each seed sheet implies, written out by hand from ../shared/seeds/ (not read from the
# TOML files): the tests check the files and the round against these.
SHEET: dict[str, dict[str, Any]] = {  # values of several types: one per rule
    "casino-000": dict(surrender=True, own_card_window=False, hands=4, ace_splits=2, das=True,
                       double_for_less=True, burn=1, side_777=False, pairs=False, split_rank_only=True,
                       insurance_all_bets=False, burn_on_change=0, surrender_against_ace=False,
                       double_on_split_21=False, declined_split_chooses=True, insurance_min="table_minimum",
                       insured_blackjack_even_money=False, owner_priority=False, lone_min_boxes=1, give_up=True),
    "casino-001": dict(surrender=True, own_card_window=False, hands=3, ace_splits=1, das=True,
                       double_for_less=False, burn=1, side_777=True, pairs=False, split_rank_only=False,
                       insurance_all_bets=True, burn_on_change=0, surrender_against_ace=False,
                       double_on_split_21=False, declined_split_chooses=False, insurance_min=100,
                       insured_blackjack_even_money=False, owner_priority=False, lone_min_boxes=2, give_up=False),
    "casino-002": dict(surrender=False, own_card_window=False, hands=4, ace_splits=1, das=True,
                       double_for_less=False, burn=1, side_777=False, pairs=True, split_rank_only=False,
                       insurance_all_bets=False, burn_on_change=0, surrender_against_ace=False,
                       double_on_split_21=False, declined_split_chooses=False, insurance_min=100,
                       insured_blackjack_even_money=False, owner_priority=False, lone_min_boxes=1, give_up=True),
    "casino-003": dict(surrender=False, own_card_window=False, hands=4, ace_splits=3, das=True,
                       double_for_less=False, burn=3, side_777=False, pairs=False, split_rank_only=False,
                       insurance_all_bets=False, burn_on_change=1, surrender_against_ace=False,
                       double_on_split_21=False, declined_split_chooses=False, insurance_min=100,
                       insured_blackjack_even_money=True, owner_priority=True, lone_min_boxes=1, give_up=True),
    # "In case of the Ace you can do unlimited spleens"; surrender and double name no ace / split-21 exception
    "casino-004": dict(surrender=True, own_card_window=True, hands=4, ace_splits="unlimited", das=True,
                       double_for_less=False, burn=1, side_777=False, pairs=False, split_rank_only=False,
                       insurance_all_bets=False, burn_on_change=0, surrender_against_ace=True,
                       double_on_split_21=True, declined_split_chooses=False, insurance_min="half_table_minimum",
                       insured_blackjack_even_money=False, owner_priority=False, lone_min_boxes=1, give_up=False),
}


def ace_splits_allowed(casino: str, n: int) -> bool:
    """Whether the sheet lets aces be split ``n`` times at one box."""
    limit = SHEET[casino]["ace_splits"]
    return limit == "unlimited" or n <= limit


def rules_for(casino: str) -> HouseRules:
    return load_rules(RULES_DIR / f"{casino}.toml")


def cards(text: str) -> list[Card]:
    return [Card.parse(t) for t in text.split()]


class Recorder:
    """An event sink that keeps every event."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def reasons(self) -> list[Reason]:
        return [e.reason for e in self.events]

    def of(self, reason: Reason) -> list[Event]:
        return [e for e in self.events if e.reason == reason]


def snapshot(r: Round) -> Any:
    """Everything a refusal must leave untouched."""
    return copy.deepcopy((r.state, r.held, r.hold_cause, r.wagers, r.pairs_bets, r.insurance, r.even_money_taken,
                          [vars(h) for h in r.hands], r.dealer_cards, r.assignments, r._plan,
                          r._redeal_queue, r.draw_seen))


def new_round(rules: HouseRules, bets: list[tuple[int, str, int]], rec: Recorder | None = None) -> Round:
    r = Round(rules, rec if rec is not None else Recorder(), round_id=7)
    for box, player, amount in bets:
        r.place_bet(box, player, amount)
    return r


def deal(r: Round, text: str) -> None:
    """Feed cards from the shoe; each must be expected."""
    for card in cards(text):
        assert r.expected_next() is not None, f"no card expected for {card} (state {r.state})"
        assert r.card_dealt(card) is not None


def run(r: Round, script: list[tuple[Any, ...]]) -> None:
    """Steps: ('deal', 'TS 9H'), ('act', box, 'hit'[, kwargs]), ('insure', box, player, amount),
    ('even', box, player), ('close',), ('no_more_bets',)."""
    for step in script:
        op, *args = step
        if op == "deal":
            deal(r, args[0])
        elif op == "act":
            r.act(args[0], Action(args[1]), who="dealer-1", **(args[2] if len(args) > 2 else {}))
        elif op == "insure":
            r.insure(*args)
        elif op == "even":
            r.even_money(*args)
        elif op == "close":
            r.close_insurance("dealer-1")
        elif op == "no_more_bets":
            r.no_more_bets("dealer-1")
        elif op == "bet":
            r.place_bet(*args)
        elif op == "pairs":
            r.place_pairs_bet(*args)
        else:
            raise AssertionError(f"unknown step {step}")


def settlement_of(r: Round) -> Settlement:
    """The round's settlement; fails the test when the round has none."""
    assert r.settlement is not None, f"round {r.round_id} not settled: {r.state}"
    return r.settlement


def nets(r: Round) -> dict[str, Money]:
    assert r.state == "complete"
    return settlement_of(r).per_player()
