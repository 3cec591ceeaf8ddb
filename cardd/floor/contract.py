"""The topic contract of docs/floor.md as the floor reads it: topics, payloads, the export chain.

cardfloor shares nothing with a table but this contract: these Structs are its own reading of
docs/floor.md (and of docs/floor-schema.json, which a test holds them to), never the table's
code. Every payload is decoded strictly (unknown fields refused, every pattern checked), so
what a table, or anyone with a broker's credentials, publishes is data that either fits the
contract or is refused in one sentence (:class:`ContractError`).

The export chain (docs/floor.md "The export chain"): each record carries ``prev`` (the previous
exported record's ``hash``, 64 zeros where the chain starts) and ``hash``, the SHA-256 of the
record's canonical JSON without ``hash`` and ``replay`` (:func:`event_hash`). Everything it
covers was sent, so the floor recomputes every hash itself.
"""
from __future__ import annotations

import hashlib
import re
from typing import Annotated, Any, Literal, NamedTuple

import msgspec

from core.errors import CarddError
from core.schema_errors import schema_problem

Schema = Literal["cardd.floor/1"]
Id = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
Time = Annotated[str, msgspec.Meta(pattern=r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")]
Hash = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}$")]
Seq = Annotated[int, msgspec.Meta(ge=1)]
Count = Annotated[int, msgspec.Meta(ge=0)]
Severity = Literal["info", "warning", "alarm"]
Penetration = Literal["0-25%", "25-50%", "50-75%", "75-100%"]

#: the export chain's start: the ``prev`` of the first record a table ever exports
CHAIN_START = "0" * 64
#: the largest message the floor takes: a table's are at most 256 KiB (docs/floor.md "events")
MAX_PAYLOAD = 1024 * 1024
#: topic leaves, as in cardd/v1/<site>/<table>/<leaf>
LEAVES = ("status", "events", "state", "anchor")
TOPIC_FILTER = "cardd/v1/+/+/+"
_TOPIC = re.compile(r"^cardd/v1/([A-Za-z0-9_-]{1,64})/([A-Za-z0-9_-]{1,64})/(status|events|state|anchor)$")


class ContractError(CarddError, ValueError):
    """A message that does not fit the topic contract: one sentence saying how."""


class _Strict(msgspec.Struct, forbid_unknown_fields=True):
    pass


class RulesId(_Strict):
    name: str
    sha256: Hash


class DeviceUrl(_Strict):
    role: str
    url: str


class Status(_Strict):
    """The status topic: online (with release, rules, devices and time) or the Will (offline)."""
    schema: Schema
    site: Id
    table: Id
    online: bool
    session: Count
    release: str | None = None
    rules: RulesId | None = None
    devices: list[DeviceUrl] | None = None
    time: Time | None = None


class Event(_Strict):
    """One journal record as exported (its data filtered as the table's configuration says)."""
    schema: Schema
    site: Id
    table: Id
    seq: Seq
    time: Time
    kind: str
    source: str
    reason: str
    severity: Severity
    who: str | None
    round: str | None
    message: str
    data: dict[str, Any]
    prev: Hash
    hash: Hash
    replay: bool


class Events(_Strict):
    schema: Schema
    site: Id
    table: Id
    events: Annotated[list[Event], msgspec.Meta(min_length=1)]


class DeviceHealth(_Strict):
    role: str
    state: str
    connected: bool


class ShoeSummary(_Strict):
    state: str
    penetration: Penetration


class Rounds(_Strict):
    this_shoe: Count
    this_hour: Count


class OpenAlarm(_Strict):
    reason: str
    since: Time | None


class ExportSummary(_Strict):
    delivered_through: Count
    backlog: Count
    oldest_undelivered_s: Annotated[float, msgspec.Meta(ge=0)] | None


class State(_Strict):
    schema: Schema
    site: Id
    table: Id
    time: Time
    devices: list[DeviceHealth]
    shoe: ShoeSummary | None
    rounds: Rounds
    alarms: list[OpenAlarm]
    export: ExportSummary


class Anchor(_Strict):
    """The journal's chain head (``hash``, for ``cardctl verify-journal``) and the export chain's
    (``export_hash``, which the archive must reproduce) as of the delivered record ``seq``."""
    schema: Schema
    site: Id
    table: Id
    seq: Seq
    hash: Hash
    export_hash: Hash
    time: Time


Payload = Status | Events | State | Anchor
_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    "status": msgspec.json.Decoder(Status), "events": msgspec.json.Decoder(Events),
    "state": msgspec.json.Decoder(State), "anchor": msgspec.json.Decoder(Anchor)}


class Topic(NamedTuple):
    site: str
    table: str
    leaf: str


def parse_topic(topic: str) -> Topic:
    """``cardd/v1/<site>/<table>/<leaf>``, or ContractError."""
    match = _TOPIC.match(topic)
    if match is None:
        raise ContractError(f"topic {topic[:200]!r} is not cardd/v1/<site>/<table>/<status|events|state|anchor>")
    return Topic(match[1], match[2], match[3])


def decode(topic: Topic, payload: bytes) -> Payload:
    """The payload of a message on ``topic``, checked against the contract and against its topic
    (a payload naming another site or table than its topic is refused: a table's credentials
    publishing as another table)."""
    if len(payload) > MAX_PAYLOAD:
        raise ContractError(f"{len(payload)} bytes: more than the {MAX_PAYLOAD} a message may hold")
    try:
        value: Payload = _DECODERS[topic.leaf].decode(payload)
    except msgspec.ValidationError as exc:
        raise ContractError(f"{topic.leaf}: not a cardd.floor/1 payload: {schema_problem(exc).sentence('$')}") from None
    except msgspec.DecodeError:
        raise ContractError(f"{topic.leaf}: not a cardd.floor/1 payload: not JSON") from None
    named = [(value.site, value.table)]
    if isinstance(value, Events):
        named += [(e.site, e.table) for e in value.events]
    for site, table in named:
        if (site, table) != (topic.site, topic.table):
            raise ContractError(f"a payload naming {site}/{table} on {topic.site}/{topic.table}'s topic")
    if isinstance(value, Events):
        seqs = [e.seq for e in value.events]
        if any(b != a + 1 for a, b in zip(seqs, seqs[1:])):
            raise ContractError(f"records not consecutive in one message: seq {seqs[0]}..{seqs[-1]}")
    return value


_CANONICAL = msgspec.json.Encoder(order="sorted")


def canonical(event: Event) -> bytes:
    """The bytes an event's hash covers: every field but ``hash`` and ``replay``, keys sorted at
    every level, compact JSON as msgspec writes it (the table writes it the same way)."""
    fields = {f: getattr(event, f) for f in event.__struct_fields__ if f not in ("hash", "replay")}
    return _CANONICAL.encode(fields)


def event_hash(event: Event) -> str:
    """The export chain's hash of ``event``: SHA-256 of :func:`canonical`, in hex."""
    return hashlib.sha256(canonical(event)).hexdigest()
