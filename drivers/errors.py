"""The errors drivers raise: each names the device and says what to do about it.

Every error is a :class:`DriverError`; the layers above catch that one type. ``device``
is the path or URL concerned, so a log line or an operator screen can show it as is.
"""
from __future__ import annotations

import errno
import os

from core.errors import CarddError


class DriverError(CarddError):
    """A device could not be used. ``device`` names it (path or URL)."""

    def __init__(self, device: str, message: str) -> None:
        super().__init__(f"{device}: {message}")
        self.device = device


class BadURL(DriverError, ValueError):
    """A device URL that cannot be parsed; the message lists the accepted forms."""


class DeviceNotFound(DriverError):
    """No such device (ENOENT, or no USB device with that VID:PID and serial)."""


class PermissionDenied(DriverError):
    """The device exists but this user may not open it (EACCES)."""


class DeviceBusy(DriverError):
    """Another process (or another transport) holds the device exclusively."""


class UsbUnavailable(DriverError):
    """pyusb found no USB library on this machine (libusb-1.0 is not installed)."""


class PortClosed(DriverError):
    """A write on a transport that is closed or lost."""


class LinkLost(DriverError):
    """The link went away while open (unplug, EIO, USB error); passed to connection_lost."""


PERMISSION_HINT = (
    "the service user must be in the 'cardd' group and the cardd udev rules must be "
    "installed (see docs/install.md)"
)

LIBUSB_HINT = (
    "libusb is not installed (pyusb found no USB backend): install the system package "
    "libusb-1.0-0 (sudo apt-get install libusb-1.0-0; see docs/install.md)"
)


def os_words(exc: BaseException) -> str:
    """What went wrong, in the operating system's standard words for the errno behind ``exc``
    (``Input/output error (EIO)``), never the driver library's own message; without an errno,
    only the kind of error the library raised."""
    code = getattr(exc, "errno", None)
    if isinstance(code, int) and code in errno.errorcode:
        return f"{os.strerror(code)} ({errno.errorcode[code]})"
    return f"no reason given ({type(exc).__name__})"
