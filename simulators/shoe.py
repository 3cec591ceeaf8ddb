"""The simulated card-reading dealing shoe.

Loaded with a stack (by :class:`simulators.rig.SimulatedTable` from the shuffler, or directly
by a test), it reads each card as it leaves: CardRead(index, card, orientation, time), or
UnreadableCard for a card it cannot identify; CutCardSeen after the card at the cut
position; ShoeEmpty after the last card. Cards leave at ``pace_s`` seconds each once loaded,
or on demand with :meth:`deal` (``pace_s=None``, the default for tests and the bench).
"""
from __future__ import annotations

import asyncio
import random
from typing import Any, Sequence

from core.cards import Card, Orientation, Rank
from firmware_bridge.messages import (
    Calibrate,
    CalibrationResult,
    CardRead,
    CutCardSeen,
    DeviceRole,
    DeviceState,
    Message,
    ShoeEmpty,
    ShoeLoaded,
    UnreadableCard,
)

from simulators.device import Handler, SimulatedDevice
from simulators.stack import StackCard, misload, stack_from_text, stack_text

#: let the loop run (link, other devices) every this many cards dealt on demand
YIELD_EVERY = 16
#: CardRead.index is 16 bits: the most cards one load can hold
MAX_CARDS = 0xFFFF
#: cards dealt on demand wait while more than this many reads await the host's ACK
#: (the link's send queue is bounded)
BACKLOG = 256

# the enum members a card's read uses, looked up once: on Python 3.11 a member read from its
# class goes through EnumType.__getattr__ (about 70 ns, several a card)
_DEALING = DeviceState.DEALING
_FACE_UP, _FACE_DOWN = Orientation.FACE_UP, Orientation.FACE_DOWN


def check_cut(cut_at: int | None, cards: int) -> None:
    """ValueError unless a cut card after card ``cut_at`` lies within a load of ``cards``."""
    if cut_at is None:
        return
    if cards == 0:
        raise ValueError("no cards in the shoe to put a cut card in (load some: --decks N or --stack)")
    if not 1 <= cut_at <= cards:
        raise ValueError(f"beyond the stack: the shoe is loaded with {cards} cards, so the cut card "
                         f"goes after card 1 to {cards}")


def _next_rank(card: Card) -> Card:
    """The card of the next rank in the same suit (a king's is the ace): another card at one index."""
    ranks = list(Rank)
    return Card(ranks[(ranks.index(card.rank) + 1) % len(ranks)], card.suit)


