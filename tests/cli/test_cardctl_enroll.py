"""``cardctl device enroll``, through a real daemon and a protocol 2.0 simulated shoe on a pty:
the fingerprint the refused shoe proved is shown and asked about (a no enrols nothing), ``--yes``
enrols it, ``device retry`` tries a mended device again (the alarm a supervisor's ``alarm clear``
leaves standing), and ``cardctl status`` shows a 1.1 device's standing warning."""
from __future__ import annotations

import subprocess

import pytest

from cardd.daemon.host_key import host_key_path, load_or_create_host_key
from firmware_bridge.handshake2 import fingerprint, raw_public_key
from simulators.protocol2 import Protocol2
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe
from tests.cli.cli_rig import CARDCTL, cardctl
from tests.daemon.daemon_rig import Daemon, enrol_at_install, remove, state_dir, write_config

pytestmark = pytest.mark.timeout(120)


def refused(state: dict) -> bool:
    return any(a["reason"] == "DEVICE_NOT_TRUSTED" for a in state["alarms"])


def test_enroll_shows_the_proven_key_asks_and_enrols_it() -> None:
    directory = state_dir()
    link = str(directory / "shoe")
    host_key, _ = load_or_create_host_key(host_key_path(directory / "journal.sqlite3"))
    shoe = SimulatedShoe("SHOE-A")
    key = fingerprint(raw_public_key(shoe.identity_key.public_key()))
    try:
        config = write_config(directory, f"serial://{link}", None, devices={"shoe_protocol": "2.0"})
        with PtyEndpoint(shoe, link=link, protocol2=Protocol2(raw_public_key(host_key.public_key()))):
            daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
            client = daemon.client()
            client.wait_state(refused)
            sock = str(daemon.socket_path)
            said_no = subprocess.run([str(CARDCTL), "--socket", sock, "device", "enroll", "shoe"], input="n\n",
                                     capture_output=True, text=True, timeout=60)
            assert said_no.returncode == 1, said_no
            assert f"shoe OS-1 sim SHOE-A proves key {key}" in said_no.stderr
            assert said_no.stderr.strip().endswith("Enrol it [y/N]: cardctl: shoe: not enrolled"), said_no.stderr
            assert refused(client.state())

            done = cardctl(daemon.socket_path, "device", "enroll", "--yes", "shoe")
            assert done.code == 0, done
            assert done.out.startswith(f"shoe: enrolled OS-1 sim SHOE-A key {key} (journal seq "), done.out
            client.wait_state(lambda s: s["devices"]["shoe-reader"]["usable"] and not refused(s))

            again = cardctl(daemon.socket_path, "device", "enroll", "--yes", "shoe")  # trusted now
            assert again.code == 1
            assert again.one_line_error() == "cardctl: device enroll: shoe: nothing to enrol: it is not refused", again.err
            status = cardctl(daemon.socket_path, "status")
            assert status.code == 0 and "not authenticated" not in status.out
            code, err = daemon.stop()
            assert code == 0, err
    finally:
        remove(directory)


def test_device_retry_takes_a_mended_shoe_again_and_alarm_clear_names_it() -> None:
    directory = state_dir()
    link = str(directory / "shoe")
    host_key, _ = load_or_create_host_key(host_key_path(directory / "journal.sqlite3"))
    shoe = SimulatedShoe("SHOE-A")
    enrol_at_install(directory / "journal.sqlite3", shoe)
    try:
        config = write_config(directory, f"serial://{link}", None, devices={"shoe_protocol": "2.0"})
        with PtyEndpoint(shoe, link=link, protocol2=Protocol2(raw_public_key(host_key.public_key()))) as endpoint:
            endpoint.set_faults(downgrade_offer=True)
            daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
            client = daemon.client()
            state = client.wait_state(refused)
            [alarm] = [a for a in state["alarms"] if a["reason"] == "DEVICE_NOT_TRUSTED"]
            cleared = cardctl(daemon.socket_path, "alarm", "clear", str(alarm["id"]))
            assert cleared.code == 1, cleared
            assert "cardctl device enroll shoe" in cleared.err and "cardctl device retry shoe" in cleared.err, cleared.err

            endpoint.set_faults(downgrade_offer=False)
            done = cardctl(daemon.socket_path, "device", "retry", "shoe")
            assert done.code == 0, done
            assert done.out.startswith(f"shoe: shaking hands again; alarm {alarm['id']} closed (journal seq "), done.out
            client.wait_state(lambda s: s["devices"]["shoe-reader"]["usable"] and not refused(s))
            again = cardctl(daemon.socket_path, "device", "retry", "shoe")
            assert again.code == 1
            assert again.one_line_error() == "cardctl: device retry: shoe: nothing to retry: it is not refused", again.err
            code, err = daemon.stop()
            assert code == 0, err
    finally:
        remove(directory)


def test_status_warns_of_a_1_1_device() -> None:
    directory = state_dir()
    link = str(directory / "shoe")
    try:
        config = write_config(directory, f"serial://{link}", None)
        with PtyEndpoint(SimulatedShoe("SHOE-A"), link=link):
            daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
            daemon.client().wait_state(lambda s: s["devices"]["shoe-reader"]["usable"])
            status = cardctl(daemon.socket_path, "status")
            assert status.code == 0, status
            assert "shoe: protocol 1.1, not authenticated" in status.out.splitlines()
            code, err = daemon.stop()
            assert code == 0, err
    finally:
        remove(directory)
