"""Drivers: bytes in, bytes out over serial, USB bulk or a registered scheme (sim://).

The layer above uses :func:`open_transport` / :func:`make_transport` with a device URL,
or :class:`ReconnectingPort` to keep a port open across unplugs.
"""
from drivers.errors import (BadURL, DeviceBusy, DeviceNotFound, DriverError, PortClosed,
                            LinkLost, PermissionDenied, UsbUnavailable)
from drivers.factory import (make_transport, open_transport, register_scheme, registered_schemes,
                             unregister_scheme)
from drivers.reconnect import Backoff, PortEvent, PortEventKind, ReconnectingPort
from drivers.transport import Transport, TransportListener
from drivers.urls import DeviceURL, SerialSettings, parse_url

__all__ = [
    "BadURL", "DeviceBusy", "DeviceNotFound", "DriverError", "PortClosed", "LinkLost",
    "PermissionDenied", "UsbUnavailable", "make_transport", "open_transport", "register_scheme",
    "registered_schemes", "unregister_scheme", "Transport", "TransportListener", "DeviceURL", "SerialSettings",
    "parse_url", "Backoff", "PortEvent", "PortEventKind", "ReconnectingPort",
]
