"""What the host believes about one device: a `transitions` state machine fed by typed messages,
shared by the shuffler's and the shoe reader's models (each adds its working states). Its events,
faults and staleness: docs/architecture.md, "The device models"; docs/state-machines.md."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, ClassVar

import structlog
from transitions import Machine

from devices.events import Event, EventSink, Reason, Severity
from devices.machine_table import TableDriven
from firmware_bridge.identity import IdentityTracker, Verdict
from firmware_bridge.messages import (
    DeviceState,
    Fault,
    FaultCleared,
    FaultCode,
    DeviceRole,
    Heartbeat,
    Ident,
    Message,
    Status,
    decode,
    encode,
)
from firmware_bridge.staleness import Staleness

log = structlog.get_logger(__name__)

Clock = Callable[[], float]
#: Called after every state change with (model, source state, destination state).
ChangeListener = Callable[["DeviceModel", str, str], None]

#: States in which a device cannot be trusted; leaving them for a working state is DEVICE_RECOVERED.
TROUBLE = ("offline", "stale", "fault")
LIVENESS = (Heartbeat, Status, Ident)
NOT_USABLE = ("offline", "connecting", "stale", "updating")  # states whose reports are not trusted
FAULT_CODES = frozenset(FaultCode)
#: faults that end only when their cause goes (a door or cover closed): a ClearFault is refused
#: (docs/protocol.md, ClearFault), so no technician's clear_fault ends them
ENDED_BY_CAUSE = {FaultCode.DOOR_OPEN: "the door", FaultCode.COVER_OPEN: "the cover"}


def fault_ends(code: FaultCode | None, device: str | None = None) -> str:
    """What ends a device's fault ``code`` (None: a fault the device named with no code we know),
    in the API's words: the one text the table's refusals and STATE give. With ``device`` (its
    role, as clear_fault takes it), the clear_fault named is the whole command."""
    part = ENDED_BY_CAUSE.get(code) if code is not None else None
    if part is not None:
        return f"it ends when {part} is closed (clear_fault is refused while it is open)"
    command = "clear_fault" if device is None or code is None else f"clear_fault {device} {code.name.lower()}"
    return f"wait for the device to clear it, or a technician clears it with {command} once it is fixed"


class DeviceModel(TableDriven):
    NAME: ClassVar[str]
    WORK_STATES: ClassVar[tuple[str, ...]]  # working states besides idle
    WORK_TRANSITIONS: ClassVar[tuple[dict[str, Any], ...]]
    ROLE: ClassVar[DeviceRole]  # the role an IDENT on this device's port must announce
    ROUTINE: ClassVar[frozenset[type]] = frozenset({Heartbeat})  # messages that never move a settled state
    ROUTINE_STATES: ClassVar[frozenset[str]] = frozenset({"idle"})

    state: str  # set by the Machine, then by the table read from it
    refuse_ident: Callable[[], bool]  # a trigger, bound to the model

    if TYPE_CHECKING:  # one method per trigger, bound to the model (TableDriven); declared for the type checker
        def trigger(self, name: str) -> bool: ...
        def connect(self) -> bool: ...
        def identify(self) -> bool: ...
        def disconnect(self) -> bool: ...
        def lose_heartbeat(self) -> bool: ...
        def fail(self) -> bool: ...
        def begin_update(self) -> bool: ...

    def __init__(
        self,
        sink: EventSink,
        clock: Clock = time.monotonic,
        stale_after_s: float = 3.0,
        on_change: ChangeListener | None = None,
    ) -> None:
        self._sink = sink
        self._on_change = on_change
        self.silence = Staleness(clock, stale_after_s)
        self.identity = IdentityTracker()
        self.resume_state = "idle"  # where STALE / FAULT return to
        self.active_fault: Fault | None = None
        self.rebooted = False  # during an Ident's transition: the device restarted (new boot id)
        self._ident_note: dict[str, Any] | None = None
        self._was_offline = False  # the link went down since the device was last identified (not at start-up)
        #: the IDENT of another role refused since the link came up (a handshake's IDENT comes twice: one alarm)
        self._refused: Ident | None = None
        self.machine = Machine(
            model=self,
            states=list(self.states()),
            transitions=[dict(t) for t in self.transitions()],
            initial="offline",
            auto_transitions=False,
            queued=True,
            send_event=True,
            after_state_change="_after_change",
        )  # the declaration (the diagram is drawn from it); changes run on the table read from it
        self._run_on_table(self.machine)

    # ---- definition (also read by devices.diagrams) ------------------------------------

    @classmethod
    def states(cls) -> tuple[str, ...]:
        return ("offline", "connecting", "idle", *cls.WORK_STATES, "fault", "updating", "stale")

    @classmethod
    def transitions(cls) -> tuple[dict[str, Any], ...]:
        online = ["idle", *cls.WORK_STATES, "updating"]
        linked = ["connecting", *online, "fault"]
        back = tuple(
            {"trigger": f"back_to_{s}", "source": ["stale", "fault"] if s in online[:-1] else "stale", "dest": s}
            for s in ["connecting", *online]
        ) + ({"trigger": "back_to_fault", "source": "stale", "dest": "fault"},)
        return (
            {"trigger": "connect", "source": "offline", "dest": "connecting"},
            {"trigger": "identify", "source": [*linked, "stale"], "dest": "idle"},
            # another kind of device on this port: back to waiting for this one's IDENT
            {"trigger": "refuse_ident", "source": [*online, "fault", "stale"], "dest": "connecting"},
            {"trigger": "disconnect", "source": [*linked, "stale"], "dest": "offline"},
            {"trigger": "lose_heartbeat", "source": linked, "dest": "stale"},
            {"trigger": "fail", "source": ["idle", *cls.WORK_STATES], "dest": "fault"},
            {"trigger": "begin_update", "source": ["idle", *cls.WORK_STATES], "dest": "updating"},
            *back,
            *cls.WORK_TRANSITIONS,
        )

    # ---- what the table asks -------------------------------------------------------------

    @property
    def ident(self) -> Ident | None:
        """The device's last IDENT (None before the first)."""
        return self.identity.ident

    @property
    def usable(self) -> bool:
        """Identified, online and heard recently: its reports may be trusted."""
        return self.ident is not None and self.state not in NOT_USABLE

    @property
    def healthy(self) -> bool:
        """Usable and without an active fault."""
        return self.usable and self.state != "fault"

    # ---- inputs --------------------------------------------------------------------------

    def link_up(self) -> None:
        if self.state == "offline":
            self.silence.restart()
            self.connect()

    def link_down(self) -> None:
        self._refused = None  # what is plugged in next is judged afresh
        if self.state != "offline":
            self.silence.forget()  # gone, not silent: offline, and counted afresh when it is back
            self.disconnect()

    def check_heartbeat(self) -> bool:
        """Make the device STALE when silent too long. True when it is stale now."""
        if self.state in ("offline", "stale"):
            return self.state == "stale"
        if self.silence.check():
            if self.state != "fault":
                self.resume_state = self.state
            self.lose_heartbeat()
        return self.state == "stale"

    def on_message(self, msg: Message) -> None:
        """Update the model from one message the device sent."""
        self.silence.heard()
        if type(msg) in self.ROUTINE and self.state in self.ROUTINE_STATES:
            return  # the hot path: e.g. one more card read while dealing changes nothing here
        if self.state == "offline":
            self.connect()  # a message proves the link is up
        if isinstance(msg, Ident):
            self._on_ident(msg)
            return
        if self.state == "stale":
            if isinstance(msg, LIVENESS):
                if isinstance(msg, Status) and msg.state is not DeviceState.FAULT:
                    self.active_fault = None  # its fault ended while it was silent: not back through fault
                elif isinstance(msg, Status) and self.active_fault is not None:
                    # back to fault with the fault it has now (the status goes on to _on_status)
                    self.active_fault = self._status_fault(msg.fault) or self.active_fault
                self._back()
            else:
                return  # not proof of life; the table refuses what it carries
        if isinstance(msg, Fault):
            if self.state == "fault":
                self._fault_now(msg, "fault")
            else:
                self.active_fault = msg
                if self.may("fail"):
                    self.resume_state = self.state
                    self.fail()
        elif isinstance(msg, FaultCleared):
            if self.state == "fault" and self.active_fault is not None and self.active_fault.code == msg.code:
                self.active_fault = None
                self._back()
        elif isinstance(msg, Status):
            self._on_status(msg)
        else:
            self._on_work_message(msg)

    # ---- between a snapshot and the inputs journaled after it ---------------------------------

    def checkpoint(self) -> dict[str, Any]:
        """What replaying the inputs journaled after a table snapshot needs of this model: its state,
        where a silence or fault returns to, and the last IDENT (a model that forgot it would refuse
        the replayed reads as coming from an unidentified device)."""
        return {"state": self.state, "resume_state": self.resume_state,
                "ident": encode(self.ident).hex() if self.ident is not None else None}

    def resume_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """This model as :meth:`checkpoint` described it (no event: it was journaled then)."""
        ident = decode(bytes.fromhex(checkpoint["ident"])) if checkpoint.get("ident") else None
        self.identity = IdentityTracker(ident if isinstance(ident, Ident) else None)
        self.resume_state = checkpoint["resume_state"]
        self.machine.set_state(checkpoint["state"])

    # ---- internals -----------------------------------------------------------------------

    def _on_ident(self, msg: Ident) -> None:
        if msg.role is not self.ROLE:
            self._refuse_ident(msg)
            return
        self._refused = None
        verdict = self.identity.judge(msg).verdict
        if verdict is Verdict.SAME and self.state in ("idle", *self.WORK_STATES, "fault"):
            # the same boot saying who it is again (each handshake's IDENT comes twice: answered, then
            # with CONNECTED): nothing it told us is undone
            return
        if verdict is Verdict.SAME and self.state == "stale":
            self._back()  # proof of life; a fault outlives the silence
            return
        self.rebooted = self.identity.observe(msg).rebooted is not None
        self.active_fault = None
        self._ident_note = {"serial": msg.serial, "firmware": msg.firmware_version, "rebooted": self.rebooted}
        self.identify()
        self._ident_note, self.rebooted = None, False  # listeners saw it during the transition

    def _refuse_ident(self, msg: Ident) -> None:
        """A device of another role on this port: one alarm per connection of it (the same IDENT again
        changes nothing); it is never used (its reads are refused)."""
        if msg == self._refused:
            return
        self._refused = msg
        data = {"device": self.NAME, "expected": self.ROLE.name, "role": msg.role.name, "serial": msg.serial,
                "model": msg.model}
        self._sink(Event(Reason.WRONG_DEVICE, self.NAME, f"{self.NAME}: a {msg.role.name} device (serial "
                         f"{msg.serial}) identified on this port, a {self.ROLE.name} is expected: refused",
                         Severity.ALARM, data))
        if self.may("refuse_ident"):
            self.refuse_ident()

    def _on_status(self, msg: Status) -> None:
        # Status only forces the states the host cannot infer from other messages: a device reports
        # its status after each handshake, so a fault raised before it (at power-on, while unplugged) is known,
        # and a fault it no longer has ends here (a 1.0 device's FaultCleared lost in a link reset).
        if msg.state is DeviceState.FAULT:
            fault = self._status_fault(msg.fault)
            if self.state == "fault":
                if fault is not None:
                    self._fault_now(fault, "status")
            elif self.may("fail"):
                if fault is not None and (self.active_fault is None or self.active_fault.code != fault.code):
                    self.active_fault = fault
                self.resume_state = self.state
                self.fail()
            return
        if self.state == "fault":
            self.active_fault = None
            self._back()
        if msg.state is DeviceState.UPDATING and self.may("begin_update"):
            self.begin_update()

    @staticmethod
    def _status_fault(code: int) -> Fault | None:
        """The fault a Status names (None for a code this host does not know)."""
        if code not in FAULT_CODES:
            return None
        fault = FaultCode(code)
        return Fault(fault, 0, f"{fault.name.lower().replace('_', ' ')} (reported in its status)")

    def _fault_now(self, fault: Fault, via: str) -> None:
        """A device in fault says what is wrong now: another fault than the active one replaces it
        (its FaultCleared ends the fault, the old one's no longer does), journaled as DEVICE_FAULT
        like the first; the model stays in fault (no transition, no new hold)."""
        previous = self.active_fault
        if previous is not None and previous.code == fault.code:
            return
        self.active_fault = fault
        data = {"device": self.NAME, "from": "fault", "to": "fault", "trigger": via,
                "fault": fault.code.name, "position": fault.position, "detail": fault.detail,
                "previous": None if previous is None else previous.code.name}
        was = "" if previous is None else f" (was {previous.code.name})"
        text = f"{self.NAME}: fault now {fault.code.name} at position {fault.position} {fault.detail}".rstrip() + was
        log.info("device_fault_changed", **data)
        self._sink(Event(Reason.DEVICE_FAULT, self.NAME, text, Severity.WARNING, data))

    def _on_work_message(self, msg: Message) -> None:
        """Subclasses map their own messages to their work triggers."""

    def _back(self) -> None:
        # A fault outlives a silence: a device stale while faulted comes back faulted; one that
        # reported a fault before it identified (or while updating) comes back to where it was.
        faulted = self.state == "stale" and self.active_fault is not None and self.may("back_to_fault") \
            and self.resume_state not in ("connecting", "updating")
        self.trigger("back_to_fault" if faulted else f"back_to_{self.resume_state}")

    def _changed(self, src: str, dst: str, trigger: str) -> None:
        reason, severity = Reason.DEVICE_STATE, Severity.INFO
        if dst == "stale":
            reason, severity = Reason.DEVICE_STALE, Severity.WARNING
        elif dst == "offline":
            reason, severity = Reason.DEVICE_OFFLINE, Severity.WARNING
        elif dst == "fault":
            reason, severity = Reason.DEVICE_FAULT, Severity.WARNING
        elif dst not in (*TROUBLE, "connecting") and (src in TROUBLE or (src == "connecting" and self._was_offline)):
            reason = Reason.DEVICE_RECOVERED  # back from trouble, or identified again after the link was down
        if dst == "offline":
            self._was_offline = True
        elif dst != "connecting":
            self._was_offline = False
        data: dict[str, Any] = {"device": self.NAME, "from": src, "to": dst, "trigger": trigger}
        if dst == "fault" and self.active_fault is not None:
            data |= {"fault": self.active_fault.code.name, "position": self.active_fault.position,
                     "detail": self.active_fault.detail}
        if self._ident_note:
            data |= self._ident_note
        text = f"{self.NAME}: {src} -> {dst} ({trigger})"
        if "fault" in data:
            text += f": {data['fault']} at position {data['position']} {data['detail']}".rstrip()
        log.info("device_state", **data)
        self._sink(Event(reason, self.NAME, text, severity, data))
        if self._on_change is not None:
            self._on_change(self, src, dst)
