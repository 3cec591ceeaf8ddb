"""Typed protocol messages, both directions, and their byte encoding.

A message travels as the payload of one link DATA frame: ``[type u8][body]``. Each message
class declares its type code and its fields (``Annotated[T, codec]``, packed in declaration
order, see :mod:`firmware_bridge.wire_types`). ``encode(msg)`` and ``decode(payload)`` are
the only entry points; the table of codes and layouts is in docs/protocol.md.

Type codes: 0x01-0x0F common, 0x10-0x2F shuffler, 0x30-0x4F shoe reader, 0x50-0x5F firmware.
Direction is documented per class (H = host, D = device).
"""
from __future__ import annotations

import dataclasses
import enum
import operator
import struct
import typing
from typing import Annotated, ClassVar

from core.cards import Card, Orientation
from core.errors import hex_preview
from firmware_bridge.errors import ProtocolError
from firmware_bridge.wire_types import (
    U8,
    U16,
    U32,
    Blob,
    BodyError,
    Bool,
    CardCounts,
    CardField,
    Composition,
    Enum8,
    FieldCodec,
    Fixed,
    Text,
)

#: Protocol version this host speaks. A peer with another major version is refused.
PROTOCOL_MAJOR = 1
PROTOCOL_MINOR = 1  # 1.1: FirmwareAllowDowngrade, numbered events (Event ...), request ids (Request/Answer)


class MessageDecodeError(ProtocolError, ValueError):
    """A payload that is not a valid message; the text shows the payload in hex."""

    def __init__(self, reason: str, payload: bytes) -> None:
        super().__init__(f"bad message payload ({len(payload)} bytes: {hex_preview(payload)}): {reason}")
        self.reason = reason
        self.payload = bytes(payload)


class DeviceRole(enum.IntEnum):
    SHUFFLER = 1
    SHOE = 2


class DeviceState(enum.IntEnum):
    """What a device says it is doing, in STATUS."""

    IDLE = 0
    SHUFFLING = 1
    READY = 2  # shuffler: a verified stack is waiting; shoe: loaded
    DEALING = 3
    FAULT = 4
    UPDATING = 5
    EMPTY = 6
    SELF_TEST = 7


class FaultCode(enum.IntEnum):
    """Faults either device can report. ``position`` in a fault names a stack position when relevant."""

    JAM = 1
    DOOR_OPEN = 2
    FACE_UP_CARD = 3
    CARD_COUNT_MISMATCH = 4
    SENSOR = 5
    MOTOR = 6
    POWER_RESTORED = 7
    CARD_PUSHED_BACK = 8
    COVER_OPEN = 9


class DropReason(enum.IntEnum):
    """Why a device cannot send events again (EventsDropped)."""

    OVERFLOW = 1  # its event buffer was full: the oldest unconfirmed events made room
    CONFIRMED = 2  # a host confirmed them as journaled before: the device let them go


class FirmwareStage(enum.IntEnum):
    BEGIN = 1
    CHUNK = 2
    COMMIT = 3
    ABORT = 4
    ALLOW_DOWNGRADE = 5


@dataclasses.dataclass(frozen=True, slots=True)
class Message:
    TYPE: ClassVar[int]
    FIELDS: ClassVar[tuple[tuple[str, FieldCodec], ...]]


_REGISTRY: dict[int, type[Message]] = {}



_Struct = struct.Struct  # (a _FixedBody field is named struct)


@dataclasses.dataclass(frozen=True, slots=True)
class _FixedBody:
    """A message type whose fields all have a fixed width: its body as one struct, read and
    written in one step (the card path: CardRead, Heartbeat, Status, ...)."""

    struct: struct.Struct
    read: tuple[typing.Callable[[int], typing.Any] | None, ...]
    write: tuple[typing.Callable[[typing.Any], int] | None, ...]
    #: the field values of a message, as a tuple, in one C call
    values: typing.Callable[[typing.Any], tuple[typing.Any, ...]]
    #: (position, write) of the fields whose value is not the integer written (a card, an enum)
    converted: tuple[tuple[int, typing.Callable[[typing.Any], int]], ...]
    #: the message class, the body without its type byte as one struct, and (position, read) of
    #: the fields whose value is not the integer read (KeyError for a byte that is none)
    cls: type[Message]
    #: ``cls(*values)``, for the card path's messages written out (see :func:`_maker`)
    make: typing.Callable[..., Message]
    body: _Struct
    reads: tuple[tuple[int, typing.Callable[[int], typing.Any]], ...]


