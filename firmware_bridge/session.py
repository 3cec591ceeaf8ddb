"""One device, host side: transport + link + HELLO/IDENT handshake + typed messages.

A :class:`DeviceSession` opens a drivers Transport, starts a :class:`~firmware_bridge.link.Link`
on it, says HELLO and waits for IDENT (refusing another protocol major version), then hands
every message the device sends to ``on_message`` and to :meth:`messages` iterators.
:meth:`request` sends one message and waits for the answer of a given type. It sends a
HEARTBEAT every ``heartbeat_interval`` and reports STALE when the device has been silent
for ``stale_after``. When the device resets the link (it rebooted) or sends a fresh IDENT,
the session says HELLO again and reports REBOOTED if the boot id changed, and REPLACED
(loudly, before REBOOTED) if another unit answers: a different role, model or serial. When the link
fails (retry cap), it reports LINK_FAILED and resets the link after ``retry_delay``.
"""
from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field, replace
from typing import AsyncIterator, Callable, TypeVar

import structlog

from drivers.aio import cancel_and_wait
from drivers.transport import Transport
from firmware_bridge.errors import (
    IncompatibleProtocol,
    LinkError,
    LinkReset,
    RequestRefused,
    RequestTimeout,
    SessionClosed,
)
from firmware_bridge.link import Link, LinkConfig, LinkEvent, LinkState, LinkStats, discard_outcome
from firmware_bridge.messages import (
    PROTOCOL_MAJOR,
    PROTOCOL_MINOR,
    Heartbeat,
    Hello,
    Ident,
    Message,
    MessageDecodeError,
    Refused,
    decode,
    encode,
)
from firmware_bridge.identity import replacement

log = structlog.get_logger(__name__)
M = TypeVar("M", bound=Message)


class SessionEventKind(enum.StrEnum):
    CONNECTED = "connected"  # handshake done (first time and after every re-handshake)
    IDENT = "ident"  # the device said who it is
    REBOOTED = "rebooted"  # a new boot id: the device lost its state
    REPLACED = "replaced"  # another unit (role, model or serial) now answers on this port
    LINK_FAILED = "link_failed"  # retry cap reached; resets follow every retry_delay (reported once per outage)
    STALE = "stale"  # nothing heard for stale_after seconds
    FRESH = "fresh"  # heard again after STALE
    BAD_MESSAGE = "bad_message"  # a payload that is not a valid message (detail shows it in hex)
    INCOMPATIBLE = "incompatible"  # the device speaks another protocol major version
    DISCONNECTED = "disconnected"  # the transport went away; this session is over


@dataclass(frozen=True, slots=True)
class SessionEvent:
    kind: SessionEventKind
    device: str  # the transport URL
    detail: str = ""
    ident: Ident | None = None


@dataclass(frozen=True, slots=True)
class SessionConfig:
    host_name: str = "cardd"
    link: LinkConfig = field(default_factory=LinkConfig)
    handshake_timeout: float = 2.0
    heartbeat_interval: float = 1.0
    stale_after: float = 3.0
    retry_delay: float = 1.0  # after the link failed, before resetting it (again and again, never giving up)
    stats_interval: float = 60.0  # how often the link statistics go to the log


@dataclass(slots=True)
class SessionStats:
    messages_received: int = 0
    bad_messages: int = 0
    requests: int = 0
    request_timeouts: int = 0
    handshakes: int = 0
    reboots: int = 0
    link: LinkStats | None = None


_END = object()  # closes the messages() iterators


