"""The journal: a hash-chained, append-only SQLite record that is the source of truth after a crash.

One process writes (a lock file beside the journal keeps a second writer out); readers may
open it read-only. Every public method is safe to call from several threads. See
docs/journal.md for the file format, the hash encoding and the retention rules.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Iterator, Mapping, Sequence
from urllib.request import pathname2url

from .chain import BATCH, walk, walk_in_processes
from .errors import (JournalBusy, JournalConfigError, JournalCorrupt, JournalError, JournalExportError,
                     JournalNotFound, JournalWriteError)
from .export import write_export
from .files import fsync_dir
from .head_file import CommittedHead, HeadFile, head_file_path, read_head_file, write_new
from .records import (GENESIS_HASH, KIND_EXPORT, KIND_PRUNE, REASON_EXPORTED, REASON_PRUNED, SEVERITIES, Entry,
                      Record, canonical_json, chain_values, check_entries, iso_ns, plain_canonical_json,
                      reference_canonical_json, to_ns)
from .schema import (APPLICATION_ID, GUARD_FORMS, MIN_RETENTION_DAYS, READABLE_SCHEMA_VERSIONS, RECORD_COLUMNS,
                     SCHEMA, SCHEMA_VERSION, TRIGGER_NAMES)
from .sqlite_errors import sqlite_code, sqlite_meaning, sqlite_problem

QUICK_CHECK_RECORDS = 1000  # records re-hashed on every open, back from the head
KEEP_SNAPSHOTS = 3
_DAY_NS = 86_400 * 1_000_000_000
_MMAP_BYTES = 1 << 30  # verify reads through a memory map: about 20 % faster on a big journal
#: verify walks a chain this long in stretches, one process per CPU (up to VERIFY_PROCESSES): below
#: it, starting a process costs more than it saves
PARALLEL_VERIFY_RECORDS = 200_000
VERIFY_PROCESSES = 4
# SQLite result codes that mean the file itself is damaged or is not a database
_DAMAGE_CODES = {"SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_IOERR", "SQLITE_FORMAT"}
#: with less than this free beside the journal, an SQLite I/O or "full" error is the disk being full
#: (SQLite says SQLITE_IOERR_SHMSIZE when the -shm cannot grow, SQLITE_FULL when a page cannot be
#: written): never read as damage
FULL_DISK_BYTES = 1 << 20
_FULL_DISK_CODES = ("SQLITE_FULL", "SQLITE_IOERR")


@dataclass(frozen=True, slots=True)
class VerifyResult:
    ok: bool
    checked: int  # records re-hashed
    first_bad_seq: int | None
    problem: str | None

    def raise_if_bad(self, path: Path) -> None:
        if not self.ok:
            raise JournalCorrupt(path, self.first_bad_seq, self.problem or "chain broken")


@dataclass(frozen=True, slots=True)
class Encoded:
    """Entries checked and their data (and the snapshot) as the JSON text that will be stored."""
    entries: Sequence[Entry]
    datas: list[str]
    snapshot_json: str | None


def _encode(entries: Sequence[Entry], snapshot: Mapping[str, Any] | None) -> Encoded:
    snapshot_json = None if snapshot is None else canonical_json(dict(snapshot), "the snapshot")
    datas: list[str] = []
    append, plain = datas.append, plain_canonical_json
    for entry in entries:
        data = entry.data if type(entry.data) is dict else dict(entry.data)
        text = plain(data)
        if text is None:  # floats, or what JSON refuses: the reference's text, or its error (naming the entry)
            text = reference_canonical_json(data, f"entry {len(datas)} ({entry.kind} {entry.reason}) data")
        append(text)
    return Encoded(entries, datas, snapshot_json)


@dataclass(frozen=True, slots=True)
class ExportFile:
    """An export file written and fsynced, not yet noted in the chain (:meth:`Journal.note_export`)."""
    path: Path
    fmt: str
    first_seq: int
    last_seq: int
    count: int
    sha256: str  # hex, of the whole file


@dataclass(frozen=True, slots=True)
class ExportResult(ExportFile):
    """An export file noted in the chain."""
    record_seq: int  # the "export" record that notes it in the chain


@dataclass(frozen=True, slots=True)
class RetentionStatus:
    pruned_through: int  # the anchor: records up to it are gone
    exported_through: int  # exports cover every record from the anchor up to this seq
    unexported: int  # records after it
    oldest_unexported: str | None  # the first of them, ISO-8601 UTC
    unexported_past_horizon: bool  # that one is already older than the horizon: export it
    horizon_days: int  # the retention horizon: exported records older than this are pruned

    def to_json_dict(self) -> dict[str, Any]:
        return {"pruned_through": self.pruned_through, "exported_through": self.exported_through,
                "unexported": self.unexported, "oldest_unexported": self.oldest_unexported,
                "unexported_past_horizon": self.unexported_past_horizon, "horizon_days": self.horizon_days}

    def oldest_written(self, ts_ns: int, now_ns: int) -> "RetentionStatus":
        """This status once its oldest unexported record is known: the one stamped ``ts_ns``
        (the first written after a check that saw every record exported)."""
        return replace(self, oldest_unexported=iso_ns(ts_ns),
                       unexported_past_horizon=ts_ns < now_ns - self.horizon_days * _DAY_NS)


@dataclass(frozen=True, slots=True)
class PruneResult:
    pruned: int
    through_seq: int  # the new anchor: records up to it are gone
    record_seq: int | None  # the "prune" record, None when nothing was pruned


def journal_files(path: Path) -> tuple[Path, ...]:
    """The files the journal at ``path`` is kept in: its database file, SQLite's WAL and -shm
    beside it, and its head file (head_file.py). A copy of the journal is a copy of all that exist."""
    return (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"), head_file_path(path))


class Journal:
    """Open with :meth:`Journal.open`; close (or use as a context manager) when done."""

    def __init__(self, path: Path, conn: sqlite3.Connection, lock_fd: int | None, *, retention_days: int,
                 clock: Callable[[], int]) -> None:
        self.path, self._conn, self._lock_fd = path, conn, lock_fd
        self.retention_days, self._clock = retention_days, clock
        self._lock = threading.Lock()
        #: the write path's statements run on this one cursor: conn.execute makes a cursor a statement
        self._cursor = conn.cursor()
        self._head: tuple[int, bytes] = (0, GENESIS_HASH)
        #: :meth:`checkpoint`'s own connection (made at its first call) and its lock: a checkpoint
        #: never takes ``_lock``, so commits go on while it copies
        self._checkpointer: sqlite3.Connection | None = None
        self._checkpoint_lock = threading.Lock()
        #: the writer's note of each commit outside SQLite (head_file.py); None when read-only
        self._head_file: HeadFile | None = None

    # ---- opening and closing -------------------------------------------------------------

    @classmethod
    def open(cls, path: Path | str, *, create: bool = False, readonly: bool = False,
             retention_days: int = MIN_RETENTION_DAYS, clock: Callable[[], int] = time.time_ns,
             quick_check_records: int = QUICK_CHECK_RECORDS, writer_lock: WriterLock | None = None) -> "Journal":
        """Open the journal at ``path`` and check it: the stored head, the last
        ``quick_check_records`` records of the chain, the record count, the anchor, the latest
        snapshot, the head committed (its head file) and the file's size. ``create`` makes a new
        journal only where no file exists. ``writer_lock``: the writer's lock already held
        (:meth:`hold_writer_lock`), handed over to the journal whatever the outcome. Raises
        :class:`JournalCorrupt` for any damage, never a raw sqlite3 error; a journal refused is left
        as it was found."""
        path = Path(path).absolute()
        held = None if writer_lock is None else writer_lock.hand_over()
        try:
            if retention_days < MIN_RETENTION_DAYS:
                raise JournalConfigError(f"journal {path}: retention {retention_days} days is under the legal "
                                         f"minimum of {MIN_RETENTION_DAYS} days")
            if not path.exists():
                if not create or readonly:
                    raise JournalNotFound(f"journal {path} does not exist")
                _create(path)
            elif path.is_dir():
                raise JournalCorrupt(path, None, "a directory, not a journal file")
        except BaseException:
            _release(held)
            raise
        lock_fd = held if held is not None or readonly else _take_writer_lock(path)
        try:
            conn, head = _open_checked(path, readonly, quick_check_records)
        except BaseException:
            _release(lock_fd)
            raise
        journal = cls(path, conn, lock_fd, retention_days=retention_days, clock=clock)
        journal._head = (head.seq, head.hash)
        try:
            if not readonly:
                fsync_dir(path.parent)  # the WAL file now exists: make its directory entry durable
                journal._mark_current_version()
                journal._head_file = _keep_head_file(path, head)
        except BaseException:
            journal.close()
            raise
        return journal

    @staticmethod
    def hold_writer_lock(path: Path | str) -> WriterLock:
        """The writer's lock of the journal at ``path``, taken now and held until handed to
        :meth:`open` (``writer_lock=``) or released; :class:`JournalBusy` if another holds it. For a
        caller that must know before it touches anything beside the journal (``cardd --simulate``
        puts its devices' ptys there): a check that let the lock go at once let two such callers
        started together both pass it."""
        return WriterLock(_take_writer_lock(Path(path).absolute()))

    def close(self) -> None:
        with self._checkpoint_lock:  # no checkpoint starts again once this is closed
            if self._checkpointer is not None:
                self._checkpointer.close()
                self._checkpointer = None
            with self._lock:
                self._conn.close()  # the last connection: it checkpoints the rest of the WAL
                if self._head_file is not None:
                    self._head_file.close()
                    self._head_file = None
                _release(self._lock_fd)
                self._lock_fd = None

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def last_seq(self) -> int:
        """The sequence number of the last record (0 in a new journal)."""
        return self._head[0]

    @property
    def head_hash(self) -> bytes:
        """The hash of the last record (32 zero bytes in a new journal)."""
        return self._head[1]

    # ---- writing ---------------------------------------------------------------------------

    def append(self, entries: Sequence[Entry], snapshot: Mapping[str, Any] | None = None) -> list[int]:
        """Write ``entries`` in one transaction (group commit) and return their sequence numbers.
        ``snapshot``, the caller's state after these entries, is written in the same transaction,
        valid after the last of them. When this returns, everything is on disk (synchronous=FULL)."""
        return self.append_encoded(self.encode(entries, snapshot))

    def encode(self, entries: Sequence[Entry], snapshot: Mapping[str, Any] | None = None) -> "Encoded":
        """Check ``entries`` and fix their JSON text now: what :meth:`append_encoded` writes,
        perhaps on another thread while the caller's objects go on changing."""
        check_entries(entries)
        return _encode(entries, snapshot)

    def append_encoded(self, encoded: "Encoded") -> list[int]:
        """:meth:`append` of what :meth:`encode` made."""
        return self._append(encoded)

    def _append(self, encoded: "Encoded",
                before_insert: Callable[[sqlite3.Connection, int], None] | None = None) -> list[int]:
        """The one write path. ``before_insert(conn, next_seq)`` runs first in the same
        transaction (export and prune bookkeeping)."""
        entries, datas, snapshot_json = encoded.entries, encoded.datas, encoded.snapshot_json
        with self._lock:
            self._require_writer()
            now = self._clock()
            first, prev = self._head
            values, prev = chain_values(entries, datas, first, prev, now)
            count = len(entries)
            if not count and snapshot_json is None:
                return []
            seq = first + count
            conn, cursor = self._conn, self._cursor
            try:
                cursor.execute("BEGIN IMMEDIATE")
                try:
                    if before_insert is not None:
                        before_insert(conn, first + 1)
                    _insert_records(cursor, values, count)
                    if count:  # the hash as a bytearray: records.chain_values says why
                        cursor.execute("UPDATE head SET seq = ?, hash = ? WHERE id = 1", (seq, bytearray(prev)))
                    if snapshot_json is not None:
                        _write_snapshot(conn, seq, snapshot_json)
                    cursor.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:  # a failed COMMIT may already have rolled back
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                full = _full_disk(self.path, exc)
                cause = (sqlite_problem(exc) if full is None
                         else f"disk full: {full[0]} bytes free in {self.path.parent}")
                raise JournalWriteError(f"journal {self.path}: append of {count} record(s) failed, nothing "
                                        f"written: {cause}", cause) from None
            self._head = (seq, prev)
            if count and self._head_file is not None:
                self._head_file.record(seq, prev)
        return list(range(first + 1, seq + 1))

    def checkpoint(self) -> int:
        """Copy the WAL's committed pages into the database file (a PASSIVE checkpoint: it waits
        for nobody and nobody waits for it), through a connection of its own, so the writer's
        commits go on meanwhile; for a thread off the card path. Returns the WAL pages not yet
        copied (a commit meanwhile, or a reader's snapshot, can hold some back).

        Called often enough (the daemon: each second after new records), the WAL starts over
        at the next commit and never reaches SQLite's automatic checkpoint (1,000 pages, about
        200 lone cards), which runs inside the commit that crosses it: the whole WAL copied and
        the database fsynced on one card's path. Cards poured in flat out still cross it; that
        commit then copies only the pages written since the last call. Without the calls (a
        writer that commits without pause: SQLite's own, every 1,000 pages) the WAL stays
        bounded."""
        with self._checkpoint_lock:
            if self._lock_fd is None:
                raise JournalError(f"journal {self.path}: closed, or open read-only: no checkpoint")
            try:
                if self._checkpointer is None:
                    self._checkpointer = _connect(self.path, readonly=False)
                _busy, wal_pages, copied = self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except sqlite3.Error as exc:
                raise _as_journal_error(self.path, exc) from None
            if self._head_file is not None:  # the commits noted since the last call, durable too
                self._head_file.sync()
        return max(0, wal_pages - copied)

    # ---- restoring -------------------------------------------------------------------------

    def latest_snapshot(self) -> tuple[int, dict[str, Any]] | None:
        """The last snapshot written and the seq it is valid after, or None if there is none."""
        with self._lock:
            row = self._guarded(lambda c: c.execute(
                "SELECT seq, sha256, data FROM snapshots ORDER BY seq DESC LIMIT 1").fetchone())
        if row is None:
            return None
        seq, digest, text = row
        if hashlib.sha256(text.encode()).digest() != digest:
            raise JournalCorrupt(self.path, seq, "the snapshot after this seq is damaged (its SHA-256 does not match)")
        snapshot: dict[str, Any] = json.loads(text)
        return seq, snapshot

    def entries_after(self, seq: int) -> list[Record]:
        """Every record after ``seq`` in order: what a restart replays on top of a snapshot."""
        with self._lock:
            anchor = self._guarded(lambda c: c.execute("SELECT seq FROM anchor").fetchone()[0])
            if seq < anchor:
                raise JournalError(f"journal {self.path}: records up to seq {anchor} were pruned; "
                                   f"cannot replay from seq {seq}")
            return self._guarded(lambda c: _records(c.execute(
                f"SELECT {RECORD_COLUMNS} FROM records WHERE seq > ? ORDER BY seq", (seq,))))

    # ---- queries ---------------------------------------------------------------------------

    def query(self, *, seq_from: int | None = None, seq_to: int | None = None,
              since: datetime | int | None = None, until: datetime | int | None = None,
              kind: str | None = None, reason: str | None = None, source: str | None = None,
              min_severity: str | None = None, round_id: int | str | None = None,
              limit: int | None = 1000, newest_first: bool = False) -> list[Record]:
        """Records matching every given filter, in seq order (or newest first). Ranges are
        inclusive for seq, [since, until) for time (aware datetimes or UTC nanoseconds).
        ``round_id`` matches the round the record's data names (str or int)."""
        where: list[str] = []
        args: list[str | int] = []
        index = None  # the index that makes the query fast; SQLite may otherwise walk seq order
        if round_id is not None:
            where.append("round = ?")
            args.append(str(round_id))
            index = "records_round"
        if since is not None:
            where.append("ts >= ?")
            args.append(to_ns(since))
            index = index or "records_ts"
        if until is not None:
            where.append("ts < ?")
            args.append(to_ns(until))
            index = index or "records_ts"
        if reason is not None:
            where.append("reason = ?")
            args.append(reason)
            if reason:
                where.append("reason <> ''")  # lets SQLite use the partial index
                index = index or "records_reason"
        if min_severity is not None:
            if min_severity not in SEVERITIES:
                raise JournalError(f"severity {min_severity!r}: one of {', '.join(SEVERITIES)}")
            wanted = SEVERITIES[SEVERITIES.index(min_severity):]
            where.append(f"severity IN ({','.join('?' * len(wanted))})")
            args.extend(wanted)
            if min_severity != SEVERITIES[0]:
                where.append("severity <> 'info'")  # lets SQLite use the partial index
                index = index or "records_severity"
        if seq_from is not None:
            where.append("seq >= ?")
            args.append(seq_from)
        if seq_to is not None:
            where.append("seq <= ?")
            args.append(seq_to)
        if seq_from is not None or seq_to is not None:
            index = None  # a seq range is the primary key's own range
        for column, value in (("kind", kind), ("source", source)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        sql = f"SELECT {RECORD_COLUMNS} FROM records"
        if index is not None:
            sql += f" INDEXED BY {index}"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq DESC" if newest_first else " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        with self._lock:
            return self._guarded(lambda c: _records(c.execute(sql, args)))

    # ---- verifying -------------------------------------------------------------------------

    def verify(self, *, processes: int | None = None, parallel_from: int = PARALLEL_VERIFY_RECORDS) -> VerifyResult:
        """Walk the whole chain from the anchor: every seq, previous hash and hash, then the head,
        the anchor's prune record and the latest snapshot. Reads through its own connection, so
        appends go on meanwhile; checks the state as of its start. A chain of ``parallel_from``
        records or more is walked in stretches by ``processes`` processes (default: one per
        CPU this process may use, at most VERIFY_PROCESSES), with the same result."""
        if processes is None:
            processes = min(len(os.sched_getaffinity(0)), VERIFY_PROCESSES)
        conn = _connect(self.path, readonly=True)
        try:
            conn.execute(f"PRAGMA mmap_size = {_MMAP_BYTES}")
            try:
                outside = _look_outside(self.path)
            except JournalCorrupt as exc:
                return VerifyResult(False, 0, exc.seq, exc.problem)
            conn.execute("BEGIN")  # one read snapshot: the head and the records agree
            return _full_check(conn, self.path, processes, parallel_from, outside)
        except sqlite3.Error as exc:
            return VerifyResult(False, 0, None, f"damaged SQLite file: {sqlite_problem(exc)}")
        finally:
            conn.close()

    # ---- retention -------------------------------------------------------------------------

    def export(self, path: Path | str, fmt: str = "jsonl", *, since: datetime | int | None = None,
               until: datetime | int | None = None, who: str = "") -> ExportResult:
        """Write the records from the first at or after ``since`` to the last before ``until``
        (every seq in between, so an export is one contiguous stretch of the chain) to a new file,
        then note the export in the chain: an "export" record with the range, the file name and
        the file's SHA-256. Only exported records may be pruned. The two steps are also
        :meth:`write_export_file` and :meth:`note_export`, for a caller that must do the long
        one (the file) apart from its other writes."""
        return self.note_export(self.write_export_file(path, fmt, since=since, until=until), who=who)

    def write_export_file(self, path: Path | str, fmt: str = "jsonl", *, since: datetime | int | None = None,
                          until: datetime | int | None = None) -> ExportFile:
        """The first step of :meth:`export`: the file, written and fsynced from one read snapshot
        on its own connection (appends go on meanwhile), not yet noted in the chain."""
        target = Path(path).absolute()
        reader = _connect(self.path, readonly=True)
        try:
            reader.execute("BEGIN")
            first, last = _seq_range(reader, None if since is None else to_ns(since),
                                     None if until is None else to_ns(until))
            if first is None or last is None or first > last:
                raise JournalExportError(f"journal {self.path}: no records to export in that range")
            count, digest = write_export(target, fmt, _batches(reader, first, last))
        except sqlite3.Error as exc:
            raise JournalCorrupt(self.path, None,
                                 f"damaged SQLite file while exporting: {sqlite_problem(exc)}") from None
        finally:
            reader.close()
        return ExportFile(target, fmt, first, last, count, digest)

    def note_export(self, written: ExportFile, *, who: str = "") -> ExportResult:
        """The second step of :meth:`export`: the "export" record, and the range in ``exports``
        (what makes the records prunable), in one transaction."""
        data = {"file": str(written.path), "format": written.fmt, "sha256": written.sha256,
                "first_seq": written.first_seq, "last_seq": written.last_seq, "count": written.count,
                "message": f"exported {written.count} record(s) (seq {written.first_seq}..{written.last_seq}) "
                           f"to {written.path}"}
        note = Entry(kind=KIND_EXPORT, reason=REASON_EXPORTED, source="journal", who=who, data=data)
        note.check(journal_internal=True)

        def remember(conn: sqlite3.Connection, record_seq: int) -> None:
            conn.execute("INSERT INTO exports VALUES (?, ?, ?, ?, ?)", (record_seq, written.first_seq,
                                                                        written.last_seq, str(written.path),
                                                                        written.sha256))

        (record_seq,) = self._append(_encode([note], None), before_insert=remember)
        return ExportResult(written.path, written.fmt, written.first_seq, written.last_seq, written.count,
                            written.sha256, record_seq)

    def retention(self, now: datetime | int | None = None) -> RetentionStatus:
        """Where retention stands: what was pruned, exported, and what is still unexported (a
        few indexed lookups, never a walk)."""
        now_ns = self._clock() if now is None else to_ns(now)
        with self._lock:
            anchor_seq = self._guarded(lambda c: c.execute("SELECT seq FROM anchor").fetchone()[0])
            covered = self._guarded(lambda c: _exported_through(c, anchor_seq))
            oldest = self._guarded(lambda c: c.execute("SELECT ts FROM records WHERE seq = ?",
                                                       (covered + 1,)).fetchone())
            last_seq = self._head[0]
        status = RetentionStatus(pruned_through=anchor_seq, exported_through=covered, unexported=last_seq - covered,
                                 oldest_unexported=None, unexported_past_horizon=False, horizon_days=self.retention_days)
        return status if oldest is None else status.oldest_written(oldest[0], now_ns)

    def prune(self, now: datetime | int | None = None, *, who: str = "", max_records: int | None = None) -> PruneResult:
        """Delete the records older than the retention horizon that were exported, oldest first
        and without a gap, never past the latest snapshot. The anchor keeps the last pruned
        record's seq and hash so the chain still verifies, and a "prune" record notes it.
        ``max_records`` bounds one call (one transaction, holding the writer's lock): a caller
        with a long backlog calls again until ``pruned`` is 0."""
        now_ns = self._clock() if now is None else to_ns(now)
        cutoff = now_ns - self.retention_days * _DAY_NS
        with self._lock:
            anchor_seq = self._guarded(lambda c: c.execute("SELECT seq FROM anchor").fetchone()[0])
            through = self._guarded(lambda c: _prunable_through(c, anchor_seq, cutoff, max_records))
        if through <= anchor_seq:
            return PruneResult(0, anchor_seq, None)
        pruned = through - anchor_seq
        with self._lock:
            anchor_hash = self._guarded(lambda c: c.execute("SELECT hash FROM records WHERE seq = ?",
                                                            (through,)).fetchone()[0])
        note = Entry(kind=KIND_PRUNE, reason=REASON_PRUNED, source="journal", who=who,
                     data={"through_seq": through, "anchor_hash": anchor_hash.hex(), "count": pruned,
                           "horizon_days": self.retention_days, "cutoff": iso_ns(cutoff),
                           "message": f"pruned {pruned} record(s) (seq {anchor_seq + 1}..{through}): exported, "
                                      f"older than {self.retention_days} days"})
        note.check(journal_internal=True)

        def cut(conn: sqlite3.Connection, record_seq: int) -> None:
            """The anchor first (its trigger checks export and age), then the records up to it."""
            conn.execute("UPDATE anchor SET seq = ?, hash = ? WHERE id = 1", (through, anchor_hash))
            conn.execute("DELETE FROM records WHERE seq <= ?", (through,))
            conn.execute("DELETE FROM snapshots WHERE seq < ?", (through,))

        (record_seq,) = self._append(_encode([note], None), before_insert=cut)
        return PruneResult(pruned, through, record_seq)

    # ---- internals -------------------------------------------------------------------------

    def _require_writer(self) -> None:
        if self._lock_fd is None:
            raise JournalError(f"journal {self.path} is open read-only")

    def _guarded(self, read: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run a read on the main connection; damage reads as JournalCorrupt, never sqlite3."""
        try:
            return read(self._conn)
        except sqlite3.Error as exc:
            raise _as_journal_error(self.path, exc) from None

    def _mark_current_version(self) -> None:
        """An older journal opened for writing is marked with this release's version before the first
        record of the new form goes in (schema.SCHEMA_VERSION: the older records stay as they are)."""
        def mark(conn: sqlite3.Connection) -> None:
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        with self._lock:
            self._guarded(mark)

# ---- module helpers: opening --------------------------------------------------------------

def _open_checked(path: Path, readonly: bool, quick_check_records: int) -> tuple[sqlite3.Connection, CommittedHead]:
    """The journal's connection and its head, once the check on open found it sound. The check
    reads through a read-only connection, which leaves the file as it found it when it refuses:
    the last writable connection to close copies the WAL's readable part into the database file
    and deletes the WAL, and with a damaged WAL that is the frames after the damage, and the
    records in them, gone."""
    checker = _connect(path, readonly=True)
    try:
        head = _check_on_open(path, checker, quick_check_records)
        if readonly:
            return checker, head
        conn = _connect(path, readonly=False)
    except BaseException:
        checker.close()
        raise
    checker.close()  # after the writer's connection opened: not the last, so no checkpoint either way
    return conn, head


def _check_on_open(path: Path, conn: sqlite3.Connection, quick_check_records: int) -> CommittedHead:
    try:
        application_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if application_id != APPLICATION_ID:
            raise JournalCorrupt(path, None, f"an SQLite file but not a cardd journal "
                                 f"(application_id {application_id:#x})")
        if version not in READABLE_SCHEMA_VERSIONS:
            raise JournalError(f"journal {path} has schema version {version}; this cardd reads "
                               f"version{'s' if len(READABLE_SCHEMA_VERSIONS) > 1 else ''} "
                               f"{', '.join(map(str, READABLE_SCHEMA_VERSIONS))}")
        missing = _missing_guards(conn)
        if missing:
            raise JournalCorrupt(path, None, missing)
    except sqlite3.Error as exc:
        raise _as_journal_error(path, exc) from None
    outside = _look_outside(path)
    try:
        conn.execute("BEGIN")
        try:
            head_seq, head_hash = _quick_check(path, conn, quick_check_records, outside)
        finally:
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        error = _as_journal_error(path, exc)
        if isinstance(error, JournalCorrupt):  # a damaged page: walk the chain to name the first bad seq
            error = JournalCorrupt(path, _first_unreadable_seq(conn), error.problem)
        raise error from None
    return CommittedHead(head_seq, head_hash)


def _keep_head_file(path: Path, head: CommittedHead) -> HeadFile:
    try:
        return HeadFile.keep(path, head)
    except OSError as exc:
        full = _full_disk(path, exc)
        if full is not None:  # no room to make one (a journal of a release before it)
            raise _disk_full(path, full) from None
        raise JournalError(f"journal {path}: its head file {head_file_path(path)} cannot be written: "
                           f"{exc.strerror}") from None


def _create(path: Path) -> None:
    """Build the empty journal beside ``path`` and rename it into place, so a file at ``path``
    is always a whole journal (a crash mid-creation leaves only the temporary file)."""
    if not path.parent.is_dir():  # sqlite would only say "unable to open database file"
        raise JournalWriteError(f"journal {path} cannot be created: the directory {path.parent} does not exist")
    building = path.with_name(path.name + ".creating")
    for leftover in (building, Path(f"{building}-wal"), Path(f"{building}-shm")):
        leftover.unlink(missing_ok=True)
    try:
        conn = sqlite3.connect(building, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            conn.executescript(f"BEGIN; {SCHEMA} COMMIT;")
        finally:
            conn.close()  # the last connection checkpoints the WAL into the file and removes it
        with open(building, "rb+") as built:
            os.fsync(built.fileno())
        # a head file left by a journal that was here before (moved aside) is not this one's
        write_new(path, CommittedHead(0, GENESIS_HASH), like=building)
        os.rename(building, path)
        fsync_dir(path.parent)
    except (OSError, sqlite3.Error) as exc:
        building.unlink(missing_ok=True)
        if not path.exists():  # the head file written for the journal that was not made
            head_file_path(path).unlink(missing_ok=True)
        full = _full_disk(path, exc)
        if full is not None:
            raise JournalWriteError(f"journal {path} cannot be created: the disk holding it is full ({full[0]} bytes "
                                    f"free in {path.parent}; {full[1]}): free space there") from None
        why = sqlite_problem(exc) if isinstance(exc, sqlite3.Error) else exc.strerror or type(exc).__name__
        raise JournalWriteError(f"journal {path} cannot be created: {why}") from None


class WriterLock:
    """A journal's writer's lock held (:meth:`Journal.hold_writer_lock`) until it is handed to
    :meth:`Journal.open` or released."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def hand_over(self) -> int | None:
        """The lock's descriptor, now the taker's to close (None once handed over or released)."""
        fd, self._fd = self._fd, None
        return fd

    def release(self) -> None:
        _release(self.hand_over())


def _take_writer_lock(path: Path) -> int:
    lock_path = path.with_name(path.name + "-lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o640)
    except OSError as exc:
        raise JournalError(f"journal {path}: lock file {lock_path} cannot be opened: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise JournalBusy(f"journal {path} is open for writing elsewhere (lock {lock_path})") from None
    return fd


def _release(lock_fd: int | None) -> None:
    if lock_fd is not None:
        os.close(lock_fd)  # closing the descriptor drops the flock


def _connect(path: Path, readonly: bool) -> sqlite3.Connection:
    mode = "ro" if readonly else "rw"
    # A copy on a read-only disk (an archive, a mounted backup): SQLite cannot make the -shm a WAL
    # reader needs beside it. With no -wal to read either, the file alone is the whole journal and
    # cannot change, which is what SQLite's immutable mode reads.
    wal = path.with_name(path.name + "-wal")
    if readonly and not os.access(path.parent, os.W_OK) and not _size_or_none(wal):
        mode += "&immutable=1"
    try:
        conn = sqlite3.connect(f"file:{pathname2url(str(path))}?mode={mode}", uri=True, isolation_level=None,
                               check_same_thread=False)
    except sqlite3.Error as exc:
        raise _as_journal_error(path, exc) from None
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        if not readonly:
            mode_now = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode_now != "wal":
                raise JournalError(f"journal {path}: SQLite refused WAL mode (journal_mode {mode_now})")
        conn.execute("PRAGMA synchronous = FULL")
    except sqlite3.Error as exc:
        conn.close()
        raise _as_journal_error(path, exc) from None
    except BaseException:
        conn.close()
        raise
    return conn


def _size_or_none(file: Path) -> int | None:
    """``file``'s size, None when there is none: a WAL can go between any two looks at it (the
    daemon stopping checkpoints and removes it), so it is looked at once."""
    try:
        return file.stat().st_size
    except FileNotFoundError:
        return None


def _as_journal_error(path: Path, exc: sqlite3.Error) -> JournalError:
    full = _full_disk(path, exc)
    if full is not None:  # an I/O error on a full disk (the -shm cannot grow) is no damage
        return _disk_full(path, full)
    name = sqlite_code(exc) or ""
    if name.startswith("SQLITE_NOTADB"):  # SQLite's answer for another file and for a journal's damaged header alike
        return JournalCorrupt(path, None, f"not an SQLite database, or its header is damaged ({name})")
    if any(name.startswith(code) for code in _DAMAGE_CODES):
        return JournalCorrupt(path, None, f"damaged SQLite file: {sqlite_problem(exc)}")
    return JournalError(f"journal {path}: {sqlite_problem(exc)}")


def _disk_full(path: Path, full: tuple[int, str]) -> JournalWriteError:
    """What the journal says when the disk holding it is too full to open it (_full_disk's answer)."""
    return JournalWriteError(f"journal {path}: the disk holding it is full ({full[0]} bytes free in {path.parent}; "
                             f"{full[1]}): free space there; the journal is not damaged",
                             f"disk full: {full[0]} bytes free in {path.parent}")


def _full_disk(path: Path, exc: BaseException) -> tuple[int, str] | None:
    """(bytes free beside ``path``, what failed) when ``exc`` is how a full disk shows: ENOSPC, or an
    SQLite full or I/O error with under :data:`FULL_DISK_BYTES` free there; None otherwise."""
    if isinstance(exc, OSError):
        if exc.errno != errno.ENOSPC:
            return None
        what = exc.strerror or "no space left on device"
    else:
        code = sqlite_code(exc) or ""
        if not code.startswith(_FULL_DISK_CODES):
            return None
        what = f"SQLite {code}: {sqlite_meaning(exc)}"
    try:
        stat = os.statvfs(path.parent)
    except OSError:
        return None
    free = stat.f_bavail * stat.f_frsize
    return (free, what) if free < FULL_DISK_BYTES or isinstance(exc, OSError) else None


def _first_unreadable_seq(conn: sqlite3.Connection) -> int | None:
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        anchor_seq, anchor_hash = conn.execute("SELECT seq, hash FROM anchor").fetchone()
        result = walk(conn, anchor_seq, anchor_hash)
    except sqlite3.Error:
        return None
    return None if result.broken is None else result.broken.seq


def _quick_check(path: Path, conn: sqlite3.Connection, records: int, outside: "_Outside") -> tuple[int, bytes]:
    """The checks an open can afford on a 90-day journal; returns the head (seq, hash)."""
    head_seq, head_hash = conn.execute("SELECT seq, hash FROM head").fetchone()
    anchor_seq, anchor_hash = conn.execute("SELECT seq, hash FROM anchor").fetchone()
    # three statements, not one: min and max alone are one step each down the b-tree, and count(*)
    # alone counts the cells of each index page without reading a row (together: a scan of every
    # row, 0.45 s of a 5,000,000-record journal's start against 0.03)
    (low,), (high,), (count,) = (conn.execute(f"SELECT {aggregate} FROM records").fetchone()
                                 for aggregate in ("min(seq)", "max(seq)", "count(*)"))
    if high != (head_seq if head_seq > anchor_seq else None):
        last = high if high is not None else anchor_seq
        raise JournalCorrupt(path, min(last, head_seq) + 1,
                             f"the stored head is seq {head_seq} but the last record is seq {last} (records lost "
                             "at the end, or a stale head)")
    if high is not None and (low != anchor_seq + 1 or count != head_seq - anchor_seq):
        # a gap somewhere: the full walk names the first missing seq
        conn.execute("PRAGMA mmap_size = 0")
        full = _full_check(conn)
        raise JournalCorrupt(path, full.first_bad_seq, full.problem or
                             f"{count} records stored for seqs {anchor_seq + 1}..{head_seq}")
    start = max(anchor_seq, head_seq - records)
    start_hash = anchor_hash if start == anchor_seq else \
        conn.execute("SELECT hash FROM records WHERE seq = ?", (start,)).fetchone()[0]
    result = walk(conn, start, start_hash)
    if result.broken is not None:
        raise JournalCorrupt(path, result.broken.seq, result.broken.problem)
    if (result.last_seq, result.last_hash) != (head_seq, head_hash):
        raise JournalCorrupt(path, result.last_seq + 1, "the chain does not end at the stored head")
    problem_seq, problem = _problem_beyond_the_chain(conn, (anchor_seq, anchor_hash), (head_seq, head_hash), outside)
    if problem is not None:
        raise JournalCorrupt(path, problem_seq, problem)
    return head_seq, head_hash


def _missing_guards(conn: sqlite3.Connection) -> str | None:
    """What is wrong with the append-only guards (the triggers), or None: a check of their text,
    not only of their names, so a guard rewritten to guard nothing is refused like a dropped one."""
    present: dict[str, str | None] = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
    missing = TRIGGER_NAMES - present.keys()
    if missing:
        return f"the append-only guards {', '.join(sorted(missing))} are missing (the file was edited outside cardd)"
    altered = sorted(name for name in TRIGGER_NAMES if present[name] not in GUARD_FORMS[name])
    if altered:
        return f"the append-only guards {', '.join(altered)} were rewritten (the file was edited outside cardd)"
    foreign = sorted(present.keys() - TRIGGER_NAMES)
    if foreign:
        return f"triggers cardd does not make were added: {', '.join(foreign)} (the file was edited outside cardd)"
    return None


def _full_check(conn: sqlite3.Connection, path: Path | None = None, processes: int = 1,
                parallel_from: int = PARALLEL_VERIFY_RECORDS, outside: "_Outside | None" = None) -> VerifyResult:
    """The whole chain on ``conn``'s read snapshot; with ``path``, a long one in ``processes``
    stretches side by side (chain.walk_in_processes); with ``outside``, what the files beside the
    records say (the head committed, the file's size) checked against it too."""
    missing = _missing_guards(conn)
    if missing:
        return VerifyResult(False, 0, None, missing)
    head_seq, head_hash = conn.execute("SELECT seq, hash FROM head").fetchone()
    anchor_seq, anchor_hash = conn.execute("SELECT seq, hash FROM anchor").fetchone()
    if path is not None and processes > 1 and head_seq - anchor_seq >= parallel_from:
        result = walk_in_processes(path, conn, anchor_seq, anchor_hash, head_seq, processes)
    else:
        result = walk(conn, anchor_seq, anchor_hash)
    if result.broken is not None:
        return VerifyResult(False, result.checked, result.broken.seq, result.broken.problem)
    if (result.last_seq, result.last_hash) != (head_seq, head_hash):
        return VerifyResult(False, result.checked, min(result.last_seq, head_seq) + 1,
                            f"the chain ends at seq {result.last_seq} but the stored head is seq {head_seq}")
    problem_seq, problem = _problem_beyond_the_chain(conn, (anchor_seq, anchor_hash), (head_seq, head_hash), outside)
    if problem is not None:
        return VerifyResult(False, result.checked, problem_seq, problem)
    return VerifyResult(True, result.checked, None, None)


@dataclass(frozen=True, slots=True)
class _Outside:
    """What the journal's files say beside its records, read before the read snapshot the check
    runs on begins, so neither can be ahead of it: the head file is written after each commit
    returned, and the database file grows only to pages already committed (a checkpoint copies
    them, and sizes the file for them first)."""
    path: Path
    committed: CommittedHead | None  # the head file's, None when there is none
    size: int  # the database file's bytes
    wal_bytes: int  # its WAL's (0 when there is none)


def _look_outside(path: Path) -> _Outside:
    committed = read_head_file(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise JournalError(f"journal {path} cannot be looked at: {exc.strerror}") from None
    try:
        wal_bytes = journal_files(path)[1].stat().st_size
    except OSError:
        wal_bytes = 0
    return _Outside(path, committed, size, wal_bytes)


def _problem_beyond_the_chain(conn: sqlite3.Connection, anchor: tuple[int, bytes], head: tuple[int, bytes],
                              outside: _Outside | None) -> tuple[int | None, str | None]:
    """Once the chain is sound up to the stored head: the anchor, the latest snapshot, the head
    committed and the file's size, the first problem found (seq, what) or (None, None)."""
    found = [_anchor_problem(conn, *anchor), _snapshot_problem(conn, head[0])]
    if outside is not None:
        found += [_committed_problem(conn, outside, anchor, head), (None, _size_problem(conn, outside))]
    return next(((seq, problem) for seq, problem in found if problem is not None), (None, None))


def _committed_problem(conn: sqlite3.Connection, outside: _Outside, anchor: tuple[int, bytes],
                       head: tuple[int, bytes]) -> tuple[int | None, str | None]:
    """The chain must hold the last record its head file says was committed, as committed: the
    WAL read only up to a damaged frame is a shorter chain, sound in itself, without the commits
    after the damage."""
    committed = outside.committed
    if committed is None:
        return None, None
    noted = f"its head file {head_file_path(outside.path).name} holds seq {committed.seq}"
    if committed.seq > head[0]:
        first = head[0] + 1
        lost = f"record {first} was" if first == committed.seq else f"records {first}..{committed.seq} were"
        return first, (f"{lost} committed but the journal ends at seq {head[0]} ({noted}): its WAL was damaged "
                       "or removed, or the file was replaced by an older copy")
    if committed.seq < anchor[0]:
        return None, None  # pruned since (a head file behind by months: nothing left to compare it with)
    stored: bytes | None
    if committed.seq == head[0]:
        stored = head[1]
    elif committed.seq == anchor[0]:
        stored = anchor[1]
    else:
        row = conn.execute("SELECT hash FROM records WHERE seq = ?", (committed.seq,)).fetchone()
        stored = None if row is None else row[0]
    if stored != committed.hash:
        return committed.seq, (f"record {committed.seq} is not the record committed as seq {committed.seq} "
                               f"({noted} with another hash): the chain up to it was rewritten or replaced")
    return None, None


def _size_problem(conn: sqlite3.Connection, outside: _Outside) -> str | None:
    """Every byte of the database file must be in one of its pages. SQLite reads a file only up to
    the size its header states and never looks at what follows, so bytes appended to it would pass
    every other check (and the next complete checkpoint cuts them off unseen). The file may end
    before its last page (pages only the WAL holds yet, a checkpoint cut short; a page cut short
    is found by the walk that reads it), never after it: the journal never shrinks (no VACUUM;
    pruned pages stay, free)."""
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    end, size = page_size * pages, outside.size
    if size > end and (size - end) % page_size == 0 and outside.wal_bytes > 0:
        return None  # whole pages a checkpoint copied from WAL frames a power cut then lost: not appended
    if size > end:
        return (f"{size - end} bytes follow the last of its {pages} pages (byte {end} on, of {size}): "
                "appended to the file, or its WAL lost pages it had")
    return None


def _anchor_problem(conn: sqlite3.Connection, anchor_seq: int, anchor_hash: bytes) -> tuple[int | None, str | None]:
    """The anchor must be what the latest prune record says (it is after the anchor, so kept)."""
    if anchor_seq == 0:
        return None, None if anchor_hash == GENESIS_HASH else "the anchor of an unpruned journal is not zero"
    row = conn.execute("SELECT seq, data FROM records INDEXED BY records_reason WHERE reason = ? AND reason <> '' AND kind = ? "
                       "ORDER BY seq DESC LIMIT 1", (REASON_PRUNED, KIND_PRUNE)).fetchone()
    if row is None:
        return anchor_seq + 1, "records before this seq were removed without a prune record"
    noted = json.loads(row[1])
    if noted.get("through_seq") != anchor_seq or noted.get("anchor_hash") != anchor_hash.hex():
        return row[0], f"the anchor (seq {anchor_seq}) is not the one this prune record notes"
    return None, None


def _snapshot_problem(conn: sqlite3.Connection, head_seq: int) -> tuple[int | None, str | None]:
    row = conn.execute("SELECT seq, sha256, data FROM snapshots ORDER BY seq DESC LIMIT 1").fetchone()
    if row is None:
        return None, None
    seq, digest, text = row
    if seq > head_seq:
        return seq, f"a snapshot claims seq {seq}, after the head (seq {head_seq})"
    if hashlib.sha256(text.encode()).digest() != digest:
        return seq, "the snapshot after this seq is damaged (its SHA-256 does not match)"
    return None, None


# ---- module helpers: reading and writing --------------------------------------------------

def _records(cursor: sqlite3.Cursor) -> list[Record]:
    return [Record(*row) for row in cursor.fetchall()]


def _batches(conn: sqlite3.Connection, first: int, last: int) -> Iterator[list[Record]]:
    cursor = conn.execute(f"SELECT {RECORD_COLUMNS} FROM records WHERE seq BETWEEN ? AND ? ORDER BY seq",
                          (first, last))
    while rows := cursor.fetchmany(BATCH):
        yield [Record(*row) for row in rows]


def _seq_range(conn: sqlite3.Connection, since: int | None, until: int | None) -> tuple[int | None, int | None]:
    first = conn.execute("SELECT min(seq) FROM records" + ("" if since is None else " WHERE ts >= ?"),
                         () if since is None else (since,)).fetchone()[0]
    last = conn.execute("SELECT max(seq) FROM records" + ("" if until is None else " WHERE ts < ?"),
                        () if until is None else (until,)).fetchone()[0]
    return first, last


def _exported_through(conn: sqlite3.Connection, anchor_seq: int) -> int:
    """The last seq that exports cover without a gap from the anchor on (the anchor if none)."""
    covered = anchor_seq
    for first, last in conn.execute("SELECT first_seq, last_seq FROM exports WHERE last_seq > ? ORDER BY first_seq",
                                    (anchor_seq,)):
        if first > covered + 1:
            break
        covered = max(covered, last)
    return covered


def _prunable_through(conn: sqlite3.Connection, anchor_seq: int, cutoff: int, max_records: int | None) -> int:
    """The last seq prune may delete: exported without a gap from the anchor, older than the
    cutoff from the anchor on, not past the latest snapshot, at most ``max_records`` on (which
    also bounds the search for the first young record)."""
    covered = _exported_through(conn, anchor_seq)
    if max_records is not None:
        covered = min(covered, anchor_seq + max_records)
    if covered == anchor_seq:
        return anchor_seq
    young = conn.execute("SELECT min(seq) FROM records WHERE seq > ? AND seq <= ? AND ts >= ?",
                         (anchor_seq, covered, cutoff)).fetchone()[0]
    through = covered if young is None else young - 1
    snapshot = conn.execute("SELECT max(seq) FROM snapshots").fetchone()[0]
    if snapshot is not None:
        through = min(through, snapshot)
    return through


#: INSERT statements of 2**k records each, from _INSERT_ROWS_MIN to _INSERT_ROWS_MAX (and of one): a
#: statement of many rows costs SQLite and the sqlite3 module less a row than a statement a row (the
#: statement journal the triggers need, and the statement's set-up, once and not per row), but with
#: triggers SQLite first copies a statement's rows into a temporary table, which costs about what
#: four rows save: fewer rows go one statement each. A few sizes, so the statements stay cached.
_INSERT_ROWS_MIN = 8
_INSERT_ROWS_MAX = 64
_RECORD_FIELDS = len(RECORD_COLUMNS.split(","))
#: the round column's parameter is its text or records.NO_ROUND, an int, which stands for NULL
_INSERT_ROW = "(" + ",".join("nullif(?, 0)" if column.strip() == "round" else "?"
                             for column in RECORD_COLUMNS.split(",")) + ")"
_INSERT_ROWS = {rows: f"INSERT INTO records ({RECORD_COLUMNS}) VALUES " + ",".join([_INSERT_ROW] * rows)
                for rows in (1, *(1 << k for k in range(_INSERT_ROWS_MIN.bit_length() - 1,
                                                        _INSERT_ROWS_MAX.bit_length())))}


def _insert_records(cursor: sqlite3.Cursor, values: list[Any], count: int) -> None:
    """Insert ``count`` records, ``values`` their columns row after row (records.chain_values), in
    order. Each row still goes through the triggers, which see the rows before it, of its own
    statement too."""
    done, width = 0, _RECORD_FIELDS
    while count - done >= _INSERT_ROWS_MIN:
        rows = min(_INSERT_ROWS_MAX, 1 << ((count - done).bit_length() - 1))
        cursor.execute(_INSERT_ROWS[rows], values if rows == count else values[done * width:(done + rows) * width])
        done += rows
    if done < count:
        cursor.executemany(_INSERT_ROWS[1], [values[at:at + width] for at in range(done * width, count * width, width)])


def _write_snapshot(conn: sqlite3.Connection, seq: int, text: str) -> None:
    conn.execute("INSERT OR REPLACE INTO snapshots VALUES (?, ?, ?)", (seq, hashlib.sha256(text.encode()).digest(), text))
    conn.execute("DELETE FROM snapshots WHERE seq < (SELECT seq FROM snapshots ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                 (KEEP_SNAPSHOTS - 1,))

