"""The protocol over one open port: link + HELLO/IDENT handshake + typed messages + liveness.

A :class:`DeviceSession` owns no port: it is given a ``write`` and fed what the port reads, by
its :class:`~firmware_bridge.connection.DeviceConnection`, which makes one every time the port
opens and does the retries the session asks for (:meth:`wait_need`). The handshake, requests,
heartbeats, the Status asked after a handshake and the status budget: docs/protocol.md §3, §3.2."""
from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field, replace
from typing import Any, Callable, TypeVar

import structlog

from drivers.aio import RateLimitedLog, cancel_and_wait
from drivers.reconnect import Backoff
from firmware_bridge.errors import (
    DeviceNotTrusted,
    HandshakeError,
    IncompatibleProtocol,
    LinkReset,
    ProtocolError,
    RequestRefused,
    RequestTimeout,
    SessionClosed,
)
from firmware_bridge.flooding import StatusBudget
from firmware_bridge.framing2 import Decoder2Stats, Framing2
from firmware_bridge.handshake2 import IDENT2_TYPE, HostHandshake, Ident2, TrustFailure, decode_ident
from firmware_bridge.host_trust import HostTrust, TagWatch, ident_of
from firmware_bridge.identity import IdentityTracker, Verdict
from firmware_bridge.link import Link, LinkConfig, LinkEvent, LinkState, LinkStats, discard_outcome
from firmware_bridge.messages import (
    EVENT_MESSAGES,
    PROTOCOL_MAJOR,
    PROTOCOL_MINOR,
    Answer,
    DeviceRole,
    DropReason,
    Event,
    EventsDropped,
    EventsJournaled,
    FaultCleared,
    Heartbeat,
    Hello,
    Ident,
    Message,
    MessageDecodeError,
    Refused,
    Request,
    ResumeEvents,
    ShoeLoaded,
    Status,
    StatusRequest,
    decode,
    encode,
    message_types,
)
from firmware_bridge.staleness import Clock, Staleness

log = structlog.get_logger(__name__)
M = TypeVar("M", bound=Message)
#: what a device says that calls for its Status at once: a new stack loaded (its count starts), a
#: fault ended (a jam or misfeed may have let cards out unseen; the Status says what it is now)
_RECOUNT_AFTER = frozenset({ShoeLoaded, FaultCleared})


class SessionEventKind(enum.StrEnum):
    CONNECTED = "connected"  # handshake done (first time and after every re-handshake)
    IDENT = "ident"  # the device said who it is
    REBOOTED = "rebooted"  # a new boot id: the device lost its state
    REPLACED = "replaced"  # another unit (role, model or serial) now answers on this port
    LINK_FAILED = "link_failed"  # retry cap reached; resets follow with backoff (reported once per outage)
    STALE = "stale"  # nothing heard for stale_after seconds
    FRESH = "fresh"  # heard again after STALE
    BAD_MESSAGE = "bad_message"  # a payload that is not a valid message (detail shows it in hex)
    INCOMPATIBLE = "incompatible"  # the device speaks another protocol major version
    DISCONNECTED = "disconnected"  # the port went away (the connection reopens it)
    EVENT_GAP = "event_gap"  # event indexes skipped: detail names the missing range (1.1)
    EVENTS_DROPPED = "events_dropped"  # the device no longer has events asked for again (1.1)
    FLAPPING = "flapping"  # handshakes asked for again and again, each soon after the last (the connection's)
    FLOODING = "flooding"  # more status messages than its budget: those past it are left out (StatusBudget)
    NOT_TRUSTED = "not_trusted"  # protocol 2.0: the device was refused (``failure`` names what failed)



@dataclass(frozen=True, slots=True)
class SessionEvent:
    kind: SessionEventKind
    device: str  # the device URL
    detail: str = ""
    ident: Ident | None = None
    #: NOT_TRUSTED: what failed, and the identity key the device proved it holds (an unknown key
    #: or a key that does not match the enrolled one: the key a technician may enrol), else None
    failure: TrustFailure | None = None
    proven_key: bytes | None = None


