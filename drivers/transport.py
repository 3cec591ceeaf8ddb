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
        """Queue ``data`` for the device. Raises ``drivers.errors.LinkDown`` when closed."""

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
