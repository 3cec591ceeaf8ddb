"""``cardctl firmware`` as a technician uses it: ``flash`` through the running daemon (its own link
to the device; journaled before and after, with who and the supervisor who allowed a downgrade),
straight to the device only with cardd stopped (and then it says nothing is journaled); the same
version again only with ``--force``; ``keygen`` and ``sign`` for images of one's own; a missing
key names ``--key`` as well as the configuration."""
from __future__ import annotations

import getpass
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from firmware_bridge.firmware import generate_dev_keypair, public_key_bytes, sign_image
from simulators.pty_endpoint import PtyEndpoint
from simulators.rig import SimulatedTable
from simulators.shoe import SimulatedShoe
from tests.cli.cli_rig import cardctl
from tests.daemon.daemon_rig import Daemon, write_config
from tests.support.groups import this_process, unix_groups

pytestmark = pytest.mark.timeout(180)

MODEL = SimulatedShoe.MODEL
#: larger than the API's usual request line (64 KiB) once in base64: the image goes in one line
BODY = bytes(range(256)) * 384


@dataclass
class Table:
    daemon: Daemon
    socket: Path
    url: str
    key: Path
    private: Any
    directory: Path

    def image(self, version: str, body: bytes = BODY) -> Path:
        path = self.directory / f"os1-{version}.fw"
        path.write_bytes(sign_image(MODEL, version, body, self.private).to_bytes())
        return path

    def firmware_records(self) -> list[dict[str, Any]]:
        client = self.daemon.client()
        try:
            reply = client.request({"class": "LOG", "reason": "FIRMWARE_UPDATE"})
        finally:
            client.close()
        records: list[dict[str, Any]] = reply["records"]
        return records

    def running_version(self) -> str:
        client = self.daemon.client()
        try:
            version: str = client.state()["devices"]["shoe-reader"]["ident"]["firmware"]
        finally:
            client.close()
        return version


@pytest.fixture
def table(directory: Path) -> Iterator[Table]:
    """cardd on a configuration with a firmware key, its shoe a simulated one that takes the key."""
    private, public = generate_dev_keypair()
    key = directory / "fw.pub"
    key.write_bytes(public_key_bytes(public))
    with PtyEndpoint(SimulatedShoe(firmware_public_key=public_key_bytes(public))) as endpoint:
        config = write_config(directory, endpoint.url, None, firmware_key=key)
        daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
        try:
            client = daemon.client()
            client.wait_state(lambda s: s["devices"]["shoe-reader"]["usable"])
            client.close()
            yield Table(daemon, daemon.socket_path, endpoint.url, key, private, directory)
        finally:
            daemon.stop()


def wait_version(table: Table, version: str) -> None:
    client = table.daemon.client()
    try:
        client.wait_state(lambda s: (s["devices"]["shoe-reader"]["ident"] or {}).get("firmware") == version
                          and s["devices"]["shoe-reader"]["usable"])
    finally:
        client.close()


def test_a_flash_through_the_daemon_is_journaled_before_and_after_with_who(table: Table) -> None:
    image = table.image("1.1.0")
    run = cardctl(table.socket, "firmware", "flash", "--key", str(table.key), "shoe", str(image))
    assert run.code == 0, run.err
    assert f"{MODEL}: 1.0.0 -> 1.1.0: " in run.out and "(journal seq " in run.out
    started, done = table.firmware_records()
    who = getpass.getuser()
    for record, stage in ((started, "started"), (done, "done")):
        result = record["data"]["result"]
        assert record["who"] == who
        assert (result["stage"], result["device"], result["from_version"], result["to_version"]) == (
            stage, "shoe", "1.0.0", "1.1.0")
        assert result["downgrade_allowed_by"] is None
        assert result["image_bytes"] == image.stat().st_size
        # the image's bytes are not the journal's to keep (its size and SHA-256 are)
        assert record["data"]["args"]["image_base64"].endswith("characters, left out of the journal)")
    assert done["data"]["result"]["ok"] is True and started["seq"] < done["seq"]
    assert f"(journal seq {done['seq']})" in run.out
    wait_version(table, "1.1.0")


def test_a_url_the_daemon_holds_is_flashed_through_it_not_opened_beside_it(table: Table) -> None:
    run = cardctl(table.socket, "firmware", "flash", "--key", str(table.key), "--json", table.url,
                  str(table.image("1.1.0")))
    assert run.code == 0, run.err
    assert run.json()["journaled"] is True and run.json()["to_version"] == "1.1.0"
    assert [r["data"]["result"]["stage"] for r in table.firmware_records()] == ["started", "done"]
    elsewhere = cardctl(table.socket, "firmware", "flash", "--key", str(table.key), "serial:///dev/ttyUSB7",
                        str(table.image("1.2.0")))
    assert elsewhere.code == 2
    assert elsewhere.one_line_error() == ("cardctl: firmware flash refused: no device 'serial:///dev/ttyUSB7' at this "
                                          "table (devices: shoe)")


