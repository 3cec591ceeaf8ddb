"""Event marks: per device and unit, the highest protocol 1.1 event index journaled, what the
daemon confirms to the devices and answers at each handshake (docs/protocol.md §3.2), and their
form in the journal's snapshot."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from devices.tracker.snapshot import SnapshotError
from firmware_bridge.messages import Ident

#: the key of the marks in the daemon's snapshot: {device: [{"unit": [role, model, serial], "index": n}, ...]}
#: (a journal of an older release holds one mark per device, {device: {"unit": ..., "index": n}})
EVENT_MARKS = "event_marks"
#: the marks kept per device: those of the units most recently journaled. A unit forgotten is told
#: 0 again: it resends only what no host confirmed, and says the confirmed ones are gone, which the
#: daemon cannot tell from events journaled nowhere: an EVENTS_LOST alarm (cardd.daemon.devices;
#: docs/protocol.md §3.2)
MARKS_PER_DEVICE = 16

#: a device unit as protocol 1.1 numbers its events: (role, model, serial) of its IDENT
Unit = tuple[str, str, str]
#: device -> unit (None: not known, an older journal) -> the highest event index journaled for it
EventMarks = dict[str, dict[Unit | None, int]]


def unit_of(ident: Ident | None) -> Unit | None:
    if ident is None:
        return None
    last, unit = _last_unit
    if ident is not last:  # asked for every card read: the IDENT object changes only at a handshake
        unit = (ident.role.name.lower(), ident.model, ident.serial)
        _last_unit[:] = [ident, unit]
    return unit


#: the last IDENT unit_of was asked about, and its unit
_last_unit: list[Any] = [None, None]


def merge_marks(into: EventMarks, moved: Mapping[str, Mapping[Unit | None, int]]) -> EventMarks:
    """``into`` moved on by ``moved`` (each unit's mark only goes up); the unit moved last comes
    last, and a device keeps the :data:`MARKS_PER_DEVICE` units moved most recently."""
    for device, units in moved.items():
        marks = into.setdefault(device, {})
        for unit, index in units.items():
            marks[unit] = max(marks.pop(unit, 0), index)
        for unit in list(marks)[:-MARKS_PER_DEVICE]:
            del marks[unit]
    return into


def marks_to_json(marks: EventMarks) -> dict[str, list[dict[str, Any]]]:
    return {device: [{"unit": None if unit is None else list(unit), "index": index} for unit, index in units.items()]
            for device, units in marks.items()}


def marks_from_json(data: Mapping[str, Any]) -> EventMarks:
    """The :data:`EVENT_MARKS` of a snapshot, of this release or the one-mark-per-device form before it."""
    marks: EventMarks = {}
    try:
        for device, stored in data.items():
            units = marks[device] = {}
            for mark in stored if isinstance(stored, list) else [stored]:
                unit = mark.get("unit")
                units[None if unit is None else (str(unit[0]), str(unit[1]), str(unit[2]))] = int(mark["index"])
    except (AttributeError, KeyError, IndexError, TypeError, ValueError):
        raise SnapshotError(f"snapshot: $.{EVENT_MARKS} is not a list of {{unit, index}} per device") from None
    return marks
