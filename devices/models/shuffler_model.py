"""The host's model of the automatic card shuffler.

Working states: shuffling (progress reported) and ready (a shuffled, counted stack waits
to be loaded into the shoe). Verification of the count and composition is the shoe life's
job (:mod:`devices.tracker.shoe`); this model only tracks what the device is doing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from devices.models.device_model import DeviceModel
from firmware_bridge.messages import DeviceState, Message, ShuffleComplete, ShuffleProgress, Status


class ShufflerModel(DeviceModel):
    NAME = "shuffler"
    WORK_STATES = ("shuffling", "ready")
    WORK_TRANSITIONS = (
        {"trigger": "start_shuffle", "source": ["idle", "ready"], "dest": "shuffling"},
        {"trigger": "finish_shuffle", "source": "shuffling", "dest": "ready"},
        {"trigger": "hand_off", "source": "ready", "dest": "idle"},
    )

    if TYPE_CHECKING:  # bound by the Machine (see DeviceModel)
        def start_shuffle(self) -> bool: ...
        def finish_shuffle(self) -> bool: ...
        def hand_off(self) -> bool: ...

    def _on_work_message(self, msg: Message) -> None:
        if isinstance(msg, (ShuffleProgress, ShuffleComplete)) and self.state in ("idle", "ready"):
            self.start_shuffle()  # an instant shuffle sends no progress first
        if isinstance(msg, ShuffleComplete) and self.state == "shuffling":
            self.finish_shuffle()

    def _on_status(self, msg: Status) -> None:
        if msg.state is DeviceState.IDLE and self.state == "ready":
            self.hand_off()  # the stack was taken to the shoe
        else:
            super()._on_status(msg)

    def stack_taken(self) -> None:
        """The shuffled stack went into the shoe (the table calls this on ShoeLoaded)."""
        if self.state == "ready":
            self.hand_off()
