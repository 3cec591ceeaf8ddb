"""A minimal device for the session and connection tests, listening on a mem:// line: a Link
answering HELLO, STATUS and the firmware messages (with the simulators' real receiver), and
switches to misbehave: another protocol version, silence, reboots, bad payloads."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from drivers.memory import MemoryTransport, listen
from drivers.reconnect import Backoff
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.link import Link, LinkConfig, discard_outcome
from firmware_bridge.messages import (
    Calibrate,
    ClearFault,
    DeviceRole,
    DeviceState,
    Hello,
    Ident,
    Message,
    Refused,
    Status,
    StatusRequest,
    decode,
    encode,
)
from firmware_bridge.session import DeviceSession, SessionConfig, SessionEvent, SessionEventKind
from simulators.firmware_rx import FIRMWARE_MESSAGES, FirmwareReceiver

from tests.firmware_bridge.fb_wire import Wire

FAST = LinkConfig(initial_rto=0.02, min_rto=0.002, max_rto=0.05, max_retries=4)


@dataclass
class FakeDevice:
    """One device (it stays on across the host's reconnects), on the device end of whichever
    mem:// connection the host opened last."""

    model: str = "CS-6000"
    serial: str = "SN42"
    protocol_major: int = 1
    boot_id: int = 0x1001
    public_key: bytes | None = None
    answer: bool = True  # False: take messages, answer nothing
    received: list[Message] = field(default_factory=list)
    #: (boot id, message) of each message received: what came after a reboot, on the link it restarted
    received_at_boot: list[tuple[int, Message]] = field(default_factory=list)
    firmware_version: str = "1.0.0"
    hangups: int = 0  # connections the host ended
    reboot_after_ident: bool = False  # reboot right after answering the first HELLO (once) ...
    reboot_turns: int = 0  # ... this many loop turns after sending the IDENT

    def __post_init__(self) -> None:
        self.end: MemoryTransport | None = None
        self.link = Link(self._write, self._payload, None, FAST, name="device")
        self.firmware = FirmwareReceiver(self.public_key)

    # ---- the device end of the line ---------------------------------------------------------

    def attach(self, end: MemoryTransport) -> None:
        self.end = end
        end.attach(self)

    def bytes_received(self, data: bytes) -> None:
        self.link.bytes_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.hangups += 1

    def _write(self, data: bytes) -> None:
        if self.end is not None and self.end.is_open:  # unplugged: the bytes go nowhere
            self.end.write(data)

    # ---- behaviour ------------------------------------------------------------------------------

    def ident(self) -> Ident:
        return Ident(DeviceRole.SHUFFLER, self.model, self.serial, self.firmware_version, self.protocol_major, 0, self.boot_id)

    def send(self, msg: Message | bytes) -> None:
        payload = msg if isinstance(msg, bytes) else encode(msg)
        self.link.send(payload).add_done_callback(discard_outcome)

    def reboot(self) -> None:
        self.boot_id += 1
        self.link.reset("reboot")  # what firmware does first after power-on

    def _reboot_in(self, turns: int) -> None:
        if turns:
            asyncio.get_running_loop().call_soon(self._reboot_in, turns - 1)
        else:
            self.reboot()

    def _payload(self, payload: bytes) -> None:
        msg = decode(payload)
        self.received.append(msg)
        self.received_at_boot.append((self.boot_id, msg))
        if not self.answer:
            return
        if isinstance(msg, Hello):
            self.send(self.ident())
            if self.reboot_after_ident:  # its RESET right behind its IDENT, before the host says more
                self.reboot_after_ident = False
                self._reboot_in(self.reboot_turns)
        elif isinstance(msg, StatusRequest):
            self.send(Status(DeviceState.IDLE, 0, 0, 1234))
        elif isinstance(msg, FIRMWARE_MESSAGES):
            result, version = self.firmware.handle(msg, model=self.model, running_version=self.firmware_version)
            self.send(result)
            if version is not None:
                self.firmware_version = version
        elif isinstance(msg, Calibrate):
            self.send(Refused(msg.TYPE, "a shuffler has no optical reader"))
        elif isinstance(msg, ClearFault):  # a fault whose cause is physical (a door): no command clears it
            self.send(Refused(msg.TYPE, f"fault {msg.code.name} clears only when its cause is removed"))


class DeviceLine:
    """A FakeDevice listening on ``mem://NAME`` through two impairable Wires (call on a running
    loop). Every connection the host opens reaches the same device, like hardware that stays on."""

    def __init__(self, name: str = "device", **device_options) -> None:
        self.to_device, self.to_host = Wire(), Wire()
        self.device = FakeDevice(**device_options)
        self.line = listen(name, self.device.attach, to_host=self.to_host.carrying, to_device=self.to_device.carrying)
        self.url = self.line.url

    @property
    def connections(self) -> int:
        return len(self.line.device_ends)

    def cut(self, cut: bool = True) -> None:
        """Both directions lose everything (or carry again)."""
        self.to_device.cut = self.to_host.cut = cut

    def unplug(self) -> None:
        """Pull the cable of the connection open now (the host's driver sees the port go)."""
        self.line.device_ends[-1].close()

    def close(self) -> None:
        self.line.close()


async def settle(seconds: float = 0.02) -> None:
    await asyncio.sleep(seconds)


# ---- the host side: a DeviceConnection to the line, as the library makes it ------------------

QUICK = SessionConfig(link=FAST, handshake_timeout=0.5, heartbeat_interval=0.02, stale_after=0.15, stats_interval=0.05)
FAST_RETRY = Backoff(initial=0.01, cap=0.05)
# for the connection kept up: the host's link keeps its default timers (a loaded machine only
# slows the test down); a short handshake timeout makes the silent device's retries quick
MANAGED_QUICK = SessionConfig(handshake_timeout=0.1, stale_after=5.0)


def kinds(events: list[SessionEvent]) -> list[SessionEventKind]:
    return [e.kind for e in events]


def session_of(conn: DeviceConnection) -> DeviceSession:
    """The connection's current session; fails the test when it has none."""
    assert conn.session is not None, f"{conn.url}: no session"
    return conn.session


def ident_of(conn: DeviceConnection) -> Ident:
    """The IDENT the connection holds; fails the test when it has none."""
    assert conn.ident is not None, f"{conn.url}: no IDENT yet"
    return conn.ident


def connection(config: SessionConfig = QUICK, name: str = "device", **device_options: Any
               ) -> tuple[DeviceConnection, FakeDevice, DeviceLine, list[Message], list[SessionEvent]]:
    """A FakeDevice on ``mem://name`` and a DeviceConnection to it (not opened yet); returns the
    connection, the device, the line, and the lists of messages and events the connection reported."""
    line = DeviceLine(name, **device_options)
    messages: list[Message] = []
    events: list[SessionEvent] = []
    conn = DeviceConnection(line.url, messages.append, events.append, config, backoff=FAST_RETRY)
    return conn, line.device, line, messages, events