class SimulatedShoe(SimulatedDevice):
    ROLE = DeviceRole.SHOE
    MODEL = "OS-1 sim"

    def __init__(self, serial: str = "SHOE0001", *, pace_s: float | None = None, **kwargs: Any) -> None:
        self.pace_s = pace_s
        self._stack: list[StackCard] = []  # reset() empties these again
        self._pending = 0
        self._dealer: asyncio.Task[None] | None = None
        self.cut_at: int | None = None
        #: the cards that left since the last load, in order (None: unreadable; a card skip_read_at hid is
        #: there too): what a test compares the host's record with
        self.dealt: list[StackCard] = []
        super().__init__(serial, **kwargs)

    # ---- physical side ----------------------------------------------------------------

    def load(self, cards: Sequence[StackCard], cut_at: int | None = None) -> None:
        """Put a stack in the shoe; the cut card sits after the card with index ``cut_at``.

        Call on the device's loop (endpoints offer ``call``). With a pace set, dealing starts.
        """
        if len(cards) > MAX_CARDS:
            raise ValueError(f"a shoe load of {len(cards)} cards: at most {MAX_CARDS} (CardRead.index is 16 bits)")
        check_cut(cut_at, len(cards))
        self._stack = misload(cards, self.faults, random.Random(self.faults.seed))
        self._stack.reverse()  # pop() takes the next card from the end
        self.cut_at = cut_at
        self.index = 0
        self.dealt = []
        self.device_state = DeviceState.READY
        self.emit(ShoeLoaded(self.uptime_ms))
        if self.pace_s is not None:
            self.deal(len(self._stack))

    def deal(self, n: int) -> list[StackCard]:
        """The dealer draws ``n`` more cards (fewer if the shoe runs out). Call on the loop. The cards
        drawn, in the order they leave (None: a foreign card): what the dealer sees of them, not what
        the shoe reads (a read a fault switch changes or hides is the shoe's)."""
        end = max(0, len(self._stack) - self._pending)  # the cards a deal asked for earlier leave first
        drawn = self._stack[max(0, end - n):end][::-1]
        self._pending += n
        if self._dealer is None or self._dealer.done():
            self._dealer = self.spawn(self._deal())
        return drawn

    def cards_held(self) -> int:
        return len(self._stack)

    def cards_free(self) -> int:
        """The cards held that no :meth:`deal` has asked for yet (what one more deal can release)."""
        return max(0, len(self._stack) - self._pending)

    def unload(self) -> list[StackCard]:
        """The dealer takes the undealt stub out (unread: it goes back to the shuffler to be counted)."""
        stub, self._stack = list(reversed(self._stack)), []
        self.on_change()
        return stub

    def nvram(self) -> dict[str, Any]:
        return super().nvram() | {"stack": stack_text(list(reversed(self._stack))), "cut_at": self.cut_at,
                                  "index": self.index}

    def restore_nvram(self, data: dict[str, Any]) -> None:
        super().restore_nvram(data)
        self._stack = stack_from_text(data["stack"], "stack")
        self._stack.reverse()  # pop() takes the next card from the end
        cut_at, self.index = data["cut_at"], int(data["index"])
        self.cut_at = None if cut_at is None else int(cut_at)
        if self._stack:
            self.device_state = DeviceState.DEALING if self.index else DeviceState.READY
        elif self.index:
            self.device_state = DeviceState.EMPTY

    def reset(self) -> None:
        self._stack = []
        self._pending = 0
        self._dealer = None
        self.cut_at = None
        self.index = 0
        self.dealt = []
        super().reset()

    def state(self) -> dict[str, Any]:
        return super().state() | {"cards_out": self.index, "cut_at": self.cut_at, "pending_deals": self._pending,
                                  "pace_s": self.pace_s}

    # ---- protocol ---------------------------------------------------------------------

    def handlers(self) -> dict[type[Message], Handler]:
        return super().handlers() | {Calibrate: self._calibrate}

    def _calibrate(self, msg: Calibrate) -> list[Message]:
        if self.active_faults:
            names = ", ".join(code.name for code in self.active_faults)
            return [CalibrationResult(False, f"cannot calibrate with active faults: {names}")]
        return [CalibrationResult(True, "optics calibrated: contrast 0.92, threshold 118")]

    def after_reboot(self) -> None:
        super().after_reboot()
        if self._pending:
            self._dealer = self.spawn(self._deal())  # the dealer keeps drawing

    async def _deal(self) -> None:
        while self._pending > 0 and self._stack:
            if self.pace_s:
                await asyncio.sleep(self.pace_s)
            elif self.index % YIELD_EVERY == 0:
                await self.flush(BACKLOG)
                await asyncio.sleep(0)
            self._pending -= 1
            self._read_one(self._stack.pop())
            if self.step_switch_due(self.index) and await self.step_reached(self.index):
                return
        self._pending = 0
        if not self._stack and self.device_state is DeviceState.DEALING:
            self.device_state = DeviceState.EMPTY
            self.emit(ShoeEmpty(self.index, self.uptime_ms))

    def _read_one(self, card: StackCard) -> None:
        self.index = index = self.index + 1
        self.dealt.append(card)
        self.device_state = _DEALING
        self.counters["cards"] += 1
        now = self.uptime_ms
        faults = self.faults
        read: Message | None = None
        if index == faults.skip_read_at:
            pass  # the card left unseen: its index is never reported
        elif card is None or index == faults.unreadable_at:
            read = UnreadableCard(index, now)
        else:
            read = CardRead(index, card, _FACE_UP if index == faults.face_up_at else _FACE_DOWN, now)
        if read is not None:
            self.emit(read)
            if index == self.faults.repeat_read_at:
                self.emit(read)  # the same read again: the host must not deal it twice
            if index == self.faults.conflicting_read_at and isinstance(read, CardRead):
                self.emit(CardRead(index, _next_rank(read.card), read.orientation, now))  # one index, two cards
        if index == self.cut_at:
            self.emit(CutCardSeen(index, now))
