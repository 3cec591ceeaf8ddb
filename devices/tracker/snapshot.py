"""The table's critical data as a plain dict, and back: what survives a power loss.

:func:`snapshot` saves the shoe, the piles, alarms, holds and procedures, and the live round as the
log of its input records; :func:`restore` checks it all (schema, values, invariants, the rules'
content hash :func:`rules_digest`) and raises one :class:`SnapshotError`. docs/deal-tracking.md,
"Power loss"; why the round is a log: docs/architecture.md, "The snapshot"."""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict
from typing import Annotated, Any, Sequence

import msgspec

from core.cards import ALL_CARDS, Card
from core.errors import CarddError
from core.schema_errors import schema_problem
from devices.events import Event, EventSink, Reason, Severity
from devices.game.inputs import ROUND_INPUTS
from devices.game.round import Round
from devices.game.rules import HouseRules
from devices.errors import TableError
from devices.tracker.alarms import Alarm
from devices.tracker.inputs import from_json, hex_bytes, to_json
from devices.tracker.shoe import SHOE_STATES
from devices.tracker.state import CountShortfall
from devices.tracker.table import Table
from firmware_bridge.messages import (
    CardRead, DeckCheckResult, Message, ShoeLoaded, ShuffleComplete, ShuffleProgress, UnreadableCard, decode, encode,
)

SNAPSHOT_VERSION = 9  # 2: entry_to_discard; 3: the round log as input records; 4: rules digest, last_index, seats;
#                       5: an alarm's round; 6: cards_put_back, shoe_count_named (the shoe reader's count);
#                       7: shoe.after_void (the next shoe that took a voided shoe's place);
#                       8: read_cards (the card read at each index), shoe_count_short (a count waiting for a read);
#                       9: an alarm's data (the facts its event carried)
#: what :func:`restore` reads: a version-4 snapshot is a version 5 whose alarms have no round, a version 5
#: a version 6 with no card put back and no count named, a version 6 a version 7 whose shoe took no voided
#: shoe's place, a version 7 a version 8 whose reads' cards are not known (not compared with a repeat) and
#: whose count waits for no read, a version 8 a version 9 whose alarms carry no facts. An older cardd
#: refuses a newer one by its number (a rollback after this change: docs/journal.md)
READABLE_VERSIONS = (4, 5, 6, 7, 8, SNAPSHOT_VERSION)
_PILES = ("burn_pile", "discard", "played", "pending", "drawn_in_error")

Count = Annotated[int, msgspec.Meta(ge=0)]
Id = Annotated[int, msgspec.Meta(ge=1)]


class SnapshotError(TableError, ValueError):
    """A snapshot this table cannot restore: names what is wrong and where."""


#: the shoe's states between shoes, where the house rules may change (a restart under other rules)
RULES_CHANGE_STATES = ("idle", "reconciled", "void")
#: when the house rules may change, said where they may not
RULES_CHANGE_WHEN = ("house rules change only between shoes (the shoe reconciled or void, nothing held or waiting) "
                     "and after a clean stop of cardd; until then set the rules back to those it ran under")


def rules_changed(ran_under: tuple[str, str], rules: HouseRules) -> str | None:
    """``the table ran under ... not these ...`` when ``ran_under`` (name, sha256 of the content)
    are other rules than ``rules``; None when they are the same (the name alone may differ)."""
    digest = rules_digest(rules)
    if ran_under[1] == digest:
        return None
    return (f"the table ran under other house rules ({ran_under[0]!r}, sha256 {ran_under[1][:12]}...), not these "
            f"({rules.name!r}, sha256 {digest[:12]}...)")


def rules_change_refused(snap: Any, rules: HouseRules, *, clean_stop: bool) -> str | None:
    """Why the table ``snap`` describes may not go on under ``rules`` (one line: both rules, what is
    in the way, what to do); None when they are its own rules or it is between shoes and cardd
    stopped cleanly (``clean_stop``: nothing was journaled after ``snap``). A snapshot that is not
    one is left to :func:`restore` to name."""
    try:
        s = msgspec.convert(snap, _Snapshot, strict=True)
    except msgspec.ValidationError:
        return None
    changed = rules_changed((s.rules.name, s.rules.sha256), rules)
    return None if changed is None else _rules_change_refused(s, changed, clean_stop)


