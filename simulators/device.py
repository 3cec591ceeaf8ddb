"""What every simulated device does the same way: identity, status, counters, faults, self-test,
firmware update and reboot. :mod:`simulators.shuffler` and :mod:`simulators.shoe` add their own
messages on top.

A device is transport-agnostic: ``handle(msg)`` returns the immediate replies, and timed
behaviour (a shuffle that takes seconds, a shoe dealing at a pace, heartbeats) runs as tasks
on the asyncio loop that calls it, sending messages through the ``emit`` callback an
endpoint attaches (:mod:`simulators.endpoint`).
"""
from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any, Awaitable, Callable, ClassVar, Coroutine

import structlog
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from firmware_bridge.messages import (
    PROTOCOL_MAJOR,
    PROTOCOL_MINOR,
    ClearFault,
    Counters,
    CountersRequest,
    DeviceRole,
    DeviceState,
    Fault,
    FaultCleared,
    FaultCode,
    Heartbeat,
    Hello,
    Ident,
    Message,
    Refused,
    SelfTest,
    SelfTestResult,
    Status,
    StatusRequest,
)

from simulators.event_store import EventStore
from simulators.faults import Faults
from simulators.firmware_rx import FIRMWARE_MESSAGES, FirmwareReceiver

log = structlog.get_logger(__name__)

Emit = Callable[[Message], None]
Handler = Callable[[Any], list[Message]]

#: status_flood: the Status messages sent and not yet acknowledged at most (a link's window full)
FLOOD_BACKLOG = 32
#: faults a ClearFault may clear; the others clear when their cause goes (a door is closed)
CLEARABLE = {FaultCode.JAM, FaultCode.FACE_UP_CARD, FaultCode.CARD_COUNT_MISMATCH, FaultCode.SENSOR,
             FaultCode.MOTOR, FaultCode.POWER_RESTORED, FaultCode.CARD_PUSHED_BACK}


def check_serial(serial: str) -> None:
    """ValueError unless ``serial`` fits the IDENT's text field (1 to 255 UTF-8 bytes): a
    device that cannot say who it is would fail every handshake, and the host see only timeouts."""
    if not 1 <= len(serial.encode("utf-8")) <= 255:
        shown = serial[:16] + ("..." if len(serial) > 16 else "")
        raise ValueError(f"serial {shown!r}: expected 1 to 255 UTF-8 bytes")


