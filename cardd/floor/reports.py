"""The floor's reports, in SQL over the archive (cardd/floor/migrations): per table per hour or
per day, what its records and its online history say.

Counted from the records as archived (docs/floor.md, "events"), each by its reason:

- rounds: ``ROUND_STATE`` to ``complete`` (a round voided is not completed);
- hands: ``SETTLED`` of a hand's main bet (``kind`` ``main``: one a box's hand, a split's two);
- shoes: ``SHOE_STATE`` from ``verified`` to ``burning`` (a shoe loaded into play);
- voids: ``ROUND_VOID`` and ``SHOE_VOID``;
- alarms by reason: the records of severity ``alarm``, counted by their reason;
- device faults: ``DEVICE_FAULT``;
- minutes offline: of the table's online/offline history, the minutes offline in the period
  (up to now for one still offline).

Periods are UTC hours and days, by each record's own time.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import psycopg

from cardd.floor.archive import Archive, time_text
from cardd.floor.views import AuditEntryView, ReportRow

Period = Literal["hour", "day"]
_STEP = {"hour": dt.timedelta(hours=1), "day": dt.timedelta(days=1)}
#: a round is counted when it completes
ROUND_COMPLETE = "reason = 'ROUND_STATE' AND data->>'state' = 'complete'"


def completes_round(reason: str, data: dict[str, Any]) -> bool:
    """Whether a record completes a round: what :data:`ROUND_COMPLETE` says in SQL."""
    return reason == "ROUND_STATE" and data.get("state") == "complete"

_REPORT = f"""
WITH t AS (
    SELECT id, site, table_name FROM floor_tables
    WHERE (%(site)s::text IS NULL OR site = %(site)s) AND (%(table)s::text IS NULL OR table_name = %(table)s)),
b AS (
    SELECT generate_series(%(first)s::timestamptz, %(end)s::timestamptz - %(step)s::interval, %(step)s::interval) AS start),
r AS (
    SELECT tid, date_bin(%(step)s::interval, time, %(first)s::timestamptz) AS start,
           count(*) FILTER (WHERE {ROUND_COMPLETE}) AS rounds,
           count(*) FILTER (WHERE reason = 'SETTLED' AND data->>'kind' = 'main') AS hands,
           count(*) FILTER (WHERE reason = 'SHOE_STATE' AND data->>'from' = 'verified'
                            AND data->>'to' = 'burning') AS shoes,
           count(*) FILTER (WHERE reason IN ('ROUND_VOID', 'SHOE_VOID')) AS voids,
           count(*) FILTER (WHERE reason = 'DEVICE_FAULT') AS device_faults
    FROM records
    WHERE tid IN (SELECT id FROM t) AND time >= %(first)s AND time < %(end)s
    GROUP BY 1, 2),
a AS (
    SELECT tid, start, jsonb_object_agg(reason, n) AS alarms FROM (
        SELECT tid, date_bin(%(step)s::interval, time, %(first)s::timestamptz) AS start, reason, count(*) AS n
        FROM records
        WHERE tid IN (SELECT id FROM t) AND time >= %(first)s AND time < %(end)s AND severity = 'alarm'
        GROUP BY 1, 2, 3) counted
    GROUP BY 1, 2),
o AS (
    SELECT h.tid, b.start,
           sum(extract(epoch FROM least(coalesce(h.until, %(now)s), b.start + %(step)s::interval)
                                  - greatest(h.since, b.start))) / 60 AS minutes
    FROM status_history h JOIN b ON h.since < b.start + %(step)s::interval AND coalesce(h.until, %(now)s) > b.start
    WHERE NOT h.online AND h.tid IN (SELECT id FROM t) AND h.since < %(now)s
    GROUP BY 1, 2)
SELECT t.site, t.table_name, b.start, coalesce(r.rounds, 0), coalesce(r.hands, 0), coalesce(r.shoes, 0),
       coalesce(r.voids, 0), coalesce(a.alarms, '{{}}'::jsonb), coalesce(r.device_faults, 0),
       coalesce(o.minutes, 0)
