"""The errors of the devices package: inputs the game, the shoe or the table cannot take.

Each is a :class:`core.errors.CarddError`; the text says what was refused and why, and where
there is one, the way forward. The refusals of overrides journal themselves
(:mod:`devices.overrides`) before they raise :class:`OverrideRefused`.
"""
from __future__ import annotations

from collections.abc import Sequence

from core.errors import CarddError


class TableError(CarddError, RuntimeError):
    """An input the table cannot take now; the text says what and why. ``reasons``: each reason on
    its own with its way forward, where there are several (the text joins them with "; "), so a
    line cut short keeps whole reasons (cardd.daemon.commands.refusal_line)."""

    def __init__(self, message: str, reasons: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.reasons = tuple(reasons)

    @classmethod
    def of(cls, reasons: Sequence[str]) -> TableError:
        return cls("; ".join(reasons), reasons)


class OverrideRefused(TableError, PermissionError):
    """An override asked for without the supervisor role, or while its condition is unmet; ``why``
    is the reason alone (the text also names the override)."""

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what} refused: {why}")
        self.why = why


class RoundError(CarddError):
    """Base of the round's typed errors."""


class RoundHeld(RoundError):
    """The round is held: no card or action is accepted until a supervisor resumes it."""


class CardMismatch(RoundError):
    """During a re-deal the shoe gave a card other than the one expected back."""


class RuleViolation(CarddError):
    """An input the house rules forbid; ``rule`` names the rule, the state is unchanged."""

    def __init__(self, rule: str, message: str) -> None:
        self.rule, self.message = rule, message
        super().__init__(f"{rule}: {message}")


class ShoeStateError(CarddError, RuntimeError):
    """An input the shoe cannot take in its current state."""


class RemainderError(CarddError, ValueError):
    """A shoe remainder that is not a count of 0 or more per card."""