_FIXED: dict[int, _FixedBody] = {}


_C = typing.TypeVar("_C", bound=Message)
_NEW = object.__new__


def _maker(cls: type[Message], names: list[str]) -> typing.Callable[..., Message]:
    """``cls(*values)`` for a message of 2 or 4 fields (CardRead and the shoe's other events) written
    out, as devices.tracker.inputs.DeviceMessage's: one is decoded for every card read, and the
    frozen dataclass's own __init__ looks object.__setattr__ up for every field. Others: ``cls``."""
    if hasattr(cls, "__post_init__"):  # what a message checks as it is made is not to be skipped
        return cls
    setters = [vars(cls)[name].__set__ for name in names]
    if len(setters) == 4:
        set_a, set_b, set_c, set_d = setters

        def make4(a: typing.Any, b: typing.Any, c: typing.Any, d: typing.Any) -> Message:
            msg = _NEW(cls)
            set_a(msg, a)
            set_b(msg, b)
            set_c(msg, c)
            set_d(msg, d)
            return msg
        return make4
    if len(setters) == 2:
        set_a, set_b = setters

        def make2(a: typing.Any, b: typing.Any) -> Message:
            msg = _NEW(cls)
            set_a(msg, a)
            set_b(msg, b)
            return msg
        return make2
    return cls


@typing.dataclass_transform(frozen_default=True)
def _message(code: int) -> typing.Callable[[type[_C]], type[_C]]:
    """Register a message class under its type code and read its field codecs once.

    ``dataclass_transform`` tells the type checker that a decorated class is a frozen dataclass.
    """

    def register(cls: type[_C]) -> type[_C]:
        cls = dataclasses.dataclass(frozen=True, slots=True)(cls)
        if code in _REGISTRY:
            raise RuntimeError(f"type code 0x{code:02x} used twice: {_REGISTRY[code].__name__}, {cls.__name__}")
        hints = typing.get_type_hints(cls, include_extras=True)
        cls.TYPE = code
        cls.FIELDS = tuple((f.name, hints[f.name].__metadata__[0]) for f in dataclasses.fields(cls))
        _REGISTRY[code] = cls
        layouts = [codec.fixed_layout() for _, codec in cls.FIELDS]
        fixed = [layout for layout in layouts if layout is not None]
        if len(fixed) == len(layouts):
            names = [name for name, _ in cls.FIELDS]
            getter = operator.attrgetter(*names) if len(names) > 1 else None
            values = ((lambda msg: ()) if not names else getter if getter is not None
                      else (lambda msg, name=names[0]: (getattr(msg, name),)))
            _FIXED[code] = _FixedBody(struct.Struct(">B" + "".join(f.fmt for f in fixed)),
                                      tuple(f.read for f in fixed), tuple(f.write for f in fixed), values,
                                      tuple((i, f.write) for i, f in enumerate(fixed) if f.write is not None),
                                      cls, _maker(cls, names), struct.Struct(">" + "".join(f.fmt for f in fixed)),
                                      tuple((i, f.read) for i, f in enumerate(fixed) if f.read is not None))
        return cls

    return register


# ---- common ---------------------------------------------------------------------------


@_message(0x01)
class Hello(Message):
    """H->D: first message after a link reset; the device answers with Ident."""

    protocol_major: Annotated[int, U8]
    protocol_minor: Annotated[int, U8]
    host: Annotated[str, Text()]


@_message(0x02)
class Ident(Message):
    """D->H: who the device is. ``boot_id`` changes at every device boot, so a reboot shows."""

    role: Annotated[DeviceRole, Enum8(DeviceRole)]
    model: Annotated[str, Text()]
    serial: Annotated[str, Text()]
    firmware_version: Annotated[str, Text()]
    protocol_major: Annotated[int, U8]
    protocol_minor: Annotated[int, U8]
    boot_id: Annotated[int, U32]


@_message(0x03)
class Heartbeat(Message):
    """Either way, periodically: proof of life."""

    uptime_ms: Annotated[int, U32]


@_message(0x04)
class StatusRequest(Message):
    """H->D: ask for Status."""


