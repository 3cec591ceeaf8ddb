"""A file a person named that is not there (``--firmware-key``, ``capture``'s FILE, ``firmware
flash``'s IMAGE and key): one line naming the option and the path, never the OS's bare "No such
file or directory", and exit 2 like every other bad argument. Real
cardctl, cardd and simulator processes on real (missing) files."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from firmware_bridge.firmware import generate_dev_keypair, public_key_bytes, sign_image
from simulators.rig import SimulatedTable
from tests.cli.cli_rig import cardctl
from tests.daemon.daemon_rig import run_cardd, write_config

ROOT = Path(__file__).resolve().parents[2]
OS_WORDS = "No such file or directory"


@pytest.fixture
def image_and_key(tmp_path: Path) -> tuple[Path, Path]:
    private, public = generate_dev_keypair()
    key = tmp_path / "fw.pub"
    key.write_bytes(public_key_bytes(public))
    image = tmp_path / "os1.fw"
    image.write_bytes(sign_image("OS-1 sim", "1.1.0", b"\x01new" * 10, private).to_bytes())
    return image, key


@pytest.mark.parametrize("where", ["file", "directory"])
def test_firmware_flash_with_a_missing_key_names_the_option_and_the_path(tmp_path, image_and_key, where):
    image, _ = image_and_key
    key = tmp_path / "fw-missing.pub" if where == "file" else tmp_path / "keys" / "fw.pub"
    why = "no such file" if where == "file" else f"the directory {tmp_path / 'keys'} does not exist"
    run = cardctl(None, "firmware", "flash", "--key", str(key), "serial:///dev/null", str(image))
    assert run.code == 2
    assert run.one_line_error() == f"cardctl: --key {key}: {why}"


def test_firmware_flash_with_a_missing_configured_key_names_the_config_key(tmp_path, image_and_key):
    image, _ = image_and_key
    key = tmp_path / "gone.pub"
    config = write_config(tmp_path, "serial:///dev/null", None)
    config.write_text(config.read_text() + f'\n[firmware]\npublic_key = "{key}"\n')
    run = cardctl(None, "firmware", "flash", "--config", str(config), "serial:///dev/null", str(image))
    assert run.code == 2
    assert run.one_line_error() == f"cardctl: {config}: firmware.public_key: {key}: no such file"


def test_firmware_flash_with_a_missing_image_names_it(tmp_path, image_and_key):
    _, key = image_and_key
    image = tmp_path / "nowhere" / "os1.fw"
    run = cardctl(None, "firmware", "flash", "--key", str(key), "serial:///dev/null", str(image))
    assert run.code == 2
    assert run.one_line_error() == f"cardctl: IMAGE {image}: the directory {tmp_path / 'nowhere'} does not exist"


def test_capture_into_a_missing_directory_is_a_usage_error_before_the_device_is_opened(tmp_path):
    target = tmp_path / "traces" / "shoe.trace"
    with SimulatedTable.over_ptys() as sim:
        run = cardctl(None, "capture", sim.shoe.url, str(target), "--count", "1")
        state = sim.shoe.state()
    assert run.code == 2
    assert run.one_line_error() == f"cardctl: FILE {target}: the directory {tmp_path / 'traces'} does not exist"
    assert state["link_stats"] is None or state["link_stats"].frames_received == 0  # never opened
    assert not target.parent.exists()


def test_capture_over_an_existing_file_is_refused_before_the_device_is_opened(tmp_path):
    target = tmp_path / "shoe.trace"
    target.write_text("keep me")
    run = cardctl(None, "capture", "serial:///dev/cardd-none/shoe", str(target), "--count", "1")
    assert run.code == 2  # the file, not the missing device (exit 3)
    assert run.one_line_error() == f"cardctl: FILE {target} exists: a capture never overwrites a file"
    assert target.read_text() == "keep me"


def test_a_simulator_given_a_missing_firmware_key_says_so_in_words(tmp_path):
    key = tmp_path / "fw.pub"
    done = subprocess.run([sys.executable, "-m", "simulators", "shoe", "--pty", "--firmware-key", str(key)],
                          cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == f"python -m simulators: error: --firmware-key {key}: no such file"


def test_cardd_check_config_with_a_missing_firmware_key_says_so_in_words(tmp_path):
    config = write_config(tmp_path, "serial:///dev/cardd/shoe", None)
    key = tmp_path / "keys" / "fw.pub"
    config.write_text(config.read_text() + f'\n[firmware]\npublic_key = "{key}"\n')
    done = run_cardd("--check-config", "--config", str(config))
    assert done.returncode == 2
    assert done.stderr == (f"cardd: {config}: firmware.public_key: {key}: the directory {tmp_path / 'keys'} "
                           f"does not exist\n")
    assert OS_WORDS not in done.stderr
