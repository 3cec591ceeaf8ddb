"""What the floor knows of each table between messages, and the floor alarms that follow from it.

:class:`TableWatch` keeps, per table, what its last status and state said and when the floor
received them; :func:`conditions` says which of the floor's condition alarms hold for it at a
moment (docs/floor-service.md "Floor alarms"). Each is a condition that clears by itself when it
does not hold; the service (cardd/floor/service.py) raises and clears them in the archive.
Times are the floor's own (the receipt of each message), never a table's clock, but for a table
alarm's ``since``, which is the table's and is read through the table's measured clock offset.
"""
from __future__ import annotations

import datetime as dt
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from cardd.floor.config import AlarmsConfig
from cardd.floor.contract import State, Status

#: floor alarm kinds (the archive keeps them; the API shows them)
TABLE_OFFLINE = "table_offline"
TABLE_ALARM_OPEN = "table_alarm_open"
BACKLOG_OLD = "backlog_old"
CLOCK_OFFSET = "clock_offset"
CHAIN = "chain"
BAD_MESSAGE = "bad_message"
#: the kinds :func:`conditions` decides (raised while they hold, cleared when they do not)
CONDITION_KINDS = (TABLE_OFFLINE, TABLE_ALARM_OPEN, BACKLOG_OLD, CLOCK_OFFSET)
#: the states whose clock offsets count (a table refreshes its state at least every 60 s)
OFFSET_WINDOW_S = 150.0


class AlarmKey(NamedTuple):
    kind: str
    key: str


def parse_time(text: str) -> dt.datetime:
    """A contract time (``2026-12-02T03:44:00.672Z``) as an aware datetime."""
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def show_time(moment: dt.datetime) -> str:
    utc = moment.astimezone(dt.timezone.utc)
    return utc.strftime("%Y-%m-%d %H:%M:%S UTC")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.0f} s"


@dataclass(slots=True)
class TableWatch:
    """One table as the floor has seen it."""
    site: str
    table: str
    online: bool | None = None
    session: int | None = None
    #: when the floor learnt the table went offline (its Will), or came online
    offline_since: dt.datetime | None = None
    online_since: dt.datetime | None = None
    state: State | None = None
    state_at: dt.datetime | None = None
    #: the table's clock minus the floor's (seconds): the largest of its states' in the last
    #: OFFSET_WINDOW_S, since a message the broker held back (the floor away, a burst after a
    #: reconnection) only makes a table look behind
    clock_offset_s: float | None = None
    offsets: deque[tuple[dt.datetime, float]] = field(default_factory=deque)
    #: since when the table's states have said its backlog is empty (None: it is not)
    drained_since: dt.datetime | None = None
    #: a table alarm's reason -> when the floor first saw it open (for one whose ``since`` is null)
    first_seen: dict[str, dt.datetime] = field(default_factory=dict)
    #: the highest seq archived; whether the archive may hold gaps (None: not known yet), and
    #: whether they may have changed since the floor last read them
    head: int = 0
    gaps_maybe: bool | None = None
    gaps_changed: bool = True

    def note_stored(self, seqs: list[int]) -> None:
        """Records newly archived: a seq past the head + 1 opens a gap, one below the head fills one."""
        if not seqs:
            return
        if min(seqs) != self.head + 1 or max(seqs) - min(seqs) + 1 != len(seqs):
            self.gaps_maybe, self.gaps_changed = True, True
        self.head = max(self.head, max(seqs))

    def note_status(self, status: Status, at: dt.datetime) -> None:
        if status.online and self.online is not True:
            self.online_since, self.offline_since = at, None
        elif not status.online and self.online is not False:
            self.offline_since = at
            self.drained_since = None  # nothing it says now is current: its return is waited for
        self.online, self.session = status.online, status.session

    def note_state(self, state: State, at: dt.datetime) -> None:
        self.state, self.state_at = state, at
        self.offsets.append((at, (parse_time(state.time) - at).total_seconds()))
        while self.offsets and (at - self.offsets[0][0]).total_seconds() > OFFSET_WINDOW_S:
            self.offsets.popleft()
        self.clock_offset_s = max(offset for _, offset in self.offsets)
        if state.export.backlog == 0:
            if self.drained_since is None:
                self.drained_since = at
        else:
            self.drained_since = None
        open_now = {alarm.reason for alarm in state.alarms}
        self.first_seen = {reason: self.first_seen.get(reason, at) for reason in open_now}


def conditions(watch: TableWatch, now: dt.datetime, limits: AlarmsConfig) -> dict[AlarmKey, str]:
    """The condition alarms that hold for ``watch`` at ``now``: (kind, key) -> detail (one sentence)."""
    held: dict[AlarmKey, str] = {}
    if watch.online is False and watch.offline_since is not None:
        away = (now - watch.offline_since).total_seconds()
        if away > limits.offline_s:
            held[AlarmKey(TABLE_OFFLINE, "status")] = \
                f"the table has been offline since {show_time(watch.offline_since)} ({_minutes(away)})"
    state, state_at = watch.state, watch.state_at
    if watch.online is False or state is None or state_at is None:
        return held  # what its last state said is not current: only the offline alarm speaks for it
    offset = watch.clock_offset_s or 0.0
    for alarm in state.alarms:
        since = parse_time(alarm.since) - dt.timedelta(seconds=offset) if alarm.since is not None else \
            watch.first_seen.get(alarm.reason, state_at)
        open_s = (now - since).total_seconds()
        if open_s > limits.table_alarm_min * 60:
            held[AlarmKey(TABLE_ALARM_OPEN, alarm.reason)] = \
                f"the table's alarm {alarm.reason} has been open for {_minutes(open_s)}"
    export = state.export
    if export.backlog > 0 and export.oldest_undelivered_s is not None:
        age = export.oldest_undelivered_s + (now - state_at).total_seconds()
        # a table back from an outage has backlog_min to send what it kept before its backlog's age counts
        if watch.online_since is not None:
            age = min(age, (now - watch.online_since).total_seconds())
        if age > limits.backlog_min * 60:
            held[AlarmKey(BACKLOG_OLD, "export")] = \
                f"{export.backlog} records wait at the table, the oldest for {_minutes(age)}"
    if watch.clock_offset_s is not None and abs(watch.clock_offset_s) > limits.clock_offset_s:
        ahead = "ahead of" if watch.clock_offset_s > 0 else "behind"
        held[AlarmKey(CLOCK_OFFSET, "clock")] = \
            f"the table's clock is {abs(watch.clock_offset_s):.1f} s {ahead} the floor's"
    return held


def decided(watch: TableWatch) -> tuple[str, ...]:
    """The condition kinds :func:`conditions` speaks for now: only ``table_offline`` while the
    table is offline or has sent no state (the others are neither raised nor cleared then)."""
    if watch.online is False or watch.state is None:
        return (TABLE_OFFLINE,)
    return CONDITION_KINDS


def gap_due(watch: TableWatch, now: dt.datetime, limits: AlarmsConfig) -> bool:
    """Whether a gap in the table's records is now an alarm: its states have said its backlog is
    empty for longer than ``gap_s`` (what it kept has been sent, so a gap left will not fill)."""
    return watch.online is not False and watch.drained_since is not None and \
        (now - watch.drained_since).total_seconds() > limits.gap_s
