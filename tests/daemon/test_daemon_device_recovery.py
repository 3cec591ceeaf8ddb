"""A device that comes back, through the real daemon: after an unplug and replug the journal says
DEVICE_RECOVERED, and a fault the device has when a host shakes hands with it (raised at power-on,
or while it was unplugged after its Fault was journaled) reaches the table: the device reports its
status after the handshake, and a repeated IDENT of the same boot undoes nothing."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from cardd.journal import Journal, input_of
from firmware_bridge.messages import FaultCode, decode
from simulators.faults import Faults
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler
from simulators.stack import full_shoe
from tests.daemon.daemon_rig import Daemon, wait_until, write_config

pytestmark = pytest.mark.timeout(120)



def device_states(path: Path, device: str) -> list[tuple[str, str, str]]:
    """(reason, from, to) of every device-model record of ``device`` in the journal, in order."""
    with Journal.open(path, readonly=True) as journal:
        return [(r.reason, r.data["from"], r.data["to"]) for r in journal.query(source=device, limit=None)
                if r.reason.startswith("DEVICE_") and "from" in r.data]


def test_a_shoe_back_after_an_unplug_is_journaled_as_recovered(directory: Path) -> None:
    shoe = SimulatedShoe(faults=Faults(disconnect_for=0.5, disconnect_at=2))
    with PtyEndpoint(shoe) as endpoint:
        daemon = Daemon(["--config", str(write_config(directory, endpoint.url, None))], directory / "cardd.sock")
        client = daemon.client()
        client.wait_state(lambda s: s["devices"]["shoe-reader"]["usable"])
        endpoint.call(shoe.load, full_shoe(1))
        endpoint.call(shoe.deal, 4)  # unplugged for 0.5 s after card 2, then back at the same path
        wait_until(lambda: endpoint.state()["events_confirmed"] == 5, "the shoe's five events journaled")
        client.wait_state(lambda s: s["devices"]["shoe-reader"]["usable"])  # back, and heard since
        code, err = daemon.stop()
        assert code == 0, err
    states = device_states(directory / "journal.sqlite3", "shoe-reader")
    offline = states.index(("DEVICE_OFFLINE", "dealing", "offline"))
    assert states[offline + 1:offline + 3] == [("DEVICE_STATE", "offline", "connecting"),
                                               ("DEVICE_RECOVERED", "connecting", "idle")]
    recovered = [s for s in states if s[0] == "DEVICE_RECOVERED"]
    assert recovered == [("DEVICE_RECOVERED", "connecting", "idle")]  # once: not at start-up



def shoe_inputs(path: Path) -> list[str]:
    """The shoe's input records in journal order: the input type, a message's type and its event index."""
    with Journal.open(path, readonly=True) as journal:
        inputs = [input_of(r.kind, r.data) for r in journal.query(limit=None)]
    shoe = [data for data in inputs if data is not None and data.get("device") == "shoe-reader"]
    return [data["type"] if data["type"] != "DeviceMessage" else
            f"{type(decode(bytes.fromhex(data['message']))).__name__}@{data.get('event_index')}" for data in shoe]


@pytest.mark.parametrize("batching_ms", [0, 50], ids=["acked-alone", "ack-and-events-in-one-read"])
def test_the_events_a_shoe_resends_at_a_replug_are_applied_after_its_handshake(directory: Path,
                                                                             batching_ms: int) -> None:
    # with FTDI-like batching the link's ACK of ResumeEvents and the events the shoe resends at once
    # reach the daemon in one read: the events must still be applied after the handshake's LinkUp + IDENT
    shoe = SimulatedShoe(faults=Faults(disconnect_for=0.5, disconnect_at=2, ftdi_batching_ms=batching_ms))
    with PtyEndpoint(shoe) as endpoint:
        daemon = Daemon(["--config", str(write_config(directory, endpoint.url, None))], directory / "cardd.sock")
        client = daemon.client()
        client.wait_state(lambda s: s["devices"]["shoe-reader"]["usable"])
        endpoint.call(shoe.load, full_shoe(1))
        endpoint.call(shoe.deal, 4)  # cards 3 and 4 are read while the shoe is unplugged: resent at the replug
        wait_until(lambda: endpoint.state()["events_confirmed"] == 5, "the shoe's five events journaled")
        code, err = daemon.stop()
        assert code == 0, err
    inputs = shoe_inputs(directory / "journal.sqlite3")
    # the shoe's heartbeat (unnumbered, once a second, never resent) may land anywhere in it
    replug = [what for what in inputs[inputs.index("LinkDown"):] if not what.startswith("Heartbeat")]
    # the handshake's IDENT (answered), then CONNECTED (LinkUp and the IDENT again), then the events
    assert replug[:6] == ["LinkDown", "Ident@None", "LinkUp", "Ident@None", "CardRead@4", "CardRead@5"], replug


@pytest.mark.parametrize("legacy", [False, True], ids=["protocol-1.1", "protocol-1.0"])
def test_a_door_open_at_power_on_reaches_the_table(directory: Path, legacy: bool) -> None:
    shuffler = SimulatedShuffler(faults=Faults(door_open=True, legacy_1_0=legacy))
    with PtyEndpoint(shuffler) as shuffler_end, PtyEndpoint(SimulatedShoe()) as shoe_end:
        assert shuffler_end.state()["faults_active"] == ["DOOR_OPEN"]  # raised before any host was there
        config = write_config(directory, shoe_end.url, shuffler_end.url)
        daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
        client = daemon.client()
        client.wait_state(lambda s: s["devices"]["shuffler"]["state"] == "fault")
        time.sleep(0.5)  # the handshake's second IDENT (with CONNECTED) and heartbeats change nothing
        assert client.state()["devices"]["shuffler"]["state"] == "fault"
        shuffler_end.call(shuffler.close_door)
        client.wait_state(lambda s: s["devices"]["shuffler"]["state"] == "idle")
        code, err = daemon.stop()
        assert code == 0, err
    states = device_states(directory / "journal.sqlite3", "shuffler")
    faults = [s for s in states if s[0] == "DEVICE_FAULT"]
    assert faults == [("DEVICE_FAULT", "idle", "fault")] and states[-1] == ("DEVICE_RECOVERED", "fault", "idle")
    with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
        (fault,) = journal.query(reason="DEVICE_FAULT", source="shuffler", limit=None)
    assert fault.data["fault"] == "DOOR_OPEN"


def test_a_fault_still_active_after_an_unplug_is_known_again_after_the_replug(directory: Path) -> None:
    """The Fault event was journaled and confirmed before the unplug, so the device never sends it
    again: only its status after the new handshake says the door is still open."""
    link = str(directory / "shuffler")
    shuffler = SimulatedShuffler()
    with PtyEndpoint(SimulatedShoe()) as shoe_end:
        config = write_config(directory, shoe_end.url, f"serial://{link}")
        with PtyEndpoint(shuffler, link=link) as endpoint:
            daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
            client = daemon.client()
            client.wait_state(lambda s: s["devices"]["shuffler"]["usable"])
            endpoint.call(shuffler.raise_fault, FaultCode.DOOR_OPEN)  # the dealer opens the door
            client.wait_state(lambda s: s["devices"]["shuffler"]["state"] == "fault")
            wait_until(lambda: endpoint.state()["events_confirmed"] == 1, "the Fault event confirmed")
        client.wait_state(lambda s: s["devices"]["shuffler"]["link"] == "down")
        with PtyEndpoint(shuffler, link=link) as endpoint:  # the same unit, the same boot, plugged in again
            client.wait_state(lambda s: s["devices"]["shuffler"]["link"] == "up"
                              and s["devices"]["shuffler"]["state"] == "fault")
            time.sleep(0.5)
            assert client.state()["devices"]["shuffler"]["state"] == "fault"
            assert endpoint.state()["events_confirmed"] == 1  # nothing was sent again
            code, err = daemon.stop()
            assert code == 0, err