@dataclass(frozen=True, slots=True)
class SessionConfig:
    host_name: str = "cardd"
    link: LinkConfig = field(default_factory=LinkConfig)
    handshake_timeout: float = 2.0
    heartbeat_interval: float = 1.0
    stale_after: float = 3.0
    stats_interval: float = 60.0  # how often the link statistics go to the log
    messages_limit: int = 10_000  # messages one messages() iterator may hold before it overflows
    #: unsolicited status messages handed on per status_window_s at most (firmware_bridge.flooding):
    #: the simulators send a Heartbeat a second, a shuffle ten ShuffleProgress at once, and two shuffles
    #: back to back (this shoe's and the next one's) may fall in one window
    status_budget: int = 50
    status_window_s: float = 1.0
    #: speak protocol 2.0 with this identity and trust store (docs/protocol.md §8.1); None: 1.1
    trust: HostTrust | None = None


@dataclass(slots=True)
class SessionStats:
    messages_received: int = 0
    bad_messages: int = 0
    requests: int = 0
    request_timeouts: int = 0
    handshakes: int = 0
    reboots: int = 0
    late_answers: int = 0  # Answers whose request is no longer waiting (timed out): taken by none
    idents_ignored: int = 0  # unasked IDENTs while a handshake was due already: its HELLO asks anyway
    status_left_out: int = 0  # status messages past the device's budget: not handed on (StatusBudget)
    unauthenticated: int = 0  # 2.0: payloads before the handshake proved the device, not handed on
    link: LinkStats | None = None


class Need(enum.Enum):
    """What the session's owner must do next (see :meth:`DeviceSession.wait_need`)."""

    HANDSHAKE = "handshake"  # the link is up and nobody has said HELLO on it yet
    LINK_RESET = "link_reset"  # the link failed: reset it (after a backoff delay)
    REFUSED = "refused"  # protocol 2.0: the device is not trusted (:attr:`DeviceSession.refusal`)


def refusal_of(device: str, request_type: int, msg: Message) -> RequestRefused | None:
    """The error for ``msg`` when it is the device's Refused of a message of type ``request_type``
    (its reason in it, the message named: every refusal a device gives reaches whoever asked);
    None for any other message. The one reading of a refusal, for requests and for commands
    whose effect is an event alike."""
    if not isinstance(msg, Refused) or msg.request_type != request_type:
        return None
    refused = message_types().get(request_type)
    name = refused.__name__ if refused is not None else f"message 0x{request_type:02x}"
    return RequestRefused(f"{device}: device refused {name}: {msg.reason}")


