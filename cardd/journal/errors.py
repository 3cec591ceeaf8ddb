"""What the journal refuses or cannot do: one error class per kind of trouble, all CarddErrors."""
from __future__ import annotations

from pathlib import Path

from core.errors import CarddError


class JournalError(CarddError):
    """Anything the journal refused or could not do; the text names the file."""


class JournalNotFound(JournalError):
    """The journal file does not exist and the caller did not ask to create one."""


class JournalBusy(JournalError):
    """Another process (or another Journal object) already holds the journal for writing."""


class JournalConfigError(JournalError, ValueError):
    """A journal setting that cannot be used (a retention horizon under the legal minimum)."""


class JournalEntryError(JournalError, ValueError):
    """An entry the journal refuses: a field with control characters, data that is not JSON."""


class JournalWriteError(JournalError):
    """A write the file system or SQLite refused (disk full, read-only file); nothing was written.

    ``cause`` says what went wrong in a few words without the journal's name (``disk full: 4096
    bytes free in /var/lib/cardd``): what the daemon shows in STATUS= and in its ERROR lines."""

    def __init__(self, message: str, cause: str | None = None) -> None:
        super().__init__(message)
        self.cause = message if cause is None else cause


class JournalExportError(JournalError):
    """An export that cannot be made (target exists, empty range, unknown format)."""


class JournalCorrupt(JournalError):
    """The journal is damaged or is not a journal: a broken hash chain, a damaged SQLite file,
    a file that is not SQLite. The caller must refuse to deal rather than start a new chain.

    ``seq`` is the first sequence number found bad, or None when the damage is not in a record
    (not a database, unreadable file)."""

    def __init__(self, path: Path | str, seq: int | None, problem: str) -> None:
        self.path, self.seq, self.problem = Path(path), seq, problem
        where = f"at seq {seq}" if seq is not None else "(first bad seq unknown)"
        super().__init__(f"journal {self.path} is corrupt {where}: {problem}")
