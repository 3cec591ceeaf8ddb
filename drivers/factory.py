"""From a URL to a transport: one registry of schemes, so drivers never import simulators.

``serial`` and ``usb`` are registered here. The simulators package registers ``sim``::

    from drivers import register_scheme
    register_scheme("sim", lambda url, **options: SimTransport(url))

:func:`make_transport` builds an unopened transport; :func:`open_transport` also opens it.
Options (e.g. ``backend=`` for a pyusb backend) pass through to the scheme's factory.
"""
from __future__ import annotations

from typing import Any, Callable

from drivers.errors import BadURL
from drivers.transport import Transport, TransportListener
from drivers.urls import ACCEPTED_FORMS, DeviceURL, parse_url

TransportFactory = Callable[..., Transport]  # (url: DeviceURL, **options) -> Transport

_factories: dict[str, TransportFactory] = {}


def register_scheme(scheme: str, factory: TransportFactory) -> None:
    """Make ``scheme://`` URLs open through ``factory(url, **options)``. Re-registering replaces."""
    _factories[scheme.lower()] = factory


def registered_schemes() -> list[str]:
    return sorted(_factories)


def _serial(url: DeviceURL, **options: Any) -> Transport:
    from drivers.serial_port import SerialTransport

    return SerialTransport(url, **options)


def _usb(url: DeviceURL, **options: Any) -> Transport:
    from drivers.usb_bulk import UsbBulkTransport

    return UsbBulkTransport(url, **options)


register_scheme("serial", _serial)
register_scheme("usb", _usb)


def make_transport(url: str | DeviceURL, **options: Any) -> Transport:
    """An unopened transport for ``url``; :class:`BadURL` if the URL or its scheme is unknown."""
    parsed = url if isinstance(url, DeviceURL) else parse_url(url)
    factory = _factories.get(parsed.scheme)
    if factory is None:
        raise BadURL(parsed.text, f"no driver registered for scheme {parsed.scheme!r} "
                     f"(registered: {', '.join(registered_schemes())}; for sim:// import "
                     f"simulators first); accepted forms: {ACCEPTED_FORMS}")
    return factory(parsed, **options)


async def open_transport(url: str | DeviceURL, listener: TransportListener, **options: Any) -> Transport:
    """Make and open a transport on the running loop; raises a DriverError naming the device."""
    transport = make_transport(url, **options)
    await transport.open(listener)
    return transport
