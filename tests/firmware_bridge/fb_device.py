"""A minimal device for the session tests: a Link over in-memory wires, answering HELLO,
STATUS and the firmware messages (with the simulators' real receiver), and switches to
misbehave: another protocol version, silence, reboots, bad payloads."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from fb_wire import Wire

from drivers.errors import LinkDown
from drivers.transport import Transport, TransportListener
from firmware_bridge.link import Link, LinkConfig, discard_outcome
from firmware_bridge.messages import (
    Calibrate,
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
from simulators.firmware_rx import FIRMWARE_MESSAGES, FirmwareReceiver

FAST = LinkConfig(initial_rto=0.02, min_rto=0.002, max_rto=0.05, max_retries=4)


class MemoryTransport(Transport):
    """The host end of an in-memory wire pair, behaving like a drivers Transport."""

    def __init__(self, wire_out: Wire, url: str = "mem://device") -> None:
        self.url = url
        self.wire_out = wire_out
        self.listener: TransportListener | None = None
        self.opened = self.closed = 0

    async def open(self, listener: TransportListener) -> None:
        self.listener = listener
        self.opened += 1

    def write(self, data: bytes) -> None:
        if not self.is_open:
            raise LinkDown(self.url, "closed")
        self.wire_out.write(data)

    def close(self) -> None:
        if self.is_open:
            listener, self.listener = self.listener, None
            self.closed += 1
            listener.connection_lost(None)

    @property
    def is_open(self) -> bool:
        return self.listener is not None

    def deliver(self, data: bytes) -> None:
        if self.listener is not None:
            self.listener.bytes_received(data)


@dataclass
class FakeDevice:
    wire_out: Wire
    model: str = "CS-6000"
    serial: str = "SN42"
    protocol_major: int = 1
    boot_id: int = 0x1001
    public_key: bytes | None = None
    answer: bool = True  # False: take messages, answer nothing
    received: list[Message] = field(default_factory=list)
    firmware_version: str = "1.0.0"

    def __post_init__(self) -> None:
        self.link = Link(self.wire_out.write, self._payload, None, FAST, name="device")
        self.firmware = FirmwareReceiver(self.public_key)

    def ident(self) -> Ident:
        return Ident(DeviceRole.SHUFFLER, self.model, self.serial, self.firmware_version, self.protocol_major, 0, self.boot_id)

    def send(self, msg: Message | bytes) -> None:
        payload = msg if isinstance(msg, bytes) else encode(msg)
        self.link.send(payload).add_done_callback(discard_outcome)

    def reboot(self) -> None:
        self.boot_id += 1
        self.link.reset("reboot")  # what firmware does first after power-on

    def _payload(self, payload: bytes) -> None:
        msg = decode(payload)
        self.received.append(msg)
        if not self.answer:
            return
        if isinstance(msg, Hello):
            self.send(self.ident())
        elif isinstance(msg, StatusRequest):
            self.send(Status(DeviceState.IDLE, 0, 0, 1234))
        elif isinstance(msg, FIRMWARE_MESSAGES):
            result, version = self.firmware.handle(msg, model=self.model, running_version=self.firmware_version)
            self.send(result)
            if version is not None:
                self.firmware_version = version
        elif isinstance(msg, Calibrate):
            self.send(Refused(msg.TYPE, "a shuffler has no optical reader"))


def device_pair(**device_options) -> tuple[MemoryTransport, FakeDevice]:
    """A host transport and a device joined by two clean in-memory wires (call on a running loop)."""
    to_device, to_host = Wire(), Wire()
    transport = MemoryTransport(to_device)
    device = FakeDevice(to_host, **device_options)
    to_device.receiver = device.link.bytes_received
    to_host.receiver = transport.deliver
    return transport, device


async def settle(seconds: float = 0.02) -> None:
    await asyncio.sleep(seconds)
