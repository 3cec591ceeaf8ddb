"""Where a simulated device meets a real transport: its own thread, asyncio loop, Link and wire.

An :class:`Endpoint` runs one device behind the host's own Link and a ``FaultyWire``; subclasses
(:class:`PtyEndpoint`, :class:`UsbEndpoint`) move the raw bytes. Its link start, numbered events
and threads: docs/simulators.md, "How an endpoint runs a device"."""
from __future__ import annotations

import abc
import asyncio
import enum
import threading
from collections import deque
from dataclasses import replace
from typing import Any, Callable, Generic, Self, TypeVar

import structlog

from firmware_bridge.errors import ProtocolError
from firmware_bridge.framing import cobs_encode
from firmware_bridge.handshake2 import HELLO2_TYPE
from firmware_bridge.link import Link, LinkConfig, LinkEvent, LinkState, discard_outcome
from firmware_bridge.messages import (
    EVENT_MESSAGES,
    PROTOCOL_MAJOR,
    PROTOCOL_MINOR,
    Answer,
    ClearFault,
    DropReason,
    Event,
    EventsJournaled,
    Heartbeat,
    Hello,
    Message,
    MessageDecodeError,
    Refused,
    Request,
    ResumeEvents,
    Status,
    decode,
    encode,
)

from simulators.device import SimulatedDevice
from simulators.firmware_rx import FIRMWARE_MESSAGES
from simulators.protocol2 import HANDSHAKE_TYPES, DeviceSide, Protocol2, SimulatedFraming2
from simulators.wire import FaultyWire

log = structlog.get_logger(__name__)
T = TypeVar("T")
D = TypeVar("D", bound=SimulatedDevice)

START_TIMEOUT = 5.0
#: the RESET nonce of a device with the same_nonce fault, at every boot
SAME_NONCE = b"\x00\x00\x00\x01"
#: events sent and not yet acknowledged by the link at most (its send queue is bounded)
EVENT_WINDOW = 256


class Streaming(enum.Enum):
    """Where the device's events go on the link as it is now."""

    HELD = "held"  # no handshake on this link yet (or a 1.1 host has not said ResumeEvents)
    NUMBERED = "numbered"  # to a 1.1 host, as Event(index, message)
    PLAIN = "plain"  # to a 1.0 host, as the bare message (kept only until sent)


# the enum members the card path compares with, looked up once: on Python 3.11 a member read
# from its class goes through EnumType.__getattr__ (about 70 ns)
_NUMBERED = Streaming.NUMBERED
_LINK_UP = LinkState.UP


def _is_status(msg: Message) -> bool:
    """A Status, bare or as a request's answer."""
    return isinstance(msg, Status) or (isinstance(msg, Answer) and isinstance(msg.message, Status))


#: what a device takes only from the host it was enrolled with, once it speaks protocol 2.0
_ENROLLED_HOST_ONLY = (*FIRMWARE_MESSAGES, ClearFault)