def test_a_downgrade_through_the_daemon_needs_a_supervisor_named_and_journals_them(table: Table) -> None:
    older = table.image("0.9.0")
    refused = cardctl(table.socket, "firmware", "flash", "--key", str(table.key), "shoe", str(older))
    assert refused.code == 1
    assert refused.one_line_error() == (
        f"cardctl: firmware flash: {MODEL} 0.9.0 for {MODEL} SHOE0001 refused: version 0.9.0 is lower than the "
        "running 1.0.0 (it goes only when someone allows it, by name): a supervisor allows it with cardctl firmware flash "
        "--allow-downgrade-by NAME")
    nobody = cardctl(table.socket, "firmware", "flash", "--key", str(table.key), "--allow-downgrade-by",
                     "no-such-login", "shoe", str(older))
    assert nobody.code == 2
    assert nobody.one_line_error() == (
        "cardctl: firmware flash: a downgrade allowed by 'no-such-login': no login of that name holds the "
        "supervisor role here (a supervisor allows it, by login name)")
    assert table.running_version() == "1.0.0"
    supervisor = getpass.getuser()  # the daemon's own user: it holds every role
    allowed = cardctl(table.socket, "firmware", "flash", "--key", str(table.key), "--allow-downgrade-by", supervisor,
                      "shoe", str(older))
    assert allowed.code == 0, allowed.err
    assert f"(downgrade allowed by {supervisor})" in allowed.out
    kept = [r for r in table.firmware_records() if r["kind"] == "command"]
    assert [r["data"]["result"]["downgrade_allowed_by"] for r in kept] == [supervisor, supervisor]
    assert kept[0]["data"]["result"]["downgrade"] == "version 0.9.0 is lower than the running 1.0.0"


def test_the_same_version_again_asks_for_force_through_the_daemon(table: Table) -> None:
    image = table.image("1.1.0")
    assert cardctl(table.socket, "firmware", "flash", "--key", str(table.key), "shoe", str(image)).code == 0
    wait_version(table, "1.1.0")
    again = cardctl(table.socket, "firmware", "flash", "--key", str(table.key), "shoe", str(image))
    assert again.code == 1
    assert again.one_line_error() == (f"cardctl: firmware flash: {MODEL} 1.1.0 runs on {MODEL} SHOE0001 already: "
                                      "flash it again with cardctl firmware flash --force")
    forced = cardctl(table.socket, "firmware", "flash", "--key", str(table.key), "--force", "shoe", str(image))
    assert forced.code == 0, forced.err
    assert "1.1.0 -> 1.1.0" in forced.out


def test_a_direct_flash_with_cardd_stopped_says_nothing_is_journaled_and_asks_for_force(tmp_path: Path) -> None:
    private, public = generate_dev_keypair()
    key = tmp_path / "fw.pub"
    key.write_bytes(public_key_bytes(public))
    image = tmp_path / "os1.fw"
    image.write_bytes(sign_image(MODEL, "1.1.0", b"\x01new" * 100, private).to_bytes())
    stopped = tmp_path / "cardd.sock"  # no daemon listens there
    with SimulatedTable.over_ptys(firmware_public_key=key.read_bytes()) as sim:
        run = cardctl(stopped, "firmware", "flash", "--key", str(key), sim.shoe.url, str(image))
        assert run.code == 0, run.err
        assert run.out.splitlines()[-1] == "nothing is journaled: cardd is not running, so no journal records this flash"
        again = cardctl(stopped, "firmware", "flash", "--key", str(key), "--json", sim.shoe.url, str(image))
        assert again.code == 1
        assert again.one_line_error().endswith(f"{MODEL} 1.1.0 runs on {MODEL} SHOE0001 already: --force flashes "
                                               "it again")
        forced = cardctl(stopped, "firmware", "flash", "--key", str(key), "--json", "--force", sim.shoe.url,
                         str(image))
        assert forced.code == 0, forced.err
        assert forced.json()["journaled"] is False
        named = cardctl(stopped, "firmware", "flash", "--key", str(key), "shoe", str(image))
    assert named.code == 3
    assert named.one_line_error().endswith("give the device's URL to flash it directly (nothing is journaled then)")


def test_keygen_and_sign_make_images_a_device_takes_again_and_again(tmp_path: Path) -> None:
    private, public = tmp_path / "vendor.key", tmp_path / "vendor.pub"
    made = cardctl(None, "firmware", "keygen", str(private), str(public))
    assert made.code == 0, made.err
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    again = cardctl(None, "firmware", "keygen", str(tmp_path / "other.key"), str(public))
    assert again.code == 2
    assert again.one_line_error() == (f"cardctl: PUBLIC_KEY {public}: exists already: not overwritten (choose "
                                      "another name, or remove it first)")
    assert not (tmp_path / "other.key").exists()
    body = tmp_path / "os1.bin"
    body.write_bytes(os.urandom(4096))
    stopped = tmp_path / "cardd.sock"
    with SimulatedTable.over_ptys(firmware_public_key=public.read_bytes()) as sim:
        for version in ("1.1.0", "1.2.0"):  # the private key kept: a second image is signed with it too
            image = tmp_path / f"os1-{version}.fw"
            signed = cardctl(None, "firmware", "sign", "--key", str(private), "--model", MODEL, "--version", version,
                             str(body), str(image))
            assert signed.code == 0, signed.err
            run = cardctl(stopped, "firmware", "flash", "--key", str(public), "--json", sim.shoe.url, str(image))
            assert run.code == 0, run.err
            assert run.json()["to_version"] == version
    over = cardctl(None, "firmware", "sign", "--key", str(private), "--model", MODEL, "--version", "1.3.0", str(body),
                   str(image))
    assert over.code == 2 and "exists already: not overwritten" in over.one_line_error()
    public_as_private = cardctl(None, "firmware", "sign", "--key", str(public), "--model", MODEL, "--version", "1.3.0",
                                str(body), str(tmp_path / "x.fw"))
    assert public_as_private.code == 2
    assert public_as_private.one_line_error().startswith(f"cardctl: --key {public}: not an Ed25519 private key")


