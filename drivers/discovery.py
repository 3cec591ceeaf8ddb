"""Which devices are plugged in: serial ports and USB devices, the known ones flagged.

Serial ports come from ``serial.tools.list_ports`` (path, VID:PID, serial number); USB
devices from pyusb (VID:PID, bus/address, and the serial number of known devices only:
reading strings means opening the device, which we do not do to strangers). A known
device gets its role and a ready URL; everything else is listed so a technician sees it.

``python -m drivers.discovery`` prints ``{"devices": [...], "not_listed": {...}}`` as JSON:
``not_listed`` says which kind of device could not be listed and why (``"usb"`` when libusb
is not installed), so an empty list never hides a machine that cannot see its shoe.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Callable
from urllib.parse import quote

import serial.tools.list_ports
import structlog
import usb.core

from drivers.errors import LIBUSB_HINT
from drivers.known_devices import Link, lookup
from drivers.usb_bulk import read_serial_number

log = structlog.get_logger(__name__)

STABLE_DIR = "/dev/cardd"  # where udev/99-cardd.rules puts stable names


@dataclass(frozen=True, slots=True)
class Candidate:
    kind: str  # "serial" or "usb"
    vid: int | None
    pid: int | None
    serial_number: str | None
    description: str
    role: str | None = None  # "shoe"/"shuffler" when the VID:PID is in the known table
    url: str | None = None  # how cardd would open it (known devices only)
    path: str | None = None  # serial: device node
    bus: int | None = None  # usb
    address: int | None = None

    @property
    def known(self) -> bool:
        return self.role is not None


def _serial_candidates() -> list[Candidate]:
    found = []
    for port in serial.tools.list_ports.comports():
        known = lookup(port.vid, port.pid)
        url = None
        if known is not None and known.link is Link.USB_SERIAL:
            stable = os.path.join(STABLE_DIR, f"{known.role}-{port.serial_number}")
            url = f"serial://{stable if os.path.exists(stable) else port.device}"
        found.append(Candidate("serial", port.vid, port.pid, port.serial_number,
                               port.description, known.role if known else None, url,
                               path=port.device))
    return found


@dataclass(frozen=True, slots=True)
class Discovery:
    devices: list[Candidate]
    #: kind ("usb") -> why devices of that kind could not be listed at all
    not_listed: dict[str, str] = field(default_factory=dict)


class _NotListed(Exception):
    """Devices of one kind cannot be listed on this machine; the message says why."""


def _usb_candidates(backend: Any) -> list[Candidate]:
    try:
        devices = list(usb.core.find(find_all=True, backend=backend))
    except usb.core.NoBackendError:
        raise _NotListed(f"USB devices could not be listed: {LIBUSB_HINT}") from None
    found = []
    for dev in devices:
        known = lookup(dev.idVendor, dev.idProduct)
        serial_number = url = None
        if known is not None:
            try:
                serial_number = read_serial_number(dev)
            except usb.core.USBError as exc:
                log.warning("usb_serial_unreadable", bus=dev.bus, address=dev.address, error=str(exc))
            if known.link is Link.USB_BULK:
                # the device's own string: quoted, so '&', '#' or '%' in it cannot name another device
                query = f"?serial={quote(serial_number, safe='')}" if serial_number else ""
                url = f"usb://{known.vid_pid}{query}"
        found.append(Candidate("usb", dev.idVendor, dev.idProduct, serial_number,
                               known.description if known else "unknown USB device",
                               known.role if known else None, url,
                               bus=dev.bus, address=dev.address))
    return found


def discover(*, usb_backend: Any = None, serial_ports: bool = True) -> Discovery:
    """All candidate devices, known ones (with a role) first, and the kinds that could not be listed.
    ``serial_ports=False`` leaves out the machine's serial ports (tests list USB devices alone)."""
    listers: dict[str, Callable[[], list[Candidate]]] = {"serial": _serial_candidates} if serial_ports else {}
    listers["usb"] = lambda: _usb_candidates(usb_backend)
    found: list[Candidate] = []
    not_listed: dict[str, str] = {}
    for kind, lister in listers.items():
        try:
            found += lister()
        except _NotListed as exc:
            not_listed[kind] = str(exc)
            log.warning("discovery_incomplete", kind=kind, reason=str(exc))
    found.sort(key=lambda c: (not c.known, c.kind, c.path or "", c.bus or 0, c.address or 0))
    return Discovery(found, not_listed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m drivers.discovery", description=__doc__)
    parser.add_argument("--known", action="store_true", help="list only cardd's own devices")
    args = parser.parse_args(argv)
    # stdout carries the JSON; log lines go to stderr
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    result = discover()
    found = [c for c in result.devices if c.known or not args.known]
    json.dump({"devices": [asdict(c) for c in found], "not_listed": result.not_listed}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
