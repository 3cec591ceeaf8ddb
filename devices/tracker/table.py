"""The deal tracker: one table's devices, shoe and round, and where every card read goes.

A card read travels: shoe-reader model (stale? refused) -> shoe (counted out; dealing
blocked? foreign card?) -> face up? (misload: re-deal, round void) -> burn while the shoe
burns -> the round's expected target -> otherwise the seed procedures (exposed in error:
kept as the next card; after the dealer's finished hand: the dealer says exposed or not).
Every card that left the shoe ends in exactly one place: a hand (``played`` or the live
round), ``burn_pile``, ``discard``, ``pending`` or ``drawn_in_error``; :meth:`placed` counts
them and must always equal the shoe's count of cards out.

Every input is a typed record (:mod:`devices.tracker.inputs`: device messages, links, ticks,
the dealer's, players' and supervisor's inputs, ``who`` and ``role`` on overrides) applied by
:meth:`Table.apply`, which returns the events it caused and dispatches by the record's type.
See docs/deal-tracking.md for every reason code and who may override it. The state survives a
power loss through :mod:`devices.tracker.snapshot`; the live round is kept as the log of the
round inputs (:mod:`devices.game.inputs`) it took.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from devices.models.device_model import DeviceModel
from devices.events import Event, EventSink, Reason, Role, Severity
from devices.game.inputs import (
    Act, CardDealt, CloseInsurance, EvenMoney, Flag, Hold, Insure, NoMoreBets, PlaceBet, PlacePairsBet,
    ReconstructAndRedeal, ReconstructInitialDeal, ReduceBet, Resume, RoundInput, Void,
)
from devices.errors import CardMismatch, RuleViolation, TableError
from devices.game.round import Round
from devices.game.round_checks import box_owners, check_seats
from devices.overrides import refuse_override, refuse_unless_supervisor, require_supervisor
from devices.tracker.alarms import Alarm, AlarmBook
from devices.tracker.inputs import (
    AskForBox, CardsToBoxWithoutWager, ClearAlarm, DealerChange, DeviceMessage, DrawnInErrorDecision, EnterCard,
    HandShuffled, LeaveSeat, LinkDown, LinkUp, OpenRound, PlacementError, Redeal, ShoeRemainder, ShuffleStarted,
    TableInput, TakeSeat, Tick, VoidShoe, command_name,
)
from devices.game.rules import HouseRules
from devices.models.shoe_reader_model import ShoeReaderModel
from devices.models.shuffler_model import ShufflerModel
from devices.tracker.shoe import FREE as SHOE_FREE, IN_PLAY as SHOE_IN_PLAY, Shoe
from core.cards import ALL_CARDS, Card, Orientation
from firmware_bridge.messages import (
    CardRead, CutCardSeen, DeckCheckResult, Message, ShoeEmpty, ShoeLoaded, ShuffleComplete, ShuffleProgress,
    Status, UnreadableCard,
)

_CARD_DEALT = {card: CardDealt(card) for card in ALL_CARDS}  # one record per card, not one per read
# enum members read from their class cost a lookup each; these are read for every event and card
_ALARM, _FACE_UP = Severity.ALARM, Orientation.FACE_UP
_WARNING, _DRAWN_IN_ERROR = Severity.WARNING, Reason.CARD_DRAWN_IN_ERROR
_DRAWN_IN_ERROR_TEXT = (" drawn after the dealer's finished hand: the dealer says whether it was exposed (discard) "
                        "or not (next round's burn card)")
# a shuffler malfunction is an incident of its own (REQUIREMENTS 2: an error stays until a recheck clears it;
# Louisiana: a malfunctioning shuffler forces a reshuffle): the round's decision does not close its alarm
_MALFUNCTION_TEXT = (": round held; a supervisor re-deals it ({redeal}) or continues it ({resume}), and clears this "
                     "alarm with {clear_alarm} once the shuffler is checked (the round's decision leaves it open)")

FACE_UP_RULE = "seed 000 section 7: cards dealt face up after a misload: re-deal, game void"

#: the daemon's alarms for a shoe reader's numbered events that never reached the journal
#: (cardd.daemon.devices): card reads among them are lost, and the next read's gap names them
_LOST_EVENTS = (Reason.EVENT_GAP, Reason.EVENTS_LOST, Reason.DEVICE_DROPPED_EVENTS)


@dataclass(frozen=True, slots=True)
class CountShortfall:
    """A shoe reader's count of fewer cards than the table expected, taken while reads may have
    been lost on the way (a 1.0 reader's in flight at a link reset, a 1.1 reader's events reported
    lost): the next read of the load says whether its gap accounts for them."""

    held: int  # the reader's cards_held
    expected: int  # what the table expected it to hold then
    put_back: int  # the cards put back on top of the shoe then

# The commands a refusal names as the way forward (devices.tracker.inputs.COMMAND_NAMES)
_OPEN_ROUND, _ENTER_CARD, _DRAWN_IN_ERROR_CMD = (command_name(OpenRound), command_name(EnterCard),
                                                 command_name(DrawnInErrorDecision))
_TAKE_SEAT, _CLEAR_ALARM, _SHOE_REMAINDER = command_name(TakeSeat), command_name(ClearAlarm), command_name(ShoeRemainder)
_HAND_SHUFFLED, _VOID_SHOE, _REDEAL = command_name(HandShuffled), command_name(VoidShoe), command_name(Redeal)
_RESUME, _PLACEMENT_ERROR = command_name(Resume), command_name(PlacementError)
_CARDS_TO_BOX_WITHOUT_WAGER = command_name(CardsToBoxWithoutWager)
#: what stands between a shoe that is not in play and the next round, by the shoe's state
_SHOE_NOT_IN_PLAY = {
    "idle": "shuffle a shoe and load it first",
    "shuffling": "the shuffler is still shuffling: load the shoe once it is verified",
    "verifying": "the shuffler is still counting the shoe: load it once it is verified",
    "refused": "the shuffler's count refused this shoe: shuffle a new one",
    "verified": "the shoe is verified but not loaded: load it and deal the burn card",
    "complete": f"the shoe is complete: count its remainder back with {_SHOE_REMAINDER}, then shuffle a new one",
    "reconciled": "the shoe is finished: shuffle a new one",
    "unreconciled": f"the shoe did not reconcile (a supervisor clears its alarm with {_CLEAR_ALARM}): "
                    "shuffle a new one",
    "void": "the shoe is void: shuffle a new one",
}
#: what to do with the next shoe that took a voided shoe's place, by its state: it is a shoe of its own
_NEXT_SHOE_WAY = {
    "shuffling": "the shuffler is still shuffling it: load it once it is verified",
    "verifying": "the shuffler is still counting it: load it once it is verified",
    "verified": "it is verified, not loaded: load it and deal the burn card",
    "refused": "the shuffler's count refused it: shuffle a new one",
}
_LOADED_ALREADY = "it is loaded already: deal from it"


class Table:
    """One table: :meth:`apply` each input record to it, read the events it causes.

    ``clock`` is monotonic seconds (injected: tests move it); a device silent for longer than
    ``stale_after_s`` becomes stale at the next :meth:`tick`.
    """

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

    # ---- journal ----------------------------------------------------------------------------

    def apply(self, inp: TableInput) -> list[Event]:
        """Apply one input; returns the events it caused, in order.

        An input the table cannot take raises (TableError, OverrideRefused, RuleViolation, RoundHeld
        ...) after journaling any refusal; events journaled before the refusal still went to the sink.
        """
        try:
            handler = _HANDLERS[type(inp)]
        except KeyError:
            raise TableError(f"{type(inp).__qualname__} is not a table input (see devices.tracker.inputs)") from None
        caused: list[Event] = []
        self._caused = caused
        try:
            handler(self, inp)
            if self.shoe.deferred and self.shoe.state in SHOE_FREE:  # what held the next shoe may be over now
                self.shoe.next_shoe_released()
        finally:
            self._caused = None
        return caused

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

    # ---- queries ----------------------------------------------------------------------------

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
            what = alarm.message.rpartition("unreconciled: ")[2]  # the cards it names
            return (f"the last shoe did not reconcile ({what}; alarm {alarm.id}): a supervisor accounts for the "
                    f"cards and clears the alarm with {_CLEAR_ALARM} {alarm.id} before the next shoe")
        return (f"{_alarms_open('reconciliation failed', failed)}: a supervisor accounts for the cards and clears "
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

    # ---- devices ----------------------------------------------------------------------------

    def _link_up(self, inp: LinkUp) -> None:
        self._model(inp.device).link_up()

    def _link_down(self, inp: LinkDown) -> None:
        self._model(inp.device).link_down()

    def _tick(self, inp: Tick) -> None:
        """Check heartbeats; the daemon's feed applies a Tick about once a second."""
        for model in (self.shuffler, self.reader):
            model.check_heartbeat()

    def _device_message(self, inp: DeviceMessage) -> None:
        if inp.device == "shoe-reader":
            self._on_shoe(inp.message)
        elif inp.device == "shuffler":
            self._on_shuffler(inp.message)
        else:
            self._model(inp.device)  # raises: names the devices there are

    def _model(self, device: str) -> DeviceModel:
        models = {m.NAME: m for m in (self.shuffler, self.reader)}
        if device not in models:
            raise TableError(f"unknown device {device!r}; devices: {', '.join(models)}")
        return models[device]

    def _on_shuffler(self, msg: Message) -> None:
        self.shuffler.on_message(msg)
        if isinstance(msg, (ShuffleProgress, ShuffleComplete, DeckCheckResult)):
            if not self.shuffler.usable:
                self._emit(Reason.READ_FROM_STALE_DEVICE, f"{type(msg).__name__} from the shuffler while it is "
                           f"{self.shuffler.state}: not used", Severity.ALARM, message=type(msg).__name__)
                return
            ident = self.shuffler.ident
            if ident is not None:  # a verification record names the device that counted
                self.shoe.verifier = {"device_model": ident.model, "device_serial": ident.serial,
                                      "device_firmware": ident.firmware_version, "operator": self.shuffle_operator}
            self.shoe.on_shuffler_message(msg)

    def _on_shoe(self, msg: Message) -> None:
        self.reader.on_message(msg)
        if type(msg) is CardRead and msg.index == self.last_index + 1 and self.shoe_count_short is None:
            self.last_index = msg.index  # the hot path: the next card in order, no count waiting for it
            self.read_cards[msg.index] = msg.card
            if self.awaiting_entry is None and self.reader.accepts_reads:  # what _on_read checks first
                self._place(msg.card, msg.orientation, msg.index)
            else:
                self._on_read(msg)
            return
        if isinstance(msg, (CardRead, UnreadableCard)) and not self._next_index(msg):
            return
        if isinstance(msg, CardRead):
            self._on_read(msg)
        elif isinstance(msg, UnreadableCard):
            self._on_unreadable(msg)
        elif isinstance(msg, CutCardSeen):
            self._on_cut_card(msg)
        elif isinstance(msg, ShoeLoaded):
            self.last_index = 0  # the reader counts the cards of each load from 1
            self.read_cards, self.shoe_count_short = {}, None
            self.shuffler.stack_taken()
            if not self.shoe.shoe_loaded(msg):
                self._hold(Reason.DEALING_BLOCKED, f"shoe loaded while the shoe is {self.shoe.state}")
        elif isinstance(msg, ShoeEmpty):
            if self.round_live:
                self.last_round_id = self.round.round_id  # type: ignore[union-attr]
            else:
                self.shoe.finish_shoe(f"shoe empty after {msg.cards_out} cards")
        elif isinstance(msg, Status):
            self._check_shoe_count(msg)

    def _check_shoe_count(self, msg: Status) -> None:
        """The shoe reader's own count (its Status, asked after every handshake, after a ShoeLoaded and
        after a FaultCleared) against the table's: a shoe that lost or gained cards while no host
        listened (the daemon down, the link down) is an alarm that holds the live round and opens no
        new round until a supervisor clears it. A count of fewer cards taken while reads may have been
        lost on the way waits for the next read instead (:class:`CountShortfall`): the cards its gap
        skips are those reads, and MISSING_READ names them (one cause, one alarm)."""
        expected = self.shoe_should_hold()
        if expected is None or not self.reader.accepts_reads:  # no stack to count, or a count not to trust
            return
        self.shoe_count_short = None  # this count is the reader's word now, not one taken before it
        held = msg.cards_held
        difference = held - expected
        if difference == 0:
            self.shoe_count_named = None
            return
        if difference == self.shoe_count_named:
            return  # named already: its alarm is open, or a supervisor cleared it accepting the count
        if difference < 0 and self._reads_may_be_lost():
            self.shoe_count_short = CountShortfall(held, expected, self.cards_put_back or 0)
            return
        self._count_mismatch(held, expected, difference, self.cards_put_back or 0, self.last_index)

    def _reads_may_be_lost(self) -> bool:
        """Whether reads the reader sent may never reach the table: a 1.0 reader's in flight at a link
        reset are lost, never sent again; a 1.1 reader keeps its events until they are journaled and
        answers a Status only after the events numbered before it, unless events of it were lost (the
        daemon's EVENT_GAP, EVENTS_LOST, DEVICE_DROPPED_EVENTS, open)."""
        ident = self.reader.ident
        if ident is None or ident.protocol_minor < 1:
            return True
        name = self.reader.NAME
        return any(a.source == name and a.reason in _LOST_EVENTS for a in self.alarms.open.values())

    def _count_mismatch(self, held: int, expected: int, difference: int, put_back: int, left: int, *,
                        read: int | None = None, lost_reads: int = 0) -> None:
        """SHOE_COUNT_MISMATCH naming both counts (``left``: the last index read when the reader
        counted); ``read``: the read that showed a count of fewer cards was no lost read's
        (``lost_reads`` of them its gap accounted for)."""
        self.shoe_count_named = difference
        stack = self.shoe.stack_cards
        put_back_text = f", {put_back} put back on top" if put_back else ""
        what = (f"{-difference} fewer: cards left the shoe unseen" if difference < 0 else
                f"{difference} more: cards were added to the shoe")
        data: dict[str, Any] = {}
        if read is None:
            counts = f"the shoe reader holds {held} card(s), the table expects {expected}"
        else:
            counts = f"the shoe reader held {held} card(s) at its last count, the table expected {expected}"
            gap = (f"its gap accounts for {lost_reads} lost read(s), not for these" if lost_reads else
                   "it follows the last read with no gap: no lost read accounts for them")
            what += f" (the next read, card #{read}, showed it: {gap})"
            data = {"read": read, "lost_reads": lost_reads}
        self._emit(Reason.SHOE_COUNT_MISMATCH, f"shoe count mismatch: {counts} ({stack} verified, {left} left the "
                   f"shoe since the load{put_back_text}): {what}; round held, no new round until a supervisor looks "
                   f"at the shoe and clears this alarm with {_CLEAR_ALARM} (or voids the shoe with {_VOID_SHOE})",
                   Severity.ALARM, expected=expected, held=held, difference=difference, verified=stack, left=left,
                   put_back=put_back, shoe_state=self.shoe.state, **data)
        self._hold(Reason.SHOE_COUNT_MISMATCH, f"the shoe holds {held} card(s), {expected} expected")

    def _shortfall_read(self, short: CountShortfall, lost_reads: int, index: int) -> None:
        """The first read after a count of fewer cards that waited for it (:class:`CountShortfall`):
        the ``lost_reads`` its gap skipped were read and lost on the way (MISSING_READ names them); the
        cards the count had out beyond those left the shoe unseen."""
        unseen = short.expected - short.held - lost_reads
        if unseen <= 0 or self.shoe_should_hold() is None or -unseen == self.shoe_count_named:
            return
        self._count_mismatch(short.held, short.expected, -unseen, short.put_back, index - lost_reads - 1, read=index,
                             lost_reads=lost_reads)

    def _next_index(self, msg: CardRead | UnreadableCard) -> bool:
        """A read's index must follow the last one of this load: False for a repeat (not used again;
        one that carries another card than the first read of its index is CONFLICTING_READ); a gap
        is an alarm naming the indexes never received, and holds the round."""
        index, last = msg.index, self.last_index
        if index <= last:
            self._repeated(msg, last)
            return False
        self.last_index = index
        if isinstance(msg, CardRead):
            self.read_cards[index] = msg.card
        short, self.shoe_count_short = self.shoe_count_short, None
        if index > last + 1:
            missing = f"#{last + 1}" if index == last + 2 else f"#{last + 1}..#{index - 1}"
            self._emit(Reason.MISSING_READ, f"card read(s) {missing} never received before card #{index}: "
                       "cards left the shoe unseen; round held", Severity.ALARM,
                       first_missing=last + 1, last_missing=index - 1, index=index)
            self._hold(Reason.MISSING_READ, f"card read(s) {missing} missing")
            if short is None and self.shoe_count_named is not None:
                # a Status counted these cards gone before their reads were missed
                self.shoe_count_named = (self.shoe_count_named + index - last - 1) or None
        if short is not None:
            self._shortfall_read(short, index - last - 1, index)
        return True

    def _repeated(self, msg: CardRead | UnreadableCard, last: int) -> None:
        """A read whose index was read already since the load: a resend, or a reader counting from 1
        again without a load. The same card again is a plain repeat; another card at an index that was
        read is an integrity failure (a damaged or forged read): the first read stands, this one goes
        nowhere, and play stops until a supervisor has looked at the shoe."""
        index = msg.index
        first = self.read_cards.get(index)
        if isinstance(msg, CardRead) and first is not None and first != msg.card:
            self._emit(Reason.CONFLICTING_READ, f"card #{index} read again as {msg.card}, first read as {first}: one "
                       "index, two cards (a damaged or forged read); the first read stands, this one is not dealt; "
                       "round held, no new round until a supervisor looks at the shoe and clears this alarm with "
                       f"{_CLEAR_ALARM}", Severity.ALARM, index=index, card=str(msg.card), first_card=str(first),
                       last=last)
            self._hold(Reason.CONFLICTING_READ, f"card #{index} read again as another card")
            return
        what = f"card #{index} ({msg.card})" if isinstance(msg, CardRead) else f"unreadable card #{index}"
        self._emit(Reason.REPEATED_READ, f"{what} repeats an index already read since the shoe was loaded "
                   f"(last #{last}): not dealt again", Severity.WARNING, index=index, last=last)

    def _device_event(self, event: Event) -> None:
        """A device model's event. A device of another role refused on a port holds the live round,
        whatever the model's state was (linked, or back from an unplug); a hold because a device
        was offline gives way to it: the port is up, and what is on it is the trouble now."""
        self._journal(event)
        if event.reason is Reason.WRONG_DEVICE and not self._replaying and self._model(event.source) in self.devices():
            self._hold(Reason.WRONG_DEVICE, f"{event.source}: a device of another role on its port",
                       over=Reason.DEVICE_OFFLINE)

    def _device_changed(self, model: DeviceModel, src: str, dst: str) -> None:
        if self._replaying or model not in self.devices():
            return
        if dst == "idle" and model.rebooted and self.round_live:
            # a restart mid-round: what the device did meanwhile is unknown
            self._hold(Reason.DEVICE_FAULT, f"{model.NAME} rebooted during the round")
            return
        if dst not in ("stale", "offline", "fault", "updating"):
            return
        cause = {"stale": Reason.DEVICE_STALE, "offline": Reason.DEVICE_OFFLINE, "updating": Reason.DEVICE_OFFLINE,
                 "fault": Reason.DEVICE_FAULT}[dst]  # a device updating its firmware is out of play
        if dst == "fault" and model is self.shuffler and self.round_live:
            cause = Reason.SHUFFLER_MALFUNCTION
            fault = model.active_fault.code.name if model.active_fault else None
            self._emit(cause, f"shuffler malfunction ({(fault or 'fault').lower()}) during round "
                       f"{self.round.round_id}" + _MALFUNCTION_TEXT.format(  # type: ignore[union-attr]
                           redeal=_REDEAL, resume=_RESUME, clear_alarm=_CLEAR_ALARM),
                       Severity.ALARM, fault=fault, round=self.round.round_id)  # type: ignore[union-attr]
        self._hold(cause, f"{model.NAME} {dst}")

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

    # ---- card reads -------------------------------------------------------------------------

    def _on_read(self, msg: CardRead) -> None:
        if self.awaiting_entry is not None:
            self.queued_reads.append(msg)
            return
        if not self.reader.accepts_reads:
            self.shoe.card_out(msg.card)
            self.discard.append(msg.card)
            self._emit(Reason.READ_FROM_STALE_DEVICE, f"card #{msg.index} read while the shoe reader is "
                       f"{self.reader.state}: not assigned, to the discard", Severity.ALARM,
                       card=str(msg.card), index=msg.index)
            self._hold(Reason.READ_FROM_STALE_DEVICE, f"card #{msg.index} from a {self.reader.state} shoe reader")
            return
        self._place(msg.card, msg.orientation, msg.index)

    def _place(self, card: Card, orientation: Orientation, index: int) -> None:
        shoe = self.shoe
        foreign = shoe.card_out(card)
        if shoe.state not in SHOE_IN_PLAY:  # shoe.in_play, read for every card
            self.discard.append(card)
            self._emit(Reason.DEALING_BLOCKED, f"card #{index} left the shoe while the shoe is {self.shoe.state}: "
                       "dealing blocked, card to the discard", Severity.ALARM, card=str(card), index=index)
            return
        if foreign:
            self.discard.append(card)
            self._emit(Reason.FOREIGN_CARD, f"foreign card: {card} seen {self.shoe.out[card]} times, the shoe "
                       f"holds {self.shoe.expected.get(card, 0)}; round held", Severity.ALARM,
                       card=str(card), index=index, seen=self.shoe.out[card])
            self._hold(Reason.FOREIGN_CARD, f"foreign {card} at card #{index}")
            return
        if orientation == _FACE_UP:
            self.discard.append(card)
            self._emit(Reason.FACE_UP_CARD, f"card #{index} ({card}) came out face up: misload; card to no hand",
                       Severity.ALARM, card=str(card), index=index)
            if self.round_live:
                self._emit(Reason.REDEAL, f"re-deal declared for round {self.round.round_id} ({FACE_UP_RULE})",  # type: ignore[union-attr]
                           Severity.WARNING)
                self._void_round(Reason.FACE_UP_CARD, "table", Role.DEALER, by_rule=FACE_UP_RULE)
            return
        if shoe.burn_remaining > 0 and not self.round_live:  # shoe.burning: the shoe is in play here
            self.burn_pile.append(card)
            self.shoe.take_burn(card)
            return
        if self.pending or not self._give(card):  # no hand was waiting for it
            self.pending.append(card)
            self._unexpected(card, index)
        if self.round is not None:  # no round: no step to finish (a card with no round open)
            self._round_step_done()

    def _unexpected(self, card: Card, index: int | None) -> None:
        """``index`` None: a card exposed in error that the round ended without needing."""
        r = self.round
        if r is None or not r.live:  # every card read with no round open (the daemon benchmark's cards)
            self.pending.remove(card)
            self.drawn_in_error.append(card)
            name = str(card)
            what = f"card #{index} ({name})" if index is not None else f"{name}, exposed in error and not needed,"
            self._emit(_DRAWN_IN_ERROR, what + _DRAWN_IN_ERROR_TEXT, _WARNING, card=name, index=index)
        else:
            why = "the round is held" if r.held else f"no card expected while {r.state}"
            self._emit(Reason.CARD_EXPOSED_IN_ERROR, f"card #{index} ({card}) exposed in error ({why}): "
                       "it is used as the next card", _WARNING, card=str(card), index=index)

    def _give(self, card: Card) -> bool:
        """Hand ``card`` to the live round if one of its hands expects a card now."""
        r = self.round
        if r is None or r.held is not None or not r.live:
            return False
        try:
            target = r.card_dealt(card)  # called directly (the hot path); logged as its record below
        except CardMismatch as exc:
            self._emit(Reason.CARDS_TO_BOX_WITHOUT_WAGER, str(exc), Severity.ALARM, card=str(card))
            self._hold(Reason.CARDS_TO_BOX_WITHOUT_WAGER, str(exc))
            return False
        if target is None:
            return False
        self.round_log.append(_CARD_DEALT[card])
        return True

    def _feed(self) -> None:
        """Give waiting cards to the hands that expect them, in the order they left the shoe."""
        while self.pending and self._give(self.pending[0]):
            self.pending.pop(0)
        self._round_step_done()

    def _round_step_done(self) -> None:
        r = self.round
        if r is None or r.state != "complete" or r.round_id == self.closed_round_id:
            return
        self.closed_round_id = r.round_id
        self.played.extend(c for c, _ in r.assignments)
        self.holds.clear()
        leftover, self.pending = self.pending, []
        for card in leftover:  # exposed in error but no hand needed it: after the dealer's finished hand
            self.pending.append(card)
            self._unexpected(card, None)
        self._between_rounds()

    def _between_rounds(self) -> None:
        if self.dealer_change_pending is not None:
            who, self.dealer_change_pending = self.dealer_change_pending, None
            self._dealer_takes_over(who)
        if self.last_round_id is not None and self.round is not None and self.round.round_id >= self.last_round_id:
            self.shoe.finish_shoe(f"cut card: round {self.round.round_id} was the last")

    def _on_unreadable(self, msg: UnreadableCard) -> None:
        if self.awaiting_entry is not None:
            self.queued_reads.append(msg)  # type: ignore[arg-type]
            return
        self.awaiting_entry = msg.index
        self.entry_to_discard = not self.reader.accepts_reads
        if self.entry_to_discard:  # refused like a read from a stale reader; entered only to keep the count
            self._emit(Reason.READ_FROM_STALE_DEVICE, f"unreadable card #{msg.index} from a {self.reader.state} "
                       "shoe reader: not assigned; the dealer enters it for the count, it goes to the discard",
                       Severity.ALARM, index=msg.index)
            self._hold(Reason.READ_FROM_STALE_DEVICE, f"card #{msg.index} from a {self.reader.state} shoe reader")
            return
        text = f"card #{msg.index} could not be read: the dealer enters it"
        if self.round_live:
            self._to_round(Flag(Reason.UNREADABLE_CARD, text))
        else:
            self._emit(Reason.UNREADABLE_CARD, text, Severity.WARNING, index=msg.index)

    def _on_cut_card(self, msg: CutCardSeen) -> None:
        self.shoe.cut_card_seen(msg.index)
        self.last_round_id = self.round.round_id if self.round_live else self.rounds_started + 1  # type: ignore[union-attr]

    # ---- the round's inputs (dealer) ---------------------------------------------------------

    def _to_round(self, op: RoundInput) -> Any:
        """Forward one input to the round and remember it (the snapshot replays the log)."""
        if self.round is None:  # a supervisor's reconstruction has nothing to open a round for
            raise TableError("no round is open" + ("" if hasattr(op, "role") else f": open one with {_OPEN_ROUND} first"))
        result = self.round.apply(op)
        self.round_log.append(op)
        return result

    def _open_round(self, inp: OpenRound) -> None:
        """Start betting for the next round."""
        problems = [f"{p} (play waits for it)" for p in self.device_problems()]
        if self.round_live:
            problems.append(f"round {self.round.round_id} is still being played ({self.round.state}): "  # type: ignore[union-attr]
                            "finish it first")
        if self.shoe.burning:  # the cut card may come out during the burn: last_round too
            problems.append(f"{self.shoe.burn_remaining} burn card(s) still to come: deal them first")
        elif self.shoe.state not in ("in_play", "last_round"):
            problems.append(self._shoe_not_in_play())
        if self.drawn_in_error:
            problems.append(f"a card drawn in error waits for the dealer's word: give it with {_DRAWN_IN_ERROR_CMD} "
                            "(exposed or not) first")
        if self.awaiting_entry is not None:
            problems.append(f"unreadable card #{self.awaiting_entry} waits to be entered: enter it with "
                            f"{_ENTER_CARD} first")
        counts = self.alarms.of(Reason.SHOE_COUNT_MISMATCH)
        if counts:  # the shoe's count is in doubt: no card of it is dealt until a supervisor has looked
            problems.append(_look_at_the_shoe("shoe count mismatch", counts, f" (or voids the shoe with {_VOID_SHOE})"))
        foreign = self.alarms.of(Reason.FOREIGN_CARD)
        if foreign:  # an integrity failure stops play; one reason for them all (one line holds it)
            problems.append(_look_at_the_shoe("foreign card", foreign))
        conflicting = self.alarms.of(Reason.CONFLICTING_READ)
        if conflicting:  # so does a read that contradicts an earlier one
            problems.append(_look_at_the_shoe("conflicting read", conflicting))
        if problems:
            raise TableError.of(problems)
        self.rounds_started += 1
        self.round = Round(self.rules, self._journal, round_id=self.rounds_started)
        self.round_log = []
        self.holds.clear()

    def _shoe_not_in_play(self) -> str:
        """Why no round opens on the shoe as it is, and what comes next."""
        state = self.shoe.state
        way = _SHOE_NOT_IN_PLAY.get(state)
        if way is None:
            return f"the shoe is {state}"
        if not self.uses_shuffler and self.shoe.may("hand_shuffle"):  # shuffled by hand: the dealer declares it
            way += f" (a shoe shuffled by hand is declared with {_HAND_SHUFFLED})"
        return f"the shoe is {state}: {way}"

    def _place_bet(self, inp: PlaceBet) -> None:
        self._no_bet_after_a_card(inp.player, f"a bet on box {inp.box}")
        self._to_round(inp)

    def _place_pairs_bet(self, inp: PlacePairsBet) -> None:
        self._no_bet_after_a_card(inp.player, f"a Blackjack Pairs bet on box {inp.box}")
        self._to_round(inp)

    def _reduce_bet(self, inp: ReduceBet) -> None:
        self._no_bet_after_a_card(inp.player, f"reducing a bet on box {inp.box}")
        self._to_round(inp)

    def _refuse(self, rule: str, text: str, who: str | None) -> RuleViolation:
        self._emit(Reason.ACTION_REFUSED, text, Severity.WARNING, who, rule=rule)
        return RuleViolation(rule, text)

    def _no_bet_after_a_card(self, player: str, what: str) -> None:
        """Seed 000 3.5: no bet once a card of the round has left the shoe (one out during betting is
        the next card: a bet placed after seeing it would choose where it goes)."""
        if self.pending and self.round is not None and self.round.state == "betting":
            raise self._refuse("card_out", f"no {what}: card(s) of round {self.round.round_id} already left the "
                               "shoe (no bet once the deal has begun)", player)

    def _no_more_bets(self, inp: NoMoreBets) -> None:
        if self.round is not None and self.round.state == "betting" and self.round.held is None:
            problem = check_seats(self.rules, self.round.wagers, self.seated, self.asking_for_box)
            if problem:
                raise self._refuse(*problem, who=inp.who)
        self._to_round(inp)
        owners = set(box_owners(self.round.wagers).values()) if self.round is not None else set()
        self.asking_for_box = [p for p in self.asking_for_box if p not in owners]  # his request is met
        self._feed()

    # ---- seats ---------------------------------------------------------------------------------

    def _take_seat(self, inp: TakeSeat) -> None:
        if inp.player in self.seated:
            raise self._refuse("not_seated", f"{inp.player} is already seated", inp.who)
        self.seated.append(inp.player)
        self._emit(Reason.ACTION, f"{inp.player} takes a seat", who=inp.who, action="take_seat", player=inp.player)

    def _leave_seat(self, inp: LeaveSeat) -> None:
        if inp.player not in self.seated:
            raise self._refuse("not_seated", f"{inp.player} is not seated", inp.who)
        self.seated.remove(inp.player)
        if inp.player in self.asking_for_box:
            self.asking_for_box.remove(inp.player)
        self._emit(Reason.ACTION, f"{inp.player} leaves the table", who=inp.who, action="leave_seat",
                   player=inp.player)

    def _ask_for_box(self, inp: AskForBox) -> None:
        if inp.player not in self.seated:
            raise self._refuse("not_seated", f"{inp.player} is not seated: only a seated player asks for a box "
                               f"(seat him with {_TAKE_SEAT} first)", inp.who)
        if inp.player not in self.asking_for_box:
            self.asking_for_box.append(inp.player)
        rule = "boxes are given up on request" if self.rules.table.give_up_boxes else \
            "the house rules ask no one to give a box up"
        self._emit(Reason.ACTION, f"{inp.player} asks for a box ({rule})", who=inp.who, action="ask_for_box",
                   player=inp.player)

    def _insure(self, inp: Insure) -> None:
        self._to_round(inp)

    def _even_money(self, inp: EvenMoney) -> None:
        self._to_round(inp)

    def _close_insurance(self, inp: CloseInsurance) -> None:
        self._to_round(inp)
        self._feed()

    def _act(self, inp: Act) -> None:
        """A player decision; one the rules forbid raises RuleViolation and changes nothing."""
        self._to_round(inp)
        self._feed()

    # ---- seed procedures (dealer) -------------------------------------------------------------

    def _enter_card(self, inp: EnterCard) -> None:
        """The dealer names the card the shoe could not read; the round stays flagged."""
        card, who = inp.card, inp.who
        if self.awaiting_entry is None:
            raise TableError("no unreadable card waits to be entered: the dealer enters a card only when the shoe "
                             "could not read it")
        index, self.awaiting_entry = self.awaiting_entry, None
        to_discard, self.entry_to_discard = self.entry_to_discard, False
        self._emit(Reason.CARD_ENTERED_BY_DEALER, f"card #{index} entered by the dealer as {card}"
                   + (" (from a shoe reader not usable: to the discard)" if to_discard else ""), Severity.WARNING,
                   who, card=str(card), index=index, to_discard=to_discard)
        if to_discard:
            self.shoe.card_out(card)
            self.discard.append(card)
        else:
            self._place(card, Orientation.FACE_DOWN, index)
        queued, self.queued_reads = self.queued_reads, []
        for msg in queued:
            self._on_unreadable(msg) if isinstance(msg, UnreadableCard) else self._on_read(msg)

    def _drawn_in_error_decision(self, inp: DrawnInErrorDecision) -> None:
        """Seed 002: discarded if the card was exposed, otherwise the next round's burn card."""
        exposed, who = inp.exposed, inp.who
        if not self.drawn_in_error:
            raise TableError("no card drawn in error waits for a decision")
        card = self.drawn_in_error.pop(0)
        (self.discard if exposed else self.burn_pile).append(card)
        where = "discarded (exposed)" if exposed else "kept face down as the next round's burn card"
        self._emit(Reason.CARD_DRAWN_IN_ERROR, f"card drawn in error ({card}) {where}", Severity.INFO, who,
                   card=str(card), exposed=exposed)

    def _dealer_change(self, inp: DealerChange) -> None:
        """A new dealer mid-shoe burns ``shoe.burn_on_dealer_change`` cards (seed 003: one) after the live round."""
        who = inp.who
        if not self.rules.shoe.burn_on_dealer_change:
            self._emit(Reason.DEALER_CHANGE_BURN, f"dealer change to {who}: no burn (the house rules burn none "
                       "on a dealer change)", who=who)
        elif self.round_live:
            self.dealer_change_pending = who
            self._emit(Reason.DEALER_CHANGE_BURN, f"dealer change to {who}: one card burns after this round",
                       who=who)
        else:
            self._dealer_takes_over(who)

    def _dealer_takes_over(self, who: str) -> None:
        """The new dealer burns a card if the shoe is in play (not in its last round); otherwise say so."""
        if not self.shoe.dealer_changed(who):
            self._emit(Reason.DEALER_CHANGE_BURN, f"dealer change to {who}: no burn (shoe {self.shoe.state})", who=who)

    def _placement_error(self, inp: PlacementError) -> None:
        """A card placed on the wrong box in the initial deal: the layout is reconstructed."""
        # the role first, refused in the command's name (the round's own check names its round)
        refuse_unless_supervisor(self._journal, "table", _PLACEMENT_ERROR, inp.who, inp.role)
        layout = None if inp.assignments is None else tuple(inp.assignments)
        self._to_round(ReconstructInitialDeal(inp.who, inp.role, layout))

    def _cards_to_box_without_wager(self, inp: CardsToBoxWithoutWager) -> None:
        """All cards in play go back on top of the shoe and are dealt again, in the same order."""
        refuse_unless_supervisor(self._journal, "table", _CARDS_TO_BOX_WITHOUT_WAGER, inp.who, inp.role)
        dealt = [c for c, _ in self.round.assignments] if self.round_live else []  # type: ignore[union-attr]
        exposed = tuple(self.pending)  # in play too: back on the shoe after the dealt cards
        self._to_round(ReconstructAndRedeal(inp.who, inp.role, also=exposed))
        self.pending = []
        for card in dealt + list(exposed):
            self.shoe.card_back(card)  # they will be read again
        if self.cards_put_back is not None:
            self.cards_put_back += len(dealt) + len(exposed)  # the shoe reader holds them again
        self._holds_decided(inp.who, "reconstructed and re-dealt")

    def _shuffle_started(self, inp: ShuffleStarted) -> None:
        """The operator who loaded the shuffler and started the shuffle: named on the verification record."""
        refused = self.machine_shuffle_refused() or self.next_shoe_waits()
        if refused is not None:
            raise TableError(refused)
        self.shuffle_operator = inp.who

    def machine_shuffle_refused(self) -> str | None:
        """Why a machine shuffle may not start here (the daemon's ``start_shuffle`` asks before it
        tells the shuffler); None at a table whose rules have the shuffler shuffle."""
        if self.uses_shuffler:
            return None
        return (f'this table\'s rules ({self.rules.name}) say [shoe] shuffle = "hand": the dealer shuffles the cards '
                f"by hand, not a machine: shuffle them by hand and declare the shoe with {_HAND_SHUFFLED}")

    def _hand_shuffled(self, inp: HandShuffled) -> None:
        """A hand-shuffled table only: where a shuffler counts each card, no declaration replaces that count."""
        if self.uses_shuffler:
            raise TableError('this table\'s rules say [shoe] shuffle = "automatic": the shuffler shuffles, counts '
                             "and verifies every shoe, no hand shuffle replaces it")
        waits = self.next_shoe_waits()
        if waits is not None:
            raise TableError(waits)
        if not self.shoe.may("hand_shuffle"):
            raise TableError(f"the shoe is {self.shoe.state}: a new shoe starts once this one is complete and "
                             f"reconciled ({_SHOE_REMAINDER}), or void ({_VOID_SHOE})")
        self.shoe.hand_shuffled(inp.who)

    def _shoe_remainder(self, inp: ShoeRemainder) -> None:
        """Reconcile: the undealt remainder, counted per card when it went back to the shuffler."""
        self.shoe.reconcile(inp.returned, inp.who)

    # ---- overrides (supervisor) ---------------------------------------------------------------

    def _resume(self, inp: Resume) -> None:
        """Continue a held round: only when every device is back, and only by a supervisor."""
        who, role = inp.who, inp.role
        if not self.round_live or self.round.held is None:  # type: ignore[union-attr]
            raise TableError("no held round to resume: only a held round waits for a supervisor")
        refuse_unless_supervisor(self._journal, "table", _RESUME, who, role)
        problems = self.device_problems()
        if problems:
            refuse_override(self._journal, "table", _RESUME, who, f"{'; '.join(problems)}: continue once every "
                            f"device is back, or void the round with {_REDEAL}", role)
        self._to_round(inp)
        self._holds_decided(who, "resumed")
        self._feed()

    def _redeal(self, inp: Redeal) -> None:
        """Declare a re-deal: the live round is void, its cards go to the discard."""
        who, role = inp.who, inp.role
        if not self.round_live:
            raise TableError("no round is being played: there is nothing to re-deal")
        refuse_unless_supervisor(self._journal, "table", _REDEAL, who, role)
        self._void_round(Reason.REDEAL, who, role)
        self._emit(Reason.REDEAL, f"re-deal declared by {who}", Severity.WARNING, who)

    def _void_round(self, cause: Reason, who: str, role: Role, by_rule: str | None = None) -> None:
        r = self.round
        self._to_round(Void(cause, who, role, by_rule))  # logged: a restore must not bring the round back
        self.discard.extend(c for c, _ in r.assignments)  # type: ignore[union-attr]
        self.discard.extend(self.pending)
        self.pending.clear()
        if by_rule is None:  # a supervisor's void (a re-deal, a void shoe) decides the round's holds
            self._holds_decided(who, "voided")
        self.holds.clear()
        self._between_rounds()

    def _void_shoe(self, inp: VoidShoe) -> None:
        who, role = inp.who, inp.role
        # checked first: no override is journaled for a void that cannot happen, or that may mean another shoe
        if not self.shoe.may("void_shoe"):
            raise TableError(f"no shoe to void: the shoe is {self.shoe.state}")  # idle or void already
        self._check_which_shoe(inp.next_shoe)
        require_supervisor(self._journal, "table", "void shoe", who, role, _VOID_SHOE)
        if self.round_live:
            self._void_round(Reason.SHOE_VOID, who, role)
        for alarm in self.alarms.settle(Reason.SHOE_COUNT_MISMATCH):  # the shoe in doubt is over: its count with it
            self._emit(Reason.ALARM_CLEARED, f"alarm {alarm.id} ({alarm.reason}) cleared by {who}: the shoe is voided",
                       who=who, alarm=alarm.id, alarm_reason=alarm.reason)
        self.shoe.void(who)
        if self.shoe.after_void is not None:  # the void let the next shoe in: said, with what a second void means
            self._emit(Reason.NEXT_SHOE_TAKES_OVER, f"the next shoe, shuffled while the voided one was in play, takes "
                       f"its place {self._next_shoe_now()}", who=who, state=self.shoe.state,
                       cards_out=self.shoe.cards_out)

    def _check_which_shoe(self, next_shoe: bool) -> None:
        """A void of the next shoe that took the place of the shoe voided last must say it means that
        one (``next_shoe``), and only such a void may: a plain void again may be the last one repeated."""
        took_place = self.shoe.after_void is not None
        if took_place and not next_shoe:
            raise TableError(f"the shoe voided last is void already; the shoe now is the next one, shuffled while "
                             f"that one was in play {self._next_shoe_now()}")
        if not took_place and next_shoe:
            raise TableError(f"no next shoe took a voided shoe's place: the shoe is {self.shoe.state}, "
                             f"{self.shoe.cards_out} card(s) out; void it with {_VOID_SHOE} alone")

    def _next_shoe_now(self) -> str:
        """The shoe that took a voided shoe's place: its state and cards, what to do with it, and how to
        void it ("(verified, 312 cards counted, 0 out): it is verified, ...; to void it too, say so: ...")."""
        shoe = self.shoe
        if shoe.state in ("verifying", "verified", "refused") and shoe.counted is not None:
            now = f"{shoe.state}, {shoe.stack_cards} cards counted, {shoe.cards_out} out"
        else:
            now = f"{shoe.state}, {shoe.cards_out} card(s) out"
        return (f"({now}): {_NEXT_SHOE_WAY.get(shoe.state, _LOADED_ALREADY)}; to void it too, say so: "
                f"{_VOID_SHOE} next_shoe=true")

    def _holds_decided(self, who: str, how: str) -> None:
        """A supervisor decided the live round (resumed, voided, re-dealt it): its holds are over,
        and so are the alarms they raised (ROUND_HELD), closed in that supervisor's name."""
        self.holds.clear()
        assert self.round is not None  # every caller decided a round
        for alarm in self.alarms.settle(Reason.ROUND_HELD, self.round.round_id):
            self._emit(Reason.ALARM_CLEARED, f"alarm {alarm.id} ({alarm.reason}) cleared by {who}: the round "
                       f"was {how}", who=who, alarm=alarm.id, alarm_reason=alarm.reason, round=alarm.round)

    def _clear_alarm(self, inp: ClearAlarm) -> None:
        alarm_id, who, role = inp.alarm_id, inp.who, inp.role
        alarm = self.alarms.clear(self._journal, alarm_id, who, role)
        self._emit(Reason.ALARM_CLEARED, f"alarm {alarm_id} ({alarm.reason}) cleared by {who}", who=who,
                   alarm=alarm_id, alarm_reason=alarm.reason)


