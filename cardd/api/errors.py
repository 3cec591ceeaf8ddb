"""Errors of the local API; each is a CarddError whose text names what and where."""
from __future__ import annotations

from core.errors import CarddError

#: the longest text an ERROR message carries (and a COMMAND_REFUSED record's ``refused``), which may
#: quote what the client sent
MESSAGE_MAX = 300
#: the longest refusal for several reasons (cardd.daemon.commands.reasons_line), the table's own words
#: only: room for an open_round refused for five reasons, each with its way forward (about 400)
REASONS_MAX = 600


def one_line(text: str, limit: int = MESSAGE_MAX) -> str:
    """Any text as one short line (an ERROR message): the server's and the daemon's commands'
    refusals alike (here, not in the server, so what only words a refusal need not import it)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."


class ApiError(CarddError):
    """The API socket could not be set up or used."""


class SocketInUse(ApiError):
    """Another process (a running daemon) listens on the socket path."""


class PeerCredentialsError(ApiError):
    """The kernel did not tell who the peer is; the connection is refused."""


class CommandFailed(CarddError):
    """Raised by a backend: the command was understood but cannot be done now. ``code`` goes
    into the ERROR reply (default ``failed``); the message must be one line for the client."""

    def __init__(self, message: str, code: str = "failed") -> None:
        super().__init__(message)
        self.code = code


class CommandKept(CommandFailed):
    """Raised by a backend: the command was applied, but its record is not journaled yet (the
    journal cannot be written: it is kept and written later). Not a refusal."""
