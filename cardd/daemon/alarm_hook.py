"""The table's alarms for people who are not looking at cardctl: each alarm raised and each
cleared goes to the daemon's log at a syslog priority (``journalctl -u cardd -p warning`` lists
the raised ones: err, crit for a journal that cannot be written; a clearing is info), and, with
``[notify] command`` in cardd.toml, runs that command (as NUT's NOTIFYCMD) with the facts in its
environment (docs/install.md, "Alarms to a pager").

The command never holds the daemon up: it runs as an asyncio subprocess (no shell, stdin and
output /dev/null, its own session so a timeout kills all it started), one at a time from a
bounded queue; at most ``max_per_minute`` start in any minute, and the alarms beyond are counted
and said once (the log, and the next run's ``CARDD_SUPPRESSED``). A failure (no such file, a
non-zero exit, a timeout) is logged once for each kind until the command succeeds again."""
from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

import structlog

from cardd.api.protocol import ApiEvent
from core.text import printable
from devices.events import Reason
from devices.tracker.alarms import Alarm

log = structlog.get_logger(__name__)

#: the longest value the command's environment gets (a message is one sentence; this keeps a
#: page to a page)
MAX_VALUE = 400
#: notices waiting for the command; beyond, they are counted as suppressed
QUEUE_SIZE = 64
#: the alarms whose log line is crit, not err: the table cannot keep its record
CRITICAL = frozenset({str(Reason.JOURNAL_WRITE_FAILED)})
#: the command's PATH: the daemon's own environment is not passed on
CHILD_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class AlarmNotice:
    """An alarm raised or cleared, as its journal record says it (no data of the record: its
    cards and hands stay in the journal)."""

    event: Literal["raised", "cleared"]
    alarm: str  # the alarm's reason code, e.g. DEVICE_FAULT
    alarm_id: int | None  # None: the alarm was cleared in the commit that raised it
    severity: str
    reason: str  # the record's: the alarm's own when raised, ALARM_CLEARED when cleared
    source: str
    message: str
    seq: int
    time: float

    def environment(self, table: str, suppressed: int) -> dict[str, str]:
        """The command's environment: each fact made printable (core.text.printable) and short."""
        facts = {"CARDD_EVENT": self.event, "CARDD_ALARM": self.alarm,
                 "CARDD_ALARM_ID": "" if self.alarm_id is None else str(self.alarm_id),
                 "CARDD_SEVERITY": self.severity, "CARDD_REASON": self.reason, "CARDD_SOURCE": self.source,
                 "CARDD_MESSAGE": self.message, "CARDD_SEQ": str(self.seq), "CARDD_TABLE": table,
                 "CARDD_TIME": datetime.fromtimestamp(self.time, timezone.utc).isoformat(timespec="seconds"),
                 "CARDD_SUPPRESSED": str(suppressed)}
        return {"PATH": CHILD_PATH, "LANG": "C.UTF-8", **{k: _value(v) for k, v in facts.items()}}


def _value(text: str) -> str:
    shown = printable(text)
    return shown if len(shown) <= MAX_VALUE else shown[:MAX_VALUE - 3] + "..."


class AlarmNotices:
    """Which committed records raise or clear a table alarm: every record of severity alarm
    raises one (the table, the devices' links and the journal raise an alarm with each such
    record), an ALARM_CLEARED record clears the one it names. A raised record's alarm id is the
    open alarm's with its reason, source and message not yet told."""

    def __init__(self, open_alarms: Callable[[], Mapping[int, Alarm]]) -> None:
        self._open = open_alarms
        self._told: set[int] = set()

    def notice(self, event: ApiEvent) -> AlarmNotice | None:
        data = event.data if isinstance(event.data, dict) else {}
        if event.reason == Reason.ALARM_CLEARED:
            named = data.get("alarm")
            alarm_id = named if isinstance(named, int) else None
            self._told.discard(alarm_id or 0)
            return AlarmNotice("cleared", str(data.get("alarm_reason", "")), alarm_id, event.severity, event.reason,
                               event.source, event.message, event.seq, event.time)
        if event.severity != "alarm":
            return None
        open_alarms = self._open()
        self._told &= open_alarms.keys()
        found = next((a.id for a in open_alarms.values() if a.id not in self._told and
                      (a.reason, a.source, a.message) == (event.reason, event.source, event.message)), None)
        if found is not None:
            self._told.add(found)
        return AlarmNotice("raised", event.reason, found, event.severity, event.reason, event.source,
                           event.message, event.seq, event.time)