class DeviceSession:
    def __init__(self, write: Callable[[bytes], None], device: str, *,
                 on_message: Callable[[Message], None], on_event: Callable[[SessionEvent], None],
                 identity: IdentityTracker, config: SessionConfig | None = None,
                 clock: Clock | None = None, on_numbered: Callable[[Event], None] | None = None,
                 status_budget: StatusBudget | None = None) -> None:
        self.device = device
        self.config = config or SessionConfig()
        self.ident: Ident | None = None  # the IDENT heard in this session (None until the first)
        self._log = RateLimitedLog(log)  # a flood of link resets must not flood the log
        self._loop = asyncio.get_running_loop()
        self._write = write
        self._trust = self.config.trust
        #: 2.0: the session's framing (keys installed once the device proved itself), None on a 1.x link
        self.framing: Framing2 | None = None if self._trust is None else Framing2()
        self.link = Link(write, self._payload, self._link_event, self.config.link, device, framing=self.framing)
        #: 2.0: nothing the device says is handed on until it proved itself and has the keys
        self._untrusted = self._trust is not None
        self._ident2: asyncio.Future[bytes] | None = None  # the IDENT2 the HELLO2 sent waits for
        self._came_up_2 = False  # a 2.0 link of this session came up (else a reset tries 1.x: reset_link)
        self._probing_1x = False  # the link is a 1.x one, asking whether the device speaks 1.x
        #: 2.0: why the device is refused (None: it is not); it stands until :meth:`retry_trust`
        self.refusal: DeviceNotTrusted | None = None
        self._tags = None if self._trust is None else TagWatch(self._tag_stats(), self._trust.tag_failures_refused)
        self._on_message, self._on_event, self._identity = on_message, on_event, identity
        # a numbered event that comes as most do (no request waiting, no handshake) goes to
        # on_numbered, when given, instead of on_message: the card path, one call shorter
        self._on_numbered = on_message if on_numbered is None else on_numbered
        self._liveness = Staleness(clock or self._loop.time, self.config.stale_after)
        self._stats = SessionStats()
        #: the owner's budget (it outlives the sessions), else one of this session's own
        self._own_budget = status_budget is None
        self._budget = status_budget or StatusBudget(
            device, self.config.status_budget, self.config.status_window_s, Backoff().stable,
            lambda detail: self._emit(SessionEventKind.FLOODING, detail, self.ident))
        # (expected type, request type code, request id or None when matched by type, answer)
        self._pending: list[tuple[type[Message], int, int | None, asyncio.Future[Any]]] = []
        self._last_request_id = 0
        self._changed = asyncio.Event()  # anything wait_need() looks at
        self._needs_handshake = True
        #: why the handshake due now (or the last one) was due: the owner names it when a device asks
        #: for one again and again
        self.handshake_cause = "the link came up"
        self._handshaking = False
        #: what a 1.1 device says at once after ResumeEvents (the events it resends, EventsDropped),
        #: when it comes before the link's ACK of ResumeEvents has let the handshake end: handed on
        #: after CONNECTED, so the owner has the handshake's IDENT (and CONNECTED) before its events
        self._held_back: list[Message] = []
        self._outage = False  # LINK_FAILED reported, not yet CONNECTED again
        self._heartbeat: asyncio.Task[None] | None = None
        #: the device's Status, asked after each handshake (and after a 1.1 device's events overflowed)
        self._status_ask: asyncio.Task[None] | None = None
        self._closed = False

    # ---- what the owner does ------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Handshake done on the link as it is now."""
        return (self.ident is not None and self.link.state is LinkState.UP and not self._needs_handshake
                and not self._handshaking and not self._closed)

    @property
    def speaks_1_1(self) -> bool:
        """Both sides speak protocol 1.1 (numbered events, request ids): the device said so in IDENT
        (a 2.0 device's session after its handshake is 1.1's)."""
        ident = self.ident
        return ident is not None and (ident.protocol_major, ident.protocol_minor) >= (1, 1) and PROTOCOL_MINOR >= 1

    @property
    def authenticated(self) -> bool:
        """Protocol 2.0: the device proved itself on the link as it is now (False on a 1.x session)."""
        return self._trust is not None and not self._untrusted

    @property
    def stats(self) -> SessionStats:
        """A copy of the counters, the link's included, safe to keep and compare."""
        return replace(self._stats, link=self.link.stats)

    def start(self) -> None:
        """Reset the link (the device answers RESET_ACK) and start the heartbeats."""
        self._liveness.restart()
        self.link.start()
        self._heartbeat = self._loop.create_task(self._beat(), name=f"heartbeat {self.device}")

    def bytes_received(self, data: bytes) -> None:
        self.link.bytes_received(data)
        if self._tags is not None and self.refusal is None and not self._probing_1x:
            refusal = self._tags.check()
            if refusal is not None:
                self._refuse(refusal)

    async def wait_need(self) -> Need:
        """Wait until the owner has something to do; SessionClosed once the session is closed."""
        while True:
            if self._closed:
                raise SessionClosed(f"{self.device}: session closed")
            if self.refusal is not None:
                return Need.REFUSED
            if self.link.state is LinkState.FAILED:
                return Need.LINK_RESET
            if self.link.state is LinkState.UP and self._needs_handshake:
                return Need.HANDSHAKE
            self._changed.clear()
            await self._changed.wait()

    async def shake_hands(self, journaled_index: Callable[[], int] = lambda: 0) -> Ident:
        """Say HELLO and wait for IDENT; with a 1.1 device, then say ResumeEvents with
        ``journaled_index()`` (the device sends every later event again). Raises
        IncompatibleProtocol (another major version, reported as INCOMPATIBLE), RequestTimeout,
        RequestRefused (not ready yet) or LinkError (the link was reset or failed meanwhile);
        :meth:`wait_need` then says what is due."""
        self._needs_handshake, self._handshaking = False, True  # a reset from now on asks again
        try:
            if self._trust is not None and not self._probing_1x:
                ident = await self._shake_hands_2(self._trust)  # the rest of the session is 1.1's
            else:
                hello = Hello(PROTOCOL_MAJOR, PROTOCOL_MINOR, self.config.host_name)
                ident = await self.request(hello, expect=Ident, timeout=self.config.handshake_timeout)
                if self._trust is not None:  # a 2.0 host's 1.x probe: the device answered in 1.x
                    raise self._refuse(self._downgrade(ident))
                if ident.protocol_major != PROTOCOL_MAJOR:
                    detail = (
                        f"{self.device}: device {ident.model} {ident.serial} speaks protocol "
                        f"{ident.protocol_major}.{ident.protocol_minor}, this host speaks "
                        f"{PROTOCOL_MAJOR}.{PROTOCOL_MINOR}"
                    )
                    self._emit(SessionEventKind.INCOMPATIBLE, detail, ident)
                    raise IncompatibleProtocol(detail)
            if self.speaks_1_1:
                await self.send(ResumeEvents(journaled_index()))  # before anything else is asked
        except BaseException:
            self._needs_handshake = True
            # neither delivered nor confirmed: the device sends them again after the next ResumeEvents
            self._held_back.clear()
            raise
        finally:
            self._handshaking = False
            self._changed.set()
        return self._connected(ident)

    def _connected(self, ident: Ident) -> Ident:
        """The handshake ended: CONNECTED, what was held back, the Status asked."""
        self._stats.handshakes += 1
        self._outage = False
        self._emit(SessionEventKind.CONNECTED, f"{ident.model} {ident.serial} firmware {ident.firmware_version}", ident)
        self._hand_on_held_back()
        if self.connected:  # after the events handed on: the device answers after what it resends
            self._ask_status_now()
        # else the link was reset as the handshake ended (a RESET right behind the IDENT or the ACK of
        # ResumeEvents): asked there, a 1.1 device not yet resumed on its new link would answer before
        # the events it is to resend. The handshake on the new link, due now, asks.
        return ident

    def reset_link(self) -> None:
        """Reset a failed link (the owner's backoff decides when). A 2.0 session whose RESET was
        never answered asks in 1.x next (and in 2.0 again after that): a device that answers
        only 1.x is a downgrade, refused by name instead of being silent."""
        if self.link.state is not LinkState.FAILED or self._closed:
            return
        if self._trust is not None and (self._probing_1x or not self._came_up_2):
            self._replace_link(probing_1x=not self._probing_1x)
        else:
            self.link.reset("retry after failure")

    def retry_trust(self) -> None:
        """A technician acted (enrolled the device, or cleared its refusal): forget the refusal and
        shake hands again on a fresh link."""
        if self.refusal is None or self._closed:
            return
        self.refusal = None
        self._replace_link(probing_1x=False)
        self._changed.set()

    # ---- protocol 2.0 -------------------------------------------------------------------

    def _replace_link(self, *, probing_1x: bool) -> None:
        """A new link on the same port: 2.0 framing, or 1.x framing to ask whether the device speaks 1.x."""
        self.link.close()
        self._probing_1x = probing_1x
        self.framing = None if probing_1x else Framing2()
        self.link = Link(self._write, self._payload, self._link_event, self.config.link, self.device,
                         framing=self.framing)
        if self._tags is not None and self.framing is not None:
            self._tags = TagWatch(self._tag_stats(), self._tags.limit)
        self._untrusted = True
        self.link.start()

    def _tag_stats(self) -> Decoder2Stats:
        stats = self.link.framing_stats
        assert isinstance(stats, Decoder2Stats), "a 2.0 link's"
        return stats

    async def _shake_hands_2(self, trust: HostTrust) -> Ident:
        """HELLO2, the IDENT2 checked (DeviceNotTrusted naming what failed), the keys installed,
        PROOF2: docs/protocol.md §8. The IDENT of the unit it proved is noted as 1.1's is."""
        framing = self.framing
        assert framing is not None, "a 2.0 link"
        framing.clear()
        self._untrusted = True
        handshake = HostHandshake(trust.identity, self.config.host_name, trust.enrolled_key)
        waiting = self._ident2 = self._loop.create_future()
        try:
            async with asyncio.timeout(self.config.handshake_timeout):
                await self.link.send(handshake.hello())
                ident_bytes = await waiting
        except TimeoutError:
            self._stats.request_timeouts += 1
            raise RequestTimeout(f"{self.device}: no IDENT2 within {self.config.handshake_timeout}s "
                                 f"after HELLO2") from None
        finally:
            self._ident2 = None
        offered = decode_ident(ident_bytes)  # HandshakeError: it does not parse
        try:
            _, keys, proof = handshake.on_ident(ident_bytes)
        except DeviceNotTrusted as exc:
            raise self._refuse(exc, offered) from None
        framing.install(keys)
        await self.link.send(proof)  # the session's first tagged frame
        self._untrusted = False
        ident = _ident_or_refuse(offered)
        self._note_ident(ident)
        return ident

    def _downgrade(self, ident: Ident) -> DeviceNotTrusted:
        """The refusal of a device that answered this 2.0 host's 1.x probe."""
        assert self._trust is not None
        unit = (ident.role.name.lower(), ident.model, ident.serial)
        enrolled = self._trust.enrolled_key(unit)
        why = ("it is enrolled with a 2.0 identity key" if enrolled is not None
               else "it is not enrolled, and this device is not configured for protocol 1.x")
        return DeviceNotTrusted(TrustFailure.DOWNGRADE, f"{' '.join(unit)} answered in protocol "
                                f"{ident.protocol_major}.{ident.protocol_minor}, without an identity proof: {why}")

    def _refuse(self, refusal: DeviceNotTrusted, offered: Ident2 | None = None) -> DeviceNotTrusted:
        """Refuse the device: nothing more is handed on, the keys go with a link reset, one
        NOT_TRUSTED event; it stands until :meth:`retry_trust`. Returns ``refusal`` to raise."""
        self.refusal = refusal
        self._untrusted = True
        failure = refusal.failure if isinstance(refusal.failure, TrustFailure) else None
        proven = (offered.device_key if offered is not None
                  and failure in (TrustFailure.UNKNOWN_KEY, TrustFailure.KEY_MISMATCH) else None)
        ident = None
        if offered is not None and offered.role.upper() in DeviceRole.__members__:
            ident = ident_of(offered)
        self._fail_pending(SessionClosed(f"{self.device}: device not trusted: {refusal}"))
        self._emit(SessionEventKind.NOT_TRUSTED, f"{self.device}: {refusal}", ident, failure=failure,
                   proven_key=proven)
        if self.framing is not None:
            self.framing.clear()
        if self.link.state in (LinkState.UP, LinkState.RESETTING):  # the device holds its events
            self.link.reset("device not trusted")
        self._changed.set()
        return refusal

    async def close(self, why: str = "session closed") -> None:
        """Stop the heartbeats, fail what waits with SessionClosed, close the link; idempotent.
        The port is the owner's: nothing here closes it."""
        if self._closed:
            return
        self._closed = True
        self._changed.set()
        await cancel_and_wait(self._heartbeat)
        await cancel_and_wait(self._status_ask)
        self._fail_pending(SessionClosed(f"{self.device}: {why}"))
        if self._own_budget:
            self._budget.close()
        self.link.close()

    # ---- what the device is asked -----------------------------------------------------------

    async def send(self, msg: Message) -> None:
        """Send ``msg`` and wait until the device acknowledged it (LinkError if the link gives up)."""
        if self._closed:
            raise SessionClosed(f"{self.device}: session is closed")
        await self.link.send(encode(msg))

    def confirm_events(self, up_to_index: int) -> asyncio.Future | None:
        """Tell a 1.1 device its events up to ``up_to_index`` are journaled (EventsJournaled);
        returns the link's future (None when the link is not up). A lost one is made good by
        the next, or by ResumeEvents."""
        if self._closed or self.link.state is not LinkState.UP:
            return None
        sent = self.link.send(encode(EventsJournaled(up_to_index)))
        sent.add_done_callback(discard_outcome)
        return sent

    async def request(self, msg: Message, expect: type[M], timeout: float = 1.0) -> M:
        """Send ``msg`` and return its answer of type ``expect``: with a 1.1 device the Answer
        that carries this request's id (the request travels in a Request envelope), with a 1.0
        device the next message of that type.

        Raises RequestTimeout, RequestRefused (the device answered Refused), or LinkError
        (the link failed or was reset before the answer came).
        """
        fut: asyncio.Future[Any] = self._loop.create_future()
        request_id = self._new_request_id() if self.speaks_1_1 and not isinstance(msg, Hello) else None
        entry = (expect, msg.TYPE, request_id, fut)
        self._pending.append(entry)
        self._stats.requests += 1
        try:
            async with asyncio.timeout(timeout):
                await self.send(msg if request_id is None else Request(request_id, msg))
                answer: M = await fut
                return answer
        except TimeoutError:
            self._stats.request_timeouts += 1
            raise RequestTimeout(
                f"{self.device}: no {expect.__name__} within {timeout}s after {type(msg).__name__}"
            ) from None
        finally:
            self._pending.remove(entry)
            if not fut.cancel():  # done: failed while send() waited, whose own error reached the caller
                discard_outcome(fut)

    def _ask_status_now(self) -> None:
        """Ask for the device's Status (:meth:`_ask_status`). One asked before that still waits is
        given up: its link was reset (it fails anyway), or an unasked IDENT called for this handshake."""
        if self._status_ask is not None:
            self._status_ask.cancel()
        self._status_ask = self._loop.create_task(self._ask_status(), name=f"status {self.device}")

    async def _ask_status(self) -> None:
        """A 1.0 device's events, a FaultCleared among them, are lost in a link reset, and a 1.1
        device's that its full buffer pushed out (EventsDropped(OVERFLOW)): its Status says what it
        is now, and how many cards it holds (the table checks the shoe's count with it). The answer
        goes to ``on_message`` like any other; a request (not a bare send), so a request of the
        application waiting for a Status gets its own. No answer (a device that refuses it, or
        stays silent) is one log line and nothing more: nothing waits for it."""
        if not self.connected:  # the link was reset since this was asked for: the next handshake asks
            return
        try:
            await self.request(StatusRequest(), expect=Status, timeout=self.config.handshake_timeout)
        except ProtocolError as exc:  # reset, closed, silent or refused: the next handshake asks again
            self._log.warning("status_not_answered", device=self.device, error=str(exc),
                              consequence="its state and card count are not checked until the next handshake")

    # ---- link callbacks --------------------------------------------------------------

    def _link_event(self, event: LinkEvent, detail: str) -> None:
        if event in (LinkEvent.UP, LinkEvent.PEER_RESET):
            if self._trust is not None:  # the session's keys end with its link
                self._untrusted = True
                if self.framing is not None:
                    self.framing.clear()
                    self._came_up_2 = True
            self._needs_handshake = True
            self.handshake_cause = f"link {event.value.replace('_', ' ')} ({detail})"
            self._fail_pending(LinkReset(f"{self.device}: link reset ({detail}) before the answer came"))
        elif event is LinkEvent.FAILED:
            if self._tags is not None and self._tags.in_a_row and self.refusal is None and not self._probing_1x:
                # every frame since the last good one failed its tag, until the link gave up: forged
                self._refuse(self._tags.refusal())
                return
            self._fail_pending(LinkReset(f"{self.device}: link failed ({detail})"))
            if not self._outage:
                self._outage = True
                self._emit(SessionEventKind.LINK_FAILED, detail)
        self._changed.set()

    def _payload(self, payload: bytes) -> None:
        if self._liveness.heard():
            self._emit(SessionEventKind.FRESH, "device heard again")
        if self._untrusted:
            self._unauthenticated(payload)
            return
        try:
            msg = decode(payload)
        except MessageDecodeError as exc:
            self._stats.bad_messages += 1
            self._emit(SessionEventKind.BAD_MESSAGE, str(exc))
            return
        self._stats.messages_received += 1
        if type(msg) is Event and not self._pending and not self._handshaking:
            self._on_numbered(msg)  # the hot path (every card read): what the steps below do for it
            if type(msg.message) in _RECOUNT_AFTER:
                self._ask_status_unless_asked()
            return
        if isinstance(msg, Answer):
            answered = self._answer_by_id(msg)
            msg = msg.message  # the application sees answers as before, unwrapped
        else:
            answered = self._answer_pending(msg)
        if isinstance(msg, Ident):
            if answered or self.ident is None:
                self._note_ident(msg)
            elif self._needs_handshake:
                # a handshake is due already and its HELLO asks who answers: another unasked IDENT
                # says nothing more, and a device that sends them without end must not be journaled
                # without end (each one a record and a device state change)
                self._stats.idents_ignored += 1
                self._log.info("unasked_ident_ignored", key="unasked_ident", device=self.device,
                               ignored=self._stats.idents_ignored, why="a handshake is due: it asks for the IDENT")
                return
            elif (seen := self._identity.judge(msg)).verdict in (Verdict.REBOOTED, Verdict.REPLACED):
                # a fresh IDENT mid-stream: the device rebooted, or another one answers
                self.handshake_cause = f"unasked IDENT: {seen.replaced or seen.rebooted}"
                self._note_ident(msg)
                self._needs_handshake = True
                self._changed.set()
            elif not self._admitted(msg):  # the same boot saying who it is again, unasked: status
                return
        elif self._handshaking and isinstance(msg, (Event, EventsDropped)):
            self._held_back.append(msg)  # see _held_back
            return
        elif not answered and type(msg) is not Event and type(msg) not in EVENT_MESSAGES and not self._admitted(msg):
            return  # status past the device's budget (an event, or an answer the host waits for, never is)
        elif type(msg) is EventsDropped:
            self._events_dropped(msg)
        self._on_message(msg)
        if type(msg.message if type(msg) is Event else msg) in _RECOUNT_AFTER and not self._handshaking:
            self._ask_status_unless_asked()  # (a handshake asks once it has ended)

    def _unauthenticated(self, payload: bytes) -> None:
        """A 2.0 session's payload before the device proved itself: the IDENT2 the HELLO2 waits
        for, or (a 1.x probe) the IDENT the HELLO waits for; anything else is counted, never
        handed on."""
        waiting = self._ident2
        if waiting is not None and not waiting.done() and payload[:1] == bytes([IDENT2_TYPE]):
            waiting.set_result(payload)
            return
        if self._probing_1x and self.refusal is None:
            try:
                msg = decode(payload)
            except MessageDecodeError:
                msg = None
            if isinstance(msg, Ident) and self._answer_pending(msg):
                return
        self._stats.unauthenticated += 1

    def _admitted(self, msg: Message) -> bool:
        """Whether the device's budget of status messages lets ``msg`` (status, never an event nor
        an answer the host waits for) through; counted when it does not."""
        if self._budget.admit(msg):
            return True
        self._stats.status_left_out += 1
        return False

    def _hand_on_held_back(self) -> None:
        held, self._held_back = self._held_back, []
        for msg in held:
            if type(msg) is EventsDropped:
                self._events_dropped(msg)
            self._on_message(msg)

    def _events_dropped(self, msg: EventsDropped) -> None:
        """Events a full buffer pushed out may have ended a fault: the device's Status says. Asked
        as it is handed on, so its answer comes after the events the device resends; not again while
        the handshake's own request waits (its answer comes after them too: one request)."""
        if msg.reason is DropReason.OVERFLOW:
            self._ask_status_unless_asked()

    def _ask_status_unless_asked(self) -> None:
        """Ask for the Status, unless a request for it still waits (the device answers that one after
        every event it numbered before the request came, so after the one that calls for it now) or
        the link is not the one a handshake ended on (the next handshake asks)."""
        if self.connected and (self._status_ask is None or self._status_ask.done()):
            self._ask_status_now()

    def _note_ident(self, ident: Ident) -> None:
        # a first IDENT in this session that differs from the last one known: it changed while the port was away
        away = " while away" if self.ident is None else ""
        seen = self._identity.observe(ident)
        self.ident = ident
        self._emit(SessionEventKind.IDENT, f"boot {ident.boot_id:#010x}", ident)
        if seen.replaced:
            self._emit(SessionEventKind.REPLACED, seen.replaced + away, ident)
        if seen.rebooted:
            self._stats.reboots += 1
            self._emit(SessionEventKind.REBOOTED, seen.rebooted + away, ident)

    def _new_request_id(self) -> int:
        """The next u16 id that no waiting request holds."""
        waiting = {request_id for _, _, request_id, _ in self._pending}
        while True:
            self._last_request_id = (self._last_request_id + 1) & 0xFFFF
            if self._last_request_id not in waiting:
                return self._last_request_id

    def _answer_by_id(self, answer: Answer) -> bool:
        for expect, request_type, request_id, fut in self._pending:
            if request_id == answer.request_id and not fut.done():
                return self._settle(fut, expect, request_type, answer.message)
        self._stats.late_answers += 1
        self._log.info("late_answer", key="late_answer", device=self.device, request_id=answer.request_id,
                       message=type(answer.message).__name__)
        return False

    def _answer_pending(self, msg: Message) -> bool:
        """A 1.0 device's answer: the oldest request waiting for its type (or refused by type code)."""
        for expect, request_type, request_id, fut in self._pending:
            if request_id is None and not fut.done() and self._settle(fut, expect, request_type, msg):
                return True
        return False

    def _settle(self, fut: asyncio.Future[Any], expect: type[Message], request_type: int, msg: Message) -> bool:
        refusal = refusal_of(self.device, request_type, msg)
        if refusal is not None:
            fut.set_exception(refusal)
            return True
        if isinstance(msg, expect):
            fut.set_result(msg)
            return True
        return False

    def _fail_pending(self, exc: Exception) -> None:
        for _, _, _, fut in self._pending:
            if not fut.done():
                fut.set_exception(exc)

    # ---- liveness --------------------------------------------------------------------

    async def _beat(self) -> None:
        start = last_stats = self._loop.time()
        while True:
            await asyncio.sleep(self.config.heartbeat_interval)
            if self._loop.time() - last_stats >= self.config.stats_interval:
                last_stats = self._loop.time()
                log.info("link_stats", device=self.device, **_flat(self.link.stats))
            if self.link.state is LinkState.UP and self.ident is not None and not self._untrusted:
                # not before the first HELLO, nor on a 2.0 link before its handshake
                uptime = int((self._loop.time() - start) * 1000) & 0xFFFFFFFF
                self.link.send(encode(Heartbeat(uptime))).add_done_callback(discard_outcome)
            if self._liveness.check():
                self._emit(SessionEventKind.STALE, f"nothing heard for {self._liveness.silent_for():.1f}s")

    def _emit(self, kind: SessionEventKind, detail: str, ident: Ident | None = None, *,
              failure: TrustFailure | None = None, proven_key: bytes | None = None) -> None:
        self._log.info("session_event", key=kind.value, device=self.device, kind=kind.value, detail=detail)
        self._on_event(SessionEvent(kind, self.device, detail, ident, failure, proven_key))


def _ident_or_refuse(offered: Ident2) -> Ident:
    """The IDENT of a unit that proved itself; a role this host does not know is a HandshakeError."""
    if offered.role.upper() not in DeviceRole.__members__:
        raise HandshakeError(f"IDENT2 names role {offered.role!r}: neither shoe nor shuffler")
    return ident_of(offered)


def _flat(stats: LinkStats) -> dict[str, Any]:
    """Link and framing counters as one flat dict for a log line."""
    out = {name: getattr(stats, name) for name in LinkStats.__slots__ if name != "framing"}
    out.update({f"framing_{name}": getattr(stats.framing, name) for name in type(stats.framing).__slots__})
    return out
