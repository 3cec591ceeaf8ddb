"""Who may override: the journaled grant or refusal of a supervisor's override.

Overrides (resume a held round, declare a re-deal, accept a device back, void a shoe, clear
an alarm) need :attr:`Role.SUPERVISOR`. :func:`require_supervisor` journals every attempt:
OVERRIDE with who made it, or OVERRIDE_REFUSED and :class:`OverrideRefused`. Shared by the
game (the round's overrides) and the tracker (the table's), so it sits beside the events.
"""
from __future__ import annotations

from typing import NoReturn

from devices.errors import OverrideRefused
from devices.events import Event, EventSink, Reason, Role, Severity


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
