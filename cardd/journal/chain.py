"""Walking the hash chain: the full verify and the quick check on open share this one loop, kept
tight (rows in batches, the body built by SQLite, one hashlib call per record); a long chain
is walked in stretches side by side, one process each, and the seams checked after.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .schema import BODY_FORMAT, SQL_BODY
from .sqlite_errors import sqlite_problem

BATCH = 8192
#: the module a stretch's process runs (cardd/journal/stretch_walker.py)
STRETCH_WALKER = "cardd.journal.stretch_walker"
#: a stretch's process that has not answered after this long (it reads at 300,000+ records a
#: second) is given up and its stretch walked here instead
STRETCH_SECONDS_PER_RECORD = 1e-4
_LAST_SEQ = (1 << 63) - 1  # SQLite's largest integer: "to the end"


@dataclass(frozen=True, slots=True)
class ChainBreak:
    seq: int
    problem: str


@dataclass(frozen=True, slots=True)
class WalkResult:
    checked: int
    last_seq: int
    last_hash: bytes
    broken: ChainBreak | None


def walk(conn: sqlite3.Connection, after_seq: int, after_hash: bytes, batch_size: int = BATCH,
         through_seq: int | None = None) -> WalkResult:
    """Check every record after ``after_seq`` (up to ``through_seq``, or to the end) in order:
    consecutive seqs, each prev the hash before it, each hash SHA-256(prev || body). Stops at
    the first break; a damaged page is the break at the first record that cannot be read."""
    sha256 = hashlib.sha256
    expected, last = after_seq + 1, after_hash  # expected - 1 - after_seq records checked so far
    cursor = conn.cursor()
    try:
        cursor.execute(f"SELECT seq, prev, hash, {SQL_BODY} FROM records WHERE seq > ? AND seq <= ? ORDER BY seq",
                       (BODY_FORMAT, after_seq, _LAST_SEQ if through_seq is None else through_seq))
        while batch := cursor.fetchmany(batch_size):
            for seq, prev, digest, body in batch:
                if seq != expected or prev != last or sha256(prev + body).digest() != digest:
                    return WalkResult(expected - 1 - after_seq, expected - 1, last,
                                      _diagnose(seq, expected, prev, last, body, digest))
                expected += 1
                last = digest
    except sqlite3.DatabaseError as exc:
        if batch_size > 1:  # the damage is somewhere in this batch: walk it again one row at a time
            cursor.close()
            again = walk(conn, expected - 1, last, batch_size=1, through_seq=through_seq)
            return WalkResult(again.last_seq - after_seq, again.last_seq, again.last_hash, again.broken)
        return WalkResult(expected - 1 - after_seq, expected - 1, last,
                          ChainBreak(expected, f"damaged SQLite file: {sqlite_problem(exc)}"))
    finally:
        cursor.close()
    return WalkResult(expected - 1 - after_seq, expected - 1, last, None)


def _diagnose(seq: int, expected: int, prev: bytes, last: bytes, body: bytes, digest: bytes) -> ChainBreak:
    if seq < expected:
        return ChainBreak(expected, f"record seq {seq} is out of order")
    if seq > expected:
        missing = f"record {expected}" if seq == expected + 1 else f"records {expected}..{seq - 1}"
        return ChainBreak(expected, f"{missing} missing (deleted?)")
    if prev != last:
        return ChainBreak(seq, "its previous-hash does not match the record before it (deleted, inserted or reordered?)")
    if hashlib.sha256(prev + body).digest() != digest:
        return ChainBreak(seq, "its hash does not match its content (edited?)")
    return ChainBreak(seq, "unexplained chain break")  # pragma: no cover - the caller saw a break


# ---- a long chain in stretches, one process each ---------------------------------------------

@dataclass(frozen=True, slots=True)
class Stretch:
    """Records ``first`` .. ``through`` (None: to the end) walked on their own: ``first_prev``
    is the previous-hash record ``first`` carries (None when it cannot be read), which the
    stretch before must end with; ``walked`` is what the walk from there found."""
    first: int
    through: int | None
    first_prev: bytes | None
    walked: WalkResult


def walk_stretch(conn: sqlite3.Connection, first: int, through: int | None, after_hash: bytes | None = None) -> Stretch:
    """Walk one stretch from ``after_hash`` (the chain's first stretch: the anchor's hash) or,
    when it is None, from the previous-hash its first record carries (checked at the seam)."""
    if after_hash is None:
        try:
            after_hash = _stored(conn, "prev", first)
        except sqlite3.DatabaseError:
            after_hash = None
        if after_hash is None:  # the caller's walk across the seam names what is wrong
            return Stretch(first, through, None, WalkResult(0, first - 1, b"", ChainBreak(first, "cannot be read")))
    return Stretch(first, through, after_hash, walk(conn, first - 1, after_hash, through_seq=through))


def join_stretches(conn: sqlite3.Connection, after_seq: int, after_hash: bytes, stretches: list[Stretch]) -> WalkResult:
    """The walk of the whole chain from its stretches in order. Up to the first stretch that is
    not clean (a break in it, a previous-hash at its seam that is not the hash before it, or
    records missing at its end) the stretches stand; from there the chain is walked again here
    in one walk, so the first break, its problem and the count are the ones a single walk
    finds: damage costs one stretch walked twice, a sound chain nothing."""
    checked, last_seq, last_hash = 0, after_seq, after_hash
    for stretch in stretches:
        walked = stretch.walked
        if (walked.broken is not None or stretch.first_prev != last_hash
                or (stretch.through is not None and walked.last_seq != stretch.through)):
            rest = walk(conn, last_seq, last_hash)
            return WalkResult(checked + rest.checked, rest.last_seq, rest.last_hash, rest.broken)
        checked += walked.checked
        last_seq, last_hash = walked.last_seq, walked.last_hash
    return WalkResult(checked, last_seq, last_hash, None)


def walk_in_processes(path: Path, conn: sqlite3.Connection, after_seq: int, after_hash: bytes, head_seq: int,
                      processes: int) -> WalkResult:
    """:func:`walk` from ``after_seq`` (the anchor) to the end, in ``processes`` stretches: the
    last walked here on ``conn`` (the caller's read snapshot, so records appended since are
    not read: the last stretch ends where this snapshot ends), the others each by a process of
    its own reading the file at ``path``. A stretch whose process fails, times out or finds the
    anchor moved (a prune since this snapshot began) is walked here instead: the result is
    always the one a single walk on ``conn`` gives, only sooner."""
    size = (head_seq - after_seq) // processes
    if size < 1:
        return walk(conn, after_seq, after_hash)
    cuts = [after_seq + size * number for number in range(processes)]
    bounds = [(cut + 1, next_cut) for cut, next_cut in zip(cuts, cuts[1:])]
    started: list[subprocess.Popen[str] | None] = []
    try:
        started += (_start_walker(path, first, through, after_seq, after_hash) for first, through in bounds)
        mine = walk_stretch(conn, cuts[-1] + 1, None)
        stretches = [_stretch_from(walker, conn, first, through, after_seq, after_hash)
                     for walker, (first, through) in zip(started, bounds)]
    finally:
        for walker in started:
            if walker is None:
                continue
            if walker.poll() is None:
                walker.kill()
                walker.wait()
            if walker.stdout is not None:
                walker.stdout.close()
    return join_stretches(conn, after_seq, after_hash, stretches + [mine])


def _start_walker(path: Path, first: int, through: int, anchor_seq: int,
                  anchor_hash: bytes) -> subprocess.Popen[str] | None:
    try:
        return subprocess.Popen([sys.executable, "-m", STRETCH_WALKER, os.fspath(path), str(first), str(through),
                                 str(anchor_seq), anchor_hash.hex()],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return None  # no process to be had: the stretch is walked here


def _stretch_from(walker: subprocess.Popen[str] | None, conn: sqlite3.Connection, first: int, through: int,
                  anchor_seq: int, anchor_hash: bytes) -> Stretch:
    """A stretch as its process found it, or walked here when the process gave nothing usable."""
    own_hash = anchor_hash if first == anchor_seq + 1 else None
    if walker is not None:
        try:
            output, _ = walker.communicate(timeout=max(60.0, (through - first) * STRETCH_SECONDS_PER_RECORD))
            found = stretch_from_json(output) if walker.returncode == 0 else None
            if found is not None and _agrees(conn, found, first, through, own_hash):
                return found
        except subprocess.TimeoutExpired:
            pass
    return walk_stretch(conn, first, through, own_hash)


def _agrees(conn: sqlite3.Connection, found: Stretch, first: int, through: int, own_hash: bytes | None) -> bool:
    """Whether a process's stretch is the one asked for and, when it says the stretch is sound,
    ties to this snapshot: every record counted, and the first previous-hash and the last hash
    the ones ``conn`` holds (a process that lies about them, or read another chain, is not
    believed; the records in between it alone has read: a file replaced while a verify runs by
    a copy of the same chain with other content under unchanged hashes would pass). A stretch
    with a break needs no such check: the caller walks the chain again from there."""
    if (found.first, found.through) != (first, through):
        return False
    walked = found.walked
    if walked.broken is not None:
        return True
    try:
        first_prev = own_hash if own_hash is not None else _stored(conn, "prev", first)
        last_hash = _stored(conn, "hash", through)
    except sqlite3.DatabaseError:
        return False
    return (walked.checked == through - first + 1 and walked.last_seq == through
            and found.first_prev == first_prev and last_hash is not None and walked.last_hash == last_hash)


def _stored(conn: sqlite3.Connection, column: str, seq: int) -> bytes | None:
    """Record ``seq``'s ``prev`` or ``hash`` as ``conn`` holds it (None: no such record)."""
    row = conn.execute(f"SELECT {column} FROM records WHERE seq = ?", (seq,)).fetchone()
    return None if row is None else row[0]