FROM t CROSS JOIN b
LEFT JOIN r ON r.tid = t.id AND r.start = b.start
LEFT JOIN a ON a.tid = t.id AND a.start = b.start
LEFT JOIN o ON o.tid = t.id AND o.start = b.start
ORDER BY t.site, t.table_name, b.start
"""

_ROUNDS = f"""
SELECT t.site, t.table_name, count(*) FILTER (WHERE r.time >= %(hour)s), count(*)
FROM records r JOIN floor_tables t ON t.id = r.tid
WHERE r.time >= %(day)s AND r.time < %(day)s::timestamptz + interval '1 day' AND r.{ROUND_COMPLETE.replace(" AND ", " AND r.")}
GROUP BY 1, 2
"""

_OPEN_ALARMS = """
SELECT site, table_name, count(*) FROM floor_alarms WHERE cleared_at IS NULL AND acked_at IS NULL GROUP BY 1, 2
"""


@asynccontextmanager
async def _reading(archive: Archive) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    # the archive's one connection, one call at a time: a report waits for a store, never interleaves
    async with archive._transaction() as conn:
        yield conn


async def report(archive: Archive, period: Period, first: dt.date, last: dt.date, *, now: dt.datetime,
                 site: str | None = None, table: str | None = None) -> list[ReportRow]:
    """Every known table's (of ``site``, ``table`` when given) rows for each ``period`` of the
    days ``first`` to ``last`` (inclusive), by site, table and start."""
    start = dt.datetime.combine(first, dt.time(), dt.timezone.utc)
    end = dt.datetime.combine(last, dt.time(), dt.timezone.utc) + dt.timedelta(days=1)
    args = {"site": site, "table": table, "first": start, "end": end, "step": _STEP[period], "now": now}
    async with _reading(archive) as conn:
        rows = await (await conn.execute(_REPORT, args)).fetchall()
    return [ReportRow(site=s, table=t, start=time_text(begin), rounds=rounds, hands=hands, shoes=shoes, voids=voids,
                      alarms=dict(sorted(alarms.items())), device_faults=faults,
                      minutes_offline=round(float(minutes), 3))
            for s, t, begin, rounds, hands, shoes, voids, alarms, faults, minutes in rows]


async def floor_counts(archive: Archive, now: dt.datetime) -> tuple[dict[tuple[str, str], tuple[int, int]],
                                                                   dict[tuple[str, str], int]]:
    """Per table: the rounds completed this hour and today (UTC), and the floor alarms open."""
    day = dt.datetime.combine(now.date(), dt.time(), dt.timezone.utc)
    hour = now.replace(minute=0, second=0, microsecond=0)
    async with _reading(archive) as conn:
        rounds = await (await conn.execute(_ROUNDS, {"day": day, "hour": hour})).fetchall()
        alarms = await (await conn.execute(_OPEN_ALARMS)).fetchall()
    return ({(s, t): (int(h), int(d)) for s, t, h, d in rounds}, {(s, t): int(n) for s, t, n in alarms})


CSV_COLUMNS = ("site", "table", "start", "rounds", "hands", "shoes", "voids", "device_faults", "minutes_offline",
               "alarms")


def alarms_cell(alarms: dict[str, int]) -> str:
    """Alarms by reason in one CSV cell: ``FACE_UP_CARD=2;SHOE_JAM=1``."""
    return ";".join(f"{reason}={count}" for reason, count in sorted(alarms.items()))


def to_csv(rows: list[ReportRow]) -> str:
    """The rows as CSV (RFC 4180), a header first. A cell a spreadsheet would take for a formula
    (a reason a table sent starting with ``=``, ``+``, ``-`` or ``@``) starts with ``'``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow([row.site, row.table, row.start, row.rounds, row.hands, row.shoes, row.voids, row.device_faults,
                         row.minutes_offline, _inert(alarms_cell(row.alarms))])
    return out.getvalue()


AUDIT_COLUMNS = ("id", "at", "action", "outcome", "who", "address", "alarm_id", "detail")


def audit_csv(entries: list[AuditEntryView]) -> str:
    """The audit's entries as CSV, a header first; what a person typed (a name, a note) that a
    spreadsheet would take for a formula starts with ``'``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(AUDIT_COLUMNS)
    for e in entries:
        writer.writerow([e.id, e.at, e.action, e.outcome, _inert(e.who), e.address or "",
                         "" if e.alarm_id is None else e.alarm_id, _inert(e.detail)])
    return out.getvalue()


def _inert(cell: str) -> str:
    return "'" + cell if cell[:1] in ("=", "+", "-", "@", "\t", "\r") else cell
