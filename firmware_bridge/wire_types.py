"""Field codecs for message bodies: each knows how to pack one value and read it back.

Messages declare their fields with ``Annotated[T, <codec>]``; :mod:`firmware_bridge.messages`
reads those annotations once and packs bodies field by field. All integers are big-endian.
A short or malformed body raises :class:`BodyError`, which the message layer turns into a
``MessageDecodeError`` showing the whole payload in hex.
"""
from __future__ import annotations

import enum
import struct
from typing import Any, Callable, NamedTuple

from core.cards import ALL_CARDS, Card, CardCodeError
from core.errors import CarddError
from core.text import printable


class BodyError(CarddError, ValueError):
    """A field could not be read from a message body."""


class FixedLayout(NamedTuple):
    """A fixed-width field as one struct format character: ``read`` turns the integer read into
    the value and raises KeyError for one ``unpack`` would refuse; ``write`` is the integer
    ``pack`` would store (None for either: the integer as it is)."""

    fmt: str
    read: Callable[[int], Any] | None
    write: Callable[[Any], int] | None


class FieldCodec:
    """Packs one value; ``unpack`` returns (value, new offset)."""

    def pack(self, value: Any) -> bytes:
        raise NotImplementedError

    def unpack(self, buf: bytes, offset: int) -> tuple[Any, int]:
        raise NotImplementedError

    def fixed_layout(self) -> FixedLayout | None:
        """A field of fixed width as a struct format character (None: variable width). Lets a
        message of fixed-width fields be read and written with one precompiled struct (the card
        path); ``pack``/``unpack`` stay the reference and the path that names a defect."""
        return None


class Int(FieldCodec):
    def __init__(self, fmt: str) -> None:
        self._struct = struct.Struct(">" + fmt)
        self._kind = f"{'a signed' if fmt.islower() else 'an unsigned'} {self._struct.size * 8}-bit integer"

    def pack(self, value: int) -> bytes:
        try:
            return self._struct.pack(value)
        except struct.error:
            raise BodyError(f"value {value!r} does not fit the field ({self._kind})") from None

    def unpack(self, buf: bytes, offset: int) -> tuple[int, int]:
        end = offset + self._struct.size
        if end > len(buf):
            raise BodyError(f"body ends at byte {len(buf)}, field needs bytes {offset}..{end - 1}")
        return self._struct.unpack_from(buf, offset)[0], end

    def fixed_layout(self) -> FixedLayout:
        return FixedLayout(self._struct.format[1:], None, None)


U8, U16, U32 = Int("B"), Int("H"), Int("I")


class Bool(FieldCodec):
    def pack(self, value: bool) -> bytes:
        return b"\x01" if value else b"\x00"

    def unpack(self, buf: bytes, offset: int) -> tuple[bool, int]:
        raw, end = U8.unpack(buf, offset)
        if raw > 1:
            raise BodyError(f"byte {offset} is 0x{raw:02x}, a boolean must be 0x00 or 0x01")
        return bool(raw), end

    def fixed_layout(self) -> FixedLayout:
        return FixedLayout("B", {0: False, 1: True}.__getitem__, lambda value: 1 if value else 0)


class Enum8(FieldCodec):
    def __init__(self, enum_type: type[enum.IntEnum]) -> None:
        self.enum_type = enum_type
        self._members = {int(m): m for m in enum_type}

    def pack(self, value: enum.IntEnum) -> bytes:
        return U8.pack(int(value))

    def unpack(self, buf: bytes, offset: int) -> tuple[enum.IntEnum, int]:
        raw, end = U8.unpack(buf, offset)
        try:
            return self.enum_type(raw), end
        except ValueError:
            allowed = ", ".join(f"{m.value}={m.name}" for m in self.enum_type)
            raise BodyError(f"byte {offset} is {raw}, not a {self.enum_type.__name__} ({allowed})") from None

    def fixed_layout(self) -> FixedLayout:
        return FixedLayout("B", self._members.__getitem__, int)


