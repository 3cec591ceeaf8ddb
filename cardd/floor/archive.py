"""The floor's central archive in PostgreSQL (docs/floor-service.md, "The archive" and "Chain
checks"): every record of every table stored once, each table's export chain checked as it
comes (:mod:`cardd.floor.chain`), the tables' latest status and state, the anchors, and the
floor's alarms with their acknowledgement.

One :class:`Archive` holds one psycopg 3 AsyncConnection and runs its calls one at a time. Each
:meth:`Archive.store` is one transaction: what it returns is committed. When PostgreSQL is
gone (restarted, killed, unreachable) a call raises :class:`ArchiveUnavailable` and the next
call connects again; storing again what a failed call carried is safe (duplicates change
nothing), so the caller retries and only then takes the message as done.
"""
from __future__ import annotations

import asyncio
import datetime as dt
import importlib.resources
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

import msgspec
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from cardd.floor.chain import ChainProblem, Link, Span, Verdict, check_anchor as _check_anchor, check_records, \
    check_session, extend, neighbours
from core.errors import CarddError

from cardd.floor.contract import Anchor, Event, State, Status

__all__ = ["Archive", "ArchiveError", "ArchiveUnavailable", "ChainProblem", "FloorAlarm", "StoreResult",
           "StoredRecord", "TableRow", "MIN_RETENTION_DAYS"]

#: the shortest retention the archive takes (a regulator's 90 days)
MIN_RETENTION_DAYS = 90
#: partitions made ahead of today, so midnight never waits on a CREATE TABLE
DAYS_AHEAD = 2
# advisory lock keys (pg_advisory_lock(bigint)): migrations, partition DDL
_MIGRATION_LOCK = 0x63617264_666C0001
_PARTITION_LOCK = 0x63617264_666C0002
_PARTITION = re.compile(r"^records_(\d{8})$")
_MIGRATION = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
#: from how many records a store uses COPY rather than INSERTs in its pipeline
_COPY_FROM = 32
_ALARM_STATES = ("open", "acknowledged", "cleared", "all")


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


class ArchiveError(CarddError):
    """The archive refused or could not do something: one sentence saying what."""


class ArchiveUnavailable(ArchiveError):
    """PostgreSQL did not answer: nothing of the call is known to be committed; calling again
    (which connects again) is safe."""


class StoreResult(NamedTuple):
    stored: list[int]          # seqs newly archived
    duplicates: int            # records already archived with the same hash (dropped)
    problems: list[ChainProblem]


class TableRow(NamedTuple):
    site: str
    table: str
    online: bool | None
    session: int | None
    status: dict[str, Any] | None
    state: dict[str, Any] | None
    last_seen: dt.datetime | None
    clock_offset_s: float | None  # the table's clock minus the floor's, at its last state
    head_seq: int                 # the highest seq stored, 0 when none


class StoredRecord(NamedTuple):
    site: str
    table: str
    seq: int
    time: str                     # as the record carried it: 2026-12-02T03:44:00.672Z
    received_at: dt.datetime
    kind: str
    source: str
    reason: str
    severity: str
    who: str | None
    round: str | None
    message: str
    data: dict[str, Any]
    prev: str
    hash: str
    replay: bool


class AuditEntry(NamedTuple):
    """One row of the audit (floor_audit): a log-in, log-out or acknowledgement, who and from where."""
    id: int
    at: dt.datetime
    action: str
    outcome: str
    who: str
    address: str | None
    alarm_id: int | None
    detail: str


class FloorAlarm(NamedTuple):
    id: int
    site: str
    table: str
    kind: str
    key: str
    detail: str
    raised_at: dt.datetime
    cleared_at: dt.datetime | None
    acked_by: str | None
    acked_at: dt.datetime | None
    note: str | None

    @property
    def state(self) -> str:
        """open (neither acknowledged nor cleared), acknowledged, or cleared."""
        if self.cleared_at is not None:
            return "cleared"
        return "open" if self.acked_at is None else "acknowledged"


