"""Events a device could not keep until the daemon journaled them are never passed over: the
daemon journals an alarm for what the device says it dropped (DEVICE_DROPPED_EVENTS), for what
is lost to the journal (EVENTS_LOST) and for indexes skipped in the device's stream (EVENT_GAP),
and journals the rest once each. Each alarm is one of the table's open alarms: a supervisor sees
it in STATE and clears it (clear_alarm). Events another host confirmed, told by a unit this
journal has no mark of, are an alarm too: the journal cannot tell a shoe from another table from
one whose cards a host that kept no journal let go."""
from __future__ import annotations

import re
from typing import Any

import pytest

from cardd.journal import Journal
from firmware_bridge.messages import NO_JOURNAL, CardRead
from simulators.faults import Faults
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe
from simulators.stack import full_shoe
from tests.daemon.daemon_rig import Client, Daemon, journaled_events, remove, state_dir, wait_until, write_config

LOST_EVENTS = ("EVENT_GAP", "EVENTS_LOST", "DEVICE_DROPPED_EVENTS")


def lost_event_alarms(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in state["alarms"] if a["reason"] in LOST_EVENTS]


def clear_all(client: Client, alarms: list[dict[str, Any]]) -> None:
    for alarm in alarms:
        client.ok("clear_alarm", alarm_id=alarm["id"])


@pytest.mark.timeout(120)
def test_an_overflowed_device_buffer_is_journaled_as_alarms_a_supervisor_clears_and_the_rest_once() -> None:
    directory = state_dir()
    try:
        with PtyEndpoint(SimulatedShoe(faults=Faults(event_buffer=4), heartbeat_s=0)) as shoe:
            shoe.call(shoe.device.load, full_shoe(1))
            shoe.call(shoe.device.deal, 10)  # no host yet: ShoeLoaded and cards 1..5 are pushed out
            wait_until(lambda: shoe.state()["event_index"] == 11, "eleven events numbered")
            config = write_config(directory, shoe.url, None)
            daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
            wait_until(lambda: shoe.state()["events_confirmed"] == 11, "the daemon confirmed them")
            client = daemon.client()
            state = client.wait_state(lambda s: len(lost_event_alarms(s)) == 2)
            assert sorted((a["reason"], a["source"], a["message"]) for a in lost_event_alarms(state)) == [
                ("DEVICE_DROPPED_EVENTS", "shoe-reader", "shoe-reader no longer has events 1..7: overflow"),
                ("EVENTS_LOST", "shoe-reader", "shoe-reader: events 1..7 (7) are lost: overflow")]
            code, err = daemon.stop()
            assert code == 0, err
            daemon = Daemon(["--config", str(config)], directory / "cardd.sock")  # open alarms outlive a restart
            client = daemon.client()
            assert lost_event_alarms(client.state()) == lost_event_alarms(state)
            clear_all(client, lost_event_alarms(state))
            assert lost_event_alarms(client.state()) == []
            code, err = daemon.stop()
            assert code == 0, err
        with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
            assert journal.verify().ok
            dropped = journal.query(reason="DEVICE_DROPPED_EVENTS", limit=None)
            lost = journal.query(reason="EVENTS_LOST", limit=None)
            cleared = journal.query(reason="ALARM_CLEARED", limit=None)
            events = journaled_events(journal, "shoe-reader")
        assert [(r.source, r.severity, r.data["first_index"], r.data["count"], r.data["drop_reason"])
                for r in dropped] == [("shoe-reader", "alarm", 1, 7, "overflow")]
        assert [(r.source, r.severity, r.data["message"]) for r in lost] == [
            ("shoe-reader", "alarm", "shoe-reader: events 1..7 (7) are lost: overflow")]
        assert sorted(r.data["alarm_reason"] for r in cleared) == ["DEVICE_DROPPED_EVENTS", "EVENTS_LOST"]
        assert [index for index, _ in events] == [8, 9, 10, 11]  # the ones the device kept, once each
        assert [msg.index for _, msg in events if isinstance(msg, CardRead)] == [7, 8, 9, 10]
    finally:
        remove(directory)


GAP = re.compile(r"events (\d+)\.\.(\d+) \((\d+)\) never came; next came (\d+)")


