"""The journal's storage: opening (and creating) the file, appending in one transaction,
reading back (snapshots, replay, queries) and the checkpoint; the integrity checks, retention,
the writer's lock and the full-disk diagnosis live in modules of their own. One process writes;
readers may open it read-only. Every public method is safe to call from several threads.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Collection, Mapping, Sequence

from .connection import as_journal_error, connect
from .disk_full import disk_full_error, full_disk
from .errors import JournalConfigError, JournalCorrupt, JournalError, JournalNotFound, JournalWriteError
from .files import fsync_dir, wal_path
from .head_file import CommittedHead, HeadFile, head_file_path, write_new
from .integrity import PARALLEL_VERIFY_RECORDS, QUICK_CHECK_RECORDS, VerifyResult, open_checked, verify_file
from .lock import WriterLock, release_lock, take_writer_lock
from .records import (GENESIS_HASH, SEVERITIES, Entry, Record, canonical_json, chain_values, check_entries,
                      plain_canonical_json, reference_canonical_json, to_ns)
from .retention import (BeforeInsert, ExportFile, ExportResult, PruneResult, RetentionStatus, export_note,
                        exported_through, prunable_through, prune_note, write_export_file)
from .schema import DAY_NS, DELIVERY, DELIVERY_CHAIN, MIN_RETENTION_DAYS, RECORD_COLUMNS, SCHEMA, SCHEMA_VERSION
from .sqlite_errors import sqlite_problem

KEEP_SNAPSHOTS = 3
#: seqs per lookup of :meth:`Journal.chain_hashes` (under SQLite's limit of bound parameters)
_SEQS_PER_QUERY = 500


@dataclass(frozen=True, slots=True)
class ChainHashes:
    """What :meth:`Journal.chain_hashes` read: the prune anchor (the last pruned record's seq and
    hash; 0 and zero bytes before any prune), the head's seq, and the hashes of the records asked
    for that the journal holds."""
    anchor_seq: int
    anchor_hash: bytes
    head_seq: int
    hashes: dict[int, bytes]


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
class Delivery:
    """The floor export's cursor: every record through ``delivered_through`` was acknowledged by a
    broker, ``chain`` is the export chain's hash of that record as the export noted it (None: none
    noted yet, or by a release before the chain); ``session`` counts the export's broker connections."""
    delivered_through: int
    session: int
    chain: str | None = None


