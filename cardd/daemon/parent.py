"""``cardd --stop-with-parent PID``: the daemon stops, as on SIGTERM, once the process that started
it has ended, whatever ended it (SIGKILL, the OOM killer). For programs that start cardd as their
child (cardbench, the demo): a SIGKILL gives them no chance to stop it, and an orphaned daemon
holds its ptys, its socket and its journal for ever. systemd never passes it; without it nothing
is watched.

Not ``PR_SET_PDEATHSIG``: it fires when the *thread* that forked the child exits, not the process,
and cardbench starts its daemons from worker threads (``run --jobs``); setting it takes a
``preexec_fn``, unsafe in a threaded program. Instead, a pidfd of the parent (Linux >= 5.3): it
turns readable once the whole process has exited, a reader on the daemon's loop that costs nothing
meanwhile. Where ``pidfd_open`` is missing, ``getppid()`` is compared on the daemon's 1 s status
tick: once the parent has ended, the kernel has handed cardd to init (or a subreaper).
"""
from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

import structlog

log = structlog.get_logger(__name__)


def not_the_parent(pid: int) -> str | None:
    """Why ``--stop-with-parent pid`` cannot be honoured (one line), None if ``pid`` is the parent."""
    parent = os.getppid()
    if parent == pid:
        return None
    return (f"--stop-with-parent {pid}: process {pid} is not cardd's parent (that is {parent}; or it has ended "
            f"already): the option takes the pid of the program that starts cardd")


class ParentWatch:
    """Calls ``on_gone`` once, when the process ``pid`` (cardd's parent) has ended."""

    def __init__(self, pid: int, on_gone: Callable[[], None]) -> None:
        self.pid = pid
        self._on_gone = on_gone
        self._pidfd: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._gone = False

    @property
    def by(self) -> str:
        """How it watches: "pidfd" or "getppid" (the fallback)."""
        return "getppid" if self._pidfd is None else "pidfd"

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except ProcessLookupError:  # ended and reaped already
            self._ended()
            return
        except (AttributeError, OSError):  # no pidfd_open here (Python, kernel or seccomp): the tick's getppid
            self._pidfd = None
        else:
            self._loop = loop
            loop.add_reader(self._pidfd, self._ended)
        # The parent may have ended before the pidfd was opened, its pid then reused by another
        # process: getppid says (it changes the moment the parent exits, before its pid is freed).
        if os.getppid() != self.pid:
            self._ended()
        else:
            log.info("cardd stops when its parent ends (--stop-with-parent)", parent=self.pid, watched_by=self.by)

    def check(self) -> None:
        """The fallback, on the status tick: nothing to do when the pidfd watches."""
        if self._pidfd is None and not self._gone and os.getppid() != self.pid:
            self._ended()

    def close(self) -> None:
        if self._pidfd is not None:
            if self._loop is not None:
                self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd, self._loop = None, None

    def _ended(self) -> None:
        if self._loop is not None and self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)  # readable for good: once is enough
            self._loop = None
        if self._gone:
            return
        self._gone = True
        log.warning("the process that started cardd has ended (--stop-with-parent): stopping", parent=self.pid)
        self._on_gone()
