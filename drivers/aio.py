"""The asyncio helpers the layers share (drivers is the lowest layer with a loop, so they live here)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from time import monotonic
from typing import Any, Callable


async def cancel_and_wait(task: asyncio.Task | None) -> None:
    """Cancel ``task`` and wait until it has finished, so nothing of it runs after close."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


@dataclass(slots=True)
class _Window:
    start: float
    written: int = 0
    suppressed: int = 0
    timer: asyncio.TimerHandle | None = None


class RateLimitedLog:
    """A log whose repeated lines are rate-limited and summarised: a device can send a RESET or
    a bad frame thousands of times a second, and the log must stay readable.

    Per kind of line (the event name and ``key``, e.g. the link event), at most ``burst`` lines
    are written per ``interval_s``; the rest are counted, and one ``log_rate_limited`` line per
    interval says how many of which kind were left out (written when the interval ends, or at
    the next line of that kind when no loop runs). ``clock`` is monotonic seconds (injectable).
    """

    def __init__(self, log: Any, interval_s: float = 1.0, burst: int = 5,
                 clock: Callable[[], float] | None = None) -> None:
        self._log, self.interval_s, self.burst = log, interval_s, burst
        self._clock = clock
        self._windows: dict[tuple[str, str], _Window] = {}

    def info(self, event: str, key: str = "", **fields: Any) -> None:
        self._line("info", event, key, fields)

    def warning(self, event: str, key: str = "", **fields: Any) -> None:
        self._line("warning", event, key, fields)

    def error(self, event: str, key: str = "", **fields: Any) -> None:
        self._line("error", event, key, fields)

    def flush(self, event: str, key: str = "") -> None:
        """End this kind's interval now: its summary (if any was left out) is written, and its next
        line is written again (a trouble that ended and may come back)."""
        self._summarise((event, key))

    def _line(self, level: str, event: str, key: str, fields: dict[str, Any]) -> None:
        now = (self._clock or monotonic)()
        kind = (event, key)
        window = self._windows.get(kind)
        if window is None or now - window.start >= self.interval_s:
            if window is not None:
                self._summarise(kind)
            window = self._windows[kind] = _Window(now)
        if window.written < self.burst:
            window.written += 1
            getattr(self._log, level)(event, **fields)
            return
        window.suppressed += 1
        if window.timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # summarised at the next line of this kind
            window.timer = loop.call_later(self.interval_s, self._summarise, kind)

    def _summarise(self, kind: tuple[str, str]) -> None:
        window = self._windows.pop(kind, None)
        if window is None:
            return
        if window.timer is not None:
            window.timer.cancel()
        if window.suppressed:
            event, key = kind
            self._log.warning("log_rate_limited", line=event, key=key, written=window.written,
                              suppressed=window.suppressed, interval_s=self.interval_s)
