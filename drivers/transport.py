"""The one interface every driver offers to the layer above: bytes in, bytes out.

A transport is opened on the running asyncio loop and calls its listener *on that loop*:
``bytes_received`` for every chunk read (any size, from 1 byte up), and ``connection_lost``
exactly once when the link goes (unplug, EIO, USB error, close). Drivers never interpret
the bytes; framing and meaning belong to ``firmware_bridge``.

A transport is opened once: after ``connection_lost`` make a new one from the URL
(``drivers.make_transport``), or let ``drivers.ReconnectingPort`` do it.
"""
from __future__ import annotations

import abc
from typing import Protocol

import structlog

from core.callbacks import call_logged

log = structlog.get_logger(__name__)


#: bytes written but not yet taken by the device, at most: a device that stops reading must not
#: grow the host's memory forever (the link resends RESET every second while it waits). The
#: oldest bytes go first: they are stale, and the link on top resends whatever still matters.
MAX_BACKLOG = 1 << 20


class WriteBacklog:
    """What a transport's write() accepted and the device has not taken yet, at most ``limit``
    bytes: beyond that the oldest are dropped, counted in ``dropped`` and logged once per stall
    (``event``), not once per write. Not thread-safe: a driver with a writer thread locks it."""

    def __init__(self, device: str, event: str, limit: int = MAX_BACKLOG) -> None:
        self.data = bytearray()
        self.dropped = 0
        self._device, self._event, self._limit = device, event, limit
        self._dropping = False

    def __len__(self) -> int:
        return len(self.data)

    def add(self, data: bytes) -> None:
        self.data += data
        excess = len(self.data) - self._limit
        if excess > 0:
            del self.data[:excess]
            self.dropped += excess
            if not self._dropping:
                self._dropping = True
                log.warning(self._event, device=self._device, limit=self._limit,
                            reason="the device is not reading; oldest bytes discarded")

    def consume(self, n: int) -> None:
        """The device took the first ``n`` bytes."""
        del self.data[:n]
        if not self.data:
            self._dropping = False  # drained: the next stall is logged again

    def take(self, n: int) -> bytes:
        """Remove and return up to ``n`` bytes from the front (for a writer thread)."""
        chunk = bytes(self.data[:n])
        self.consume(len(chunk))
        return chunk

    def clear(self) -> None:
        self.data.clear()


class TransportListener(Protocol):
    def bytes_received(self, data: bytes) -> None: ...

    def connection_lost(self, exc: Exception | None) -> None: ...


class Transport(abc.ABC):
    """Base class of the serial, USB and in-process transports."""

    #: the device URL this transport was made from, for messages and logs
    url: str

    @abc.abstractmethod
    async def open(self, listener: TransportListener) -> None:
        """Open the device and start delivering bytes to ``listener`` on the running loop.

        Raises a :class:`drivers.errors.DriverError` subclass that names the device and
        what went wrong (not found, permission denied, busy).
        """

    @abc.abstractmethod
    def write(self, data: bytes) -> None:
        """Queue ``data`` for the device. Raises ``drivers.errors.PortClosed`` when closed."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the device; idempotent. ``connection_lost(None)`` follows once."""

    @property
    @abc.abstractmethod
    def is_open(self) -> bool: ...


def deliver(listener: TransportListener, data: bytes, device: str) -> None:
    """Hand ``data`` to ``listener``; an exception there is logged, never raised into the loop
    or a reader thread, so one bad callback cannot stop the bytes that follow."""
    call_logged(log, "listener_failed", listener.bytes_received, data, device=device)