def migrations() -> list[tuple[int, str, str]]:
    """The schema's migrations in order: (version, file name, SQL)."""
    folder = importlib.resources.files("cardd.floor") / "migrations"
    found = []
    for entry in folder.iterdir():
        match = _MIGRATION.match(entry.name)
        if match:
            found.append((int(match[1]), entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [version for version, _, _ in found]
    if versions != list(range(1, len(versions) + 1)):
        raise ArchiveError(f"the archive's migrations are not numbered 1, 2, 3...: {[name for _, name, _ in found]}")
    return found


def record_time(text: str) -> dt.datetime:
    """A contract time (``2026-12-02T03:44:00.672Z``) as an aware datetime."""
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def time_text(moment: dt.datetime) -> str:
    """An aware datetime in the contract's form, to the millisecond."""
    utc = moment.astimezone(dt.timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def partition_name(day: dt.date) -> str:
    return f"records_{day:%Y%m%d}"


def _where(dsn: str) -> str:
    """Where the archive is, for a message: host and port, never a password."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "the configured PostgreSQL"
    return f"PostgreSQL at {info.get('host') or 'its socket'}:{info.get('port') or 5432}"


class Archive:
    """The archive on one PostgreSQL database; make it with :meth:`open`."""

    def __init__(self, dsn: str, retention_days: int) -> None:
        self._dsn = dsn
        self.retention_days = retention_days
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()
        self._tids: dict[tuple[str, str], int] = {}
        self._partitions: set[dt.date] = set()

    # ---- opening, connecting, migrating ----------------------------------------------------

    @classmethod
    async def open(cls, dsn: str, *, retention_days: int = 400) -> Archive:
        """Connect, apply the migrations not yet applied (one instance at a time: an advisory
        lock), and make the partitions of today and the next days."""
        if retention_days < MIN_RETENTION_DAYS:
            raise ArchiveError(f"a retention of {retention_days} days: the archive keeps at least {MIN_RETENTION_DAYS}")
        archive = cls(dsn, retention_days)
        async with archive._transaction():
            pass
        await archive._ensure_partitions(_today() + dt.timedelta(days=d) for d in range(DAYS_AHEAD + 1))
        return archive

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        try:
            psycopg.conninfo.conninfo_to_dict(self._dsn)
        except psycopg.ProgrammingError:
            # its text may quote the password: not shown
            raise ArchiveError("the archive's dsn is not a PostgreSQL connection string "
                               "(postgresql://user@host:port/database, or key=value pairs)") from None
        conn = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True, connect_timeout=10)
        # times come back as UTC whatever the server's zone
        await conn.execute("SET TIME ZONE 'UTC'")
        await self._migrate(conn)
        rows = await (await conn.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'records'::regclass")).fetchall()
        self._partitions = {dt.datetime.strptime(m[1], "%Y%m%d").date()
                            for (name,) in rows if (m := _PARTITION.match(name))}
        return conn

    async def _migrate(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
        try:
            await conn.execute("CREATE TABLE IF NOT EXISTS schema_version ("
                               "version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)")
            applied = {v for (v,) in await (await conn.execute("SELECT version FROM schema_version")).fetchall()}
            for version, name, text in migrations():
                if version in applied:
                    continue
                async with conn.transaction():
                    await conn.execute(text.encode())
                    await conn.execute("INSERT INTO schema_version VALUES (%s, %s, now())", (version, name))
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))

    @asynccontextmanager
    async def _transaction(self, *, pipelined: bool = False) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """The connection (made again if it was lost) inside one transaction, one call at a time;
        ``pipelined``: in pipeline mode throughout, BEGIN and COMMIT sent with the statements
        around them rather than a round trip each (no COPY then). A lost server is
        :class:`ArchiveUnavailable`."""
        async with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = await self._connect()
                if pipelined:
                    async with self._conn.pipeline(), self._conn.transaction():
                        yield self._conn
                else:
                    async with self._conn.transaction():
                        yield self._conn
            except BaseException as exc:
                # a table's id learnt in the transaction rolled back is no id
                self._tids.clear()
                if not isinstance(exc, psycopg.OperationalError):
                    raise
                broken, self._conn = self._conn, None
                if broken is not None:
                    await broken.close()
                raise ArchiveUnavailable(f"the archive ({_where(self._dsn)}) did not answer: nothing of "
                                         "this call is known to be stored, and calling again is safe") from None

    async def _ensure_partitions(self, days: Any) -> None:
        missing = sorted(set(days) - self._partitions)
        if not missing:
            return
        async with self._transaction() as conn:
            # two instances may both find a day missing: one makes it
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PARTITION_LOCK,))
            for day in missing:
                start = dt.datetime.combine(day, dt.time(), dt.timezone.utc)
                await conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} PARTITION OF records "
                                           "FOR VALUES FROM ({}) TO ({})").format(
                    sql.Identifier(partition_name(day)), sql.Literal(start), sql.Literal(start + dt.timedelta(days=1))))
        self._partitions.update(missing)

    # ---- records ---------------------------------------------------------------------------

    async def store(self, site: str, table: str, events: Sequence[Event], received_at: dt.datetime) -> StoreResult:
        """Check ``events`` (one table's) against the stored chain and store those that fit, in
        one transaction; anchors waiting for them are checked too."""
        return (await self.store_many([(site, table, events)], received_at))[0]

    async def store_many(self, batches: Sequence[tuple[str, str, Sequence[Event]]],
                         received_at: dt.datetime) -> list[StoreResult]:
        """:meth:`store` for several messages (of one table or many) in ONE transaction of a few
        round trips whatever their number, so one commit (one WAL flush) covers them all: the
        way to keep up with many tables each sending a record at a time. The results are in
        the order of ``batches``; a table's batches are checked in that order too."""
        if not any(events for _, _, events in batches):
            return [StoreResult([], 0, []) for _ in batches]
        await self._ensure_partitions(record_time(e.time).date() for _, _, events in batches for e in events)
        many = sum(len(events) for _, _, events in batches) >= _COPY_FROM
        async with self._transaction(pipelined=not many) as conn:
            tids = await self._tids_of(conn, {(site, table) for site, table, events in batches if events})
            wanted = {(tids[(site, table)], seq) for site, table, events in batches if events
                      for seq in neighbours(events)}
            by_table = sorted(set(tids.values()))
            async with conn.pipeline():
                # one writer per table at a time (a second instance waits here, the tables locked
                # in one order by all), so what is read next is still true at the commit
                heads = await conn.execute(
                    "SELECT id, low_seq, head_seq, EXISTS (SELECT 1 FROM anchors a WHERE a.tid = t.id "
                    "AND a.verdict = 'pending') FROM floor_tables t WHERE id = ANY(%s) ORDER BY id FOR UPDATE",
                    (by_table,))
                links = await conn.execute(
                    "SELECT c.tid, c.seq, c.hash, c.prev FROM chain c JOIN unnest(%s::int[], %s::bigint[]) AS w(tid, seq) "
                    "ON c.tid = w.tid AND c.seq = w.seq", ([t for t, _ in wanted], [q for _, q in wanted]))
                spans = {int(tid): (Span(low, int(head), []), bool(pending))
                         for tid, low, head, pending in await heads.fetchall()}
                known: dict[int, dict[int, Link]] = {tid: {} for tid in by_table}
                for tid, seq, digest, prev in await links.fetchall():
                    known[int(tid)][int(seq)] = Link(bytes(digest).hex(), bytes(prev).hex())
            verdicts: list[tuple[int, Verdict] | None] = []
            for site, table, events in batches:
                if not events:
                    verdicts.append(None)
                    continue
                tid = tids[(site, table)]
                verdict = check_records(site, table, events, known[tid])
                known[tid].update((e.seq, Link(digest, e.prev)) for e, digest in verdict.accepted)
                verdicts.append((tid, verdict))
            accepted: dict[int, list[int]] = {}
            for taken in filter(None, verdicts):
                accepted.setdefault(taken[0], []).extend(e.seq for e, _ in taken[1].accepted)
            moved = {tid: await self._extend(conn, tid, spans[tid][0], seqs, received_at)
                     for tid, seqs in accepted.items() if seqs}
            # the records just stored of tables that have anchors waiting
            waiting: dict[tuple[int, int], tuple[str, str, str]] = {}
            for (site, table, _), tv in zip(batches, verdicts):
                if tv is not None and spans[tv[0]][1]:
                    waiting.update({(tv[0], e.seq): (site, table, digest) for e, digest in tv[1].accepted})
            anchored = await self._check_pending_anchors(conn, waiting)
            await self._write(conn, [(tid, v) for tid, v in filter(None, verdicts)], moved, by_table, received_at,
                              copy=many)
        results = []
        for (site, table, _), tv in zip(batches, verdicts):
            if tv is None:
                results.append(StoreResult([], 0, []))
                continue
            tid, verdict = tv
            seqs = [e.seq for e, _ in verdict.accepted]
            problems = verdict.problems + [anchored[(tid, seq)] for seq in seqs if (tid, seq) in anchored]
            results.append(StoreResult(seqs, verdict.duplicates, problems))
        return results

    async def _tids_of(self, conn: psycopg.AsyncConnection[Any], tables: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The ids of ``tables`` (site, table), each new one added."""
        new = sorted(tables - self._tids.keys())
        if new:
            sites, names = [s for s, _ in new], [t for _, t in new]
            await conn.execute("INSERT INTO floor_tables (site, table_name) SELECT * FROM unnest(%s::text[], %s::text[]) "
                               "ON CONFLICT DO NOTHING", (sites, names))
            rows = await (await conn.execute(
                "SELECT t.id, t.site, t.table_name FROM floor_tables t JOIN unnest(%s::text[], %s::text[]) "
                "AS w(site, name) ON t.site = w.site AND t.table_name = w.name", (sites, names))).fetchall()
            self._tids.update({(site, name): int(tid) for tid, site, name in rows})
        return {key: self._tids[key] for key in tables}

    async def _tid(self, conn: psycopg.AsyncConnection[Any], site: str, table: str) -> int:
        return (await self._tids_of(conn, {(site, table)}))[(site, table)]

    async def _write(self, conn: psycopg.AsyncConnection[Any], verdicts: list[tuple[int, Verdict]],
                     moved: dict[int, Span], tids: list[int], received_at: dt.datetime, *, copy: bool) -> None:
        """The accepted records, the refused ones, and where each table's chain now stands."""
        chain: list[tuple[Any, ...]] = []
        records: list[tuple[Any, ...]] = []
        refused: list[tuple[Any, ...]] = []
        for tid, verdict in verdicts:
            rows = self._rows(tid, verdict.accepted, received_at)
            chain += rows[0]
            records += rows[1]
            refused += [(e.site, e.table, e.seq, e.hash, p.kind, p.detail, msgspec.json.encode(e).decode(),
                         received_at) for e, p in verdict.refused]
        if copy and chain:
            await self._copy(conn, chain, records)
        async with conn.pipeline():
            async with conn.cursor() as cur:
                if chain and not copy:
                    # a few rows (live records): sent with the rest, no round trip of their own
                    await cur.executemany("INSERT INTO chain (tid, seq, hash, prev, day) VALUES (%s, %s, %s, %s, %s)",
                                          chain)
                    await cur.executemany(
                        "INSERT INTO records (tid, seq, time, received_at, kind, source, reason, severity, who, "
                        "round, message, data, replay) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        records)
                if refused:
                    await cur.executemany(
                        "INSERT INTO refused_records (site, table_name, seq, hash, reason, detail, record, received_at) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING", refused)
                if moved:
                    await cur.execute(
                        "UPDATE floor_tables t SET low_seq = m.low, head_seq = m.head FROM "
                        "unnest(%s::int[], %s::bigint[], %s::bigint[]) AS m(id, low, head) WHERE t.id = m.id",
                        (list(moved), [span.low for span in moved.values()], [span.head for span in moved.values()]))
                await cur.execute("UPDATE floor_tables SET last_seen = GREATEST(last_seen, %s) WHERE id = ANY(%s)",
                                  (received_at, tids))

    @staticmethod
    def _rows(tid: int, accepted: list[tuple[Event, str]],
              received_at: dt.datetime) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """The chain's rows and the records' rows of ``accepted``."""
        chain, records = [], []
        for event, digest in accepted:
            time = record_time(event.time)
            chain.append((tid, event.seq, bytes.fromhex(digest), bytes.fromhex(event.prev), time.date()))
            records.append((tid, event.seq, time, received_at, event.kind, event.source, event.reason, event.severity,
                            event.who, event.round, event.message, Jsonb(event.data, dumps=_json), event.replay))
        return chain, records

    async def _copy(self, conn: psycopg.AsyncConnection[Any], chain: list[tuple[Any, ...]],
                    records: list[tuple[Any, ...]]) -> None:
        """A backlog's hundreds of rows by binary COPY."""
        async with conn.cursor() as cur:
            async with cur.copy("COPY chain (tid, seq, hash, prev, day) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["int4", "int8", "bytea", "bytea", "date"])
                for row in chain:
                    await copy.write_row(row)
            async with cur.copy("COPY records (tid, seq, time, received_at, kind, source, reason, severity, who, round, "
                                "message, data, replay) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["int4", "int8", "timestamptz", "timestamptz", "text", "text", "text", "text", "text",
                                "text", "text", "jsonb", "bool"])
                for row in records:
                    await copy.write_row(row)

    async def _extend(self, conn: psycopg.AsyncConnection[Any], tid: int, span: Span, seqs: list[int],
                      received_at: dt.datetime) -> Span:
        """Move the table's low and head (returned: the caller writes them) and its gaps to take ``seqs``. Only a seq between the
        lowest and the head can change a known gap: the gaps are read only then. A gap that
        shrank or split keeps when it was first known."""
        since: dict[tuple[int, int], dt.datetime] = {}
        if span.low is not None and any(span.low <= seq <= span.head for seq in seqs):
            rows = await (await conn.execute("SELECT first_seq, last_seq, since FROM gaps WHERE tid = %s "
                                             "ORDER BY first_seq", (tid,))).fetchall()
            since = {(int(a), int(b)): at for a, b, at in rows}
            span = span._replace(gaps=list(since))
        after = extend(span, seqs)
        gone = [gap for gap in span.gaps if gap not in after.gaps]
        added = [gap for gap in after.gaps if gap not in since]

        def first_known(gap: tuple[int, int]) -> dt.datetime:
            return next((at for (a, b), at in since.items() if a <= gap[0] and gap[1] <= b), received_at)

        async with conn.cursor() as cur:
            if gone:
                await cur.executemany("DELETE FROM gaps WHERE tid = %s AND first_seq = %s",
                                      [(tid, first) for first, _ in gone])
            if added:
                await cur.executemany("INSERT INTO gaps (tid, first_seq, last_seq, since) VALUES (%s, %s, %s, %s)",
                                      [(tid, first, last, first_known((first, last))) for first, last in added])
        return after

    async def gaps(self, site: str, table: str) -> list[tuple[int, int]]:
        """The seq ranges missing between the table's lowest and highest stored records,
        each (first, last) inclusive, in order."""
        async with self._transaction() as conn:
            rows = await (await conn.execute(
                "SELECT g.first_seq, g.last_seq FROM gaps g JOIN floor_tables t ON t.id = g.tid "
                "WHERE t.site = %s AND t.table_name = %s ORDER BY g.first_seq", (site, table))).fetchall()
        return [(int(a), int(b)) for a, b in rows]

    async def recent_records(self, site: str, table: str, limit: int = 100,
                             before_seq: int | None = None) -> list[StoredRecord]:
        """The table's stored records, newest (highest seq) first, below ``before_seq`` if given."""
        async with self._transaction() as conn:
            rows = await (await conn.execute(
                "SELECT r.seq, r.time, r.received_at, r.kind, r.source, r.reason, r.severity, r.who, r.round, "
                "r.message, r.data, c.prev, c.hash, r.replay "
                "FROM floor_tables t JOIN records r ON r.tid = t.id JOIN chain c ON c.tid = r.tid AND c.seq = r.seq "
                "WHERE t.site = %s AND t.table_name = %s AND (%s::bigint IS NULL OR r.seq < %s) "
                "ORDER BY r.seq DESC LIMIT %s", (site, table, before_seq, before_seq, limit))).fetchall()
        return [StoredRecord(site, table, int(seq), time_text(time), received, kind, source, reason, severity, who,
                             round_, message, data, bytes(prev).hex(), bytes(digest).hex(), replay)
                for (seq, time, received, kind, source, reason, severity, who, round_, message, data, prev, digest,
                     replay) in rows]

    # ---- anchors ---------------------------------------------------------------------------

    async def check_anchor(self, anchor: Anchor, received_at: dt.datetime) -> list[ChainProblem]:
        """Keep ``anchor`` and check its export hash against the stored record it names; an
        anchor for a record not stored yet waits for it (checked by the store that brings it)."""
        async with self._transaction() as conn:
            tid = await self._tid(conn, anchor.site, anchor.table)
            row = await (await conn.execute("SELECT hash FROM chain WHERE tid = %s AND seq = %s",
                                            (tid, anchor.seq))).fetchone()
            stored = None if row is None else bytes(row[0]).hex()
            problem = _check_anchor(anchor.site, anchor.table, anchor.seq, anchor.export_hash, stored)
            verdict = "pending" if stored is None else "matched" if problem is None else "mismatch"
            await conn.execute(
                "INSERT INTO anchors (tid, seq, export_hash, hash, time, received_at, verdict) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (tid, seq, export_hash) DO UPDATE SET verdict = "
                "EXCLUDED.verdict", (tid, anchor.seq, anchor.export_hash, anchor.hash, record_time(anchor.time),
                                     received_at, verdict))
            await conn.execute("UPDATE floor_tables SET last_seen = GREATEST(last_seen, %s) WHERE id = %s",
                               (received_at, tid))
        return [] if problem is None else [problem]

    async def _check_pending_anchors(self, conn: psycopg.AsyncConnection[Any],
                                     stored: dict[tuple[int, int], tuple[str, str, str]]) -> dict[tuple[int, int], ChainProblem]:
        """The anchors waiting for the records just ``stored`` ((tid, seq): site, table, hash)
        checked; the problems by (tid, seq)."""
        if not stored:
            return {}
        rows = await (await conn.execute(
            "SELECT a.tid, a.seq, a.export_hash FROM anchors a JOIN unnest(%s::int[], %s::bigint[]) AS s(tid, seq) "
            "ON a.tid = s.tid AND a.seq = s.seq WHERE a.verdict = 'pending'",
            ([t for t, _ in stored], [q for _, q in stored]))).fetchall()
        problems = {}
        verdicts = []
        for tid, seq, export_hash in rows:
            site, table, digest = stored[(int(tid), int(seq))]
            problem = _check_anchor(site, table, int(seq), export_hash, digest)
            verdicts.append(("matched" if problem is None else "mismatch", tid, seq, export_hash))
            if problem is not None:
                problems[(int(tid), int(seq))] = problem
        if verdicts:
            async with conn.cursor() as cur:
                await cur.executemany("UPDATE anchors SET verdict = %s WHERE tid = %s AND seq = %s AND export_hash = %s",
                                      verdicts)
        return problems

    # ---- status and state ------------------------------------------------------------------

    async def note_status(self, status: Status, received_at: dt.datetime) -> list[ChainProblem]:
        """Keep the table's latest status (online or its Will) and its online/offline history;
        a session lower than the last one seen is ``session_backwards``."""
        async with self._transaction() as conn:
            tid = await self._tid(conn, status.site, status.table)
            row = await (await conn.execute("SELECT session, online, head_seq FROM floor_tables WHERE id = %s "
                                            "FOR UPDATE", (tid,))).fetchone()
            assert row is not None
            last, online, head = row
            problem = check_session(status.site, status.table, last, status.session, int(head))
            if last != status.session or online != status.online:
                await conn.execute("UPDATE status_history SET until = %s WHERE tid = %s AND until IS NULL",
                                   (received_at, tid))
                await conn.execute("INSERT INTO status_history (tid, online, session, since) VALUES (%s, %s, %s, %s)",
                                   (tid, status.online, status.session, received_at))
            await conn.execute(
                "UPDATE floor_tables SET online = %s, session = %s, status = %s, "
                "last_seen = GREATEST(last_seen, %s) WHERE id = %s",
                (status.online, status.session, Jsonb(msgspec.to_builtins(status)), received_at, tid))
        return [] if problem is None else [problem]

    async def note_state(self, state: State, received_at: dt.datetime) -> None:
        """Keep the table's latest state and its clock's offset from the floor's (the table's
        time minus when the floor received it: positive when the table is ahead)."""
        await self.note_states([(state, received_at)])

    async def note_states(self, states: Sequence[tuple[State, dt.datetime]]) -> None:
        """:meth:`note_state` for each of ``states`` (state, received_at) in one transaction: of a
        table's several, the last is kept."""
        latest = {(state.site, state.table): (state, at) for state, at in states}
        if not latest:
            return
        async with self._transaction() as conn:
            tids = await self._tids_of(conn, set(latest))
            rows = sorted((tids[key], Jsonb(msgspec.to_builtins(state)),
                           (record_time(state.time) - at).total_seconds(), at)
                          for key, (state, at) in latest.items())
            async with conn.cursor() as cur:  # in id order, as store_many locks tables
                await cur.executemany(
                    "UPDATE floor_tables SET state = %s, clock_offset_s = %s, last_seen = GREATEST(last_seen, %s) "
                    "WHERE id = %s", [(state, offset, at, tid) for tid, state, offset, at in rows])

    _TABLE_COLUMNS = ("SELECT site, table_name, online, session, status, state, last_seen, clock_offset_s, head_seq "
                      "FROM floor_tables")

    async def tables(self) -> list[TableRow]:
        """Every table known, by site and table."""
        async with self._transaction() as conn:
            rows = await (await conn.execute(self._TABLE_COLUMNS + " ORDER BY site, table_name")).fetchall()
        return [TableRow(*row) for row in rows]

    async def table(self, site: str, table: str) -> TableRow | None:
        async with self._transaction() as conn:
            row = await (await conn.execute(self._TABLE_COLUMNS + " WHERE site = %s AND table_name = %s",
                                            (site, table))).fetchone()
        return None if row is None else TableRow(*row)

    # ---- floor alarms ----------------------------------------------------------------------

    _ALARM_COLUMNS = "id, site, table_name, kind, key, detail, raised_at, cleared_at, acked_by, acked_at, note"

    async def raise_alarm(self, site: str, table: str, kind: str, key: str, detail: str,
                          at: dt.datetime) -> FloorAlarm | None:
        """Raise a floor alarm; None when the same (site, table, kind, key) is raised already and
        not cleared."""
        async with self._transaction() as conn:
            row = await (await conn.execute(
                "INSERT INTO floor_alarms (site, table_name, kind, key, detail, raised_at) "
                "VALUES (%s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (site, table_name, kind, key) WHERE cleared_at IS NULL DO NOTHING "
                f"RETURNING {self._ALARM_COLUMNS}", (site, table, kind, key, detail, at))).fetchone()
        return None if row is None else FloorAlarm(*row)

    async def clear_alarm(self, site: str, table: str, kind: str, key: str, at: dt.datetime) -> FloorAlarm | None:
        """Clear the raised alarm (site, table, kind, key); None when none is raised."""
        async with self._transaction() as conn:
            row = await (await conn.execute(
                "UPDATE floor_alarms SET cleared_at = %s "
                "WHERE site = %s AND table_name = %s AND kind = %s AND key = %s AND cleared_at IS NULL "
                f"RETURNING {self._ALARM_COLUMNS}", (at, site, table, kind, key))).fetchone()
        return None if row is None else FloorAlarm(*row)

    async def acknowledge(self, alarm_id: int, who: str, note: str, at: dt.datetime) -> FloorAlarm | None:
        """Acknowledge alarm ``alarm_id`` (who, when, a note); None when there is no such alarm.
        An alarm acknowledged already keeps its first acknowledgement and is returned as it is."""
        async with self._transaction() as conn:
            row = await (await conn.execute(
                "UPDATE floor_alarms SET acked_by = %s, acked_at = %s, note = %s WHERE id = %s AND acked_at IS NULL "
                f"RETURNING {self._ALARM_COLUMNS}", (who, at, note, alarm_id))).fetchone()
            if row is None:
                row = await (await conn.execute(f"SELECT {self._ALARM_COLUMNS} FROM floor_alarms WHERE id = %s",
                                                (alarm_id,))).fetchone()
        return None if row is None else FloorAlarm(*row)

    async def alarm(self, alarm_id: int) -> FloorAlarm | None:
        async with self._transaction() as conn:
            row = await (await conn.execute(f"SELECT {self._ALARM_COLUMNS} FROM floor_alarms WHERE id = %s",
                                            (alarm_id,))).fetchone()
        return None if row is None else FloorAlarm(*row)

    async def alarms(self, *, state: str = "all", site: str | None = None, table: str | None = None,
                     kind: str | None = None, limit: int = 500,
                     among: list[tuple[str, str]] | None = None) -> list[FloorAlarm]:
        """Floor alarms, the newest raised first; ``state``: open, acknowledged, cleared or all;
        ``among``: of these tables (site, table) only."""
        if state not in _ALARM_STATES:
            raise ArchiveError(f"alarm state {state!r}: one of {', '.join(_ALARM_STATES)}")
        where: list[sql.Composable] = []
        args: list[Any] = []
        where.append(sql.SQL({"open": "cleared_at IS NULL AND acked_at IS NULL",
                              "acknowledged": "cleared_at IS NULL AND acked_at IS NOT NULL",
                              "cleared": "cleared_at IS NOT NULL", "all": "TRUE"}[state]))
        for column, value in (("site", site), ("table_name", table), ("kind", kind)):
            if value is not None:
                where.append(sql.SQL("{} = %s").format(sql.Identifier(column)))
                args.append(value)
        if among is not None:
            where.append(sql.SQL("site || '/' || table_name = ANY(%s)"))
            args.append([f"{s}/{t}" for s, t in among])
        query = sql.SQL("SELECT {} FROM floor_alarms WHERE {} ORDER BY raised_at DESC, id DESC LIMIT %s").format(
            sql.SQL(self._ALARM_COLUMNS), sql.SQL(" AND ").join(where))
        async with self._transaction() as conn:
            rows = await (await conn.execute(query, (*args, limit))).fetchall()
        return [FloorAlarm(*row) for row in rows]

    # ---- the audit ----------------------------------------------------------------------------

    async def audit(self, action: str, outcome: str, who: str, at: dt.datetime, *, address: str | None = None,
                    alarm_id: int | None = None, detail: str = "") -> None:
        """Keep one entry of the audit: a log-in or log-out (``outcome`` ok, refused or limited)
        or an acknowledgement, who (as given: at most 256 characters) and from where."""
        async with self._transaction() as conn:
            await conn.execute("INSERT INTO floor_audit (at, action, outcome, who, address, alarm_id, detail) "
                               "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                               (at, action, outcome, who[:256], address, alarm_id, detail[:1000]))

    async def audit_entries(self, *, who: str | None = None, action: str | None = None,
                            before_id: int | None = None, limit: int = 100) -> list[AuditEntry]:
        """The audit, the newest first: ``who``'s (as kept), of ``action``, below ``before_id``."""
        async with self._transaction() as conn:
            rows = await (await conn.execute(
                "SELECT id, at, action, outcome, who, address, alarm_id, detail FROM floor_audit "
                "WHERE (%(who)s::text IS NULL OR who = %(who)s) AND (%(action)s::text IS NULL OR action = %(action)s) "
                "AND (%(before)s::bigint IS NULL OR id < %(before)s) ORDER BY id DESC LIMIT %(limit)s",
                {"who": who, "action": action, "before": before_id, "limit": limit})).fetchall()
        return [AuditEntry(*row) for row in rows]

    async def log_ins_since(self, since: dt.datetime) -> list[tuple[str, str, str | None, dt.datetime]]:
        """The log-ins tried after ``since``, the oldest first: (outcome, who, address, at)."""
        async with self._transaction() as conn:
            rows = await (await conn.execute(
                "SELECT outcome, who, address, at FROM floor_audit WHERE action = 'login' AND at > %s ORDER BY id",
                (since,))).fetchall()
        return [(outcome, who, address, at) for outcome, who, address, at in rows]

    # ---- sessions logged out -------------------------------------------------------------------

    async def end_session(self, session: bytes, until: dt.datetime, now: dt.datetime) -> None:
        """Keep ``session`` (a digest) as logged out until ``until``; forget those ended by ``now``."""
        async with self._transaction() as conn:
            await conn.execute("DELETE FROM ended_sessions WHERE until <= %s", (now,))
            await conn.execute("INSERT INTO ended_sessions (session, until) VALUES (%s, %s) "
                               "ON CONFLICT (session) DO NOTHING", (session, until))

    async def ended_sessions(self, now: dt.datetime) -> dict[bytes, dt.datetime]:
        """The sessions logged out that would not have ended by ``now``: digest -> their end."""
        async with self._transaction() as conn:
            rows = await (await conn.execute("SELECT session, until FROM ended_sessions WHERE until > %s",
                                             (now,))).fetchall()
        return {bytes(session): until for session, until in rows}

    # ---- retention -------------------------------------------------------------------------

    async def drop_expired(self, today: dt.date) -> list[str]:
        """Drop the day partitions older than the retention (records of ``today -
        retention_days`` and later are kept) with what belongs to their days, and make the
        partitions of the coming days; returns the partitions dropped. Run daily."""
        horizon = today - dt.timedelta(days=self.retention_days)
        await self._ensure_partitions(today + dt.timedelta(days=d) for d in range(DAYS_AHEAD + 1))
        async with self._transaction() as conn:
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PARTITION_LOCK,))
            rows = await (await conn.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "WHERE i.inhparent = 'records'::regclass")).fetchall()
            expired = sorted(name for (name,) in rows
                             if (m := _PARTITION.match(name)) and dt.datetime.strptime(m[1], "%Y%m%d").date() < horizon)
            for name in expired:
                await conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(name)))
            cut = dt.datetime.combine(horizon, dt.time(), dt.timezone.utc)
            await conn.execute("DELETE FROM chain WHERE day < %s", (horizon,))
            # each table's chain now starts at its oldest record kept, and no gap lies below it
            await conn.execute(
                "UPDATE floor_tables t SET low_seq = k.low, head_seq = COALESCE(k.head, 0) FROM "
                "(SELECT id, (SELECT min(seq) FROM chain WHERE tid = id) AS low, "
                "(SELECT max(seq) FROM chain WHERE tid = id) AS head FROM floor_tables) AS k "
                "WHERE t.id = k.id AND t.low_seq IS DISTINCT FROM k.low")
            await conn.execute("DELETE FROM gaps g USING floor_tables t WHERE g.tid = t.id "
                               "AND (t.low_seq IS NULL OR g.last_seq < t.low_seq)")
            await conn.execute("DELETE FROM anchors WHERE time < %s", (cut,))
            await conn.execute("DELETE FROM refused_records WHERE received_at < %s", (cut,))
            await conn.execute("DELETE FROM status_history WHERE until < %s", (cut,))
            await conn.execute("DELETE FROM floor_alarms WHERE cleared_at < %s", (cut,))
            await conn.execute("DELETE FROM floor_audit WHERE at < %s", (cut,))
        self._partitions = {day for day in self._partitions if day >= horizon}
        return expired


def _today() -> dt.date:
    return dt.datetime.now(dt.timezone.utc).date()
