"""The daemon's card-path commits skip the snapshot; a restart replays what came after it onto
the table as it was and comes back exactly where a snapshot taken at the end would bring it."""
from __future__ import annotations

from pathlib import Path

from cardd.daemon.tracker_service import SNAPSHOT_EVERY_RECORDS, TableService
from cardd.journal import Journal
from core.cards import Card, Orientation
from devices.tracker.inputs import DeviceMessage, NoMoreBets, OpenRound, PlaceBet
from devices.tracker.snapshot import restore, snapshot
from firmware_bridge.messages import CardRead, Heartbeat, ShoeLoaded
from tests.daemon.service_rig import RULES, linked_and_shuffled, start, turn
from tests.support.aio import run
from tests.support.recorders import FakeClock


def read(index: int, card: str) -> DeviceMessage:
    return DeviceMessage("shoe-reader", CardRead(index, Card.parse(card), Orientation.FACE_DOWN, index * 10))


def test_a_restart_replays_the_card_reads_after_the_last_snapshot_exactly(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    clock = FakeClock()  # never moves: only the card path decides when a snapshot is skipped

    async def live() -> dict[str, object]:
        journal = Journal.open(path, create=True)
        service = TableService(RULES, journal, lambda event: None, clock=clock)
        service.restore(start())
        await linked_and_shuffled(service)
        await turn(service, DeviceMessage("shoe-reader", ShoeLoaded(0)))
        index = 0
        for _ in range(RULES.shoe.burn_after_shuffle):
            index += 1
            await turn(service, read(index, "2C"))
        await turn(service, OpenRound(), PlaceBet(1, "p1", RULES.table.min_per_player),
                   PlaceBet(3, "p3", RULES.table.min_per_player), NoMoreBets("dealer-1"))
        for card in ("9H", "TD", "7S", "8C"):  # one card per commit, a heartbeat between: the card path
            index += 1
            await turn(service, read(index, card))
            await turn(service, DeviceMessage("shoe-reader", Heartbeat(1)))
        latest = journal.latest_snapshot()
        # the last commits (four card reads, a record each: the read carried by its event) carried no snapshot
        assert latest is not None and latest[0] <= journal.last_seq - 4
        assert journal.last_seq < SNAPSHOT_EVERY_RECORDS
        assert service.table.round is not None and len(service.table.round_log) > 4
        # what a snapshot taken now would restore to (devices offline, the round held)
        expected = snapshot(restore(RULES, lambda event: None, snapshot(service.table)))
        journal.close()  # a crash: nothing flushed, no snapshot written at the end
        return expected

    async def restarted() -> dict[str, object]:
        with Journal.open(path) as journal:
            service = TableService(RULES, journal, lambda event: None, clock=clock)
            service.restore(start())
            assert journal.verify().ok
            return snapshot(service.table)

    expected = run(live())
    assert run(restarted()) == expected
