"""Protocol 2.0 at the daemon: a device whose key is not enrolled is refused (one
DEVICE_NOT_TRUSTED alarm naming what failed and the key it proved, nothing it says dealt), a
technician enrols it (``enroll``: shown, then confirmed by its fingerprint; journaled with who),
the alarm is cleared and the device shakes hands again; another unit on the port later is
refused as a key that does not match, and enrolling it is journaled as a re-enrolment. A 1.1
device is taken with a standing warning in STATE."""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cardd.daemon.enrolment import enrolment_path
from cardd.daemon.host_key import host_key_path, load_or_create_host_key
from cardd.journal import Journal
from firmware_bridge.handshake2 import fingerprint, raw_public_key
from simulators.protocol2 import Protocol2
from simulators.pty_endpoint import PtyEndpoint
from simulators.rig import SimulatedTable
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler
from simulators.stack import full_shoe
from tests.daemon.daemon_rig import (Client, Daemon, deal_one, enrol_at_install, open_and_bet, play_out, remove,
                                     shuffle_and_load, state_dir, write_config)


def refused(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in state["alarms"] if a["reason"] == "DEVICE_NOT_TRUSTED"]


def key_of(shoe: SimulatedShoe) -> str:
    return fingerprint(raw_public_key(shoe.identity_key.public_key()))


@dataclass
class MixedFleet:
    """A 2.0 shoe, enrolled by a technician, and a 1.1 shuffler allowed by the configuration."""
    sim: SimulatedTable
    daemon: Daemon
    client: Client

    def deal(self, n: int) -> None:
        self.sim.shoe.call(self.sim.shoe.device.deal, n)


@contextmanager
def mixed_fleet(directory: Path, api: dict[str, int | float] | None = None) -> Iterator[MixedFleet]:
    """The daemon on ``directory`` with a mixed fleet, its shoe refused at first and then enrolled."""
    host_key, _ = load_or_create_host_key(host_key_path(directory / "journal.sqlite3"))
    host = Protocol2(enrolled_host_key=raw_public_key(host_key.public_key()))
    sim = SimulatedTable(PtyEndpoint(SimulatedShuffler()), PtyEndpoint(SimulatedShoe(), protocol2=host))
    with sim:
        config = write_config(directory, sim.shoe.url, sim.shuffler.url, devices={"shoe_protocol": "2.0"}, api=api)
        daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
        client = daemon.client()
        client.wait_state(lambda s: bool(refused(s)))
        client.ok("enroll", device="shoe", fingerprint=key_of(sim.shoe.device))
        yield MixedFleet(sim, daemon, client)


