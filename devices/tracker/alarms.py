"""The alarms that wait for a supervisor.

Every ALARM-severity event opens an alarm in the :class:`AlarmBook`; it stays open (and is
part of the table's persisted snapshot, so it survives a power cycle) until a supervisor
clears it by id.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devices.events import Event, EventSink, Role
from devices.overrides import TableError, require_supervisor


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
        # built by hand: dataclasses.asdict deep-copies field by field, and this runs at every snapshot
        return {"next_id": self._next_id, "open": [
            {"id": a.id, "reason": a.reason, "source": a.source, "message": a.message} for a in self.open.values()]}

    def restore(self, snap: dict[str, Any]) -> None:
        self._next_id = snap["next_id"]
        self.open = {a["id"]: Alarm(**a) for a in snap["open"]}
