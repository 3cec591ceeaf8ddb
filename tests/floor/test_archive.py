"""The archive on a real PostgreSQL (tests/support/postgres.py): records stored once whatever
is delivered, chain problems named, migrations, retention, and a server lost under store()."""
from __future__ import annotations

import asyncio
import datetime as dt

import psycopg

from cardd.floor.archive import Archive
from tests.floor.records import START, Table
from tests.support.aio import run

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
