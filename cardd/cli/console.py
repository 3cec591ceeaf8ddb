"""Output for a person: rich's Console on a terminal, plain text off one (a pipe, a file), and a
command's answer as a view or, with ``--json``, as JSON."""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import IO, Any

from rich.console import Console

from cardd.cli.common import emit_json, stdout_closed


#: the width a console off a terminal lays out to: no limit a line of text could reach, so a table
#: is as wide as its content and nothing is wrapped or cut
UNLIMITED_WIDTH = 1 << 20


class ProgramConsole(Console):
    """rich's Console for a program's output: a closed stdout ends the program as
    :class:`~cardd.cli.common.Program` does (rich's own handler exits 1).

    Off a terminal (a pipe, a file) it writes plain text: no line wrapped or padded to a width
    ($COLUMNS or rich's 80 would break a path or a record across lines for ``grep``), no colours
    and no control codes, whatever $FORCE_COLOR says. On a terminal it is rich's Console as given."""

    def __init__(self, *, file: IO[str] | None = None, stderr: bool = False, **options: Any) -> None:
        if not writes_to_a_terminal(file if file is not None else sys.stderr if stderr else sys.stdout):
            options.update(force_terminal=False, color_system=None, soft_wrap=True, width=UNLIMITED_WIDTH)
        super().__init__(file=file, stderr=stderr, **options)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        stdout_closed()


def writes_to_a_terminal(stream: IO[str]) -> bool:
    """``stream`` is a terminal (a tty), not a pipe or a file."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):  # a closed stream, or a stand-in without isatty
        return False


def console() -> Console:
    return ProgramConsole(highlight=False, soft_wrap=True)


def emit(document: Any, as_json: bool, render: Callable[[Console], None]) -> None:
    """``document`` as JSON with --json, else ``render`` it for a person."""
    if as_json:
        emit_json(document)
    else:
        render(console())
