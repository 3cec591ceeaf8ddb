"""Recorded table sessions: every input a table took, in order, replayable with no I/O.

A session is a list of steps: ``("shoe", message)``, ``("shuffler", message)`` or
``(method, args)`` for a dealer input (``open_round``, ``place_bet``, ``act`` ...).
:func:`record_random_shoe` plays one whole shoe the way a simulated table would (a shuffled
shoe, random boxes and random legal decisions) and returns its steps; :func:`replay` feeds
steps to a fresh table. The property tests and ``benchmarks/deal.py`` both stand on these.
"""
from __future__ import annotations

import random
from collections import Counter
from typing import Any, Iterable

from devices.events import EventSink
from devices.round import Action, RuleViolation
from devices.rules import HouseRules
from devices.table import Table
from core.cards import Orientation, shoe_composition
from firmware_bridge.messages import (
    CardRead, CutCardSeen, DeckCheckResult, DeviceRole, Ident, ShoeLoaded, ShuffleComplete,
)

Step = tuple[str, Any]
ACTIONS = tuple(Action)


def apply(table: Table, step: Step) -> Any:
    kind, payload = step
    if kind == "shoe":
        return table.on_shoe(payload)
    if kind == "shuffler":
        return table.on_shuffler(payload)
    return getattr(table, kind)(*payload)


def replay(table: Table, steps: Iterable[Step]) -> None:
    for step in steps:
        apply(table, step)


class _Recorder:
    """Applies steps to a live table and keeps the ones it accepted."""

    def __init__(self, table: Table) -> None:
        self.table, self.steps = table, []

    def __call__(self, kind: str, payload: Any) -> Any:
        result = apply(self.table, (kind, payload))  # a refused input raises and is not recorded
        self.steps.append((kind, payload))
        return result


def connect(rec: _Recorder) -> None:
    for name, role, kind in (("shuffler", DeviceRole.SHUFFLER, "shuffler"), ("shoe-reader", DeviceRole.SHOE, "shoe")):
        rec("link_up", (name,))
        rec(kind, Ident(role, "sim", f"{name}-1", "1.0.0", 1, 0, 1))


def shuffle_and_load(rec: _Recorder, rules: HouseRules) -> None:
    decks = rules.decks
    if rules.shoe.shuffle == "automatic":
        rec("shuffler", ShuffleComplete(52 * decks, shoe_composition(decks)))
        rec("shuffler", DeckCheckResult(True, decks, (), (), 0))
    else:
        rec("hand_shuffled", ("dealer-1",))
    rec("shoe", ShoeLoaded(0))


def record_random_shoes(rules: HouseRules, rng: random.Random, shoes: int = 1, sink: EventSink = lambda e: None,
                        max_boxes: int = 3) -> tuple[list[Step], Table]:
    """Play whole shoes on one table with random legal decisions, each reconciled at its end.

    Returns the steps and the table they were played on.
    """
    table = Table(rules, sink, clock=lambda: 0.0, stale_after_s=1e9)
    rec = _Recorder(table)
    connect(rec)
    for _ in range(shoes):
        _play_shoe(table, rec, rules, rng, max_boxes)
    return rec.steps, table


def _play_shoe(table: Table, rec: _Recorder, rules: HouseRules, rng: random.Random, max_boxes: int) -> None:
    shuffle_and_load(rec, rules)
    stack = [c for c, n in shoe_composition(rules.decks).items() for _ in range(n)]
    rng.shuffle(stack)  # the simulated device's order; the table only sees cards as they are read
    cut_at = int(len(stack) * rules.shoe.penetration)
    index = 0

    def read() -> None:
        nonlocal index
        card = stack[index]
        index += 1
        rec("shoe", CardRead(index, card, Orientation.FACE_DOWN, index))
        if index == cut_at:
            rec("shoe", CutCardSeen(index, index))

    for _ in range(rules.shoe.burn_after_shuffle):
        read()
    while table.shoe.state in ("in_play", "last_round"):
        rec("open_round", ())
        boxes = sorted(rng.sample(range(1, rules.table.boxes + 1), rng.randint(1, max_boxes)))
        for b in boxes:
            rec("place_bet", (b, f"p{b}", rules.table.min_per_player))
        rec("no_more_bets", ("dealer-1",))
        _play_round(table, rec, rng, read)
    remainder = dict(Counter(stack[index:]))  # counted by the shuffler when the cards go back
    rec("shoe_remainder", (remainder, "dealer-1"))


def _play_round(table: Table, rec: _Recorder, rng: random.Random, read) -> None:
    r = table.round
    while r.state not in ("complete", "void"):
        if r.expected_next() is not None:
            read()
        elif r.state == "insurance":
            rec("close_insurance", ("dealer-1",))
        else:
            box = r.current_hand.box
            for action in rng.sample(ACTIONS, len(ACTIONS)):  # random order; refused ones change nothing
                try:
                    rec("act", (box, action, f"p{box}"))
                    break
                except RuleViolation:
                    continue
