"""A simulated device behind a real pseudo-terminal: the host opens ``path`` with pyserial.

The simulator owns the master side and also keeps the slave open (raw mode), so the line
settings hold and the master never sees EIO while the host closes and reopens the port.
``path`` is a symlink (given with ``link``, or named by the device's role in ``directory``, else
in a private temp dir) that always points at the current pty: a ``disconnect_for`` fault closes
the pty (the host reads EIO, as on an unplug) and later makes a new one behind the same path, as
udev does on a replug. A private temp dir is removed when the endpoint stops, so a process killed
with SIGKILL leaves it behind: a caller with a directory of its own gives that.
"""
from __future__ import annotations

import errno
import os
import shutil
import tempfile
import tty
from typing import Any, Callable

import structlog

from simulators.endpoint import D, Endpoint

log = structlog.get_logger(__name__)

READ_CHUNK = 4096


class PtyEndpoint(Endpoint[D]):
    def __init__(self, device: D, *, link: str | None = None, directory: str | os.PathLike[str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(device, **kwargs)
        #: the stable path the host opens (a symlink to the current pty)
        self.path: str
        self._tmpdir: str | None = None
        if link:
            self.path = link
        else:
            if directory is None:
                directory = self._tmpdir = tempfile.mkdtemp(prefix="cardd-sim-")
            self.path = os.path.join(directory, device.ROLE.name.lower())
        #: the pty behind ``path`` right now
        self.tty: str | None = None
        self._master = self._slave = -1
        self._pending = bytearray()
        self._writer_armed = False  # _drain waits for the pty to take more (the bytes are in _pending)
        self._corked = False  # taking in the host's bytes: what that makes the device send goes in one write
        #: called on the device's loop each time it is about to write bytes to its line (what it
        #: sent before then is in them): benchmarks/daemon.py stamps the cards it sent with it
        self.on_write: Callable[[], None] | None = None

    @property
    def url(self) -> str:
        return f"serial://{self.path}"

    def _open_raw(self) -> None:
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)
        os.set_blocking(self._master, False)
        self.tty = os.ttyname(self._slave)
        tmp = f"{self.path}.new"
        try:
            if os.path.lexists(tmp):
                os.unlink(tmp)
            os.symlink(self.tty, tmp)
            os.replace(tmp, self.path)  # atomic: the host never sees a missing link mid-swap
        except OSError:
            os.close(self._master)  # no path to reach it: give the pty back
            os.close(self._slave)
            self._master = self._slave = -1
            raise
        assert self.loop is not None
        self.loop.add_reader(self._master, self._readable)
        log.info("sim_pty_open", device=self.device.serial, path=self.path, tty=self.tty)

    def _close_raw(self) -> None:
        self._unplug()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)

    def _unplug(self) -> None:
        if self._master < 0:
            return
        assert self.loop is not None
        self.loop.remove_reader(self._master)
        self.loop.remove_writer(self._master)
        self._writer_armed = False
        os.close(self._master)
        os.close(self._slave)
        self._master = self._slave = -1
        self._pending.clear()
        if os.path.islink(self.path):
            os.unlink(self.path)

    def _replug(self) -> None:
        self._open_raw()

    def _readable(self) -> None:
        try:
            data = os.read(self._master, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError as exc:
            if exc.errno == errno.EIO:
                return  # no reader on the slave side just now: nothing to read
            raise
        if data:
            self._from_host(data)

    def _from_host(self, data: bytes) -> None:
        # the frames the host's bytes release (the ACKs let the window send more) are written
        # together once they are all taken in: the same bytes in the same order, one write
        # instead of one a frame (each write is a syscall and wakes the host for a read of its
        # own, and each of its reads is an ACK for this side to take in)
        self._corked = True
        try:
            super()._from_host(data)
        finally:  # whatever happened, what was sent goes out
            self._corked = False
            if self._pending and not self._writer_armed:
                self._drain()

    def _write_raw(self, data: bytes) -> None:
        if self._master < 0:
            return  # unplugged: bytes go nowhere, like a cable that is out
        waiting = bool(self._pending)  # if so, the writer callback is armed or the write corked: queue behind it
        self._pending += data
        if not waiting and not self._corked:
            self._drain()

    def _drain(self) -> None:
        assert self.loop is not None
        if self.on_write is not None:
            self.on_write()
        try:
            while self._pending:
                n = os.write(self._master, self._pending)
                del self._pending[:n]
        except BlockingIOError:
            if not self._writer_armed:
                self.loop.add_writer(self._master, self._drain)
                self._writer_armed = True
            return
        if self._writer_armed:
            self.loop.remove_writer(self._master)
            self._writer_armed = False
