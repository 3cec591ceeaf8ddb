"""A card read and the first event it caused are one journal record: the event's, carrying the
read's input record (journal INPUT_KEY); every other input keeps a record of its own, and a
restart replays the reads the events carry."""
from __future__ import annotations

from pathlib import Path

from cardd.daemon.tracker_service import TableService
from cardd.journal import INPUT_KEY, KIND_EVENT, KIND_INPUT, Journal, input_of
from core.cards import Card, Orientation
from devices.tracker.inputs import DeviceMessage, to_json
from devices.tracker.snapshot import snapshot
from firmware_bridge.messages import CardRead, ShoeLoaded
from tests.daemon.service_rig import RULES, linked_and_shuffled, start, turn
from tests.support.aio import run
from tests.support.recorders import FakeClock

READ = DeviceMessage("shoe-reader", CardRead(1, Card.parse("2C"), Orientation.FACE_DOWN, 10), 2,
                     ("shoe", "sim", "shoe-reader-1"))

SECOND = DeviceMessage("shoe-reader", CardRead(2, Card.parse("9H"), Orientation.FACE_DOWN, 20), 3,
                       ("shoe", "sim", "shoe-reader-1"))


async def dealt_one_burn_card(service: TableService) -> None:
    await linked_and_shuffled(service)
    await turn(service, DeviceMessage("shoe-reader", ShoeLoaded(0), 1))
    await turn(service, READ)


def test_a_card_read_is_one_record_the_event_it_caused_carrying_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        with Journal.open(tmp_path / "journal.sqlite3", create=True) as journal:
            service = TableService(RULES, journal, lambda event: None, clock=FakeClock())
            before = service.restore(start())
            await dealt_one_burn_card(service)
            records = journal.query(seq_from=before + 1, limit=None)
            carrying = [r for r in records if input_of(r.kind, r.data) == to_json(READ)]
            assert len(carrying) == 1, [(r.kind, r.reason) for r in records]
            (record,) = carrying
            assert record.kind == KIND_EVENT and record.reason != "" and record.source != ""
            assert record.data[INPUT_KEY] == to_json(READ) and record.data["message"]
            assert record.seq == records[-1].seq - (len(records) - 1 - records.index(record))
            # the read's record comes first among what the read caused; no input record of its own
            after = records[records.index(record):]
            assert [r for r in after if r.kind == KIND_INPUT] == []
            # every other input keeps its own record (the load, the links, the shuffle)
            loads = [r for r in records if r.kind == KIND_INPUT and r.data.get("message", "").startswith("33")]
            assert len(loads) == 1 and INPUT_KEY not in loads[0].data
            assert service.journaled_reads == {"shoe-reader": 1}

    run(scenario())


def test_a_restart_after_a_crash_replays_the_read_an_event_carries(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"

    async def live() -> dict[str, object]:
        journal = Journal.open(path, create=True)
        service = TableService(RULES, journal, lambda event: None, clock=FakeClock())
        service.restore(start())
        await dealt_one_burn_card(service)
        await turn(service, SECOND)  # no device changes state: the card path, no snapshot in its commit
        expected = snapshot(service.table)
        journal.close()  # a crash: no stop record, no snapshot at the end
        return expected

    async def restarted() -> dict[str, object]:
        with Journal.open(path) as journal:
            latest = journal.latest_snapshot()
            assert latest is not None
            after = journal.query(seq_from=latest[0] + 1, limit=None)
            assert any(INPUT_KEY in r.data for r in after), "the read is after the last snapshot"
            service = TableService(RULES, journal, lambda event: None, clock=FakeClock())
            service.restore(start())
            return snapshot(service.table)

    expected = run(live())
    got = run(restarted())
    assert got["shoe"] == expected["shoe"] and got["piles"] == expected["piles"]
