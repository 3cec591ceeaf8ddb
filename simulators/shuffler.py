"""The simulated automatic card shuffler: count, identify, shuffle and verify a shoe.

StartShuffle(decks) takes ``shuffle_time_s`` (0 in tests, seconds in the demo), sends
ShuffleProgress as it counts, stops on a jam or a face-up card until the fault clears, then
sends ShuffleComplete (count and composition, never the order) and DeckCheckResult against
``decks`` full decks. The shuffled stack stays inside the device until :meth:`unload` hands
it over physically (see :mod:`simulators.rig`).
"""
from __future__ import annotations

import asyncio
import random
import secrets
from typing import Any, Sequence

from firmware_bridge.messages import (
    DeckCheckResult,
    DeviceRole,
    DeviceState,
    FaultCode,
    Message,
    Refused,
    ShuffleComplete,
    ShuffleProgress,
    StartShuffle,
)

from simulators.device import Handler, SimulatedDevice
from simulators.stack import (StackCard, composition, deck_check, fisher_yates, full_shoe, misload, riffle_once,
                              stack_from_text, stack_text)

PROGRESS_STEPS = 10
_SYSTEM_RANDOM = secrets.SystemRandom()
MAX_DECKS = 8


class SimulatedShuffler(SimulatedDevice):
    ROLE = DeviceRole.SHUFFLER
    MODEL = "CS-6 sim"

    def __init__(self, serial: str = "SHUF0001", *, shuffle_time_s: float = 0.0,
                 shuffle_rng: random.Random | None = None, **kwargs: Any) -> None:
        self.shuffle_time_s = shuffle_time_s
        # the shuffle's randomness: the system's by default; a seeded one makes a bench run repeatable
        self.shuffle_rng = shuffle_rng or _SYSTEM_RANDOM
        self.stacked: list[StackCard] | None = None
        self._loaded: list[StackCard] = []  # the tray; reset() empties both again
        self._output: list[StackCard] = []
        super().__init__(serial, **kwargs)

    # ---- physical side (tests, the rig) -----------------------------------------------

    def load(self, cards: Sequence[StackCard]) -> None:
        """Cards put into the loading tray (by default a shuffle uses ``decks`` fresh decks)."""
        self._loaded = list(cards)
        self.on_change()

    def stack(self, order: Sequence[StackCard] | None) -> None:
        """Stacked mode: the next shuffles output exactly ``order`` (``None`` = random again)."""
        self.stacked = None if order is None else list(order)

    def unload(self) -> list[StackCard]:
        """Take the shuffled stack out of the device (hands it to a shoe)."""
        out, self._output = self._output, []
        self.device_state = DeviceState.IDLE
        self.on_change()
        return out

    def nvram(self) -> dict[str, Any]:
        return super().nvram() | {"tray": stack_text(self._loaded), "output": stack_text(self._output)}

    def restore_nvram(self, data: dict[str, Any]) -> None:
        """A shuffle cut short by the power leaves its cards in the machine, unshuffled (as a reboot does)."""
        super().restore_nvram(data)
        self._loaded, self._output = stack_from_text(data["tray"], "tray"), stack_from_text(data["output"], "output")
        self.device_state = DeviceState.READY if self._output else DeviceState.IDLE

    def close_door(self) -> None:
        self.set_faults(door_open=False)

    def set_faults(self, **changes: Any) -> None:
        """As every device's; the ``door_open`` switch is the door itself, so setting it at run time
        moves the door: opened, Fault(DOOR_OPEN) at once; closed, the fault's cause is gone and it
        clears (FaultCleared, whatever raised it), as a door sensor's fault does on a real shuffler."""
        super().set_faults(**changes)
        if "door_open" not in changes:
            return
        if not self.faults.door_open:
            self.clear_fault(FaultCode.DOOR_OPEN)
        elif FaultCode.DOOR_OPEN not in self.active_faults:
            self.raise_fault(FaultCode.DOOR_OPEN)

    def cards_held(self) -> int:
        return len(self._output) or len(self._loaded)

    def cards_shuffled(self) -> int:
        """The shuffled stack's cards, what :meth:`unload` hands to a shoe (0: nothing shuffled)."""
        return len(self._output)

    def reset(self) -> None:
        self._loaded = []
        self._output = []
        super().reset()

    def state(self) -> dict[str, Any]:
        return super().state() | {"stacked_mode": self.stacked is not None, "shuffle_time_s": self.shuffle_time_s}

    # ---- protocol ---------------------------------------------------------------------

    def handlers(self) -> dict[type[Message], Handler]:
        return super().handlers() | {StartShuffle: self._start_shuffle}

    def start(self) -> None:
        super().start()
        if self.faults.door_open:
            self.raise_fault(FaultCode.DOOR_OPEN)

    def _start_shuffle(self, msg: StartShuffle) -> list[Message]:
        if self.faults.door_open:
            if FaultCode.DOOR_OPEN not in self.active_faults:
                self.raise_fault(FaultCode.DOOR_OPEN)
            return [Refused(msg.TYPE, "door open: close the door, then start the shuffle")]
        if self.device_state is DeviceState.SHUFFLING:
            return [Refused(msg.TYPE, "already shuffling")]
        if not 1 <= msg.decks <= MAX_DECKS:
            return [Refused(msg.TYPE, f"decks={msg.decks}: this shuffler takes 1..{MAX_DECKS} decks")]
        self.device_state = DeviceState.SHUFFLING
        self.spawn(self._shuffle(msg.decks))
        return []

    async def _shuffle(self, decks: int) -> None:
        rng = random.Random(self.faults.seed)
        if self.stacked is not None:
            cards = list(self.stacked)
        else:
            cards = misload(self._loaded or full_shoe(decks), self.faults, rng)
        self._loaded = list(cards)  # still in the machine if a reboot cuts the shuffle short
        late = await self._count(cards)
        if late is False:
            return
        self._loaded = []
        if self.stacked is not None:
            self._output = list(cards)
        elif self.faults.riffle_once:
            self._output = riffle_once(cards, self.shuffle_rng)
        else:
            self._output = fisher_yates(cards, self.shuffle_rng)
        self.counters["shuffles"] += 1
        self.counters["cards"] += len(cards)
        self.emit(ShuffleComplete(len(cards), composition(cards)))
        if isinstance(late, ShuffleProgress):
            self.emit(late)  # late_report_at: a count report after the count is complete
        missing, extra, unrecognised = deck_check(cards, decks)
        ok = not (missing or extra or unrecognised)
        self.emit(DeckCheckResult(ok, decks, missing, extra, min(unrecognised, 255)))
        self.device_state = DeviceState.READY

    async def _count(self, cards: list[StackCard]) -> bool | ShuffleProgress:
        """Count the cards in steps, stopping where a jam or a face-up card is met.
        False when the device rebooted part-way (``reboot_at`` cards counted); the report held
        back by ``late_report_at``, if any, to be sent after ShuffleComplete; else True."""
        total = len(cards)
        stops = {}
        if self.faults.jam is not None or self.faults.jam_needs_clear:
            stops[max(1, total // 2)] = (FaultCode.JAM, None if self.faults.jam_needs_clear else self.faults.jam)
        if self.faults.face_up_at is not None and 1 <= self.faults.face_up_at <= total:
            stops[self.faults.face_up_at] = (FaultCode.FACE_UP_CARD, None)
        marks = sorted({total * step // PROGRESS_STEPS for step in range(1, PROGRESS_STEPS + 1)} | set(stops))
        counted = 0
        late: ShuffleProgress | None = None
        for mark in marks:
            await asyncio.sleep(self.shuffle_time_s * (mark - counted) / max(total, 1))
            counted = mark
            if mark in stops:
                code, clears_after = stops[mark]
                self.raise_fault(code, mark)
                await self.wait_fault_cleared(code, clears_after)
            report = ShuffleProgress(counted, counted * 100 // max(total, 1))
            if late is None and self.faults.late_report_at is not None and counted >= self.faults.late_report_at:
                late = report
            else:
                self.emit(report)
            if await self.step_reached(counted):
                return False
        return late or True
