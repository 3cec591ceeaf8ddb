"""A table's exported records for the floor's tests, chained as the table chains them: each
record's ``prev`` is the hash of the one before, each ``hash`` computed by
:func:`cardd.floor.contract.event_hash` (the floor's own reading of the contract)."""
from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec

from cardd.floor.contract import CHAIN_START, Anchor, Event, Status, event_hash

SITE = "floor1"
START = dt.datetime(2026, 12, 2, 3, 44, tzinfo=dt.timezone.utc)


def stamp(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def sealed(event: Event) -> Event:
    """``event`` with its hash computed."""
    return msgspec.structs.replace(event, hash=event_hash(event))


class Table:
    """One table's export chain: :meth:`records` makes its next records (seq 1 onwards, a second
    apart from ``start``), each chained to the one before."""

    def __init__(self, table: str = "bj-07", site: str = SITE, start: dt.datetime = START) -> None:
        self.site, self.table, self.start = site, table, start
        self.chain: list[Event] = []

    @property
    def head(self) -> str:
        return self.chain[-1].hash if self.chain else CHAIN_START

    def records(self, count: int, *, step: dt.timedelta = dt.timedelta(seconds=1), **fields: Any) -> list[Event]:
        made = []
        for _ in range(count):
            seq = len(self.chain) + 1
            event = sealed(Event(
                schema="cardd.floor/1", site=self.site, table=self.table, seq=seq,
                time=stamp(self.start + step * (seq - 1)), kind="event", source="round", reason="ROUND_STATE",
                severity="info", who=None, round="1", message=f"round 1: record {seq}",
                data={"round": 1, "n": seq}, prev=self.head, hash="0" * 64, replay=False, **fields))
            self.chain.append(event)
            made.append(event)
        return made

    def anchor(self, seq: int, export_hash: str | None = None) -> Anchor:
        record = self.chain[seq - 1]
        return Anchor(schema="cardd.floor/1", site=self.site, table=self.table, seq=seq, hash="a" * 64,
                      export_hash=export_hash or record.hash, time=record.time)

    def status(self, session: int, online: bool = True) -> Status:
        return Status(schema="cardd.floor/1", site=self.site, table=self.table, online=online, session=session,
                      time=stamp(self.start) if online else None)


def rewritten(event: Event, **changes: Any) -> Event:
    """``event`` changed and hashed again: what a table whose journal was edited would send."""
    return sealed(msgspec.structs.replace(event, **changes))
