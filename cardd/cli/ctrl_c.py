"""Ctrl-C's quiet end for a program: no traceback, nothing but a newline on a terminal, exit 130
(the shell's code for SIGINT, 128 + 2): for an entry point that catches the KeyboardInterrupt of its
own imports (cardd.cli.main), and cardd.cli.common's Program and run for the rest."""
from __future__ import annotations

import signal
import sys
from typing import NoReturn

#: what a program ended by Ctrl-C exits with, as the shell reports a command SIGINT ended
EXIT_INTERRUPTED = 128 + signal.SIGINT


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
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread, where Python runs signal handlers: nothing to let pass here
        pass
