"""Protocol 2.0 frames: a CRC-32C before the handshake, ChaCha20-Poly1305 after it.

The link's frames (DATA, ACK, NAK, RESET, RESET_ACK; seq and ack as in 1.1) in two forms,
told apart by the kind byte, COBS-stuffed and delimited as in 1.1 (:mod:`firmware_bridge.framing`):

- **plain** (kind ``0x20 | k``): ``[kind][seq][ack][length u16][payload][crc32c u32]``, sent
  before the handshake gave a session key, and always for RESET and RESET_ACK (a link reset
  ends the session: its keys are dropped and the handshake is done again);
- **tagged** (kind ``0x60 | k``, DATA, ACK and NAK only):
  ``[kind][seq][ack][length u16][counter u32][ciphertext][tag 16]``: the payload encrypted
  and authenticated with ChaCha20-Poly1305 (RFC 8439) under the direction's key, the nonce
  ``direction u8 || 00 * 7 || counter u32``, the associated data ``session id || header``
  (the 9 bytes before the ciphertext: kind, seq, ack, length, counter). ``counter`` numbers
  the frames one side sent in this session from 1.

Confidentiality because a card dealt face down (the dealer's hole card) crosses the cable
before anyone at the table sees it (docs/protocol.md, §9). A nonce is never used twice with
one key: each direction has its own key, new at every handshake (both sides' fresh X25519
keys and challenges go into it), and its counter only goes up, each frame sent (a resend
too) taking the next one; at the last counter the side stops sending (TagCounterExhausted)
and the same keys are never installed twice in one :class:`Framing2`.

A receiver with a session key refuses plain DATA at once, plain ACK and NAK once the first
tagged frame arrived (before that, the peer's last plain ACKs of the handshake are in flight),
and takes plain RESET and RESET_ACK always (someone who holds the cable can always break the
link; a reset only forces a new handshake). Each tagged frame's counter must be above the
last one taken, so a replayed, reordered or duplicated frame is refused; a frame of another
session or direction fails its tag. docs/protocol.md, §7, describes every byte.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from typing import Callable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from firmware_bridge.crc import crc16
from firmware_bridge.crc32c import crc32c
from firmware_bridge.errors import (
    CrcMismatch,
    FrameError,
    FrameReplayed,
    FrameTooLong,
    FrameTooShort,
    LegacyFrame,
    LengthMismatch,
    TagCounterExhausted,
    TagMismatch,
    UnauthenticatedFrame,
    UnknownFrameKind,
)
from firmware_bridge.framing import (
    ERROR_COUNTERS,
    MAX_ENCODED_LEN,
    MAX_FRAME_LEN,
    FrameFields,
    FrameKind,
    cobs_decode,
    cobs_encode,
)

VERSION_2 = 0x20  # set in every 2.0 kind byte: a 1.x decoder refuses the frame (unknown kind)
TAGGED = 0x40  # set in the kind byte of a frame that carries a counter, a ciphertext and a tag
PLAIN_HEADER_LEN = 5
TAGGED_HEADER_LEN = 9
CRC32C_LEN = 4
TAG_LEN = 16
NONCE_LEN = 12
SESSION_ID_LEN = 16
KEY_LEN = 32
#: the longest payload of a tagged frame: the frame stays within 1.1's MAX_FRAME_LEN
MAX_PAYLOAD_2 = MAX_FRAME_LEN - TAGGED_HEADER_LEN - TAG_LEN
#: the last counter a session may send; then it must be shaken hands anew
MAX_COUNTER = 0xFFFFFFFF

_PLAIN_HEADER = struct.Struct(">BBBH")
_TAGGED_HEADER = struct.Struct(">BBBHI")
_CRC32C = struct.Struct(">I")
_NONCE = struct.Struct(">B7xI")  # direction, seven zero bytes, counter

#: kinds that may be tagged (RESET and RESET_ACK end a session: always plain)
TAGGABLE = frozenset({FrameKind.DATA, FrameKind.ACK, FrameKind.NAK})
_PLAIN_KINDS = {VERSION_2 | int(k): k for k in FrameKind}
_TAGGED_KINDS = {VERSION_2 | TAGGED | int(k): k for k in TAGGABLE}
_LEGACY_KINDS = {int(k): k for k in FrameKind}


def plain_kind(kind: FrameKind) -> int:
    return VERSION_2 | int(kind)


def tagged_kind(kind: FrameKind) -> int:
    return VERSION_2 | TAGGED | int(kind)


def direction_of(send_key: bytes, receive_key: bytes) -> int:
    """The direction byte of the nonces sent under ``send_key``: 0 for the lower of the two keys
    (compared as bytes), 1 for the higher. Both sides compute the same from the same two keys,
    and the two directions never share a nonce even were they to share a key."""
    return 0 if send_key < receive_key else 1


def frame_nonce(direction: int, counter: int) -> bytes:
    """The 96-bit ChaCha20-Poly1305 nonce of the tagged frame ``counter`` of one direction."""
    return _NONCE.pack(direction, counter)


def plain_frame_bytes(kind: FrameKind, seq: int, ack: int, payload: bytes) -> bytes:
    """A plain 2.0 frame before COBS: header, payload, CRC-32C (big-endian) over both."""
    if len(payload) > MAX_FRAME_LEN - PLAIN_HEADER_LEN - CRC32C_LEN:
        raise ValueError(f"payload of {len(payload)} bytes does not fit a frame of {MAX_FRAME_LEN}")
    body = _PLAIN_HEADER.pack(plain_kind(kind), seq, ack, len(payload)) + payload
    return body + _CRC32C.pack(crc32c(body))


def tagged_frame_bytes(kind: FrameKind, seq: int, ack: int, payload: bytes, counter: int,
                       key: bytes, session_id: bytes, *, direction: int) -> bytes:
    """A tagged 2.0 frame before COBS: header with the counter, the payload encrypted, the
    Poly1305 tag; ``direction``: :func:`direction_of` the sender's two keys."""
    return _seal(ChaCha20Poly1305(key), session_id, direction, kind, seq, ack, payload, counter)



