"""A shoe that re-identifies with a new boot id at every handshake, through the real daemon: one
DEVICE_FLAPPING alarm and handshakes on the one backoff's schedule, where the daemon shook hands
with it without pause and journaled thousands of records a second (most of them its IDENTs and
the device states they moved)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cardd.journal import Journal, input_of
from drivers.reconnect import Backoff
from firmware_bridge.connection import FLAPPING_AFTER
from simulators.faults import Faults
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe
from tests.daemon.daemon_rig import Daemon, wait_until, write_config

pytestmark = pytest.mark.timeout(120)

#: what one handshake with such a shoe journals at most, each IDENT an input and the device state
#: it moves: the answered IDENT, the unasked one behind it, CONNECTED's LinkUp and IDENT again, and
#: the Status asked after the handshake (docs/deal-tracking.md, DEVICE_FLAPPING)
RECORDS_PER_HANDSHAKE = 8
#: handshakes waited for: the schedule's first steps (0.1 + 0.2 + ... + 1.6 s)
HANDSHAKES_AGAIN = 5


def test_a_shoe_that_flaps_its_identity_is_one_alarm_and_handshakes_that_back_off(directory: Path) -> None:
    with PtyEndpoint(SimulatedShoe(faults=Faults(flapping_ident=True))) as endpoint:
        daemon = Daemon(["--config", str(write_config(directory, endpoint.url, None))], directory / "cardd.sock")
        client = daemon.client()
        state = client.wait_state(lambda s: any(a["reason"] == "DEVICE_FLAPPING" for a in s["alarms"]))
        [alarm] = [a for a in state["alarms"] if a["reason"] == "DEVICE_FLAPPING"]
        assert alarm["source"] == "shoe-reader" and alarm["message"].startswith(
            f"shoe-reader: re-identified or reset its link {FLAPPING_AFTER} times in a row, each less than 5 s "
            "after the handshake before (the last: unasked IDENT: boot id "), alarm
        assert alarm["message"].endswith("): each handshake waits longer, up to 5 s, until it stays up 5 s; a "
                                         "technician looks at the device"), alarm
        wait_until(lambda: len(daemon.log_lines("handshake_again_soon")) >= HANDSHAKES_AGAIN,
                   f"{HANDSHAKES_AGAIN} handshakes asked for again")
        client.close()
        code, err = daemon.stop()
        assert code == 0, err
    again = daemon.log_lines("handshake_again_soon")
    backoff = Backoff()
    assert [line["delay"] for line in again] == [backoff.delay(n) for n in range(1, len(again) + 1)]
    with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
        records = journal.query(limit=None)
    assert [r.reason for r in records].count("DEVICE_FLAPPING") == 1  # one alarm, however long it flaps
    handshakes = [r for r in records if (input_of(r.kind, r.data) or {}).get("type") == "LinkUp"]
    shoe = [r for r in records if r.source == "shoe-reader"]
    assert len(handshakes) <= len(again) + 2  # the first, one per backoff, one under way at the stop
    # one handshake more under way at the stop (its LinkUp not journaled yet), the first device
    # state (offline -> connecting) and the alarm's record
    assert len(shoe) <= RECORDS_PER_HANDSHAKE * (len(handshakes) + 1) + 2
