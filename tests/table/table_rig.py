"""A table driven the way the daemon drives it: typed device messages, dealer and supervisor inputs.

The shoe is stacked: ``TableRig(rules, stack)`` deals the given cards in order (after the
burn cards), so each scenario states exactly which card goes where.
"""
from __future__ import annotations

import json
from pathlib import Path

from cardd.config import RULES_DIR
from devices.tracker.inputs import DeviceMessage, HandShuffled, LinkUp, NoMoreBets, OpenRound, PlaceBet, TakeSeat
from devices.events import Event, Reason
from devices.game.round import Round
from devices.game.rules import HouseRules, load_rules
from devices.tracker.table import Table
from core.cards import Card, Orientation, shoe_composition
from firmware_bridge.messages import (
    CardRead, DeckCheckResult, DeviceRole, Heartbeat, Ident, ShoeLoaded, ShuffleComplete, ShuffleProgress,
    UnreadableCard,
)

from tests.support.recorders import FakeClock

RULE_FILES = sorted(RULES_DIR.glob("casino-*.toml"))


def cards(text: str) -> list[Card]:
    return [Card.parse(t) for t in text.split()]


def round_of(table: Table) -> Round:
    """The table's current round; fails the test when none was opened."""
    assert table.round is not None, "no round opened at this table"
    return table.round


def connect_devices(table: Table, boot: int = 7, protocol_minor: int = 0) -> None:
    """Both links up and each device's IDENT, as the link layer reports a (re)connection; the devices
    speak protocol 1.``protocol_minor``."""
    for role, name in ((DeviceRole.SHUFFLER, "shuffler"), (DeviceRole.SHOE, "shoe-reader")):
        table.apply(LinkUp(name))
        msg = Ident(role, "sim", f"{name}-1", "1.0.0", 1, protocol_minor, boot)
        table.apply(DeviceMessage(name, msg))


class TableRig:
    def __init__(self, rules: HouseRules, *, load: bool = True, seat_second_player: bool = True,
                 protocol_minor: int = 0) -> None:
        self.rules = rules
        self.events: list[Event] = []
        self.clock = FakeClock()
        self.table = Table(rules, self._journal, clock=self.clock, stale_after_s=3.0)
        self.index = 0
        connect_devices(self.table, protocol_minor=protocol_minor)
        if seat_second_player and rules.table.lone_player_min_boxes > 1:  # a lone player must play two boxes; the rig's
            self.table.apply(TakeSeat("p-seated", "dealer-1"))  # one-box rounds have a second player seated
        if load:
            self.shuffle_ok()
            self.load_and_burn()

    @property
    def round(self) -> Round:
        return round_of(self.table)

    def _journal(self, event: Event) -> None:
        json.dumps(event.data)  # the daemon journals every event as JSON: each must be plain data
        self.events.append(event)

    @classmethod
    def from_file(cls, path: Path, **kw) -> "TableRig":
        return cls(load_rules(path), **kw)

    # ---- shoe life ------------------------------------------------------------------------

    def shuffle(self, composition: dict[Card, int], check: DeckCheckResult | None = None) -> None:
        decks = self.rules.decks
        self.table.apply(DeviceMessage("shuffler", ShuffleProgress(0, 0)))
        self.table.apply(DeviceMessage("shuffler", ShuffleComplete(sum(composition.values()), composition)))
        self.table.apply(DeviceMessage("shuffler", check or DeckCheckResult(True, decks, (), (), 0)))

    def shuffle_ok(self) -> None:
        if self.rules.shoe.shuffle == "automatic":
            self.shuffle(shoe_composition(self.rules.decks))
        else:
            self.table.apply(HandShuffled("dealer-1"))

    def load_and_burn(self, burn: str = "") -> None:
        self.table.apply(DeviceMessage("shoe-reader", ShoeLoaded(0)))
        self.index = 0
        n = self.rules.shoe.burn_after_shuffle
        burn_cards = cards(burn) if burn else cards("2C 3C 4C")[:n]
        for c in burn_cards:
            self.read(c)

    # ---- the shoe reader ------------------------------------------------------------------

    def read(self, card: Card | str, face_up: bool = False) -> None:
        card = Card.parse(card) if isinstance(card, str) else card
        self.index += 1
        orientation = Orientation.FACE_UP if face_up else Orientation.FACE_DOWN
        self.table.apply(DeviceMessage("shoe-reader", CardRead(self.index, card, orientation, self.index * 10)))

    def deal(self, text: str) -> None:
        for c in cards(text):
            self.read(c)

    def unreadable(self) -> None:
        self.index += 1
        self.table.apply(DeviceMessage("shoe-reader", UnreadableCard(self.index, self.index * 10)))

    def heartbeat(self) -> None:
        self.table.apply(DeviceMessage("shoe-reader", Heartbeat(1)))
        self.table.apply(DeviceMessage("shuffler", Heartbeat(1)))

    # ---- a round --------------------------------------------------------------------------

    def bets(self, *boxes: int, amount: int | None = None) -> None:
        self.table.apply(OpenRound())
        for b in boxes:
            self.table.apply(PlaceBet(b, f"p{b}", amount or self.rules.table.min_per_player))
        self.table.apply(NoMoreBets("dealer-1"))

    # ---- what happened --------------------------------------------------------------------

    def reasons(self) -> list[Reason]:
        return [e.reason for e in self.events]

    def since(self, mark: int) -> list[Reason]:
        return [e.reason for e in self.events[mark:]]

    def find(self, reason: Reason) -> list[Event]:
        return [e for e in self.events if e.reason is reason]

    def nets(self) -> dict[str, str]:
        s = self.round.settlement
        assert s is not None, f"round not settled: {self.round.state}"
        return {p: str(v) for p, v in s.per_player().items()}

    def assert_ledger(self) -> None:
        """Every card that left the shoe is in exactly one place."""
        assert self.table.placed() == +self.table.shoe.out
