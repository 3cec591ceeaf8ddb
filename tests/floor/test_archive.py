"""The archive on a real PostgreSQL (tests/support/postgres.py): records stored once whatever
is delivered, chain problems named, migrations, retention, and a server lost under store()."""
from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable

import msgspec
import psycopg
import pytest

from cardd.floor.archive import Archive, ArchiveError, ArchiveUnavailable
from tests.floor.records import START, Table, rewritten
from tests.support.aio import run
from tests.support.postgres import PostgresServer

NOW = START + dt.timedelta(hours=1)


def count(dsn: str, query: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(query).fetchone()
        assert row is not None
        return int(row[0])


def test_records_are_stored_with_their_chain_and_read_back_newest_first(floor_db: str) -> None:
    table = Table()
    records = table.records(5)

    async def main() -> None:
        archive = await Archive.open(floor_db)
        try:
            result = await archive.store(table.site, table.table, records, NOW)
            assert result.stored == [1, 2, 3, 4, 5] and result.duplicates == 0 and result.problems == []
            back = await archive.recent_records(table.site, table.table, limit=2)
            assert [(r.seq, r.hash, r.prev, r.time, r.data) for r in back] == \
                [(e.seq, e.hash, e.prev, e.time, e.data) for e in reversed(records[3:])]
            row = await archive.table(table.site, table.table)
            assert row is not None and row.head_seq == 5 and row.last_seen == NOW
        finally:
            await archive.close()
    run(main())


def test_a_duplicate_flood_stores_each_record_once(floor_db: str) -> None:
    """10,000 deliveries of the same 500 records (a resend after every reconnect, two floor
    instances, a broker's redelivery): 500 stored, the rest counted as duplicates."""
    table = Table()
    records = table.records(500)

    async def main() -> None:
        archive = await Archive.open(floor_db)
        try:
            stored, duplicates = [], 0
            for i in range(20):  # 20 deliveries of all 500, in messages of 100, each starting elsewhere
                rotated = records[37 * i:] + records[:37 * i]
                for start in range(0, 500, 100):
                    batch = rotated[start:start + 100]
                    result = await archive.store(table.site, table.table, batch, NOW)
                    assert result.problems == []
                    stored += result.stored
                    duplicates += result.duplicates
            assert sorted(stored) == list(range(1, 501))
            assert len(stored) + duplicates == 20 * 500
            assert await archive.gaps(table.site, table.table) == []
        finally:
            await archive.close()
    run(main())
    assert count(floor_db, "SELECT count(*) FROM records") == 500
    assert count(floor_db, "SELECT count(*) FROM chain") == 500


def test_two_instances_opening_at_once_apply_the_migrations_once(floor_db: str) -> None:
    async def main() -> None:
        archives = await asyncio.gather(*(Archive.open(floor_db) for _ in range(3)))
        for archive in archives:
            await archive.close()
    run(main())
    assert count(floor_db, "SELECT count(*) FROM schema_version") == 1
    async def again() -> None:  # opening again applies nothing
        await (await Archive.open(floor_db)).close()
    run(again())
    assert count(floor_db, "SELECT count(*) FROM schema_version") == 1


def opened(dsn: str, **options: int) -> Callable[[Callable[[Archive], Awaitable[None]]], None]:
    """Run the decorated coroutine with an Archive open on ``dsn``, closed after it."""
    def runner(body: Callable[[Archive], Awaitable[None]]) -> None:
        async def main() -> None:
            archive = await Archive.open(dsn, **options)
            try:
                await body(archive)
            finally:
                await archive.close()
        run(main())
    return runner


def refused(dsn: str) -> list[tuple[int, str]]:
    with psycopg.connect(dsn) as conn:
        return [(int(seq), reason) for seq, reason in
                conn.execute("SELECT seq, reason FROM refused_records ORDER BY id").fetchall()]


def test_a_rewritten_record_is_named_with_its_seq_and_the_first_is_kept(floor_db: str) -> None:
    table = Table()
    records = table.records(3)
    forged = rewritten(records[1], message="round 1: something else")

    @opened(floor_db)
    async def _(archive: Archive) -> None:
        await archive.store(table.site, table.table, records, NOW)
        result = await archive.store(table.site, table.table, [forged], NOW)
        assert result.stored == [] and result.duplicates == 0
        assert [(p.kind, p.site, p.table, p.seq) for p in result.problems] == [("rewritten", "floor1", "bj-07", 2)]
        kept = {r.seq: r for r in await archive.recent_records(table.site, table.table)}
        assert kept[2].hash == records[1].hash and kept[2].message == records[1].message
    assert refused(floor_db) == [(2, "rewritten")]


def test_a_record_that_does_not_link_is_a_break_and_not_stored(floor_db: str) -> None:
    """Its prev is not the stored record seq-1's hash; or (arriving into a gap) its hash is not
    the stored record seq+1's prev: either way the link is checked from the side that came second."""
    table = Table()
    records = table.records(5)
    bad_prev = rewritten(records[3], prev="1" * 64)
    bad_next = rewritten(records[1], message="round 1: not what record 3 followed")

    @opened(floor_db)
    async def _(archive: Archive) -> None:
        await archive.store(table.site, table.table, [records[0], records[2]], NOW)  # 2 missing
        await archive.store(table.site, table.table, [records[2]], NOW)
        result = await archive.store(table.site, table.table, [bad_prev], NOW)
        assert [(p.kind, p.seq) for p in result.problems] == [("break", 4)] and result.stored == []
        assert "record 4" in result.problems[0].detail
        result = await archive.store(table.site, table.table, [bad_next], NOW)
        assert [(p.kind, p.seq) for p in result.problems] == [("break", 2)] and result.stored == []
        assert await archive.gaps(table.site, table.table) == [(2, 2)]
        # the genuine records still fit
        result = await archive.store(table.site, table.table, records, NOW)
        assert result.stored == [2, 4, 5] and result.problems == []
        assert await archive.gaps(table.site, table.table) == []
    assert refused(floor_db) == [(4, "break"), (2, "break")]


def test_a_record_whose_hash_does_not_recompute_is_bad_hash(floor_db: str) -> None:
    table = Table()
    records = table.records(2)
    tampered = msgspec.structs.replace(records[1], message="round 1: edited after hashing")

    @opened(floor_db)
    async def _(archive: Archive) -> None:
        result = await archive.store(table.site, table.table, [records[0], tampered], NOW)
        assert result.stored == [1]
        assert [(p.kind, p.seq) for p in result.problems] == [("bad_hash", 2)]
        assert (await archive.table(table.site, table.table)).head_seq == 1  # type: ignore[union-attr]
    assert refused(floor_db) == [(2, "bad_hash")]


def test_a_gap_filled_later_out_of_order_leaves_no_problem(floor_db: str) -> None:
    table = Table()
    records = table.records(12)

    @opened(floor_db)
    async def _(archive: Archive) -> None:
        async def store(*seqs: int) -> None:
            result = await archive.store(table.site, table.table, [records[s - 1] for s in seqs], NOW)
            assert result.problems == [] and result.stored == sorted(seqs)

        await store(1, 2, 3)
        await store(9, 10)
        assert await archive.gaps(table.site, table.table) == [(4, 8)]
        await store(12)
        assert await archive.gaps(table.site, table.table) == [(4, 8), (11, 11)]
        await store(6)
        await store(4)
        assert await archive.gaps(table.site, table.table) == [(5, 5), (7, 8), (11, 11)]
        await store(8, 11)
        await store(7)
        await store(5)
        assert await archive.gaps(table.site, table.table) == []
        stored = await archive.recent_records(table.site, table.table)
        assert [r.seq for r in stored] == list(range(12, 0, -1))
    assert refused(floor_db) == []


def test_anchors_matching_not_matching_and_before_their_record(floor_db: str) -> None:
    table = Table()
    records = table.records(6)

    @opened(floor_db)
    async def _(archive: Archive) -> None:
        await archive.store(table.site, table.table, records[:3], NOW)
        assert await archive.check_anchor(table.anchor(3), NOW) == []
        problems = await archive.check_anchor(table.anchor(2, export_hash="b" * 64), NOW)
        assert [(p.kind, p.site, p.table, p.seq) for p in problems] == [("anchor_mismatch", "floor1", "bj-07", 2)]
        # anchors for records not stored yet wait for them: one right, one wrong
        assert await archive.check_anchor(table.anchor(5), NOW) == []
        assert await archive.check_anchor(table.anchor(6, export_hash="c" * 64), NOW) == []
        result = await archive.store(table.site, table.table, records[3:], NOW)
        assert result.stored == [4, 5, 6]
        assert [(p.kind, p.seq) for p in result.problems] == [("anchor_mismatch", 6)]
        # a retained anchor delivered again is checked again
        assert [p.kind for p in await archive.check_anchor(table.anchor(6, export_hash="c" * 64), NOW)] == \
            ["anchor_mismatch"]


def test_a_session_lower_than_the_last_seen_is_session_backwards(floor_db: str) -> None:
    table = Table()

    @opened(floor_db)
    async def _(archive: Archive) -> None:
        assert await archive.note_status(table.status(5), NOW) == []
        assert await archive.note_status(table.status(5, online=False), NOW + dt.timedelta(minutes=1)) == []
        assert await archive.note_status(table.status(6), NOW + dt.timedelta(minutes=3)) == []
        await archive.store(table.site, table.table, table.records(4), NOW)
        problems = await archive.note_status(table.status(2), NOW + dt.timedelta(minutes=4))
        assert [(p.kind, p.site, p.table, p.seq) for p in problems] == [("session_backwards", "floor1", "bj-07", 4)]
        assert "session 2 after session 6" in problems[0].detail
        row = await archive.table(table.site, table.table)
        assert row is not None and row.online is True and row.session == 2
    with psycopg.connect(floor_db) as conn:
        history = conn.execute("SELECT online, session, since, until FROM status_history ORDER BY id").fetchall()
    minute = dt.timedelta(minutes=1)
    assert history == [(True, 5, NOW, NOW + minute), (False, 5, NOW + minute, NOW + 3 * minute),
                       (True, 6, NOW + 3 * minute, NOW + 4 * minute), (True, 2, NOW + 4 * minute, None)]


def test_retention_drops_the_partitions_past_its_horizon_and_keeps_the_rest(floor_db: str) -> None:
    old, kept = Table("bj-01"), Table("bj-02", start=START + dt.timedelta(days=1))

    @opened(floor_db, retention_days=90)
    async def _(archive: Archive) -> None:
        await archive.store(old.site, old.table, old.records(3), NOW)
        await archive.store(kept.site, kept.table, kept.records(3), NOW)
        today = START.date() + dt.timedelta(days=91)  # START's day is 91 days old: past 90
        assert await archive.drop_expired(today) == ["records_20261202"]
        assert await archive.drop_expired(today) == []
        assert await archive.recent_records(old.site, old.table) == []
        assert [r.seq for r in await archive.recent_records(kept.site, kept.table)] == [3, 2, 1]
        # the partitions of the coming days are made ahead
        assert {"records_20270303", "records_20270304"} <= set(partitions(floor_db))
    assert count(floor_db, "SELECT count(*) FROM chain") == 3
    assert "records_20261203" in partitions(floor_db)


def partitions(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [name for (name,) in conn.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'records'::regclass ORDER BY 1").fetchall()]


def test_a_retention_under_90_days_is_refused(floor_db: str) -> None:
    with pytest.raises(ArchiveError, match="a retention of 30 days: the archive keeps at least 90"):
        run(Archive.open(floor_db, retention_days=30))


def test_postgresql_killed_under_store_loses_nothing_committed() -> None:
    """SIGKILL of the postmaster while records are being stored, then a restart: the calls it
    cut raise ArchiveUnavailable, the same call made again connects again and stores, and every
    record a call returned as stored is there after the restart, once."""
    table = Table()
    batches = [table.records(100) for _ in range(40)]
    with PostgresServer() as server:
        dsn = server.create_database()

        async def main() -> None:
            archive = await Archive.open(dsn)
            committed: list[int] = []
            refusals = duplicates = 0
            half = asyncio.Event()

            async def writer() -> None:
                nonlocal refusals, duplicates
                for i, batch in enumerate(batches):
                    if i == len(batches) // 2:
                        half.set()
                    while True:
                        try:
                            result = await archive.store(table.site, table.table, batch, NOW)
                        except ArchiveUnavailable as exc:
                            assert "did not answer" in str(exc) and "calling again is safe" in str(exc)
                            refusals += 1
                            await asyncio.sleep(0.05)
                            continue
                        assert result.problems == []
                        committed.extend(result.stored)
                        # a commit that reached the disk just before the kill comes back as duplicates
                        duplicates += result.duplicates
                        break

            task = asyncio.create_task(writer())
            await half.wait()
            await asyncio.to_thread(server.kill)
            while not refusals and not task.done():  # the writer meets the dead server
                await asyncio.sleep(0.01)
            # from this thread: the postmaster dies with the thread that started it
            server.start()
            await task
            await archive.close()
            assert refusals >= 1
            assert len(set(committed)) == len(committed) and len(committed) + duplicates == 4000
        run(main())
        assert count(dsn, "SELECT count(*) FROM records") == 4000
        assert count(dsn, "SELECT count(DISTINCT seq) FROM chain") == 4000