def _rules_change_refused(s: "_Snapshot", changed: str, clean_stop: bool) -> str | None:
    """:func:`rules_change_refused` of a decoded snapshot whose rules ``changed`` (its words)."""
    if s.shoe.state not in RULES_CHANGE_STATES:  # no round is live in these: a void shoe voided its own
        blocked = f"the shoe is {s.shoe.state}"
    elif s.holds:
        blocked = "the table is held"
    elif s.piles.drawn_in_error or s.piles.pending or s.queued_reads or s.awaiting_entry is not None:
        blocked = "cards wait to be settled"
    elif not clean_stop:
        blocked = "cardd did not stop cleanly: records were journaled after its last snapshot"
    else:
        return None
    return f"{changed} and {blocked}: {RULES_CHANGE_WHEN}"


# ---- the schema: every key, its type and its range ------------------------------------------

class _Strict(msgspec.Struct, forbid_unknown_fields=True):
    pass


class _Rules(_Strict):
    name: str
    sha256: str


class _Shoe(_Strict):
    state: str
    cards_out: Count
    burn_remaining: Count
    out: dict[str, Id]
    counted: dict[str, Count] | None
    after_void: str | None = None  # none before version 7


class _Alarm(_Strict):
    id: Id
    reason: str
    source: str
    message: str
    round: Count | None = None  # none in a version-4 snapshot
    data: dict[str, Any] = {}  # the raising event's facts; none in a snapshot older than this key


class _Alarms(_Strict):
    next_id: Id
    open: list[_Alarm]


class _Piles(_Strict):
    burn_pile: list[str]
    discard: list[str]
    played: list[str]
    pending: list[str]
    drawn_in_error: list[str]


class _CountShortfall(_Strict):
    held: Count
    expected: Count
    put_back: Count


class _LiveRound(_Strict):
    id: Id
    log: list[dict[str, Any]]


class _Snapshot(_Strict):
    version: int
    rules: _Rules
    shoe: _Shoe
    deferred: list[str]
    alarms: _Alarms
    holds: dict[str, str]
    piles: _Piles
    queued_reads: list[str]
    rounds_started: Count
    closed_round_id: Count
    last_round_id: Count | None
    dealer_change_pending: str | None
    awaiting_entry: Count | None
    entry_to_discard: bool
    last_index: Count
    seated: list[str]  # players at the table, in the order they sat down
    asking_for_box: list[str]  # seated players waiting for a box
    round: _LiveRound | None
    cards_put_back: Count | None = 0  # None: not known this load; a version-4 or -5 snapshot has none
    shoe_count_named: int | None = None
    read_cards: dict[str, str] = {}  # index -> card; none in a version-7 snapshot or older (not known)
    shoe_count_short: _CountShortfall | None = None


@functools.lru_cache(maxsize=8)  # a table keeps one (frozen) HouseRules, snapshotted every few hundred cards
def rules_digest(rules: HouseRules) -> str:
    """SHA-256 of the rules' content (every setting, not the ``name``): the same file gives the same digest."""
    content = asdict(rules)
    content.pop("name")
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()


def snapshot(table: Table) -> dict[str, Any]:
    """Plain JSON-serialisable data describing ``table`` now."""
    r, short = table.round, table.shoe_count_short
    return {
        "version": SNAPSHOT_VERSION,
        "rules": {"name": table.rules.name, "sha256": rules_digest(table.rules)},
        "shoe": table.shoe.snapshot(),
        "deferred": [encode(m).hex() for m in table.shoe.deferred],
        "alarms": table.alarms.snapshot(),
        "holds": dict(table.holds),
        "piles": {name: [str(c) for c in getattr(table, name)] for name in _PILES},
        "queued_reads": [encode(m).hex() for m in table.queued_reads],
        "rounds_started": table.rounds_started, "closed_round_id": table.closed_round_id,
        "last_round_id": table.last_round_id, "dealer_change_pending": table.dealer_change_pending,
        "awaiting_entry": table.awaiting_entry, "entry_to_discard": table.entry_to_discard,
        "last_index": table.last_index,
        "seated": list(table.seated), "asking_for_box": list(table.asking_for_box),
        "round": None if r is None else {"id": r.round_id, "log": [to_json(op) for op in table.round_log]},
        "cards_put_back": table.cards_put_back, "shoe_count_named": table.shoe_count_named,
        "read_cards": {str(index): str(card) for index, card in table.read_cards.items()},
        "shoe_count_short": None if short is None else
        {"held": short.held, "expected": short.expected, "put_back": short.put_back},
    }


