"""Ctrl-C's quiet end for a program: no traceback, nothing but a newline on a terminal, exit 130
(the shell's code for SIGINT, 128 + 2). One mechanism for every entry point (cardctl, cardbench,
the demo, the daemon before it serves): :func:`run_entry_point` runs a program whose imports are
inside it, so a Ctrl-C while it still imports (most of a short command's time) ends it as one at any
later moment does; cardd.cli.common's Program ends the click programs' KeyboardInterrupts (click
would print 'Aborted!') with :func:`end_interrupted` too.

This module is imported before that ``try`` (an entry point's top): it imports only what Python's
start has loaded already (sys, contextlib) and ``signal`` where it is used, not ``typing`` (milliseconds
of a window where a Ctrl-C would still print Python's traceback)."""
from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn, TypeVar

    T = TypeVar("T")

#: what a program ended by Ctrl-C exits with, as the shell reports a command SIGINT ended (128 + SIGINT)
EXIT_INTERRUPTED = 130


def run_entry_point(program: Callable[[], T]) -> T:
    """What ``program`` returns (an entry point's exit code), a Ctrl-C at any moment of it (its
    imports: ``program`` does them) ending the process quietly with exit 130 instead. Once it has
    returned or exited, its outcome is decided and a Ctrl-C is let pass (:func:`outcome_decided`)."""
    try:
        outcome = program()
        outcome_decided()
        return outcome
    except KeyboardInterrupt:
        end_interrupted()
    except SystemExit:
        outcome_decided()
        raise


def end_interrupted() -> NoReturn:
    """End the program Ctrl-C interrupted: quietly (a newline on a terminal, so the shell's prompt
    does not follow the ``^C``), exit 130. A second Ctrl-C while it exits is let pass."""
    outcome_decided()
    if sys.stderr is not None and sys.stderr.isatty():
        sys.stderr.write("\n")
    sys.exit(EXIT_INTERRUPTED)


def outcome_decided() -> None:
    """The program's exit code is decided: a Ctrl-C while the interpreter exits (its atexit
    hooks, the last flush) is let pass, where it would print 'Exception ignored' and a traceback."""
    import signal  # here, not at the top: most programs have loaded it by then, and it costs milliseconds
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread, where Python runs signal handlers: nothing to let pass here
        pass
