"""Retention in the daemon: ``export_journal`` (the archive an export makes, noted in the
chain) and the prune that follows it, at start and every ``journal.prune_every_s``.

Neither ever blocks the card path. The export file is written on a worker thread from the
journal's own read snapshot (appends go on meanwhile); only its ``export`` record, and each
prune, is a write of the journal's own, which :meth:`TableService.journal_write` puts on the
journal's writer thread between two group commits and then publishes like any record. A prune
deletes at most :data:`PRUNE_CHUNK` records a transaction, so a long backlog never holds the
writer for long. docs/journal.md ("Retention") has the rules, docs/api.md the command.
"""
from __future__ import annotations

import asyncio
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import msgspec
import structlog

from cardd.api.errors import CommandFailed
from cardd.api.peer import Caller
from cardd.api.protocol import ErrorCode, ExportJournalArgs, ExportJournalResult
from cardd.daemon.tracker_service import TableService
from cardd.journal import ExportFile, Journal, JournalError, RetentionStatus
from core.schema_errors import schema_problem

log = structlog.get_logger(__name__)

#: records one prune transaction deletes at most (the writer waits for it meanwhile)
PRUNE_CHUNK = 5_000
#: the export directory's and files' permissions: the API group may read them, so cardctl can
#: copy an export out (docs/install.md section 13); the journal itself stays the daemon's alone
EXPORT_DIR_MODE, EXPORT_FILE_MODE = 0o750, 0o640
#: who the journal's prune records name
PRUNED_BY = "cardd"


class Retention:
    def __init__(self, service: TableService, journal: Journal, exports: Path, every_s: float, *,
                 group: int | None = None, delivered: Callable[[], int] | None = None) -> None:
        self.service, self.journal, self.exports, self.every_s = service, journal, exports, every_s
        #: with the floor export on, the records it delivered through: prune keeps every record after
        self.delivered = delivered
        self.group = group  # the API socket's group: export files are given to it
        #: where retention stood after the last prune or export (None before the first)
        self.status: RetentionStatus | None = None
        service.on_committed = self._committed

    def status_json(self) -> dict[str, Any] | None:
        """STATE's "retention": :class:`RetentionStatus` as of the last prune or export (what is
        pruned and exported changes only then), with ``unexported`` counted now from the journal's
        last seq: the journal grows between the hourly checks. Never a journal lookup: this runs
        on the loop, and the journal's lock may be the writer thread's through an fsync."""
        if self.status is None:
            return None
        status = self.status.to_json_dict()
        status["unexported"] = self.journal.last_seq - self.status.exported_through
        return status

    async def export(self, args: dict[str, Any], caller: Caller) -> dict[str, Any]:
        """``export_journal``: the file in the export directory, then its record in the chain."""
        try:
            request = msgspec.convert(args, ExportJournalArgs)
        except msgspec.ValidationError as exc:
            problem = schema_problem(exc, schema=ExportJournalArgs, data=args)
            raise CommandFailed(problem.sentence("export_journal"), code=ErrorCode.BAD_ARGS) from None
        since = None if request.since is None else round(request.since * 1e9)
        until = None if request.until is None else round(request.until * 1e9)
        written = await asyncio.to_thread(self._write_file, request.format, since, until)
        exported = await self.service.journal_write(lambda: self.journal.note_export(written, who=caller.user))
        log.info("journal exported", file=str(exported.path), first_seq=exported.first_seq,
                 last_seq=exported.last_seq, count=exported.count, sha256=exported.sha256, who=caller.user)
        await self._note_status()
        result = ExportJournalResult(file=str(exported.path), format=exported.fmt, first_seq=exported.first_seq,
                                     last_seq=exported.last_seq, count=exported.count, sha256=exported.sha256,
                                     record_seq=exported.record_seq)
        return msgspec.to_builtins(result)

    def _write_file(self, fmt: str, since: int | None, until: int | None) -> ExportFile:
        """On a worker thread: a new file named by the moment (never one that exists), readable
        by the export directory's group."""
        if not self.exports.is_dir():
            try:
                self.exports.mkdir(parents=True)
            except OSError as exc:
                raise CommandFailed(f"export directory {self.exports}: {exc.strerror}") from None
            self._share(self.exports, EXPORT_DIR_MODE)
        name = f"journal-{datetime.now(timezone.utc):%Y%m%dT%H%M%S%fZ}.{fmt}"
        written = self.journal.write_export_file(self.exports / name, fmt, since=since, until=until)
        self._share(written.path, EXPORT_FILE_MODE)
        return written

    def _share(self, path: Path, mode: int) -> None:
        """Give ``path`` to the API group, readable by it (the daemon's umask made it private)."""
        try:
            if self.group is not None:
                os.chown(path, -1, self.group)
            os.chmod(path, mode)
        except OSError as exc:  # the export is whole and fsynced; only fewer may read it
            log.warning("export not shared with the API group", path=str(path), group=self.group,
                        error=exc.strerror)

    async def prune(self) -> int:
        """Prune what may be pruned, a chunk a transaction; returns how many records went."""
        total = 0
        while True:
            result = await self.service.journal_write(
                lambda: self.journal.prune(who=PRUNED_BY, max_records=PRUNE_CHUNK,
                                           keep_after=None if self.delivered is None else self.delivered()))
            if result.pruned == 0:
                break
            total += result.pruned
            log.info("journal pruned", pruned=result.pruned, through_seq=result.through_seq,
                     record_seq=result.record_seq, horizon_days=self.journal.retention_days)
        await self._note_status()
        return total

    async def run(self) -> None:
        """Prune now and every ``every_s``; a failure is logged and tried again next time."""
        while True:
            try:
                await self.prune()
            except JournalError as exc:
                log.error("journal prune failed", error=str(exc))
            await asyncio.sleep(self.every_s)

    def _committed(self, first_seq: int, first_ts_ns: int) -> None:
        """After each commit (on the loop): when the last check saw every record exported, the
        first record written since is the oldest unexported until the next check."""
        status = self.status
        if status is not None and status.oldest_unexported is None and first_seq == status.exported_through + 1:
            self.status = status.oldest_written(first_ts_ns, time.time_ns())

    async def _note_status(self) -> None:
        status = await asyncio.to_thread(self.journal.retention)
        if status.oldest_unexported is None and self.journal.last_seq > status.exported_through:
            # records came between the lookup and now, before _committed could see this status:
            # the first of them is in the journal now
            status = await asyncio.to_thread(self.journal.retention)
        self.status = status
        if status.unexported_past_horizon:
            log.warning("journal records past the retention horizon are not exported",
                        oldest_unexported=status.oldest_unexported, unexported=status.unexported)
