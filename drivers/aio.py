"""The asyncio helpers the layers share (drivers is the lowest layer with a loop, so they live here)."""
from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from time import monotonic
from typing import Any, Callable, Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)


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
class BudgetWindow:
    """One key's window of a :class:`WindowedBudget`."""

    start: float  # the budget's clock
    label: str = ""  # what the owner wants to say of the key when the window ends (a user name)
    used: int = 0
    held: Counter[str] = field(default_factory=Counter)  # what came past the budget, by name
    timer: asyncio.TimerHandle | None = None

    @property
    def held_count(self) -> int:
        return sum(self.held.values())


class WindowedBudget(Generic[K]):
    """Per key, a fixed window of ``interval_s`` opened by the key's first use: ``burst`` uses
    pass in it; what comes past them is held back, counted by name, and ``on_end(key, window)``
    reports it once the window ends (on the running loop at its end; with no loop running, at that
    key's next use). A window in which nothing was held back ends without a word.

    The one mechanism behind a log whose repeated lines are limited (:class:`RateLimitedLog`),
    the API's budget of refused commands per user (cardd.api.server) and a device's budget of
    status messages (firmware_bridge.flooding). ``clock`` is monotonic
    seconds (injectable), and need not be the loop's: a window's end is a loop timer set for the
    time left in it on ``clock``."""

    def __init__(self, interval_s: float, burst: int, on_end: Callable[[K, BudgetWindow], None],
                 clock: Callable[[], float] | None = None) -> None:
        self.interval_s, self.burst = interval_s, burst
        self._on_end = on_end
        self._clock = clock or monotonic
        self._windows: dict[K, BudgetWindow] = {}

    def use(self, key: K, label: str = "") -> bool:
        """Count one use of ``key``'s budget (opening a window if it has none, or its last has
        passed); True while the window's budget lasts, False once it is spent (the use is counted
        all the same: :meth:`over` says so from then on)."""
        now = self._clock()
        window = self._windows.get(key)
        if window is None or (window.timer is None and now - window.start >= self.interval_s):
            if window is not None:
                self.end(key)
            for old_key, old in list(self._windows.items()):  # keys long quiet: forgotten
                if old.timer is None and now - old.start >= self.interval_s:
                    self.end(old_key)
            window = self._windows[key] = BudgetWindow(now, label)
        window.used += 1
        return window.used <= self.burst

    def over(self, key: K) -> BudgetWindow | None:
        """``key``'s window while its budget is spent and it lasts, else None."""
        window = self._windows.get(key)
        if window is not None and window.used >= self.burst and (
                window.timer is not None or self._clock() - window.start < self.interval_s):
            return window
        return None

    def hold(self, key: K, name: str = "") -> float:
        """Count ``name`` held back in ``key``'s window (open: after :meth:`use`); the seconds
        until the window ends, when :meth:`on_end` reports it."""
        window = self._windows[key]
        window.held[name] += 1
        left = max(0.0, window.start + self.interval_s - self._clock())
        if window.timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                pass  # reported at this key's next use
            else:
                # a delay, not call_at(start + interval): the start is on our clock, which an
                # injected or frozen one puts anywhere on the loop's (the end long past or far off)
                window.timer = loop.call_later(left, self.end, key)
        return left

    def end(self, key: K) -> None:
        """End ``key``'s window now: reported if anything was held back; its next use opens a
        new one (a trouble that ended and may come back)."""
        window = self._windows.pop(key, None)
        if window is None:
            return
        if window.timer is not None:
            window.timer.cancel()
        if window.held:
            self._on_end(key, window)

    def close(self) -> None:
        """End every window now (what was held back reported)."""
        for key in list(self._windows):
            self.end(key)


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
        self._log = log
        self._budget: WindowedBudget[tuple[str, str]] = WindowedBudget(interval_s, burst, self._summarise, clock)

    @property
    def interval_s(self) -> float:
        return self._budget.interval_s

    @property
    def burst(self) -> int:
        return self._budget.burst

    def info(self, event: str, key: str = "", **fields: Any) -> None:
        self._line("info", event, key, fields)

    def warning(self, event: str, key: str = "", **fields: Any) -> None:
        self._line("warning", event, key, fields)

    def error(self, event: str, key: str = "", **fields: Any) -> None:
        self._line("error", event, key, fields)

    def flush(self, event: str, key: str = "") -> None:
        """End this kind's interval now: its summary (if any was left out) is written, and its next
        line is written again (a trouble that ended and may come back)."""
        self._budget.end((event, key))

    def _line(self, level: str, event: str, key: str, fields: dict[str, Any]) -> None:
        if self._budget.use((event, key)):
            getattr(self._log, level)(event, **fields)
        else:
            self._budget.hold((event, key))

    def _summarise(self, kind: tuple[str, str], window: BudgetWindow) -> None:
        event, key = kind
        suppressed = window.held_count
        self._log.warning("log_rate_limited", line=event, key=key, written=window.used - suppressed,
                          suppressed=suppressed, interval_s=self.interval_s)
