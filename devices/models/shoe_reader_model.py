"""The host's model of the optical card-reading dealing shoe.

Working states: loaded (cards in, none out yet) and dealing. Whether a card read may be
used is decided here (:attr:`accepts_reads`); where it goes is the table's job.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from devices.models.device_model import NOT_USABLE as _NOT_USABLE, DeviceModel
from firmware_bridge.messages import CardRead, DeviceRole, CutCardSeen, Heartbeat, Message, ShoeEmpty, ShoeLoaded, UnreadableCard


class ShoeReaderModel(DeviceModel):
    NAME = "shoe-reader"
    ROLE = DeviceRole.SHOE
    WORK_STATES = ("loaded", "dealing")
    WORK_TRANSITIONS = (
        {"trigger": "load", "source": ["idle", "loaded", "dealing"], "dest": "loaded"},
        {"trigger": "start_dealing", "source": ["idle", "loaded"], "dest": "dealing"},
        {"trigger": "run_empty", "source": ["loaded", "dealing"], "dest": "idle"},
    )
    ROUTINE = frozenset({CardRead, Heartbeat})
    ROUTINE_STATES = frozenset({"dealing"})

    if TYPE_CHECKING:  # bound by the Machine (see DeviceModel)
        def load(self) -> bool: ...
        def start_dealing(self) -> bool: ...
        def run_empty(self) -> bool: ...

    @property
    def accepts_reads(self) -> bool:
        """Card reads count only from a device that is online and heard recently (``usable``, written
        out: the table asks for every card read)."""
        return self.identity.ident is not None and self.state not in _NOT_USABLE

    def _on_work_message(self, msg: Message) -> None:
        if isinstance(msg, ShoeLoaded):
            if self.may("load"):
                self.load()
            elif self.state == "fault":
                self.resume_state = "loaded"  # loaded while faulted: that is where the clearing returns to
        elif isinstance(msg, (CardRead, UnreadableCard, CutCardSeen)):
            if self.state in ("idle", "loaded"):
                self.start_dealing()
        elif isinstance(msg, ShoeEmpty):
            if self.may("run_empty"):
                self.run_empty()
