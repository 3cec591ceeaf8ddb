"""Whether a device has gone silent: one detector, on an injected clock, for the session (which
reports STALE/FRESH) and the host's device models (which hold a device that stopped talking).

``Staleness(clock, after_s)`` knows nothing until :meth:`heard` (or :meth:`restart`): a device
never heard is not stale, it is not there yet. After that it is stale once more than
``after_s`` seconds pass without :meth:`heard`. :meth:`check` and :meth:`heard` return True
exactly on the transition (to stale, back to fresh), so each is reported once per silence.
"""
from __future__ import annotations

from typing import Callable

Clock = Callable[[], float]


class Staleness:
    def __init__(self, clock: Clock, after_s: float) -> None:
        self._clock = clock
        self.after_s = after_s
        self.last_heard: float | None = None
        self.stale = False

    def restart(self) -> None:
        """Start counting now, as if just heard, without ending a silence (a link just came up)."""
        self.last_heard = self._clock()

    def forget(self) -> None:
        """Nothing known any more (the device went away): never stale until heard again."""
        self.last_heard, self.stale = None, False

    def heard(self) -> bool:
        """The device said something; True when that ends a silence (it was stale)."""
        self.last_heard = self._clock()
        was_stale, self.stale = self.stale, False
        return was_stale

    def silent_for(self) -> float:
        """Seconds since last heard (0 when never heard)."""
        return 0.0 if self.last_heard is None else self._clock() - self.last_heard

    def is_stale(self) -> bool:
        """Silent for more than ``after_s`` (never when nothing was heard yet)."""
        return self.last_heard is not None and self._clock() - self.last_heard > self.after_s

    def check(self) -> bool:
        """Look at the clock; True exactly when the device has just become stale."""
        if self.stale or not self.is_stale():
            return False
        self.stale = True
        return True
