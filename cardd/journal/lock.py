"""The journal's writer's lock: an flock on ``<journal>-lock`` that keeps a second writer out."""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .errors import JournalBusy, JournalError


class WriterLock:
    """A journal's writer's lock held (:meth:`Journal.hold_writer_lock`) until it is handed to
    :meth:`Journal.open` or released."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def hand_over(self) -> int | None:
        """The lock's descriptor, now the taker's to close (None once handed over or released)."""
        fd, self._fd = self._fd, None
        return fd

    def release(self) -> None:
        release_lock(self.hand_over())


def take_writer_lock(path: Path) -> int:
    lock_path = path.with_name(path.name + "-lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o640)
    except OSError as exc:
        raise JournalError(f"journal {path}: lock file {lock_path} cannot be opened: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise JournalBusy(f"journal {path} is open for writing elsewhere (lock {lock_path})") from None
    return fd


def release_lock(lock_fd: int | None) -> None:
    if lock_fd is not None:
        os.close(lock_fd)  # closing the descriptor drops the flock
