"""Recordings: every input a table took, in order, as input records, replayable with no I/O.

A recording is a list of :mod:`devices.tracker.inputs` records (device messages, links, the
dealer's and players' inputs); :func:`save`/:func:`load` write and read it as JSON lines, one
record a line. :func:`record_random_shoes` plays whole shoes the way a simulated table would (a
shuffled shoe, random boxes, co-players who join or decline the owner's doubles and splits, bets
reduced during betting, random legal decisions) and returns its records; :func:`replay`
applies records to a fresh table. The property tests and ``benchmarks/deal.py`` stand on these.
"""
from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable

from devices.events import EventSink
from devices.game.round import Action
from devices.errors import RuleViolation
from devices.tracker.inputs import (
    Act, CloseInsurance, CoPlayerChoice, DeviceMessage, HandShuffled, InputDecodeError, LinkUp, NoMoreBets,
    OpenRound, PlaceBet, ReduceBet, ShoeRemainder, TableInput, TakeSeat, from_json, to_json,
)
from devices.game.rules import HouseRules
from devices.tracker.table import Table
from core.cards import Orientation, shoe_composition
from core.parse_errors import json_text_problem
from firmware_bridge.messages import (
    CardRead, CutCardSeen, DeckCheckResult, DeviceRole, Ident, ShoeLoaded, ShuffleComplete,
)

ACTIONS = tuple(Action)


def replay(table: Table, records: Iterable[TableInput]) -> None:
    apply = table.apply
    for record in records:
        apply(record)


def save(records: Iterable[TableInput], path: Path) -> None:
    """One JSON record a line (devices.tracker.inputs.to_json)."""
    with path.open("w") as out:
        for record in records:
            out.write(json.dumps(to_json(record), separators=(",", ":")) + "\n")


def load(path: Path) -> list[TableInput]:
    """The records :func:`save` wrote; a bad line raises InputDecodeError naming the file and line."""
    records = []
    with path.open() as lines:
        for number, line in enumerate(lines, 1):
            try:
                records.append(from_json(json.loads(line)))
            except json.JSONDecodeError as exc:
                raise InputDecodeError(f"{path}:{number}: {json_text_problem(exc).in_a_line()}") from None
            except InputDecodeError as exc:
                raise InputDecodeError(f"{path}:{number}: {exc}") from None
    return records


class _Recorder:
    """Applies records to a live table and keeps the ones it accepted."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.records: list[TableInput] = []

    def __call__(self, record: TableInput) -> None:
        self.table.apply(record)  # a refused input raises and is not recorded
        self.records.append(record)


def connect(rec: _Recorder) -> None:
    for name, role in (("shuffler", DeviceRole.SHUFFLER), ("shoe-reader", DeviceRole.SHOE)):
        rec(LinkUp(name))
        rec(DeviceMessage(name, Ident(role, "sim", f"{name}-1", "1.0.0", 1, 0, 1)))


def shuffle_and_load(rec: _Recorder, rules: HouseRules) -> None:
    decks = rules.decks
    if rules.shoe.shuffle == "automatic":
        rec(DeviceMessage("shuffler", ShuffleComplete(52 * decks, shoe_composition(decks))))
        rec(DeviceMessage("shuffler", DeckCheckResult(True, decks, (), (), 0)))
    else:
        rec(HandShuffled("dealer-1"))
    rec(DeviceMessage("shoe-reader", ShoeLoaded(0)))


def record_random_shoes(rules: HouseRules, rng: random.Random, shoes: int = 1, sink: EventSink = lambda e: None,
                        max_boxes: int = 3) -> tuple[list[TableInput], Table]:
    """Play whole shoes on one table with random legal decisions, each reconciled at its end.

    Returns the records and the table they were played on.
    """
    table = Table(rules, sink, clock=lambda: 0.0, stale_after_s=1e9)
    rec = _Recorder(table)
    connect(rec)
    if rules.table.lone_player_min_boxes > 1:  # a lone player must play two boxes: one more is seated
        rec(TakeSeat("seated-1", "dealer-1"))
    for _ in range(shoes):
        _play_shoe(table, rec, rules, rng, max_boxes)
    return rec.records, table


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
        rec(DeviceMessage("shoe-reader", CardRead(index, card, Orientation.FACE_DOWN, index)))
        if index == cut_at:
            rec(DeviceMessage("shoe-reader", CutCardSeen(index, index)))

    for _ in range(rules.shoe.burn_after_shuffle):
        read()
    while table.shoe.state in ("in_play", "last_round"):
        rec(OpenRound())
        boxes = sorted(rng.sample(range(1, rules.table.boxes + 1), rng.randint(1, max_boxes)))
        for b in boxes:
            rec(PlaceBet(b, f"p{b}", rules.table.min_per_player))
            if rng.random() < 0.25:  # a co-player, who sometimes lowers his bet again or withdraws
                rec(PlaceBet(b, f"q{b}", 2 * rules.table.min_per_player))
                if rng.random() < 0.3:
                    rec(ReduceBet(b, f"q{b}", rng.choice((0, rules.table.min_per_player))))
        rec(NoMoreBets("dealer-1"))
        _play_round(table, rec, rng, read)
    remainder = dict(Counter(stack[index:]))  # counted by the shuffler when the cards go back
    rec(ShoeRemainder(remainder, "dealer-1"))


def _play_round(table: Table, rec: _Recorder, rng: random.Random, read: Callable[[], None]) -> None:
    r = table.round
    assert r is not None
    while r.state not in ("complete", "void"):
        if r.expected_next() is not None:
            read()
        elif r.state == "insurance":
            rec(CloseInsurance("dealer-1"))
        else:
            assert r.current_hand is not None and r.current_hand.box is not None
            box = r.current_hand.box
            hand = r.box_hands[box][r.current_hand.hand or 0]
            for action in rng.sample(ACTIONS, len(ACTIONS)):  # random order; refused ones change nothing
                co = tuple(_co_player_answer(r.rules, p, action, rng) for p in list(hand.stakes)[1:]) \
                    if action in (Action.DOUBLE, Action.SPLIT) else ()
                try:
                    rec(Act(box, action, "dealer-1", player=f"p{box}", co_players=co))
                    break
                except RuleViolation:
                    continue


def _co_player_answer(rules: HouseRules, player: str, action: Action, rng: random.Random) -> CoPlayerChoice:
    """A co-player joins or declines the owner's double or split (where he must, he names his hand)."""
    if rng.random() < 0.5:
        return CoPlayerChoice(player, True)
    chooses = action is Action.SPLIT and rules.play.declined_split_stays_on == "player_chooses"
    return CoPlayerChoice(player, False, stays_on=rng.choice((1, 2)) if chooses else None)
