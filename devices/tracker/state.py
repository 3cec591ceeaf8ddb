"""The deal tracker's state: what one table holds, the journal hop and the queries on it.

:class:`TableState` is the base of :class:`devices.tracker.table.Table` and of the handler
groups it is made of (device inputs, placement of cards, overrides and procedures): one set of
attributes, read and restored whole by :mod:`devices.tracker.snapshot`.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from core.cards import Card, Orientation
from devices.events import Event, EventSink, Reason, Role, Severity
from devices.errors import TableError
from devices.game.inputs import Hold, RoundInput
from devices.game.round import Round
from devices.game.rules import HouseRules
from devices.models.device_model import DeviceModel, fault_ends
from devices.models.shoe_reader_model import ShoeReaderModel
from devices.models.shuffler_model import ShufflerModel
from devices.tracker.alarms import AlarmBook, alarms_open
from devices.tracker.inputs import ClearAlarm, OpenRound, Redeal, VoidShoe, command_name
from devices.tracker.shoe import FREE as SHOE_FREE, IN_PLAY as SHOE_IN_PLAY, Shoe
from firmware_bridge.messages import CardRead

_ALARM = Severity.ALARM  # read for every event: a member read from its class costs a lookup
_OPEN_ROUND, _CLEAR_ALARM = command_name(OpenRound), command_name(ClearAlarm)
_REDEAL, _VOID_SHOE = command_name(Redeal), command_name(VoidShoe)


@dataclass(frozen=True, slots=True)
class CountShortfall:
    """A shoe reader's count of fewer cards than the table expected, taken while reads may have
    been lost on the way (a 1.0 reader's in flight at a link reset, a 1.1 reader's events reported
    lost): the next read of the load says whether its gap accounts for them."""

    held: int  # the reader's cards_held
    expected: int  # what the table expected it to hold then
    put_back: int  # the cards put back on top of the shoe then


class TableState:
    """One table's devices, shoe, round, piles and alarms; the journal every event goes through."""

    def __init__(self, rules: HouseRules, sink: EventSink, clock: Callable[[], float] = time.monotonic,
                 stale_after_s: float = 3.0) -> None:
        self.rules = rules
        self._sink = sink
        self._replaying = False
        self._caused: list[Event] | None = None  # while apply() runs: the events its input caused
        self.alarms = AlarmBook()
        self.uses_shuffler = rules.shoe.shuffle == "automatic"
        self.shuffler = ShufflerModel(self._device_event, clock, stale_after_s, on_change=self._device_changed)
        self.reader = ShoeReaderModel(self._device_event, clock, stale_after_s, on_change=self._device_changed)
        self.shoe = Shoe(rules, self._journal, on_load=self._new_shoe,
                         next_shoe_waits=lambda: self.next_shoe_waits() is not None)
        self.round: Round | None = None
        self.rounds_started = 0
        self.round_log: list[RoundInput] = []  # inputs the live round took, for restore
        self.holds: dict[str, str] = {}  # cause -> detail, while the live round is held
        self.shuffle_operator = "not recorded"  # who loaded the shuffler and started the shuffle
        self.burn_pile: list[Card] = []
        self.discard: list[Card] = []
        self.played: list[Card] = []  # cards of rounds that completed
        self.pending: list[Card] = []  # exposed in error: used as the next cards
        self.drawn_in_error: list[Card] = []  # after the dealer's finished hand: exposed or not?
        self.awaiting_entry: int | None = None  # index of an unreadable card the dealer must enter
        self.entry_to_discard = False  # that card came from a reader not usable: it goes to no hand
        self.queued_reads: list[CardRead] = []  # reads behind an unreadable card, kept in order
        self.last_index = 0  # the last CardRead/UnreadableCard index since the shoe was loaded (they count from 1)
        #: cards put back on top of the shoe since its load (CardsToBoxWithoutWager); None: not known for this
        #: load (restored from a snapshot older than version 6 mid-shoe), so its count is not checked until the next
        self.cards_put_back: int | None = 0
        #: the shoe reader's count less the table's (cards_held - shoe_should_hold()) that a SHOE_COUNT_MISMATCH
        #: alarm named last in this load (None: none, or the counts agreed since): the same difference again is
        #: not a new alarm at every handshake, open or cleared by a supervisor who accepted it
        self.shoe_count_named: int | None = None
        #: a count of fewer cards that waits for the next read (CountShortfall; None: none waits)
        self.shoe_count_short: CountShortfall | None = None
        #: index -> the card the reader read there since the load (none for an unreadable card or an
        #: index a gap skipped): a repeated index must carry the same card again
        self.read_cards: dict[int, Card] = {}
        self.last_round_id: int | None = None  # the shoe ends after it: set by the cut card or an empty shoe
        self.dealer_change_pending: str | None = None
        self.seated: list[str] = []  # players at the table, in the order they sat down (kept across rounds)
        self.asking_for_box: list[str] = []  # seated players waiting for a box (seeds 000, 002, 003)
        self.closed_round_id = 0  # the last round whose cards went to ``played``

    def _new_shoe(self) -> None:
        for pile in (self.burn_pile, self.discard, self.played, self.pending, self.drawn_in_error):
            pile.clear()
        self.last_round_id = None
        self.cards_put_back, self.shoe_count_named, self.shoe_count_short = 0, None, None

    def _journal(self, event: Event) -> None:
        if self._replaying:
            return
        if self._caused is not None:
            self._caused.append(event)
        if event.severity is _ALARM:
            self.alarms.raise_from(event)
        self._sink(event)

    def _emit(self, reason: Reason, text: str, severity: Severity = Severity.INFO, who: str | None = None,
              **data: Any) -> None:
        self._journal(Event(reason, "table", text, severity, data, who))

    @property
    def round_live(self) -> bool:
        return self.round is not None and self.round.live

    def devices(self) -> list[DeviceModel]:
        """The devices play depends on (no shuffler at a hand-shuffled table)."""
        return [self.shuffler, self.reader] if self.uses_shuffler else [self.reader]

    def device_problems(self) -> list[str]:
        """Why play may not go on: each device it depends on that is not usable or is in fault."""
        return [_in_fault(m) if m.state == "fault" else f"{m.NAME} is {m.state}" for m in self.devices()
                if not m.healthy]

    def next_shoe_waits(self) -> str | None:
        """Why no next shoe may be shuffled or loaded now, with the way forward; None when it may.
        A failed reconciliation's alarm holds it until a supervisor clears it: cards lost or removed
        are a manager's decision (seed 000 sections 3 and 4), as a foreign card's alarm holds play."""
        if self.round_live and self.shoe.state in SHOE_FREE:  # its shoe refused mid-round: its cards are out
            r = self.round
            return (f"round {r.round_id} of the {self.shoe.state} shoe is still on the table: "  # type: ignore[union-attr]
                    f"a supervisor re-deals it with {_REDEAL} or voids the shoe with {_VOID_SHOE} before the next shoe")
        failed = self.alarms.of(Reason.RECONCILIATION_FAILED)
        if not failed:
            return None
        if len(failed) == 1:
            alarm = failed[0]
            what = alarm.data.get("problems")  # the cards it names ("missing: 2C x1")
            return (f"the last shoe did not reconcile ({f'{what}; ' if what else ''}alarm {alarm.id}): a supervisor "
                    f"accounts for the cards and clears the alarm with {_CLEAR_ALARM} {alarm.id} before the next shoe")
        return (f"{alarms_open('reconciliation failed', failed)}: a supervisor accounts for the cards and clears "
                f"each with {_CLEAR_ALARM} ID before the next shoe")

    def shoe_should_hold(self) -> int | None:
        """How many cards the shoe reader should hold now: the verified stack loaded, less every card
        that left it since the load (the last index read: an unreadable card not yet entered, reads
        queued behind it, cards a gap skipped and reads a 1.1 device resent all count as out), plus
        the cards put back on top. None while no verified stack is in play: idle, shuffling,
        verifying, refused, verified (nothing loaded yet), complete (the stub may be out already, or
        the next stack in: the remainder's count is the check then), reconciled, unreconciled, void."""
        if self.shoe.state not in SHOE_IN_PLAY or self.cards_put_back is None:
            return None
        return max(0, self.shoe.stack_cards - self.last_index + self.cards_put_back)

    def placed(self) -> Counter[Card]:
        """Every card that left the shoe, counted where it is now."""
        live = [c for c, _ in self.round.assignments] if self.round is not None and self.round.live else []
        return Counter(self.burn_pile + self.discard + self.played + live + self.pending + self.drawn_in_error)

    def _hold(self, cause: Reason, detail: str, over: Reason | None = None) -> None:
        """Hold the live round for ``cause``; a round held already keeps its first cause, unless
        that is ``over`` (then the round's hold names ``cause``)."""
        if not self.round_live:
            return
        self.holds[str(cause)] = detail
        live = self.round
        assert live is not None  # round_live
        if live.held is None or (over is not None and live.hold_cause is over):
            self._to_round(Hold(cause, detail))

    def _to_round(self, op: RoundInput) -> Any:
        """Forward one input to the round and remember it (the snapshot replays the log)."""
        if self.round is None:  # a supervisor's reconstruction has nothing to open a round for
            raise TableError("no round is open" + ("" if hasattr(op, "role") else f": open one with {_OPEN_ROUND} first"))
        result = self.round.apply(op)
        self.round_log.append(op)
        return result

    if TYPE_CHECKING:  # the handler groups' own, called across groups (devices.tracker.table.Table has them all)
        def _device_event(self, event: Event) -> None: ...
        def _device_changed(self, model: DeviceModel, src: str, dst: str) -> None: ...
        def _on_read(self, msg: CardRead) -> None: ...
        def _on_unreadable(self, msg: Any) -> None: ...
        def _place(self, card: Card, orientation: Orientation, index: int) -> None: ...
        def _feed(self) -> None: ...
        def _between_rounds(self) -> None: ...
        def _void_round(self, cause: Reason, who: str, role: Role, by_rule: str | None = None) -> None: ...
        def _dealer_takes_over(self, who: str) -> None: ...


def _in_fault(model: DeviceModel) -> str:
    """A device in fault, and what ends it (devices.models.device_model.fault_ends)."""
    fault = model.active_fault
    return f"the {model.NAME} is in fault ({'unknown' if fault is None else fault.code.name.lower()}): " \
        f"{fault_ends(None if fault is None else fault.code)}"