_CLEAR_FAULT = "clear_fault"  # the technician's device command (cardd.daemon.devices), not a table input


def _alarms_open(kind: str, alarms: list[Alarm]) -> str:
    """'foreign card alarm 3 is open', 'foreign card alarms 3, 4 are open'."""
    ids = ", ".join(str(a.id) for a in alarms)
    return f"{kind} alarm {ids} is open" if len(alarms) == 1 else f"{kind} alarms {ids} are open"


def _look_at_the_shoe(kind: str, alarms: list[Alarm], also: str = "") -> str:
    """Why no round opens while alarms about the shoe's cards are open, and who ends that."""
    return (f"{_alarms_open(kind, alarms)}: a supervisor looks at the shoe and clears "
            f"{'it' if len(alarms) == 1 else 'them'} with {_CLEAR_ALARM} first{also}")


def _in_fault(model: DeviceModel) -> str:
    """A device in fault, and what ends it: the device's own FaultCleared, or a technician's clear_fault."""
    code = model.active_fault.code.name.lower() if model.active_fault is not None else "unknown"
    return (f"the {model.NAME} is in fault ({code}): wait for the device to clear it, or a technician clears it "
            f"with {_CLEAR_FAULT} once it is fixed")


# Dispatch by the record's type (never by a name that came from outside).
_HANDLERS: dict[type, Callable[[Table, Any], None]] = {
    DeviceMessage: Table._device_message, LinkUp: Table._link_up, LinkDown: Table._link_down, Tick: Table._tick,
    OpenRound: Table._open_round, PlaceBet: Table._place_bet, ReduceBet: Table._reduce_bet,
    PlacePairsBet: Table._place_pairs_bet, TakeSeat: Table._take_seat, LeaveSeat: Table._leave_seat,
    AskForBox: Table._ask_for_box,
    NoMoreBets: Table._no_more_bets, Insure: Table._insure, EvenMoney: Table._even_money,
    CloseInsurance: Table._close_insurance, Act: Table._act, EnterCard: Table._enter_card,
    DrawnInErrorDecision: Table._drawn_in_error_decision, DealerChange: Table._dealer_change,
    PlacementError: Table._placement_error, CardsToBoxWithoutWager: Table._cards_to_box_without_wager,
    ShuffleStarted: Table._shuffle_started, HandShuffled: Table._hand_shuffled, ShoeRemainder: Table._shoe_remainder,
    Resume: Table._resume, Redeal: Table._redeal, VoidShoe: Table._void_shoe, ClearAlarm: Table._clear_alarm,
}
