"""A real full disk for a test: a small tmpfs mounted over a directory in a mount namespace of its
own (``unshare --mount``), so nothing of the machine's is touched and the mount goes away with
the namespace.

:class:`PrivateTmpfs` keeps the namespace alive with a holder process (``sleep``); commands run in
it through :attr:`PrivateTmpfs.enter` (``nsenter``: the same pid, so a signal reaches the command
itself), and the test reaches the directory from outside through ``/proc/HOLDER/root``
(:attr:`PrivateTmpfs.outside`) to fill it (:meth:`PrivateTmpfs.fill`), free it again, or copy a
file out. A one-shot command can take :func:`on_tmpfs` instead.
"""
from __future__ import annotations

import errno
import os
import subprocess
import time
from pathlib import Path
from types import TracebackType

#: root gets a plain mount namespace; anyone else a user namespace in which they are root
UNSHARE = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "--map-root-user", "--mount"]
#: the tmpfs: room for a journal, its WAL and its -shm, small enough to fill at once
TMPFS_SIZE = "2M"
FILLER = "filler"
#: mounts the tmpfs over $1 (size $0), then runs the rest of the command line in its place (same pid)
_MOUNT_THEN_EXEC = 'mount -t tmpfs -o size="$0",mode=0755 tmpfs "$1" && shift && exec "$@"'


def on_tmpfs(directory: Path, command: list[str], size: str = TMPFS_SIZE) -> list[str]:
    """``command`` run where ``directory`` (which must exist) is a new, empty tmpfs of ``size``, in a
    mount namespace of its own; it keeps the pid of the process started."""
    return [*UNSHARE, "sh", "-c", _MOUNT_THEN_EXEC, size, str(directory), *command]


def fill(directory: Path) -> int:
    """Write a filler file in ``directory`` until the disk is full (ENOSPC); returns its size."""
    fd = os.open(directory / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    written, chunk = 0, b"\0" * 4096
    try:
        while True:
            try:
                written += os.write(fd, chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                return written
    finally:
        os.close(fd)


def free_bytes(directory: Path) -> int:
    stat = os.statvfs(directory)
    return stat.f_bavail * stat.f_frsize


class PrivateTmpfs:
    """``directory`` (which must exist) as a new tmpfs of ``size`` in a mount namespace that lives
    until :meth:`close`."""

    def __init__(self, directory: Path, size: str = TMPFS_SIZE) -> None:
        self.directory = directory
        self.holder = subprocess.Popen(on_tmpfs(directory, ["sleep", "infinity"], size))
        self.outside = Path(f"/proc/{self.holder.pid}/root") / directory.relative_to("/")
        #: the prefix that runs a command in the namespace (the same pid: nsenter does not fork here)
        self.enter = ["nsenter", "--target", str(self.holder.pid), "--mount"] + \
            ([] if os.geteuid() == 0 else ["--user", "--preserve-credentials"])
        deadline = time.monotonic() + 10
        while not self._mounted():
            if self.holder.poll() is not None:
                raise AssertionError(f"the tmpfs was not mounted: {UNSHARE} exited with {self.holder.returncode}")
            assert time.monotonic() < deadline, "the tmpfs was never mounted"
            time.sleep(0.01)

    def _mounted(self) -> bool:
        try:
            mounts = Path(f"/proc/{self.holder.pid}/mounts").read_text()
        except OSError:
            return False
        return any(line.split()[1:3] == [str(self.directory), "tmpfs"] for line in mounts.splitlines())

    def fill(self) -> int:
        """Fill the disk from outside; returns the filler's size."""
        return fill(self.outside)

    def free(self) -> None:
        """Remove the filler: the disk has room again."""
        (self.outside / FILLER).unlink()

    def free_bytes(self) -> int:
        return free_bytes(self.outside)

    def close(self) -> None:
        if self.holder.poll() is None:
            self.holder.kill()
        self.holder.wait(timeout=10)

    def __enter__(self) -> PrivateTmpfs:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
