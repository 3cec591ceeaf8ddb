"""Another unit on a device's path while the daemon runs (IdentityTracker: REPLACED): each event
counts under the unit that numbered it, as its connection knew it when the event came in, never
under the unit the table last accepted there. Here a shuffler is plugged into the shoe's port
(WRONG_DEVICE: the table refuses it and still names the shoe): its events must not move the
shoe's event mark, or the shoe, plugged back in, is told it has been journaled past events the
journal never got, and forgets them. Nor may they replace it: the marks are kept per unit, so the
shoe back on its port resumes from its own mark, in the same daemon or after a restart, and no
event it had already confirmed is reported lost."""
from __future__ import annotations

import pytest

from cardd.journal import Journal
from firmware_bridge.messages import CardRead, FaultCode
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler
from simulators.stack import full_shoe
from tests.daemon.daemon_rig import Daemon, journaled_events, remove, state_dir, wait_until, write_config

LOST_EVENTS = ("EVENT_GAP", "EVENTS_LOST", "DEVICE_DROPPED_EVENTS")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("restart", [False, True], ids=["same-daemon", "restarted-while-away"])
def test_a_wrong_units_events_do_not_count_for_the_unit_the_table_knows(restart: bool) -> None:
    directory = state_dir()
    link, aside = str(directory / "shoe"), str(directory / "aside")
    shoe = SimulatedShoe("SHOE-A")
    try:
        config = write_config(directory, f"serial://{link}", None)
        with PtyEndpoint(shoe, link=link) as endpoint:
            daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
            client = daemon.client()
            client.wait_state(lambda s: s["devices"]["shoe-reader"]["usable"])
            endpoint.call(shoe.load, full_shoe(1))
            endpoint.call(shoe.deal, 3)
            wait_until(lambda: endpoint.state()["events_confirmed"] == 4, "ShoeLoaded and cards 1..3 journaled")
        with PtyEndpoint(shoe, link=aside) as endpoint:  # unplugged: four more cards, kept by the shoe
            endpoint.call(shoe.deal, 4)
            wait_until(lambda: endpoint.state()["event_index"] == 8, "cards 4..7 read")
        client.wait_state(lambda s: s["devices"]["shoe-reader"]["link"] == "down")
        shuffler = SimulatedShuffler("SHUF-X")
        with PtyEndpoint(shuffler, link=link) as endpoint:  # the wrong cable: a shuffler on the shoe's port
            client.wait_state(lambda s: any(a["reason"] == "WRONG_DEVICE" for a in s["alarms"]))
            for _ in range(6):  # twelve events: more than the shoe ever numbered
                endpoint.call(shuffler.raise_fault, FaultCode.JAM)
                endpoint.call(shuffler.clear_fault, FaultCode.JAM)
            wait_until(lambda: endpoint.state()["event_index"] == 12, "the shuffler's twelve events")
            flushed = endpoint.call(shuffler.flush)  # Endpoint.call awaits it: the daemon's link has them all
            assert flushed is None
        client.wait_state(lambda s: s["devices"]["shoe-reader"]["link"] == "down")
        if restart:  # the shoe's mark is in the journal's snapshot now, beside the shuffler's
            code, err = daemon.stop()
            assert code == 0, err
            daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
            client = daemon.client()
        with PtyEndpoint(shoe, link=link) as endpoint:  # the right cable again
            wait_until(lambda: endpoint.state()["events_confirmed"] == 8, "cards 4..7 journaled")
            client.wait_state(lambda s: s["shoe"]["cards_out"] == 7)
        code, err = daemon.stop()
        assert code == 0, err
        with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
            reads = [msg.index for _, msg in journaled_events(journal, "shoe-reader") if isinstance(msg, CardRead)]
            latest = journal.latest_snapshot()
            assert latest is not None
            marks = latest[1]["event_marks"]
            lost = [(r.reason, r.data.get("message")) for r in journal.query(min_severity="warning", limit=None)
                    if r.reason in LOST_EVENTS]
            wrong = journal.query(reason="WRONG_DEVICE", limit=None)
        assert reads == [1, 2, 3, 4, 5, 6, 7]  # every card the shoe read, once
        # the shoe was asked for what followed its own mark (4), not for everything since 1
        assert lost == []
        assert marks == {"shoe-reader": [{"unit": ["shuffler", "CS-6 sim", "SHUF-X"], "index": 12},
                                         {"unit": ["shoe", "OS-1 sim", "SHOE-A"], "index": 8}]}
        # one WRONG_DEVICE for the one time the shuffler was plugged in (its handshake's IDENT comes twice)
        assert len(wrong) == 1, [r.data for r in wrong]
    finally:
        remove(directory)
