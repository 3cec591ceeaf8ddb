"""Discovery: the known-device table, USB devices through pyusb, serial ports through sysfs."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import structlog
import usb.core

from drivers.discovery import discover
from drivers.known_devices import KNOWN_DEVICES, by_role, lookup
from simulators.usb_backend import SimUsbBackend

from tests.drivers.drv_helpers import EchoSide

ROOT = Path(__file__).resolve().parents[2]
GENERIC_USB_SERIAL = [(0x0403, 0x6001), (0x0403, 0x6010), (0x0403, 0x6014), (0x0403, 0x6015),
                      (0x067B, 0x2303), (0x10C4, 0xEA60), (0x1A86, 0x7523)]


def test_known_table_is_ours_only():
    assert {d.role for d in KNOWN_DEVICES} == {"shoe", "shuffler"}
    assert all(d.vid == 0x1209 for d in KNOWN_DEVICES)  # pid.codes
    assert not {(d.vid, d.pid) for d in KNOWN_DEVICES} & set(GENERIC_USB_SERIAL)
    shoe = lookup(0x1209, 0xC4D0)
    assert shoe is not None and shoe.role == "shoe" and lookup(0x0403, 0x6001) is None
    with pytest.raises(KeyError, match="roles"):
        by_role("printer")


def test_usb_devices_are_listed_and_known_ones_flagged(mocker):
    backend = SimUsbBackend()
    backend.add_device(EchoSide(), vid=0x1209, pid=0xC4D0, serial="SHOE0001")
    stranger = backend.add_device(EchoSide(), vid=0x0403, pid=0x6001, serial="FT1234AB")
    reads = mocker.spy(backend, "ctrl_transfer")

    found = discover(usb_backend=backend, serial_ports=False).devices

    assert [c.role for c in found] == ["shoe", None]  # known first
    shoe, other = found
    assert shoe.url == "usb://1209:c4d0?serial=SHOE0001" and shoe.serial_number == "SHOE0001"
    assert (other.vid, other.pid, other.url, other.serial_number) == (0x0403, 0x6001, None, None)
    assert other.address == stranger.address
    # strings are read from our own devices only: a stranger is never opened
    assert all(call.args[0].device is not stranger for call in reads.call_args_list)


def test_usb_device_we_may_not_open_is_still_listed(mocker):
    backend = SimUsbBackend()
    backend.add_device(EchoSide(), vid=0x1209, pid=0xC4D0, serial="SHOE0001")
    mocker.patch.object(backend, "open_device", side_effect=usb.core.USBError("Access denied", -3, 13))
    [shoe] = discover(usb_backend=backend, serial_ports=False).devices
    assert shoe.role == "shoe" and shoe.serial_number is None and shoe.url == "usb://1209:c4d0"


def test_without_libusb_the_listing_says_usb_devices_could_not_be_listed_and_why(without_libusb):
    result = discover(serial_ports=False)
    assert result.devices == []
    assert result.not_listed["usb"].startswith("USB devices could not be listed: libusb is not installed")
    assert "libusb-1.0-0" in result.not_listed["usb"]


def test_the_command_prints_what_could_not_be_listed_on_stdout(without_libusb, capsys):
    from drivers.discovery import main

    saved = structlog.get_config()  # main() points structlog at this test's captured stderr
    try:
        assert main(["--known"]) == 0
    finally:
        structlog.configure(**saved)
    printed = json.loads(capsys.readouterr().out)
    assert "USB devices could not be listed" in printed["not_listed"]["usb"] and "devices" in printed


def _discover_under_umockdev(description: str) -> list[dict]:
    if not shutil.which("umockdev-run"):
        pytest.fail("umockdev-run is missing: run `make test` (it installs umockdev) or "
                    "apt-get install umockdev")
    out = subprocess.run(
        ["umockdev-run", "--device", str(ROOT / "udev" / description), "--",
         sys.executable, "-m", "drivers.discovery"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)["devices"]


@pytest.mark.udev
@pytest.mark.timeout(90)
def test_serial_ports_from_sysfs_flag_the_shuffler():
    ports = [c for c in _discover_under_umockdev("shuffler.umockdev") if c["kind"] == "serial"]
    assert ports == [{"kind": "serial", "vid": 0x1209, "pid": 0xC4D1, "serial_number": "A1",
                      "description": "cardd shuffler", "role": "shuffler",
                      "url": "serial:///dev/ttyACM0", "path": "/dev/ttyACM0",
                      "bus": None, "address": None}]


@pytest.mark.udev
@pytest.mark.timeout(90)
def test_a_generic_ftdi_adapter_is_listed_but_not_claimed():
    ports = [c for c in _discover_under_umockdev("ftdi.umockdev") if c["kind"] == "serial"]
    assert [(p["vid"], p["pid"], p["role"], p["url"]) for p in ports] == [(0x0403, 0x6001, None, None)]


@pytest.mark.parametrize("serial", ["SHOE#7", "A&B=C", "SN 42%", "ÉCU-1"])
def test_a_discovered_url_opens_the_device_whose_serial_number_it_shows(serial):
    """The serial number is the device's own string: any character must survive the round
    trip through the URL discovery suggests, or the URL names another shoe (or none)."""
    from drivers.urls import parse_url
    backend = SimUsbBackend()
    backend.add_device(EchoSide(), vid=0x1209, pid=0xC4D0, serial=serial)
    [shoe] = discover(usb_backend=backend, serial_ports=False).devices
    assert shoe.serial_number == serial and shoe.url is not None and parse_url(shoe.url).serial_number == serial