@_message(0x05)
class Status(Message):
    """D->H: the device's state, its active fault (0 = none) and the cards it holds."""

    state: Annotated[DeviceState, Enum8(DeviceState)]
    fault: Annotated[int, U8]
    cards_held: Annotated[int, U16]
    uptime_ms: Annotated[int, U32]


@_message(0x06)
class Refused(Message):
    """D->H: a command the device will not carry out now (e.g. start shuffle with the door open)."""

    request_type: Annotated[int, U8]
    reason: Annotated[str, Text()]


# ---- protocol 1.1: numbered events and request ids (docs/protocol.md §3.2, §3.3) ----------


class InnerMessage(FieldCodec):
    """The rest of the payload is one whole message (type byte and fields), not an envelope."""

    def pack(self, value: Message) -> bytes:
        if type(value) in ENVELOPES:
            raise BodyError(f"{type(value).__name__} cannot travel inside another envelope")
        return encode(value)

    def unpack(self, buf: bytes, offset: int) -> tuple[Message, int]:
        if offset < len(buf) and _REGISTRY.get(buf[offset]) in ENVELOPES:
            raise BodyError(f"byte {offset} is 0x{buf[offset]:02x}, an envelope inside an envelope")
        try:
            return decode(buf[offset:]), len(buf)
        except MessageDecodeError as exc:
            raise BodyError(f"inner message: {exc.reason}") from None


@_message(0x07)
class Event(Message):
    """D->H: an event that must not be lost, numbered: ``index`` counts the device's events
    from 1 and never restarts (persisted). Only when both sides speak 1.1."""

    index: Annotated[int, U32]
    message: Annotated[Message, InnerMessage()]


@_message(0x08)
class EventsJournaled(Message):
    """H->D: every event up to ``up_to_index`` is journaled: the device may forget them."""

    up_to_index: Annotated[int, U32]


#: ResumeEvents' journaled_index of a host that keeps no journal and has none of this device's
#: events yet: the device lets go of what it kept and sends only new events. A device understands
#: it; no host here sends it, as it lets events go that no journal has (a host without a journal
#: says 0: DeviceConnection)
NO_JOURNAL = 0xFFFFFFFF


@_message(0x09)
class ResumeEvents(Message):
    """H->D: right after each handshake: events up to ``journaled_index`` are journaled
    (as EventsJournaled); send every later one again, in order, before any new one."""

    journaled_index: Annotated[int, U32]


@_message(0x0A)
class EventsDropped(Message):
    """D->H: the events ``first_index`` .. ``first_index + count - 1`` that the host asked for
    again are gone (not numbered itself; sent before the resent events)."""

    first_index: Annotated[int, U32]
    count: Annotated[int, U32]
    reason: Annotated[DropReason, Enum8(DropReason)]


@_message(0x0B)
class Request(Message):
    """H->D: ``message`` as a request whose answers carry ``request_id`` (1.1)."""

    request_id: Annotated[int, U16]
    message: Annotated[Message, InnerMessage()]


@_message(0x0C)
class Answer(Message):
    """D->H: an immediate answer (or Refused) to the Request with ``request_id`` (1.1)."""

    request_id: Annotated[int, U16]
    message: Annotated[Message, InnerMessage()]


#: messages that carry another message; they never nest
ENVELOPES: frozenset[type[Message]] = frozenset({Event, Request, Answer})
if any(_REGISTRY[code] in ENVELOPES for code in _FIXED):  # decode() reads an Event's fixed body as not one
    raise RuntimeError("an envelope's body cannot be fixed-width")


# ---- shuffler -------------------------------------------------------------------------


@_message(0x10)
class StartShuffle(Message):
    """H->D: shuffle and verify the loaded cards as a shoe of ``decks`` decks."""

    decks: Annotated[int, U8]


@_message(0x11)
class ShuffleProgress(Message):
    """D->H: cards counted so far."""

    cards_counted: Annotated[int, U16]
    percent: Annotated[int, U8]


@_message(0x12)
class ShuffleComplete(Message):
    """D->H: shuffle done. The composition is a count per card, never the order."""

    card_count: Annotated[int, U16]
    composition: Annotated[dict, Composition()]


