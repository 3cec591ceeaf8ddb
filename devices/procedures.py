"""Who may override, and the alarms that wait for them.

Overrides (resume a held round, declare a re-deal, accept a device back, void a shoe, clear
an alarm) need :attr:`Role.SUPERVISOR`. :func:`require_supervisor` journals every attempt:
OVERRIDE with who made it, or OVERRIDE_REFUSED and :class:`OverrideRefused`.

Every ALARM-severity event opens an alarm in the :class:`AlarmBook`; it stays open (and is
part of the table's persisted snapshot, so it survives a power cycle) until a supervisor
clears it by id.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, NoReturn

from core.errors import CarddError
from devices.events import Event, EventSink, Reason, Role, Severity


class TableError(CarddError, RuntimeError):
    """An input the table cannot take now; the text says what and why."""


class OverrideRefused(TableError, PermissionError):
    """An override asked for without the supervisor role, or while its condition is unmet."""


def require_supervisor(sink: EventSink, source: str, what: str, who: str, role: Role) -> None:
    """Journal the override attempt; raise :class:`OverrideRefused` unless ``role`` is supervisor."""
    refuse_unless_supervisor(sink, source, what, who, role)
    sink(Event(Reason.OVERRIDE, source, f"{what} by supervisor {who}", Severity.WARNING,
               {"override": what, "role": str(role)}, who))


def refuse_unless_supervisor(sink: EventSink, source: str, what: str, who: str, role: Role) -> None:
    """The role half of :func:`require_supervisor`, for an override that checks more before it is granted."""
    if role is not Role.SUPERVISOR:
        refuse_override(sink, source, what, who, f"{who} is {role}; supervisor only", role)


def refuse_override(sink: EventSink, source: str, what: str, who: str, why: str, role: Role | None = None) -> NoReturn:
    """Journal OVERRIDE_REFUSED with ``why`` and raise :class:`OverrideRefused`."""
    sink(Event(Reason.OVERRIDE_REFUSED, source, f"{what} refused: {why}", Severity.WARNING,
               {"override": what, "why": why, "role": str(role) if role else None}, who))
    raise OverrideRefused(f"{what} refused: {why}")


@dataclass
class Alarm:
    id: int
    reason: str
    source: str
    message: str


class AlarmBook:
    """Open alarms by id, in the order they were raised."""

    def __init__(self) -> None:
        self.open: dict[int, Alarm] = {}
        self._next_id = 1

    def raise_from(self, event: Event) -> int:
        alarm = Alarm(self._next_id, str(event.reason), event.source, event.message)
        self.open[alarm.id] = alarm
        self._next_id += 1
        return alarm.id

    def clear(self, sink: EventSink, alarm_id: int, who: str, role: Role) -> Alarm:
        if alarm_id not in self.open:
            raise TableError(f"no open alarm {alarm_id} (open: {sorted(self.open) or 'none'})")
        require_supervisor(sink, "table", f"clear alarm {alarm_id}", who, role)
        return self.open.pop(alarm_id)

    def reasons(self) -> list[str]:
        return [a.reason for a in self.open.values()]

    def snapshot(self) -> dict[str, Any]:
        return {"next_id": self._next_id, "open": [asdict(a) for a in self.open.values()]}

    def restore(self, snap: dict[str, Any]) -> None:
        self._next_id = snap["next_id"]
        self.open = {a["id"]: Alarm(**a) for a in snap["open"]}
