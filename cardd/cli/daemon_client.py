"""The one way a cardctl subcommand reaches the daemon: a connection (:func:`daemon`), the API
client's errors as one line and their exit code, and a command run with its refusal in cardctl's
words (cardd.cli.common.in_cardctl_words)."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec

from cardd.api.client import (ApiClient, ClientError, CommandRefused, ConnectionClosed, DaemonNotRunning,
                              SocketPermissionDenied, TextNotUtf8)
from cardd.api.protocol import ErrorCode
from cardd.cli.common import (EXIT_FAILURE, EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_USAGE, CliError, in_cardctl_words,
                              options)

#: an ERROR code from the daemon -> the exit code it means
_CODE_EXITS = {ErrorCode.REFUSED: EXIT_REFUSED, ErrorCode.DEVICE_OFFLINE: EXIT_UNREACHABLE,
               ErrorCode.BAD_ARGS: EXIT_USAGE, ErrorCode.UNKNOWN_COMMAND: EXIT_USAGE, ErrorCode.BAD_REQUEST: EXIT_USAGE}


def exit_code_of(exc: ClientError) -> int:
    if isinstance(exc, CommandRefused):
        return _CODE_EXITS.get(exc.code, EXIT_FAILURE)
    if isinstance(exc, (DaemonNotRunning, SocketPermissionDenied, ConnectionClosed)):
        return EXIT_UNREACHABLE
    if isinstance(exc, TextNotUtf8):
        return EXIT_USAGE
    return EXIT_FAILURE


@contextmanager
def api_errors() -> Iterator[None]:
    """The API client's typed errors as one line and their exit code."""
    try:
        yield
    except ClientError as exc:
        raise CliError(str(exc), exit_code_of(exc)) from None


@contextmanager
def daemon(timeout: float | None = 10.0) -> Iterator[ApiClient]:
    """A connection to the daemon for one subcommand; every API error becomes one line."""
    with api_errors():
        client = ApiClient(options().socket, timeout=timeout)
        try:
            yield client
        finally:
            client.close()


def run_command(client: ApiClient, name: str, **args: Any) -> dict[str, Any]:
    """Run a daemon command; the journal record it made (its ``data`` holds a device's answer).
    A refusal is shown in cardctl's words (:func:`~cardd.cli.common.in_cardctl_words`)."""
    with api_errors():
        return command_record(client, name, **args)


def command_record(client: ApiClient, name: str, **args: Any) -> dict[str, Any]:
    """:func:`run_command`'s work, its errors still the API client's (a refusal a
    :class:`CommandRefused` in cardctl's words), for a caller that words one itself."""
    try:
        ack = client.command(name, **args)
    except CommandRefused as exc:
        raise CommandRefused(exc.code, in_cardctl_words(str(exc))) from None
    records = client.log(from_seq=ack.seq, to_seq=ack.seq).records
    return to_builtins(records[0]) if records else {"seq": ack.seq}


def to_builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)
