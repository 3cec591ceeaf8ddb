"""The tracker's device inputs: links, ticks and every message the shuffler and shoe reader send.

A read's index is checked against the load's (repeats, gaps, conflicting cards), the shoe
reader's own count against the table's, and a device that drops out, reboots or faults holds
the live round. The cards themselves go on to :mod:`devices.tracker.placement`.
"""
from __future__ import annotations

from typing import Any

from devices.errors import TableError
from devices.events import Event, Reason, Severity
from devices.game.inputs import Resume
from devices.models.device_model import DeviceModel
from devices.tracker.inputs import ClearAlarm, DeviceMessage, LinkDown, LinkUp, Redeal, Tick, VoidShoe, command_name
from devices.tracker.state import CountShortfall, TableState
from firmware_bridge.messages import (
    CardRead, CutCardSeen, DeckCheckResult, Message, ShoeEmpty, ShoeLoaded, ShuffleComplete, ShuffleProgress,
    Status, UnreadableCard,
)

_CLEAR_ALARM, _VOID_SHOE = command_name(ClearAlarm), command_name(VoidShoe)
_REDEAL, _RESUME = command_name(Redeal), command_name(Resume)
# a shuffler malfunction is an incident of its own (REQUIREMENTS 2: an error stays until a recheck clears it;
# Louisiana: a malfunctioning shuffler forces a reshuffle): the round's decision does not close its alarm
_MALFUNCTION_TEXT = (": round held; a supervisor re-deals it ({redeal}) or continues it ({resume}), and clears this "
                     "alarm with {clear_alarm} once the shuffler is checked (the round's decision leaves it open)")
#: the daemon's alarms for a shoe reader's numbered events that never reached the journal
#: (cardd.daemon.devices): card reads among them are lost, and the next read's gap names them
_LOST_EVENTS = (Reason.EVENT_GAP, Reason.EVENTS_LOST, Reason.DEVICE_DROPPED_EVENTS)


class DeviceInputs(TableState):
    """The handlers of :class:`DeviceMessage`, :class:`LinkUp`, :class:`LinkDown` and :class:`Tick`."""

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
        if ident is None or (ident.protocol_major, ident.protocol_minor) < (1, 1):  # 2.0 keeps 1.1's events
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

    def _on_cut_card(self, msg: CutCardSeen) -> None:
        self.shoe.cut_card_seen(msg.index)
        self.last_round_id = self.round.round_id if self.round_live else self.rounds_started + 1  # type: ignore[union-attr]
