"""docs/install.md as a reader follows it, step by step: the local udev rules of its RS-232 section work
as written (checked by the real udevadm on emulated devices), its commands use the checkout's
.venv, and it names the system package a real USB shoe needs."""
import re
from pathlib import Path

import pytest

from tests.udev.udev_sandbox import TEST_GID, UdevSandbox, properties

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "docs" / "install.md"
LOCAL_RULES = "/etc/udev/rules.d/98-cardd-local.rules"
TTYS0 = "/sys/devices/platform/serial8250/tty/ttyS0"
TTYUSB0 = "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-2/1-2:1.0/tty/ttyUSB0"


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```", text, re.M | re.S)


def local_rules() -> list[str]:
    """The rule lines of every block install.md labels as the local rules file."""
    blocks = [b for b in code_blocks(INSTALL.read_text()) if b.startswith(f"# {LOCAL_RULES}\n")]
    return [line for b in blocks for line in b.splitlines() if line and not line.startswith("#")]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    rules = local_rules()
    assert len(rules) == 2, rules  # one for a built-in port, one for a generic adapter
    return UdevSandbox(tmp_path_factory.mktemp("udev-local"), {"98-cardd-local.rules": "\n".join(rules) + "\n"})


def assert_given_to_cardd(output: str, link: str) -> None:
    assert properties(output)["CARDD_ROLE"] == "shuffler"
    assert f"/dev/{link}" in properties(output)["DEVLINKS"].split()
    assert re.search(r"98-cardd-local\.rules:\d+ MODE 0660", output)
    assert re.search(rf"98-cardd-local\.rules:\d+ GROUP {TEST_GID}\b", output)


@pytest.mark.udev
@pytest.mark.timeout(120)
def test_the_built_in_port_rule_gives_ttyS0_to_cardd(sandbox):
    assert_given_to_cardd(sandbox.test(ROOT / "udev" / "ttyS0.umockdev", TTYS0), "cardd/shuffler-rs232")


@pytest.mark.udev
@pytest.mark.timeout(120)
def test_the_adapter_rule_takes_that_adapter_and_no_other_of_its_kind(sandbox, tmp_path):
    assert_given_to_cardd(sandbox.test(ROOT / "udev" / "ftdi.umockdev", TTYUSB0), "cardd/shuffler-FT1234AB")
    other = tmp_path / "other-ftdi.umockdev"  # the same adapter model, another serial number
    other.write_text((ROOT / "udev" / "ftdi.umockdev").read_text().replace("serial=FT1234AB", "serial=FT9999ZZ"))
    output = sandbox.test(other, TTYUSB0)
    assert properties(output)["ID_VENDOR_ID"] == "0403"  # really processed
    assert "CARDD_ROLE" not in properties(output) and "/dev/cardd/" not in properties(output).get("DEVLINKS", "")
    assert not re.search(r"98-cardd-local\.rules:\d+ (MODE|GROUP|LINK)", output)


def test_commands_use_the_checkouts_venv():
    text = INSTALL.read_text()
    bare = [line for block in code_blocks(text) for line in block.splitlines()
            if re.search(r"(^|[\s`])python3? -m ", line)]
    bare += re.findall(r"`python3? -m [^`]*`", text)
    assert bare == [], f"use .venv/bin/python -m ... (as the rest of install.md): {bare}"
    assert text.count(".venv/bin/python -m drivers.") >= 3


def test_a_table_computer_installs_libusb_and_the_makefile_need_not():
    blocks = code_blocks(INSTALL.read_text())
    assert any(re.search(r"apt-get install[^\n]*\blibusb-1\.0-0\b", b) for b in blocks)
    assert "libusb" not in (ROOT / "Makefile").read_text()  # tests use the simulator backend
    assert "the tests and the demo never need it" in INSTALL.read_text()
