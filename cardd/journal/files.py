"""The journal's files beside its database file: where SQLite's WAL is, and making a directory
entry durable (the one place the journal does)."""
from __future__ import annotations

import os
from pathlib import Path


def wal_path(journal: Path) -> Path:
    """SQLite's WAL of the journal at ``journal`` (``<journal>-wal``)."""
    return journal.with_name(journal.name + "-wal")


def fsync_dir(directory: Path) -> None:
    """fsync a directory, so a file created or renamed in it survives a power cut."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