def stretch_to_json(stretch: Stretch | None) -> str:
    """One line for the parent: the stretch, or null when the anchor moved under this process."""
    if stretch is None:
        return "null"
    walked = stretch.walked
    return json.dumps({"first": stretch.first, "through": stretch.through,
                       "first_prev": None if stretch.first_prev is None else stretch.first_prev.hex(),
                       "checked": walked.checked, "last_seq": walked.last_seq, "last_hash": walked.last_hash.hex(),
                       "broken": None if walked.broken is None else [walked.broken.seq, walked.broken.problem]})


def stretch_from_json(text: str) -> Stretch | None:
    """The parent's reading of :func:`stretch_to_json`; None for anything else (then the parent
    walks the stretch itself, as it does when a sound stretch does not tie to its own snapshot)."""
    try:
        found = json.loads(text)
        broken = found["broken"]
        first_prev = found["first_prev"]
        return Stretch(int(found["first"]), int(found["through"]),
                       None if first_prev is None else bytes.fromhex(first_prev),
                       WalkResult(int(found["checked"]), int(found["last_seq"]), bytes.fromhex(found["last_hash"]),
                                  None if broken is None else ChainBreak(int(broken[0]), str(broken[1]))))
    except (ValueError, TypeError, KeyError, IndexError):
        return None
