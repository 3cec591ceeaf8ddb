"""The archive on a real PostgreSQL (tests/support/postgres.py): records stored once whatever
is delivered, chain problems named, migrations, retention, and a server lost under store()."""
from __future__ import annotations

import asyncio
import socket
import datetime as dt
from collections.abc import Awaitable, Callable

import msgspec
import psycopg
import pytest

from cardd.floor.archive import Archive, ArchiveError, ArchiveUnavailable, migrations, partition_name
from cardd.floor.contract import Event, ExportSummary, Rounds, State
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
            assert [r.seq for r in await archive.recent_records(table.site, table.table, before_seq=3)] == [2, 1]
            # today's partition and the next two days' are made at open
            today = dt.datetime.now(dt.timezone.utc).date()
            assert {partition_name(today + dt.timedelta(days=d)) for d in range(3)} <= set(partitions(floor_db))
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
    applied = len(migrations())
    assert applied >= 2 and count(floor_db, "SELECT count(*) FROM schema_version") == applied
    async def again() -> None:  # opening again applies nothing
        await (await Archive.open(floor_db)).close()
    run(again())
    assert count(floor_db, "SELECT count(*) FROM schema_version") == applied


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
    # bj-03: a day's records with a gap, then the next day's
    both = Table("bj-03", start=START + dt.timedelta(hours=14))
    span = both.records(10, step=dt.timedelta(hours=1))  # seqs 1-7 on START's day, 8-10 the next

    @opened(floor_db, retention_days=90)
    async def _(archive: Archive) -> None:
        await archive.store(old.site, old.table, old.records(3), NOW)
        await archive.store(kept.site, kept.table, kept.records(3), NOW)
        await archive.store(both.site, both.table, span[:2] + span[3:6] + [span[7], span[9]], NOW)
        assert await archive.gaps(both.site, both.table) == [(3, 3), (7, 7), (9, 9)]
        today = START.date() + dt.timedelta(days=91)  # START's day is 91 days old: past 90
        assert await archive.drop_expired(today) == ["records_20261202"]
        assert await archive.drop_expired(today) == []
        assert await archive.recent_records(old.site, old.table) == []
        assert [r.seq for r in await archive.recent_records(kept.site, kept.table)] == [3, 2, 1]
        # bj-03's chain now starts at its oldest record kept: the gap below it is gone, and a
        # resend of its expired records is taken as any record below the lowest
        assert await archive.gaps(both.site, both.table) == [(9, 9)]
        row = await archive.table(old.site, old.table)
        assert row is not None and row.head_seq == 0
        result = await archive.store(both.site, both.table, span[3:9], NOW)
        assert result.stored == [4, 5, 6, 7, 9] and result.duplicates == 1 and result.problems == []
        assert await archive.gaps(both.site, both.table) == []
        # the partitions of the coming days are made ahead
        assert {"records_20270303", "records_20270304"} <= set(partitions(floor_db))
    assert count(floor_db, "SELECT count(*) FROM chain WHERE day < '2026-12-03'") == 4  # bj-03's 4-7, stored again
    assert "records_20261203" in partitions(floor_db)