@pytest.mark.timeout(180)
def test_events_pushed_out_of_a_small_buffer_while_streaming_are_an_event_gap_alarm() -> None:
    """The device streams to the daemon, but its link is slow (its bytes held 500 ms, like a long
    FTDI latency) and it deals a whole shoe at once: more events wait than its 2-event buffer holds,
    so the oldest unsent ones are pushed out and the stream skips their indexes (EVENT_GAP)."""
    directory = state_dir()
    try:
        with PtyEndpoint(SimulatedShoe(faults=Faults(event_buffer=2, ftdi_batching_ms=500))) as shoe:
            config = write_config(directory, shoe.url, None)
            daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
            client = daemon.client()
            client.wait_state(lambda s: s["devices"]["shoe-reader"]["usable"])
            shoe.call(shoe.device.load, full_shoe(6))
            shoe.call(shoe.device.deal, 312)
            last = 1 + 312 + 1  # ShoeLoaded, the cards, ShoeEmpty
            wait_until(lambda: shoe.state()["events_confirmed"] == last, "the daemon confirmed the last event", 120)
            state = client.wait_state(lambda s: bool(lost_event_alarms(s)))
            gaps = lost_event_alarms(state)
            assert gaps and {(a["reason"], a["source"]) for a in gaps} == {("EVENT_GAP", "shoe-reader")}
            clear_all(client, gaps)
            assert lost_event_alarms(client.state()) == []
            code, err = daemon.stop()
            assert code == 0, err
        with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
            assert journal.verify().ok
            records = journal.query(reason="EVENT_GAP", limit=None)
            events = journaled_events(journal, "shoe-reader")
        assert len(records) == len(gaps) and all(r.severity == "alarm" for r in records)
        skipped: list[int] = []
        for record in records:
            found = GAP.fullmatch(record.data["message"].removeprefix("shoe-reader: "))
            assert found, record.data["message"]
            first, final, count, _ = map(int, found.groups())
            assert count == final - first + 1
            skipped += range(first, final + 1)
        indexes = [index for index, _ in events]
        assert indexes == sorted(set(indexes))  # each journaled once, in order
        # every index the device numbered is either journaled or named by an EVENT_GAP alarm
        assert sorted(indexes + skipped) == list(range(1, last + 1))
    finally:
        remove(directory)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("confirmed_by", ["another-table", "a-host-without-a-journal"])
def test_events_a_unit_says_another_host_confirmed_are_an_alarm_a_supervisor_clears(confirmed_by: str) -> None:
    """A shoe whose events another host confirmed is brought to this table's daemon (another
    journal, no mark of the unit: told 0): another table's daemon, which journaled them, or a host
    that kept no journal and told the shoe NO_JOURNAL (a tool of another make or release), which
    let them go unjournaled. The shoe says those events are gone, and this daemon cannot tell which
    host it was: cards may have left the shoe that no journal holds, so an EVENTS_LOST alarm a
    supervisor clears, beside a warning record naming who may have confirmed them; what it deals
    here is journaled as always."""
    other_table, this_table = state_dir(), state_dir()
    shoe = SimulatedShoe("SHOE-SPARE", heartbeat_s=0)
    try:
        link = str(other_table / "shoe")
        with PtyEndpoint(shoe, link=link) as endpoint:
            daemon = None
            if confirmed_by == "another-table":
                daemon = Daemon(["--config", str(write_config(other_table, f"serial://{link}", None))],
                                other_table / "cardd.sock")
                daemon.client().wait_state(lambda s: s["devices"]["shoe-reader"]["usable"])
            endpoint.call(shoe.load, full_shoe(1))
            endpoint.call(shoe.deal, 3)
            if daemon is None:  # what the shoe does when a host's ResumeEvents says NO_JOURNAL
                wait_until(lambda: endpoint.state()["event_index"] == 4, "ShoeLoaded and cards 1..3 read")
                endpoint.call(shoe.events.resume, NO_JOURNAL)
            wait_until(lambda: endpoint.state()["events_confirmed"] == 4, "ShoeLoaded and cards 1..3 confirmed there")
            if daemon is not None:
                code, err = daemon.stop()
                assert code == 0, err
        link = str(this_table / "shoe")
        with PtyEndpoint(shoe, link=link) as endpoint:
            daemon = Daemon(["--config", str(write_config(this_table, f"serial://{link}", None))],
                            this_table / "cardd.sock")
            client = daemon.client()
            client.wait_state(lambda s: s["devices"]["shoe-reader"]["usable"])
            endpoint.call(shoe.load, full_shoe(1))  # loaded again at this table
            endpoint.call(shoe.deal, 2)
            wait_until(lambda: endpoint.state()["events_confirmed"] == 7, "ShoeLoaded and two cards journaled here")
            state = client.wait_state(lambda s: s["shoe"]["cards_out"] == 2)
            assert [(a["reason"], a["message"]) for a in lost_event_alarms(state)] == [
                ("EVENTS_LOST", "shoe-reader: events 1..4 (4) are lost: confirmed")]
            clear_all(client, lost_event_alarms(state))
            assert lost_event_alarms(client.state()) == []
            code, err = daemon.stop()
            assert code == 0, err
        with Journal.open(this_table / "journal.sqlite3", readonly=True) as journal:
            assert journal.verify().ok
            dropped = journal.query(reason="DEVICE_DROPPED_EVENTS", limit=None)
            lost = journal.query(reason="EVENTS_LOST", limit=None)
            events = journaled_events(journal, "shoe-reader")
        assert [(r.source, r.severity, r.data["message"], r.data["drop_reason"], r.data["resumed_from"])
                for r in dropped] == [("shoe-reader", "warning", "shoe-reader no longer has events 1..4: confirmed "
                                       "(this journal keeps no mark of this unit: confirmed by another table's host, "
                                       "by a tool that kept no journal, or here before the unit's mark was let go)",
                                       "confirmed", 0)]
        assert [(r.source, r.severity) for r in lost] == [("shoe-reader", "alarm")]
        assert [index for index, _ in events] == [5, 6, 7]  # what was dealt here, once each
        assert [msg.index for _, msg in events if isinstance(msg, CardRead)] == [1, 2]
    finally:
        remove(other_table)
        remove(this_table)