def journal_files(path: Path) -> tuple[Path, ...]:
    """The files the journal at ``path`` is kept in: its database file, SQLite's WAL and -shm
    beside it, and its head file (head_file.py). A copy of the journal is a copy of all that exist."""
    return (path, wal_path(path), path.with_name(path.name + "-shm"), head_file_path(path))


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
            release_lock(held)
            raise
        lock_fd = held if held is not None or readonly else take_writer_lock(path)
        try:
            conn, head = open_checked(path, readonly, quick_check_records)
        except BaseException:
            release_lock(lock_fd)
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
        return WriterLock(take_writer_lock(Path(path).absolute()))

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
                release_lock(self._lock_fd)
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
                before_insert: BeforeInsert | None = None) -> list[int]:
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
                full = full_disk(self.path, exc)
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
                    self._checkpointer = connect(self.path, readonly=False)
                _busy, wal_pages, copied = self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except sqlite3.Error as exc:
                raise as_journal_error(self.path, exc) from None
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
              min_severity: str | None = None, round_id: int | str | None = None, who: str | None = None,
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
        for column, value in (("kind", kind), ("source", source), ("who", who)):
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
        return verify_file(self.path, processes, parallel_from)

    def chain_hashes(self, seqs: Collection[int]) -> ChainHashes:
        """The chain hash of each record of ``seqs`` the journal holds, with where the chain
        starts (the prune anchor) and ends (the head), all from one read snapshot: what a check
        against hashes kept elsewhere (journal/anchors.py) compares with."""
        wanted = sorted(set(seqs))

        def read(conn: sqlite3.Connection) -> ChainHashes:
            conn.execute("BEGIN")
            try:
                found: dict[int, bytes] = {}
                for start in range(0, len(wanted), _SEQS_PER_QUERY):
                    part = wanted[start:start + _SEQS_PER_QUERY]
                    found.update(conn.execute(f"SELECT seq, hash FROM records WHERE seq IN ({','.join('?' * len(part))})",
                                              part).fetchall())
                anchor_seq, anchor_hash = conn.execute("SELECT seq, hash FROM anchor").fetchone()
                (head_seq,) = conn.execute("SELECT seq FROM head").fetchone()
            finally:
                conn.execute("COMMIT")
            return ChainHashes(anchor_seq, bytes(anchor_hash), head_seq, {seq: bytes(h) for seq, h in found.items()})

        with self._lock:
            result: ChainHashes = self._guarded(read)
            return result

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
        return write_export_file(self.path, Path(path).absolute(), fmt, None if since is None else to_ns(since),
                                 None if until is None else to_ns(until))

    def note_export(self, written: ExportFile, *, who: str = "") -> ExportResult:
        """The second step of :meth:`export`: the "export" record, and the range in ``exports``
        (what makes the records prunable), in one transaction."""
        note, remember = export_note(written, who)
        (record_seq,) = self._append(_encode([note], None), before_insert=remember)
        return ExportResult(written.path, written.fmt, written.first_seq, written.last_seq, written.count,
                            written.sha256, record_seq)

    def retention(self, now: datetime | int | None = None) -> RetentionStatus:
        """Where retention stands: what was pruned, exported, and what is still unexported (a
        few indexed lookups, never a walk)."""
        now_ns = self._clock() if now is None else to_ns(now)
        with self._lock:
            anchor_seq = self._guarded(lambda c: c.execute("SELECT seq FROM anchor").fetchone()[0])
            covered = self._guarded(lambda c: exported_through(c, anchor_seq))
            oldest = self._guarded(lambda c: c.execute("SELECT ts FROM records WHERE seq = ?",
                                                       (covered + 1,)).fetchone())
            last_seq = self._head[0]
        status = RetentionStatus(pruned_through=anchor_seq, exported_through=covered, unexported=last_seq - covered,
                                 oldest_unexported=None, unexported_past_horizon=False, horizon_days=self.retention_days)
        return status if oldest is None else status.oldest_written(oldest[0], now_ns)

    def prune(self, now: datetime | int | None = None, *, who: str = "", max_records: int | None = None,
              keep_after: int | None = None) -> PruneResult:
        """Delete the records older than the retention horizon that were exported, oldest first
        and without a gap, never past the latest snapshot. The anchor keeps the last pruned
        record's seq and hash so the chain still verifies, and a "prune" record notes it.
        ``max_records`` bounds one call (one transaction, holding the writer's lock): a caller
        with a long backlog calls again until ``pruned`` is 0. ``keep_after``: no record after it goes
        (the floor export's cursor, while export is on: a record not yet delivered is kept)."""
        now_ns = self._clock() if now is None else to_ns(now)
        cutoff = now_ns - self.retention_days * DAY_NS
        with self._lock:
            anchor_seq = self._guarded(lambda c: c.execute("SELECT seq FROM anchor").fetchone()[0])
            through = self._guarded(lambda c: prunable_through(c, anchor_seq, cutoff, max_records))
        if keep_after is not None:
            through = max(anchor_seq, min(through, keep_after))
        if through <= anchor_seq:
            return PruneResult(0, anchor_seq, None)
        pruned = through - anchor_seq
        with self._lock:
            anchor_hash = self._guarded(lambda c: c.execute("SELECT hash FROM records WHERE seq = ?",
                                                            (through,)).fetchone()[0])
        note, cut = prune_note(anchor_seq, through, anchor_hash, self.retention_days, cutoff, who)
        (record_seq,) = self._append(_encode([note], None), before_insert=cut)
        return PruneResult(pruned, through, record_seq)

    # ---- the floor export's cursor (outside the chain) -------------------------------------

    def delivery(self) -> Delivery:
        """Where the floor export stands: the records a broker acknowledged, and its sessions."""
        with self._lock:
            columns = self._guarded(lambda c: {row[1] for row in c.execute("PRAGMA table_info(delivery)")})
            chain = "chain" if "chain" in columns else "NULL"  # an older journal, read-only: no chain noted
            row = None if not columns else self._guarded(lambda c: c.execute(
                f"SELECT delivered_through, session, {chain} FROM delivery WHERE id = 1").fetchone())
        return Delivery(0, 0) if row is None else Delivery(*row)  # an older journal, read-only: none

    def note_delivered(self, through: int, chain: str) -> None:
        """A broker acknowledged every record through ``through``, whose export chain hash is
        ``chain``: the cursor moves there with it, never back (one statement: both or neither)."""
        self._write_delivery("UPDATE delivery SET chain = CASE WHEN ?1 >= delivered_through THEN ?2 ELSE chain END, "
                             "delivered_through = max(delivered_through, ?1) WHERE id = 1",
                             (through, chain), "the export's cursor")

    def next_export_session(self) -> int:
        """A broker connection begins: its number, one more than the last (the status topic's ``session``)."""
        self._write_delivery("UPDATE delivery SET session = session + 1 WHERE id = 1", (), "the export's session")
        return self.delivery().session

    def _write_delivery(self, sql: str, args: tuple[int | str, ...], what: str) -> None:
        with self._lock:
            self._require_writer()
            try:
                self._conn.execute(sql, args)  # autocommit: one statement, one transaction
            except sqlite3.Error as exc:
                full = full_disk(self.path, exc)
                cause = (sqlite_problem(exc) if full is None
                         else f"disk full: {full[0]} bytes free in {self.path.parent}")
                raise JournalWriteError(f"journal {self.path}: {what} cannot be written: {cause}", cause) from None

    # ---- internals -------------------------------------------------------------------------

    def _require_writer(self) -> None:
        if self._lock_fd is None:
            raise JournalError(f"journal {self.path} is open read-only")

    def _guarded(self, read: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run a read on the main connection; damage reads as JournalCorrupt, never sqlite3."""
        try:
            return read(self._conn)
        except sqlite3.Error as exc:
            raise as_journal_error(self.path, exc) from None

    def _mark_current_version(self) -> None:
        """An older journal opened for writing is marked with this release's version before the first
        record of the new form goes in (schema.SCHEMA_VERSION: the older records stay as they are)."""
        def mark(conn: sqlite3.Connection) -> None:
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            columns = {row[1] for row in conn.execute("PRAGMA table_info(delivery)")}
            if not columns:
                conn.executescript(f"BEGIN; {DELIVERY} COMMIT;")
            elif "chain" not in columns:  # a cursor made before the export chain: NULL, none noted
                conn.execute(DELIVERY_CHAIN)
        with self._lock:
            self._guarded(mark)

def _keep_head_file(path: Path, head: CommittedHead) -> HeadFile:
    try:
        return HeadFile.keep(path, head)
    except OSError as exc:
        full = full_disk(path, exc)
        if full is not None:  # no room to make one (a journal of a release before it)
            raise disk_full_error(path, full) from None
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
        full = full_disk(path, exc)
        if full is not None:
            raise JournalWriteError(f"journal {path} cannot be created: the disk holding it is full ({full[0]} bytes "
                                    f"free in {path.parent}; {full[1]}): free space there") from None
        why = sqlite_problem(exc) if isinstance(exc, sqlite3.Error) else exc.strerror or type(exc).__name__
        raise JournalWriteError(f"journal {path} cannot be created: {why}") from None


# ---- module helpers ------------------------------------------------------------------------

def _records(cursor: sqlite3.Cursor) -> list[Record]:
    return [Record(*row) for row in cursor.fetchall()]



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

