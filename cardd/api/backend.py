"""What the daemon gives the API server: the table's state, the journal, and the commands.

The server owns the socket, the framing, the limits and the roles; the backend owns meaning.
Every method runs on the daemon's event loop. A backend raises
:class:`~cardd.api.errors.CommandFailed` (or any CarddError) for a command it cannot do; the
client gets an ERROR with that one line. Anything else it raises is a fault: the client gets
ERROR ``internal`` and the server logs the traceback.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from cardd.api.peer import Caller, Role
from cardd.api.protocol import ApiEvent, LogQuery


class Backend(Protocol):
    """Implemented by the daemon (and by a fake in tests/api)."""

    @property
    def command_roles(self) -> Mapping[str, frozenset[Role]]:
        """Command name -> the roles that may run it (any one will do); a name not in it is
        ERROR unknown-command."""
        ...

    async def state(self, caller: Caller) -> dict[str, Any]:
        """The table now, as a JSON object (never an undealt card)."""
        ...

    async def log(self, query: LogQuery, caller: Caller) -> tuple[Sequence[ApiEvent], bool]:
        """Journal records matching ``query`` (oldest first, at most ``query.limit``), and
        whether more matched than were returned."""
        ...

    def journal_head(self) -> int:
        """The sequence number of the journal's last record (0: none yet): WATCH since_seq beyond it
        is refused, since no event it names has been journaled."""
        ...

    async def events_since(self, seq: int, limit: int) -> Sequence[ApiEvent]:
        """Journaled events with a sequence number above ``seq``, in order, at most ``limit``.
        Fewer than ``limit`` means the journal has nothing more yet."""
        ...

    async def command(self, name: str, args: dict[str, Any], caller: Caller) -> int:
        """Do an accepted command (the caller holds its role); return the sequence number of
        the journal record it made. ``caller`` is who, for the journal."""
        ...

    async def command_refused(self, name: str, args: dict[str, Any], caller: Caller, needs: frozenset[Role]) -> None:
        """A command the caller lacks the role for (so the daemon journals the attempt)."""
        ...

    def commands_held_back(self, user: str, uid: int, commands: Mapping[str, int], window_s: float) -> None:
        """Commands of one user not taken (ERROR too-many-refused) after it had too many refused in
        ``window_s`` seconds: ``commands`` counts them by name; the daemon journals the count."""
        ...
