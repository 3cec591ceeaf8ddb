"""An SQLite error said in the journal's words, by its result code, never by SQLite's or Python's text.

The result codes (``SQLITE_BUSY``, ``SQLITE_NOTADB`` ...) are SQLite's stable interface
(sqlite3.h); the message beside them is not, and Python adds its own. Every line the journal
gives a person about SQLite is built here: what the code means, and the code itself for
whoever looks it up (an extended code, ``SQLITE_IOERR_SHMSIZE``, names its primary one first).
"""
from __future__ import annotations

import re
import sqlite3

from .schema import LEGACY_APPEND_IN_ORDER, SCHEMA

#: the refusals the journal's own triggers raise (their text is the journal's, not SQLite's)
GUARD_REFUSALS = frozenset(text.replace("''", "'") for text in re.findall(
    r"RAISE\(ABORT, '((?:[^']|'')*)'\)", SCHEMA + LEGACY_APPEND_IN_ORDER))

#: SQLite's primary result codes and what each means for a journal file
_MEANING = {
    "SQLITE_ERROR": "SQLite refused a statement",
    "SQLITE_INTERNAL": "a fault inside SQLite",
    "SQLITE_PERM": "SQLite was denied access to the file",
    "SQLITE_ABORT": "SQLite aborted the statement",
    "SQLITE_BUSY": "the file is locked by another process",
    "SQLITE_LOCKED": "the file is locked by another connection",
    "SQLITE_NOMEM": "SQLite ran out of memory",
    "SQLITE_READONLY": "SQLite may not write the file (read-only)",
    "SQLITE_INTERRUPT": "SQLite was interrupted",
    "SQLITE_IOERR": "disk I/O error",
    "SQLITE_CORRUPT": "the database file is malformed",
    "SQLITE_NOTFOUND": "SQLite did not find what it looked for",
    "SQLITE_FULL": "the database or the disk is full",
    "SQLITE_CANTOPEN": "SQLite cannot open the file",
    "SQLITE_PROTOCOL": "SQLite's file locking failed",
    "SQLITE_SCHEMA": "the database's schema changed",
    "SQLITE_TOOBIG": "a text or blob too big for SQLite",
    "SQLITE_CONSTRAINT": "a constraint of the database refused the change",
    "SQLITE_MISMATCH": "a value of the wrong type for its column",
    "SQLITE_MISUSE": "SQLite was used wrongly (a fault in cardd)",
    "SQLITE_NOLFS": "large files are not supported on this system",
    "SQLITE_AUTH": "SQLite refused the access",
    "SQLITE_FORMAT": "the database's format is not SQLite's",
    "SQLITE_RANGE": "a statement's parameter out of range",
    "SQLITE_NOTADB": "not an SQLite database",
}


def sqlite_code(exc: BaseException) -> str | None:
    """The error's result code's name (``SQLITE_IOERR_SHMSIZE``); None when the error carries none
    (an error of Python's module, not of SQLite: a closed connection)."""
    name = getattr(exc, "sqlite_errorname", None)
    return name if isinstance(name, str) and name.startswith("SQLITE_") else None


def sqlite_problem(exc: sqlite3.Error) -> str:
    """``not an SQLite database (SQLITE_NOTADB)``: what the error's code means, and the code."""
    name = sqlite_code(exc)
    if name is None:
        return f"SQLite failed ({type(exc).__name__})"
    if name == "SQLITE_CONSTRAINT_TRIGGER" and str(exc) in GUARD_REFUSALS:  # one of the journal's own guards
        return f"{exc} ({name})"
    primary = "_".join(name.split("_")[:2])  # SQLITE_IOERR_SHMSIZE is an SQLITE_IOERR
    meaning = _MEANING.get(primary)
    return f"{meaning} ({name})" if meaning else f"SQLite failed ({name})"


def sqlite_meaning(exc: BaseException) -> str:
    """What the error's code means, without the code (``disk I/O error``)."""
    name = sqlite_code(exc)
    return _MEANING.get("_".join(name.split("_")[:2]), "SQLite failed") if name else "SQLite failed"
