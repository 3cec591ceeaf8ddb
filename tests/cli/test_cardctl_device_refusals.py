"""A device's refusal of a technician's command, through the real daemon (``cardd --simulate``)
and cardctl: the device's own reason reaches the technician at once, in one line, and the
journal keeps the refusal after the device's answer; the simulated shuffler's door switch
opens and closes the door."""
from __future__ import annotations

import re

import pytest

from cardd.api.client import ApiClient
from firmware_bridge.messages import ClearFault, Refused, StartShuffle, decode
from tests.cli.cli_rig import cardctl
from tests.daemon.daemon_rig import Client, Daemon

pytestmark = pytest.mark.timeout(120)

DOOR_REASON = "fault DOOR_OPEN clears only when its cause is removed"


def shuffler(state: dict) -> dict:
    device: dict = state["devices"]["shuffler"]
    return device


def test_a_fault_the_shuffler_will_not_clear_says_its_reason(daemon: Daemon) -> None:
    client = daemon.client()
    client.ok("sim_fault", device="shuffler", code="door_open")
    client.wait_state(lambda s: shuffler(s)["fault"] == "door_open")
    sock = daemon.socket_path

    refused = cardctl(sock, "clear-fault", "shuffler", "door_open")
    assert refused.code == 1, refused
    assert re.fullmatch(r"cardctl: clear-fault: serial://\S+/shuffler: device refused ClearFault: " + re.escape(DOOR_REASON),
                        refused.one_line_error()), refused.err
    with ApiClient(sock) as reader:
        [record] = reader.log(reason="COMMAND_REFUSED").records
        assert record.data["refused"].endswith(f"device refused ClearFault: {DOOR_REASON}"), record
        # the device's Refused, journaled before the refusal it caused
        [device_said] = reader.log(from_seq=record.seq - 1, to_seq=record.seq - 1).records
    assert (device_said.kind, device_said.source) == ("input", "shuffler"), device_said
    assert decode(bytes.fromhex(device_said.data["message"])) == Refused(ClearFault.TYPE, DOOR_REASON)
    assert shuffler(client.state())["fault"] == "door_open"  # nothing changed
    client.close()


def door(client: Client, switches: str) -> None:
    client.ok("sim_switches", device="shuffler", switches=switches)


def test_the_door_switch_opens_and_closes_the_shufflers_door(daemon: Daemon) -> None:
    client = daemon.client()
    client.wait_state(lambda s: shuffler(s)["usable"])
    sock = daemon.socket_path
    door(client, "door_open")
    client.wait_state(lambda s: shuffler(s)["fault"] == "door_open")

    shuffle = cardctl(sock, "shuffle")  # the shuffler refuses: its reason, not "shuffling"
    assert shuffle.code == 1, shuffle
    assert re.fullmatch(r"cardctl: shuffle: serial://\S+/shuffler: device refused StartShuffle: door open: close the "
                        r"door, then start the shuffle", shuffle.one_line_error()), shuffle.err
    assert client.state()["shoe"]["state"] == "idle"
    with ApiClient(sock) as reader:  # as it happened: the command, the shuffler's refusal, then the failure
        [command] = reader.log(reason="START_SHUFFLE").records
        *_, said, failed = reader.log(from_seq=command.seq).records
    assert (said.kind, said.source, failed.reason) == ("input", "shuffler", "COMMAND_REFUSED"), (said, failed)
    assert decode(bytes.fromhex(said.data["message"])) == \
        Refused(StartShuffle.TYPE, "door open: close the door, then start the shuffle")

    door(client, "door_open=0")
    state = client.wait_state(lambda s: shuffler(s)["fault"] is None)
    assert shuffler(state)["state"] == "idle"
    assert cardctl(sock, "shuffle").code == 0
    client.wait_state(lambda s: s["shoe"]["state"] == "verified")
    client.close()