class DeviceSession:
    def __init__(
        self,
        transport: Transport,
        on_message: Callable[[Message], None] | None = None,
        on_event: Callable[[SessionEvent], None] | None = None,
        config: SessionConfig | None = None,
    ) -> None:
        self.transport = transport
        self.config = config or SessionConfig()
        self.ident: Ident | None = None
        self.link: Link | None = None
        self._on_message = on_message
        self._on_event = on_event
        self._stats = SessionStats()
        self._pending: list[tuple[type[Message], int, asyncio.Future]] = []
        self._queues: set[asyncio.Queue] = set()
        self._link_up = asyncio.Event()
        self._handshake: asyncio.Task | None = None
        self._heartbeat: asyncio.Task | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._closing: asyncio.Task | None = None  # held: the loop keeps only a weak reference to a task
        self._last_heard = 0.0
        self._stale = False
        self._outage = False  # LINK_FAILED reported, not yet CONNECTED again
        self._closed = False
        self._loop = asyncio.get_running_loop()

    # ---- public ----------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Handshake done and the link up."""
        return self.ident is not None and self._link_up.is_set() and self._handshake is None and not self._closed

    @property
    def stats(self) -> SessionStats:
        """A copy of the counters, the link's included, safe to keep and compare."""
        return replace(self._stats, link=self.link.stats if self.link else None)

    async def open(self) -> Ident:
        """Open the transport, reset the link and shake hands; returns the device's IDENT.

        Raises IncompatibleProtocol (after closing) for another protocol major version, and
        RequestTimeout when the device does not answer within ``handshake_timeout``.
        """
        await self.transport.open(self)
        if self._closed:  # close() came while the transport was opening: it closed nothing
            self.transport.close()
            raise SessionClosed(f"{self.transport.url}: session closed while opening")
        self.link = Link(self.transport.write, self._payload, self._link_event, self.config.link, self.transport.url)
        self._last_heard = self._loop.time()
        self.link.start()
        limit = self.config.handshake_timeout * 2  # the link's RESET exchange, then HELLO/IDENT
        try:
            async with asyncio.timeout(limit):
                while True:  # a reset from the device while we say HELLO just means: again
                    await self._link_up.wait()
                    if self._closed:
                        raise SessionClosed(f"{self.transport.url}: session closed during the handshake")
                    try:
                        ident = await self._shake_hands()
                        break
                    except LinkReset:
                        continue
        except RequestTimeout:  # the device's own silence after HELLO: already says what and where
            await self.close()
            raise
        except TimeoutError:
            await self.close()
            raise RequestTimeout(f"{self.transport.url}: no handshake within {limit}s") from None
        except BaseException:
            await self.close()
            raise
        self._heartbeat = self._loop.create_task(self._beat(), name=f"heartbeat {self.transport.url}")
        return ident

    async def send(self, msg: Message) -> None:
        """Send ``msg`` and wait until the device acknowledged it (LinkError if the link gives up)."""
        if self._closed or self.link is None:
            raise SessionClosed(f"{self.transport.url}: session is closed")
        await self.link.send(encode(msg))

    async def request(self, msg: Message, expect: type[M], timeout: float = 1.0) -> M:
        """Send ``msg`` and return the next message of type ``expect``.

        Raises RequestTimeout, RequestRefused (the device answered Refused), or LinkError
        (the link failed or was reset before the answer came).
        """
        fut = self._loop.create_future()
        entry = (expect, msg.TYPE, fut)
        self._pending.append(entry)
        self._stats.requests += 1
        try:
            async with asyncio.timeout(timeout):
                await self.send(msg)
                return await fut
        except TimeoutError:
            self._stats.request_timeouts += 1
            raise RequestTimeout(
                f"{self.transport.url}: no {expect.__name__} within {timeout}s after {type(msg).__name__}"
            ) from None
        finally:
            self._pending.remove(entry)
            if not fut.cancel():  # done: failed while send() waited, whose own error reached the caller
                discard_outcome(fut)

    async def messages(self) -> AsyncIterator[Message]:
        """Every message the device sends from now on, until the session closes."""
        if self._closed:  # close() has already ended the iterators: nothing would end this one
            return
        queue: asyncio.Queue = asyncio.Queue()
        self._queues.add(queue)
        try:
            while (item := await queue.get()) is not _END:
                yield item
        finally:
            self._queues.discard(queue)

    async def close(self) -> None:
        """Stop heartbeats, close the link and the transport; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._link_up.clear()
        if self._retry is not None:
            self._retry.cancel()
        for task in (self._heartbeat, self._handshake):
            if task is not asyncio.current_task():
                await cancel_and_wait(task)
        self._fail_pending(SessionClosed(f"{self.transport.url}: session closed"))
        if self.link is not None:
            self.link.close()
        self.transport.close()
        for queue in self._queues:
            queue.put_nowait(_END)
        self._link_up.set()  # wakes an open() waiting for the link; it sees _closed and gives up

    # ---- TransportListener -----------------------------------------------------------

    def bytes_received(self, data: bytes) -> None:
        if self.link is not None:
            self.link.bytes_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._closed:
            return
        self._emit(SessionEventKind.DISCONNECTED, str(exc) if exc else "transport closed")
        self._closing = self._loop.create_task(self.close())

    # ---- handshake -------------------------------------------------------------------

    async def _shake_hands(self) -> Ident:
        hello = Hello(PROTOCOL_MAJOR, PROTOCOL_MINOR, self.config.host_name)
        ident = await self.request(hello, expect=Ident, timeout=self.config.handshake_timeout)
        if ident.protocol_major != PROTOCOL_MAJOR:
            detail = (
                f"{self.transport.url}: device {ident.model} {ident.serial} speaks protocol "
                f"{ident.protocol_major}.{ident.protocol_minor}, this host speaks {PROTOCOL_MAJOR}.{PROTOCOL_MINOR}"
            )
            self._emit(SessionEventKind.INCOMPATIBLE, detail, ident)
            raise IncompatibleProtocol(detail)
        self._stats.handshakes += 1
        self._outage = False
        self._emit(SessionEventKind.CONNECTED, f"{ident.model} {ident.serial} firmware {ident.firmware_version}", ident)
        return ident

    async def _rehandshake(self) -> None:
        """Say HELLO again after a link reset, until it works or the session closes."""
        try:
            while not self._closed:
                await self._link_up.wait()
                try:
                    await self._shake_hands()
                    return
                except (LinkError, RequestTimeout) as exc:
                    log.warning("rehandshake_retry", device=self.transport.url, error=str(exc))
                except RequestRefused as exc:  # not ready yet (booting): ask again, not at once
                    log.warning("rehandshake_retry", device=self.transport.url, error=str(exc))
                    await asyncio.sleep(self.config.retry_delay)
                except IncompatibleProtocol:
                    self._closing = self._loop.create_task(self.close())
                    return
                except SessionClosed:
                    return
        finally:
            if self._handshake is asyncio.current_task():
                self._handshake = None

    def _start_handshake(self) -> None:
        if self._handshake is None and self.ident is not None and not self._closed:
            self._handshake = self._loop.create_task(self._rehandshake(), name=f"handshake {self.transport.url}")

    def _note_ident(self, ident: Ident) -> None:
        previous, self.ident = self.ident, ident
        self._emit(SessionEventKind.IDENT, f"boot {ident.boot_id:#010x}", ident)
        if previous is not None and (changed := replacement(previous, ident)):
            self._emit(SessionEventKind.REPLACED, changed, ident)
        if previous is not None and previous.boot_id != ident.boot_id:
            self._stats.reboots += 1
            self._emit(SessionEventKind.REBOOTED, f"boot id {previous.boot_id:#010x} -> {ident.boot_id:#010x}", ident)

    # ---- link callbacks --------------------------------------------------------------

    def _link_event(self, event: LinkEvent, detail: str) -> None:
        if event in (LinkEvent.UP, LinkEvent.PEER_RESET):
            self._link_up.set()
            self._fail_pending(LinkReset(f"{self.transport.url}: link reset ({detail}) before the answer came"))
            self._start_handshake()
        elif event is LinkEvent.FAILED:
            self._link_up.clear()
            self._fail_pending(LinkReset(f"{self.transport.url}: link failed ({detail})"))
            if not self._outage:
                self._outage = True
                self._emit(SessionEventKind.LINK_FAILED, detail)
            if not self._closed:
                self._retry = self._loop.call_later(self.config.retry_delay, self._reset_link)
        else:
            self._link_up.clear()

    def _reset_link(self) -> None:
        self._retry = None
        if self.link is not None and self.link.state is LinkState.FAILED:
            self.link.reset("retry after failure")

    def _payload(self, payload: bytes) -> None:
        self._last_heard = self._loop.time()
        if self._stale:
            self._stale = False
            self._emit(SessionEventKind.FRESH, "device heard again")
        try:
            msg = decode(payload)
        except MessageDecodeError as exc:
            self._stats.bad_messages += 1
            self._emit(SessionEventKind.BAD_MESSAGE, str(exc))
            return
        self._stats.messages_received += 1
        answered = self._answer_pending(msg)
        if isinstance(msg, Ident):
            if answered or self.ident is None:
                self._note_ident(msg)
            elif msg.boot_id != self.ident.boot_id or replacement(self.ident, msg):
                self._note_ident(msg)  # a fresh IDENT mid-stream: the device rebooted, or another one answers
                self._start_handshake()
        if self._on_message is not None:
            try:
                self._on_message(msg)
            except Exception:
                log.exception("on_message_failed", device=self.transport.url, message=type(msg).__name__)
        for queue in self._queues:
            queue.put_nowait(msg)

    def _answer_pending(self, msg: Message) -> bool:
        for expect, request_type, fut in self._pending:
            if fut.done():
                continue
            if isinstance(msg, Refused) and msg.request_type == request_type:
                why = f"{self.transport.url}: device refused message 0x{request_type:02x}: {msg.reason}"
                fut.set_exception(RequestRefused(why))
                return True
            if isinstance(msg, expect):
                fut.set_result(msg)
                return True
        return False

    def _fail_pending(self, exc: Exception) -> None:
        for _, _, fut in self._pending:
            if not fut.done():
                fut.set_exception(exc)

    # ---- liveness --------------------------------------------------------------------

    async def _beat(self) -> None:
        start = last_stats = self._loop.time()
        while True:
            await asyncio.sleep(self.config.heartbeat_interval)
            if self._loop.time() - last_stats >= self.config.stats_interval and self.link is not None:
                last_stats = self._loop.time()
                log.info("link_stats", device=self.transport.url, **_flat(self.link.stats))
            if self.link is not None and self.link.state is LinkState.UP:
                uptime = int((self._loop.time() - start) * 1000) & 0xFFFFFFFF
                self.link.send(encode(Heartbeat(uptime))).add_done_callback(discard_outcome)
            silent = self._loop.time() - self._last_heard
            if silent > self.config.stale_after and not self._stale:
                self._stale = True
                self._emit(SessionEventKind.STALE, f"nothing heard for {silent:.1f}s")

    def _emit(self, kind: SessionEventKind, detail: str, ident: Ident | None = None) -> None:
        event = SessionEvent(kind, self.transport.url, detail, ident)
        log.info("session_event", device=self.transport.url, kind=kind.value, detail=detail)
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:
                log.exception("on_event_failed", device=self.transport.url, kind=kind.value)


def _flat(stats: LinkStats) -> dict:
    """Link and framing counters as one flat dict for a log line."""
    out = {name: getattr(stats, name) for name in LinkStats.__slots__ if name != "framing"}
    out.update({f"framing_{name}": getattr(stats.framing, name) for name in type(stats.framing).__slots__})
    return out