class Endpoint(abc.ABC, Generic[D]):
    def __init__(self, device: D, *, link_config: LinkConfig | None = None,
                 protocol2: Protocol2 | None = None) -> None:
        """``protocol2``: speak protocol 2.0 (docs/simulators.md, "Protocol 2.0"); else 1.1."""
        self.device = device
        self.link_config = link_config or LinkConfig()
        self.protocol2 = None if protocol2 is None else DeviceSide(device, protocol2)
        self.framing: SimulatedFraming2 | None = None
        self._previous_capture: list[bytes] = []  # the tagged frames of the session before (replayed_capture)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.link: Link | None = None
        self.wire: FaultyWire | None = None
        self._thread: threading.Thread | None = None
        self._unacked: deque[asyncio.Future] = deque()
        self._stopped: asyncio.Event | None = None
        self.streaming = Streaming.HELD
        self._next_event = 0  # the index of the next event to send on this link
        #: event sends on this link not yet seen acknowledged, in order (see _events_acked)
        self._in_flight: deque[asyncio.Future] = deque()
        #: Status messages (bare or answers) held back until every event numbered before them is sent:
        #: (the last such event, the message). A shoe's cards_held counts out the cards it read, so the
        #: host must have their reads first (docs/protocol.md §3.2)
        self._status_waits: list[tuple[int, Message]] = []
        self._progress = asyncio.Event()  # anything _flush() looks at changed
        self.link_events: list[tuple[str, str]] = []

    @property
    @abc.abstractmethod
    def url(self) -> str:
        """The URL the host opens to reach this device."""

    # ---- life (any thread) ---------------------------------------------------------

    def start(self) -> Self:
        """Start the device's thread and loop; returns once the transport is ready."""
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(ready, failure), daemon=True,
                                        name=f"sim-{self.device.ROLE.name.lower()}-{self.device.serial}")
        self._thread.start()
        if not ready.wait(START_TIMEOUT) or failure:
            self.stop()
            raise RuntimeError(f"simulator {self.device.serial} did not start: {failure[0] if failure else 'timeout'}")
        return self

    def stop(self) -> None:
        """Stop the device, close the transport and join the thread; idempotent."""
        if self.loop is not None and self._stopped is not None and not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(self._stopped.set)
            except RuntimeError:
                pass  # the loop already ended
        if self._thread is not None:
            self._thread.join(START_TIMEOUT)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def call(self, fn: Callable[..., T], *args: Any, timeout: float = START_TIMEOUT) -> T:
        """Run ``fn(*args)`` on the device's loop (awaiting it if it is a coroutine function)."""
        assert self.loop is not None, "endpoint not started"

        async def run() -> Any:
            result = fn(*args)
            return await result if asyncio.iscoroutine(result) else result

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    # ---- for tests, the bench and the CLI ------------------------------------------

    def state(self) -> dict[str, Any]:
        """Device state plus link and wire counters."""
        def collect() -> dict[str, Any]:
            link = self.link
            return self.device.state() | {
                "link_state": link.state.value if link else None,
                "link_stats": link.stats if link else None,
                "wire": replace(self.wire.stats) if self.wire else None,  # a copy, like link.stats
                "link_events": list(self.link_events),
            }
        return self.call(collect)

    def reset(self) -> None:
        """Device back to factory defaults (faults, counters, cards, firmware), then running."""
        def reset_and_start() -> None:
            self.device.reset()
            self.device.start()
        self.call(reset_and_start)

    def set_faults(self, **changes: Any) -> None:
        self.call(lambda: self.device.set_faults(**changes))

    # ---- the thread ----------------------------------------------------------------

    def _run(self, ready: threading.Event, failure: list[BaseException]) -> None:
        try:
            asyncio.run(self._main(ready))
        except BaseException as exc:  # reported to start(), never a silent dead thread
            failure.append(exc)
            log.exception("sim_endpoint_crashed", device=self.device.serial)
            ready.set()

    async def _main(self, ready: threading.Event) -> None:
        self.loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        self._progress = asyncio.Event()  # of this loop (a restarted endpoint runs another)
        self.wire = FaultyWire(lambda: self.device.faults, self._write_raw, self.loop)
        self._open_raw()
        self._new_link()
        self.device.attach(self._emit, flush=self._flush, on_reboot=self._rebooted, disconnect=self._disconnect)
        self.device.start()
        ready.set()
        try:
            await self._stopped.wait()
        finally:
            self.device.close()
            if self.link is not None:
                self.link.close()
            self.wire.close()
            self._close_raw()

    def _new_link(self) -> None:
        if self.link is not None:
            self.link.close()
        self._unacked.clear()
        assert self.wire is not None, "the wire is made before the first link"
        link: Link | None = None

        def payload(data: bytes) -> None:  # this link's own: a link the device left hands it nothing
            if link is self.link:
                self._payload(data)

        self._end_session()
        self.framing = None if self.protocol2 is None else SimulatedFraming2(lambda: self.device.faults)
        self.link = link = Link(self.wire.to_host, payload, self._link_event, self.link_config,
                                name=f"sim-{self.device.serial}", framing=self.framing)
        self._hold_events()

    def _end_session(self) -> None:
        """A 2.0 session ends with its link (a reset, a new link): keys and proof forgotten."""
        if self.protocol2 is None:
            return
        self.protocol2.forget()
        if self.framing is not None:
            if self.framing.capture:
                self._previous_capture = self.framing.capture
            self.framing.capture = []
            self.framing.clear()

    def _link_event(self, event: LinkEvent, detail: str) -> None:
        self.link_events.append((event.value, detail))
        if event in (LinkEvent.UP, LinkEvent.PEER_RESET):
            self._end_session()
        if event in (LinkEvent.UP, LinkEvent.PEER_RESET, LinkEvent.FAILED):
            self._hold_events()  # what was in flight is sent again once a host resumes
        else:  # closed: what was in flight failed
            self._settle_failed(self._in_flight)

    def _hold_events(self) -> None:
        self.streaming = Streaming.HELD
        self._status_waits.clear()  # said on a link that is gone: the host asks again after its handshake
        self._settle_failed(self._in_flight)
        self._in_flight = deque()  # the old link's sends failed (a reset or close fails them all at once)
        self._progress.set()

    # ---- device side ---------------------------------------------------------------

    def _payload(self, payload: bytes) -> None:
        self._progress.set()
        if self.protocol2 is not None and (payload[:1] and payload[0] in HANDSHAKE_TYPES or self.protocol2.proven is None):
            self._handshake2(payload)
            return
        try:
            msg = decode(payload)
        except MessageDecodeError as exc:
            log.warning("sim_bad_message", device=self.device.serial, error=str(exc))
            self._emit(Refused(payload[0] if payload else 0, str(exc)[:255]))
            return
        if isinstance(msg, Request) and self.device.speaks_1_1:
            for reply in self._handle(msg.message):
                self._emit(Answer(msg.request_id, reply))
            return
        for reply in self._handle(msg):
            self._emit(reply)

    def _handshake2(self, payload: bytes) -> None:
        """A protocol 2.0 device's payloads until the host is proven: HELLO2 and PROOF2 (anything
        else is Refused: nothing is taken from a host that has not proven who it is)."""
        side, link, framing = self.protocol2, self.link, self.framing
        assert side is not None and link is not None and framing is not None
        kind = payload[0] if payload else 0
        if kind == HELLO2_TYPE:
            try:
                ident = side.on_hello(payload)
            except ProtocolError as exc:
                self._emit(Refused(kind, str(exc)[:255]))
                return
            link.send(ident).add_done_callback(discard_outcome)
            keys = side.pending_keys
            assert keys is not None, "on_hello derived them"
            framing.install(keys, tag_once_peer_does=True)
            return
        if kind not in HANDSHAKE_TYPES:
            self._emit(Refused(kind, "protocol 2.0: no session yet, HELLO2 first"))
            return
        if side.on_proof(payload) is None:  # a rogue host: its session ends here
            link.reset("host proof refused")
            return
        self.device.handle(Hello(PROTOCOL_MAJOR, PROTOCOL_MINOR, "2.0 host"))  # the device's own Hello logic
        self._stream(Streaming.HELD)  # a 1.1 host says ResumeEvents next
        if self.device.faults.replayed_capture and self._previous_capture and self.wire is not None:
            self.wire.to_host(b"".join(b"\x00" + cobs_encode(raw) + b"\x00" for raw in self._previous_capture))

    def _handle(self, msg: Message) -> list[Message]:
        """The replies to one host message; the event delivery messages of 1.1 are the
        endpoint's (a 1.0 device refuses them in ``handle``, as it does not know them)."""
        if self.protocol2 is not None and isinstance(msg, _ENROLLED_HOST_ONLY) and not self.protocol2.host_enrolled:
            return [Refused(msg.TYPE, "host not enrolled with this device")]
        store = self.device.events
        if isinstance(msg, EventsJournaled) and self.device.speaks_1_1:
            store.confirm(msg.up_to_index)
            return []
        if isinstance(msg, ResumeEvents) and self.device.speaks_1_1:
            gone = store.resume(msg.journaled_index)
            if self.device.faults.silent_overflow:
                gone = [report for report in gone if report.reason is not DropReason.OVERFLOW]
            for report in gone:
                log.warning("sim_events_gone", device=self.device.serial, first=report.first_index,
                            count=report.count, reason=report.reason.name)
                self._send(report)
            self._stream(Streaming.NUMBERED)
            return self.device.after_handshake()  # after the events resent: the state now has the last word
        replies = self.device.handle(msg)
        if isinstance(msg, Hello) and self.device.speaks_1_1:
            for reply in replies:
                self._send(reply)  # the IDENT goes before any event
            replies = []
            # a 1.1 host says ResumeEvents next; a 1.0 host gets bare events, as a 1.0 device sends them
            self._stream(Streaming.HELD if msg.protocol_minor >= 1 else Streaming.PLAIN)
            if msg.protocol_minor < 1:
                replies = self.device.after_handshake()
        elif isinstance(msg, Hello):
            replies += self.device.after_handshake()
        return replies

    def _emit(self, msg: Message) -> None:
        if type(msg) in EVENT_MESSAGES:
            if not self.device.speaks_1_1:  # a 1.0 device numbers and keeps nothing: its cards moved all the same
                self.device.on_change()
                return self._send_plain(msg)
            index = self.device.events.add(msg)
            self.device.on_change()  # kept before it is sent, as firmware writes its memory first
            link = self.link
            if (index == self._next_event and self.streaming is _NUMBERED and link is not None
                    and link.state is _LINK_UP and len(self._in_flight) < EVENT_WINDOW and not self._status_waits):
                # the card path: streaming, nothing waits before this event and the window has
                # room, so _pump would send this event alone; sent here without its lookups
                self._next_event = index + 1
                self._send_event(Event(index, msg))
            else:
                self._pump()
            return
        if self.streaming is _NUMBERED and self._next_event <= self.device.events.last_index and _is_status(msg):
            self._status_waits.append((self.device.events.last_index, msg))  # after the events before it
            return
        self._send_plain(msg)

    def _send_plain(self, msg: Message) -> None:
        """A message that is not a numbered event, onto the link if there is one."""
        link = self.link
        if link is None or (isinstance(msg, Heartbeat) and link.state is not LinkState.UP):
            return  # no proof of life into a link nobody listens on
        self._send(msg)

    def _send(self, msg: Message) -> asyncio.Future:
        """Send ``msg`` (not an event: see _send_event); the backlog _flush() waits on counts it
        until the link acknowledged it or gave up on it."""
        assert self.link is not None
        future = self.link.send(encode(msg))
        future.add_done_callback(self._sent)
        self._unacked.append(future)
        while self._unacked and self._unacked[0].done():
            self._unacked.popleft()
        return future

    def _send_event(self, msg: Message) -> None:
        """Send an event (or a 1.0 host's bare event) on the link as it is now. Its send has no
        done callback (each would cost a loop handle a card): the link acknowledges sends in
        order, so _events_acked finds them done at the front of _in_flight after each chunk
        of the host's bytes; a reset or close fails them all at once, and a link event says so."""
        assert self.link is not None
        future = self.link.send(encode(msg))
        if future.done():  # refused at once (the link's queue full): this link's stream goes on past it
            discard_outcome(future)
            self._progress.set()
            return
        self._in_flight.append(future)

    def _sent(self, future: asyncio.Future) -> None:
        """Any message acknowledged by the link (or its send failed): the backlog _flush() waits on
        is smaller, whether or not it was an event (a host may send nothing for a long while)."""
        # a status message lost to a reset is current again when next sent; events are resent by _pump
        discard_outcome(future)
        self._progress.set()

    # ---- events (protocol 1.1) -------------------------------------------------------

    def _stream(self, how: Streaming) -> None:
        self.streaming = how
        self._next_event = self.device.events.first_index
        self._progress.set()
        self._pump()

    def _pump(self) -> None:
        """Send kept events in order, at most EVENT_WINDOW unacknowledged at a time."""
        link, store = self.link, self.device.events
        if link is None or link.state is not LinkState.UP or self.streaming is Streaming.HELD:
            return
        self._next_event = max(self._next_event, store.first_index)  # an overflow pushed some out: the host sees a gap
        in_flight = self._in_flight
        while self._next_event <= store.last_index and len(in_flight) < EVENT_WINDOW:
            index = self._next_event
            if self._status_waits:
                self._send_statuses()  # what one says was so before this event: it goes first
            self._next_event += 1
            if self.streaming is Streaming.NUMBERED:
                self._send_event(Event(index, store.get(index)))
            else:  # a 1.0 host confirms nothing: what it got is all it gets
                self._send_event(store.get(index))
                store.confirm(index)
        if self._status_waits:
            self._send_statuses()

    def _send_statuses(self) -> None:
        """The Status messages held back whose events have all been sent now."""
        while self._status_waits and self._status_waits[0][0] < self._next_event:
            self._send_plain(self._status_waits.pop(0)[1])

    def _events_acked(self) -> None:
        """After the link took in the host's bytes: the event sends it acknowledged leave the
        window (acknowledged in order: a prefix of _in_flight), and the window sends more."""
        in_flight = self._in_flight
        if not in_flight or not in_flight[0].done():
            return
        while in_flight and in_flight[0].done():
            done = in_flight.popleft()
            if not done.cancelled():  # discard_outcome inline: once a card
                done.exception()
        self._progress.set()
        self._pump()

    @staticmethod
    def _settle_failed(futures: deque[asyncio.Future]) -> None:
        """Retrieve the failures of the sends a reset or close ended (asyncio logs one never
        retrieved); the rest stay where they are."""
        for future in futures:
            if future.done():
                discard_outcome(future)

    def _backlog(self) -> int:
        """Messages sent and unacknowledged plus events not yet sent on this link."""
        while self._unacked and self._unacked[0].done():
            self._unacked.popleft()
        # counted in C (a generator's frame a future cost more than the count, every YIELD_EVERY cards)
        unacked = (len(self._unacked) - sum(map(asyncio.Future.done, self._unacked))
                   + len(self._in_flight) - sum(map(asyncio.Future.done, self._in_flight)))
        store = self.device.events
        if self.streaming is Streaming.HELD:
            return unacked + len(store)  # what a resuming host will be sent again
        return unacked + max(0, store.last_index - max(self._next_event, store.first_index) + 1)

    async def _flush(self, limit: int = 0) -> None:
        """Wait until at most ``limit`` emitted messages are unacknowledged or not yet sent
        (0: all delivered)."""
        while self._backlog() > limit:
            self._progress.clear()
            await self._progress.wait()

    def _rebooted(self) -> None:
        self._new_link()
        assert self.link is not None
        nonce = SAME_NONCE if self.device.faults.same_nonce else None
        self.link.reset("device reboot", nonce=nonce)

    async def _disconnect(self, seconds: float) -> None:
        log.info("sim_disconnect", device=self.device.serial, seconds=seconds)
        self._unplug()
        self._new_link()
        await asyncio.sleep(seconds)
        self._replug()

    def _from_host(self, data: bytes) -> None:
        assert self.wire is not None
        damaged = self.wire.from_host(data)
        if damaged and self.link is not None:
            self.link.bytes_received(damaged)
            self._events_acked()

    # ---- the transport (subclasses) ------------------------------------------------

    @abc.abstractmethod
    def _open_raw(self) -> None: ...

    @abc.abstractmethod
    def _close_raw(self) -> None: ...

    @abc.abstractmethod
    def _write_raw(self, data: bytes) -> None: ...

    @abc.abstractmethod
    def _unplug(self) -> None: ...

    @abc.abstractmethod
    def _replug(self) -> None: ...
