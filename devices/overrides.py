"""Who may override, and the refusals of inputs the round or the table cannot take.

Overrides (resume a held round, declare a re-deal, accept a device back, void a shoe, clear
an alarm) need :attr:`Role.SUPERVISOR`. :func:`require_supervisor` journals every attempt:
OVERRIDE with who made it, or OVERRIDE_REFUSED and :class:`OverrideRefused`. Shared by the
game (the round's overrides) and the tracker (the table's), so it sits beside the events.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

from core.errors import CarddError
from devices.events import Event, EventSink, Reason, Role, Severity


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


def require_supervisor(sink: EventSink, source: str, what: str, who: str, role: Role, command: str = "") -> None:
    """Journal the override attempt; raise :class:`OverrideRefused` unless ``role`` is supervisor.
    ``command``: the command people send for it, which a refusal names (default ``what``; the
    OVERRIDE record says ``what``, e.g. "clear alarm 3 by supervisor dana")."""
    refuse_unless_supervisor(sink, source, command or what, who, role)
    sink(Event(Reason.OVERRIDE, source, f"{what} by supervisor {who}", Severity.WARNING,
               {"override": what, "role": str(role)}, who))


def refuse_unless_supervisor(sink: EventSink, source: str, what: str, who: str, role: Role) -> None:
    """The role half of :func:`require_supervisor`, for an override that checks more before it is granted."""
    if role is not Role.SUPERVISOR:
        refuse_override(sink, source, what, who, f"{who} acts as {role}: a supervisor sends it", role)


def refuse_override(sink: EventSink, source: str, what: str, who: str, why: str, role: Role | None = None) -> NoReturn:
    """Journal OVERRIDE_REFUSED with ``why`` and raise :class:`OverrideRefused`: both read as a
    refused command's line (cardd.daemon.commands.refusal_line), ``what refused: why``, where
    ``what`` is the command people send and ``why`` says what is wrong and what comes next."""
    sink(Event(Reason.OVERRIDE_REFUSED, source, f"{what} refused: {why}", Severity.WARNING,
               {"override": what, "why": why, "role": str(role) if role else None}, who))
    raise OverrideRefused(what, why)
