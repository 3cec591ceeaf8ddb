"""One device connection: the one owner of a device's port, its session and its retries.

:class:`DeviceConnection` opens the port through :class:`drivers.reconnect.ReconnectingPort`,
makes a fresh :class:`~firmware_bridge.session.DeviceSession` every time it opens, and paces
every retry with one :class:`~drivers.reconnect.Backoff`; its identity tracker and status budget
outlive the sessions. :meth:`start`, :meth:`open`, :meth:`confirm` and numbered events:
docs/protocol.md §3.1 and §3.2."""
from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, AsyncIterator, Awaitable, Callable, Coroutine, TypeVar

import structlog

from core.callbacks import call_logged
from drivers.aio import cancel_and_wait
from drivers.errors import PortClosed
from drivers.reconnect import Backoff, PortEvent, PortEventKind, ReconnectingPort
from drivers.urls import DeviceURL
from firmware_bridge.delivery import DeliveryStats, EventDelivery
from firmware_bridge.errors import (
    DeviceNotTrusted,
    EventIndexError,
    LinkError,
    MessagesOverflow,
    RequestTimeout,
    SessionClosed,
)
from firmware_bridge.flooding import StatusBudget
from firmware_bridge.identity import IdentityTracker
from firmware_bridge.messages import DropReason, Event, EventsDropped, Ident, Message
from firmware_bridge.session import DeviceSession, Need, SessionConfig, SessionEvent, SessionEventKind, refusal_of

log = structlog.get_logger(__name__)
M = TypeVar("M", bound=Message)
#: handshakes due again soon after the last, in a row, that make a device FLAPPING: one after a
#: reboot and one more for a reboot at once after it are a device's own business, not a fault
FLAPPING_AFTER = 3



@dataclass(frozen=True, slots=True)
class ConnectionStats:
    messages_dropped: int = 0  # messages a messages() iterator could not take (its queue was full)
    overflows: int = 0  # messages() iterators ended by MessagesOverflow
    status_left_out: int = 0  # status messages past the device's budget, over all its sessions (StatusBudget)
    floods: int = 0  # FLOODING events


class _Subscriber:
    """One messages() iterator's bounded queue. Full: it takes nothing more and, once its consumer
    has read what it holds, ends with MessagesOverflow (a consumer cannot miss that it fell behind)."""

    def __init__(self, limit: int) -> None:
        self.items: deque[Message] = deque()
        self.limit = limit
        self.dropped = 0
        self.ended = False
        self.wake = asyncio.Event()

    def put(self, msg: Message) -> bool:
        """False when the message was dropped."""
        if self.dropped or len(self.items) >= self.limit:
            self.dropped += 1
            self.wake.set()
            return False
        self.items.append(msg)
        self.wake.set()
        return True

    def end(self) -> None:
        self.ended = True
        self.wake.set()


