"""What one journal record is, and the canonical bytes its hash is taken over: ``SHA-256(prev ||
body)``, the body nine fields joined by 0x1F, none holding a control character.
docs/journal.md, "The hash chain", has the format and an auditor's version.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import msgspec

from devices.events import Event, Severity

from .errors import JournalEntryError

SEPARATOR = "\x1f"
GENESIS_HASH = bytes(32)  # the "previous hash" of the first record ever written
SEVERITIES = tuple(s.value for s in Severity)  # ordered: info < warning < alarm

# kinds the daemon writes; any lower-case identifier is accepted, except the journal's own
KIND_START = "start"
KIND_STOP = "stop"
KIND_EVENT = "event"
KIND_INPUT = "input"
KIND_COMMAND = "command"
KIND_EXPORT = "export"  # written only by Journal.export
KIND_PRUNE = "prune"  # written only by Journal.prune
RESERVED_KINDS = frozenset({KIND_EXPORT, KIND_PRUNE})
#: a card read and the first event it caused are ONE record (since schema version 2): the event's,
#: carrying the input under this key of its data. A card read is nearly every record of a day, so
#: this halves what the journal writes and a subscriber reads; every other input keeps a record of
#: its own (docs/journal.md "What a record holds")
INPUT_KEY = "input"
REASON_EXPORTED = "JOURNAL_EXPORTED"
REASON_PRUNED = "JOURNAL_PRUNED"

_KIND = re.compile(r"[a-z][a-z0-9_.-]{0,31}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_TEXT = 256


def is_header_text(text: object) -> bool:
    """Whether ``text`` may be a record's reason, source or who: at most MAX_TEXT characters,
    no control character (a person's name from the API becomes a ``who``)."""
    return isinstance(text, str) and len(text) <= MAX_TEXT and not _CONTROL.search(text)
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


#: json.dumps with options builds a new encoder on every call (about 3 us); this one is reused
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _chunk_encoder() -> Callable[[Any, int], Any]:
    """The C encoder ``_CANONICAL.encode`` makes anew on every call (half its time), made once.
    The same C code with the same options: the same text and the same errors."""
    make: Any = getattr(json.encoder, "c_make_encoder", None)  # not in the typeshed stubs
    if make is None:  # a Python without the C accelerator
        return lambda value, _: (_CANONICAL.encode(value),)
    encoder: Callable[[Any, int], Any] = make(
        {}, _CANONICAL.default, json.encoder.encode_basestring, None, _CANONICAL.key_separator,
        _CANONICAL.item_separator, True, False, False)
    return encoder


_encode_chunks = _chunk_encoder()

#: msgspec writes the canonical text of plain data (str keys, strings, ints, bools, None, lists,
#: objects) five times faster than the json module, the same bytes; but it formats floats
#: differently (1e16, not 1e+16) and also writes what json refuses (bytes, sets, datetimes,
#: Decimal, NaN as null). So its text counts only when it reads back, float-free, equal to the
#: value: anything else goes the json module's way (the reference), as before.
_SORTED_ENCODER = msgspec.json.Encoder(order="sorted")


class _FloatMet(Exception):
    """A float in the text read back: the json module formats it, not msgspec."""


def _no_float(_text: str) -> Any:
    raise _FloatMet


_PLAIN_DECODER = msgspec.json.Decoder(float_hook=_no_float)


def plain_canonical_json(value: dict[str, Any]) -> str | None:
    """:func:`canonical_json` of a dict of plain data, the fast way; None when it is not plain
    (then only :func:`canonical_json` gives its text, or says why there is none)."""
    try:
        text = _SORTED_ENCODER.encode(value)
        if _PLAIN_DECODER.decode(text) == value:
            return text.decode()
    except Exception:  # whatever the fast way refuses, the reference encodes or names
        pass
    return None


def canonical_json(value: Any, what: str) -> str:
    """The one text a JSON value is stored as: sorted keys, no spaces, UTF-8, no NaN."""
    if type(value) is dict:
        text = plain_canonical_json(value)
        if text is not None:
            return text
    return reference_canonical_json(value, what)


def reference_canonical_json(value: Any, what: str) -> str:
    """:func:`canonical_json` through the json module alone: the definition of the text."""
    global _encode_chunks
    try:
        return "".join(_encode_chunks(value, 0))
    except (TypeError, ValueError) as exc:
        _encode_chunks = _chunk_encoder()  # a failure may leave its circular-reference marks behind
        raise JournalEntryError(f"{what} is not JSON-serialisable: {exc}") from None


def round_of(data: Mapping[str, Any]) -> str | None:
    """The indexed round id: data["round"] when it is an int or a str, else none."""
    value = data.get("round")
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    return str(value)


def body_bytes(seq: int, ts_ns: int, kind: str, source: str, reason: str, severity: str, who: str,
               round_id: str | None, data_json: str) -> bytes:
    return SEPARATOR.join((str(seq), str(ts_ns), kind, source, reason, severity, who, round_id or "",
                           data_json)).encode()


def record_hash(prev: bytes, body: bytes) -> bytes:
    return hashlib.sha256(prev + body).digest()


#: what chain_values gives SQLite for "no round": an int, never a round's text, which the INSERT
#: turns into NULL (``nullif(?, 0)``); the sqlite3 module binds None only after asking its
#: adapters (0.25 us a row), an int at once
NO_ROUND = 0


def chain_values(entries: Sequence["Entry"], datas: Sequence[str], seq: int, prev: bytes,
                 now: int) -> tuple[list[Any], bytes]:
    """The records of ``entries`` (their data already as ``datas``, the canonical JSON) chained on
    from record ``seq`` of hash ``prev``, stamped ``now`` unless an entry has its own time: their
    columns in schema.RECORD_COLUMNS order, every row in one flat list (the INSERT statements'
    parameters, sliced), and the last record's hash.

    :func:`round_of`, :func:`body_bytes` and :func:`record_hash` unrolled into one loop: the
    journal's writer spends this per record (on a thread that shares the GIL with the daemon's
    event loop), and the calls, the attribute look-ups and the ``str`` of the round cost a third
    of it. The same bytes: tests/journal/test_journal_append.py checks them against the three.
    The hashes go to SQLite as bytearrays, stored as the same BLOBs: the sqlite3 module binds a
    ``bytes`` only after asking the adapters for it (two failed attribute look-ups, 0.4 us, twice
    a row); a bytearray it binds at once. No round goes as :data:`NO_ROUND`, for the same reason."""
    values: list[Any] = []
    extend, join, sha256 = values.extend, SEPARATOR.join, hashlib.sha256
    prev_blob = bytearray(prev)
    for (kind, reason, source, severity, who, data, ts_ns), data_json in zip(entries, datas):
        seq += 1
        ts = now if ts_ns is None else ts_ns
        value = data.get("round")
        if value is None:
            round_id = None
        elif type(value) is str:
            round_id = value
        elif type(value) is int:
            round_id = str(value)
        else:  # bool, a subclass, a type that is no round
            round_id = round_of(data)
        prev = sha256(prev + join((str(seq), str(ts), kind, source, reason, severity, who, round_id or "",
                                   data_json)).encode()).digest()
        blob = bytearray(prev)
        extend((seq, ts, kind, source, reason, severity, who, NO_ROUND if round_id is None else round_id, data_json,
                prev_blob, blob))
        prev_blob = blob
    return values, prev


#: (kind, severity, reason, source, who) that passed Entry.check: a record's header is one of
#: a few hundred, and the regular expressions cost more than the rest of the check
_CHECKED_HEADERS: set[tuple[Any, ...]] = set()
_CHECKED_HEADERS_MAX = 4096


#: an Entry's data when none is given: empty and read-only (a default shared by every Entry)
NO_DATA: Mapping[str, Any] = MappingProxyType({})


class Entry(NamedTuple):
    """What a caller asks to journal. ``ts_ns`` (UTC nanoseconds) defaults to the append time.

    Immutable like a frozen dataclass, but a named tuple: the daemon makes two for every card
    read, and a frozen dataclass's ``__init__`` (``object.__setattr__`` per field) costs 1.1 us
    more each."""

    kind: str
    reason: str = ""
    source: str = ""
    severity: str = Severity.INFO.value
    who: str = ""
    data: Mapping[str, Any] = NO_DATA
    ts_ns: int | None = None

    @classmethod
    def from_event(cls, event: Event, *, kind: str = KIND_EVENT, who: str = "", ts_ns: int | None = None) -> "Entry":
        """A device-model or tracker event as a journal entry; its message goes into data."""
        return cls(kind=kind, reason=event.reason.value, source=event.source, severity=event.severity.value,
                   who=who, data={**event.data, "message": event.message}, ts_ns=ts_ns)

    def check(self, *, journal_internal: bool = False) -> None:
        """Refuse what could not be stored or would make the encoding ambiguous."""
        header = (self.kind, self.severity, self.reason, self.source, self.who)
        try:
            checked = header in _CHECKED_HEADERS
        except TypeError:  # a field that is not even hashable: the checks below name it
            checked = False
        if not checked:
            self._check_header(journal_internal)
            if len(_CHECKED_HEADERS) < _CHECKED_HEADERS_MAX:
                _CHECKED_HEADERS.add(header)
        elif self.kind in RESERVED_KINDS and not journal_internal:
            raise JournalEntryError(f"entry kind {self.kind!r} is written only by the journal itself")
        if type(self.data) is not dict and not isinstance(self.data, Mapping):
            raise JournalEntryError(f"entry data must be a JSON object (a mapping), not {type(self.data).__name__}")
        if self.ts_ns is not None and (isinstance(self.ts_ns, bool) or not isinstance(self.ts_ns, int)
                                       or self.ts_ns < 0):
            raise JournalEntryError(f"entry ts_ns {self.ts_ns!r}: nanoseconds since 1970 UTC, an int >= 0")

    def storable(self, refused: str) -> "Entry":
        """This entry, which :meth:`check` or the JSON encoding refused (``refused``: why), made
        storable without losing what it says: control characters in its texts written as ``\\xNN``,
        texts cut to :data:`MAX_TEXT`, data that is not JSON kept as its ``repr``, and why in
        ``data["journal_repaired"]``. For a caller that must never drop a record (the daemon)."""
        try:
            data: dict[str, Any] = json.loads(canonical_json(dict(self.data), "data"))
        except (JournalEntryError, TypeError, ValueError):
            data = {"unstorable_data": _visible(repr(self.data), 4 * MAX_TEXT)}
        data["journal_repaired"] = _visible(refused, 4 * MAX_TEXT)
        kind = self.kind if isinstance(self.kind, str) and _KIND.fullmatch(self.kind) \
            and self.kind not in RESERVED_KINDS else "repaired"
        severity = self.severity if self.severity in SEVERITIES else Severity.WARNING.value
        ts_ns = self.ts_ns if type(self.ts_ns) is int and self.ts_ns >= 0 else None
        return Entry(kind=kind, reason=_visible(self.reason, MAX_TEXT), source=_visible(self.source, MAX_TEXT),
                     severity=severity, who=_visible(self.who, MAX_TEXT), data=data, ts_ns=ts_ns)

    def _check_header(self, journal_internal: bool) -> None:
        """The checks of kind, severity and the text fields, in this order (the same few headers
        recur: that they passed is kept in _CHECKED_HEADERS)."""
        if not _KIND.fullmatch(self.kind):
            raise JournalEntryError(f"entry kind {self.kind!r}: lower-case letters, digits, '_', '.', '-' "
                                    "(a letter first, at most 32)")
        if self.kind in RESERVED_KINDS and not journal_internal:
            raise JournalEntryError(f"entry kind {self.kind!r} is written only by the journal itself")
        if self.severity not in SEVERITIES:
            raise JournalEntryError(f"entry severity {self.severity!r}: one of {', '.join(SEVERITIES)}")
        for name in ("reason", "source", "who"):
            text = getattr(self, name)
            if not is_header_text(text):
                raise JournalEntryError(f"entry {name} {text!r}: text of at most {MAX_TEXT} characters "
                                        "without control characters")


def check_entries(entries: Sequence[Entry]) -> None:
    """:meth:`Entry.check` of each entry (not the journal's own). The common case, a header that
    passed before, dict data, no time or a plain one, answered here without the method's call:
    the daemon's loop checks every record of every commit."""
    checked, reserved = _CHECKED_HEADERS, RESERVED_KINDS
    for entry in entries:
        kind, reason, source, severity, who, data, ts_ns = entry
        if (type(data) is not dict or (ts_ns is not None and (type(ts_ns) is not int or ts_ns < 0))
                or kind in reserved or (kind, severity, reason, source, who) not in checked):
            entry.check()  # the whole check: it passes, or names what is wrong


def _visible(text: object, limit: int) -> str:
    """``text`` with its control characters written as ``\\xNN``, at most ``limit`` characters."""
    shown = _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text if isinstance(text, str) else repr(text))
    return shown if len(shown) <= limit else shown[:limit - 3] + "..."


