"""Which unit a device is: a swapped device must be reported as such, never passed off as a
reboot of the one before (the session and the managed device both ask)."""
from __future__ import annotations

from firmware_bridge.messages import Ident


def replacement(previous: Ident, ident: Ident) -> str | None:
    """What changed when ``ident`` names another unit than ``previous`` (None: the same one)."""
    def unit(i: Ident) -> tuple:
        return (i.role, i.model, i.serial)

    if unit(previous) == unit(ident):
        return None
    return (f"{previous.role.name.lower()} {previous.model} {previous.serial} -> "
            f"{ident.role.name.lower()} {ident.model} {ident.serial}")
