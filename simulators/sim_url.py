"""``sim://shuffler`` and ``sim://shoe``: a simulated device in this process, behind a real pty,
registered with the drivers' scheme registry when :mod:`simulators` is imported. The first open of
a URL starts the device, later opens reach it, :func:`stop_all` ends them; the query parameters:
docs/simulators.md, "In-process: URLs, endpoints and the rig"."""
from __future__ import annotations

import math
import threading
from typing import Any, Callable

from drivers.errors import BadURL, PortClosed
from drivers.factory import register_scheme
from drivers.serial_port import SerialTransport
from drivers.transport import Transport, TransportListener
from drivers.urls import DeviceURL

from simulators.device import SimulatedDevice
from simulators.faults import Faults, FaultSpecError
from simulators.protocol2 import Protocol2
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler

def _text(raw: str, key: str, where: str) -> str:
    return raw


def _seconds(raw: str, key: str, where: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise BadURL(where, f"{key}={raw}: expected a number of seconds, 0 or more")
    return value


_OPTIONS: dict[str, dict[str, Callable[[str, str, str], Any]]] = {
    "shuffler": {"serial": _text, "shuffle_time_s": _seconds, "heartbeat_s": _seconds},
    "shoe": {"serial": _text, "pace_s": _seconds, "heartbeat_s": _seconds},
}
#: what the endpoint takes, not the device: the protocol it speaks and, for 2.0, its enrolled host's key
_ENDPOINT_OPTIONS = ("protocol", "host_key")
_DEVICES: dict[str, type[SimulatedDevice]] = {"shuffler": SimulatedShuffler, "shoe": SimulatedShoe}

_lock = threading.Lock()
_running: dict[str, PtyEndpoint] = {}


def make_device(name: str, params: dict[str, str], where: str) -> SimulatedDevice:
    """A simulated device from a name and text options (the URL's query or the CLI's)."""
    if name not in _DEVICES:
        raise BadURL(where, f"no simulated device {name!r}; simulated devices: {', '.join(_DEVICES)}")
    allowed = _OPTIONS[name]
    kwargs: dict[str, Any] = {}
    for key, raw in params.items():
        if key in _ENDPOINT_OPTIONS:
            continue  # protocol2_for's
        if key == "faults":
            try:
                kwargs["faults"] = Faults.parse(raw)
            except FaultSpecError as exc:
                raise BadURL(where, str(exc)) from None
        elif key in allowed:
            kwargs[key] = allowed[key](raw, key, where)
        else:
            raise BadURL(where, f"unknown parameter {key!r} for sim://{name} "
                         f"(allowed: faults, {', '.join((*allowed, *_ENDPOINT_OPTIONS))})")
    try:
        return _DEVICES[name](**kwargs)
    except ValueError as exc:  # a switch this device does not honour, a serial IDENT cannot carry
        raise BadURL(where, str(exc)) from None


def protocol2_for(params: dict[str, str], where: str) -> Protocol2 | None:
    """``protocol=2.0`` (and ``host_key=HEX``, the enrolled host's Ed25519 public key): the endpoint
    speaks 2.0; ``protocol=1.1`` or none: 1.1."""
    protocol = params.get("protocol", "1.1")
    if protocol not in ("1.1", "2.0"):
        raise BadURL(where, f"protocol={protocol}: expected 1.1 or 2.0")
    host_key = params.get("host_key")
    if protocol == "1.1":
        if host_key is not None:
            raise BadURL(where, "host_key is the enrolled host of a protocol 2.0 device: give protocol=2.0 too")
        return None
    if host_key is None:
        return Protocol2()
    try:
        raw = bytes.fromhex(host_key)
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise BadURL(where, f"host_key={host_key[:16]}...: expected 64 hex digits (an Ed25519 public key)")
    return Protocol2(enrolled_host_key=raw)


def endpoint_for(url: DeviceURL) -> PtyEndpoint:
    """The running simulator behind ``url``, started on first use."""
    with _lock:
        endpoint = _running.get(url.text)
        if endpoint is None:
            endpoint = PtyEndpoint(make_device(url.name or "", url.params, url.text),
                                   protocol2=protocol2_for(url.params, url.text)).start()
            _running[url.text] = endpoint
        return endpoint


def running() -> dict[str, PtyEndpoint]:
    """The simulators started through sim:// URLs, by URL (for tests, the demo, the bench)."""
    with _lock:
        return dict(_running)


def stop_all() -> None:
    """Stop every simulator started through a sim:// URL."""
    with _lock:
        endpoints = list(_running.values())
        _running.clear()
    for endpoint in endpoints:
        endpoint.stop()


class SimTransport(Transport):
    """The real serial transport on an in-process simulator's pty."""

    def __init__(self, url: DeviceURL) -> None:
        self.url = url.text
        self._url = url
        make_device(url.name or "", url.params, url.text)  # a bad URL fails here, before open
        protocol2_for(url.params, url.text)
        self.endpoint: PtyEndpoint | None = None
        self._serial: SerialTransport | None = None

    async def open(self, listener: TransportListener) -> None:
        self.endpoint = endpoint_for(self._url)
        self._serial = SerialTransport(self.endpoint.url)
        await self._serial.open(listener)

    def write(self, data: bytes) -> None:
        if self._serial is None:
            raise PortClosed(self.url, "not open")
        self._serial.write(data)

    def close(self) -> None:
        if self._serial is not None:
            self._serial.close()

    @property
    def is_open(self) -> bool:
        return self._serial is not None and self._serial.is_open


def register() -> None:
    register_scheme("sim", lambda url, **options: SimTransport(url), form=f"sim://{'|'.join(_DEVICES)}")
