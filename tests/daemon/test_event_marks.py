"""The daemon's event marks (protocol 1.1 end to end): the highest event index journaled per
device and the unit that numbered it, moved only by a commit, confirmed through ``on_journaled``,
and the same after a restart whether the snapshot holds them or the inputs after it do."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cardd.daemon.event_marks import MARKS_PER_DEVICE, EventMarks, marks_from_json, marks_to_json, merge_marks
from cardd.daemon.tracker_service import SNAPSHOT_EVERY_RECORDS, TableService
from cardd.journal import Journal
from core.cards import Card, Orientation
from devices.tracker.inputs import DeviceMessage, LinkUp, from_json, to_json
from devices.tracker.snapshot import SnapshotError
from firmware_bridge.messages import CardRead, DeviceRole, Ident, ShoeLoaded
from tests.daemon.service_rig import RULES, start, turn
from tests.support.aio import run
from tests.support.recorders import FakeClock

SHOE = Ident(DeviceRole.SHOE, "sim", "SHOE-1", "1.0.0", 1, 1, 7)
OTHER_SHOE = Ident(DeviceRole.SHOE, "sim", "SHOE-2", "1.0.0", 1, 1, 8)
UNIT, OTHER_UNIT = ("shoe", "sim", "SHOE-1"), ("shoe", "sim", "SHOE-2")



def read(event_index: int, card_index: int) -> DeviceMessage:
    return DeviceMessage("shoe-reader", CardRead(card_index, Card.parse("9H"), Orientation.FACE_DOWN, card_index),
                         event_index)


def test_a_device_message_without_an_event_index_reads_as_before() -> None:
    plain = DeviceMessage("shoe-reader", ShoeLoaded(0))
    old_form = {k: v for k, v in to_json(plain).items() if k != "event_index"}  # a record of release 1.0
    assert from_json(old_form) == plain and plain.event_index is None
    assert from_json(to_json(read(5, 4))) == read(5, 4)


def test_marks_move_at_commit_are_confirmed_and_come_back_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"

    async def live() -> None:
        journal = Journal.open(path, create=True)
        confirmed: list[EventMarks] = []

        def on_journaled(marks: EventMarks) -> None:
            confirmed.append({device: dict(units) for device, units in marks.items()})

        service = TableService(RULES, journal, lambda event: None, clock=FakeClock(), on_journaled=on_journaled)
        service.restore(start())
        await turn(service, LinkUp("shoe-reader"), DeviceMessage("shoe-reader", SHOE))
        service.apply(DeviceMessage("shoe-reader", ShoeLoaded(0), 1))
        assert service.event_marks == {} and confirmed == []  # applied, not journaled yet: nothing to confirm
        await asyncio.sleep(0)
        assert service.event_marks == {"shoe-reader": {UNIT: 1}}
        assert confirmed == [{"shoe-reader": {UNIT: 1}}]
        for index in range(2, SNAPSHOT_EVERY_RECORDS // 4):  # card path: these commits skip the snapshot
            await turn(service, read(index, index - 1))
        assert confirmed[-1] == {"shoe-reader": {UNIT: index}}
        journal.close()  # a kill: no stop record, no last snapshot

    async def restarted() -> TableService:
        journal = Journal.open(path)
        service = TableService(RULES, journal, lambda event: None, clock=FakeClock())
        service.restore(start())
        return service

    run(live())
    service = run(restarted())
    assert service.event_marks == {"shoe-reader": {UNIT: SNAPSHOT_EVERY_RECORDS // 4 - 1}}

    async def other_unit(service: TableService) -> None:
        service.flush()  # the start record's snapshot holds the marks now: the next restart reads them there
        await turn(service, LinkUp("shoe-reader"), DeviceMessage("shoe-reader", OTHER_SHOE))
        await turn(service, DeviceMessage("shoe-reader", ShoeLoaded(1), 1))
        # another unit numbers from 1, under a mark of its own: the first unit keeps its mark
        assert service.event_marks == {"shoe-reader": {UNIT: SNAPSHOT_EVERY_RECORDS // 4 - 1, OTHER_UNIT: 1}}
        service.flush()
        service.journal.close()

    run(other_unit(service))
    assert run(restarted()).event_marks == {"shoe-reader": {UNIT: SNAPSHOT_EVERY_RECORDS // 4 - 1, OTHER_UNIT: 1}}


def test_marks_are_kept_per_unit_read_in_the_older_form_and_bounded() -> None:
    older = {"shoe-reader": {"unit": list(UNIT), "index": 8}, "shuffler": {"unit": None, "index": 3}}
    marks = marks_from_json(older)  # a snapshot of the release that kept one mark per device
    assert marks == {"shoe-reader": {UNIT: 8}, "shuffler": {None: 3}}
    merge_marks(marks, {"shoe-reader": {OTHER_UNIT: 2, UNIT: 5}})  # a mark never goes down
    assert marks["shoe-reader"] == {OTHER_UNIT: 2, UNIT: 8}
    assert marks_from_json(marks_to_json(marks)) == marks
    units = [("shoe", "sim", f"S-{n}") for n in range(MARKS_PER_DEVICE + 2)]
    for unit in units:
        merge_marks(marks, {"shoe-reader": {unit: 1}})
    assert list(marks["shoe-reader"]) == units[2:]  # the units journaled longest ago are forgotten


@pytest.mark.parametrize("stored", [{"shoe-reader": [{"unit": ["shoe"], "index": 3}]},
                                    {"shoe-reader": [{"unit": None}]},
                                    {"shoe-reader": ["3"]},
                                    {"shoe-reader": [{"unit": None, "index": "three"}]}])
def test_damaged_marks_in_a_snapshot_are_one_snapshot_error(stored) -> None:
    with pytest.raises(SnapshotError, match=r"\$\.event_marks is not a list of \{unit, index\} per device"):
        marks_from_json(stored)
