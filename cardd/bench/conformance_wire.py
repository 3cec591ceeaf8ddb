"""The conformance suite's side of the cable: a port opened from a device URL, and a small host
link over it that the suite drives frame by frame (docs/bench.md, "cardbench conformance").

Not :class:`firmware_bridge.link.Link`: the suite must be able to send what a correct host never
would (a damaged CRC, a frame out of order, a replayed counter) and to see every frame the
device sends, the bytes as they came. So :class:`HostLink` is stop-and-wait, keeps each
segment it read (with the frame in it, or the error that refused it), acknowledges the
device's DATA only while ``auto_ack`` is on, and builds its frames with the framing modules
(:mod:`firmware_bridge.framing`, :mod:`firmware_bridge.framing2`), never with code of its own.
"""
from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import Callable

from drivers.factory import open_transport
from drivers.transport import Transport
from firmware_bridge.errors import FrameError
from firmware_bridge.framing import FrameKind, cobs_decode, parse_frame, wire_frame
from firmware_bridge.framing2 import Framing2
from firmware_bridge.link_types import NONCE_LEN, SEQ_MOD

#: how long the suite waits for an answer a conforming device gives at once (it goes on as soon as
#: the answer comes: the room is for a loaded machine)
ANSWER_TIMEOUT = 2.0
#: how often a DATA frame is sent before the suite gives up on its ACK
SEND_TRIES = 5


class Failed(Exception):
    """A requirement not met: what was expected, and the bytes that showed it."""

    def __init__(self, message: str, data: bytes = b"") -> None:
        super().__init__(message)
        self.message = message
        self.data = bytes(data)


class Blocked(Exception):
    """A check that cannot run: what it needs failed (its own check says so), or the device
    cannot be made to do it from the cable (a shoe's cards are dealt by hand)."""


@dataclass(slots=True)
class Segment:
    """One run of bytes between delimiters from the device: the frame in it, or why it was refused."""

    raw: bytes
    kind: FrameKind | None = None
    seq: int = 0
    ack: int = 0
    payload: bytes = b""
    error: FrameError | None = None
    tagged: bool = False
    at: float = 0.0


SegmentTest = Callable[[Segment], bool]


class Port:
    """The device's port, opened from its URL with the drivers (serial, USB, a simulator's)."""

    def __init__(self) -> None:
        self.transport: Transport | None = None
        self._buffer = bytearray()
        self._arrived = asyncio.Event()
        self.lost: Exception | None = None

    async def open(self, url: str) -> None:
        self.transport = await open_transport(url, self)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
            self.transport = None

    def write(self, data: bytes) -> None:
        if self.transport is None:
            raise Failed("the port is closed")
        self.transport.write(data)

    # TransportListener
    def bytes_received(self, data: bytes) -> None:
        self._buffer += data
        self._arrived.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionError("port closed")
        self._arrived.set()

    async def segments(self) -> list[bytes]:
        """The complete segments that arrived (waits for at least one byte)."""
        while b"\x00" not in self._buffer:
            if self.lost is not None:
                raise Failed(f"the port went away: {self.lost}")
            self._arrived.clear()
            await self._arrived.wait()
        head, _, rest = bytes(self._buffer).rpartition(b"\x00")
        self._buffer = bytearray(rest)
        return [part for part in head.split(b"\x00") if part]

    def drop_pending(self) -> None:
        self._buffer.clear()


