"""Frames on the wire: layout, CRC, COBS byte stuffing and a streaming decoder.

Before COBS a frame is ``[kind u8][seq u8][ack u8][length u16][payload][crc16]`` (big-endian),
the CRC (see :mod:`firmware_bridge.crc`) covering every byte before it. The length field is
there because a CRC without final XOR cannot see one appended zero byte: a frame whose
closing 0x00 is damaged into 0x01 decodes one byte longer with a valid CRC. On the wire it is
``00 COBS(frame) 00``: the leading delimiter means a frame sent after line noise is still
found whole. Empty segments between delimiters are idle fill, not errors.
docs/protocol.md describes every byte.
"""
from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, replace
from typing import Callable

from firmware_bridge.crc import crc16
from firmware_bridge.errors import (
    HEX_SHOWN,
    CobsError,
    CrcMismatch,
    FrameError,
    FrameTooLong,
    LengthMismatch,
    FrameTooShort,
    UnknownFrameKind,
)

DELIMITER = 0x00
HEADER_LEN = 5
CRC_LEN = 2
#: the longest frame before COBS: header + payload + CRC (a 512-byte firmware chunk fits with room)
MAX_FRAME_LEN = 1024
MAX_PAYLOAD = MAX_FRAME_LEN - HEADER_LEN - CRC_LEN


def cobs_max_encoded(n: int) -> int:
    """The longest COBS encoding of ``n`` bytes (one code byte per 254 data bytes, plus one)."""
    return n + n // 254 + 1


#: the longest run of bytes between delimiters the decoder keeps; longer runs are discarded
MAX_ENCODED_LEN = cobs_max_encoded(MAX_FRAME_LEN)


class FrameKind(enum.IntEnum):
    DATA = 0x01  # seq = this frame's number, ack = next seq expected from the peer
    ACK = 0x02  # ack = next seq expected (everything before it received)
    NAK = 0x03  # ack = next seq expected; a later frame arrived, resend from ack
    RESET = 0x04  # payload = 4-byte nonce; start a fresh link, both sides back to seq 0
    RESET_ACK = 0x05  # payload = the nonce of the RESET it answers


_KINDS: dict[int, FrameKind] = {int(k): k for k in FrameKind}  # a dict lookup: FrameKind(x) costs 0.4 us


@dataclass(frozen=True, slots=True)
class Frame:
    kind: FrameKind
    seq: int = 0
    ack: int = 0
    payload: bytes = b""


_HEADER = struct.Struct(">BBBH")
_CRC = struct.Struct(">H")


def cobs_encode(data: bytes) -> bytes:
    """COBS-encode ``data``: the result holds no 0x00 byte."""
    if len(data) < 254:
        return bytes(_cobs_short(data, b""))
    out = bytearray()
    blocks = bytes(data).split(b"\x00")
    for i, block in enumerate(blocks):
        last = i == len(blocks) - 1
        while len(block) >= 254:
            out.append(0xFF)
            out += block[:254]
            block = block[254:]
            if not block and last:  # textbook COBS: a full last run needs no closing code
                return bytes(out)
        out.append(len(block) + 1)
        out += block
    return bytes(out)


def _cobs_short(data: bytes, head: bytes = b"\x00") -> bytearray:
    """``head`` then COBS of ``data`` (under 254 bytes: no run can fill a block, so every block
    is its code then its bytes): each zero becomes the code of the block after it, in place."""
    out = bytearray(head)
    pos = len(out)
    out += b"\x00"
    out += data
    for block in bytes(data).split(b"\x00"):
        code = len(block) + 1
        out[pos] = code
        pos += code
    return out


def cobs_decode(data: bytes) -> bytes:
    """Reverse :func:`cobs_encode`; raises :class:`CobsError` on a zero byte or a code that overruns."""
    if b"\x00" in data:
        raise CobsError(f"0x00 at byte {bytes(data).index(0)} inside a COBS block", data)
    n = len(data)
    if n and b"\xff" not in data:
        # no 0xFF code, so every block but the last ends in a zero that sits where the next
        # code byte is: overwrite those codes in place instead of joining slices
        out = bytearray(data)
        i = 0
        while True:
            code = data[i]
            end = i + code
            if end > n:
                raise CobsError(f"COBS code 0x{code:02x} at byte {i} needs {code - 1} bytes, {n - i - 1} remain", data)
            if end == n:
                del out[0]
                return bytes(out)
            out[end] = 0
            i = end
    out = bytearray()
    i = 0
    while i < n:
        code = data[i]
        end = i + code
        if end > n:
            raise CobsError(f"COBS code 0x{code:02x} at byte {i} needs {code - 1} bytes, {n - i - 1} remain", data)
        out += data[i + 1 : end]
        i = end
        if code != 0xFF and i < n:
            out.append(0)
    return bytes(out)


