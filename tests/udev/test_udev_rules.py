"""udev/99-cardd.rules: generated from the known-device table, checked by the real rules
engine (udevadm test) against emulated devices (umockdev), inside a private mount
namespace so the machine's /etc, /dev and /run are never touched (udev_sandbox.py)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from drivers.known_devices import KNOWN_DEVICES, udev_rules

from tests.udev.udev_sandbox import TEST_GID, UdevSandbox, properties

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "udev" / "99-cardd.rules"
pytestmark = [pytest.mark.udev, pytest.mark.timeout(120)]

DEVICES = {
    "shoe": ("shoe.umockdev", "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-3"),
    "shuffler": ("shuffler.umockdev", "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-2/1-2:1.0/tty/ttyACM0"),
    "ftdi": ("ftdi.umockdev", "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-2/1-2:1.0/tty/ttyUSB0"),
}


@pytest.fixture(scope="module")
def udevadm_test(tmp_path_factory):
    sandbox = UdevSandbox(tmp_path_factory.mktemp("udev-sandbox"), {RULES.name: RULES.read_text()})
    return UdevResults(sandbox)


class UdevResults:
    """``udevadm test`` per device, run once; ``fresh(name)`` runs it again."""

    def __init__(self, sandbox: UdevSandbox) -> None:
        self.sandbox = sandbox
        self.results: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        if name not in self.results:
            description, syspath = DEVICES[name]
            self.results[name] = self.sandbox.test(ROOT / "udev" / description, syspath)
        return self.results[name]

    def fresh(self, name: str) -> str:
        self.results.pop(name, None)
        return self(name)


def test_committed_rules_are_the_generated_rules():
    regenerated = subprocess.run([sys.executable, "-m", "drivers.known_devices", "--udev-rules"],
                                 cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert RULES.read_text() == regenerated == udev_rules()


def test_rules_match_exactly_the_known_table_and_grant_no_world_access():
    text = RULES.read_text()
    rules = [line for line in text.splitlines() if line and not line.startswith("#")]
    matched = {(v, p) for line in rules
               for v, p in re.findall(r'idVendor}=="([0-9a-f]{4})", ATTRS?{idProduct}=="([0-9a-f]{4})"', line)}
    assert matched == {(f"{d.vid:04x}", f"{d.pid:04x}") for d in KNOWN_DEVICES}
    assert len(rules) == len(KNOWN_DEVICES)
    assert "0666" not in text and "0403" not in text and "067b" not in text
    for device in KNOWN_DEVICES:
        [line] = [r for r in rules if f'CARDD_ROLE}}="{device.role}"' in r]
        assert f'SYMLINK+="cardd/{device.role}-$attr{{serial}}"' in line
        assert 'MODE="0660"' in line and 'GROUP="cardd"' in line
        assert 'ENV{ID_MM_DEVICE_IGNORE}="1"' in line


@pytest.mark.parametrize("role, link", [("shoe", "/dev/cardd/shoe-SHOE0001"),
                                        ("shuffler", "/dev/cardd/shuffler-A1")])
def test_known_devices_get_role_name_mode_and_group(udevadm_test, role, link):
    output = udevadm_test(role)
    props = properties(output)
    assert props["CARDD_ROLE"] == role
    assert props["ID_MM_DEVICE_IGNORE"] == "1"
    assert link in props["DEVLINKS"].split()
    # udevadm 252 logs the rule's effect line by line (it does not list mode/group as properties)
    assert re.search(r"99-cardd\.rules:\d+ MODE 0660", output)
    assert re.search(rf"99-cardd\.rules:\d+ GROUP {TEST_GID}\b", output)
    assert re.search(rf"99-cardd\.rules:\d+ LINK '{link.removeprefix('/dev/')}'", output)


def test_a_generic_ftdi_adapter_is_left_alone(udevadm_test):
    output = udevadm_test("ftdi")
    props = properties(output)
    assert props["ID_VENDOR_ID"] == "0403"  # the emulated adapter was really processed
    assert "CARDD_ROLE" not in props and "ID_MM_DEVICE_IGNORE" not in props
    assert "/dev/cardd/" not in props.get("DEVLINKS", "")
    assert not re.search(r"99-cardd\.rules:\d+ (MODE|GROUP|LINK)", output)


def _host_state():
    return {
        "/dev/cardd": os.path.lexists("/dev/cardd"),
        "/dev/serial": os.path.lexists("/dev/serial"),
        "/dev/char": os.path.lexists("/dev/char"),
        "/run/udev": sorted(os.listdir("/run/udev")) if os.path.isdir("/run/udev") else None,
        "/etc/udev/rules.d": sorted(os.listdir("/etc/udev/rules.d")),
        "/etc/group": Path("/etc/group").read_text(),
    }


def test_the_machine_is_not_touched(udevadm_test):
    before = _host_state()
    for name in DEVICES:
        udevadm_test.fresh(name)
    assert _host_state() == before
