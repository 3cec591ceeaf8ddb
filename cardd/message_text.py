"""A device's message as people read it, in one place for every view of it: ``cardctl trace``,
``monitor`` and capture's ``fields`` (JSON: :func:`describe`) and ``cardctl log``'s input records
(one line: :func:`message_text`). Fields by the protocol's names (docs/protocol.md), enums by name,
cards as ``2D``, a count per card keyed by the card, bytes in hex."""
from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

from firmware_bridge.messages import Message


def describe(msg: Message) -> dict[str, Any]:
    """A message as JSON-able fields, its type first; a message inside one (an Event's) described
    the same way."""
    return {"type": type(msg).__name__, **{name: plain(getattr(msg, name)) for name, _ in msg.FIELDS}}


def plain(value: Any) -> Any:
    """A field's value as JSON has it: a message as :func:`describe`, an enum by name, bytes in
    hex, a card (and anything else JSON has no type for) as its text."""
    if isinstance(value, Message):
        return describe(value)
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {str(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def message_text(msg: Message, source: str = "") -> str:
    """``Ident from the shoe-reader (role=SHOE model=...)``: the type, then each field."""
    return fields_line(f"{type(msg).__name__}{source}", ((name, getattr(msg, name)) for name, _ in msg.FIELDS))


def fields_line(head: str, fields: Iterable[tuple[str, Any]]) -> str:
    """``head (name=value name=value)``, each value as :func:`field_text`; ``head`` alone when
    there are none: a device's message and a journaled input record read alike."""
    text = " ".join(f"{name}={field_text(value)}" for name, value in fields)
    return head + (f" ({text})" if text else "")


def field_text(value: Any, limit: int = 60) -> str:
    """One field on one line, shortened to ``limit``: what :func:`plain` makes of it, a count per
    card as ``AC:6,2C:6``, a list comma-separated, a message inside one as :func:`message_text`."""
    text = message_text(value) if isinstance(value, Message) else _joined(plain(value))
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _joined(value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}:{_joined(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ",".join(_joined(v) for v in value)
    return str(value)
