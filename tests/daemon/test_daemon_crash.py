"""The crash harness: cardd killed with SIGKILL at random points while a
simulated shoe deals through its pty, the shoe's link reset and the shoe unplugged at random
points too. The test owns the simulated devices, so they outlive each daemon, like hardware,
and resend what the daemon had not confirmed (protocol 1.1, docs/protocol.md §3.2).

After every kill the hash chain verifies, the journal holds each event index of each device
once, in order, with no gap, and at least up to what the device was told is journaled; after
every restart a round that was live is held. At the end every card the shoe read is journaled
exactly once and in order: the same cards as the simulator's dealt list."""
from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cardd.journal import Journal
from firmware_bridge.messages import CardRead
from simulators.endpoint import Endpoint
from simulators.rig import SimulatedTable
from tests.daemon.daemon_rig import (Daemon, journaled_events, open_and_bet, remove, shuffle_and_load, state_dir,
                                     write_config)

KILLS = 100 if os.environ.get("CARDD_FULL") else 12
DEVICES = {"shoe-reader": "shoe", "shuffler": "shuffler"}  # journal source -> the simulated table's endpoint


def check_journal(path: Path, sim: SimulatedTable, when: str) -> dict[str, list[int]]:
    """The chain verifies; per device the event indexes journaled are 1..n once each, n at least
    what the device was told is journaled. Returns them per device."""
    with Journal.open(path, readonly=True) as journal:
        assert journal.verify().ok, when
        indexes = {device: [index for index, _ in journaled_events(journal, device)] for device in DEVICES}
    for device, endpoint in DEVICES.items():
        state = getattr(sim, endpoint).state()
        got = indexes[device]
        assert got == list(range(1, len(got) + 1)), (when, device, "an event journaled twice, out of order or lost",
                                                     got[-20:])
        assert len(got) >= state["events_confirmed"], (when, device, "confirmed but not journaled", len(got), state)
    return indexes


def until(predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def device_resets_link(endpoint: Endpoint[Any]) -> None:
    if endpoint.link is not None:
        endpoint.link.reset("test: the device resets the link")


@pytest.mark.soak
@pytest.mark.timeout(1800)
def test_sigkill_resets_and_unplugs_at_random_points_while_the_shoe_deals(capsys):
    rng = random.Random(20261123)
    directory = state_dir()
    journal_path = directory / "journal.sqlite3"
    resets = unplugs = 0
    try:
        with SimulatedTable.over_ptys() as sim:
            config = write_config(directory, sim.shoe.url, sim.shuffler.url)
            sock = directory / "cardd.sock"

            def deal(n: int) -> None:
                sim.shoe.call(sim.shoe.device.deal, n)

            daemon = Daemon(["--config", str(config)], sock)
            client = daemon.client()
            shuffle_and_load(client, lambda: sim.hand_off(1.0), deal)
            open_and_bet(client)
            client.close()
            for kill in range(KILLS):
                if rng.random() < 0.3:  # the shoe goes off the wire at a card of the next deals
                    sim.shoe.set_faults(disconnect_for=rng.uniform(0.05, 0.3),
                                        disconnect_at=sim.shoe.device.index + rng.randint(1, 3))
                    unplugs += 1
                deal(rng.randint(1, 4))
                if rng.random() < 0.3:
                    time.sleep(rng.uniform(0.0, 0.02))
                    sim.shoe.call(device_resets_link, sim.shoe)
                    resets += 1
                time.sleep(rng.uniform(0.0, 0.05))  # somewhere in the reads, commits, confirms and publishes
                daemon.kill()
                check_journal(journal_path, sim, f"after kill {kill}")
                daemon = Daemon(["--config", str(config)], sock)
                client = daemon.client()
                state = client.wait_state(lambda s: s["devices"]["shoe-reader"]["link"] == "up")
                assert state["round"] is not None and state["round"]["held"] is not None, (kill, state["round"])
                client.close()
            sim.shoe.set_faults(disconnect_for=None, disconnect_at=None)
            # every event the devices numbered is confirmed, so journaled
            for endpoint in (sim.shoe, sim.shuffler):
                until(lambda: (lambda s: s["events_confirmed"] == s["event_index"])(endpoint.state()),
                      f"{endpoint.url}: the daemon never confirmed every event")
            code, err = daemon.stop()
            assert code == 0, err
            dealt = sim.shoe.call(lambda: list(sim.shoe.device.dealt))
            numbered = {device: getattr(sim, endpoint).state()["event_index"] for device, endpoint in DEVICES.items()}
            indexes = check_journal(journal_path, sim, "at the end")
        assert {device: len(got) for device, got in indexes.items()} == numbered
        with Journal.open(journal_path, readonly=True) as journal:
            reads = [msg for _, msg in journaled_events(journal, "shoe-reader") if isinstance(msg, CardRead)]
        assert [read.index for read in reads] == list(range(1, len(dealt) + 1))  # once each, in order, none lost
        assert [read.card for read in reads] == dealt  # the cards the shoe read, as it read them
        with capsys.disabled():
            print(f"\n{KILLS} SIGKILLs, {resets} link resets, {unplugs} unplugs: the shoe read {len(dealt)} cards, "
                  f"each journaled once, in order; events journaled once each: {numbered}")
    finally:
        remove(directory)
