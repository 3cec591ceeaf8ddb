"""Keep a device port open: open, and after every loss or failed open, retry with backoff, forever
(:class:`ReconnectingPort`, :class:`Backoff`). "Port" is the transport to one device URL; "link"
is only firmware_bridge's seq/ACK layer above it. docs/architecture.md, "Reopening a port"."""
from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

import structlog

from core.callbacks import call_logged
from drivers.aio import cancel_and_wait
from drivers.errors import PortClosed
from drivers.factory import make_transport
from drivers.transport import Transport
from drivers.urls import DeviceURL, parse_url

log = structlog.get_logger(__name__)


class PortEventKind(enum.StrEnum):
    CONNECTED = "connected"
    DISCONNECTED = "disconnected"
    RETRYING = "retrying"


@dataclass(frozen=True, slots=True)
class PortEvent:
    kind: PortEventKind
    url: str
    reason: str | None = None  # disconnected / retrying: what went wrong, naming the device
    attempt: int | None = None  # retrying: 1, 2, ... since the port was last open
    delay: float | None = None  # retrying: seconds until that attempt
    error: Exception | None = None  # retrying: the exception the failed open raised (reason is its text)


@dataclass(frozen=True, slots=True)
class Backoff:
    initial: float = 0.1
    factor: float = 2.0
    cap: float = 5.0
    #: a port that stayed open this long starts the schedule over; one that dropped sooner keeps
    #: backing off, so a device that fails right after every open is not reopened 10 times a second
    stable: float = 5.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        return min(self.cap, self.initial * self.factor ** (attempt - 1))


class BytesListener(Protocol):
    def bytes_received(self, data: bytes) -> None: ...


class ReconnectingPort:
    """The transport to one device URL, reopened whenever it goes. Call :meth:`start`, then :meth:`close`."""

    def __init__(self, url: str | DeviceURL, listener: BytesListener,
                 on_event: Callable[[PortEvent], None], *,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
                 backoff: Backoff = Backoff(), **transport_options: Any) -> None:
        self._url = parse_url(url)  # BadURL now, not retried
        self._listener, self._on_event = listener, on_event
        self._sleep, self._backoff, self._options = sleep, backoff, transport_options
        self._transport: Transport | None = None
        self._lost: asyncio.Future[str] | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return self._url.text

    @property
    def connected(self) -> bool:
        return self._transport is not None

    async def start(self) -> None:
        """Start the supervising task on the running loop; returns at once."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"port {self.url}")

    def write(self, data: bytes) -> None:
        if self._transport is None:
            raise PortClosed(self.url, "port is closed (reconnecting)")
        self._transport.write(data)

    async def close(self) -> None:
        """Stop retrying and close the device. No event follows."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()

    # --- TransportListener for the current transport -------------------------------------
    def bytes_received(self, data: bytes) -> None:
        self._listener.bytes_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(str(exc) if exc else f"{self.url}: closed")

    # --- the supervisor ----------------------------------------------------------------
    def _emit(self, kind: PortEventKind, **details: Any) -> None:
        event = PortEvent(kind, self.url, **details)
        # a port that is down is worth a warning each time it says why; coming up is news
        level = log.info if kind is PortEventKind.CONNECTED else log.warning
        logged = {k: v for k, v in details.items() if k != "error"}
        level("port_" + kind.value, device=self.url, **logged)
        call_logged(log, "port_event_sink_failed", self._on_event, event, device=self.url)

    async def _run(self) -> None:
        attempt = 0
        reason: str = ""
        error: Exception | None = None
        while True:
            if attempt:
                delay = self._backoff.delay(attempt)
                self._emit(PortEventKind.RETRYING, attempt=attempt, delay=delay, reason=reason, error=error)
                await self._sleep(delay)
            transport = None
            try:
                transport = make_transport(self._url, **self._options)
                self._lost = asyncio.get_running_loop().create_future()
                await transport.open(self)
            except asyncio.CancelledError:
                if transport is not None:
                    transport.close()
                raise
            except Exception as exc:  # any failure to open is retried, never fatal
                attempt += 1
                reason, error = str(exc), exc
                continue
            self._transport = transport
            self._emit(PortEventKind.CONNECTED)
            up_since = asyncio.get_running_loop().time()
            reason, error = await self._lost, None
            self._transport = None
            self._emit(PortEventKind.DISCONNECTED, reason=reason)
            # at least the first backoff step (a replugged device needs udev first); more if
            # the port did not last (failed opens before it count too)
            lasted = asyncio.get_running_loop().time() - up_since >= self._backoff.stable
            attempt = 1 if lasted else attempt + 1