def frame_bytes(frame: Frame) -> bytes:
    """The frame before COBS: header, payload, CRC."""
    if len(frame.payload) > MAX_PAYLOAD:
        raise ValueError(f"payload of {len(frame.payload)} bytes exceeds MAX_PAYLOAD ({MAX_PAYLOAD})")
    body = _HEADER.pack(frame.kind, frame.seq, frame.ack, len(frame.payload)) + frame.payload
    return body + _CRC.pack(crc16(body))


def encode_frame(frame: Frame) -> bytes:
    """The frame as sent on the wire: ``00 COBS(frame_bytes) 00``."""
    return wire_frame(frame.kind, frame.seq, frame.ack, frame.payload)


def wire_frame(kind: int, seq: int, ack: int, payload: bytes) -> bytes:
    """:func:`encode_frame` of ``Frame(kind, seq, ack, payload)`` without making the Frame (the
    link sends every frame through here)."""
    n = len(payload)
    if n > MAX_PAYLOAD:
        raise ValueError(f"payload of {n} bytes exceeds MAX_PAYLOAD ({MAX_PAYLOAD})")
    body = _HEADER.pack(kind, seq, ack, n) + payload
    body += _CRC.pack(crc16(body))
    if n < 254 - HEADER_LEN - CRC_LEN:  # a card's frame: COBS in place, the delimiters around it
        out = _cobs_short(body)
        out.append(0)
        return bytes(out)
    return b"\x00" + cobs_encode(body) + b"\x00"


def parse_frame(raw: bytes, shown: bytes | None = None) -> Frame:
    """The frame in ``raw`` (already COBS-decoded). Errors show ``shown`` (default ``raw``)."""
    shown = raw if shown is None else shown
    if len(raw) < HEADER_LEN + CRC_LEN:
        raise FrameTooShort(f"frame of {len(raw)} bytes, at least {HEADER_LEN + CRC_LEN} needed", shown)
    if len(raw) > MAX_FRAME_LEN:
        raise FrameTooLong(f"frame of {len(raw)} bytes exceeds MAX_FRAME_LEN ({MAX_FRAME_LEN})", shown)
    (got,) = _CRC.unpack_from(raw, len(raw) - CRC_LEN)
    want = crc16(raw[:-CRC_LEN])
    if got != want:
        raise CrcMismatch(f"CRC 0x{got:04x} received, 0x{want:04x} computed", shown)
    kind, seq, ack, length = _HEADER.unpack_from(raw)
    held = len(raw) - HEADER_LEN - CRC_LEN
    if length != held:
        raise LengthMismatch(f"length field says {length} payload bytes, frame holds {held}", shown)
    frame_kind = _KINDS.get(kind)
    if frame_kind is None:
        raise UnknownFrameKind(f"frame kind 0x{kind:02x} is not one of {[hex(k) for k in FrameKind]}", shown)
    return Frame(frame_kind, seq, ack, bytes(raw[HEADER_LEN:-CRC_LEN]))


def decode_frame(encoded: bytes) -> Frame:
    """The frame in one COBS segment (the bytes between two delimiters)."""
    if len(encoded) > MAX_ENCODED_LEN:
        raise FrameTooLong(f"{len(encoded)} bytes between delimiters, at most {MAX_ENCODED_LEN}", encoded)
    return parse_frame(cobs_decode(encoded), shown=encoded)


#: a frame as its fields: (kind, seq, ack, payload)
FrameFields = tuple[FrameKind, int, int, bytes]


def _quick_fields(segment: bytes) -> FrameFields | None:
    """:func:`decode_frame` of a COBS segment under 255 bytes that holds no 0x00 and is a good
    frame, as its fields, in one pass; None for anything else (a code 0 ends the walk: None) (:func:`decode_frame` then says
    what is wrong, or reads a longer frame). Under 255 bytes no COBS code can be 0xFF (it
    would overrun), so every block but the last ends in a zero, written where the next code
    sits. The CRC (no final XOR) of a frame with its own CRC appended is 0 exactly when the
    CRC matches."""
    n = len(segment)
    if n > 254:
        return None
    raw = bytearray(segment)
    i = 0
    while True:
        end = i + segment[i]
        if end >= n or end == i:  # a code 0 (a segment that is no COBS segment) would never advance
            break
        raw[end] = 0
        i = end
    if end != n or n <= HEADER_LEN + CRC_LEN:
        return None
    del raw[0]
    kind = _KINDS.get(raw[0])
    if kind is None or raw[3] << 8 | raw[4] != n - 1 - HEADER_LEN - CRC_LEN or crc16(raw):
        return None
    return kind, raw[1], raw[2], bytes(raw[HEADER_LEN:-CRC_LEN])


