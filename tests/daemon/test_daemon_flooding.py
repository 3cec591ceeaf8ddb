"""A device that floods its link with status, through the real daemon over real ptys: the journal
grows by at most the device's budget of status messages a second (docs/protocol.md §3.1), one
DEVICE_FLOODING alarm says so, and every card is journaled all the same; a table's ordinary
traffic (heartbeats, a shuffle's progress, a burst of card reads, a resend after a restart) never
comes near the budget. Without the budget a shoe sending Status unasked at link speed over a pty grew
the journal by about 6,700 records a second (134,096 in 20 s, one input record each)."""
from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Any

import pytest

from cardd.journal import Journal
from firmware_bridge.messages import ShuffleProgress, decode
from firmware_bridge.session import SessionConfig
from simulators.endpoint import Endpoint
from simulators.faults import Faults
from simulators.pty_endpoint import PtyEndpoint
from simulators.rig import SimulatedTable
from simulators.shoe import SimulatedShoe
from simulators.stack import full_shoe
from tests.daemon.daemon_rig import (Daemon, journaled_messages, journaled_reads, wait_devices, wait_until,
                                     write_config)

pytestmark = pytest.mark.timeout(180)

BUDGET, WINDOW_S = SessionConfig().status_budget, SessionConfig().status_window_s
#: how long the test watches the journal of the flooding shoe (an interval it controls, not a speed)
WATCHED_S = 3.0


FLOODING_SAYS = re.compile(
    rf"shoe-reader: sent (?P<sent>\d+) status messages within {WINDOW_S:g} s, past its budget of {BUDGET}: "
    r"(?P<left_out>\d+) left out \((?P<counts>[^)]*)\); status past the budget is left out \(each is current again "
    r"when next sent or asked for; events and answers to requests are never left out\) until it stays within "
    r"budget 5 s; a technician looks at the device")


def all_journaled(shoe: Endpoint[SimulatedShoe], cards_out: int) -> bool:
    """The shoe has dealt ``cards_out`` cards and the daemon confirmed every event it numbered."""
    state = shoe.state()
    return bool(state["cards_out"] == cards_out and state["pending_deals"] == 0
                and state["events_confirmed"] == state["event_index"])


def flooding(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in state["alarms"] if a["reason"] == "DEVICE_FLOODING"]


def test_a_shoe_that_floods_its_status_journals_at_most_its_budget_one_alarm_and_every_card(directory: Path) -> None:
    with PtyEndpoint(SimulatedShoe(faults=Faults(status_flood=True))) as shoe:
        daemon = Daemon(["--config", str(write_config(directory, shoe.url, None))], directory / "cardd.sock")
        client = daemon.client()
        state = client.wait_state(lambda s: bool(flooding(s)))
        [alarm] = flooding(state)
        assert alarm["source"] == "shoe-reader", alarm
        said = FLOODING_SAYS.fullmatch(alarm["message"])
        assert said is not None, alarm
        assert int(said["sent"]) - BUDGET == int(said["left_out"]) > 0 and "Status" in said["counts"], alarm
        # the journal over an interval the test measures: at most the budget a window, each Status an
        # input record that changes nothing, and the daemon's own tick a second besides
        before, start = client.state()["seq"], time.monotonic()
        time.sleep(WATCHED_S)
        after, watched = client.state()["seq"], time.monotonic() - start
        windows = math.ceil(watched / WINDOW_S) + 1  # the windows the interval touches
        assert after - before <= windows * (BUDGET + 1), (after - before, watched)
        # the shoe goes on flooding, and a shoe's cards come in between: every one is journaled
        shoe.call(shoe.device.load, full_shoe(1))
        shoe.call(shoe.device.deal, 52)
        wait_until(lambda: shoe.state()["events_confirmed"] == 54, "ShoeLoaded, 52 reads and ShoeEmpty journaled")
        assert len(flooding(client.state())) == 1  # one alarm, however long it floods
        client.close()
        code, err = daemon.stop()
        assert code == 0, err
    assert daemon.log_lines("status_flood") and not daemon.log_lines("status_flood_over")
    with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
        assert journal.verify().ok
        records = journal.query(limit=None)
        reads = journaled_reads(journal)
    assert [r.reason for r in records].count("DEVICE_FLOODING") == 1
    assert reads == list(range(1, 53))


def test_a_tables_ordinary_traffic_never_comes_near_the_budget(directory: Path) -> None:
    """Heartbeats throughout, a shuffle's ten progress reports at once (shuffle_time 0), 150 card reads
    in one burst, then 162 more dealt while the daemon is down, resent at link speed at its restart."""
    with SimulatedTable.over_ptys() as sim:
        config = write_config(directory, sim.shoe.url, sim.shuffler.url)
        daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
        client = daemon.client()
        wait_devices(client)
        client.ok("start_shuffle")
        client.wait_state(lambda s: s["shoe"]["state"] == "verified")
        cards = sim.hand_off()
        sim.shoe.call(sim.shoe.device.deal, 150)
        wait_until(lambda: all_journaled(sim.shoe, 150), "ShoeLoaded and 150 reads journaled")
        client.close()
        code, err = daemon.stop()
        assert code == 0, err
        flooded = daemon.log_lines("status_flood")
        sim.shoe.call(sim.shoe.device.deal, cards - 150)  # no host: the shoe keeps them
        daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
        wait_until(lambda: all_journaled(sim.shoe, cards), "the resent reads journaled")
        client = daemon.client()
        assert not flooding(client.state())
        client.close()
        code, err = daemon.stop()
        assert code == 0, err
        flooded += daemon.log_lines("status_flood")
    assert not flooded
    with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
        records = journal.query(limit=None)
        reads = journaled_reads(journal)
        progress = [m for m in journaled_messages(journal, "shuffler")
                    if isinstance(decode(bytes.fromhex(m["message"])), ShuffleProgress)]
    assert "DEVICE_FLOODING" not in [r.reason for r in records]
    assert reads == list(range(1, cards + 1))
    assert len(progress) == 10  # every ShuffleProgress journaled: none left out
