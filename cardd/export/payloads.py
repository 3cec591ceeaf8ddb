"""What each message the table publishes to the floor holds, and the card filter.

The payloads are msgspec Structs (docs/floor.md "Payloads"; their JSON Schema is
docs/floor-schema.json, ``python -m cardd.export.schema``). The builders return the compact JSON
bytes a publisher sends.

The card filter (``export.card_data``, docs/floor.md "What never leaves the table"):

- ``"none"`` (the default) is an ALLOWLIST: each record keeps only the data fields listed for its
  reason in :data:`TREATMENTS` (fields known to carry no card), card lists and compositions become
  their number of cards, raw device messages go, and a message that may name a card is replaced
  by a sentence built from the kept fields. A reason not listed is sent as its header alone
  (seq, time, reason, ...; no message, no data): safe by default, and the floor still sees every seq.
- ``"after_round"`` sends the record whole; the publisher holds a round's records until
  :func:`settled_round` says the round is settled.

The export chain (docs/floor.md "The export chain"): each event carries ``prev``, the ``hash`` of
the record the export sent before it (:data:`CHAIN_START` for its first), and ``hash``, the
SHA-256 of the event as sent without ``hash`` and ``replay``, keys sorted (:func:`event_payload`).
It covers only what is sent, so a floor that has the records recomputes every hash.
"""
from __future__ import annotations

import functools
import hashlib
import re
import string
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Annotated, Any, Literal, NamedTuple, cast

import msgspec

from cardd.journal.records import KIND_COMMAND, KIND_EVENT, KIND_INPUT, Record
from core.cards import Card
from devices.models.names import MODEL_NAMES
from devices.tracker.inputs import InputDecodeError, from_json
from devices.tracker.shoe import IN_PLAY

#: export.card_data: what of the cards leaves the table (docs/floor.md "What never leaves the table")
CARD_DATA_MODES = ("none", "after_round")
#: the coarse steps the state topic gives a shoe's penetration in
PENETRATION_STEPS = ("0-25%", "25-50%", "50-75%", "75-100%")