class DeviceConnection:
    """Keeps a handshaken session to ``url`` up until :meth:`close`.

    ``on_message`` gets every message of every session once (answers unwrapped); ``on_event``
    gets the sessions' events (connected, ident, rebooted, stale, event_gap, ...) and
    DISCONNECTED when the port goes. ``transport_options`` pass to the driver (e.g.
    ``backend=`` for a pyusb backend).

    Numbered events (a 1.1 device): ``on_indexed(index, msg)``, when given, gets each of them
    instead of ``on_message``. ``journaled_index()`` is called at every handshake and returns
    the highest index the application has journaled (0: none); the device sends everything
    after it again, and the connection drops what it has already delivered. Without it the
    application keeps no journal: the connection tells the device at every handshake that none of
    its events is journaled (ResumeEvents(0)) and never confirms one, so the device forgets nothing
    for it (a host that journals gets them all later), and gets everything the device keeps.
    """

    def __init__(self, url: str | DeviceURL, on_message: Callable[[Message], None] | None = None,
                 on_event: Callable[[SessionEvent], None] | None = None, config: SessionConfig | None = None, *,
                 journaled_index: Callable[[], int] | None = None,
                 on_indexed: Callable[[int, Message], None] | None = None,
                 backoff: Backoff = Backoff(), sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
                 **transport_options: Any) -> None:
        self.config = config or SessionConfig()
        self._on_message, self._on_event, self._on_indexed = on_message, on_event, on_indexed
        self._journaled_index = journaled_index
        self._delivery = EventDelivery()
        self._confirm_to = 0  # the highest index the application confirmed
        self._confirm_sent = 0  # ... and the highest told to the device
        self._confirm_due = False  # a confirmation is scheduled for the end of this loop turn
        self._unit: tuple[Any, ...] | None = None  # (role, model, serial) of the unit the event mark belongs to
        self._resumed_from: int | None = None  # what the last ResumeEvents said (None: none yet)
        self._confirm_in_flight: asyncio.Future | None = None  # the EventsJournaled the link has not delivered yet
        self._backoff, self._sleep = backoff, sleep
        self._port = ReconnectingPort(url, self, self._port_event, sleep=sleep, backoff=backoff, **transport_options)
        self.url = self._port.url
        self._identity = IdentityTracker()
        self._session: DeviceSession | None = None
        self._task: asyncio.Task[None] | None = None  # keeps the current session handshaken
        self._endings: set[asyncio.Task[None]] = set()  # sessions being closed after a loss
        self._up = asyncio.Event()
        self._first: asyncio.Future[Ident] | None = None  # open(): the first handshake, or what stopped it
        self._subscribers: set[_Subscriber] = set()
        self._stats = ConnectionStats()
        self._again_in_a_row = 0  # handshakes due again soon after the last, in a row (_again_soon)
        self._flapping = False  # FLAPPING reported, the device not up long enough since
        #: the device's budget of status messages, kept across its sessions as FLAPPING's count is
        self._status_budget = StatusBudget(self.url, self.config.status_budget, self.config.status_window_s,
                                           backoff.stable, self._flooding)
        #: protocol 2.0: why the device is refused now (None: it is not); see :meth:`retry_trust`
        self.refusal: DeviceNotTrusted | None = None
        self._trust_retry = asyncio.Event()
        self._closed = False

    # ---- public ----------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._up.is_set() and self._session is not None and self._session.connected

    @property
    def ident(self) -> Ident | None:
        """The device's latest IDENT (the last one known while it is away)."""
        return self._identity.ident

    @property
    def session(self) -> DeviceSession | None:
        """The session on the port open now (None while the device is away)."""
        return self._session

    @property
    def resumed_from(self) -> int | None:
        """The index the host told the device at the last handshake (ResumeEvents): the device
        resends what follows it. 0: the application had journaled none of this unit's events (or
        keeps no journal); None: no handshake with a 1.1 device yet."""
        return self._resumed_from

    @property
    def event_stats(self) -> DeliveryStats:
        """Numbered events delivered, resent ones dropped, gaps, confirmations (a copy)."""
        return self._delivery.stats

    def confirm(self, index: int) -> None:
        """Every event up to ``index`` is journaled: the device may forget them. Cheap: the
        confirmations of one loop turn go out as one EventsJournaled at its end, and while one
        is unacknowledged by the link the next waits for it, so a busy link carries one per round
        trip (none while the device is away: the next handshake says it). EventIndexError
        beyond what was delivered, and from a connection without ``journaled_index``: only an
        application that journals may let a device forget an event."""
        if self._journaled_index is None:
            raise EventIndexError(f"{self.url}: cannot confirm event {index}: this connection keeps no journal "
                                  f"(no journaled_index), and the device keeps its events for a host that does")
        if index > self._delivery.delivered_up_to:
            raise EventIndexError(f"{self.url}: cannot confirm event {index}: "
                                  f"only events up to {self._delivery.delivered_up_to} were delivered")
        if index <= self._confirm_to:
            return
        self._confirm_to = index
        if not self._confirm_due:
            self._confirm_due = True
            asyncio.get_running_loop().call_soon(self._send_confirm)

    async def start(self) -> None:
        """Start opening the device in the background; returns at once."""
        await self._port.start()

    async def open(self) -> Ident:
        """Open the port and shake hands now; returns the device's IDENT and stays up like
        :meth:`start`. When that fails the connection is closed and the failure raised: the
        driver's error (not found, permission ...), IncompatibleProtocol, RequestTimeout (no
        answer within ``handshake_timeout``, or no handshake within twice that), SessionClosed
        (:meth:`close` came first)."""
        first = self._first = asyncio.get_running_loop().create_future()
        limit = self.config.handshake_timeout * 2  # the link's RESET exchange, then HELLO/IDENT
        try:
            await self.start()
            async with asyncio.timeout(limit):
                return await first
        except TimeoutError as exc:
            await self.close()
            if isinstance(exc, RequestTimeout):  # the device's own silence after HELLO says what and where
                raise
            raise RequestTimeout(f"{self.url}: no handshake within {limit}s") from None
        except BaseException:
            await self.close()
            raise
        finally:
            self._first = None

    async def wait_connected(self, timeout: float | None = None) -> Ident:
        """Wait until a session is up; TimeoutError after ``timeout`` seconds, PortClosed once closed."""
        async with asyncio.timeout(timeout):
            while not (self._up.is_set() and self._session is not None):
                if self._closed:
                    raise PortClosed(self.url, "closed: no session will come up")
                await self._up.wait()
        assert self._session is not None and self._session.ident is not None
        return self._session.ident

    async def send(self, msg: Message) -> None:
        """Send ``msg`` and wait for the device's acknowledgement; PortClosed while it is away."""
        session = self._current()
        try:
            await session.send(msg)
        except SessionClosed as exc:
            raise PortClosed(self.url, f"device went away before {type(msg).__name__} was acknowledged") from exc

    async def request(self, msg: Message, expect: type[M], timeout: float = 1.0) -> M:
        """:meth:`DeviceSession.request` on the current session; PortClosed while the device is away."""
        session = self._current()
        try:
            return await session.request(msg, expect, timeout)
        except SessionClosed as exc:
            raise PortClosed(self.url, f"device went away before it answered {type(msg).__name__}") from exc

    async def send_expecting(self, msg: Message, expect: type[M] | tuple[type[M], ...], timeout: float = 1.0) -> M:
        """Send ``msg`` and return the next ``expect`` (a type, or any of several) the device
        reports, whatever way it comes.

        For a command whose effect is an event (ClearFault -> FaultCleared): a 1.1 device reports
        it as a numbered event, never as the command's answer, so :meth:`request` would wait in vain.
        The device's Refused of ``msg`` ends the wait as RequestRefused with the device's reason,
        as it does a request's. Raises RequestTimeout after ``timeout`` seconds, PortClosed while
        the device is away.
        """
        sub = _Subscriber(self.config.messages_limit)
        self._subscribers.add(sub)  # before sending: the event cannot slip past
        try:
            await self.send(msg)
            async with asyncio.timeout(timeout):
                while True:
                    while sub.items:
                        item = sub.items.popleft()
                        if isinstance(item, expect):
                            return item
                        refusal = refusal_of(self.url, msg.TYPE, item)
                        if refusal is not None:
                            raise refusal
                    sub.wake.clear()
                    await sub.wake.wait()
        except TimeoutError:
            expected = " or ".join(t.__name__ for t in (expect if isinstance(expect, tuple) else (expect,)))
            raise RequestTimeout(f"{self.url}: no {expected} within {timeout}s after {type(msg).__name__}") from None
        finally:
            self._subscribers.discard(sub)

    async def messages(self) -> AsyncIterator[Message]:
        """Every message the device sends from now on, across unplugs, until :meth:`close`.

        At most ``config.messages_limit`` wait for a slow consumer; beyond that the iterator takes no
        more and, after yielding the ones it holds, raises :class:`MessagesOverflow` saying how many
        were dropped (counted in :attr:`stats`). A consumer that wants to go on asks for a new one.
        """
        if self._closed:  # close() has already ended the iterators: nothing would end this one
            return
        sub = _Subscriber(self.config.messages_limit)
        self._subscribers.add(sub)
        try:
            while True:
                while sub.items:
                    yield sub.items.popleft()
                if sub.dropped:
                    raise MessagesOverflow(f"{self.url}: a messages() consumer fell {sub.limit} messages behind; "
                                           f"{sub.dropped} dropped and the iterator ended")
                if sub.ended:
                    return
                sub.wake.clear()
                await sub.wake.wait()
        finally:
            self._subscribers.discard(sub)

    @property
    def stats(self) -> ConnectionStats:
        budget = self._status_budget
        return replace(self._stats, status_left_out=budget.left_out, floods=budget.floods)

    async def close(self) -> None:
        """Stop reopening, close the session and the port; idempotent. No event follows."""
        if self._closed:
            return
        if self._first is not None and not self._first.done():
            self._first.set_exception(SessionClosed(f"{self.url}: closed while opening"))
        self._closed = True
        self._status_budget.close()
        await self._port.close()  # its transport's connection_lost comes with no event
        await asyncio.gather(self._detach("closed"), *self._endings)
        for sub in self._subscribers:
            sub.end()
        self._up.set()  # wakes wait_connected(): it sees _closed

    # ---- the port: ReconnectingPort's listener and events ----------------------------------

    def bytes_received(self, data: bytes) -> None:
        if self._session is not None:
            self._session.bytes_received(data)

    def _port_event(self, event: PortEvent) -> None:
        if self._closed:
            return
        if event.kind is PortEventKind.CONNECTED:
            self._begin()
        elif event.kind is PortEventKind.DISCONNECTED:
            self._emit(SessionEvent(SessionEventKind.DISCONNECTED, self.url, event.reason or "port closed"))
            ending = asyncio.get_running_loop().create_task(self._detach("the port went away"),
                                                            name=f"end session {self.url}")
            self._endings.add(ending)
            ending.add_done_callback(self._endings.discard)
        elif event.error is not None and self._first is not None and not self._first.done():
            self._first.set_exception(event.error)  # open(): the port could not be opened

    # ---- sessions ---------------------------------------------------------------------

    def _begin(self) -> None:
        """A fresh session on the port just opened, kept handshaken by a task."""
        session = DeviceSession(self._port.write, self.url, on_message=self._message, on_event=self._emit,
                                identity=self._identity, config=self.config, on_numbered=self._indexed,
                                status_budget=self._status_budget)
        self._session = session
        session.start()
        self._task = asyncio.get_running_loop().create_task(self._keep_up(session), name=f"session {self.url}")

    async def _keep_up(self, session: DeviceSession) -> None:
        """Do what ``session`` needs, until it closes: a handshake when the link comes up or is
        reset, a link reset when it failed; failures back off (the one Backoff). A session that
        needs a handshake again less than ``Backoff.stable`` after the last one counts it as a
        failure, as the port counts one that dropped that soon: a device that re-identifies (a new
        boot id, another unit) or resets its link right after every handshake is shaken hands with
        ever more slowly, and is reported FLAPPING (:meth:`_again_soon`)."""
        failures = 0
        up_at: float | None = None  # when this session's last handshake ended (None: not since)
        loop = asyncio.get_running_loop()
        try:
            while True:
                need = await session.wait_need()
                if need is Need.REFUSED:
                    await self._refused(session)
                    continue
                if up_at is not None:
                    lasted = loop.time() - up_at >= self._backoff.stable
                    up_at = None
                    if lasted:
                        failures, self._again_in_a_row, self._flapping = 0, 0, False  # the schedule starts over
                    elif need is Need.HANDSHAKE:
                        failures += 1
                        delay = self._backoff.delay(failures)
                        self._again_soon(session, delay)
                        await self._sleep(delay)
                if need is Need.LINK_RESET:
                    failures += 1
                    await self._sleep(self._backoff.delay(failures))
                    session.reset_link()
                    continue
                try:
                    ident = await session.shake_hands(self._resume_point)
                except LinkError:  # reset or failed meanwhile: wait_need() says what is due
                    continue
                except DeviceNotTrusted:  # the session refused it: wait_need() says REFUSED
                    continue
                except Exception as exc:  # no answer, refused (booting), another protocol major
                    if self._first is not None and not self._first.done():
                        self._first.set_exception(exc)
                        return
                    failures += 1
                    delay = self._backoff.delay(failures)
                    log.warning("handshake_retry", device=self.url, attempt=failures, delay=delay, error=str(exc))
                    await self._sleep(delay)
                    continue
                up_at = loop.time()  # failures start over only once it has stayed up (above)
                self._up.set()
                if self._first is not None and not self._first.done():
                    self._first.set_result(ident)
        except SessionClosed:
            return

    async def _refused(self, session: DeviceSession) -> None:
        """The device is not trusted: open() fails with the refusal; the connection does nothing
        more with it (no handshake, no request) until :meth:`retry_trust`."""
        refusal = session.refusal
        assert refusal is not None
        self._up.clear()
        self.refusal = refusal
        if self._first is not None and not self._first.done():
            self._first.set_exception(refusal)
        self._trust_retry.clear()
        await self._trust_retry.wait()
        self.refusal = None
        session.retry_trust()

    def retry_trust(self) -> None:
        """A technician acted on a refused device (enrolled it, or cleared the refusal): shake
        hands with it again. Nothing when it is not refused."""
        self._trust_retry.set()

    def _again_soon(self, session: DeviceSession, delay: float) -> None:
        """A handshake due again less than ``Backoff.stable`` after the last: logged with its delay,
        and the :data:`FLAPPING_AFTER`-th in a row is one FLAPPING event, the one until the device
        stays up that long (a new port's session included: an unplug does not end it)."""
        self._again_in_a_row += 1
        log.warning("handshake_again_soon", device=self.url, in_a_row=self._again_in_a_row, delay=delay,
                    cause=session.handshake_cause)
        if self._again_in_a_row >= FLAPPING_AFTER and not self._flapping:
            self._flapping = True
            stable = self._backoff.stable
            self._emit(SessionEvent(SessionEventKind.FLAPPING, self.url,
                                    f"re-identified or reset its link {self._again_in_a_row} times in a row, each "
                                    f"less than {stable:g} s after the handshake before (the last: "
                                    f"{session.handshake_cause}): each handshake waits longer, up to "
                                    f"{self._backoff.cap:g} s, until it stays up {stable:g} s; a technician "
                                    "looks at the device", session.ident))

    def _flooding(self, detail: str) -> None:
        """The device sent more status than its budget (:class:`StatusBudget`): one FLOODING event,
        the one until it has stayed within budget ``Backoff.stable``."""
        if not self._closed:
            self._emit(SessionEvent(SessionEventKind.FLOODING, self.url, detail, self.ident))

    def _detach(self, why: str) -> Coroutine[Any, Any, None]:
        """Forget the current session at once (so a new port never meets it); the returned
        coroutine stops its task and closes it."""
        self._up.clear()
        task, self._task = self._task, None
        session, self._session = self._session, None
        return self._finish(task, session, why)

    @staticmethod
    async def _finish(task: asyncio.Task[None] | None, session: DeviceSession | None, why: str) -> None:
        await cancel_and_wait(task)
        if session is not None:
            await session.close(why)

    def _current(self) -> DeviceSession:
        if self._session is None or not self._up.is_set():
            state = ("closed" if self._closed else f"not trusted ({self.refusal})" if self.refusal is not None
                     else "not connected (reconnecting)")
            raise PortClosed(self.url, f"device is {state}")
        return self._session

    def _resume_point(self) -> int:
        """At a handshake with a 1.1 device: the index after which it sends its events again."""
        ident = self._identity.ident  # the IDENT of this handshake: journaled_index() may look at it
        unit = None if ident is None else (ident.role, ident.model, ident.serial)
        replaced = unit != self._unit and self._unit is not None  # what this host has is the last unit's
        self._unit = unit
        if replaced:
            self._confirm_to = self._confirm_sent = 0
        # no journal: none of its events is journaled, so the device forgets nothing for this host
        # (never NO_JOURNAL, which lets it drop what it kept) and resends all it keeps, each
        # delivered once (what this connection delivered already is dropped as a resend)
        journaled = 0 if self._journaled_index is None else self._journaled_index()
        if replaced:
            self._delivery.restart(journaled)
        else:
            self._delivery.resume(journaled)
        self._confirm_sent = max(self._confirm_sent, journaled)
        self._resumed_from = journaled
        log.info("events_resume", device=self.url, journaled=journaled, delivered=self._delivery.last)
        return journaled

    def _send_confirm(self) -> None:
        self._confirm_due = False
        session = self._session
        if self._confirm_in_flight is not None and not self._confirm_in_flight.done():
            return  # its callback sends the newest index
        if self._confirm_to > self._confirm_sent and session is not None and session.speaks_1_1:
            self._confirm_in_flight = sent = session.confirm_events(self._confirm_to)
            if sent is not None:
                self._confirm_sent = self._confirm_to
                self._delivery.count(confirms_sent=1)
                sent.add_done_callback(lambda _: self._send_confirm())

    def _message(self, msg: Message) -> None:
        if isinstance(msg, Event):
            self._indexed(msg)
            return
        if isinstance(msg, EventsDropped):
            lost = self._delivery.dropped(msg.first_index, msg.count)
            if lost and self._lost_to_journal(msg.reason):
                self._emit(SessionEvent(SessionEventKind.EVENTS_DROPPED, self.url,
                                        f"events {lost[0]}..{lost[-1]} ({len(lost)}) are lost: {msg.reason.name.lower()}"))
            elif lost:
                log.info("events_confirmed_elsewhere", device=self.url, first=lost[0], last=lost[-1],
                         resumed_from=self._resumed_from)
        self._deliver(msg)

    def _lost_to_journal(self, reason: DropReason) -> bool:
        """Whether events the device no longer has are missing from what this application should
        have. OVERFLOW: always, nobody confirmed them. CONFIRMED: some host said it journaled them,
        but the application's journal has not got them (it resumed before them): lost to it when
        it keeps one, whoever let them go (another table's host, a tool that told the device
        NO_JOURNAL, a journal that lost records). An application without a journal loses nothing:
        a host that journals has them."""
        if reason is DropReason.OVERFLOW:
            return True
        return self._journaled_index is not None

    def _indexed(self, event: Event) -> None:
        deliver, skipped = self._delivery.accept(event.index)
        if skipped:
            self._emit(SessionEvent(SessionEventKind.EVENT_GAP, self.url,
                                    f"events {skipped[0]}..{skipped[-1]} ({len(skipped)}) never came; "
                                    f"next came {event.index}"))
        if not deliver:
            return
        on_indexed = self._on_indexed
        if on_indexed is not None:
            # call_logged's contract written out: every card read comes here, and its keyword
            # context (built before the call) cost as much as the rest of this method
            try:
                on_indexed(event.index, event.message)
            except Exception:  # noqa: BLE001 - the owner's bug, reported where it happened
                log.exception("on_indexed_failed", device=self.url, message=type(event.message).__name__)
            if self._subscribers:
                self._to_subscribers(event.message)
        else:
            self._deliver(event.message)

    def _deliver(self, msg: Message) -> None:
        if self._on_message is not None:
            call_logged(log, "on_message_failed", self._on_message, msg, device=self.url, message=type(msg).__name__)
        self._to_subscribers(msg)

    def _to_subscribers(self, msg: Message) -> None:
        """Every ``messages()`` iterator gets ``msg``; one that fell too far behind takes no more."""
        for sub in self._subscribers:
            if not sub.put(msg):
                first = sub.dropped == 1
                self._stats = replace(self._stats, messages_dropped=self._stats.messages_dropped + 1,
                                      overflows=self._stats.overflows + first)
                if first:
                    log.warning("messages_overflow", device=self.url, limit=sub.limit)

    def _emit(self, event: SessionEvent) -> None:
        if self._on_event is not None:  # the owner's bug must not stop the supervision
            call_logged(log, "on_event_failed", self._on_event, event, device=self.url, kind=event.kind.value)