def opens_under(keys: SessionKeys, raw: bytes) -> bool:
    """Whether the tagged frame ``raw`` (before COBS) authenticates under ``keys`` as received:
    what tells a frame replayed from a session before the current one from a forged one."""
    if len(raw) < TAGGED_HEADER_LEN + TAG_LEN or not raw[0] & TAGGED:
        return False
    counter = _TAGGED_HEADER.unpack_from(raw)[4]
    try:
        ChaCha20Poly1305(keys.receive_key).decrypt(_NONCE.pack(1 - keys.send_direction, counter),
                                                   raw[TAGGED_HEADER_LEN:], keys.session_id + raw[:TAGGED_HEADER_LEN])
    except InvalidTag:
        return False
    return True


def _seal(aead: ChaCha20Poly1305, session_id: bytes, direction: int, kind: FrameKind, seq: int, ack: int,
          payload: bytes, counter: int) -> bytes:
    if kind not in TAGGABLE:
        raise ValueError(f"{kind.name} frames are never tagged")
    if len(payload) > MAX_PAYLOAD_2:
        raise ValueError(f"payload of {len(payload)} bytes exceeds MAX_PAYLOAD_2 ({MAX_PAYLOAD_2})")
    header = _TAGGED_HEADER.pack(tagged_kind(kind), seq, ack, len(payload), counter)
    return header + aead.encrypt(_NONCE.pack(direction, counter), payload, session_id + header)


@dataclass(frozen=True, slots=True)
class SessionKeys:
    """What a handshake gives one side: the key it seals with, the key it opens the peer's
    frames with, and the session id every frame's associated data binds in."""

    send_key: bytes
    receive_key: bytes
    session_id: bytes

    def __post_init__(self) -> None:
        if len(self.send_key) != KEY_LEN or len(self.receive_key) != KEY_LEN:
            raise ValueError(f"session keys are {KEY_LEN} bytes")
        if self.send_key == self.receive_key:
            raise ValueError("the two directions need different keys (a reflected frame would pass)")
        if len(self.session_id) != SESSION_ID_LEN:
            raise ValueError(f"a session id is {SESSION_ID_LEN} bytes")

    @property
    def send_direction(self) -> int:
        """The direction byte of the nonces this side sends with."""
        return direction_of(self.send_key, self.receive_key)

    def __repr__(self) -> str:  # never a key in a log line
        return f"SessionKeys(session_id={self.session_id.hex()})"


