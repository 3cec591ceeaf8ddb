"""The head file (``<journal>-head``): the seq and hash of the last record the journal committed,
kept outside SQLite, so records a damaged WAL lost are named, not missed. Two slots of one CRC'd
line each, written after each commit, fsynced at the checkpoint: never ahead of the journal.
docs/journal.md, "The file", says why and how.
"""
from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from .errors import JournalCorrupt, JournalError
from .files import fsync_dir

SUFFIX = "-head"
SLOT_BYTES = 4096
_SLOTS = 2
_LINE = re.compile(rb"cardd-journal-head seq=(\d{20}) hash=([0-9a-f]{64}) crc=([0-9a-f]{8})\n")


@dataclass(frozen=True, slots=True)
class CommittedHead:
    seq: int
    hash: bytes


def head_file_path(journal: Path) -> Path:
    return journal.with_name(journal.name + SUFFIX)


def _slot_text(head: CommittedHead) -> bytes:
    line = f"cardd-journal-head seq={head.seq:020d} hash={head.hash.hex()}".encode()
    return line + f" crc={zlib.crc32(line):08x}\n".encode()


def _parse_slot(raw: bytes) -> CommittedHead | None:
    found = _LINE.match(raw)
    if found is None:
        return None
    line = raw[:found.start(3) - len(b" crc=")]
    if zlib.crc32(line) != int(found.group(3), 16):
        return None
    return CommittedHead(int(found.group(1)), bytes.fromhex(found.group(2).decode()))


def _read_slots(fd: int) -> list[CommittedHead | None]:
    return [_parse_slot(os.pread(fd, SLOT_BYTES, slot * SLOT_BYTES)) for slot in range(_SLOTS)]


def _latest(slots: list[CommittedHead | None]) -> tuple[int, CommittedHead] | None:
    """(slot, head) of the readable slot with the higher seq; None when none reads back."""
    readable = [(head.seq, slot, head) for slot, head in enumerate(slots) if head is not None]
    if not readable:
        return None
    _, slot, head = max(readable)
    return slot, head


def read_head_file(journal: Path) -> CommittedHead | None:
    """The head the journal at ``journal`` last committed, as its head file says; None when there
    is no head file (a journal of a release before it, or a copy made without it).
    :class:`JournalCorrupt` when it is there but neither slot reads back whole (what was committed
    cannot be told), :class:`JournalError` when it cannot be read."""
    path = head_file_path(journal)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JournalError(f"journal {journal}: its head file {path} cannot be read: {exc.strerror}") from None
    try:
        latest = _latest(_read_slots(fd))
    except OSError as exc:
        raise JournalError(f"journal {journal}: its head file {path} cannot be read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if latest is None:
        raise JournalCorrupt(journal, None, f"its head file {path} is damaged (neither of its slots reads back "
                                            "whole): what was committed cannot be checked")
    return latest[1]


class HeadFile:
    """The head file, open for writing by the journal's one writer."""

    def __init__(self, fd: int, next_slot: int) -> None:
        self._fd: int | None = fd
        self._next_slot = next_slot
        self._unsynced = False

    @classmethod
    def keep(cls, journal: Path, head: CommittedHead) -> "HeadFile":
        """The head file of ``journal``, made (whole, by a rename) when it is missing and brought to
        ``head``, the journal's head just checked; fsynced."""
        path = head_file_path(journal)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            write_new(journal, head, like=journal)
            fd = os.open(path, os.O_RDWR)
        try:
            latest = _latest(_read_slots(fd))
            kept = cls(fd, 0 if latest is None else 1 - latest[0])
            if latest is None or latest[1] != head:
                kept.record(head.seq, head.hash)
                kept.sync()
        except BaseException:
            os.close(fd)
            raise
        return kept

    def record(self, seq: int, digest: bytes) -> None:
        """Note a commit that has returned. A write the disk refuses is let go: the file then says
        less than was committed (what the next commit's write makes good), which reads as sound;
        raising here would tell the caller that records now in the journal were not written."""
        if self._fd is None:
            return
        try:
            os.pwrite(self._fd, _slot_text(CommittedHead(seq, bytes(digest))), self._next_slot * SLOT_BYTES)
        except OSError:
            return
        self._next_slot = 1 - self._next_slot
        self._unsynced = True

    def sync(self) -> None:
        """Make the last commit noted durable (off the commit's path: the journal's checkpoint)."""
        if self._fd is None or not self._unsynced:
            return
        self._unsynced = False
        try:
            os.fdatasync(self._fd)
        except OSError:
            self._unsynced = True  # tried again at the next sync

    def close(self) -> None:
        if self._fd is not None:
            self.sync()
            os.close(self._fd)
            self._fd = None


def write_new(journal: Path, head: CommittedHead, like: Path) -> None:
    """A new head file for ``journal`` holding ``head`` in both slots, built beside it and renamed
    into place (a crash leaves the old file or the whole new one, never half of it), with the
    permissions and, for root, the owner of ``like`` (the journal's database file), as SQLite
    gives the -wal and -shm it makes."""
    path = head_file_path(journal)
    building = path.with_name(path.name + ".new")
    shown = like.stat()
    fd = os.open(building, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        try:
            os.fchmod(fd, shown.st_mode & 0o777)
            if os.geteuid() == 0:
                os.fchown(fd, shown.st_uid, shown.st_gid)
            text = _slot_text(head)
            for slot in range(_SLOTS):
                os.pwrite(fd, text, slot * SLOT_BYTES)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(building, path)
    except BaseException:
        building.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