@_message(0x13)
class DeckCheckResult(Message):
    """D->H: verification of the shuffled stack against ``decks`` full decks."""

    ok: Annotated[bool, Bool()]
    decks: Annotated[int, U8]
    missing: Annotated[tuple, CardCounts()]
    extra: Annotated[tuple, CardCounts()]
    unrecognised: Annotated[int, U8]  # cards the camera could not identify (foreign backs, damage)


@_message(0x14)
class Fault(Message):
    """D->H: a fault. ``position`` is the stack position concerned (0 when none)."""

    code: Annotated[FaultCode, Enum8(FaultCode)]
    position: Annotated[int, U16]
    detail: Annotated[str, Text()]


@_message(0x15)
class ClearFault(Message):
    """H->D: a technician or supervisor asks the device to clear a fault."""

    code: Annotated[FaultCode, Enum8(FaultCode)]


@_message(0x16)
class FaultCleared(Message):
    """D->H: the fault is gone."""

    code: Annotated[FaultCode, Enum8(FaultCode)]


@_message(0x17)
class CountersRequest(Message):
    """H->D: ask for the lifetime counters."""


@_message(0x18)
class Counters(Message):
    """D->H: lifetime counters."""

    shuffles: Annotated[int, U32]
    cards: Annotated[int, U32]
    jams: Annotated[int, U32]
    faults: Annotated[int, U32]


@_message(0x19)
class SelfTest(Message):
    """H->D: run the built-in self-test."""


@_message(0x1A)
class SelfTestResult(Message):
    """D->H: self-test outcome."""

    passed: Annotated[bool, Bool()]
    detail: Annotated[str, Text()]


# ---- shoe reader ----------------------------------------------------------------------


@_message(0x30)
class CardRead(Message):
    """D->H: a card left the shoe. ``index`` counts cards out of this shoe from 1."""

    index: Annotated[int, U16]
    card: Annotated[Card, CardField()]
    orientation: Annotated[Orientation, Enum8(Orientation)]
    device_time_ms: Annotated[int, U32]


@_message(0x31)
class UnreadableCard(Message):
    """D->H: a card left the shoe but could not be read."""

    index: Annotated[int, U16]
    device_time_ms: Annotated[int, U32]


@_message(0x32)
class CutCardSeen(Message):
    """D->H: the cut card came out: the round in progress is the last of the shoe."""

    index: Annotated[int, U16]
    device_time_ms: Annotated[int, U32]


@_message(0x33)
class ShoeLoaded(Message):
    """D->H: cards were loaded into the shoe."""

    device_time_ms: Annotated[int, U32]


@_message(0x34)
class ShoeEmpty(Message):
    """D->H: no cards left; ``cards_out`` is how many left the shoe."""

    cards_out: Annotated[int, U16]
    device_time_ms: Annotated[int, U32]


@_message(0x35)
class Calibrate(Message):
    """H->D: recalibrate the optical reader."""


@_message(0x36)
class CalibrationResult(Message):
    """D->H: calibration outcome."""

    ok: Annotated[bool, Bool()]
    detail: Annotated[str, Text()]


# ---- firmware -------------------------------------------------------------------------


@_message(0x50)
class FirmwareBegin(Message):
    """H->D: start a transfer. The device checks the signature again before committing."""

    total_size: Annotated[int, U32]
    chunk_size: Annotated[int, U16]
    sha256: Annotated[bytes, Fixed(32)]
    signature: Annotated[bytes, Fixed(64)]
    header: Annotated[bytes, Blob()]


@_message(0x51)
class FirmwareChunk(Message):
    """H->D: one chunk at ``offset`` with its CRC-32 (zlib.crc32)."""

    offset: Annotated[int, U32]
    crc32: Annotated[int, U32]
    data: Annotated[bytes, Blob()]


@_message(0x52)
class FirmwareCommit(Message):
    """H->D: all chunks sent; verify SHA-256 and signature, install, reboot."""


@_message(0x53)
class FirmwareAbort(Message):
    """H->D: abandon the transfer; the running firmware stays."""

    reason: Annotated[str, Text()]


@_message(0x54)
class FirmwareResult(Message):
    """D->H: the answer to each firmware step."""

    stage: Annotated[FirmwareStage, Enum8(FirmwareStage)]
    ok: Annotated[bool, Bool()]
    offset: Annotated[int, U32]
    detail: Annotated[str, Text()]


