"""A device that stays managed for as long as the daemon runs: the one way cardd keeps a
DeviceSession to a URL alive across unplugs, failed opens and failed handshakes.

:class:`ManagedDevice` puts a :class:`~firmware_bridge.session.DeviceSession` on top of
:class:`drivers.reconnect.ReconnectingLink`, which reopens the transport with backoff (the
one backoff in the code base). Every time the transport is (re)opened a fresh session shakes
hands over it; when it goes, the session is closed and DISCONNECTED reported. A handshake
that fails on an open transport is retried with the same backoff. Nothing here ends by
itself: only :meth:`close` stops it. While no session is up, :meth:`send` and
:meth:`request` raise :class:`drivers.errors.LinkDown` naming the device.
"""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, TypeVar

import structlog

from drivers.aio import cancel_and_wait
from drivers.errors import LinkDown
from drivers.reconnect import Backoff, LinkEvent as PortEvent, LinkEventKind as PortEventKind, ReconnectingLink
from drivers.transport import Transport, TransportListener
from drivers.urls import DeviceURL
from firmware_bridge.errors import SessionClosed
from firmware_bridge.messages import Ident, Message
from firmware_bridge.identity import replacement
from firmware_bridge.session import DeviceSession, SessionConfig, SessionEvent, SessionEventKind

log = structlog.get_logger(__name__)
M = TypeVar("M", bound=Message)


class _Port(Transport):
    """One session's view of the transport ReconnectingLink holds open right now. Closing it
    ends that session only; the physical transport belongs to ReconnectingLink."""

    def __init__(self, link: ReconnectingLink, on_close: Callable[["_Port"], None]) -> None:
        self.url = link.url
        self._link = link
        self._on_close = on_close
        self._listener: TransportListener | None = None

    async def open(self, listener: TransportListener) -> None:
        self._listener = listener

    def write(self, data: bytes) -> None:
        if self._listener is None:
            raise LinkDown(self.url, "session closed")
        self._link.write(data)  # LinkDown while the device is away

    def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.connection_lost(None)
            self._on_close(self)

    @property
    def is_open(self) -> bool:
        return self._listener is not None

    def feed(self, data: bytes) -> None:
        if self._listener is not None:
            self._listener.bytes_received(data)


