"""systemd's sd_notify protocol, and a watchdog that pings only while the event loop turns.

The protocol is one datagram of ``KEY=value`` lines sent to the AF_UNIX socket named by
``$NOTIFY_SOCKET`` (a path, or ``@name`` in the abstract namespace); docs/dependencies.md says
why it is written here rather than taken from a library. Without ``$NOTIFY_SOCKET`` (not
started by systemd, or ``Type=`` is not notify) every call does nothing.

    notifier = Notifier.from_environment()
    watchdog = Watchdog(notifier)
    watchdog.start()                           # WATCHDOG=1 every WATCHDOG_USEC / 2 while the loop turns
    notifier.ready("dealing: shoe 3, round 41") # READY=1 only once the journal is open and the API listens
    watchdog.status("shoe 3: round 42 open")    # STATUS=, shown by `systemctl status cardd`
    notifier.stopping()
    await watchdog.stop()
"""
from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Mapping

import structlog

from drivers.aio import cancel_and_wait

log = structlog.get_logger(__name__)

#: STATUS= is one line of the datagram; longer text is cut (systemctl shows one line anyway)
MAX_STATUS = 200


class Notifier:
    """Sends sd_notify messages to ``address`` (None: every call is a no-op)."""

    def __init__(self, address: str | None, watchdog_usec: int | None = None) -> None:
        self.address = address
        #: half the service's WatchdogSec=, as systemd recommends; None when there is no watchdog
        self.watchdog_interval = watchdog_usec / 2_000_000 if watchdog_usec else None
        self._socket: socket.socket | None = None
        self._failed = False  # a refused send is logged once, not every ping

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Notifier:
        """From ``NOTIFY_SOCKET``, ``WATCHDOG_USEC`` and ``WATCHDOG_PID`` (the watchdog is ours
        only when WATCHDOG_PID is unset or names this process, as in sd_watchdog_enabled)."""
        env = os.environ if environ is None else environ
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        mine = usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid()))
        return cls(env.get("NOTIFY_SOCKET") or None, int(usec) if mine else None)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def notify(self, *assignments: str) -> bool:
        """Send ``KEY=value`` lines in one datagram; False if not sent (disabled or refused)."""
        if self.address is None:
            return False
        # abstract namespace: '@name' is '\0name' on the wire
        target = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        try:
            if self._socket is None:
                self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._socket.sendto("\n".join(assignments).encode(), target)
        except OSError as exc:
            if not self._failed:
                log.warning("sd_notify_failed", socket=self.address, reason=exc.strerror or str(exc))
            self._failed = True
            return False
        self._failed = False
        return True

    def ready(self, status: str | None = None) -> bool:
        return self.notify("READY=1", *self._status(status))

    def status(self, text: str) -> bool:
        return self.notify(*self._status(text))

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def stopping(self, status: str | None = None) -> bool:
        return self.notify("STOPPING=1", *self._status(status))

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    @staticmethod
    def _status(text: str | None) -> list[str]:
        if text is None:
            return []
        # a newline would start another assignment (device text could say READY=1): one printable line
        line = "".join(c if c.isprintable() else " " for c in text)
        return [f"STATUS={line[:MAX_STATUS]}"]


class Watchdog:
    """Pings systemd's watchdog from a task on the event loop: a loop blocked for longer than
    WatchdogSec= sends nothing, and systemd restarts the daemon. Also keeps STATUS= current."""

    def __init__(self, notifier: Notifier, interval: float | None = None) -> None:
        self.notifier = notifier
        self.interval = interval if interval is not None else notifier.watchdog_interval
        self._task: asyncio.Task[None] | None = None
        self._status: str | None = None

    def start(self) -> None:
        """Start pinging on the running loop (nothing to do without a watchdog interval)."""
        if self.interval is not None and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(self.interval), name="sd-watchdog")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    def status(self, text: str) -> None:
        """STATUS=text, sent only when it changed (callers may say the same thing every tick)."""
        if text != self._status:
            self._status = text
            self.notifier.status(text)

    async def _run(self, interval: float) -> None:
        while True:
            self.notifier.watchdog()
            await asyncio.sleep(interval)