def restore(rules: HouseRules, sink: EventSink, snap: Any, *, hold: bool = True, clean_stop: bool = False,
            **table_kw: Any) -> Table:
    """A table in the state ``snap`` describes; a live round comes back held (unless ``hold`` is
    False: the table exactly as it was, for replaying the inputs journaled after ``snap``).
    Under other house rules than ``snap``'s only between shoes after a clean stop
    (:func:`rules_change_refused`): the closed round is left behind (its payouts were the old
    rules') and a RULES_CHANGED event goes to ``sink``.

    Raises :class:`SnapshotError` (and only that) for anything wrong in ``snap``.
    """
    if not isinstance(snap, dict):
        raise SnapshotError(f"table snapshot: expected an object, got {type(snap).__name__}")
    if snap.get("version") not in READABLE_VERSIONS:
        raise SnapshotError(f"table snapshot version {snap.get('version')!r:.40} is not one of "
                            f"{', '.join(map(str, READABLE_VERSIONS))}")
    try:
        s = msgspec.convert(snap, _Snapshot, strict=True)
    except msgspec.ValidationError as exc:
        raise SnapshotError(f"table snapshot: {schema_problem(exc).sentence('$')}") from None
    ran_under = (s.rules.name, s.rules.sha256)
    changed = rules_changed(ran_under, rules)
    if changed is not None:
        refused = _rules_change_refused(s, changed, clean_stop)
        if refused is not None:
            raise SnapshotError(f"table snapshot: {refused}")
        s = msgspec.structs.replace(s, round=None)
    if s.shoe.state not in SHOE_STATES:
        raise SnapshotError(f"table snapshot: $.shoe.state {s.shoe.state!r:.40} is not a shoe state "
                            f"({', '.join(SHOE_STATES)})")
    unknown = [k for k in s.holds if k not in Reason.__members__]
    if unknown:
        raise SnapshotError(f"table snapshot: $.holds: {unknown[0]!r:.40} is not a reason code")
    table = Table(rules, sink, **table_kw)
    table._replaying = True
    try:
        _fill(table, s)
    except CarddError as exc:  # a record or a round input the round refuses: the log is not what was played
        raise SnapshotError(f"table snapshot: {exc}") from None
    finally:
        table._replaying = False
    _check_invariants(table, s)
    if changed is not None:
        digest = rules_digest(rules)
        sink(Event(Reason.RULES_CHANGED, "table",
                   f"house rules changed between shoes: {ran_under[0]!r} (sha256 {ran_under[1][:12]}...) -> "
                   f"{rules.name!r} (sha256 {digest[:12]}...)", Severity.WARNING,
                   {"from": {"name": ran_under[0], "sha256": ran_under[1]}, "to": {"name": rules.name, "sha256": digest}}))
    if hold:
        # the snapshot cannot tell a stop from a crash or a power cut (the journal's DAEMON_STOP can)
        # what waits is a supervisor's word, whatever the devices do next: no claim about them that
        # goes stale once they are back (STATE says where each one is)
        table._hold(Reason.DEVICE_OFFLINE, "the daemon restarted mid-round: a supervisor continues the round "
                    "(resume) once every device is back, or voids it (redeal)")
    return table


