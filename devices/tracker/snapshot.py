"""The table's critical data as a plain dict, and back: what survives a power loss.

Saved: the shoe's position and its count of cards out per card, every pile (burn, discard,
played, pending), open alarms, holds, the procedures waiting for the dealer, and the live
round as the log of the input records it took (devices.game.inputs, in the JSON form of
devices.tracker.inputs). Restoring replays that log into a fresh Round with the journal
muted (its events were journaled the first time), so the round comes back exactly as it was
without a second copy of its state here. A bad record in the log raises InputDecodeError. Nothing still inside the shoe is known
to the host, so nothing undealt can be in a snapshot.

After a restore the devices are offline (they reconnect by themselves) and a live round is
held: it resumes only when the devices are back and a supervisor agrees.
"""
from __future__ import annotations

from typing import Any

from core.cards import Card
from devices.events import EventSink, Reason
from devices.game.round import Round
from devices.game.rules import HouseRules
from devices.tracker.inputs import from_json, to_json
from devices.overrides import TableError
from devices.tracker.table import Table
from firmware_bridge.messages import decode, encode

SNAPSHOT_VERSION = 3  # 2: entry_to_discard (an unreadable card from a stale reader); 3: the round log as input records
_PILES = ("burn_pile", "discard", "played", "pending", "drawn_in_error")
_SCALARS = ("rounds_started", "closed_round_id", "last_round_id", "dealer_change_pending", "awaiting_entry",
            "entry_to_discard", "seated", "asking_for_box")


class SnapshotError(TableError, ValueError):
    """A snapshot this table cannot restore (another version, other house rules, a bad record)."""


def snapshot(table: Table) -> dict[str, Any]:
    """Plain JSON-serialisable data describing ``table`` now."""
    r = table.round
    return {
        "version": SNAPSHOT_VERSION,
        "rules": table.rules.name,
        "shoe": table.shoe.snapshot(),
        "deferred": [encode(m).hex() for m in table.shoe.deferred],
        "alarms": table.alarms.snapshot(),
        "holds": dict(table.holds),
        "piles": {name: [str(c) for c in getattr(table, name)] for name in _PILES},
        "queued_reads": [encode(m).hex() for m in table.queued_reads],
        **{name: getattr(table, name) for name in _SCALARS},
        "round": None if r is None else {
            "id": r.round_id, "log": [to_json(op) for op in table.round_log],
        },
    }


def restore(rules: HouseRules, sink: EventSink, snap: dict[str, Any], *, hold: bool = True,
            **table_kw: Any) -> Table:
    """A table in the state ``snap`` describes; a live round comes back held (unless ``hold`` is
    False: the table exactly as it was, for replaying the inputs journaled after ``snap``)."""
    if snap.get("version") != SNAPSHOT_VERSION:
        raise SnapshotError(f"table snapshot version {snap.get('version')!r} is not {SNAPSHOT_VERSION}")
    if snap["rules"] != rules.name:
        raise SnapshotError(f"table snapshot was taken under rules {snap['rules']!r}, not {rules.name!r}")
    table = Table(rules, sink, **table_kw)
    table._replaying = True
    try:
        table.shoe.restore(snap["shoe"])
        table.shoe.deferred = [decode(bytes.fromhex(h)) for h in snap["deferred"]]
        table.alarms.restore(snap["alarms"])
        table.holds = dict(snap["holds"])
        for name in _PILES:
            setattr(table, name, [Card.parse(c) for c in snap["piles"][name]])
        table.queued_reads = [decode(bytes.fromhex(h)) for h in snap["queued_reads"]]  # type: ignore[misc]
        for name in _SCALARS:
            setattr(table, name, snap[name])
        if snap["round"] is not None:
            table.round = Round(rules, table._journal, round_id=snap["round"]["id"])
            for op in snap["round"]["log"]:
                table._to_round(from_json(op))
    finally:
        table._replaying = False
    if hold:
        table._hold(Reason.DEVICE_OFFLINE, "power restored: devices reconnecting")
    return table
