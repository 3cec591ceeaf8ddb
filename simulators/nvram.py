"""A simulated device's non-volatile memory in a file (its cards, counters and numbered events),
written at each change through a rename, mode 0600: what a real shoe or shuffler still holds after
the table computer restarts. docs/simulators.md, "Memory across a restart"."""
from __future__ import annotations

import json
import os
from pathlib import Path

import structlog

from core.errors import CarddError
from drivers.aio import RateLimitedLog

from simulators.device import SimulatedDevice

_log = RateLimitedLog(structlog.get_logger(__name__))
#: the file's format; a file of another one is refused (NvramError), never half read
FORMAT = 1
#: the memory holds undealt cards in order: readable and writable by the daemon's user only
MODE = 0o600


class NvramError(CarddError):
    """A device's file cannot be read back: one line naming it, and the way on."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"{problem}: remove the file to start that device empty, as from the factory")


def save(device: SimulatedDevice, path: Path) -> None:
    """Write ``device``'s memory to ``path`` (a temporary file beside it, then renamed over it)."""
    data = {"format": FORMAT, "role": device.ROLE.name.lower(), "serial": device.serial, **device.nvram()}
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, MODE)
    with open(fd, "w") as out:
        os.fchmod(fd, MODE)  # a temporary file a killed process left keeps its mode through O_CREAT
        out.write(json.dumps(data, separators=(",", ":")))
    os.replace(temporary, path)


def restore(device: SimulatedDevice, path: Path) -> bool:
    """Put what ``path`` holds back into ``device`` (not started yet); False when there is no file.
    :class:`NvramError` naming the file when it is not one this device wrote."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as exc:
        raise NvramError(f"{path}: cannot be read back: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise NvramError(f"{path}: not a simulated device's memory (format {FORMAT})")
    if (data.get("role"), data.get("serial")) != (device.ROLE.name.lower(), device.serial):
        raise NvramError(f"{path}: another device's memory ({data.get('role')} {data.get('serial')})")
    try:
        device.restore_nvram(data)
    except ValueError as exc:  # the stack's or the events' own words, naming which
        raise NvramError(f"{path}: {exc}") from None
    except (KeyError, TypeError) as exc:
        raise NvramError(f"{path}: {type(exc).__name__}: {exc}") from None
    return True


def keep(device: SimulatedDevice, path: Path) -> bool:
    """Restore ``device`` from ``path`` (if there) and have it write there at each change from now on.
    A write that fails (a full disk) is logged, rate-limited, and the device goes on: real firmware
    whose memory fails still deals, and a card must not stop in the simulator's loop for it."""
    restored = restore(device, path)
    if restored:
        try:
            os.chmod(path, MODE)  # written readable by all before the memory was its owner's alone
        except OSError as exc:
            raise NvramError(f"{path}: cannot be made readable by its owner alone: {exc.strerror}") from None

    def changed() -> None:
        try:
            save(device, path)
        except OSError as exc:
            _log.warning("sim_memory_not_written", key=str(path), device=device.serial, path=str(path),
                         error=exc.strerror or str(exc))

    device.on_change = changed
    return restored