@_message(0x55)
class FirmwareAllowDowngrade(Message):
    """H->D: the next transfer may install a lower version than the running one, as the
    technician named here decided; good for that one FirmwareBegin (new in protocol 1.1)."""

    technician: Annotated[str, Text()]


#: what a device reports as a numbered Event when both sides speak 1.1: what happened to cards
#: and to the device, which the host journals. Everything else is status (Heartbeat, Status,
#: ShuffleProgress, Counters, answers), current the next time it is sent, and is not numbered.
EVENT_MESSAGES: frozenset[type[Message]] = frozenset({
    CardRead, UnreadableCard, CutCardSeen, ShoeLoaded, ShoeEmpty, Fault, FaultCleared, ShuffleComplete,
    DeckCheckResult,
})


# ---- codec ----------------------------------------------------------------------------


def encode(msg: Message) -> bytes:
    """The link payload for ``msg``: type byte then fields in declaration order."""
    if type(msg) is Event and type(msg.message) not in ENVELOPES:  # the card path: Event(CardRead) and its kin
        try:
            head = _EVENT_HEAD.pack(Event.TYPE, msg.index)
        except struct.error:
            pass  # an index that does not fit: the field-by-field path below names it
        else:
            return head + encode(msg.message)
    fixed = _FIXED.get(msg.TYPE)
    if fixed is not None:
        values = fixed.values(msg)
        if fixed.converted:
            values = list(values)  # type: ignore[assignment]
            for i, write in fixed.converted:
                values[i] = write(values[i])  # type: ignore[index]
        try:
            return fixed.struct.pack(msg.TYPE, *values)
        except struct.error:
            pass  # a value that does not fit: the field-by-field path below names it
    try:
        return bytes([msg.TYPE]) + b"".join(codec.pack(getattr(msg, name)) for name, codec in msg.FIELDS)
    except BodyError as exc:
        raise ValueError(f"cannot encode {type(msg).__name__}: {exc}") from None


#: an Event's type byte and index, before its inner message
_EVENT_HEAD = struct.Struct(">BI")
#: ``Event(index, message)`` written out (:func:`_maker`): one is decoded for every card read
_MAKE_EVENT = _maker(Event, ["index", "message"])


def _decode_fixed(payload: bytes, offset: int) -> Message | None:
    """The fixed-width message from ``offset`` to the end of ``payload`` in one step, or None
    where the field-by-field path must read it (another type, another length, a value out of
    range: that path names the defect)."""
    fixed = _FIXED.get(payload[offset])
    if fixed is None or len(payload) - offset != fixed.struct.size:
        return None
    values: typing.Sequence[typing.Any] = fixed.body.unpack_from(payload, offset + 1)
    if fixed.reads:
        read_values = list(values)
        try:
            for i, read in fixed.reads:
                read_values[i] = read(read_values[i])
        except KeyError:
            return None
        values = read_values
    return fixed.make(*values)


def decode(payload: bytes) -> Message:
    """The message in a link payload; any defect raises :class:`MessageDecodeError`."""
    if not payload:
        raise MessageDecodeError("empty payload, expected a type byte", payload)
    cls = _REGISTRY.get(payload[0])
    if cls is None:
        raise MessageDecodeError(f"unknown message type 0x{payload[0]:02x}", payload)
    if cls is Event:  # the card path: Event(CardRead) and its kin (an Event's body is never fixed)
        if len(payload) > _EVENT_HEAD.size:
            inner = _decode_fixed(payload, _EVENT_HEAD.size)
            if inner is not None:  # never an envelope: an envelope's body is not fixed-width
                return _MAKE_EVENT(_EVENT_HEAD.unpack_from(payload)[1], inner)
    else:
        quick = _decode_fixed(payload, 0)
        if quick is not None:
            return quick
    values = {}
    offset = 1
    try:
        for name, codec in cls.FIELDS:
            values[name], offset = codec.unpack(payload, offset)
    except BodyError as exc:
        raise MessageDecodeError(f"{cls.__name__}.{name}: {exc}", payload) from None
    if offset != len(payload):
        raise MessageDecodeError(f"{cls.__name__} ends at byte {offset}, {len(payload) - offset} bytes left over", payload)
    return cls(**values)


def message_types() -> dict[int, type[Message]]:
    """Every message class by type code (for docs and tests, and to name the message a device refused)."""
    return dict(_REGISTRY)
