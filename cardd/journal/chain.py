"""Walking the hash chain: the full verify and the quick check on open share this one loop.

The loop is kept tight (rows in batches, the body built by SQLite, one hashlib call per
record) because a 90-day journal has millions of records and must verify at >= 500,000/s.
"""
from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass

from .schema import BODY_FORMAT, SQL_BODY

BATCH = 8192


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


def walk(conn: sqlite3.Connection, after_seq: int, after_hash: bytes, batch_size: int = BATCH) -> WalkResult:
    """Check every record after ``after_seq`` in order: consecutive seqs, each prev the hash
    before it, each hash SHA-256(prev || body). Stops at the first break; a damaged page is
    the break at the first record that cannot be read."""
    sha256 = hashlib.sha256
    expected, last = after_seq + 1, after_hash
    checked = 0
    cursor = conn.cursor()
    try:
        cursor.execute(f"SELECT seq, prev, hash, {SQL_BODY} FROM records WHERE seq > ? ORDER BY seq",
                       (BODY_FORMAT, after_seq))
        while batch := cursor.fetchmany(batch_size):
            for seq, prev, digest, body in batch:
                if seq != expected or prev != last or sha256(prev + body).digest() != digest:
                    return WalkResult(checked, expected - 1, last, _diagnose(seq, expected, prev, last, body, digest))
                expected += 1
                last = digest
            checked += len(batch)
    except sqlite3.DatabaseError as exc:
        if batch_size > 1:  # the damage is somewhere in this batch: walk it again one row at a time
            cursor.close()
            again = walk(conn, expected - 1, last, batch_size=1)
            return WalkResult(checked + again.checked, again.last_seq, again.last_hash, again.broken)
        return WalkResult(checked, expected - 1, last, ChainBreak(expected, f"damaged SQLite file ({exc})"))
    finally:
        cursor.close()
    return WalkResult(checked, expected - 1, last, None)


def _diagnose(seq: int, expected: int, prev: bytes, last: bytes, body: bytes, digest: bytes) -> ChainBreak:
    if seq < expected:
        return ChainBreak(expected, f"record seq {seq} is out of order")
    if seq > expected:
        missing = f"{expected}" if seq == expected + 1 else f"{expected}..{seq - 1}"
        return ChainBreak(expected, f"record(s) {missing} missing (deleted?)")
    if prev != last:
        return ChainBreak(seq, "its previous-hash does not match the record before it (deleted, inserted or reordered?)")
    if hashlib.sha256(prev + body).digest() != digest:
        return ChainBreak(seq, "its hash does not match its content (edited?)")
    return ChainBreak(seq, "unexplained chain break")  # pragma: no cover - the caller saw a break
