"""End-to-end rig: a simulator on its own thread behind a real pty or the pyusb backend, and the
host's real driver, Link, DeviceSession and DeviceConnection on the test's loop."""
from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from firmware_bridge.connection import DeviceConnection
from firmware_bridge.messages import Ident, Message
from firmware_bridge.session import SessionConfig, SessionEvent, SessionEventKind
from simulators.device import SimulatedDevice
from simulators.endpoint import Endpoint
from simulators.pty_endpoint import PtyEndpoint
from simulators.usb_backend import SimUsbBackend
from simulators.usb_endpoint import UsbEndpoint

from tests.support.poll import until

FULL = os.environ.get("CARDD_FULL") == "1"
PATHS = ["pty", "usb"]


@dataclass
class Host:
    """What the host side saw."""

    conn: DeviceConnection
    events: list[SessionEvent] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    by_type: dict[type, list[Message]] = field(default_factory=dict)

    @property
    def ident(self) -> Ident:
        """The device's IDENT (the connection has one once open_host returned)."""
        ident = self.conn.ident
        assert ident is not None, "the host is not connected"
        return ident

    def seen(self, msg: Message) -> None:
        self.by_type.setdefault(type(msg), []).append(msg)
        self.changed.set()

    def of(self, cls: type) -> list:
        """The messages of type ``cls`` so far (kept per type: a soak waits on this 10,000 times)."""
        return list(self.by_type.get(cls, ()))

    def kinds(self) -> list[SessionEventKind]:
        return [e.kind for e in self.events]

    async def until(self, predicate: Callable[[], object], timeout: float = 10.0) -> None:
        await until(predicate, timeout=timeout, changed=self.changed)


def make_endpoint(path: str, device: SimulatedDevice, **kwargs: Any) -> tuple[Endpoint, Callable[[], dict[str, Any]]]:
    """The endpoint, and what :func:`open_host` needs to reach it: its URL and driver options."""
    endpoint: Endpoint
    if path == "pty":
        endpoint = PtyEndpoint(device, **kwargs)
    else:
        endpoint = UsbEndpoint(device, backend=SimUsbBackend(), **kwargs)
    return endpoint, lambda: {"url": endpoint.url, **transport_options(endpoint)}


def transport_options(endpoint: Endpoint) -> dict[str, Any]:
    """What drivers.make_transport needs besides the endpoint's URL (the pyusb backend)."""
    return {"backend": endpoint.backend} if isinstance(endpoint, UsbEndpoint) else {}


async def open_host(url: str, config: SessionConfig | None = None, **transport_options: Any) -> Host:
    """A DeviceConnection to ``url``, opened (handshaken); what it reports is kept in the Host."""
    host: Host

    def on_event(event: SessionEvent) -> None:
        host.events.append(event)
        host.changed.set()

    conn = DeviceConnection(url, lambda msg: host.seen(msg), on_event, config or SessionConfig(stale_after=10.0),
                            **transport_options)
    host = Host(conn)
    await conn.open()
    return host