@pytest.mark.timeout(120)
def test_an_unknown_shoe_is_refused_until_a_technician_enrols_it_and_a_swap_is_a_re_enrolment() -> None:
    directory = state_dir()
    link = str(directory / "shoe")
    host_key, _ = load_or_create_host_key(host_key_path(directory / "journal.sqlite3"))  # made at install
    host = Protocol2(enrolled_host_key=raw_public_key(host_key.public_key()))
    shoe = SimulatedShoe("SHOE-A")
    try:
        config = write_config(directory, f"serial://{link}", None, devices={"shoe_protocol": "2.0"})
        with PtyEndpoint(shoe, link=link, protocol2=host) as endpoint:
            daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
            client = daemon.client()
            state = client.wait_state(lambda s: bool(refused(s)))
            [alarm] = refused(state)
            assert "unknown key" in alarm["message"] and key_of(shoe) in alarm["message"], alarm
            assert state["device_trust"]["shoe"]["protocol"] == "2.0"
            assert state["device_trust"]["shoe"]["warning"] is None
            assert not state["devices"]["shoe-reader"]["usable"]
            endpoint.call(shoe.load, full_shoe(1))
            endpoint.call(shoe.deal, 2)  # read while refused: never dealt
            assert client.state()["shoe"]["cards_out"] == 0

            wrong = client.command("enroll", device="shoe", fingerprint="0000-0000")
            assert wrong["class"] == "ERROR" and f"now proves key {key_of(shoe)}" in wrong["message"], wrong
            seq = client.ok("enroll", device="shoe")  # shown only: nothing stored
            assert not enrolment_path(directory / "journal.sqlite3").exists()
            assert refused(client.state())
            seq = client.ok("enroll", device="shoe", fingerprint=key_of(shoe))
            state = client.wait_state(lambda s: s["devices"]["shoe-reader"]["usable"])
            assert refused(state) == []
            assert state["device_trust"]["shoe"]["enrolled"] == key_of(shoe)
            assert state["device_trust"]["shoe"]["refused"] is None

        other = SimulatedShoe("SHOE-B")  # a replaced shoe: another unit, another key
        with PtyEndpoint(other, link=link, protocol2=host):
            state = client.wait_state(lambda s: bool(refused(s)))
            [alarm] = refused(state)
            assert "key does not match the enrolled one" in alarm["message"] and key_of(other) in alarm["message"]
            seq = client.ok("enroll", device="shoe", fingerprint=key_of(other))
            client.wait_state(lambda s: s["devices"]["shoe-reader"]["usable"] and not refused(s))
        code, err = daemon.stop()
        assert code == 0, err
        with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
            alarms = journal.query(reason="DEVICE_NOT_TRUSTED", limit=None)
            enrolled = [r for r in journal.query(reason="ENROLL", limit=None) if r.seq >= 0]
        assert [a.data["failure"] for a in alarms] == ["unknown key", "key does not match the enrolled one"]
        assert [a.data["fingerprint"] for a in alarms] == [key_of(shoe), key_of(other)]
        results = [r.data["result"] for r in enrolled if "result" in r.data]
        assert [r["stage"] for r in results] == ["shown", "enrolled", "re-enrolled"]
        assert all(r.who == "root" for r in enrolled)
        assert results[2]["replaced"]["fingerprint"] == key_of(shoe)
        assert results[2]["serial"] == "SHOE-B" and results[2]["replaced"]["serial"] == "SHOE-A"
        assert seq
    finally:
        remove(directory)


@pytest.mark.timeout(60)
def test_a_1_1_shoe_stands_with_a_warning() -> None:
    directory = state_dir()
    link = str(directory / "shoe")
    try:
        config = write_config(directory, f"serial://{link}", None)
        with PtyEndpoint(SimulatedShoe("SHOE-A"), link=link):
            daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
            state = daemon.client().wait_state(lambda s: s["devices"]["shoe-reader"]["usable"])
            assert state["device_trust"]["shoe"] == {"protocol": "1.1", "authenticated": False, "enrolled": None,
                                                     "refused": None,
                                                     "warning": "shoe: protocol 1.1, not authenticated"}
            code, err = daemon.stop()
            assert code == 0, err
    finally:
        remove(directory)


@pytest.mark.timeout(180)
def test_a_mixed_fleet_deals_from_the_enrolled_shoe_and_holds_the_round_when_its_frames_are_forged() -> None:
    """A 2.0 shoe (enrolled) and a 1.1 shuffler allowed by the configuration deal a round; the
    shoe's frames then fail their tags (forged): refused, the round held, nothing more dealt."""
    directory = state_dir()
    try:
        with mixed_fleet(directory) as fleet:
            sim, daemon, client, deal = fleet.sim, fleet.daemon, fleet.client, fleet.deal
            state = shuffle_and_load(client, lambda: sim.hand_off(1.0), deal)
            assert state["device_trust"]["shuffler"]["warning"] == "shuffler: protocol 1.1, not authenticated"
            assert state["device_trust"]["shoe"]["warning"] is None
            open_and_bet(client)
            deal_one(client, deal)
            dealt = client.state()["shoe"]["cards_out"]
            sim.shoe.set_faults(forged_tag=True)
            for _ in range(20):  # frames to forge: each card a frame, resent as its tag fails
                if refused(client.state()):
                    break
                deal(1)
                time.sleep(0.2)
            state = client.wait_state(lambda s: bool(refused(s)) and s["round"]["held"] is not None)
            [alarm] = refused(state)
            assert "frames failed their authentication tag" in alarm["message"], alarm
            assert state["shoe"]["cards_out"] == dealt  # no forged read dealt
            code, err = daemon.stop()
            assert code == 0, err
        with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
            [record] = journal.query(reason="DEVICE_NOT_TRUSTED", limit=None)[1:]
        assert record.data["failure"] == "frames failed their authentication tag"
    finally:
        remove(directory)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("attack, failure", [("cloned_serial", "key does not match the enrolled one"),
                                             ("downgrade_offer", "downgrade offered")])
