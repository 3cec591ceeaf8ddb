"""Telling a full disk from damage: an SQLite I/O or "full" error, or ENOSPC, with little space
left beside the journal is the disk being full, said as such (docs/journal.md, "When the disk is
full"), never read as a corrupt journal."""
from __future__ import annotations

import errno
import os
from pathlib import Path

from .errors import JournalWriteError
from .sqlite_errors import sqlite_code, sqlite_meaning

#: with less than this free beside the journal, an SQLite I/O or "full" error is the disk being full
#: (SQLite says SQLITE_IOERR_SHMSIZE when the -shm cannot grow, SQLITE_FULL when a page cannot be
#: written): never read as damage
FULL_DISK_BYTES = 1 << 20
_FULL_DISK_CODES = ("SQLITE_FULL", "SQLITE_IOERR")


def disk_full_error(path: Path, full: tuple[int, str]) -> JournalWriteError:
    """What the journal says when the disk holding it is too full to open it (full_disk's answer)."""
    return JournalWriteError(f"journal {path}: the disk holding it is full ({full[0]} bytes free in {path.parent}; "
                             f"{full[1]}): free space there; the journal is not damaged",
                             f"disk full: {full[0]} bytes free in {path.parent}")


def full_disk(path: Path, exc: BaseException) -> tuple[int, str] | None:
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