def log_notice(notice: AlarmNotice) -> None:
    """The system log's line: err (crit for the journal's own) when raised, info when cleared."""
    facts = {"alarm": notice.alarm, "alarm_id": notice.alarm_id, "source": notice.source,
             "message": notice.message, "seq": notice.seq}
    if notice.event == "cleared":
        log.info("table_alarm_cleared", **facts)
    elif notice.alarm in CRITICAL:
        log.critical("table_alarm_raised", **facts)
    else:
        log.error("table_alarm_raised", **facts)


class AlarmHook:
    """Runs ``command`` for each notice, one at a time, never waited for by the daemon."""

    def __init__(self, command: Path, table: str, *, timeout_s: float, max_per_minute: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.command, self.table, self.timeout_s, self.max_per_minute = command, table, timeout_s, max_per_minute
        self._clock = clock
        self._queue: asyncio.Queue[AlarmNotice] = asyncio.Queue(QUEUE_SIZE)
        self._started: deque[float] = deque()  # when each run of the last minute was let start
        self._suppressed = 0  # alarms not told since the last run
        self._failing: set[str] = set()  # kinds of failure logged since the last success
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="alarm hook")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def notify(self, notice: AlarmNotice) -> None:
        """Queue ``notice`` for the command, or count it: the minute's runs are used up, or the queue is full."""
        now = self._clock()
        while self._started and now - self._started[0] >= 60.0:
            self._started.popleft()
        if len(self._started) >= self.max_per_minute or self._queue.full():
            if self._suppressed == 0:
                log.warning("alarm_hook_suppressing", command=str(self.command), max_per_minute=self.max_per_minute,
                            queued=self._queue.qsize())
            self._suppressed += 1
            return
        self._started.append(now)
        self._queue.put_nowait(notice)

    async def _run(self) -> None:
        while True:
            notice = await self._queue.get()
            suppressed, self._suppressed = self._suppressed, 0
            if suppressed:
                log.warning("alarm_hook_suppressed", command=str(self.command), count=suppressed)
            await self._once(notice, suppressed)

    async def _once(self, notice: AlarmNotice, suppressed: int) -> None:
        try:
            process = await asyncio.create_subprocess_exec(
                str(self.command), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL, env=notice.environment(self.table, suppressed),
                start_new_session=True, close_fds=True)
        except OSError as exc:
            self._failed("start", error=exc.strerror or str(exc))
            return
        try:
            code = await asyncio.wait_for(process.wait(), self.timeout_s)
        except asyncio.TimeoutError:
            _kill_group(process.pid)
            await process.wait()
            self._failed("timeout", timeout_s=self.timeout_s)
            return
        except asyncio.CancelledError:  # the daemon stops: what it started does not outlive it
            _kill_group(process.pid)
            raise
        if code != 0:
            self._failed("exit", exit_code=code)
            return
        if self._failing:
            log.info("alarm_hook_works_again", command=str(self.command), after=sorted(self._failing))
            self._failing.clear()

    def _failed(self, kind: str, **facts: object) -> None:
        if kind in self._failing:
            return
        self._failing.add(kind)
        log.error("alarm_hook_failed", command=str(self.command), failure=kind, **facts,
                  note="logged once until the command succeeds again")


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
