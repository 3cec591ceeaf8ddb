"""A device's budget of unsolicited status messages: what a device that floods its link may have
its host hand on. One :class:`StatusBudget` per connection, across its sessions; events and the
answers the host waits for are never counted (why status may be left out, the FLOODING report:
docs/protocol.md §3.1, "Status")."""
from __future__ import annotations

from time import monotonic
from typing import Callable

import structlog

from drivers.aio import BudgetWindow, RateLimitedLog, WindowedBudget
from firmware_bridge.messages import Message

log = structlog.get_logger(__name__)
#: the budget's one key: the device is the budget's owner
_KEY = "status"
#: while a device floods, one ``status_left_out`` line at most this often (seconds)
LEFT_OUT_LOG_EVERY_S = 60.0


class StatusBudget:
    def __init__(self, device: str, burst: int, window_s: float, stable_s: float,
                 on_flooding: Callable[[str], None], clock: Callable[[], float] | None = None) -> None:
        self.device, self.burst, self.window_s, self.stable_s = device, burst, window_s, stable_s
        self._on_flooding = on_flooding
        self._clock = clock or monotonic
        self._budget: WindowedBudget[str] = WindowedBudget(window_s, burst, self._window_ended, self._clock)
        self._log = RateLimitedLog(log, interval_s=LEFT_OUT_LOG_EVERY_S, burst=1, clock=clock)
        self.left_out = 0  # status messages left out, in all
        self.floods = 0  # FLOODING reports
        self.flooding = False  # FLOODING reported, the device not within its budget stable_s since
        self._over_at = -float("inf")  # when the budget last left one out (the clock)
        self._closed = False

    def admit(self, msg: Message) -> bool:
        """Whether to hand ``msg`` (a status message, see the module docstring) on: True while the
        window's budget lasts; past it False, the message counted as left out."""
        if self._budget.use(_KEY):
            if self.flooding and self._clock() - self._over_at >= self.stable_s:
                self.flooding = False  # within budget long enough: the next flood is reported again
                log.info("status_flood_over", device=self.device, within_budget_s=self.stable_s)
            return True
        self._budget.hold(_KEY, type(msg).__name__)
        self._over_at = self._clock()
        self.left_out += 1
        return False

    def close(self) -> None:
        """Stop the window's timer; nothing is reported after this."""
        self._closed = True
        self._budget.close()

    def _window_ended(self, key: str, window: BudgetWindow) -> None:
        if self._closed:
            return
        held = window.held_count
        counts = ", ".join(f"{n} {name}" for name, n in window.held.most_common())
        if self.flooding:
            self._log.warning("status_left_out", device=self.device, sent=window.used, budget=self.burst,
                              window_s=self.window_s, left_out=held, by_type=dict(window.held))
            return
        self.flooding = True
        self.floods += 1
        log.warning("status_flood", device=self.device, sent=window.used, budget=self.burst, window_s=self.window_s,
                    left_out=held, by_type=dict(window.held))
        self._on_flooding(
            f"sent {window.used} status messages within {self.window_s:g} s, past its budget of {self.burst}: "
            f"{held} left out ({counts}); status past the budget is left out (each is current again when next "
            f"sent or asked for; events and answers to requests are never left out) until it stays within "
            f"budget {self.stable_s:g} s; a technician looks at the device")