@dataclass(slots=True)
class Decoder2Stats:
    frames: int = 0
    tagged_frames: int = 0  # of ``frames``, the tagged ones whose tag verified
    cobs_errors: int = 0
    crc_errors: int = 0
    too_short: int = 0
    oversize: int = 0
    unknown_kind: int = 0
    length_errors: int = 0
    tag_errors: int = 0  # damaged, forged, another session's or direction's
    replayed: int = 0  # a good tag, a counter not above the last taken: replay or reordering
    unauthenticated: int = 0  # a plain frame where only tagged ones are taken
    legacy_frames: int = 0  # 1.x frames: the peer offers the older protocol
    bytes_discarded: int = 0

    @property
    def errors(self) -> int:
        return sum(getattr(self, name) for name in _COUNTER.values())

    def snapshot(self) -> "Decoder2Stats":
        return replace(self)


_COUNTER = {
    **ERROR_COUNTERS,
    TagMismatch: "tag_errors",
    FrameReplayed: "replayed",
    UnauthenticatedFrame: "unauthenticated",
    LegacyFrame: "legacy_frames",
}


class _Session:
    """The installed keys as the framing uses them: an AEAD object per direction (made once)."""

    __slots__ = ("keys", "seal", "open", "send_direction", "receive_direction")

    def __init__(self, keys: SessionKeys) -> None:
        self.keys = keys
        self.seal = ChaCha20Poly1305(keys.send_key)
        self.open = ChaCha20Poly1305(keys.receive_key)
        self.send_direction = keys.send_direction
        self.receive_direction = 1 - self.send_direction


