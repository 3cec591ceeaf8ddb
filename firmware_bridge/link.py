"""The link layer: numbered DATA frames, cumulative ACKs, NAK on a gap, go-back-N retransmit
with an adaptive timeout, a retry cap that ends in FAILED, and a RESET/RESET_ACK handshake.

One class serves both ends (host and simulated device). It runs on the asyncio loop: the
transport calls :meth:`Link.bytes_received`, the link writes through the ``write`` callable
it was given, and all timers are ``loop.call_later`` handles cancelled on close. The rules,
byte by byte, are in docs/protocol.md.
"""
from __future__ import annotations

import asyncio
import os
from collections import deque
from dataclasses import dataclass
from typing import Callable

import structlog

from core.callbacks import call_logged
from drivers.aio import RateLimitedLog
from firmware_bridge.errors import FrameError, LinkError, LinkFailed, LinkReset, TagCounterExhausted
from firmware_bridge.framing import MAX_PAYLOAD, DecoderStats, FrameDecoder, FrameKind, wire_frame
from firmware_bridge.framing2 import Decoder2Stats, FrameDecoder2, Framing2
from firmware_bridge.link_types import (  # noqa: F401 (re-exported: the link's public names)
    MIN_CWND,
    NONCE_LEN,
    SEQ_MOD,
    LinkConfig,
    LinkEvent,
    LinkState,
    LinkStats,
)

log = structlog.get_logger(__name__)


@dataclass(slots=True)
class _Outgoing:
    payload: bytes
    future: asyncio.Future
    seq: int = 0
    sent_at: float = 0.0
    retransmitted: bool = False


def discard_outcome(future: asyncio.Future) -> None:
    """Done-callback for a :meth:`Link.send` nobody awaits (heartbeats, a device's reports): a
    failure there is the link's business, retrieved so asyncio does not log it as unhandled."""
    if not future.cancelled():
        future.exception()


#: frames that restart or establish the link: the payloads before them are handed over first
_RESETS = frozenset({FrameKind.RESET, FrameKind.RESET_ACK})


_DATA, _UP, _CLOSED = FrameKind.DATA, LinkState.UP, LinkState.CLOSED  # looked at for every frame read

#: the wire bytes of every ACK (seq 0, no payload) by its ack: one is written for every read
_ACK_FRAMES: tuple[bytes, ...] = tuple(wire_frame(FrameKind.ACK, 0, ack, b"") for ack in range(SEQ_MOD))


def _seq_distance(a: int, b: int) -> int:
    """How far ``b`` is ahead of ``a`` in the 8-bit sequence space."""
    return (b - a) % SEQ_MOD