@dataclass(slots=True)
class DecoderStats:
    frames: int = 0
    cobs_errors: int = 0
    crc_errors: int = 0
    too_short: int = 0
    oversize: int = 0
    unknown_kind: int = 0
    length_errors: int = 0
    bytes_discarded: int = 0  # every byte of every rejected segment, and of over-long runs

    @property
    def errors(self) -> int:
        return sum(getattr(self, name) for name in ERROR_COUNTERS.values())

    def snapshot(self) -> "DecoderStats":
        return replace(self)


#: each refusal's counter in the decoder's stats (framing2 adds its own)
ERROR_COUNTERS = {
    CobsError: "cobs_errors",
    CrcMismatch: "crc_errors",
    FrameTooShort: "too_short",
    FrameTooLong: "oversize",
    UnknownFrameKind: "unknown_kind",
    LengthMismatch: "length_errors",
}


class FrameDecoder:
    """Turns a byte stream, in chunks of any size, into frames; never raises, never grows unbounded.

    Each rejected segment is counted in :attr:`stats` and passed to ``on_error``. A run of
    more than :data:`MAX_ENCODED_LEN` bytes without a delimiter is dropped as it arrives and
    counted once; decoding resumes after the next delimiter.
    """

    def __init__(self, on_error: Callable[[FrameError], None] | None = None) -> None:
        self.stats = DecoderStats()
        self._on_error = on_error
        self._buf = bytearray()
        self._overflowing = False  # inside an over-long run: drop until the next delimiter

    def feed(self, data: bytes) -> list[Frame]:
        return [Frame(*fields) for fields in self.feed_fields(data)]

    def feed_fields(self, data: bytes) -> list[FrameFields]:
        """:meth:`feed` with each frame as its fields ``(kind, seq, ack, payload)``, no Frame made
        (the link reads every frame through here)."""
        frames: list[FrameFields] = []
        if b"\x00" not in data:
            self._extend(data)
            return frames
        parts = bytes(data).split(b"\x00")
        self._extend(parts[0])
        self._segment_done(bytes(self._buf), frames)
        self._buf.clear()
        stats = self.stats
        # not inside an over-long run here: the first segment ended any, and each part below
        # ends its own (its delimiter came in this chunk)
        for part in parts[1:-1]:
            if not part:  # the delimiter that closes one frame and the one that opens the next
                continue
            if len(part) > MAX_ENCODED_LEN:  # the same rule as for a run that spans chunks
                self._overflow(len(part), part)
                self._overflowing = False
                continue
            fields = _quick_fields(part)
            if fields is None:
                self._decode_slowly(part, frames)
            else:
                frames.append(fields)
                stats.frames += 1
        self._extend(parts[-1])
        return frames

    def pending(self) -> int:
        """Bytes held waiting for a delimiter (at most MAX_ENCODED_LEN)."""
        return len(self._buf)

    def _extend(self, data: bytes) -> None:
        if self._overflowing:
            self.stats.bytes_discarded += len(data)
            return
        if len(self._buf) + len(data) > MAX_ENCODED_LEN:  # never copy more than the bound
            start = (bytes(self._buf[:HEX_SHOWN]) + bytes(data[:HEX_SHOWN]))[:HEX_SHOWN]
            self._overflow(len(self._buf) + len(data), start)
            self._buf.clear()
        else:
            self._buf += data

    def _overflow(self, n: int, data: bytes) -> None:
        self._overflowing = True
        self.stats.bytes_discarded += n
        why = f"no delimiter within {MAX_ENCODED_LEN} bytes, discarding until the next; the run starts"
        self._report(FrameTooLong(why, data[:HEX_SHOWN]))

    def _segment_done(self, segment: bytes, frames: list[FrameFields]) -> None:
        if self._overflowing:
            self._overflowing = False
            return
        if not segment:
            return
        fields = _quick_fields(segment)
        if fields is None:
            self._decode_slowly(segment, frames)
        else:
            frames.append(fields)
            self.stats.frames += 1

    def _decode_slowly(self, segment: bytes, frames: list[FrameFields]) -> None:
        """A segment :func:`_quick_fields` did not read: a longer frame, or what is wrong with it."""
        try:
            frame = decode_frame(segment)
            frames.append((frame.kind, frame.seq, frame.ack, frame.payload))
            self.stats.frames += 1
        except FrameError as exc:
            self.stats.bytes_discarded += len(segment)
            self._report(exc)

    def _report(self, exc: FrameError) -> None:
        setattr(self.stats, ERROR_COUNTERS[type(exc)], getattr(self.stats, ERROR_COUNTERS[type(exc)]) + 1)
        if self._on_error is not None:
            self._on_error(exc)
