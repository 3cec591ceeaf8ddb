"""The table's device connections, and the technician's requests to them.

Each configured device gets one :class:`~firmware_bridge.connection.DeviceConnection`, started
in the background (it retries forever with backoff: a missing device is never a reason to
exit; the tracker sees it offline) and wired to the tracker through the feed. The API names
devices as the configuration does: ``shoe`` and ``shuffler``.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from cardd.api.errors import CommandFailed
from cardd.config import CarddConfig
from core.errors import CarddError
from devices.tracker.feed import Feed
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.firmware import SignedImage, load_public_key, update_firmware
from firmware_bridge.messages import (ClearFault, Counters, CountersRequest, FaultCleared, FaultCode, SelfTest,
                                      SelfTestResult, StartShuffle)
from firmware_bridge.session import SessionConfig

#: configuration name -> the tracker's device model name
MODEL_NAMES = {"shoe": "shoe-reader", "shuffler": "shuffler"}
#: a firmware image is read whole; larger files are refused before reading
MAX_IMAGE_BYTES = 16 << 20


class Devices:
    def __init__(self, config: CarddConfig, feed: Feed, release: str) -> None:
        self.config = config
        session = SessionConfig(host_name=f"cardd {release}"[:32])
        urls = {"shoe": config.devices.shoe, "shuffler": config.devices.shuffler}
        self.connections: dict[str, DeviceConnection] = {}
        for name, url in urls.items():
            if url is not None:
                on_message, on_event = feed.callbacks(MODEL_NAMES[name])
                self.connections[name] = DeviceConnection(url, on_message, on_event, session)

    async def start(self) -> None:
        for connection in self.connections.values():
            await connection.start()

    async def close(self) -> None:
        for connection in self.connections.values():
            await connection.close()

    def links(self) -> dict[str, bool]:
        """Model name -> whether its session is up now."""
        return {MODEL_NAMES[name]: c.connected for name, c in self.connections.items()}

    def connected(self, name: str) -> DeviceConnection:
        """The connection to ``name``; CommandFailed naming the device when it is unknown or offline."""
        connection = self.connections.get(name)
        if connection is None:
            raise CommandFailed(f"no device {name!r} at this table (devices: {', '.join(self.connections)})",
                                code="bad-args")
        if not connection.connected:
            raise CommandFailed(f"device {name} ({connection.url}) is offline", code="device-offline")
        return connection


# ---- technician commands ---------------------------------------------------------------------

class _Args(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    pass


class DeviceArgs(_Args, frozen=True):
    device: str


class ClearFaultArgs(_Args, frozen=True):
    device: str
    code: str


class FirmwareArgs(_Args, frozen=True):
    device: str
    image: str  # a path on the table computer, readable by the daemon
    #: an older version goes only when the technician says so (journaled as who allowed it)
    allow_downgrade: bool = False


def parse_args(name: str, args: dict[str, Any], kind: type[_Args]) -> Any:
    try:
        return msgspec.convert(args, kind)
    except msgspec.ValidationError as exc:
        raise CommandFailed(f"{name}: {exc}".replace("`$.", "`"), code="bad-args") from None


async def run_device_command(name: str, args: dict[str, Any], devices: Devices, decks: int,
                             public_key: Path | None, shuffle_started: Callable[[], None],
                             who: str) -> dict[str, Any]:
    """Do technician command ``name`` for ``who``; returns what the device said (for the journal record)."""
    try:
        if name == "selftest":
            conn = devices.connected(parse_args(name, args, DeviceArgs).device)
            result = await conn.request(SelfTest(), SelfTestResult, timeout=5.0)
            return {"passed": result.passed, "detail": result.detail}
        if name == "counters":
            conn = devices.connected(parse_args(name, args, DeviceArgs).device)
            counters = await conn.request(CountersRequest(), Counters)
            return {f: getattr(counters, f) for f in ("shuffles", "cards", "jams", "faults")}
        if name == "clear_fault":
            parsed = parse_args(name, args, ClearFaultArgs)
            try:
                code = FaultCode[parsed.code.upper()]
            except KeyError:
                raise CommandFailed(f"clear_fault: code {parsed.code!r} is not a fault "
                                    f"({', '.join(c.name.lower() for c in FaultCode)})", code="bad-args") from None
            conn = devices.connected(parsed.device)
            cleared = await conn.send_expecting(ClearFault(code), FaultCleared, timeout=5.0)  # an event in 1.1
            return {"cleared": cleared.code.name.lower()}
        if name == "start_shuffle":
            parse_args(name, args, _Args)
            conn = devices.connected("shuffler")
            shuffle_started()
            await conn.send(StartShuffle(decks))
            return {"decks": decks}
        if name == "firmware_update":
            return await _firmware(parse_args(name, args, FirmwareArgs), devices, public_key, who)
    except CommandFailed:
        raise
    except CarddError as exc:  # the device refused, timed out or went away: one line, named
        raise CommandFailed(f"{name}: {exc}") from None
    raise CommandFailed(f"{name} is not a device command", code="unknown-command")


async def _firmware(args: FirmwareArgs, devices: Devices, public_key: Path | None, who: str) -> dict[str, Any]:
    if public_key is None:
        raise CommandFailed("firmware_update: no [firmware] public_key is configured: firmware updates are refused")
    conn = devices.connected(args.device)
    try:
        key = load_public_key(public_key.read_bytes())
        path = Path(args.image)
        if not path.is_absolute():
            raise CommandFailed(f"firmware_update: image {args.image!r}: give an absolute path", code="bad-args")
        if path.stat().st_size > MAX_IMAGE_BYTES:
            raise CommandFailed(f"firmware_update: {path} is larger than {MAX_IMAGE_BYTES} bytes")
        signed = SignedImage.from_bytes(path.read_bytes())
    except OSError as exc:
        raise CommandFailed(f"firmware_update: {exc.filename}: {exc.strerror}") from None
    done = await update_firmware(conn, signed, key,  # type: ignore[arg-type]
                                 allow_downgrade_by=who if args.allow_downgrade else None)
    return {"model": done.model, "from_version": done.from_version, "to_version": done.to_version,
            "downgrade_allowed_by": done.downgrade_allowed_by, "ok": done.result.ok, "detail": done.result.detail}