class Link:
    """A reliable, ordered, exactly-once payload link over an unreliable byte stream."""

    def __init__(
        self,
        write: Callable[[bytes], None],
        on_payload: Callable[[bytes], None],
        on_event: Callable[[LinkEvent, str], None] | None = None,
        config: LinkConfig | None = None,
        name: str = "link",
        framing: Framing2 | None = None,
    ) -> None:
        """``framing``: protocol 2.0 frames (CRC-32C, then tagged once the handshake installs
        the session's keys in it); None: protocol 1.x frames (CRC-16)."""
        self.config = config or LinkConfig()
        self.framing = framing
        self.name = name
        self._write_bytes = write
        self._on_payload = on_payload
        self._on_event = on_event
        self._loop = asyncio.get_running_loop()
        self._decoder: FrameDecoder | FrameDecoder2 = (FrameDecoder(on_error=self._frame_error) if framing is None
                                             else framing.decoder(on_error=self._frame_error))
        self._max_payload, self._max_payload_name = ((MAX_PAYLOAD, "MAX_PAYLOAD") if framing is None
                                                     else (framing.max_payload, "MAX_PAYLOAD_2"))
        self._wire_frame = wire_frame if framing is None else framing.wire_frame
        self._stats = LinkStats(rto=self.config.initial_rto, cwnd=self.config.window, framing=self._decoder.stats)
        self._state = LinkState.DOWN
        self._unacked: deque[_Outgoing] = deque()
        self._queue: deque[_Outgoing] = deque()
        self._log = RateLimitedLog(log)  # a peer may RESET or fail thousands of times a second
        self._next_seq = 0
        self._rx_next = 0
        self._ack_due = False
        self._accepted: list[bytes] = []  # in-order payloads of the chunk being read, not yet handed over
        self._handing_over = False  # on_payload is running: a reset it asks for waits (_hand_over)
        self._reset_asked: tuple[str, bytes | None] | None = None  # (why, nonce) of a reset() asked meanwhile
        self._nak_sent = False
        self._nak_mark = 0  # furthest out-of-order frame seen since our NAK (see _data)
        self._nak_at = 0.0  # when we last sent a NAK
        self._sent_count = 0  # unacked frames on the wire: a prefix of _unacked
        self._retries = 0
        self._timer: asyncio.TimerHandle | None = None
        self._probing = False  # the armed timer is a tail loss probe, not the timeout
        self._my_nonce: bytes | None = None
        self._peer_nonce: bytes | None = None
        # the peer sent DATA/ACK/NAK since we accepted its nonce: it had our RESET_ACK, so a
        # RESET with that nonce again is a new reset (a reboot of firmware that reuses its nonce)
        self._peer_spoke = False
        self._exhausted: TagCounterExhausted | None = None  # the session ran out of frame counters

    # ---- public ----------------------------------------------------------------------

    @property
    def state(self) -> LinkState:
        return self._state

    @property
    def framing_stats(self) -> DecoderStats | Decoder2Stats:
        """The frame decoder's counters as they are now (live: the same object from read to
        read; :attr:`stats` gives a copy to keep)."""
        return self._decoder.stats

    @property
    def stats(self) -> LinkStats:
        """A copy of the counters, safe to keep and compare."""
        return self._stats.snapshot()

    def start(self) -> None:
        """Open the link: send RESET and wait for RESET_ACK."""
        self.reset("start")

    def reset(self, why: str = "requested", *, nonce: bytes | None = None) -> None:
        """Start a fresh link: everything unacknowledged fails with LinkReset, seqs restart at 0.
        ``nonce``: the RESET's nonce instead of a random one (simulated firmware with a bad RNG).

        Asked for by an ``on_payload`` callback, it takes effect once the rest of the payloads
        already acknowledged to the peer are handed over (see :meth:`bytes_received`)."""
        if self._state is LinkState.CLOSED:
            raise LinkFailed(f"{self.name}: link is closed")
        if nonce is not None and len(nonce) != NONCE_LEN:
            raise ValueError(f"{self.name}: a RESET nonce is {NONCE_LEN} bytes, got {len(nonce)}")
        if self._handing_over:
            self._reset_asked = (why, nonce)
            return
        self._restart_sequences(LinkReset(f"{self.name}: link reset ({why}) before the frame was acknowledged"))
        self._exhausted = None
        self._my_nonce = os.urandom(NONCE_LEN) if nonce is None else nonce
        self._state = LinkState.RESETTING
        self._stats.resets_sent += 1
        self._log.info("link_reset", link=self.name, why=why, nonce=self._my_nonce.hex())
        self._write(FrameKind.RESET, 0, 0, self._my_nonce)
        self._arm_timer()

    def send(self, payload: bytes) -> asyncio.Future:
        """Queue ``payload``; the future resolves when the peer acknowledged it, or fails with a LinkError."""
        if len(payload) > self._max_payload:
            raise ValueError(f"{self.name}: payload of {len(payload)} bytes exceeds {self._max_payload_name}"
                             f" ({self._max_payload})")
        fut = self._loop.create_future()
        if self._exhausted is not None and self._state is LinkState.FAILED:
            fut.set_exception(self._exhausted)
        elif self._state in (LinkState.FAILED, LinkState.CLOSED):
            fut.set_exception(LinkFailed(f"{self.name}: link is {self._state.value}, reset it first"))
        elif len(self._queue) >= self.config.queue_limit:
            fut.set_exception(LinkError(f"{self.name}: send queue full ({self.config.queue_limit} waiting)"))
        else:
            self._queue.append(_Outgoing(bytes(payload), fut))
            self._pump()
        return fut

    def bytes_received(self, data: bytes) -> None:
        """Feed bytes from the transport. Never raises; bad bytes are counted in stats.framing.

        The chunk's frames are taken in (sequence checks, ACKs, NAKs) and acknowledged first,
        and only then are their payloads handed to ``on_payload``: the peer sends its next
        frames while this side works on these (with the ACK after the payloads, a card burst
        went at the speed of both sides added together instead of the slower one).

        Every payload acknowledged is handed over, exactly once: a :meth:`reset` that
        ``on_payload`` asks for takes effect after the rest of them (what it sends meanwhile
        fails with that reset, as anything unacknowledged would). A :meth:`close` it asks for
        takes effect at once: nothing more is handed over."""
        if self._state is LinkState.CLOSED:
            return
        accepted = self._accepted
        stats = self._stats
        for kind, seq, ack, payload in self._decoder.feed_fields(data):
            stats.frames_received += 1
            if (kind is _DATA and seq == self._rx_next and self._state is _UP
                    and ack == (self._unacked[0].seq if self._unacked else self._next_seq)):
                # the next DATA frame, acknowledging nothing new (a card burst): what _handle,
                # _acked and _data do with it
                self._peer_spoke = True
                self._rx_next = (seq + 1) % SEQ_MOD
                self._ack_due = True
                self._nak_sent = False
                accepted.append(payload)
                continue
            if accepted and kind in _RESETS:  # what came before a reset is delivered before it
                self._hand_over()
                if self._state is LinkState.CLOSED:
                    return
            self._handle(kind, seq, ack, payload)
        if self._ack_due and self._state is LinkState.UP:
            self._write(FrameKind.ACK, 0, self._rx_next)
        if accepted:
            self._hand_over()

    def _hand_over(self) -> None:
        """The payloads accepted so far, in order, to ``on_payload``; then a reset a callback
        asked for meanwhile (the peer has their ACK: none of them may be lost). A callback that
        closed the link ends it: this side gave the link up, its payloads included."""
        accepted = self._accepted
        payloads = accepted[:]
        accepted.clear()
        self._handing_over = True
        stats, on_payload = self._stats, self._on_payload
        try:
            for payload in payloads:
                if self._state is _CLOSED:
                    break
                stats.data_delivered += 1
                # call_logged's contract written out: it runs for every payload, and building
                # its keyword context cost more than the loop around it
                try:
                    on_payload(payload)
                except Exception:  # noqa: BLE001 - the owner's bug, reported where it happened
                    log.exception("payload_callback_failed", link=self.name, size=len(payload),
                                  head=bytes(payload[:32]).hex(" "))
        finally:
            self._handing_over = False
        reset_asked, self._reset_asked = self._reset_asked, None
        if reset_asked is not None and self._state is not LinkState.CLOSED:
            why, nonce = reset_asked
            self.reset(why, nonce=nonce)

    def close(self) -> None:
        """Cancel timers and fail everything outstanding; idempotent. At once, also when an
        ``on_payload`` callback asks for it: no payload is handed over after it (a reset
        asked for before it is not done)."""
        if self._state is LinkState.CLOSED:
            return
        self._restart_sequences(LinkFailed(f"{self.name}: link closed before the frame was acknowledged"))
        self._set_state(LinkState.CLOSED, LinkEvent.CLOSED, "closed")

    # ---- receiving -------------------------------------------------------------------

    def _handle(self, kind: FrameKind, seq: int, ack: int, payload: bytes) -> None:
        if kind is FrameKind.RESET:
            self._peer_reset(payload)
        elif kind is FrameKind.RESET_ACK:
            if self._state is LinkState.RESETTING and payload == self._my_nonce:
                self._retries = 0
                self._cancel_timer()
                self._set_state(LinkState.UP, LinkEvent.UP, "reset acknowledged")
                self._pump()
        elif self._state is not LinkState.UP:
            return  # DATA/ACK/NAK of a link not (or no longer) established: the peer will resend
        elif kind is FrameKind.DATA:
            self._peer_spoke = True
            self._acked(ack)
            self._data(seq, payload)
        else:
            self._peer_spoke = True
            self._acked(ack)
            if kind is FrameKind.NAK:
                self._stats.naks_received += 1
                if self._unacked and self._unacked[0].seq == ack:
                    self._retransmit()

    def _peer_reset(self, nonce: bytes) -> None:
        if nonce != self._peer_nonce or self._peer_spoke:
            self._peer_nonce = nonce
            self._peer_spoke = False
            self._stats.peer_resets += 1
            self._restart_sequences(LinkReset(f"{self.name}: peer reset the link before acknowledging"))
            self._exhausted = None
            self._my_nonce = None
            self._write(FrameKind.RESET_ACK, 0, 0, nonce)
            self._set_state(LinkState.UP, LinkEvent.PEER_RESET, f"peer reset (nonce {nonce.hex()})")
        else:  # a repeat of a RESET we already accepted: our RESET_ACK was lost, say it again
            self._write(FrameKind.RESET_ACK, 0, 0, nonce)

    def _data(self, seq: int, payload: bytes) -> None:
        ahead = _seq_distance(self._rx_next, seq)
        if ahead == 0:
            self._rx_next = (self._rx_next + 1) % SEQ_MOD
            self._ack_due = True
            self._nak_sent = False
            self._accepted.append(payload)  # handed over after the ACK (bytes_received)
        elif ahead < SEQ_MOD // 2:
            self._stats.out_of_order += 1
            # NAK once per gap, and again when a frame no further ahead than one already seen
            # arrives: the peer has started a new resend round and its head was lost too (or
            # our NAK was). Once per round, so the peer is never flooded.
            now = self._loop.time()
            if not self._nak_sent or ahead <= self._nak_mark or now - self._nak_at >= self._nak_interval():
                self._nak_sent = True
                self._nak_at = now
                self._stats.naks_sent += 1
                self._write(FrameKind.NAK, 0, self._rx_next)
            self._nak_mark = ahead
        else:
            self._stats.duplicates_dropped += 1
            self._ack_due = True  # the peer missed our ACK: acknowledge again

    def _acked(self, ack: int) -> None:
        base = self._unacked[0].seq if self._unacked else self._next_seq
        count = _seq_distance(base, ack)
        if count == 0 or count > len(self._unacked):
            return  # nothing new, or a stale ack from before a reset
        now = self._loop.time()
        for _ in range(count):
            out = self._unacked.popleft()
            if not out.future.done():
                out.future.set_result(None)
        self._sent_count = max(0, self._sent_count - count)
        self._stats.cwnd = min(self.config.window, self._stats.cwnd + 1)  # a clean ACK: open up again
        if not out.retransmitted:  # Karn: no sample from a frame sent more than once
            self._rtt_sample(now - out.sent_at)
        elif self._stats.rtt_srtt is not None:  # progress proves the path: drop the backoff
            self._stats.rto = self._computed_rto()
        self._retries = 0
        self._cancel_timer()
        if self._unacked:
            self._arm_timer(probe=True)
        self._pump()

    def _rtt_sample(self, rtt: float) -> None:
        s = self._stats
        srtt, var = s.rtt_srtt, s.rtt_var
        if srtt is None or var is None:
            s.rtt_srtt, s.rtt_var = rtt, rtt / 2
        else:  # Jacobson/Karels, RFC 6298 gains
            s.rtt_var = 0.75 * var + 0.25 * abs(srtt - rtt)
            s.rtt_srtt = 0.875 * srtt + 0.125 * rtt
        s.rtt_last = rtt
        s.rtt_min = rtt if s.rtt_min is None else min(s.rtt_min, rtt)
        s.rtt_max = rtt if s.rtt_max is None else max(s.rtt_max, rtt)
        s.rto = self._computed_rto()

    def _nak_interval(self) -> float:
        """How long a NAK needs to have an effect: one round trip (our own estimate of it)."""
        srtt = self._stats.rtt_srtt
        return self.config.initial_rto if srtt is None else srtt

    def _computed_rto(self) -> float:
        s, cfg = self._stats, self.config
        assert s.rtt_srtt is not None and s.rtt_var is not None, "computed only after an RTT sample"
        return min(cfg.max_rto, max(cfg.min_rto, s.rtt_srtt + 4 * s.rtt_var))

    def _frame_error(self, exc: FrameError) -> None:
        log.debug("frame_rejected", link=self.name, error=str(exc))

    # ---- sending ---------------------------------------------------------------------

    def _pump(self) -> None:
        """Put frames on the wire while the congestion window has room: first those waiting to
        be resent (in order), then new ones from the queue."""
        if self._state is not LinkState.UP:
            return
        cwnd = self._stats.cwnd
        while self._sent_count < min(cwnd, len(self._unacked)):
            out = self._unacked[self._sent_count]
            self._sent_count += 1
            self._stats.retransmits += 1
            self._send_data(out)
        while self._queue and len(self._unacked) < cwnd:
            out = self._queue.popleft()
            if out.future.done():  # cancelled by the caller before it went out
                continue
            out.seq = self._next_seq
            self._next_seq = (self._next_seq + 1) % SEQ_MOD
            self._unacked.append(out)
            self._sent_count += 1
            self._stats.data_sent += 1
            self._send_data(out)

    def _send_data(self, out: _Outgoing) -> None:
        out.sent_at = self._loop.time()
        self._write(FrameKind.DATA, out.seq, self._rx_next, out.payload)
        if self._timer is None and self._state is LinkState.UP:
            self._arm_timer(probe=True)

    def _retransmit(self) -> None:
        """Go-back-N: resend every unacknowledged frame (the peer dropped those after a gap),
        with the congestion window halved: a loss says this line cannot carry that many."""
        for out in self._unacked:
            out.retransmitted = True
        self._sent_count = 0
        self._stats.cwnd = max(min(MIN_CWND, self.config.window), self._stats.cwnd // 2)
        self._cancel_timer()
        self._pump()

    def _timeout(self) -> None:
        self._timer = None
        if self._probing:
            self._probe()
            return
        self._retries += 1
        self._stats.timeouts += 1
        if self._retries > self.config.max_retries:
            what = "RESET" if self._state is LinkState.RESETTING else f"DATA seq {self._unacked[0].seq}"
            self._fail(f"no answer to {what} after {self.config.max_retries} retries")
            return
        self._stats.rto = min(self.config.max_rto, self._stats.rto * 2)  # back off until a fresh sample
        if self._state is LinkState.RESETTING:
            assert self._my_nonce is not None, "a link resetting has its nonce"
            self._stats.resets_sent += 1
            self._write(FrameKind.RESET, 0, 0, self._my_nonce)
            self._arm_timer()
        elif self._unacked:
            self._retransmit()

    def _probe(self) -> None:
        """The ACK is late by two round trips: the last frames or their ACK were probably lost
        and nothing behind them will make the peer NAK. Resend the oldest frame alone; the peer
        answers it with an ACK (or delivers it), long before the full timeout would fire."""
        out = self._unacked[0]
        out.retransmitted = True
        self._stats.probes += 1
        self._stats.retransmits += 1
        self._arm_timer()  # the full timeout follows: its backoff applies if the probe fails too
        self._send_data(out)

    def _fail(self, why: str) -> None:
        self._restart_sequences(LinkFailed(f"{self.name}: link failed: {why}"))
        self._log.warning("link_failed", link=self.name, why=why)
        self._set_state(LinkState.FAILED, LinkEvent.FAILED, why)

    # ---- plumbing --------------------------------------------------------------------

    def _restart_sequences(self, exc: Exception) -> None:
        """Fail everything outstanding with ``exc`` and start both directions at seq 0."""
        self._cancel_timer()
        for out in (*self._unacked, *self._queue):
            if not out.future.done():
                out.future.set_exception(exc)
        self._unacked.clear()
        self._queue.clear()
        self._next_seq = self._rx_next = 0
        self._accepted.clear()
        self._ack_due = self._nak_sent = False
        self._nak_mark = self._sent_count = 0
        self._stats.cwnd = self.config.window
        self._retries = 0

    def _write(self, kind: FrameKind, seq: int, ack: int, payload: bytes = b"") -> None:
        """Put the frame ``Frame(kind, seq, ack, payload)`` on the wire."""
        if kind not in _RESETS:
            self._ack_due = False  # DATA, ACK and NAK each carry our current ack
        self._stats.frames_sent += 1
        try:
            if self.framing is None and kind is FrameKind.ACK and not seq and not payload:
                self._write_bytes(_ACK_FRAMES[ack])  # 1.x ACKs never change: made once
            else:
                self._write_bytes(self._wire_frame(kind, seq, ack, payload))
        except TagCounterExhausted as exc:  # not the transport's fault: the owner must shake hands anew
            self._counters_exhausted(exc)
        except Exception as exc:  # a dead transport: the retry timer and the session deal with it
            self._stats.write_errors += 1
            self._log.warning("link_write_failed", link=self.name, error=str(exc))

    def _counters_exhausted(self, exc: TagCounterExhausted) -> None:
        """The 2.0 session sent its last frame counter: nothing more can be sent under its keys.
        Every send outstanding, and every send until the owner resets the link, fails with
        ``exc``; the link is FAILED (its owner hears it as LinkEvent.FAILED)."""
        if self._state is LinkState.FAILED:  # already told (an ACK written in the same turn)
            return
        self._exhausted = exc
        self._restart_sequences(exc)
        self._log.warning("link_counters_exhausted", link=self.name, error=str(exc))
        self._set_state(LinkState.FAILED, LinkEvent.FAILED, str(exc))

    def _arm_timer(self, probe: bool = False) -> None:
        """Arm the retransmit timer; ``probe``: first a tail loss probe after two smoothed RTTs
        (at least a quarter of min_rto), if that comes sooner than the timeout."""
        delay = self._stats.rto
        srtt = self._stats.rtt_srtt
        self._probing = False
        if probe and self._state is LinkState.UP and srtt is not None:
            probe_delay = max(2 * srtt, self.config.min_rto / 4)
            self._probing = probe_delay < delay
            delay = min(probe_delay, delay)
        self._timer = self._loop.call_later(delay, self._timeout)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _set_state(self, state: LinkState, event: LinkEvent, detail: str) -> None:
        self._state = state
        self._log.info("link_state", key=event.value, link=self.name, state=state.value, link_event=event.value,
                       detail=detail)
        if self._on_event is not None:
            call_logged(log, "link_event_callback_failed", self._on_event, event, detail,
                        link=self.name, link_event=event.value)