@dataclass
class HostLink:
    """A stop-and-wait host link over ``port``: 1.1 frames, or 2.0 frames through ``framing``."""

    port: Port
    framing: Framing2 | None = None
    auto_ack: bool = True
    segments: list[Segment] = field(default_factory=list)
    tx_seq: int = 0
    rx_next: int = 0
    device_acked: int = 0  # the device's last cumulative ack
    delivered: asyncio.Queue[bytes] = field(default_factory=asyncio.Queue)
    _reader: asyncio.Task[None] | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def start(self) -> None:
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Failed):
                pass
            self._reader = None

    # ---- frames out ---------------------------------------------------------------

    def frame(self, kind: FrameKind, seq: int = 0, ack: int = 0, payload: bytes = b"") -> bytes:
        """The frame's wire bytes in this link's framing (2.0: tagged once keys are installed)."""
        if self.framing is None:
            return wire_frame(kind, seq, ack, payload)
        return self.framing.wire_frame(kind, seq, ack, payload)

    def write(self, data: bytes) -> None:
        self.port.write(data)

    def send_frame(self, kind: FrameKind, seq: int = 0, ack: int = 0, payload: bytes = b"") -> bytes:
        data = self.frame(kind, seq, ack, payload)
        self.write(data)
        return data

    # ---- frames in ----------------------------------------------------------------

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                got = await self.port.segments()
            except Failed:  # the port went away: whoever waits on this link times out and says so
                return
            for raw in got:
                segment = self._parse(raw)
                segment.at = loop.time()
                self.segments.append(segment)
                if segment.kind is not None:
                    self._take(segment)
                self._changed.set()

    def _parse(self, raw: bytes) -> Segment:
        try:
            decoded = cobs_decode(raw)
            if self.framing is None:
                frame = parse_frame(decoded, shown=raw)
                return Segment(raw, frame.kind, frame.seq, frame.ack, frame.payload)
            kind, seq, ack, payload = self.framing.parse(decoded, shown=raw)
            return Segment(raw, kind, seq, ack, payload, tagged=bool(decoded[0] & 0x40))
        except FrameError as exc:
            return Segment(raw, error=exc)

    def _take(self, s: Segment) -> None:
        if s.kind in (FrameKind.DATA, FrameKind.ACK, FrameKind.NAK):
            self.device_acked = s.ack
        if s.kind is not FrameKind.DATA or not self.auto_ack:
            return
        ahead = (s.seq - self.rx_next) % SEQ_MOD
        if ahead == 0:
            self.rx_next = (self.rx_next + 1) % SEQ_MOD
            self.delivered.put_nowait(s.payload)
            self.send_frame(FrameKind.ACK, 0, self.rx_next)
        elif ahead < SEQ_MOD // 2:
            self.send_frame(FrameKind.NAK, 0, self.rx_next)
        else:
            self.send_frame(FrameKind.ACK, 0, self.rx_next)

    async def wait_for(self, predicate: SegmentTest, timeout: float = ANSWER_TIMEOUT, since: int = 0) -> Segment | None:
        """The first segment from index ``since`` on that ``predicate`` accepts, waiting up to ``timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            for segment in self.segments[since:]:
                if predicate(segment):
                    return segment
            since = len(self.segments)
            left = deadline - loop.time()
            if left <= 0:
                return None
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                return None

    async def quiet(self, seconds: float) -> list[Segment]:
        """What the device sends in the next ``seconds``."""
        since = len(self.segments)
        await asyncio.sleep(seconds)
        return self.segments[since:]

    # ---- the link's moves ---------------------------------------------------------

    async def reset(self, nonce: bytes | None = None, timeout: float = ANSWER_TIMEOUT) -> Segment:
        """RESET(nonce) until its RESET_ACK: both sequences start over at 0."""
        nonce = os.urandom(NONCE_LEN) if nonce is None else nonce
        if self.framing is not None:
            self.framing.clear()
        for _ in range(3):
            since = len(self.segments)
            self.tx_seq = self.rx_next = 0
            self.delivered = asyncio.Queue()
            sent = self.send_frame(FrameKind.RESET, 0, 0, nonce)
            answer = await self.wait_for(lambda s: s.kind is FrameKind.RESET_ACK and s.payload == nonce,
                                         timeout, since)
            if answer is not None:  # what came before it belongs to the link it ended
                self.segments = self.segments[self.segments.index(answer):]
                return answer
        raise Failed(f"no RESET_ACK to RESET with nonce {nonce.hex(' ')}", sent)

    async def send(self, payload: bytes, tries: int = SEND_TRIES) -> bytes:
        """DATA(payload) until the device acknowledges it; the wire bytes of the last try."""
        seq = self.tx_seq
        want = (seq + 1) % SEQ_MOD
        sent = b""
        for _ in range(tries):
            since = len(self.segments)
            sent = self.send_frame(FrameKind.DATA, seq, self.rx_next, payload)
            acked = await self.wait_for(lambda s: s.kind in (FrameKind.DATA, FrameKind.ACK, FrameKind.NAK)
                                        and s.ack == want, ANSWER_TIMEOUT / 2, since)
            if acked is not None:
                self.tx_seq = want
                return sent
        raise Failed(f"DATA seq {seq} not acknowledged after {tries} tries", sent)

    async def receive(self, timeout: float = ANSWER_TIMEOUT) -> bytes | None:
        """The next payload the device delivered in order, or None after ``timeout``."""
        try:
            return await asyncio.wait_for(self.delivered.get(), timeout)
        except TimeoutError:
            return None