class Framing2:
    """One side's 2.0 framing: what it writes (:meth:`wire_frame`) and reads (:meth:`decoder`),
    plain until :meth:`install` gives it the session's keys, plain again after :meth:`clear`."""

    max_payload = MAX_PAYLOAD_2

    def __init__(self) -> None:
        self._session: _Session | None = None
        self._sent = 0  # the counter of the last tagged frame sent
        self._taken = 0  # the counter of the last tagged frame taken
        self._locked = False  # a tagged frame arrived: plain ACK/NAK refused from now on
        self._tag_now = True  # send tagged frames once keys are installed (else: once locked)
        self._last_session_id: bytes | None = None  # the keys installed last: never again (a nonce reused)

    @property
    def keys(self) -> SessionKeys | None:
        return None if self._session is None else self._session.keys

    def install(self, keys: SessionKeys, *, tag_once_peer_does: bool = False) -> None:
        """From now on refuse plain DATA (and, once a tagged frame came, plain ACK and NAK), and
        send tagged frames: at once, or with ``tag_once_peer_does`` only once a tagged frame
        came (the device: the host derives the keys only from the IDENT2 the device sends
        plain, and resends of it must stay readable). Counters start over: new keys. The keys
        installed last are refused (ValueError): their counters would start over, and so
        would their nonces."""
        if keys.session_id == self._last_session_id:
            raise ValueError(f"session {keys.session_id.hex()} was installed here before: its nonces would repeat")
        self._session = _Session(keys)
        self._last_session_id = keys.session_id
        self._sent = self._taken = 0
        self._locked = False
        self._tag_now = not tag_once_peer_does

    def clear(self) -> None:
        """Drop the session's keys (the link was reset): plain frames again, until the next handshake."""
        self._session = None
        self._sent = self._taken = 0
        self._locked = False

    @property
    def counters_left(self) -> int | None:
        """Tagged frames this side may still send in this session (None: no session)."""
        return None if self._session is None else MAX_COUNTER - self._sent

    def frame_bytes(self, kind: FrameKind, seq: int, ack: int, payload: bytes) -> bytes:
        session = self._session
        if session is None or kind not in TAGGABLE or not (self._tag_now or self._locked):
            return plain_frame_bytes(kind, seq, ack, payload)
        if self._sent >= MAX_COUNTER:
            raise TagCounterExhausted(f"session {session.keys.session_id.hex()} sent {MAX_COUNTER} frames: "
                                      "shake hands again")
        counter = self._sent + 1
        raw = _seal(session.seal, session.keys.session_id, session.send_direction, kind, seq, ack, payload, counter)
        self._sent = counter
        return raw

    def wire_frame(self, kind: FrameKind, seq: int, ack: int, payload: bytes) -> bytes:
        """The frame as sent: ``00 COBS(frame) 00``; each call of a tagged kind uses a new counter."""
        return b"\x00" + cobs_encode(self.frame_bytes(kind, seq, ack, payload)) + b"\x00"

    def decoder(self, on_error: Callable[[FrameError], None] | None = None) -> "FrameDecoder2":
        return FrameDecoder2(self, on_error)

    def parse(self, raw: bytes, shown: bytes) -> FrameFields:
        """The fields of one COBS-decoded frame (a tagged one's payload decrypted), or the
        FrameError that says why it is refused."""
        if len(raw) < PLAIN_HEADER_LEN + CRC32C_LEN:
            raise FrameTooShort(f"frame of {len(raw)} bytes, at least {PLAIN_HEADER_LEN + CRC32C_LEN} needed", shown)
        if len(raw) > MAX_FRAME_LEN:
            raise FrameTooLong(f"frame of {len(raw)} bytes exceeds MAX_FRAME_LEN ({MAX_FRAME_LEN})", shown)
        kind_byte = raw[0]
        tagged = _TAGGED_KINDS.get(kind_byte)
        if tagged is not None:
            return self._parse_tagged(tagged, raw, shown)
        plain = _PLAIN_KINDS.get(kind_byte)
        if plain is not None:
            return self._parse_plain(plain, raw, shown)
        legacy = _LEGACY_KINDS.get(kind_byte)
        if legacy is not None and crc16(raw) == 0:
            raise LegacyFrame(f"a protocol 1.x {legacy.name} frame (its CRC-16 holds) on a 2.0 link", shown)
        raise UnknownFrameKind(f"frame kind 0x{kind_byte:02x} is no 2.0 kind", shown)

    def _parse_plain(self, kind: FrameKind, raw: bytes, shown: bytes) -> FrameFields:
        (got,) = _CRC32C.unpack_from(raw, len(raw) - CRC32C_LEN)
        want = crc32c(raw[:-CRC32C_LEN])
        if got != want:
            raise CrcMismatch(f"CRC-32C 0x{got:08x} received, 0x{want:08x} computed", shown)
        _, seq, ack, length = _PLAIN_HEADER.unpack_from(raw)
        held = len(raw) - PLAIN_HEADER_LEN - CRC32C_LEN
        if length != held:
            raise LengthMismatch(f"length field says {length} payload bytes, frame holds {held}", shown)
        if self._session is not None and kind not in (FrameKind.RESET, FrameKind.RESET_ACK):
            if kind is FrameKind.DATA or self._locked:
                raise UnauthenticatedFrame(f"a plain {kind.name} frame in an authenticated session", shown)
        return kind, seq, ack, bytes(raw[PLAIN_HEADER_LEN:-CRC32C_LEN])

    def _parse_tagged(self, kind: FrameKind, raw: bytes, shown: bytes) -> FrameFields:
        if len(raw) < TAGGED_HEADER_LEN + TAG_LEN:
            raise FrameTooShort(f"tagged frame of {len(raw)} bytes, at least {TAGGED_HEADER_LEN + TAG_LEN} needed",
                                shown)
        _, seq, ack, length, counter = _TAGGED_HEADER.unpack_from(raw)
        held = len(raw) - TAGGED_HEADER_LEN - TAG_LEN
        if length != held:
            raise LengthMismatch(f"length field says {length} payload bytes, frame holds {held}", shown)
        session = self._session
        if session is None:
            raise TagMismatch("a tagged frame, and no session key to open it with", shown)
        raw = bytes(raw)
        try:
            payload = session.open.decrypt(_NONCE.pack(session.receive_direction, counter), raw[TAGGED_HEADER_LEN:],
                                           session.keys.session_id + raw[:TAGGED_HEADER_LEN])
        except InvalidTag:
            raise TagMismatch(f"tag does not verify under session {session.keys.session_id.hex()}", shown) from None
        if counter <= self._taken:
            raise FrameReplayed(f"frame counter {counter}, already past {self._taken}: a replay or a reordering",
                                shown)
        self._taken = counter
        self._locked = True
        return kind, seq, ack, payload