Schema = Literal["cardd.floor/1"]
#: every payload's "schema": the payloads' version (a change a consumer must know of is a new one)
SCHEMA: Schema = "cardd.floor/1"
#: a site's or table's id: no MQTT wildcard or separator (docs/floor.md "Topics")
Id = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
#: ISO-8601 UTC to the millisecond: 2026-12-02T04:00:00.123Z
Time = Annotated[str, msgspec.Meta(pattern=r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")]
Hash = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}$")]
Seq = Annotated[int, msgspec.Meta(ge=1)]
Count = Annotated[int, msgspec.Meta(ge=0)]
Severity = Literal["info", "warning", "alarm"]
Penetration = Literal["0-25%", "25-50%", "50-75%", "75-100%"]
#: the export chain's start: the ``prev`` of the first record the export ever sends
CHAIN_START = "0" * 64


class _Payload(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    pass


class RulesId(_Payload):
    """The house rules the table runs: their name and the SHA-256 of their file's content."""
    name: str
    sha256: Hash


class DeviceUrl(_Payload):
    """A configured device: its role and the URL it is reached at."""
    role: str
    url: str


class Status(_Payload):
    """``cardd/v1/<site>/<table>/status`` (retained): the table online, or its Will (offline).
    ``session`` counts the table's broker connections (kept in the journal file)."""
    schema: Schema
    site: Id
    table: Id
    online: bool
    session: Count
    release: str | None = None
    rules: RulesId | None = None
    devices: list[DeviceUrl] | None = None
    time: Time | None = None


class Will(_Payload):
    """The Will the table sets at CONNECT on its status topic (retained): the broker publishes it
    when the connection is lost. A Status with ``online`` false and nothing else."""
    schema: Schema
    site: Id
    table: Id
    online: Literal[False]
    session: Count


class Event(msgspec.Struct, forbid_unknown_fields=True):
    """``cardd/v1/<site>/<table>/events``: one journal record. Consumers dedupe on (site, table,
    seq); ``replay`` marks a record sent from the backlog. With ``export.card_data = "none"``
    message and data are filtered (docs/floor.md "What never leaves the table"). ``prev`` and
    ``hash``: the export chain (docs/floor.md "The export chain")."""
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


class Events(msgspec.Struct, forbid_unknown_fields=True):
    """A message of ``cardd/v1/<site>/<table>/events``: one or more consecutive journal records, in
    seq order (as many as the journal had ready, at most :data:`EVENTS_MAX_RECORDS`): a live
    record goes out alone at once, a backlog a few hundred a message."""
    schema: Schema
    site: Id
    table: Id
    events: Annotated[list[Event], msgspec.Meta(min_length=1)]


class DeviceHealth(_Payload):
    role: str
    state: str
    connected: bool


class ShoeSummary(_Payload):
    state: str
    penetration: Penetration


class Rounds(_Payload):
    this_shoe: Count
    this_hour: Count


class OpenAlarm(msgspec.Struct, forbid_unknown_fields=True):
    """An open alarm: its reason, and since when (null when the time is not known)."""
    reason: str
    since: Time | None


class ExportSummary(msgspec.Struct, forbid_unknown_fields=True):
    """The export itself: delivered through seq, records not yet delivered, the oldest one's age."""
    delivered_through: Count
    backlog: Count
    oldest_undelivered_s: Annotated[float, msgspec.Meta(ge=0)] | None


class State(msgspec.Struct, forbid_unknown_fields=True):
    """``cardd/v1/<site>/<table>/state`` (retained): the table in summary. ``shoe`` is null when
    no shoe is on the table."""
    schema: Schema
    site: Id
    table: Id
    time: Time
    devices: list[DeviceHealth]
    shoe: ShoeSummary | None
    rounds: Rounds
    alarms: list[OpenAlarm]
    export: ExportSummary


class Anchor(msgspec.Struct, forbid_unknown_fields=True):
    """``cardd/v1/<site>/<table>/anchor`` (retained): the chain heads as of a delivered record:
    its seq, the journal's chain hash of it (``hash``), the export chain's (``export_hash``) and
    its time."""
    schema: Schema
    site: Id
    table: Id
    seq: Seq
    hash: Hash
    export_hash: Hash
    time: Time


#: every payload, by the topic leaf it is published on (status carries a Status or a Will)
PAYLOADS: dict[str, tuple[type[msgspec.Struct], ...]] = {
    "status": (Status, Will), "events": (Events,), "state": (State,), "anchor": (Anchor,)}

_ENCODER = msgspec.json.Encoder()


class _WholeEvent(msgspec.Struct):
    """An :class:`Event` whose data is the record's own JSON text, sent as it is stored: the same
    fields in the same order, without decoding and encoding the data again."""
    schema: str
    site: str
    table: str
    seq: int
    time: str
    kind: str
    source: str
    reason: str
    severity: str
    who: str | None
    round: str | None
    message: str
    data: msgspec.Raw
    prev: str
    hash: str
    replay: bool


class _Chained(msgspec.Struct):
    """What an event's ``hash`` covers: the event but its ``hash`` and ``replay``, encoded with
    :data:`_CANONICAL` (keys sorted at every level: a Struct's fields too)."""
    schema: str
    site: str
    table: str
    seq: int
    time: str
    kind: str
    source: str
    reason: str
    severity: str
    who: str | None
    round: str | None
    message: str
    data: dict[str, Any]
    prev: str


_CANONICAL = msgspec.json.Encoder(order="sorted")


class _Message(msgspec.Struct):
    """A record's data read for its message alone (the rest is skipped, not built)."""
    message: Any = ""


_MESSAGE = msgspec.json.Decoder(_Message)
_DATA = msgspec.json.Decoder(dict[str, Any])


def record_data(record: Record) -> dict[str, Any]:
    """``record.data``, decoded by msgspec (three times faster than the json module)."""
    try:
        return _DATA.decode(record.data_json)
    except msgspec.DecodeError:  # what msgspec cannot hold (an integer past 64 bits): the reference reader
        return record.data


@functools.lru_cache(maxsize=256)
def _whole_second(seconds: int) -> str:
    # records come in time order, many a second: the date's formatting (6 us) once a second
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def iso_ms(ts_ns: int) -> str:
    """``ts_ns`` (ns since 1970, UTC) as ISO-8601 UTC to the millisecond: 2026-12-02T04:00:00.123Z."""
    seconds, nanos = divmod(ts_ns, 1_000_000_000)
    return f"{_whole_second(seconds)}.{nanos // 1_000_000:03d}Z"


# ---- the card filter -------------------------------------------------------------------------

class _Sentence:
    """A card-free message from a record's kept fields: the first template whose fields the data
    has all of (the last has none, so there is always one)."""

    def __init__(self, *templates: str) -> None:
        self.templates = [(t, {f for _, f, _, _ in string.Formatter().parse(t) if f}) for t in templates]

    def __call__(self, data: Mapping[str, Any]) -> str:
        for template, fields in self.templates:
            if fields <= data.keys():
                return template.format_map(data)
        return ""


class Treatment(NamedTuple):
    """What the default filter sends of a record of one reason."""
    #: data fields sent as they are: plain values known to carry no card
    keep: frozenset[str]
    #: data fields holding cards (a list, or a composition card -> number), sent as the number of cards
    counted: frozenset[str] = frozenset()
    #: the message sent: None keeps the journaled one (the table writes no card into it), else built
    #: from the kept fields
    message: _Sentence | None = None
    #: kept fields sent only when their value is one of these (another value would tell the cards)
    only: Mapping[str, frozenset[str]] = MappingProxyType({})


def _t(keep: str = "", counted: str = "", message: _Sentence | None = None,
       only: Mapping[str, frozenset[str]] | None = None) -> Treatment:
    return Treatment(frozenset(keep.split()), frozenset(counted.split()), message, MappingProxyType(dict(only or {})))


#: a settlement's outcomes that say how the hand ended against the dealer, never its cards; a side
#: bet's outcome names their pattern ("perfect_pair": two cards of one rank and suit, "suited_77")
HAND_OUTCOMES = frozenset({"win", "lose", "push", "bust", "blackjack", "dealer_blackjack", "surrender",
                           "even_money"})


_DEVICE = "device from to trigger firmware serial rebooted fault position"
_DEVICE_SENTENCE = _Sentence("{device}: {from} -> {to} ({trigger}): {fault} at position {position}",
                             "{device}: {from} -> {to} ({trigger})")
#: the device, simulation and journal commands the daemon journals under their own names
#: (cardd/daemon/commands.py; a table input's record has no reason code)
DEVICE_COMMANDS = ("START_SHUFFLE", "CLEAR_FAULT", "COUNTERS", "SELFTEST", "FIRMWARE_UPDATE", "ENROLL",
                   "RETRY_TRUST", "EXPORT_JOURNAL", "VERIFY_JOURNAL", "SIM_DEAL", "SIM_FAULT", "SIM_LOAD_SHOE", "SIM_SWITCHES", "SIM_UNLOAD_SHOE")
_COMMAND = _t("command uid user", message=_Sentence("{command} by uid {uid}", "{command}", "a command"))
_SHOE = "from to trigger card_count cards decks burn cards_out returned index allowed operator " \
        "device_model device_serial device_firmware"
_SHOE_SENTENCE = _Sentence("shoe: {from} -> {to}", "shoe")

#: reason -> what the default filter sends of an event, command, start, stop, export or prune
#: record. A reason not here is sent as its header alone. tests/export/test_payloads.py prints the
#: table and checks it against every record of the scenario library.
TREATMENTS: dict[str, Treatment] = {
    # the daemon and the journal
    "DAEMON_START": _t("release rules rules_sha256 simulated"),
    "DAEMON_STOP": _t("release"),
    "JOURNAL_EXPORTED": _t("format sha256 first_seq last_seq count"),
    "JOURNAL_PRUNED": _t("through_seq anchor_hash count horizon_days cutoff"),
    "JOURNAL_WRITE_FAILED": _t("cause"),
    "JOURNAL_WRITE_RESUMED": _t("failed_for_s records retries cause"),
    "EXPORT_BACKLOG": _t("backlog oldest_s delivered_through"),
    "EXPORT_DRAINED": _t("alarm alarm_reason delivered_through"),
    "RULES_CHANGED": _t("", message=_Sentence("house rules changed between shoes")),
    # commands: the command and the caller; its args and result are not sent (a refusal's text may
    # name the cards a reconciliation missed)
    **{name: _COMMAND for name in DEVICE_COMMANDS},
    "COMMAND_REFUSED": _t("command uid user", message=_Sentence("{command} refused for {user} (uid {uid})",
                                                                "{command} refused", "a command refused")),
    # device models: the device's own fault text is not sent (a device's words are not checked)
    "DEVICE_STATE": _t(_DEVICE, message=_DEVICE_SENTENCE),
    "DEVICE_STALE": _t(_DEVICE, message=_DEVICE_SENTENCE),
    "DEVICE_OFFLINE": _t(_DEVICE, message=_DEVICE_SENTENCE),
    "DEVICE_FAULT": _t(_DEVICE, message=_DEVICE_SENTENCE),
    "DEVICE_RECOVERED": _t(_DEVICE, message=_DEVICE_SENTENCE),
    "WRONG_DEVICE": _t("device expected model role serial",
                       message=_Sentence("{device}: a {role} device identified on this port, a {expected} is "
                                         "expected: refused", "a device of another role: refused")),
    "DEVICE_FLAPPING": _t(""),
    "DEVICE_FLOODING": _t(""),
    # its message is the daemon's own words: what failed and the proven key's fingerprint
    "DEVICE_NOT_TRUSTED": _t("failure fingerprint model role serial"),
    "EVENT_GAP": _t(""),
    "EVENTS_LOST": _t(""),
    "DEVICE_DROPPED_EVENTS": _t("count drop_reason first_index resumed_from"),
    "OUT_OF_ORDER_REPORT": _t("state"),
    # the shoe's life: counts, never which cards (a refusal's or a failed reconciliation's problems
    # name the cards missing or extra)
    "SHOE_STATE": _t(_SHOE, message=_SHOE_SENTENCE),
    "SHOE_VERIFIED": _t(_SHOE, message=_SHOE_SENTENCE),
    "SHOE_REFUSED": _t(_SHOE + " state", message=_Sentence("shoe: {from} -> {to}: dealing blocked",
                                                           "shoe refused: dealing blocked")),
    "CUT_CARD_OUT": _t(_SHOE, message=_SHOE_SENTENCE),
    "DEALER_CHANGE_BURN": _t(_SHOE, message=_Sentence("shoe: {from} -> {to}: burn {burn}", "dealer change")),
    "RECONCILED": _t(_SHOE, message=_SHOE_SENTENCE),
    "RECONCILIATION_FAILED": _t(_SHOE, message=_Sentence(
        "shoe: {from} -> {to}: cards out {cards_out}, returned {returned}", "shoe: reconciliation failed")),
    "SHOE_VOID": _t(_SHOE, message=_SHOE_SENTENCE),
    "NEXT_SHOE_TAKES_OVER": _t("state cards_out",
                               message=_Sentence("the next shoe takes the voided one's place ({state})")),
    "SHOE_COUNT_MISMATCH": _t("difference expected held left put_back shoe_state verified", message=_Sentence(
        "shoe count mismatch: the shoe reader holds {held} card(s), the table expects {expected}; round held",
        "shoe count mismatch")),
    "CUT_CARD_MISPLACED": _t("cards_out hi index lo", message=_Sentence(
        "cut card came out after {cards_out} cards; the rules put it after {lo}..{hi}", "cut card misplaced")),
    "BURN": _t("index remaining", message=_Sentence("burn card {index} ({remaining} to go)", "burn card")),
    "DEALING_BLOCKED": _t("index", message=_Sentence("card #{index} left the shoe while dealing is blocked: "
                                                     "to the discard", "dealing blocked")),
    # the round: the money and the places, never the cards
    "ROUND_STATE": _t("round state", message=_Sentence("round {round}: now {state}", "round state")),
    "CARD_ASSIGNED": _t("round target", message=_Sentence("round {round}: a card to {target}", "a card assigned")),
    "ACTION": _t("round action player box hand amount owner paid"),
    "ACTION_REFUSED": _t("round rule", message=_Sentence("round {round}: refused ({rule})", "refused ({rule})",
                                                         "an action refused")),
    "SETTLED": _t("round box hand kind player stake net outcome paid_at_once", only={"outcome": HAND_OUTCOMES},
                  message=_Sentence("round {round}: {player} {kind} at box {box}: {outcome}, net {net} (cents)",
                                    "round {round}: {player} {kind} at box {box}: net {net} (cents)", "settled")),
    "ROUND_HELD": _t("round cause", message=_Sentence("round {round}: held ({cause})", "round held")),
    "ROUND_RESUMED": _t("round", message=_Sentence("round {round}: resumed", "round resumed")),
    "ROUND_VOID": _t("round cause by_rule", message=_Sentence("round {round}: void ({cause}); all bets returned",
                                                              "round void")),
    "REDEAL": _t(""),
    "BOX_OVER_MAXIMUM": _t("round box over"),
    "SHUFFLER_MALFUNCTION": _t("round fault"),
    # irregularities: where and how many, never which card
    "FACE_UP_CARD": _t("index", message=_Sentence("card #{index} came out face up: misload; card to no hand",
                                                  "a card face up")),
    "FOREIGN_CARD": _t("index", message=_Sentence("foreign card at card #{index}; round held", "foreign card")),
    "UNREADABLE_CARD": _t("round index flagged"),
    "CARD_ENTERED_BY_DEALER": _t("index to_discard", message=_Sentence("card #{index} entered by the dealer",
                                                                       "a card entered by the dealer")),
    "CARD_EXPOSED_IN_ERROR": _t("index", message=_Sentence("card #{index} exposed in error",
                                                           "a card exposed in error")),
    "CARD_DRAWN_IN_ERROR": _t("index exposed", message=_Sentence("card #{index} drawn in error",
                                                                 "a card drawn in error")),
    "PLACEMENT_ERROR": _t("round", counted="layout", message=_Sentence(
        "round {round}: initial deal reconstructed ({layout} cards)", "initial deal reconstructed")),
    "CARDS_TO_BOX_WITHOUT_WAGER": _t("round", counted="cards", message=_Sentence(
        "round {round}: {cards} cards in play reconstructed, to be re-dealt", "cards to a box without a wager")),
    "READ_FROM_STALE_DEVICE": _t("index", message=_Sentence(
        "card #{index} read from a device not ready: not assigned", "a read from a device not ready")),
    "REPEATED_READ": _t("index last", message=_Sentence(
        "card #{index} repeats an index already read since the shoe was loaded: not dealt again", "repeated read")),
    "CONFLICTING_READ": _t("index last", message=_Sentence(
        "card #{index} read again, another card than its first read: the first read stands; round held",
        "conflicting read")),
    "MISSING_READ": _t("index first_missing last_missing", message=_Sentence(
        "card read(s) #{first_missing}..#{last_missing} never received before card #{index}: round held",
        "missing read")),
    "OVERRIDE": _t("override role"),
    "OVERRIDE_REFUSED": _t("override role", message=_Sentence("{override} refused", "an override refused")),
    "ALARM_CLEARED": _t("alarm alarm_reason round", message=_Sentence("alarm {alarm} ({alarm_reason}) cleared",
                                                                      "an alarm cleared")),
}

#: a tracker input record's JSON (an "input" record, or an event's data["input"]), by its type:
#: the fields sent. A device's message is its raw bytes (a card read's card, a shuffle's
#: composition): only which device and its event number go. A type not here: only its type.
INPUT_FIELDS: dict[str, Treatment] = {
    "DeviceMessage": _t("type v device event_index"),
    "LinkUp": _t("type v device"),
    "LinkDown": _t("type v device"),
    "Tick": _t("type v"),
    "OpenRound": _t("type v"),
    "PlaceBet": _t("type v box player amount"),
    "ReduceBet": _t("type v box player amount"),
    "PlacePairsBet": _t("type v box player amount"),
    "Insure": _t("type v box player amount"),
    "EvenMoney": _t("type v box player"),
    "AskForBox": _t("type v who player"),
    "NoMoreBets": _t("type v who"),
    "CloseInsurance": _t("type v who"),
    "TakeSeat": _t("type v who player"),
    "LeaveSeat": _t("type v who player"),
    "Act": _t("type v who action box amount player"),
    "ShuffleStarted": _t("type v who"),
    "HandShuffled": _t("type v who"),
    "DealerChange": _t("type v who"),
    "ClearAlarm": _t("type v who role alarm_id"),
    "Resume": _t("type v who role"),
    "Redeal": _t("type v who role"),
    "VoidShoe": _t("type v who role next_shoe"),
    "DrawnInErrorDecision": _t("type v who exposed"),
    "EnterCard": _t("type v who"),
    "CardsToBoxWithoutWager": _t("type v who role"),
    "PlacementError": _t("type v who role", counted="assignments"),
    "ShoeRemainder": _t("type v who", counted="returned"),
    # the round's own inputs (devices/game/inputs.py): a hold's or flag's detail may name a card
    "CardDealt": _t("type v"),
    "Hold": _t("type v reason"),
    "Flag": _t("type v reason who"),
    "Void": _t("type v reason who role by_rule"),
    "ReconstructInitialDeal": _t("type v who role", counted="assignments"),
    "ReconstructAndRedeal": _t("type v who role", counted="also"),
}

_INPUT_SENTENCE = _Sentence("{type} from {device}", "{type} by {who}", "{type}")
_PLAIN = (str, int, float, bool, type(None))


def _card_count(value: Any) -> int:
    """The number of cards a list of cards (or of [card, place] pairs) or a composition holds."""
    if isinstance(value, dict):
        return sum(n for n in value.values() if type(n) is int)
    if isinstance(value, list):
        return len(value)
    return 0


def _filtered(data: Mapping[str, Any], treatment: Treatment) -> dict[str, Any]:
    kept = {key: value for key, value in data.items() if key in treatment.keep and isinstance(value, _PLAIN)
            and (key not in treatment.only or value in treatment.only[key])}
    kept.update({key: _card_count(data[key]) for key in treatment.counted if key in data})
    return kept


def filtered_input(data: Any) -> dict[str, Any]:
    """An input record's JSON as the default filter sends it (:data:`INPUT_FIELDS`)."""
    if not isinstance(data, dict):
        return {}
    name = data.get("type")
    treatment = INPUT_FIELDS.get(name) if isinstance(name, str) else None
    if treatment is None:
        return {"type": name} if isinstance(name, str) else {}
    return _filtered(data, treatment)


def filtered(record: Record) -> tuple[str, dict[str, Any]]:
    """The message and data the default filter sends of ``record``."""
    data = record_data(record)
    if record.kind == KIND_INPUT:
        kept = filtered_input(data)
        return (_INPUT_SENTENCE(kept) if kept else ""), kept
    treatment = TREATMENTS.get(record.reason)
    if treatment is None:
        return "", {}
    kept = _filtered(data, treatment)
    if record.kind == KIND_EVENT and "input" in data:
        kept["input"] = filtered_input(data["input"])
    if treatment.message is None:
        message = data.get("message", "")
        return (message if isinstance(message, str) else ""), kept
    return treatment.message(kept), kept


def event_payload(record: Record, *, site: str, table: str, card_data: str, replay: bool,
                  prev: str) -> tuple[bytes, str]:
    """The events topic's message for ``record`` (compact JSON) and its export chain hash, ``prev``
    the hash of the record sent before it (:data:`CHAIN_START` for the first). ``card_data``: one
    of :data:`CARD_DATA_MODES`; "after_round" sends the record whole (the caller holds a round's
    records until the round is settled), "none" filters it. The same record, configuration and
    ``prev`` give the same bytes but ``replay``: a resend carries the hash of the first send."""
    time, who = iso_ms(record.ts_ns), record.who or None
    if card_data == "after_round":
        text = _MESSAGE.decode(record.data_json).message
        message = text if isinstance(text, str) else str(text)
        # hashed as the floor reads it: the data decoded, its keys sorted; sent as it is stored
        digest = hashlib.sha256(_CANONICAL.encode(_Chained(
            SCHEMA, site, table, record.seq, time, record.kind, record.source, record.reason, record.severity, who,
            record.round, message, record_data(record), prev))).hexdigest()
        return _ENCODER.encode(_WholeEvent(
            schema=SCHEMA, site=site, table=table, seq=record.seq, time=time, kind=record.kind,
            source=record.source, reason=record.reason, severity=record.severity, who=who,
            round=record.round, message=message, data=msgspec.Raw(record.data_json.encode()), prev=prev,
            hash=digest, replay=replay)), digest
    if card_data != "none":
        raise ValueError(f"export.card_data {card_data!r}: expected one of {', '.join(CARD_DATA_MODES)}")
    message, data = filtered(record)
    digest = hashlib.sha256(_CANONICAL.encode(_Chained(
        SCHEMA, site, table, record.seq, time, record.kind, record.source, record.reason, record.severity, who,
        record.round, message, data, prev))).hexdigest()
    return _ENCODER.encode(Event(
        schema=SCHEMA, site=site, table=table, seq=record.seq, time=time, kind=record.kind,
        source=record.source, reason=record.reason, severity=cast(Severity, record.severity),
        who=who, round=record.round, message=message, data=data, prev=prev, hash=digest, replay=replay)), digest


#: records one events message carries at most, and bytes (a broker's message limit is larger:
#: mosquitto 256 MB, NATS 1 MB by default)
EVENTS_MAX_RECORDS, EVENTS_MAX_BYTES = 500, 256 * 1024


def events_payload(events: list[bytes], *, site: str, table: str) -> bytes:
    """The events topic's message holding ``events`` (each :func:`event_payload`'s), in order."""
    head = _ENCODER.encode(_EventsHead(schema=SCHEMA, site=site, table=table))
    return head[:-1] + b',"events":[' + b",".join(events) + b"]}"


class _EventsHead(msgspec.Struct):
    schema: str
    site: str
    table: str


# ---- what names a card ------------------------------------------------------------------------

#: a card as the table writes it (str(Card): "AS", "TD"), or with a 10 ("10D"), as a word of its own
CARD_TOKEN = re.compile(r"(?<![A-Za-z0-9])(?:10|[A2-9TJQK])[CDHS](?![A-Za-z0-9])")
#: the same in JSON text, where a card's word may also begin right after an escape (a newline, a
#: non-breaking space written as \u00a0)
_CARD_IN_JSON = re.compile(r"(?:(?<![A-Za-z0-9])|(?<=\\[nrtbf])|(?<=\\u[0-9a-fA-F]{4}))"
                           r"(?:10|[A2-9TJQK])[CDHS](?![A-Za-z0-9])")


def _holds_a_card(value: Any) -> bool:
    """Whether a decoded device message holds a card (a card read, a composition, a deck check's
    missing or extra cards)."""
    if isinstance(value, Card):
        return True
    if isinstance(value, dict):
        return any(_holds_a_card(k) or _holds_a_card(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_holds_a_card(v) for v in value)
    fields: Any = getattr(value, "__dataclass_fields__", None) or getattr(value, "__struct_fields__", None) or ()
    return any(_holds_a_card(getattr(value, name, None)) for name in fields)


def _device_message_holds_cards(data: Any) -> bool:
    if not (isinstance(data, dict) and data.get("type") == "DeviceMessage"):
        return False
    try:
        return _holds_a_card(from_json(data).message)
    except InputDecodeError:
        return True  # bytes the table cannot read: assume the worst


def carries_cards(record: Record) -> bool:
    """Whether ``record``, sent whole, names a card, a hand's cards or the shoe's composition: in
    its message or data as text, or in the raw device message it carries (a card read's bytes)."""
    # the stored text holds every string and key of the data as it is (no escape touches a card's
    # letters or digits), so a card named anywhere in it is a card word of the text
    if _CARD_IN_JSON.search(record.data_json):
        return True
    if '"DeviceMessage"' not in record.data_json:
        return False
    data = record_data(record)
    if record.kind == KIND_INPUT:
        return _device_message_holds_cards(data)
    if record.kind in (KIND_EVENT, KIND_COMMAND):
        return _device_message_holds_cards(data.get("input"))
    return False


def settled_round(record: Record) -> str | None:
    """The round id ``record`` settles (its last record: the round complete or void), else None.
    With ``export.card_data = "after_round"`` a round's records are held until this one."""
    if record.reason == "ROUND_STATE" and record.round is not None and record.data.get("state") in ("complete",
                                                                                                    "void"):
        return record.round
    return None


# ---- the other topics -------------------------------------------------------------------------

def status_payload(*, site: str, table: str, session: int, release: str, rules_name: str, rules_sha256: str,
                   devices: Mapping[str, str], ts_ns: int) -> bytes:
    """The status topic's online message. ``devices``: role -> URL (``[devices]`` of the configuration)."""
    return _ENCODER.encode(Status(
        schema=SCHEMA, site=site, table=table, online=True, session=session, release=release,
        rules=RulesId(name=rules_name, sha256=rules_sha256),
        devices=[DeviceUrl(role=role, url=url) for role, url in devices.items()], time=iso_ms(ts_ns)))


def will_payload(*, site: str, table: str, session: int) -> bytes:
    """The Will set at CONNECT on the status topic: offline, the same session."""
    return _ENCODER.encode(Will(schema=SCHEMA, site=site, table=table, online=False, session=session))


def anchor_payload(*, site: str, table: str, seq: int, chain_hash: bytes, export_hash: str, ts_ns: int) -> bytes:
    """The anchor topic's message: record ``seq``, its journal chain hash, its export chain hash
    (``export_hash``, hex) and its time (``ts_ns``)."""
    return _ENCODER.encode(Anchor(schema=SCHEMA, site=site, table=table, seq=seq, hash=chain_hash.hex(),
                                  export_hash=export_hash, time=iso_ms(ts_ns)))


_ROLES = {model: role for role, model in MODEL_NAMES.items()}
#: the shoe states of a shoe on the table, being dealt or dealt out; in any other there is no shoe to show
SHOE_ON_TABLE = frozenset({*IN_PLAY, "complete"})


def penetration_step(cards_out: int, cards_in_shoe: int) -> Penetration:
    """The coarse step of a shoe's penetration: a quarter, never the card count."""
    quarter = min(3, max(0, (4 * cards_out) // cards_in_shoe)) if cards_in_shoe > 0 else 0
    return cast(Penetration, PENETRATION_STEPS[quarter])


def state_payload(*, site: str, table: str, ts_ns: int, devices: Mapping[str, Mapping[str, Any]],
                  shoe: Mapping[str, Any] | None, rounds_this_shoe: int, rounds_this_hour: int,
                  alarms: Sequence[Mapping[str, Any]], alarm_since_ns: Mapping[int, int],
                  export: Mapping[str, Any]) -> bytes:
    """The state topic's message, from STATE (cardd/daemon/state.py): ``devices`` its "devices"
    (tracker name -> state, link, ...), ``shoe`` its "shoe" (state, cards_out, cards_in_shoe),
    ``alarms`` its "alarms" (id, reason, ...; only the reason is sent, never an alarm's text, which
    may name a card) with ``alarm_since_ns`` (alarm id -> when it was raised, ns, where known), and
    ``export``: delivered_through, backlog, oldest_undelivered_s."""
    shoe_summary = None
    if shoe is not None and shoe.get("state") in SHOE_ON_TABLE and shoe.get("cards_in_shoe"):
        shoe_summary = ShoeSummary(state=str(shoe["state"]),
                                   penetration=penetration_step(int(shoe.get("cards_out", 0)),
                                                                int(shoe["cards_in_shoe"])))
    open_alarms = []
    for alarm in alarms:
        since = alarm_since_ns.get(alarm.get("id", -1))
        open_alarms.append(OpenAlarm(reason=str(alarm["reason"]), since=None if since is None else iso_ms(since)))
    return _ENCODER.encode(State(
        schema=SCHEMA, site=site, table=table, time=iso_ms(ts_ns),
        devices=[DeviceHealth(role=_ROLES.get(name, name), state=str(view.get("state")),
                              connected=view.get("link") == "up") for name, view in devices.items()],
        shoe=shoe_summary, rounds=Rounds(this_shoe=rounds_this_shoe, this_hour=rounds_this_hour),
        alarms=open_alarms, export=msgspec.convert(dict(export), ExportSummary)))