class ManagedDevice:
    """Keeps a handshaken session to ``url`` up forever. ``start()`` once, ``close()`` at the end.

    ``on_message`` gets every message of every session; ``on_event`` gets the sessions'
    events (connected, ident, rebooted, stale, ...) and DISCONNECTED when the transport goes.
    ``transport_options`` pass to the driver (e.g. ``backend=`` for a pyusb backend).
    """

    def __init__(self, url: str | DeviceURL, on_message: Callable[[Message], None] | None = None,
                 on_event: Callable[[SessionEvent], None] | None = None, config: SessionConfig | None = None, *,
                 backoff: Backoff = Backoff(), sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
                 **transport_options: Any) -> None:
        self.config = config or SessionConfig()
        self._on_message, self._on_event = on_message, on_event
        self._backoff, self._sleep = backoff, sleep
        self._link = ReconnectingLink(url, self, self._port_event, sleep=sleep, backoff=backoff, **transport_options)
        self.url = self._link.url
        self._port: _Port | None = None
        self._session: DeviceSession | None = None
        self._task: asyncio.Task[None] | None = None  # the handshake of the current port
        self._endings: set[asyncio.Task[None]] = set()  # sessions being closed after a loss
        self._up = asyncio.Event()
        self._last_ident: Ident | None = None
        self._closed = False

    # ---- public ----------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._session is not None and self._session.connected

    @property
    def ident(self) -> Ident | None:
        """The device's latest IDENT (the last one known while it is away)."""
        return self._session.ident if self._session is not None else self._last_ident

    @property
    def session(self) -> DeviceSession | None:
        """The current session, None while the device is away or shaking hands."""
        return self._session

    async def start(self) -> None:
        """Start opening the device in the background; returns at once."""
        await self._link.start()

    async def wait_connected(self, timeout: float | None = None) -> Ident:
        """Wait until a session is up; TimeoutError after ``timeout`` seconds, LinkDown once closed."""
        async with asyncio.timeout(timeout):
            while not (self._up.is_set() and self._session is not None):
                if self._closed:
                    raise LinkDown(self.url, "closed: no session will come up")
                await self._up.wait()
        assert self._session is not None and self._session.ident is not None
        return self._session.ident

    async def send(self, msg: Message) -> None:
        """Send ``msg`` and wait for the device's acknowledgement; LinkDown while it is away."""
        session = self._current()
        try:
            await session.send(msg)
        except SessionClosed as exc:
            raise LinkDown(self.url, f"device went away before {type(msg).__name__} was acknowledged") from exc

    async def request(self, msg: Message, expect: type[M], timeout: float = 1.0) -> M:
        """:meth:`DeviceSession.request` on the current session; LinkDown while the device is away."""
        session = self._current()
        try:
            return await session.request(msg, expect, timeout)
        except SessionClosed as exc:
            raise LinkDown(self.url, f"device went away before it answered {type(msg).__name__}") from exc

    async def close(self) -> None:
        """Stop reopening, close the session and the device; idempotent. No event follows."""
        self._closed = True
        await self._link.close()  # its transport's connection_lost comes with no event
        await asyncio.gather(self._detach(), *self._endings)
        self._up.set()  # wakes wait_connected(): it sees _closed

    # ---- ReconnectingLink's listener and events ---------------------------------------

    def bytes_received(self, data: bytes) -> None:
        if self._port is not None:
            self._port.feed(data)

    def _port_event(self, event: PortEvent) -> None:
        if self._closed:
            return
        if event.kind is PortEventKind.CONNECTED:
            self._greet()
        elif event.kind is PortEventKind.DISCONNECTED:
            self._emit(SessionEvent(SessionEventKind.DISCONNECTED, self.url, event.reason or "transport closed"))
            ending = asyncio.get_running_loop().create_task(self._detach(), name=f"end session {self.url}")
            self._endings.add(ending)
            ending.add_done_callback(self._endings.discard)

    # ---- sessions ---------------------------------------------------------------------

    def _greet(self) -> None:
        """A fresh port on the open transport, and a handshake over it."""
        self._port = _Port(self._link, self._port_closed)
        self._task = asyncio.get_running_loop().create_task(self._handshake(self._port),
                                                            name=f"handshake {self.url}")

    def _port_closed(self, port: _Port) -> None:
        """The session on ``port`` closed itself (the device rebooted into another protocol
        major): the transport is still open, so shake hands again, as after any failed handshake."""
        session = self._session
        if self._closed or port is not self._port or session is None or session.transport is not port:
            return  # a handshake attempt that failed (its loop retries), or a detach under way
        self._up.clear()
        self._session, self._last_ident = None, session.ident
        self._greet()

    async def _handshake(self, port: _Port) -> None:
        """Shake hands over ``port`` until it works or the port goes; backoff between tries."""
        attempt = 0
        while port is self._port and not self._closed:
            session = DeviceSession(port, self._on_message, self._emit, self.config)
            try:
                ident = await session.open()
            except asyncio.CancelledError:
                await session.close()
                raise
            except Exception as exc:  # no answer, another protocol version, a write that failed
                attempt += 1
                delay = self._backoff.delay(attempt)
                log.warning("handshake_retry", device=self.url, attempt=attempt, delay=delay, error=str(exc))
                await self._sleep(delay)
                continue
            previous = self._last_ident
            if previous is not None and (changed := replacement(previous, ident)):
                self._emit(SessionEvent(SessionEventKind.REPLACED, self.url, f"{changed} while away", ident))
            if previous is not None and previous.boot_id != ident.boot_id:
                detail = f"boot id {previous.boot_id:#010x} -> {ident.boot_id:#010x} while away"
                self._emit(SessionEvent(SessionEventKind.REBOOTED, self.url, detail, ident))
            self._last_ident, self._session = ident, session
            self._up.set()
            return

    def _detach(self) -> Awaitable[None]:
        """Forget the current port and session at once (so a new port never meets them); the
        returned coroutine stops the handshake and closes the session."""
        self._up.clear()
        self._port = None
        task, self._task = self._task, None
        session, self._session = self._session, None
        if session is not None and session.ident is not None:
            self._last_ident = session.ident  # a reboot seen by the session counts too
        return self._finish(task, session)

    @staticmethod
    async def _finish(task: asyncio.Task[None] | None, session: DeviceSession | None) -> None:
        await cancel_and_wait(task)
        if session is not None:
            await session.close()

    def _current(self) -> DeviceSession:
        if self._session is None:
            raise LinkDown(self.url, "device is not connected (reconnecting)")
        return self._session

    def _emit(self, event: SessionEvent) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(event)
        except Exception:  # the owner's bug must not stop the supervision
            log.exception("on_event_failed", device=self.url, kind=event.kind.value)
