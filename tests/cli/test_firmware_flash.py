"""``cardctl firmware flash``: a signed image updates a simulated device with a progress bar;
an unsigned or re-signed image exits 5 before the device is even opened."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from firmware_bridge.firmware import SignedImage, generate_dev_keypair, public_key_bytes, sign_image
from simulators.rig import SimulatedTable
from tests.cli.cli_rig import cardctl

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def keys(tmp_path: Path) -> Iterator[tuple[object, Path]]:
    private, public = generate_dev_keypair()
    key = tmp_path / "firmware.pub"
    key.write_bytes(public_key_bytes(public))
    yield private, key


def image_file(path: Path, signed: SignedImage) -> Path:
    path.write_bytes(signed.to_bytes())
    return path


def test_a_signed_image_updates_the_device_with_progress(tmp_path, keys):
    private, key = keys
    image = image_file(tmp_path / "os1.fw", sign_image("OS-1 sim", "1.1.0", bytes(range(256)) * 64, private))
    with SimulatedTable.over_ptys(firmware_public_key=key.read_bytes()) as sim:
        run = cardctl(None, "firmware", "flash", "--key", str(key), sim.shoe.url, str(image))
        assert run.code == 0, run.err
        assert "1.0.0 -> 1.1.0" in run.out
        assert re.search(r"16\.4/16\.4 kB", run.out)  # the progress bar: bytes sent of the image's
        probe = cardctl(None, "probe", sim.shoe.url, "--json")
    assert probe.json()["firmware"] == "1.1.0"


@pytest.mark.parametrize("tamper", ["unsigned", "re-signed"])
def test_an_unsigned_or_re_signed_image_exits_5_and_nothing_is_sent(tmp_path, keys, tamper):
    private, key = keys
    body = b"\x00firmware" * 100
    if tamper == "unsigned":
        signed = sign_image("OS-1 sim", "1.1.0", body, private)
        raw = signed.header_bytes + signed.image + bytes(64)
    else:  # someone else's key over a valid image
        other, _ = generate_dev_keypair()
        raw = sign_image("OS-1 sim", "1.1.0", body, other).to_bytes()
    image = tmp_path / "bad.fw"
    image.write_bytes(raw)
    with SimulatedTable.over_ptys(firmware_public_key=key.read_bytes()) as sim:
        run = cardctl(None, "firmware", "flash", "--key", str(key), sim.shoe.url, str(image))
        assert run.code == 5
        assert "nothing sent" in run.one_line_error()
        state = sim.shoe.state()
    assert state["link_stats"] is None or state["link_stats"].frames_received == 0  # never even opened
    assert state["firmware_version"] == "1.0.0"


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_an_image_that_is_no_regular_file_is_one_line_and_never_read(tmp_path, keys, kind):
    """A FIFO's open waited for a writer for good, and /dev/zero was read until memory ran out (the
    address space is capped here so that such a read fails fast): both are refused unread, before
    the device is opened."""
    _, key = keys
    if kind == "fifo":
        image, shown = tmp_path / "image.fifo", "a FIFO (named pipe)"
        os.mkfifo(image)
    else:
        image, shown = Path("/dev/zero"), "a character device"
    run = cardctl(None, "firmware", "flash", "--key", str(key), "serial:///dev/null", str(image), timeout=30,
                  prefix=("prlimit", f"--as={1 << 30}", "--"))
    assert run.code == 2, run.err
    assert run.one_line_error() == f"cardctl: IMAGE {image}: {shown}, not a regular file: not read"


def test_a_missing_or_keyless_config_is_one_line_naming_the_file(tmp_path):
    image = tmp_path / "x.fw"
    image.write_bytes(b"x")
    run = cardctl(None, "firmware", "flash", "--config", str(tmp_path / "none.toml"), "serial:///dev/null", str(image))
    assert run.code == 2 and "none.toml" in run.one_line_error()
    config = tmp_path / "cardd.toml"
    config.write_text('[devices]\nshoe = "serial:///dev/null"\n[firmware]\npublic_kye = "/x"\n')
    run = cardctl(None, "firmware", "flash", "--config", str(config), "serial:///dev/null", str(image))
    assert run.code == 2 and "public_kye" in run.one_line_error()


def test_an_older_image_is_refused_naming_the_option_that_allows_it(tmp_path, keys):
    private, key = keys
    image = image_file(tmp_path / "os1-0.9.fw", sign_image("OS-1 sim", "0.9.0", b"\x00old" * 100, private))
    with SimulatedTable.over_ptys(firmware_public_key=key.read_bytes()) as sim:
        run = cardctl(None, "firmware", "flash", "--key", str(key), "--json", sim.shoe.url, str(image))
        assert run.code == 1
        assert run.one_line_error() == (
            f"cardctl: {sim.shoe.url}: firmware not flashed: OS-1 sim 0.9.0 for OS-1 sim SHOE0001 refused: version "
            "0.9.0 is lower than the running 1.0.0 (it goes only when someone allows it, by name): --allow-downgrade-by NAME "
            "allows it")  # the option cardctl takes, not the library's keyword (allow_downgrade_by=name)
        allowed = cardctl(None, "firmware", "flash", "--key", str(key), "--json", "--allow-downgrade-by", "tech1",
                          sim.shoe.url, str(image))
    assert allowed.code == 0, allowed.err
    assert allowed.json()["to_version"] == "0.9.0" and allowed.json()["downgrade_allowed_by"] == "tech1"


@pytest.mark.timeout(60)
def test_a_standalone_simulator_given_the_key_takes_a_signed_image(tmp_path, keys):
    """docs/simulators.md: how a technician tries firmware flash without a table (the simulator had no key
    option, so it refused every image)."""
    private, key = keys
    image = image_file(tmp_path / "os1.fw", sign_image("OS-1 sim", "1.1.0", b"\x01new" * 100, private))
    link = tmp_path / "shoe"
    sim = subprocess.Popen([sys.executable, "-m", "simulators", "shoe", "--pty", "--link", str(link),
                            "--firmware-key", str(key)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        assert sim.stdout is not None and sim.stdout.readline().strip() == str(link)
        run = cardctl(None, "firmware", "flash", "--key", str(key), f"serial://{link}", str(image))
        assert run.code == 0, run.err
        assert "OS-1 sim: 1.0.0 -> 1.1.0" in run.out
    finally:
        sim.terminate()
        sim.communicate(timeout=20)


@pytest.mark.parametrize("wrong", ["older", "other model"])
def test_an_image_the_device_would_refuse_draws_no_progress_bar(tmp_path, keys, wrong):
    """An older or wrong-model image draws no empty progress bar above the error line: the device's
    model and running version are checked against the image before any bar is drawn."""
    private, key = keys
    model, version = ("OS-1 sim", "0.9.0") if wrong == "older" else ("OS-9 other", "2.0.0")
    image = image_file(tmp_path / "x.fw", sign_image(model, version, b"\x00img" * 100, private))
    with SimulatedTable.over_ptys(firmware_public_key=key.read_bytes()) as sim:
        run = cardctl(None, "firmware", "flash", "--key", str(key), sim.shoe.url, str(image))
        state = sim.shoe.state()
    assert run.code == 1
    assert "firmware not flashed" in run.one_line_error()
    assert run.out == ""  # no bar, not even an empty one
    assert state["firmware_version"] == "1.0.0"
