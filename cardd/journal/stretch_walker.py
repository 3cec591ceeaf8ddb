"""One stretch of a journal's hash chain walked in a process of its own (a parallel verify).

    python -m cardd.journal.stretch_walker PATH FIRST THROUGH ANCHOR_SEQ ANCHOR_HASH_HEX

prints one JSON line (chain.stretch_to_json), or null when this process's read snapshot has
another anchor than the parent's (a prune in between: the parent walks the stretch itself).
"""
from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

from .chain import Stretch, stretch_to_json, walk_stretch
from .connection import connect
from .errors import JournalError
from .integrity import MMAP_BYTES
from .sqlite_errors import sqlite_problem


def walk_file(path: Path, first: int, through: int, anchor_seq: int, anchor_hash: bytes) -> Stretch | None:
    conn = connect(path, readonly=True)
    try:
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        conn.execute("BEGIN")
        if conn.execute("SELECT seq, hash FROM anchor").fetchone() != (anchor_seq, anchor_hash):
            return None
        return walk_stretch(conn, first, through, anchor_hash if first == anchor_seq + 1 else None)
    finally:
        conn.close()


def main(argv: list[str]) -> int:
    path, first, through, anchor_seq, anchor_hash = argv
    try:  # a verify asked of a live daemon must not take a core from its card path
        os.nice(10)
    except OSError:  # refused (the unit's SystemCallFilter=~@resources): walk at the parent's priority
        pass
    try:
        found = walk_file(Path(path), int(first), int(through), int(anchor_seq), bytes.fromhex(anchor_hash))
    except (JournalError, sqlite3.Error, OSError, ValueError) as exc:  # the parent walks the stretch itself
        why = (sqlite_problem(exc) if isinstance(exc, sqlite3.Error) else exc.strerror or type(exc).__name__
               if isinstance(exc, OSError) else str(exc))
        print(f"stretch {first}..{through} of {path}: {why}", file=sys.stderr)
        return 1
    print(stretch_to_json(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
