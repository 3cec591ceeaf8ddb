"""From a URL to a transport: one registry of schemes, so drivers never import simulators
(:func:`register_scheme`, :func:`make_transport`, :func:`open_transport`).
docs/architecture.md, "URLs and schemes"."""
from __future__ import annotations

from typing import Any, Callable

from drivers.transport import Transport, TransportListener
from drivers.urls import BUILT_IN_SCHEMES, DeviceURL, add_scheme, bad_url, parse_url, remove_scheme

TransportFactory = Callable[..., Transport]  # (url: DeviceURL, **options) -> Transport

_factories: dict[str, TransportFactory] = {}


def register_scheme(scheme: str, factory: TransportFactory, *, form: str | None = None,
                    listed: bool = True) -> None:
    """Make ``scheme://NAME?key=value`` URLs parse and open through ``factory(url, **options)``.
    ``form`` is how error messages show the scheme (default ``scheme://NAME``); ``listed=False``
    leaves it out of them (an in-process scheme no config file can use). Re-registering replaces."""
    scheme = scheme.lower()
    if scheme not in BUILT_IN_SCHEMES:  # serial and usb keep their own parsing and form
        add_scheme(scheme, form, listed=listed)
    _factories[scheme] = factory


def unregister_scheme(scheme: str) -> None:
    """Undo :func:`register_scheme` (tests); its URLs are then an unknown scheme again."""
    scheme = scheme.lower()
    if scheme not in BUILT_IN_SCHEMES:
        remove_scheme(scheme)
        _factories.pop(scheme, None)


def registered_schemes() -> list[str]:
    return sorted(_factories)


def _serial(url: DeviceURL, **options: Any) -> Transport:
    from drivers.serial_port import SerialTransport

    return SerialTransport(url, **options)


def _usb(url: DeviceURL, **options: Any) -> Transport:
    from drivers.usb_bulk import UsbBulkTransport

    return UsbBulkTransport(url, **options)


def _mem(url: DeviceURL, **options: Any) -> Transport:
    from drivers.memory import MemoryTransport

    return MemoryTransport(url, **options)


register_scheme("serial", _serial)
register_scheme("usb", _usb)
register_scheme("mem", _mem, listed=False)


def make_transport(url: str | DeviceURL, **options: Any) -> Transport:
    """An unopened transport for ``url``; :class:`BadURL` if the URL or its scheme is unknown."""
    parsed = parse_url(url)
    factory = _factories.get(parsed.scheme)
    if factory is None:  # a DeviceURL parsed before its scheme was unregistered
        raise bad_url(parsed.text, f"unknown scheme {parsed.scheme!r}")
    return factory(parsed, **options)


async def open_transport(url: str | DeviceURL, listener: TransportListener, **options: Any) -> Transport:
    """Make and open a transport on the running loop; raises a DriverError naming the device."""
    transport = make_transport(url, **options)
    await transport.open(listener)
    return transport