def test_a_missing_key_names_the_key_option_and_the_configuration(tmp_path: Path) -> None:
    image = tmp_path / "x.fw"
    image.write_bytes(b"x")
    missing = tmp_path / "none.toml"
    run = cardctl(None, "firmware", "flash", "--config", str(missing), "serial:///dev/null", str(image))
    assert run.code == 2
    line = run.one_line_error()
    assert line.startswith("cardctl: no firmware key: give --key FILE, or set [firmware] public_key in the "
                           "configuration: ") and f"{missing}: no such file" in line
    config = tmp_path / "cardd.toml"
    rules = Path(__file__).resolve().parents[2] / "cardd" / "rules" / "casino-000.toml"
    config.write_text(f'[devices]\nshoe = "serial:///dev/null"\n[table]\nrules = "{rules}"\n')
    unset = cardctl(None, "firmware", "flash", "--config", str(config), "serial:///dev/null", str(image))
    assert unset.code == 2
    assert unset.one_line_error().startswith(f"cardctl: no firmware key: give --key FILE, or set [firmware] "
                                             f"public_key in {config}")


ROLE_GROUPS = this_process({"api": "cardd-fw-api", "dealer": "cardd-fw-dealer", "technician": "cardd-fw-tech"})
TECHNICIAN_UID, DEALER_UID = 64541, 64542


def test_only_a_technician_flashes_through_the_daemon_and_the_image_is_theirs_to_read(directory: Path) -> None:
    """The technician's image and key in a directory only they can read: cardctl reads them and sends
    the bytes, so the daemon's own user need not reach the file. A dealer is refused by role."""
    private, public = generate_dev_keypair()
    key = directory / "fw.pub"
    key.write_bytes(public_key_bytes(public))
    mine = directory / "technician"
    mine.mkdir(mode=0o700)
    image = mine / "os1-1.1.0.fw"
    image.write_bytes(sign_image(MODEL, "1.1.0", BODY, private).to_bytes())
    mine_key = mine / "fw.pub"
    mine_key.write_bytes(key.read_bytes())
    for path in (mine, image, mine_key):
        os.chown(path, TECHNICIAN_UID, -1)
    with unix_groups(ROLE_GROUPS) as gids, \
            PtyEndpoint(SimulatedShoe(firmware_public_key=public_key_bytes(public))) as endpoint:
        config = write_config(directory, endpoint.url, None, firmware_key=key, api_group=ROLE_GROUPS["api"],
                              roles={"dealer": ROLE_GROUPS["dealer"], "technician": ROLE_GROUPS["technician"]})
        daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
        try:
            client = daemon.client()
            client.wait_state(lambda s: s["devices"]["shoe-reader"]["usable"])
            client.close()
            as_technician = ("setpriv", f"--reuid={TECHNICIAN_UID}", f"--regid={gids['api']}",
                             f"--groups={gids['api']},{gids['technician']}")
            as_dealer = ("setpriv", f"--reuid={DEALER_UID}", f"--regid={gids['api']}",
                         f"--groups={gids['api']},{gids['dealer']}")
            dealer_key = directory / "dealer.pub"
            dealer_key.write_bytes(key.read_bytes())
            dealer_image = directory / "os1.fw"
            dealer_image.write_bytes(image.read_bytes())
            refused = cardctl(daemon.socket_path, "firmware", "flash", "--key", str(dealer_key), "shoe",
                              str(dealer_image), prefix=as_dealer)
            assert refused.code == 4
            assert refused.one_line_error().startswith(
                "cardctl: command 'firmware flash' needs the technician role; ")
            run = cardctl(daemon.socket_path, "firmware", "flash", "--key", str(mine_key), "--json", "shoe",
                          str(image), prefix=as_technician)
            assert run.code == 0, run.err
            assert run.json()["who"] == str(TECHNICIAN_UID) and run.json()["to_version"] == "1.1.0"
            client = daemon.client()
            refusal = client.request({"class": "LOG", "reason": "COMMAND_REFUSED"})["records"][-1]
            client.close()
            # refused for want of the role, as any command is (not as a line too long), the image unread
            assert refusal["who"] == str(DEALER_UID) and refusal["data"]["command"] == "firmware_update"
            assert "needs the technician role" in refusal["message"] and "image_base64" not in json.dumps(refusal)
        finally:
            daemon.stop()