@dataclass(frozen=True, slots=True)
class Record:
    """One stored record, as read back."""

    seq: int
    ts_ns: int
    kind: str
    source: str
    reason: str
    severity: str
    who: str
    round: str | None
    data_json: str
    prev: bytes
    hash: bytes

    @property
    def data(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.data_json)
        return loaded

    @property
    def time(self) -> datetime:
        """The wall-clock time, UTC, to the microsecond (``ts_ns`` keeps the nanoseconds)."""
        return EPOCH + timedelta(microseconds=self.ts_ns // 1000)

    @property
    def time_iso(self) -> str:
        """ISO-8601 UTC with nanoseconds: 2026-11-23T10:31:02.123456789Z."""
        return iso_ns(self.ts_ns)

    def to_json_dict(self) -> dict[str, Any]:
        """The record as exported (JSON lines) and as the API shows it."""
        return {"seq": self.seq, "time": self.time_iso, "ts_ns": self.ts_ns, "kind": self.kind,
                "source": self.source, "reason": self.reason, "severity": self.severity, "who": self.who,
                "round": self.round, "data": self.data, "prev": self.prev.hex(), "hash": self.hash.hex()}


def input_of(kind: str, data: Mapping[str, Any]) -> Any:
    """The tracker input a record journals (its JSON object), or None: an input record's data, or
    the input an event record carries (:data:`INPUT_KEY`). What a restart replays and what a
    check that every card read was journaled once reads."""
    if kind == KIND_INPUT:
        return data
    if kind == KIND_EVENT:
        return data.get(INPUT_KEY)
    return None


def iso_ns(ts_ns: int) -> str:
    seconds, nanos = divmod(ts_ns, 1_000_000_000)
    whole = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{whole}.{nanos:09d}Z"


def to_ns(moment: datetime | int) -> int:
    """A time given as an aware datetime or as UTC nanoseconds, in nanoseconds."""
    if isinstance(moment, int):
        return moment
    if moment.tzinfo is None:
        raise JournalEntryError(f"time {moment.isoformat()} has no time zone: give an aware datetime (UTC)")
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
