"""Events a device could not keep until the daemon journaled them are never passed over: the
daemon journals an alarm for what the device says it dropped (DEVICE_DROPPED_EVENTS) and for
what is lost to the journal (EVENTS_LOST), and journals the rest once each."""
from __future__ import annotations

import time

import pytest

from cardd.journal import Journal
from firmware_bridge.messages import CardRead
from simulators.faults import Faults
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe
from simulators.stack import full_shoe
from tests.daemon.daemon_rig import Daemon, journaled_events, remove, state_dir, write_config


@pytest.mark.timeout(120)
def test_an_overflowed_device_buffer_is_journaled_as_alarms_and_the_rest_once() -> None:
    directory = state_dir()
    try:
        with PtyEndpoint(SimulatedShoe(faults=Faults(event_buffer=4), heartbeat_s=0)) as shoe:
            shoe.call(shoe.device.load, full_shoe(1))
            shoe.call(shoe.device.deal, 10)  # no host yet: ShoeLoaded and cards 1..5 are pushed out
            deadline = time.monotonic() + 20
            while shoe.state()["event_index"] < 11:
                assert time.monotonic() < deadline, shoe.state()
                time.sleep(0.02)
            config = write_config(directory, shoe.url, None)
            daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
            while shoe.state()["events_confirmed"] < 11:
                assert time.monotonic() < deadline + 20, shoe.state()
                time.sleep(0.02)
            code, err = daemon.stop()
            assert code == 0, err
        with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
            assert journal.verify().ok
            dropped = journal.query(reason="DEVICE_DROPPED_EVENTS", limit=None)
            lost = journal.query(reason="EVENTS_LOST", limit=None)
            events = journaled_events(journal, "shoe-reader")
        assert [(r.source, r.severity, r.data["first_index"], r.data["count"], r.data["drop_reason"])
                for r in dropped] == [("shoe-reader", "alarm", 1, 7, "overflow")]
        assert [(r.source, r.severity, r.data["message"]) for r in lost] == [
            ("shoe-reader", "alarm", "shoe-reader: events 1..7 (7) are lost: overflow")]
        assert [index for index, _ in events] == [8, 9, 10, 11]  # the ones the device kept, once each
        assert [msg.index for _, msg in events if isinstance(msg, CardRead)] == [7, 8, 9, 10]
    finally:
        remove(directory)
