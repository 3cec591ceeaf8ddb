"""Whether a journal is sound: the check on open (the head, the last records of the chain, the
counts) and the full verify (the whole chain, walked in stretches side by side when long), each
also against what the files beside the records say (the head file, the file's size)."""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from .chain import walk, walk_in_processes
from .connection import as_journal_error, connect
from .errors import JournalCorrupt, JournalError
from .files import wal_path
from .head_file import CommittedHead, head_file_path, read_head_file
from .records import GENESIS_HASH, KIND_PRUNE, REASON_PRUNED
from .schema import APPLICATION_ID, GUARD_FORMS, READABLE_SCHEMA_VERSIONS, TRIGGER_NAMES
from .sqlite_errors import sqlite_problem

QUICK_CHECK_RECORDS = 1000  # records re-hashed on every open, back from the head
MMAP_BYTES = 1 << 30  # verify reads through a memory map: about 20 % faster on a big journal
#: verify walks a chain this long in stretches, one process per CPU (up to VERIFY_PROCESSES): below
#: it, starting a process costs more than it saves
PARALLEL_VERIFY_RECORDS = 200_000
VERIFY_PROCESSES = 4


@dataclass(frozen=True, slots=True)
class VerifyResult:
    ok: bool
    checked: int  # records re-hashed
    first_bad_seq: int | None
    problem: str | None

    def raise_if_bad(self, path: Path) -> None:
        if not self.ok:
            raise JournalCorrupt(path, self.first_bad_seq, self.problem or "chain broken")




def verify_file(path: Path, processes: int | None = None, parallel_from: int = PARALLEL_VERIFY_RECORDS) -> VerifyResult:
    """:meth:`Journal.verify` of the journal at ``path``, through a read-only connection of its own."""
    if processes is None:
        processes = min(len(os.sched_getaffinity(0)), VERIFY_PROCESSES)
    conn = connect(path, readonly=True)
    try:
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        try:
            outside = _look_outside(path)
        except JournalCorrupt as exc:
            return VerifyResult(False, 0, exc.seq, exc.problem)
        conn.execute("BEGIN")  # one read snapshot: the head and the records agree
        return _full_check(conn, path, processes, parallel_from, outside)
    except sqlite3.Error as exc:
        return VerifyResult(False, 0, None, f"damaged SQLite file: {sqlite_problem(exc)}")
    finally:
        conn.close()


def open_checked(path: Path, readonly: bool, quick_check_records: int) -> tuple[sqlite3.Connection, CommittedHead]:
    """The journal's connection and its head, once the check on open found it sound. The check
    reads through a read-only connection, which leaves the file as it found it when it refuses:
    the last writable connection to close copies the WAL's readable part into the database file
    and deletes the WAL, and with a damaged WAL that is the frames after the damage, and the
    records in them, gone."""
    checker = connect(path, readonly=True)
    try:
        head = _check_on_open(path, checker, quick_check_records)
        if readonly:
            return checker, head
        conn = connect(path, readonly=False)
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
        raise as_journal_error(path, exc) from None
    outside = _look_outside(path)
    try:
        conn.execute("BEGIN")
        try:
            head_seq, head_hash = _quick_check(path, conn, quick_check_records, outside)
        finally:
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        error = as_journal_error(path, exc)
        if isinstance(error, JournalCorrupt):  # a damaged page: walk the chain to name the first bad seq
            error = JournalCorrupt(path, _first_unreadable_seq(conn), error.problem)
        raise error from None
    return CommittedHead(head_seq, head_hash)


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
        wal_bytes = wal_path(path).stat().st_size
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