class SimulatedDevice:
    ROLE: ClassVar[DeviceRole]
    MODEL: ClassVar[str]
    DEFAULT_FIRMWARE = "1.0.0"

    def __init__(self, serial: str, *, faults: Faults | None = None,
                 firmware_public_key: bytes | Ed25519PublicKey | None = None,
                 heartbeat_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        check_serial(serial)
        self.serial = serial
        self.heartbeat_s = heartbeat_s
        self._clock = clock
        self._public_key = firmware_public_key
        self._initial_faults = faults or Faults()
        self._initial_faults.check_for(self.ROLE.name.lower())  # a switch this device ignores is an error
        self._emit: Emit = lambda msg: None
        self._flush: Callable[..., Awaitable[None]] | None = None
        self._on_reboot: Callable[[], None] = lambda: None
        self._disconnect: Callable[[float], Awaitable[None]] | None = None
        self._tasks: set[asyncio.Task] = set()
        self._flood: asyncio.Task | None = None  # status_flood: the Status sent again and again
        #: called once what the device keeps across a power cut changed (simulators/nvram.py keeps it in a file)
        self.on_change: Callable[[], None] = lambda: None
        #: its protocol 2.0 identity (docs/protocol.md §8): a real device's secure element makes it
        #: once and never gives it out; the simulated one keeps it in its memory, and a factory reset
        #: (:meth:`reset`) keeps it too, as a secure element would
        self.identity_key = Ed25519PrivateKey.generate()
        self.reset()

    # ---- wiring --------------------------------------------------------------------

    def attach(self, emit: Emit, *, flush: Callable[..., Awaitable[None]] | None = None,
               on_reboot: Callable[[], None] | None = None,
               disconnect: Callable[[float], Awaitable[None]] | None = None) -> None:
        """Connect the device to an endpoint: ``emit`` sends a message, ``flush(limit=0)`` waits
        until at most ``limit`` sent messages are unacknowledged, ``on_reboot`` resets the endpoint's link,
        ``disconnect(seconds)`` takes the device off the wire for a while."""
        self._emit = emit
        self._flush = flush
        self._on_reboot = on_reboot or (lambda: None)
        self._disconnect = disconnect

    def start(self) -> None:
        """Start the timed behaviour that runs from power-on (heartbeats); call on the loop."""
        if self.heartbeat_s > 0:
            self.spawn(self._heartbeats())

    def close(self) -> None:
        """Stop every timed task (endpoint shutdown)."""
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()
        self._flood = None

    # ---- state for tests -----------------------------------------------------------

    def reset(self) -> None:
        """Back to factory defaults: faults as constructed, counters zero, idle, firmware 1.0.0."""
        self.close()
        self.faults = self._initial_faults
        self.firmware_version = self.DEFAULT_FIRMWARE
        self.counters = {"shuffles": 0, "cards": 0, "jams": 0, "faults": 0}
        self.active_faults: dict[FaultCode, int] = {}
        self._fault_cleared = asyncio.Event()
        self.device_state = DeviceState.IDLE
        self.firmware_rx = FirmwareReceiver(self._public_key)
        self.reboots = 0
        # what a real device persists (docs/protocol.md §3.2): reboot() keeps it, a factory reset does not;
        # the other unit that ``wrong_role`` stands for numbers its own events
        self._own_events = EventStore(self.faults.event_buffer)
        self._other_events = EventStore(self.faults.event_buffer)
        self._as_other = False  # the last Hello was answered as that other unit (wrong_role)
        self._boot()

    def state(self) -> dict[str, Any]:
        """What a test may inspect: never the order of the cards the device holds."""
        return {
            "role": self.ROLE.name.lower(), "serial": self.serial, "state": self.device_state.name,
            "boot_id": self.boot_id, "reboots": self.reboots, "firmware_version": self.firmware_version,
            "faults_active": sorted(code.name for code in self.active_faults),
            "fault_switches": self.faults.active(), "counters": dict(self.counters),
            "cards_held": self.cards_held(), "protocol": f"{PROTOCOL_MAJOR}.{self.protocol_minor}",
            "event_index": self.events.last_index, "events_confirmed": self.events.confirmed,
            "events_kept": len(self.events), "events_overflowed": self.events.overflowed,
        }

    def nvram(self) -> dict[str, Any]:
        """What the device keeps across a power cut (simulators/nvram.py): its counters, firmware
        and numbered events; subclasses add the cards they hold."""
        return {"firmware_version": self.firmware_version, "counters": dict(self.counters),
                "events": self._own_events.memory(), "identity_key": self._identity_key_hex()}

    def _identity_key_hex(self) -> str:
        raw = self.identity_key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        return raw.hex()

    def restore_nvram(self, data: dict[str, Any]) -> None:
        """Back to what :meth:`nvram` gave (before start: a power-on with that memory)."""
        self.firmware_version = str(data["firmware_version"])
        self.counters = {name: int(data["counters"][name]) for name in self.counters}
        self._own_events.restore(data["events"])
        if "identity_key" in data:  # a memory written before the device had one keeps the new one
            raw = bytes.fromhex(str(data["identity_key"]))
            if len(raw) != 32:
                raise ValueError(f"identity_key is {len(raw)} bytes, an Ed25519 private key is 32")
            self.identity_key = Ed25519PrivateKey.from_private_bytes(raw)

    def set_faults(self, **changes: Any) -> None:
        """Flip fault switches at run time (names as in :class:`Faults`); FaultSpecError for a
        switch this device does not honour."""
        faults = self.faults.replace(**changes)
        faults.check_for(self.ROLE.name.lower())
        self.faults = faults
        for store in (self._own_events, self._other_events):
            store.capacity = faults.event_buffer  # a smaller buffer pushes out the oldest at the next event
        if faults.status_flood and self._flood is None and self._tasks_may_run():
            self._flood = self.spawn(self._flood_status())  # at once (what it sends waits for a host's link)

    @property
    def events(self) -> EventStore:
        """The numbered events of the unit the host was last told this is: with ``wrong_role``
        (from the Hello after it is switched on) the other unit's own store, numbered from 1."""
        return self._other_events if self._as_other else self._own_events

    @property
    def protocol_minor(self) -> int:
        return 0 if self.faults.legacy_1_0 else PROTOCOL_MINOR

    @property
    def speaks_1_1(self) -> bool:
        """Numbered events and request ids (docs/protocol.md §3.2, §3.3); off with ``legacy_1_0``."""
        return not self.faults.legacy_1_0  # protocol_minor >= 1, without its call (asked once an event)

    def cards_held(self) -> int:
        return 0

    @property
    def uptime_ms(self) -> int:
        return int((self._clock() - self._boot_time) * 1000) & 0xFFFFFFFF

    # ---- messages ------------------------------------------------------------------

    def handle(self, msg: Message) -> list[Message]:
        """The immediate replies to one host message (timed effects follow through ``emit``)."""
        handler = self.handlers().get(type(msg))
        if handler is None:
            return [Refused(msg.TYPE, f"{self.MODEL} does not accept {type(msg).__name__}")]
        try:
            return handler(msg)
        except Exception as exc:  # a simulator bug answers like firmware would, not with silence
            log.exception("sim_handler_failed", device=self.serial, message=type(msg).__name__)
            return [Refused(msg.TYPE, f"internal error handling {type(msg).__name__}: {exc!r}"[:255])]

    def handlers(self) -> dict[type[Message], Handler]:
        common: dict[type[Message], Handler] = {
            Hello: self._hello,
            StatusRequest: lambda m: [self.status()],
            Heartbeat: lambda m: [],
            CountersRequest: lambda m: [Counters(**self.counters)],
            SelfTest: lambda m: [self.self_test()],
            ClearFault: self._clear_fault,
        }
        common.update({cls: self._firmware for cls in FIRMWARE_MESSAGES})
        return common

    def _hello(self, msg: Hello) -> list[Message]:
        self._as_other = self.faults.wrong_role  # a device swapped on the port answers from now on
        if not self.faults.flapping_ident:
            return [self.ident()]
        self._boot()
        answer = self.ident()
        self._boot()  # and once more, said unasked right behind the answer
        return [answer, self.ident()]

    def ident(self) -> Ident:
        role, serial = self.ROLE, self.serial
        if self._as_other:  # the device on this port is not the one the host expects: another unit
            role = DeviceRole.SHOE if role is DeviceRole.SHUFFLER else DeviceRole.SHUFFLER
            serial = self.other_serial
        return Ident(role, self.MODEL, serial, self.firmware_version, PROTOCOL_MAJOR,
                     self.protocol_minor, self.boot_id)

    @property
    def other_serial(self) -> str:
        """The serial of the unit ``wrong_role`` stands for (check_serial's limit: ours shortened if need be)."""
        suffix = "-WRONG"
        return self.serial.encode("utf-8")[:255 - len(suffix)].decode("utf-8", "ignore") + suffix

    def status(self) -> Status:
        fault = next(iter(self.active_faults), 0)
        return Status(DeviceState.FAULT if fault else self.device_state, int(fault), self.cards_held(),
                      self.uptime_ms)

    def after_handshake(self) -> list[Message]:
        """What the device says once a host has shaken hands: its status while a fault is active, so
        a fault raised at power-on or while no host listened (whose event a host may have journaled
        before, or never got) reaches the host as firmware reporting its state would."""
        if self.faults.status_flood and self._flood is None:
            self._flood = self.spawn(self._flood_status())
        return [self.status()] if self.active_faults else []

    def self_test(self) -> SelfTestResult:
        if self.active_faults:
            names = ", ".join(code.name for code in self.active_faults)
            return SelfTestResult(False, f"active faults: {names}")
        return SelfTestResult(True, f"{self.MODEL} {self.serial}: sensors, motors and camera ok")

    def emit(self, msg: Message) -> None:
        self._emit(msg)

    # ---- faults --------------------------------------------------------------------

    def raise_fault(self, code: FaultCode, position: int = 0, detail: str = "") -> None:
        self.active_faults[code] = position
        self._fault_cleared.clear()
        self.counters["faults"] += 1
        if code is FaultCode.JAM:
            self.counters["jams"] += 1
        log.info("sim_fault", device=self.serial, code=code.name, position=position)
        self.emit(Fault(code, position, detail or code.name.lower().replace("_", " ")))

    def clear_fault(self, code: FaultCode) -> None:
        if self.active_faults.pop(code, None) is not None:
            self.emit(FaultCleared(code))
        if not self.active_faults:
            self._fault_cleared.set()

    async def wait_fault_cleared(self, code: FaultCode, clears_after: float | None) -> None:
        """Wait until ``code`` is cleared: by itself after ``clears_after`` s, else by ClearFault."""
        if clears_after is not None:
            await asyncio.sleep(clears_after)
            self.clear_fault(code)
        while code in self.active_faults:
            self._fault_cleared.clear()
            await self._fault_cleared.wait()

    def _clear_fault(self, msg: ClearFault) -> list[Message]:
        if msg.code not in self.active_faults:
            return [Refused(msg.TYPE, f"fault {msg.code.name} is not active")]
        if msg.code not in CLEARABLE:
            return [Refused(msg.TYPE, f"fault {msg.code.name} clears only when its cause is removed")]
        self.clear_fault(msg.code)
        return []

    # ---- firmware and reboot -------------------------------------------------------

    def _firmware(self, msg: Message) -> list[Message]:
        result, new_version = self.firmware_rx.handle(msg, model=self.MODEL, running_version=self.firmware_version)
        if new_version is not None:
            self.spawn(self._install(new_version))
        return [result]

    async def _install(self, version: str) -> None:
        await self.flush()  # the FirmwareResult reaches the host before the reboot
        self.firmware_version = version
        self.reboot()

    def reboot(self) -> None:
        """Restart: timed tasks stop, a new boot_id, the endpoint's link starts over with RESET."""
        self.close()
        self.reboots += 1
        self.device_state = DeviceState.IDLE
        self.firmware_rx = FirmwareReceiver(self._public_key)  # a transfer in progress was in RAM
        self._boot()
        log.info("sim_reboot", device=self.serial, boot_id=self.boot_id, firmware=self.firmware_version)
        self._on_reboot()
        self.after_reboot()

    def after_reboot(self) -> None:
        """What a device does once it is up again (subclasses resume their work)."""
        self.start()

    def _boot(self) -> None:
        self.boot_id = secrets.randbits(32)
        self._boot_time = self._clock()

    # ---- timed behaviour -----------------------------------------------------------

    @staticmethod
    def _tasks_may_run() -> bool:
        """Whether a loop runs here for :meth:`spawn` (switches are also set before the device starts)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("sim_task_failed", device=self.serial, error=repr(task.exception()))

    def step_switch_due(self, index: int) -> bool:
        """Whether :meth:`step_reached` has a switch to apply at step ``index``: asked first, so a
        card with no switch due awaits no coroutine (nearly every card)."""
        faults = self.faults
        return ((faults.disconnect_for is not None and index >= (faults.disconnect_at or 1))
                or (faults.reboot_at is not None and index >= faults.reboot_at))

    async def step_reached(self, index: int) -> bool:
        """Apply the one-shot ``reboot_at`` / ``disconnect_at`` switches at step ``index`` (a
        card index on the shoe, cards counted on the shuffler). True when the device rebooted."""
        faults = self.faults
        if faults.disconnect_for is not None and index >= (faults.disconnect_at or 1):
            self.set_faults(disconnect_for=None, disconnect_at=None)
            await self.flush()
            if self._disconnect is not None:
                await self._disconnect(faults.disconnect_for)
        if faults.reboot_at is not None and index >= faults.reboot_at:
            self.set_faults(reboot_at=None)
            await self.flush()  # what was sent before the reboot has reached the host
            self.reboot()
            return True
        return False

    async def flush(self, limit: int = 0) -> None:
        """Wait until at most ``limit`` emitted messages await the host's ACK."""
        if self._flush is not None:
            await self._flush(limit)

    async def _flood_status(self) -> None:
        """``status_flood``: the Status, unasked, as fast as the link takes it (at most
        :data:`FLOOD_BACKLOG` unacknowledged), until the switch is turned off."""
        try:
            while self.faults.status_flood:
                self.emit(self.status())
                await self.flush(FLOOD_BACKLOG)
                await asyncio.sleep(0)  # a link that refuses them at once must not hold the loop
        finally:
            if self._flood is asyncio.current_task():
                self._flood = None

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            if not self.faults.no_heartbeat:
                self.emit(Heartbeat(self.uptime_ms))
