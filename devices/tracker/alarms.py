"""The alarms that wait for a supervisor.

Every ALARM-severity event opens an alarm in the :class:`AlarmBook`; it stays open (and is
part of the table's persisted snapshot, so it survives a power cycle) until a supervisor
clears it by id. A held round's own alarms (``ROUND_HELD``) are the exception: the supervisor's
decision on that round (resume, re-deal, void) answers them, and the table closes them then
(:meth:`AlarmBook.settle`), journaled as cleared by that supervisor. Left open, one per hold,
they piled up for good on a table nobody cleared them on, and every STATE and snapshot carried
them all.

A refused device's alarm (``DEVICE_NOT_TRUSTED``) is not the supervisor's to clear: the device
is still refused while it is open, and only a technician's act on the device answers it (a key
enrolled, or the mended device tried again), which closes it (:data:`TECHNICIAN_ALARMS`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devices.events import Event, EventSink, Reason, Role
from devices.overrides import require_supervisor
from devices.errors import TableError
from devices.tracker.inputs import ClearAlarm, command_name


#: the alarms a supervisor's clear_alarm does not close: what answers each, in the API's words
#: (``{device}``: the role of the device the alarm is about)
TECHNICIAN_ALARMS: dict[str, str] = {
    Reason.DEVICE_NOT_TRUSTED: "it stands until a technician acts on the {device}: with enroll {device} "
                               "(the key it proves is its own) or retry_trust {device} (the device mended)",
}


@dataclass
class Alarm:
    id: int
    reason: str
    source: str
    message: str
    round: int | None = None  # the round a round's alarm is about (its event's data)
    #: the facts of the event that raised it (its ``data``): what code reads of an alarm, never its text
    data: dict[str, Any] = field(default_factory=dict)


class AlarmBook:
    """Open alarms by id, in the order they were raised."""

    def __init__(self) -> None:
        self.open: dict[int, Alarm] = {}
        self._next_id = 1

    def raise_from(self, event: Event) -> int:
        round_id = event.data.get("round")
        alarm = Alarm(self._next_id, str(event.reason), event.source, event.message,
                      round_id if type(round_id) is int and round_id >= 0 else None, event.data)
        self.open[alarm.id] = alarm
        self._next_id += 1
        return alarm.id

    def clear(self, sink: EventSink, alarm_id: int, who: str, role: Role) -> Alarm:
        if alarm_id not in self.open:
            raise TableError(f"no open alarm {alarm_id} (open alarms: {', '.join(map(str, sorted(self.open))) or 'none'})")
        require_supervisor(sink, "table", f"clear alarm {alarm_id}", who, role, command_name(ClearAlarm))
        alarm = self.open[alarm_id]
        answer = TECHNICIAN_ALARMS.get(alarm.reason)
        if answer is not None:
            device = str(alarm.data.get("role") or alarm.source)
            raise TableError(f"alarm {alarm_id} ({alarm.reason}) is not cleared by a supervisor: "
                             + answer.format(device=device))
        return self.open.pop(alarm_id)

    def of(self, reason: Reason) -> list[Alarm]:
        """The open alarms of ``reason``, oldest first."""
        return [a for a in self.open.values() if a.reason == reason]

    def settle(self, reason: Reason, round_id: int | None = None) -> list[Alarm]:
        """Close the open alarms of ``reason`` (of round ``round_id`` only, when given): what they were
        about is over (a held round decided, a shoe voided); the ones closed."""
        settled = [a for a in self.of(reason) if round_id is None or a.round == round_id]
        for alarm in settled:
            del self.open[alarm.id]
        return settled

    def reasons(self) -> list[str]:
        return [a.reason for a in self.open.values()]

    def snapshot(self) -> dict[str, Any]:
        # built by hand: dataclasses.asdict deep-copies field by field, and this runs at every snapshot
        return {"next_id": self._next_id, "open": [
            {"id": a.id, "reason": a.reason, "source": a.source, "message": a.message}
            | ({} if a.round is None else {"round": a.round}) | ({"data": a.data} if a.data else {})
            for a in self.open.values()]}

    def restore(self, snap: dict[str, Any]) -> None:
        self._next_id = snap["next_id"]
        self.open = {a["id"]: Alarm(**a) for a in snap["open"]}


def alarms_open(kind: str, alarms: list[Alarm]) -> str:
    """'foreign card alarm 3 is open', 'foreign card alarms 3, 4 are open'."""
    ids = ", ".join(str(a.id) for a in alarms)
    return f"{kind} alarm {ids} is open" if len(alarms) == 1 else f"{kind} alarms {ids} are open"
