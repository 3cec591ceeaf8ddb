"""The root of every error cardd raises, and the one way an error shows bytes.

Catch :class:`CarddError` to catch anything cardd refused or could not do: a driver that
cannot open a device, a protocol frame or message that is not valid, a rules file that
cannot be used, an input the game or the deal tracker refuses. Each subclass's message
names what and where.
"""
from __future__ import annotations

#: how many offending bytes an error message shows before "..."
HEX_SHOWN = 48


class CarddError(Exception):
    """Anything cardd refused or could not do; the text says what, where and why."""


def hex_preview(data: bytes, limit: int = HEX_SHOWN) -> str:
    """``data`` as spaced hex, cut after ``limit`` bytes with a note of the full length."""
    shown = bytes(data[:limit]).hex(" ")
    if len(data) > limit:
        return f"{shown} ... ({len(data)} bytes)"
    return shown or "(empty)"