def _fill(table: Table, s: _Snapshot) -> None:
    shoe = table.shoe
    shoe.machine.set_state(s.shoe.state)
    shoe.cards_out, shoe.burn_remaining, shoe.after_void = s.shoe.cards_out, s.shoe.burn_remaining, s.shoe.after_void
    shoe.out.clear()
    shoe.out.update(_counts(s.shoe.out, "$.shoe.out"))
    shoe.counted = None if s.shoe.counted is None else \
        {c: 0 for c in ALL_CARDS} | _counts(s.shoe.counted, "$.shoe.counted")
    shoe.deferred = _messages(s.deferred, "$.deferred", (ShuffleProgress, ShuffleComplete, DeckCheckResult,
                                                         ShoeLoaded))
    table.alarms._next_id = s.alarms.next_id
    table.alarms.open = {a.id: Alarm(a.id, a.reason, a.source, a.message, a.round, dict(a.data))
                          for a in s.alarms.open}
    table.holds = dict(s.holds)
    for name in _PILES:
        setattr(table, name, _cards(getattr(s.piles, name), f"$.piles.{name}"))
    table.queued_reads = _messages(s.queued_reads, "$.queued_reads", (CardRead, UnreadableCard))  # type: ignore[assignment]
    table.rounds_started, table.closed_round_id = s.rounds_started, s.closed_round_id
    table.last_round_id, table.dealer_change_pending = s.last_round_id, s.dealer_change_pending
    table.awaiting_entry, table.entry_to_discard, table.last_index = s.awaiting_entry, s.entry_to_discard, s.last_index
    table.seated, table.asking_for_box = list(s.seated), list(s.asking_for_box)
    # an older snapshot mid-shoe does not say how many cards went back on top: the count waits for the next load
    table.cards_put_back = None if s.version < 6 and table.shoe.in_play else s.cards_put_back
    table.shoe_count_named = s.shoe_count_named
    # an older snapshot does not say which card each index carried: a repeat of one is not compared
    table.read_cards = {_read_index(i, s.last_index): _card(c, f"$.read_cards[{i!r:.12}]")
                        for i, c in s.read_cards.items()}
    short = s.shoe_count_short
    table.shoe_count_short = None if short is None else CountShortfall(short.held, short.expected, short.put_back)
    if s.round is not None:
        table.round = Round(table.rules, table._journal, round_id=s.round.id)
        for i, op in enumerate(s.round.log):
            record = from_json(op)
            if type(record) not in ROUND_INPUTS:
                raise SnapshotError(f"table snapshot: $.round.log[{i}]: {type(record).__name__} is not a round input")
            table._to_round(record)


def _check_invariants(table: Table, s: _Snapshot) -> None:
    problems = []
    if sum(table.shoe.out.values()) != table.shoe.cards_out:
        problems.append(f"$.shoe.cards_out is {table.shoe.cards_out} but $.shoe.out counts "
                        f"{sum(table.shoe.out.values())} cards")
    placed, out = table.placed(), +table.shoe.out
    if placed != out:
        more, fewer = placed - out, out - placed
        problems.append("the piles disagree with the shoe's count of cards out"
                        + (f"; in the piles, not out: {', '.join(map(str, sorted(more.elements())))}" if more else "")
                        + (f"; out, in no pile: {', '.join(map(str, sorted(fewer.elements())))}" if fewer else ""))
    if any(a.id >= s.alarms.next_id for a in s.alarms.open) or len({a.id for a in s.alarms.open}) != len(s.alarms.open):
        problems.append("$.alarms: alarm ids repeat or are not below next_id")
    if s.round is not None and (s.round.id > s.rounds_started or s.closed_round_id > s.rounds_started):
        problems.append(f"$.round.id {s.round.id} / $.closed_round_id {s.closed_round_id} exceed "
                        f"$.rounds_started {s.rounds_started}")
    if len(set(s.seated)) != len(s.seated) or not set(s.asking_for_box) <= set(s.seated):
        problems.append("$.seated repeats a player, or $.asking_for_box names a player not seated")
    if problems:
        raise SnapshotError("table snapshot: " + "; ".join(problems))


def _read_index(text: str, last_index: int) -> int:
    """A key of $.read_cards: an index read since the load, 1 to $.last_index."""
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= last_index):
        raise SnapshotError(f"table snapshot: $.read_cards key {text!r:.12} is not an index read since the load "
                            f"(1..{last_index})")
    return int(text)


def _card(text: str, where: str) -> Card:
    try:
        return Card.parse(text)
    except (CarddError, ValueError) as exc:
        raise SnapshotError(f"table snapshot: {where}: {text!r:.20} is not a card ({exc})") from None


def _cards(texts: Sequence[str], where: str) -> list[Card]:
    return [_card(t, f"{where}[{i}]") for i, t in enumerate(texts)]


def _counts(counts: dict[str, int], where: str) -> dict[Card, int]:
    return {_card(c, f"{where} key"): n for c, n in counts.items()}


def _messages(hexes: Sequence[str], where: str, kinds: tuple[type, ...]) -> list[Message]:
    out = []
    for i, h in enumerate(hexes):
        payload = hex_bytes(h)
        if payload is None:
            raise SnapshotError(f"table snapshot: {where}[{i}]: not an encoded message (not its bytes in hex)")
        try:
            msg = decode(payload)
        except CarddError as exc:
            raise SnapshotError(f"table snapshot: {where}[{i}]: not an encoded message ({exc})") from None
        if not isinstance(msg, kinds):
            raise SnapshotError(f"table snapshot: {where}[{i}]: a {type(msg).__name__} does not belong here")
        out.append(msg)
    return out