class FrameDecoder2:
    """:class:`firmware_bridge.framing.FrameDecoder` for 2.0 frames: the same stream rules (split
    on 0x00, idle fill, a run longer than MAX_ENCODED_LEN dropped as it arrives), each segment
    one frame or exactly one counted error, checked by its :class:`Framing2`."""

    def __init__(self, framing: Framing2, on_error: Callable[[FrameError], None] | None = None) -> None:
        self.stats = Decoder2Stats()
        self._framing = framing
        self._on_error = on_error
        self._buf = bytearray()
        self._overflowing = False

    def feed_fields(self, data: bytes) -> list[FrameFields]:
        frames: list[FrameFields] = []
        parts = bytes(data).split(b"\x00")
        last = len(parts) - 1
        if not self._buf and not self._overflowing:
            # the common case, whole frames in one read: each part but the last is a segment
            for part in parts[:last]:
                if part:
                    if len(part) > MAX_ENCODED_LEN:
                        self._overflow_segment(part)
                    else:
                        self._segment(part, frames)
            tail = parts[last]
            if len(tail) > MAX_ENCODED_LEN:
                self._overflow(len(tail), tail[:48])
            else:
                self._buf += tail
            return frames
        for i, part in enumerate(parts):
            is_last = i == last
            if self._overflowing:
                self.stats.bytes_discarded += len(part)
                if not is_last:
                    self._overflowing = False
                continue
            if len(self._buf) + len(part) > MAX_ENCODED_LEN:
                self._overflow(len(self._buf) + len(part), bytes(self._buf[:48]) + part[:48])
                self._buf.clear()
                if not is_last:
                    self._overflowing = False
                continue
            self._buf += part
            if is_last:
                break
            segment = bytes(self._buf)
            self._buf.clear()
            if segment:
                self._segment(segment, frames)
        return frames

    def pending(self) -> int:
        return len(self._buf)

    def _segment(self, segment: bytes, frames: list[FrameFields]) -> None:
        try:
            raw = cobs_decode(segment)
            fields = self._framing.parse(raw, shown=segment)
        except FrameError as exc:
            self.stats.bytes_discarded += len(segment)
            self._report(exc)
            return
        frames.append(fields)
        self.stats.frames += 1
        if raw[0] & TAGGED:
            self.stats.tagged_frames += 1

    def _overflow_segment(self, segment: bytes) -> None:
        """A whole run between two delimiters longer than MAX_ENCODED_LEN: one counted error."""
        self.stats.bytes_discarded += len(segment)
        why = f"no delimiter within {MAX_ENCODED_LEN} bytes, discarding until the next; the run starts"
        self._report(FrameTooLong(why, segment[:48]))

    def _overflow(self, n: int, start: bytes) -> None:
        self._overflowing = True
        self.stats.bytes_discarded += n
        why = f"no delimiter within {MAX_ENCODED_LEN} bytes, discarding until the next; the run starts"
        self._report(FrameTooLong(why, start[:48]))

    def _report(self, exc: FrameError) -> None:
        name = _COUNTER[type(exc)]
        setattr(self.stats, name, getattr(self.stats, name) + 1)
        if self._on_error is not None:
            self._on_error(exc)
