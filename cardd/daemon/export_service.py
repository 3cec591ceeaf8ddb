"""The floor export in the daemon: the :class:`~cardd.export.exporter.Exporter` made from the
configuration's ``[export]``, told of every commit, given the table's summary for the state topic
each second, and watched: a backlog older than ``export.backlog_alarm_s`` is an EXPORT_BACKLOG
alarm, over (EXPORT_DRAINED) once the backlog reaches the broker. docs/floor.md has the rest."""
from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

import structlog

from cardd.api.protocol import ApiEvent
from cardd.config import ExportConfig
from cardd.daemon.state import table_state
from cardd.daemon.tracker_service import TableService
from cardd.export.exporter import Exporter, ExportStatus, TableFacts
from cardd.journal import Entry, Journal
from devices.events import Event, Reason, Severity

log = structlog.get_logger(__name__)

#: how often the table's summary goes to the export and the backlog is looked at
WATCH_EVERY_S = 1.0
#: a backlog alarm is over once the oldest waiting record is younger than this (records flow on)
DRAINED_BELOW_S = 10.0
#: the source the export's alarms name
EXPORT_SOURCE = "export"


class ExportService:
    def __init__(self, config: ExportConfig, service: TableService, journal: Journal, facts: TableFacts,
                 links: Any) -> None:
        self.config, self.service = config, service
        self.exporter = Exporter(config, journal, facts)
        self._links = links  # device name -> link up (Devices.links)
        self._rounds = _RoundCounts()
        self._raised_ns: dict[int, int] = {}  # open alarm id -> when the watch first saw it

    def start(self) -> None:
        self.exporter.start()

    def committed(self, last_seq: int) -> None:
        self.exporter.notify(last_seq)

    def published(self, event: ApiEvent) -> None:
        """Each record as the daemon publishes it: the rounds are counted from them."""
        self._rounds.published(event)

    def status_json(self) -> dict[str, Any]:
        """STATE's "export"."""
        return {"site": self.config.site, "table": self.config.table, **self.exporter.status().to_json_dict()}

    async def watch(self) -> None:
        while True:
            try:
                self._offer_state()
                self._watch_backlog(self.exporter.status())
            except Exception as exc:  # the export's watch must never stop the daemon
                log.exception("export_watch_failed", error=str(exc))
            await asyncio.sleep(WATCH_EVERY_S)

    async def stop(self) -> None:
        await asyncio.to_thread(self.exporter.stop)

    def _offer_state(self) -> None:
        table = self.service.table
        state = table_state(table, self._links(), self.service.journal.last_seq)
        now = time.time_ns()
        open_ids = {alarm["id"] for alarm in state["alarms"]}
        for alarm_id in open_ids - self._raised_ns.keys():
            self._raised_ns[alarm_id] = now  # first seen open now: within a second of its raise
        for alarm_id in self._raised_ns.keys() - open_ids:
            del self._raised_ns[alarm_id]
        self.exporter.offer_state(floor_part(state, self._rounds.counts(), dict(self._raised_ns)))

    def _watch_backlog(self, status: ExportStatus) -> None:
        alarms = self.service.table.alarms
        open_now = alarms.of(Reason.EXPORT_BACKLOG)
        age = status.oldest_undelivered_s
        if not open_now and age is not None and age > self.config.backlog_alarm_s:
            why = status.problem or "the broker has not acknowledged them"
            event = Event(Reason.EXPORT_BACKLOG, EXPORT_SOURCE,
                          f"{status.backlog} journal record(s) wait for the floor's broker, the oldest for "
                          f"{age:.0f} s (alarm after {self.config.backlog_alarm_s:g} s): {why}; they are kept "
                          "and sent when a broker takes them", Severity.ALARM,
                          {"backlog": status.backlog, "oldest_s": age, "delivered_through": status.delivered_through})
            alarms.raise_from(event)
            self.service.add(Entry.from_event(event, ts_ns=time.time_ns()))
        elif open_now and (age is None or age <= min(DRAINED_BELOW_S, self.config.backlog_alarm_s / 2)):
            for alarm in alarms.settle(Reason.EXPORT_BACKLOG):
                self.service.add(Entry.from_event(Event(
                    Reason.EXPORT_DRAINED, EXPORT_SOURCE,
                    f"alarm {alarm.id} (EXPORT_BACKLOG) is over: the floor's broker has the journal through "
                    f"seq {status.delivered_through}", Severity.INFO,
                    {"alarm": alarm.id, "alarm_reason": alarm.reason, "delivered_through": status.delivered_through}),
                    ts_ns=time.time_ns()))


def floor_part(state: dict[str, Any], rounds: tuple[int, int], raised_ns: dict[int, int]) -> dict[str, Any]:
    """The table's side of the state topic, from STATE (cardd.export.payloads.state_payload makes it
    coarse and card-free)."""
    return {"devices": state["devices"], "shoe": state["shoe"], "rounds_this_shoe": rounds[0],
            "rounds_this_hour": rounds[1], "alarms": state["alarms"], "alarm_since_ns": raised_ns}


class _RoundCounts:
    """Rounds dealt this shoe and in the last hour, counted from the records as they are published
    (in seq order): a round's move to ``initial_deal`` is one dealt, a shoe's load starts the
    shoe's count. STATE, looked at once a second, may already be past a load and its first rounds."""

    def __init__(self) -> None:
        self._this_shoe = 0
        self._times: deque[float] = deque()

    def published(self, event: ApiEvent) -> None:
        if event.reason == Reason.SHOE_STATE and event.data.get("trigger") == "load":
            self._this_shoe = 0
        elif event.reason == Reason.ROUND_STATE and event.data.get("state") == "initial_deal":
            self._this_shoe += 1
            self._times.append(time.monotonic())

    def counts(self) -> tuple[int, int]:
        now = time.monotonic()
        while self._times and now - self._times[0] > 3600:
            self._times.popleft()
        return self._this_shoe, len(self._times)
