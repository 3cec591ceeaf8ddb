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
    assert len(rules) == 2 * len(KNOWN_DEVICES)  # per device: access, then the link
    assert "0666" not in text and "0403" not in text and "067b" not in text
    assert "$attr{serial}" not in text  # the raw serial never names anything
    for device in KNOWN_DEVICES:
        match = f'idProduct}}=="{device.pid:04x}"'
        [line] = [r for r in rules if f'CARDD_ROLE}}="{device.role}"' in r]
        assert 'MODE="0660"' in line and 'GROUP="cardd"' in line and match in line
        assert 'ENV{ID_MM_DEVICE_IGNORE}="1"' in line and 'IMPORT{builtin}="usb_id"' in line
        [link] = [r for r in rules if "SYMLINK" in r and match in r]
        assert link.endswith(f'ENV{{ID_SERIAL_SHORT}}=="?*", SYMLINK+="cardd/{device.role}-$env{{ID_SERIAL_SHORT}}"')


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


#: serial -> the link name it must give (None: no link at all); udev's usb_id builtin makes
#: ID_SERIAL_SHORT from the serial: unsafe characters become "_", a non-ASCII serial is dropped
HOSTILE_SERIALS = {
    "x/y": "x_y",
    "../..": ".._..",
    "a b": "a_b",
    "x y ../../etc": "x_y_.._.._etc",
    "ñ漢": None,
}


@pytest.fixture(scope="module")
def hostile_udevadm_test(tmp_path_factory):
    """``run(role, serial)``: udevadm test on the role's emulated device carrying ``serial``."""
    sandbox = UdevSandbox(tmp_path_factory.mktemp("udev-hostile"), {RULES.name: RULES.read_text()})
    descriptions = tmp_path_factory.mktemp("hostile-devices")

    def run(role, serial):
        description, syspath = DEVICES[role]
        text = (ROOT / "udev" / description).read_text()
        text, replaced = re.subn(r"^A: serial=.*$", lambda m: f"A: serial={serial}", text, flags=re.M)
        assert replaced == 1
        path = descriptions / f"{role}-{len(list(descriptions.iterdir()))}.umockdev"
        path.write_text(text)
        return sandbox.test(path, syspath)

    return run


@pytest.mark.parametrize("role", ["shoe", "shuffler"])
@pytest.mark.parametrize("serial", list(HOSTILE_SERIALS))
def test_a_hostile_serial_never_shapes_the_link_path(hostile_udevadm_test, role, serial):
    """A link built from the raw serial would let `x/y` make /dev/cardd/shoe-x/y: a serial that could
    shape the path gets a safe link or none."""
    output = hostile_udevadm_test(role, serial)
    props = properties(output)
    assert props["CARDD_ROLE"] == role  # the device is still recognised and its node still ours
    assert re.search(rf"99-cardd\.rules:\d+ GROUP {TEST_GID}\b", output)
    ours = [link for link in props.get("DEVLINKS", "").split() if link.startswith("/dev/cardd/")]
    expected = HOSTILE_SERIALS[serial]
    assert ours == ([] if expected is None else [f"/dev/cardd/{role}-{expected}"])