def partitions(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [name for (name,) in conn.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'records'::regclass ORDER BY 1").fetchall()]


def test_a_retention_under_90_days_is_refused(floor_db: str) -> None:
    with pytest.raises(ArchiveError, match="a retention of 30 days: the archive keeps at least 90"):
        run(Archive.open(floor_db, retention_days=30))


@pytest.mark.parametrize("size, messages", [(100, 40), (1, 300)], ids=["backlog-copy", "live-pipeline"])
def test_postgresql_killed_under_store_loses_nothing_committed(size: int, messages: int) -> None:
    """SIGKILL of the postmaster while records are being stored (a backlog's COPY, or live
    records' pipelined inserts), then a restart: the calls it cut raise ArchiveUnavailable, the
    same call made again connects again and stores, and every record a call returned as stored
    is there after the restart, once."""
    table = Table()
    batches = [table.records(size) for _ in range(messages)]
    total = size * messages
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
            assert len(set(committed)) == len(committed) and len(committed) + duplicates == total
        run(main())
        assert count(dsn, "SELECT count(*) FROM records") == total
        assert count(dsn, "SELECT count(DISTINCT seq) FROM chain") == total


def test_store_many_takes_several_tables_messages_in_one_call(floor_db: str) -> None:
    a, b, c = Table("bj-01"), Table("bj-02"), Table("bj-03")
    a1, a2, b1, c1 = a.records(3), a.records(2), b.records(4), c.records(2)
    forged = rewritten(c1[1], message="round 1: not this")

    @opened(floor_db)
    async def _(archive: Archive) -> None:
        results = await archive.store_many(
            [(b.site, b.table, b1), (a.site, a.table, a1), (c.site, c.table, c1[:1]), (a.site, a.table, a2),
             (c.site, c.table, []), (c.site, c.table, [forged, c1[1]])], NOW)
        assert [(r.stored, r.duplicates, [(p.kind, p.table, p.seq) for p in r.problems]) for r in results] == [
            ([1, 2, 3, 4], 0, []), ([1, 2, 3], 0, []), ([1], 0, []), ([4, 5], 0, []), ([], 0, []),
            ([2], 0, [("rewritten", "bj-03", 2)])]
        assert [(row.table, row.head_seq) for row in await archive.tables()] == \
            [("bj-01", 5), ("bj-02", 4), ("bj-03", 2)]


def test_two_instances_storing_the_same_records_at_once_store_each_once(floor_db: str) -> None:
    """Two cardfloor instances on one archive, both receiving every table: each record is stored
    by one of them, the other counts it a duplicate, and neither waits on the other for ever."""
    tables = [Table(f"bj-{i:02d}") for i in range(8)]
    messages = [(t.site, t.table, t.records(50)) for t in tables for _ in range(4)]

    async def main() -> None:
        first, second = await Archive.open(floor_db), await Archive.open(floor_db)
        try:
            async def deliver(archive: Archive, order: list[tuple[str, str, list[Event]]]) -> tuple[int, int]:
                stored = duplicates = 0
                for start in range(0, len(order), 5):
                    for result in await archive.store_many(order[start:start + 5], NOW):
                        assert result.problems == []
                        stored += len(result.stored)
                        duplicates += result.duplicates
                return stored, duplicates
            (s1, d1), (s2, d2) = await asyncio.gather(deliver(first, messages), deliver(second, messages[::-1]))
            assert s1 + s2 == 8 * 200 and d1 + d2 == 8 * 200
        finally:
            await first.close()
            await second.close()
    run(main())
    assert count(floor_db, "SELECT count(*) FROM records") == 8 * 200


def test_floor_alarms_are_raised_once_cleared_and_acknowledged(floor_db: str) -> None:
    minute = dt.timedelta(minutes=1)

    @opened(floor_db)
    async def _(archive: Archive) -> None:
        raised = await archive.raise_alarm("floor1", "bj-07", "chain", "break:4", "a break at record 4", NOW)
        assert raised is not None and raised.state == "open" and raised.raised_at == NOW
        assert await archive.raise_alarm("floor1", "bj-07", "chain", "break:4", "again", NOW + minute) is None
        other = await archive.raise_alarm("floor1", "bj-08", "table_offline", "", "offline", NOW + minute)
        assert other is not None
        acked = await archive.acknowledge(raised.id, "pit boss", "looking at it", NOW + 2 * minute)
        assert acked is not None and (acked.state, acked.acked_by, acked.note) == \
            ("acknowledged", "pit boss", "looking at it")
        again = await archive.acknowledge(raised.id, "someone else", "", NOW + 3 * minute)
        assert again is not None and again.acked_by == "pit boss"  # the first acknowledgement stays
        assert await archive.acknowledge(10**9, "pit boss", "", NOW) is None
        assert [a.id for a in await archive.alarms(state="open")] == [other.id]
        assert [a.id for a in await archive.alarms(state="acknowledged")] == [raised.id]
        cleared = await archive.clear_alarm("floor1", "bj-07", "chain", "break:4", NOW + 4 * minute)
        assert cleared is not None and cleared.state == "cleared" and cleared.cleared_at == NOW + 4 * minute
        assert await archive.clear_alarm("floor1", "bj-07", "chain", "break:4", NOW + 5 * minute) is None
        # once cleared it may be raised anew
        assert await archive.raise_alarm("floor1", "bj-07", "chain", "break:4", "again", NOW + 6 * minute) is not None
        assert [a.table for a in await archive.alarms(kind="table_offline")] == ["bj-08"]
        assert [a.state for a in await archive.alarms(table="bj-07")] == ["open", "cleared"]
        assert len(await archive.alarms(limit=1)) == 1
        with pytest.raises(ArchiveError, match="alarm state 'closed': one of open, acknowledged, cleared, all"):
            await archive.alarms(state="closed")


def test_the_latest_state_and_the_clock_offset_are_kept(floor_db: str) -> None:
    table = Table()
    state = State(schema="cardd.floor/1", site=table.site, table=table.table, time="2026-12-02T04:44:02.500Z",
                  devices=[], shoe=None, rounds=Rounds(this_shoe=0, this_hour=3), alarms=[],
                  export=ExportSummary(delivered_through=10, backlog=0, oldest_undelivered_s=None))

    @opened(floor_db)
    async def _(archive: Archive) -> None:
        await archive.note_state(state, NOW)  # NOW is 04:44:00.000: the table is 2.5 s ahead
        row = await archive.table(table.site, table.table)
        assert row is not None and row.clock_offset_s == 2.5 and row.last_seen == NOW
        assert row.state is not None and row.state["rounds"] == {"this_shoe": 0, "this_hour": 3}
        assert await archive.table(table.site, "bj-99") is None


@pytest.mark.parametrize("dsn", ["nonsense here", "host=127.0.0.1 pasword=secret"])
def test_a_dsn_that_is_no_connection_string_is_one_line(dsn: str) -> None:
    with pytest.raises(ArchiveError) as refused:
        run(Archive.open(dsn))
    assert str(refused.value) == ("the archive's dsn is not a PostgreSQL connection string "
                                  "(postgresql://user@host:port/database, or key=value pairs)")


def test_an_archive_nobody_answers_for_is_unavailable() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ArchiveUnavailable) as refused:
        run(Archive.open(f"postgresql://postgres:secret@127.0.0.1:{port}/floor"))
    assert str(refused.value) == (f"the archive (PostgreSQL at 127.0.0.1:{port}) did not answer: nothing of this "
                                  "call is known to be stored, and calling again is safe")
