"""Files a person named, checked in words (never the OS's "[Errno 2] ..."): why one cannot be read
(:func:`read_problem`), why its directory cannot take a new one (:func:`output_directory_problem`),
and the one way to read a whole file someone else named (:func:`read_regular_file`). One text for
every layer (cardctl and cardbench's options, cardd's configuration, the simulators' options),
which the caller prefixes with the option or key that named the file."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from core.errors import CarddError

#: what one read() asks for while a file is read whole
_READ_CHUNK = 1 << 20


class FileRefused(CarddError):
    """A named file that is not read at all: not a regular file, or larger than its reader takes."""


def read_regular_file(path: Path, limit: int) -> bytes:
    """The bytes of ``path`` when it is a regular file of at most ``limit`` bytes; else
    :class:`FileRefused` naming it, and nothing read. A device (``/dev/zero`` never ends), a FIFO
    (its open waits for a writer), a socket or a directory is refused from its ``stat`` before it
    is opened (opening a serial port alone moves its DTR line); the open never waits (``O_NONBLOCK``:
    one swapped in after the ``stat`` is refused from its ``fstat``), and at most ``limit + 1`` bytes
    are read, so a file that grows meanwhile is refused too. An OSError as the OS raises it
    (:func:`read_problem` words it). It blocks on the disk: call it off an event loop."""
    _check_kind(path, os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        _check_kind(path, info.st_mode)
        if info.st_size > limit:
            raise FileRefused(f"{path}: {info.st_size:,} bytes, more than the {limit:,} taken: not read")
        chunks, size = [], 0
        while chunk := os.read(fd, min(_READ_CHUNK, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise FileRefused(f"{path}: grew past the {limit:,} bytes taken while it was read: not read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _check_kind(path: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise FileRefused(f"{path}: {_kind(mode)}, not a regular file: not read")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def output_directory_problem(path: Path, who: str = "you") -> str | None:
    """Why a file could not be made at ``path`` because of its directory (missing, or not writable
    by ``who``, this process's user), or None: checked before a command's work, so that work does
    not end in a traceback (cardctl, cardbench), or before a service starts (cardd --check-config,
    which names its user: it runs as the service's)."""
    directory = path.absolute().parent
    if not directory.is_dir():
        return _missing_directory(path, directory)
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"{path}: permission denied: {who} cannot write in the directory {directory}"
    return None


def _missing_directory(path: Path, directory: Path) -> str:
    return f"{path}: the directory {directory} does not exist"


def read_problem(path: Path, exc: OSError) -> str:
    """``exc`` (raised opening or reading ``path``) as ``"<path>: <why>"``: a missing directory
    is named, as a missing file is told apart from it."""
    if isinstance(exc, FileNotFoundError):
        directory = path.absolute().parent
        return _missing_directory(path, directory) if not directory.is_dir() else f"{path}: no such file"
    if isinstance(exc, IsADirectoryError):
        return f"{path}: is a directory, not a file"
    if isinstance(exc, PermissionError):
        return f"{path}: permission denied: you cannot read it"
    return f"{path}: cannot be read: {exc.strerror or type(exc).__name__}"
