"""End-to-end rig: a simulator on its own thread behind a real pty or the pyusb backend, and the
host's real driver, Link and DeviceSession on the test's loop."""
from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from drivers.serial_port import SerialTransport
from drivers.transport import Transport
from drivers.usb_bulk import UsbBulkTransport
from firmware_bridge.messages import Message
from firmware_bridge.session import DeviceSession, SessionConfig, SessionEvent, SessionEventKind
from simulators.device import SimulatedDevice
from simulators.endpoint import Endpoint
from simulators.pty_endpoint import PtyEndpoint
from simulators.usb_backend import SimUsbBackend
from simulators.usb_endpoint import UsbEndpoint

FULL = os.environ.get("CARDD_FULL") == "1"
PATHS = ["pty", "usb"]


@dataclass
class Host:
    """What the host side saw."""

    session: DeviceSession
    events: list[SessionEvent] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    by_type: dict[type, list[Message]] = field(default_factory=dict)

    def seen(self, msg: Message) -> None:
        self.by_type.setdefault(type(msg), []).append(msg)
        self.changed.set()

    def of(self, cls: type) -> list:
        """The messages of type ``cls`` so far (kept per type: a soak waits on this 10,000 times)."""
        return list(self.by_type.get(cls, ()))

    def kinds(self) -> list[SessionEventKind]:
        return [e.kind for e in self.events]

    async def until(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        async def wait() -> None:
            while not predicate():
                self.changed.clear()
                await self.changed.wait()
        await asyncio.wait_for(wait(), timeout)


def make_endpoint(path: str, device: SimulatedDevice, **kwargs: Any) -> tuple[Endpoint, Callable[[], Transport]]:
    if path == "pty":
        pty = PtyEndpoint(device, **kwargs)
        return pty, lambda: SerialTransport(pty.url)
    backend = SimUsbBackend()
    usb = UsbEndpoint(device, backend=backend, **kwargs)
    return usb, lambda: UsbBulkTransport(usb.url, backend=backend)


def transport_options(endpoint: Endpoint) -> dict[str, Any]:
    """What drivers.make_transport needs besides the endpoint's URL (the pyusb backend)."""
    return {"backend": endpoint.backend} if isinstance(endpoint, UsbEndpoint) else {}


async def open_host(transport: Transport, config: SessionConfig | None = None) -> Host:
    host: Host

    def on_event(event: SessionEvent) -> None:
        host.events.append(event)
        host.changed.set()

    session = DeviceSession(transport, lambda msg: host.seen(msg), on_event, config or SessionConfig(stale_after=10.0))
    host = Host(session)
    await session.open()
    return host