def test_an_attack_on_an_enrolled_shoe_stands_past_a_supervisor_until_a_technician_retries(
        attack: str, failure: str) -> None:
    """The enrolled shoe's port offers a clone (its serial, another key) or a signed 1.1 offer:
    refused, nothing it reads dealt; a supervisor's clear_alarm leaves the alarm standing and
    names the technician's commands; once the device is mended, retry_trust (journaled with who)
    closes the alarm and the device is taken again."""
    directory = state_dir()
    link = str(directory / "shoe")
    journal_path = directory / "journal.sqlite3"
    host_key, _ = load_or_create_host_key(host_key_path(journal_path))
    host = Protocol2(enrolled_host_key=raw_public_key(host_key.public_key()))
    shoe = SimulatedShoe("SHOE-A")
    enrol_at_install(journal_path, shoe)
    try:
        config = write_config(directory, f"serial://{link}", None, devices={"shoe_protocol": "2.0"})
        with PtyEndpoint(shoe, link=link, protocol2=host) as endpoint:
            endpoint.set_faults(**{attack: True})
            daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
            client = daemon.client()
            state = client.wait_state(lambda s: bool(refused(s)))
            [alarm] = refused(state)
            assert failure in alarm["message"], alarm
            assert not state["devices"]["shoe-reader"]["usable"]
            endpoint.call(shoe.load, full_shoe(1))
            endpoint.call(shoe.deal, 2)  # read by the attacker: never dealt
            assert client.state()["shoe"]["cards_out"] == 0

            cleared = client.command("clear_alarm", alarm_id=alarm["id"])
            assert cleared["class"] == "ERROR", cleared
            assert "not cleared by a supervisor" in cleared["message"], cleared
            assert "enroll shoe" in cleared["message"] and "retry_trust shoe" in cleared["message"], cleared
            assert refused(client.state()) == [alarm]

            endpoint.set_faults(**{attack: False})  # the technician mended the device
            seq = client.ok("retry_trust", device="shoe")
            state = client.wait_state(lambda s: s["devices"]["shoe-reader"]["usable"] and not refused(s))
            assert state["device_trust"]["shoe"]["refused"] is None
            again = client.command("retry_trust", device="shoe")
            assert again["class"] == "ERROR" and "nothing to retry: it is not refused" in again["message"], again
            code, err = daemon.stop()
            assert code == 0, err
        with Journal.open(journal_path, readonly=True) as journal:
            [retried] = [r for r in journal.query(reason="RETRY_TRUST", limit=None) if "result" in r.data]
            [record] = journal.query(reason="DEVICE_NOT_TRUSTED", limit=None)
        assert retried.seq == seq and retried.who == "root"
        assert retried.data["result"]["alarms_closed"] == [alarm["id"]]
        assert record.data["failure"] == failure
    finally:
        remove(directory)


@pytest.mark.timeout(300)
def test_a_mixed_fleet_deals_a_whole_shoe() -> None:
    """A 2.0 shoe (enrolled) and a 1.1 shuffler allowed by the configuration: shuffled, loaded,
    burned and dealt round after round until the cut card's last round is over, every card read
    through the sealed session counted at the table."""
    directory = state_dir()
    try:
        # a shoe of rounds polls STATE faster than a client's default rate
        with mixed_fleet(directory, api={"rate": 2000}) as fleet:
            sim, daemon, client, deal = fleet.sim, fleet.daemon, fleet.client, fleet.deal
            state = shuffle_and_load(client, lambda: sim.hand_off(0.75), deal)  # the cut card 3/4 in
            rounds = 0
            while state["shoe"]["state"] != "complete":
                assert rounds < 200, state["shoe"]
                open_and_bet(client)
                state = play_out(client, deal, lambda s: None)
                assert state["round"]["state"] == "complete", state["round"]
                rounds += 1
                state = client.state()
            assert state["alarms"] == [], state["alarms"]
            assert state["device_trust"]["shoe"]["refused"] is None
            dealt = state["shoe"]["cards_out"]
            code, err = daemon.stop()
            assert code == 0, err
        with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
            assert len(journal.query(reason="SETTLED", limit=None)) >= rounds
            [cut] = journal.query(reason="CUT_CARD_OUT", limit=None)
        assert rounds > 10 and dealt > 100, (rounds, dealt)
        assert cut.seq > 0
    finally:
        remove(directory)
