"""The one path of every input: apply to the table, journal, then publish.

Device messages (through the feed), link changes, ticks and API commands all go through
:meth:`TableService.apply`; each input applied and the events it caused join the open batch,
which the journal's writer (cardd.journal.writer) commits at the end of the loop turn, then
each record is published to the API in seq order. A commit that fails keeps its batch for a
retry and opens the JOURNAL_WRITE_FAILED alarm. docs/architecture.md ("The daemon") and
docs/journal.md ("Group commit", "When the disk is full") describe the whole path.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog

from cardd.api.errors import CommandFailed
from cardd.api.protocol import ApiEvent
from cardd.daemon.commands import refusal_line
from cardd.daemon.event_marks import EVENT_MARKS, EventMarks, marks_from_json, marks_to_json, merge_marks, unit_of
from cardd.journal import (INPUT_KEY, KIND_COMMAND, KIND_EVENT, KIND_INPUT, Encoded, Entry, Journal,
                           JournalEntryError, JournalError, JournalWriteError, Record, input_of)
from cardd.journal.writer import JournalWriter
from core.errors import CarddError
from devices.events import Event, Reason, Severity
from devices.game.rules import HouseRules
from devices.errors import TableError
from devices.tracker.feed import Feed
from devices.tracker.inputs import DeviceMessage, OpenRound, TableInput, Tick, from_json, to_json
from devices.tracker.snapshot import restore, snapshot
from devices.tracker.table import Table
from drivers.aio import RateLimitedLog
from firmware_bridge.messages import CardRead, Heartbeat, Ident, UnreadableCard

log = structlog.get_logger(__name__)

REASON_COMMAND_REFUSED = "COMMAND_REFUSED"
#: the daemon's start and stop records (written by cardd.daemon.app)
REASON_START = "DAEMON_START"
REASON_STOP = "DAEMON_STOP"
#: after a failed commit, the batch is kept and written again this much later
RETRY_AFTER_S = 1.0
#: while commits keep failing, ``journal_commit_failed`` is logged at most this often (seconds)
FAILED_LOG_EVERY_S = 60.0
#: the source of the journal's own alarm and records (JOURNAL_WRITE_FAILED, JOURNAL_WRITE_RESUMED)
JOURNAL_SOURCE = "journal"
#: a card-path commit still carries the snapshot when the last one is this old (seconds) ...
SNAPSHOT_EVERY_S = 0.5
#: ... or this many records back (what a restart replays is at most about this much)
SNAPSHOT_EVERY_RECORDS = 500
#: what the daemon stores as the journal's snapshot: the table's own snapshot under TABLE, the
#: device models' states under DEVICE_STATES (a bare table snapshot is read as one too) and the
#: event marks under event_marks.EVENT_MARKS
TABLE, DEVICE_STATES = "table", "device_states"
_R = TypeVar("_R")
#: all that the device models' checkpoints are made of: (state, resume state, IDENT) of each
#: model, compared on every commit instead of building (and encoding the IDENT of) both checkpoints
DeviceKey = tuple[tuple[str, str, Ident | None], ...]


#: the kinds of record that may carry an input (journal.input_of): only their data is read at a restart
_CARRY_INPUTS = frozenset({KIND_INPUT, KIND_EVENT})


def stored_table(stored: Mapping[str, Any]) -> Any:
    """The table's own snapshot in what the daemon stored as the journal's snapshot (a bare table
    snapshot, from an older release, is one)."""
    return stored[TABLE] if DEVICE_STATES in stored else stored


#: an input journaled after the latest snapshot: (the seq of the record carrying it, its JSON form)
JournaledInput = tuple[int, Any]


def journaled_state(journal: Journal) -> tuple[dict[str, Any] | None, list[JournaledInput]]:
    """What a restart restores from: the latest stored snapshot (None: none yet) and the inputs
    journaled after it (none after a clean stop: the stop record's commit carries a snapshot), as
    journal.input_of reads them: input records, and the card reads their events carry."""
    latest = journal.latest_snapshot()
    after, stored = latest if latest is not None else (0, None)
    carried = ((r.seq, input_of(r.kind, r.data)) for r in journal.entries_after(after) if r.kind in _CARRY_INPUTS)
    return stored, [(seq, inp) for seq, inp in carried if inp is not None]


@dataclass
class _WriteFailure:
    """Commits have failed since ``since`` (the service's clock): the last one's ``cause``, and
    the retries that failed after the first."""
    since: float
    cause: str
    retries: int = 0


def not_journaled_yet(cause: str) -> JournalWriteError:
    """What a command waiting on a failed commit gets: its record is kept, not lost."""
    return JournalWriteError(f"not journaled yet: {cause}; it is kept and written again every {RETRY_AFTER_S:g} s",
                             cause)


@dataclass
class _Batch:
    entries: list[Entry] = field(default_factory=list)
    #: (index of the entry whose seq answers, future) for commands waiting for their commit
    waiters: list[tuple[int, asyncio.Future[int]]] = field(default_factory=list)
    reads: dict[str, int] = field(default_factory=dict)  # device -> highest card index in this batch
    marks: EventMarks = field(default_factory=dict)  # device -> unit -> its highest event index in this batch
    #: False while the batch holds only card-path inputs (see the module docstring)
    needs_snapshot: bool = False
    #: what the device models' checkpoints depend on, when this batch's commit carries the snapshot
    devices: "DeviceKey | None" = None
    #: the snapshot its commit carries (None: none, the card path), fixed when the batch is closed
    snapshot: dict[str, Any] | None = None
    #: a write of the journal's own (journal_write): its success says nothing of the batches kept
    own: bool = False


def api_event(seq: int, ts_ns: int, kind: str, source: str, reason: str, severity: str, who: str,
              data: Mapping[str, Any]) -> ApiEvent:
    """A journal record as the API shows it (live, replayed, or in a LOG reply: the same form).
    A dict ``data`` is not copied: the event is encoded at once and the record's data never changes."""
    message = data.get("message", "")
    return ApiEvent(seq=seq, time=ts_ns / 1e9, kind=kind, source=source, reason=reason, severity=severity,
                    who=who or None, message=message if type(message) is str else str(message),
                    data=data if type(data) is dict else dict(data))


def record_event(record: Record) -> ApiEvent:
    return api_event(record.seq, record.ts_ns, record.kind, record.source, record.reason, record.severity,
                     record.who, record.data)


class TableService:
    """Owns the table on the event loop; see the module docstring."""

    def __init__(self, rules: HouseRules, journal: Journal, publish: Callable[[ApiEvent], None],
                 clock: Callable[[], float] = time.monotonic,
                 on_journaled: Callable[[EventMarks], None] | None = None,
                 on_published: Callable[[], None] | None = None) -> None:
        self.rules, self.journal, self._publish = rules, journal, publish
        self._clock = clock
        #: called after each commit with the event marks it moved (the devices' confirms); set by
        #: cardd.daemon.devices, which is made from this service
        self.on_journaled = on_journaled
        #: called after each commit with its first record's seq and time (ns): retention's oldest
        #: unexported; set by cardd.daemon.retention, which is made from this service
        self.on_committed: Callable[[int, int], None] | None = None
        #: called after each commit's records were handed to ``publish``: the API writes them now
        #: (ApiServer.flush), before the confirms the commit sends the devices, not a loop turn later
        self.on_published = on_published
        self._batch = _Batch()
        #: the group commit of the open batch, and the journal's writer thread
        self.writer: JournalWriter[_Batch] = JournalWriter(journal, take=self._take_batch, encode=self._encoded,
                                                           committed=self._committed, failed=self._failed)
        #: when the last snapshot was written (clock), the records since, the device states in it
        self._snapshot_at = -float("inf")
        self._since_snapshot = 0
        self._snapshot_devices: DeviceKey | None = None
        #: device -> the highest card index (CardRead / UnreadableCard) durably journaled
        self.journaled_reads: dict[str, int] = {}
        #: device -> unit -> the highest protocol 1.1 event index durably journaled
        self.event_marks: EventMarks = {}
        #: since the first of the failed commits not yet followed by one that succeeded
        self._failure: _WriteFailure | None = None
        self._failure_log = RateLimitedLog(log, interval_s=FAILED_LOG_EVERY_S, burst=1, clock=clock)
        self.table = Table(rules, self._sink, clock)
        self.feed = _JournaledFeed(self)

    @property
    def write_failure(self) -> str | None:
        """Why the journal cannot be written now (its last commit failed), or None."""
        return None if self._failure is None else self._failure.cause

    # ---- start-up ---------------------------------------------------------------------------

    def restore(self, start: Entry) -> int:
        """The table from the latest snapshot and the inputs journaled after it, replayed onto the
        table as it was (their events were journaled then: replayed muted), then ``start``
        journaled with what the restore caused (a live round comes back held). Returns the seq
        of the start record."""
        stored, inputs = journaled_state(self.journal)
        if stored is not None and EVENT_MARKS in stored:
            self.event_marks = marks_from_json(stored[EVENT_MARKS])
        if inputs or stored is not None:
            snap = self._replayed(stored, inputs)
            # a live round comes back held: restore() says so through the sink, after the start record;
            # other house rules only between shoes after a clean stop (nothing journaled after the snapshot)
            self.table = restore(self.rules, self._sink, snap, clock=self._clock, clean_stop=not inputs)
        held = self._batch.entries
        if start.ts_ns is None:
            start = start._replace(ts_ns=time.time_ns())
        self._batch = _Batch(entries=[start, *held], needs_snapshot=True)
        self.feed = _JournaledFeed(self)
        seqs = self.writer.commit_now()
        return seqs[0]

    def _replayed(self, stored: dict[str, Any] | None, inputs: list[JournaledInput]) -> dict[str, Any]:
        """The table snapshot of the table ``stored`` describes after ``inputs``."""
        snap: dict[str, Any] | None = None if stored is None else stored_table(stored)
        devices: dict[str, dict[str, Any]] = {} if stored is None else stored.get(DEVICE_STATES, {})
        if not inputs:
            assert snap is not None
            return snap
        marks = _Batch()  # the event marks of the replayed inputs

        def muted(event: Event) -> None:
            pass

        if snap is None:
            table = Table(self.rules, muted, self._clock)
        else:
            table = restore(self.rules, muted, snap, hold=False, clock=self._clock)
            for model in (table.shuffler, table.reader):
                checkpoint = devices.get(model.NAME)
                if checkpoint is not None:
                    model.resume_checkpoint(checkpoint)
        for seq, journaled in inputs:
            inp = from_json(journaled)
            try:
                table.apply(inp)
            except CarddError as exc:  # refused the first time too: it changed what it changed then
                log.info("replayed_input_refused", seq=seq, error=str(exc))
            _note_event(marks, table, inp)
        merge_marks(self.event_marks, marks.marks)
        return snapshot(table)

    # ---- the one path -----------------------------------------------------------------------

    def apply(self, inp: TableInput, who: str = "") -> list[Event]:
        """Apply ``inp`` and journal it with the events it caused (at the end of this loop turn).
        Raises what the table raises for a refused input; the input is journaled either way,
        except a tick or a heartbeat that caused nothing (after a restore the devices start offline anyway)."""
        batch = self._batch
        if type(inp) is DeviceMessage:
            read = inp.message
            if type(read) is CardRead:
                return self._apply_card(batch, inp, read, who)
        at = len(batch.entries)
        batch.entries.append(Entry(kind=KIND_INPUT, source=_source(inp), who=who, data=to_json(inp),
                                   ts_ns=time.time_ns()))
        self.writer.schedule()
        if not _card_path(inp):
            batch.needs_snapshot = True
        try:
            caused = self.table.apply(inp)
        except BaseException:
            self._note_read(inp)
            raise
        if _routine(inp) and not caused and len(batch.entries) == at + 1:
            batch.entries.pop()  # a tick or heartbeat that changed nothing: not worth records every second
        else:
            self._note_read(inp)
        return caused

    def _apply_card(self, batch: _Batch, inp: DeviceMessage, read: CardRead, who: str) -> list[Event]:
        """:meth:`apply` of a card read, the input of nearly every record: the same steps with the
        questions a card read answers the same way every time (source, card path, routine, read,
        event) answered once. The read and the first event it caused become one record, the
        event's carrying the read (journal INPUT_KEY): half the records of the card path."""
        device = inp.device
        entries = batch.entries
        at, data, ts_ns = len(entries), to_json(inp), time.time_ns()
        entries.append(Entry(kind=KIND_INPUT, source=device, who=who, data=data, ts_ns=ts_ns))
        self.writer.schedule()
        try:
            caused = self.table.apply(inp)
        finally:  # journaled either way: its read and its event index count, applied or refused
            _note_index(batch.reads, device, read.index)
            if inp.event_index is not None:
                _note_event(batch, self.table, inp)
        if len(entries) > at + 1:
            kind, reason, source, severity, event_who, event_data, _ = entries[at + 1]
            if kind == KIND_EVENT and INPUT_KEY not in event_data:  # stamped when the read came in
                # built whole: a named tuple's _replace costs twice as much (0.9 us against 0.45)
                entries[at:at + 2] = [Entry(kind, reason, source, severity, event_who, {**event_data, INPUT_KEY: data},
                                            ts_ns)]
        return caused

    async def command(self, inp: TableInput, who: str, uid: int, name: str) -> int:
        """An API command: applied, then ACKed with its input record's seq once journaled. A
        refusal is journaled as a refused command (who, uid) and raised."""
        if self._failure is not None and type(inp) is OpenRound:  # journaled later, like any record
            why = refusal_line(name, TableError(f"the journal cannot write ({self._failure.cause}): no round opens "
                                                "until a technician frees space on its disk"))
            self.add(_refused(name, to_json(inp), who, uid, why))
            raise CommandFailed(why)
        batch = self._batch
        at = len(batch.entries)
        try:
            self.apply(inp, who)
        except CarddError as exc:
            why = refusal_line(name, exc)
            batch.entries[at] = _refused(name, to_json(inp), who, uid, why, at_ns=batch.entries[at].ts_ns)
            await self.refusal_journaled(at)
            raise CommandFailed(why) from None
        return await self.commit_of(at)

    def journal_command(self, name: str, data: Mapping[str, Any], who: str, uid: int, *, refused: str | None = None,
                        severity: str = Severity.INFO.value, source: str = "api") -> int:
        """Add a command record that is not a table input (a device request, a refusal); returns
        its index in the open batch (for :meth:`commit_of`)."""
        if refused is not None:
            entry = _refused(name, data, who, uid, refused, source=source)
        else:  # a message, as every record has one for `cardctl log` (what was done, to what, by whom)
            args = data.get("args")
            device = args.get("device") if isinstance(args, Mapping) else None
            message = f"{name}{f' of {device}' if isinstance(device, str) else ''} by {who or '?'} (uid {uid})"
            entry = Entry(kind=KIND_COMMAND, reason=name.upper(), source=source, severity=severity, who=who,
                          data={"command": name, "uid": uid, "message": message, **data}, ts_ns=time.time_ns())
        return self.add(entry)

    async def refusal_journaled(self, index: int) -> None:
        """Wait until the refusal record ``index`` of the open batch is journaled. While the journal
        cannot write it is kept like any record, and the caller goes on to raise the refusal itself:
        "not journaled yet ... it is kept" would tell a client its refused command was applied."""
        try:
            await self.commit_of(index)
        except JournalWriteError:
            pass

    def add(self, entry: Entry) -> int:
        """Add a record that is no table input to the open batch; returns its index there."""
        self._batch.entries.append(entry)
        self._batch.needs_snapshot = True
        self.writer.schedule()
        return len(self._batch.entries) - 1

    def commit_of(self, index: int) -> asyncio.Future[int]:
        """A future: the seq of entry ``index`` of the open batch, once it is journaled."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._batch.waiters.append((index, future))
        self.writer.schedule()
        return future

    def flush(self) -> None:
        """Commit the open batch now, after the writer thread's commit under way (shutdown): when
        this returns, everything journaled is published, in seq order."""
        self.writer.flush()

    def unjournaled(self) -> list[Entry]:
        """The records waiting for a commit that has failed (none once one has succeeded): what a
        stop that cannot write them leaves only in its log."""
        return list(self._batch.entries)

    # ---- group commit -----------------------------------------------------------------------

    def _sink(self, event: Event) -> None:
        self._batch.entries.append(Entry.from_event(event, who=event.who or "", ts_ns=time.time_ns()))
        self.writer.schedule()

    def _note_read(self, inp: TableInput) -> None:
        if isinstance(inp, DeviceMessage):
            if isinstance(inp.message, (CardRead, UnreadableCard)):
                _note_index(self._batch.reads, inp.device, inp.message.index)
            _note_event(self._batch, self.table, inp)

    def _snapshot_due(self, batch: _Batch) -> dict[str, Any] | None:
        """The snapshot this commit carries, or None on the card path (module docstring)."""
        models = (self.table.shuffler, self.table.reader)
        key = tuple((model.state, model.resume_state, model.ident) for model in models)
        if (not batch.needs_snapshot and key == self._snapshot_devices
                and self._since_snapshot + len(batch.entries) < SNAPSHOT_EVERY_RECORDS
                and self._clock() - self._snapshot_at < SNAPSHOT_EVERY_S):
            return None
        batch.devices = key
        # the marks as they are once this batch is journaled
        marks = merge_marks({device: dict(units) for device, units in self.event_marks.items()}, batch.marks)
        return {TABLE: snapshot(self.table), DEVICE_STATES: {model.NAME: model.checkpoint() for model in models},
                EVENT_MARKS: marks_to_json(marks)}

    def _take_batch(self) -> _Batch | None:
        """The open batch closed for its commit, with the snapshot it carries; None when nothing waits."""
        batch = self._batch
        if not (batch.entries or batch.waiters):
            return None
        self._batch = _Batch()
        batch.snapshot = self._snapshot_due(batch)
        return batch

    def _encoded(self, batch: _Batch) -> Encoded:
        """The batch checked and its JSON text fixed. An entry the journal refuses (a text with a
        control character that slipped past a check, data that is not JSON) would fail every retry
        and hold every record behind it for good: it is made storable instead (Entry.storable:
        what it says kept, why in its data) and logged."""
        try:
            return self.journal.encode(batch.entries, batch.snapshot)
        except JournalEntryError:
            for at, entry in enumerate(batch.entries):
                try:
                    self.journal.encode([entry])
                except JournalEntryError as exc:
                    batch.entries[at] = entry.storable(str(exc))
                    log.error("journal_entry_repaired", at=at, reason=str(entry.reason)[:64], error=str(exc))
            return self.journal.encode(batch.entries, batch.snapshot)  # the snapshot itself refused: a failure

    async def journal_write(self, write: Callable[[], _R]) -> _R:
        """A write of the journal's own (an export's record, a prune) on the writer thread, as one
        more commit in line: after the commit under way, while the open batch waits; the records it
        made are then published like a batch's, in seq order. Never on the loop: a prune may take
        a while."""
        own, done = _Batch(own=True), []

        def commit() -> list[int]:
            before = self.journal.last_seq
            done.append(write())
            made = self.journal.query(seq_from=before + 1, limit=None)
            own.entries = [Entry(kind=r.kind, reason=r.reason, source=r.source, severity=r.severity, who=r.who,
                                 data=r.data, ts_ns=r.ts_ns) for r in made]
            return [r.seq for r in made]

        await self.writer.write(commit, own)
        result: _R = done[0]
        return result

    def _failed(self, batch: _Batch, exc: JournalError) -> None:
        """Nothing of ``batch`` was written: its waiters fail, its records go back in front of
        what was added since, and the whole is written again a little later. A failure opens the
        JOURNAL_WRITE_FAILED alarm unless it is open (module docstring). A write of the journal's own
        that failed for another reason than writing (a damaged page a prune read) is its caller's
        trouble alone: nothing was kept and nothing says the journal cannot be written."""
        if batch.own and not isinstance(exc, JournalWriteError):
            self.writer.schedule()
            return
        cause = exc.cause if isinstance(exc, JournalWriteError) else str(exc)
        failure = self._failure
        if failure is None:
            failure = self._failure = _WriteFailure(self._clock(), cause)
        else:
            failure.cause, failure.retries = cause, failure.retries + 1
        for _, future in batch.waiters:
            if not future.done():
                future.set_exception(not_journaled_yet(cause))
        later = self._batch
        batch.waiters = [(index + len(batch.entries), future) for index, future in later.waiters]
        batch.entries += later.entries
        for device, index in later.reads.items():
            batch.reads[device] = max(batch.reads.get(device, 0), index)
        merge_marks(batch.marks, later.marks)
        batch.needs_snapshot = True
        batch.own = False  # a failed journal_write's: it holds the open batch now, written by the retry
        self._batch = batch
        already_open = any(alarm.reason == Reason.JOURNAL_WRITE_FAILED for alarm in self.table.alarms.open.values())
        # in STATE at once; its record waits with the others (the snapshot carries the alarm). A disk
        # that is nearly full fails and resumes again and again (a checkpoint frees WAL space): one
        # alarm until a supervisor clears it, each episode's JOURNAL_WRITE_RESUMED record says the rest.
        # Cleared while the journal still cannot write, it opens again at the next failed retry.
        if not already_open:
            event = Event(Reason.JOURNAL_WRITE_FAILED, JOURNAL_SOURCE,
                          f"the journal cannot be written ({cause}): its records are kept and written again "
                          f"every {RETRY_AFTER_S:g} s; no new round opens until it can", Severity.ALARM,
                          {"cause": cause})
            self.table.alarms.raise_from(event)
            batch.entries.append(Entry.from_event(event, ts_ns=time.time_ns()))
        self._failure_log.error("journal_commit_failed", records=len(batch.entries), retries=failure.retries,
                                failing_for_s=round(self._clock() - failure.since, 1), error=str(exc))
        self.writer.retry_after(RETRY_AFTER_S)

    def _committed(self, batch: _Batch, seqs: list[int]) -> None:
        """After the commit returned: publish in seq order, answer the waiters, note the reads."""
        if batch.snapshot is None:
            self._since_snapshot += len(seqs)
        else:
            self._snapshot_at, self._since_snapshot, self._snapshot_devices = self._clock(), 0, batch.devices
        publish = self._publish
        for seq, (kind, reason, source, severity, who, data, ts_ns) in zip(seqs, batch.entries):
            assert ts_ns is not None
            publish(api_event(seq, ts_ns, kind, source, reason, severity, who, data))
        if seqs and self.on_published is not None:
            self.on_published()
        for index, future in batch.waiters:
            if not future.done():
                future.set_result(seqs[index])
        if seqs and self.on_committed is not None:
            first_ts = batch.entries[0].ts_ns
            assert first_ts is not None
            self.on_committed(seqs[0], first_ts)
        self.journaled_reads.update(batch.reads)
        if batch.marks:
            merge_marks(self.event_marks, batch.marks)
            if self.on_journaled is not None:
                self.on_journaled(batch.marks)
        if self._failure is not None and not batch.own:
            self._resumed(self._failure, len(seqs))

    def _resumed(self, failure: _WriteFailure, records: int) -> None:
        """The first commit after failed ones: say so in the journal (in the next commit) and the log."""
        self._failure = None
        self._failure_log.flush("journal_commit_failed")  # its count of lines left out, before this one
        failed_for = round(self._clock() - failure.since, 1)
        log.warning("journal_commit_resumed", failed_for_s=failed_for, records=records, retries=failure.retries)
        self.add(Entry.from_event(Event(
            Reason.JOURNAL_WRITE_RESUMED, JOURNAL_SOURCE,
            f"the journal is written again after {failed_for:g} s of failed commits ({failure.cause}): "
            f"{records} record(s) had waited", Severity.INFO,
            {"failed_for_s": failed_for, "records": records, "retries": failure.retries, "cause": failure.cause}),
            ts_ns=time.time_ns()))


class _JournaledFeed(Feed):
    """The library's feed (connection events -> input records, ticks), applying through the
    service's one path instead of straight to the table."""

    def __init__(self, service: TableService) -> None:
        super().__init__(service.table)
        self._service = service

    def apply(self, inp: TableInput) -> list[Event]:
        try:
            return self._service.apply(inp)
        except CarddError as exc:  # a device input the tracker refused: journaled, never fatal
            log.warning("tracker_input_refused", input=type(inp).__name__, error=str(exc))
        except Exception:
            log.exception("tracker_input_failed", input=type(inp).__name__)
        return []


def _note_event(batch: _Batch, table: Table, inp: DeviceMessage) -> None:
    """A numbered event moves its device's mark in ``batch``, under the unit the record names (the
    one its connection had shaken hands with); a record without one (an older journal) under the
    unit the table's model of that device identified last."""
    if not isinstance(inp, DeviceMessage) or inp.event_index is None:
        return
    unit = inp.unit
    if unit is None:
        model = table.reader if inp.device == table.reader.NAME else table.shuffler
        unit = unit_of(model.ident)
    units = batch.marks.setdefault(inp.device, {})  # the card path: no merge_marks() per card
    if units.get(unit, 0) < inp.event_index:
        units[unit] = inp.event_index


def _note_index(reads: dict[str, int], device: str, index: int) -> None:
    """``device``'s highest card index in a batch moved on to ``index``."""
    if reads.get(device, 0) < index:
        reads[device] = index


def _card_path(inp: TableInput) -> bool:
    """Inputs a commit may journal without the snapshot: the shoe's card reads and heartbeats
    (whether they move a device model is checked on the device states)."""
    return isinstance(inp, DeviceMessage) and isinstance(inp.message, (CardRead, Heartbeat))


def _routine(inp: TableInput) -> bool:
    """Inputs that arrive every second and usually change nothing but a clock. Not a Status: one
    comes after each handshake, and what the device says in it (its state, the cards it holds) is
    what the table checked the shoe's count against, journaled and replayed like any device message."""
    return isinstance(inp, Tick) or (isinstance(inp, DeviceMessage) and isinstance(inp.message, Heartbeat))


def _source(inp: TableInput) -> str:
    device = getattr(inp, "device", None)
    return device if isinstance(device, str) else "api" if not isinstance(inp, Tick) else "table"


#: the most bytes of a refused command's args (as JSON) its journal record keeps: a client may send
#: 64 KiB a line, and even one without a role is journaled; a record is never pruned for 90 days
MAX_REFUSED_ARGS = 1024


def refused_args(args: Mapping[str, Any]) -> Mapping[str, Any]:
    """A refused command's args as its record keeps them: whole up to MAX_REFUSED_ARGS, else their
    size and SHA-256 (a console's own log can still be matched to it)."""
    try:
        text = json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str).encode()
    except RecursionError:  # nested deeper than the json module goes (msgspec took it)
        return {"too_deep": "nested too deeply to keep"}
    if len(text) <= MAX_REFUSED_ARGS:
        return args
    return {"too_long": {"bytes": len(text), "sha256": hashlib.sha256(text).hexdigest()}}


def _refused(name: str, data: Mapping[str, Any], who: str, uid: int, why: str, *, source: str = "api",
             at_ns: int | None = None) -> Entry:
    return Entry(kind=KIND_COMMAND, reason=REASON_COMMAND_REFUSED, source=source, severity=Severity.WARNING.value,
                 who=who, data={"command": name, "uid": uid, "user": who, "args": dict(refused_args(data)), "refused": why,
                                # the command named once: the refusal's own line starts with it too
                                "message": f"{name} refused for {who} (uid {uid}): "
                                           f"{why.removeprefix(f'{name} refused: ')}"},
                 ts_ns=at_ns if at_ns is not None else time.time_ns())
