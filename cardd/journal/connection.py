"""Opening an SQLite connection to a journal file, and an SQLite error said as a journal error
(damage, a full disk, or a refusal), never raw."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.request import pathname2url

from .disk_full import disk_full_error, full_disk
from .errors import JournalCorrupt, JournalError
from .files import wal_path
from .sqlite_errors import sqlite_code, sqlite_problem

# SQLite result codes that mean the file itself is damaged or is not a database
_DAMAGE_CODES = {"SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_IOERR", "SQLITE_FORMAT"}


def connect(path: Path, readonly: bool) -> sqlite3.Connection:
    mode = "ro" if readonly else "rw"
    # A copy on a read-only disk (an archive, a mounted backup): SQLite cannot make the -shm a WAL
    # reader needs beside it. With no -wal to read either, the file alone is the whole journal and
    # cannot change, which is what SQLite's immutable mode reads.
    wal = wal_path(path)
    if readonly and not os.access(path.parent, os.W_OK) and not _size_or_none(wal):
        mode += "&immutable=1"
    try:
        conn = sqlite3.connect(f"file:{pathname2url(str(path))}?mode={mode}", uri=True, isolation_level=None,
                               check_same_thread=False)
    except sqlite3.Error as exc:
        raise as_journal_error(path, exc) from None
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        if not readonly:
            mode_now = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode_now != "wal":
                raise JournalError(f"journal {path}: SQLite refused WAL mode (journal_mode {mode_now})")
        conn.execute("PRAGMA synchronous = FULL")
    except sqlite3.Error as exc:
        conn.close()
        raise as_journal_error(path, exc) from None
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


def as_journal_error(path: Path, exc: sqlite3.Error) -> JournalError:
    full = full_disk(path, exc)
    if full is not None:  # an I/O error on a full disk (the -shm cannot grow) is no damage
        return disk_full_error(path, full)
    name = sqlite_code(exc) or ""
    if name.startswith("SQLITE_NOTADB"):  # SQLite's answer for another file and for a journal's damaged header alike
        return JournalCorrupt(path, None, f"not an SQLite database, or its header is damaged ({name})")
    if any(name.startswith(code) for code in _DAMAGE_CODES):
        return JournalCorrupt(path, None, f"damaged SQLite file: {sqlite_problem(exc)}")
    return JournalError(f"journal {path}: {sqlite_problem(exc)}")