class Blob(FieldCodec):
    """Length-prefixed bytes (u8 or u16 length)."""

    def __init__(self, length: Int = U16) -> None:
        self.length = length

    def pack(self, value: bytes) -> bytes:
        return self.length.pack(len(value)) + bytes(value)

    def unpack(self, buf: bytes, offset: int) -> tuple[bytes, int]:
        n, start = self.length.unpack(buf, offset)
        end = start + n
        if end > len(buf):
            raise BodyError(f"length prefix at byte {offset} says {n} bytes, only {len(buf) - start} remain")
        return bytes(buf[start:end]), end


class Text(FieldCodec):
    """UTF-8 text with a one-byte length: names, versions, details (at most 255 bytes).

    Decoded text is passed through :func:`core.text.printable`: this is where every string a
    device sends enters the host, so it is escaped here once and every consumer sees it safe.
    Decoding is therefore not the inverse of encoding for text with control characters."""

    _blob = Blob(U8)

    def pack(self, value: str) -> bytes:
        raw = value.encode("utf-8")
        if len(raw) > 255:
            raise BodyError(f"text of {len(raw)} bytes is longer than 255: {value[:40]!r}...")
        return self._blob.pack(raw)

    def unpack(self, buf: bytes, offset: int) -> tuple[str, int]:
        raw, end = self._blob.unpack(buf, offset)
        try:
            return printable(raw.decode("utf-8")), end
        except UnicodeDecodeError as exc:
            raise BodyError(f"text at byte {offset} is not UTF-8 (its byte {exc.start} is not)") from None


class Fixed(FieldCodec):
    """Exactly ``size`` raw bytes (digests, signatures)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def pack(self, value: bytes) -> bytes:
        if len(value) != self.size:
            raise BodyError(f"expected exactly {self.size} bytes, got {len(value)}")
        return bytes(value)

    def unpack(self, buf: bytes, offset: int) -> tuple[bytes, int]:
        end = offset + self.size
        if end > len(buf):
            raise BodyError(f"body ends at byte {len(buf)}, {self.size}-byte field needs bytes {offset}..{end - 1}")
        return bytes(buf[offset:end]), end


class CardField(FieldCodec):
    def pack(self, value: Card) -> bytes:
        return U8.pack(value.to_byte())

    def unpack(self, buf: bytes, offset: int) -> tuple[Card, int]:
        raw, end = U8.unpack(buf, offset)
        try:
            return Card.from_byte(raw), end
        except CardCodeError as exc:
            raise BodyError(f"byte {offset}: {exc}") from None

    def fixed_layout(self) -> FixedLayout:
        return FixedLayout("B", {card.to_byte(): card for card in ALL_CARDS}.__getitem__, lambda card: card.to_byte())


class Composition(FieldCodec):
    """A count per card: 52 bytes in :data:`ALL_CARDS` order. Counts, never an order."""

    def pack(self, value: dict[Card, int]) -> bytes:
        return bytes(U8.pack(value.get(card, 0))[0] for card in ALL_CARDS)

    def unpack(self, buf: bytes, offset: int) -> tuple[dict[Card, int], int]:
        end = offset + len(ALL_CARDS)
        if end > len(buf):
            raise BodyError(f"composition needs 52 bytes from byte {offset}, only {len(buf) - offset} remain")
        return dict(zip(ALL_CARDS, buf[offset:end])), end


class CardCounts(FieldCodec):
    """A short list of (card, count) pairs with a one-byte length: missing/extra cards."""

    _card = CardField()

    def pack(self, value: tuple[tuple[Card, int], ...]) -> bytes:
        if len(value) > 52:
            raise BodyError(f"{len(value)} card entries, at most 52")
        return U8.pack(len(value)) + b"".join(self._card.pack(c) + U8.pack(n) for c, n in value)

    def unpack(self, buf: bytes, offset: int) -> tuple[tuple[tuple[Card, int], ...], int]:
        n, pos = U8.unpack(buf, offset)
        out = []
        for _ in range(n):
            card, pos = self._card.unpack(buf, pos)
            count, pos = U8.unpack(buf, pos)
            out.append((card, count))
        return tuple(out), pos
