"""What every cardctl subcommand shares (and the bench's CLI imports): the exit codes, the
common options (``--socket``, ``--json``), the one way to reach the daemon, and output.

Exit codes (docs/cardctl.md): 0 ok, 1 failure, 2 usage, 3 device or daemon unreachable,
4 refused by role, 5 integrity failure; 141 when the reader of stdout went away (``| head``),
130 after a Ctrl-C (EXIT_INTERRUPTED, from core.ctrl_c).
Every failure is one line on stderr, ``cardctl: ...``.
"""
from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from cardd.api.paths import DEFAULT_SOCKET
from core.ctrl_c import end_interrupted, ended_by, interrupted_exit_code
from core.errors import CarddError
from core.files import output_directory_problem
from core.text import printable

if TYPE_CHECKING:
    import structlog

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_REFUSED = 4
EXIT_INTEGRITY = 5
#: stdout's reader went away (``cardctl log | head``): the shell's code for a writer ended by SIGPIPE
EXIT_STDOUT_CLOSED = 128 + signal.SIGPIPE

#: where the socket is when --socket is not given
SOCKET_ENV = "CARDD_SOCKET"

F = TypeVar("F", bound=Callable[..., Any])


class CliError(CarddError):
    """A failure shown as one line, ``<prog>: <message>``, with its exit code (see :func:`run`)."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Program(click.Group):
    """A program's top group (``cls=Program``; see :func:`run`): when the reader of stdout goes away
    (``cardctl log | head``) the program ends quietly with EXIT_STDOUT_CLOSED, and a Ctrl-C ends it
    quietly with exit 130 (core.ctrl_c; a program of ``core.ctrl_c.end_like_ctrl_c`` with its
    one line). Caught here, around the parsing of the options (``--help``, ``--version``) and around
    the subcommand, because click's own main turns a broken pipe into exit 1 and a Ctrl-C into
    'Aborted!' and exit 1."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except BrokenPipeError:
            stdout_closed()
        except KeyboardInterrupt:
            end_interrupted()

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                          list[str]]:
        """The subcommand, its module imported: the libraries it imports that log (structlog's) log
        errors only, on stderr (:func:`run`); one that imports none (``cardctl status``) does not
        import structlog for it. So a subcommand's module imports at its top whatever logs."""
        found = super().resolve_command(ctx, args)
        if "structlog" in sys.modules:
            logs_to_stderr(logging.ERROR)
        return found

    def invoke(self, ctx: click.Context) -> Any:
        try:
            value = super().invoke(ctx)
            sys.stdout.flush()  # what is still buffered fails here, not at the interpreter's exit
            return value
        except BrokenPipeError:  # the API client's socket errors are ClientErrors: this is an output stream
            stdout_closed()
        except KeyboardInterrupt:
            signum = ended_by()
            if signum is None:  # a program without end_like_ctrl_c: quietly, where click said 'Aborted!', exit 1
                end_interrupted()
            click.echo(f"{ctx.info_name}: interrupted ({signal.Signals(signum).name}); "
                       "what it started is stopped", err=True)
            sys.exit(interrupted_exit_code())


def stdout_closed() -> NoReturn:
    """The Python docs' "Note on SIGPIPE": what is still buffered for stdout goes to /dev/null (the
    flush at exit would fail again and print a traceback), and the shell's exit code for SIGPIPE."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    sys.exit(EXIT_STDOUT_CLOSED)


def logs_to_stderr(level: int) -> None:
    """The libraries' log lines at ``level`` and above, on stderr: a program's stdout is its answer
    (--json, JSON lines), where a log line would break the reader's parse. structlog is imported
    here, not at a program's start (:meth:`Program.resolve_command`)."""
    import structlog
    structlog.configure(logger_factory=_stderr_logger, wrapper_class=structlog.make_filtering_bound_logger(level))


def _stderr_logger(*_args: Any) -> structlog.PrintLogger:
    """On the stderr of the moment, as structlog's default is on the stdout of the moment (a test's
    captured stream too: a stream held from configure time may be closed by the next log line)."""
    import structlog
    return structlog.PrintLogger(sys.stderr)


def run(group: Program, prog: str) -> NoReturn:
    """Run a click group as a program: click's own usage errors exit 2, a CliError is one line
    on stderr with its exit code, a closed stdout exits EXIT_STDOUT_CLOSED (:class:`Program`), a
    Ctrl-C at any moment 130, quietly. Library log lines go to stderr, errors only
    (:meth:`Program.resolve_command`; the failure itself is our one line): stdout is the program's
    answer (--json). Called inside core.ctrl_c.run_entry_point, which ends a Ctrl-C outside the
    subcommand."""
    try:
        group.main(prog_name=prog)
    except CliError as exc:  # it may quote the daemon's, a device's or a person's text: shown as text
        click.echo(f"{prog}: {printable(str(exc))}", err=True)
        sys.exit(exc.exit_code)
    sys.exit(EXIT_OK)


@dataclass
class Options:
    """The group-level options, kept on the click context (``ctx.obj``)."""
    socket: Path = DEFAULT_SOCKET


def socket_option(fn: F) -> F:
    """``--socket PATH`` (or $CARDD_SOCKET): the daemon's API socket."""
    return click.option("--socket", "socket_path", type=click.Path(path_type=Path, readable=False, dir_okay=False), envvar=SOCKET_ENV,
                        default=DEFAULT_SOCKET, show_default=True,
                        help=f"the daemon's API socket (or ${SOCKET_ENV})")(fn)


def json_option(fn: F) -> F:
    """``--json``: one JSON document on stdout (JSON lines for live streams) instead of a view."""
    return click.option("--json", "as_json", is_flag=True, help="machine-readable JSON on stdout")(fn)


def options() -> Options:
    ctx = click.get_current_context()
    obj = ctx.find_object(Options)
    return obj if obj is not None else Options()


# ---- the daemon's words in cardctl's ------------------------------------------------------

#: The one table of which cardctl command sends which API command (docs/cardctl.md): a refusal
#: the daemon words with the API's name is shown in cardctl's (:func:`in_cardctl_words`). Every
#: table and simulation command of the daemon is here (tests/cli/test_cardctl_words.py).
CARDCTL_COMMANDS: dict[str, str] = {
    "open_round": "round open", "place_bet": "round bet", "no_more_bets": "round no-more-bets",
    "insure": "round insure", "close_insurance": "round close-insurance", "act": "round act",
    "resume": "round continue", "redeal": "round redeal", "drawn_in_error": "round drawn-in-error",
    "clear_alarm": "alarm clear", "void_shoe": "shoe void", "shoe_remainder": "shoe remainder",
    "selftest": "selftest", "counters": "counters", "clear_fault": "clear-fault", "start_shuffle": "shuffle",
    "export_journal": "log --export", "verify_journal": "verify-journal", "firmware_update": "firmware flash", "enroll": "device enroll",
    "retry_trust": "device retry",
    "reduce_bet": "round reduce", "pairs_bet": "round pairs", "even_money": "round even-money",
    "hand_shuffled": "shoe hand-shuffled", "shuffle_started": "shoe shuffle-started", "enter_card": "shoe enter-card",
    "dealer_change": "dealer-change",
    "take_seat": "seat take", "leave_seat": "seat leave", "ask_for_box": "seat ask-for-box",
    "placement_error": "round placement-error", "cards_to_box_without_wager": "round cards-to-box-without-wager",
    # cardd --simulate only (cardd.cli.sim)
    "sim_load_shoe": "sim load-shoe", "sim_deal": "sim deal", "sim_unload_shoe": "sim unload-shoe",
    "sim_fault": "sim fault", "sim_switches": "sim switch",
}
#: an API command's field (its args') as cardctl's argument or option for it, where that is not the
#: field's name in capitals (``place_bet.box``: BOX); a bad-args line names the field
#: (``enter_card.card: not a card``), cardctl's the argument (``shoe enter-card CARD: not a card``).
#: Every field of every table command is one of the cardctl command's (tests/cli/test_cardctl_words.py)
CARDCTL_ARGUMENTS: dict[tuple[str, str], str] = {
    ("reduce_bet", "amount"): "NEW_STAKE", ("act", "amount"): "--amount", ("act", "player"): "--player",
    ("act", "co_players"): "--co-player", ("shoe_remainder", "returned"): "CARD[=N]",
    ("drawn_in_error", "exposed"): "exposed|unexposed", ("placement_error", "assignments"): "CARD=BOX",
    ("void_shoe", "next_shoe"): "--next-shoe",
    ("export_journal", "since"): "--since", ("export_journal", "until"): "--until",
    ("export_journal", "format"): "--format",
    ("firmware_update", "image_base64"): "IMAGE", ("firmware_update", "allow_downgrade_by"): "--allow-downgrade-by",
    ("firmware_update", "force"): "--force",
}
_HEAD = re.compile(r"^(?P<name>[a-z_]+)(?P<after> refused: |: | needs )")
#: a bad-args line's head: the command, its field and where in it (``co_players[1].player``,
#: ``returned key 'ZZ'``: the value is in the line again, the problem's own words)
_FIELD = re.compile(r"^(?P<name>[a-z_]+)\.(?P<field>[a-z_0-9]+)(?:\[[^\]]*\]|\.[a-z_]+| key '[^']*')*(?=: )")
#: a command the refusal names as the way forward: an API name with an underscore (no English word
#: has one) or, for the plain words (redeal, act, resume), one after "with" ("void the round with
#: redeal") or alone in brackets ("continues it (resume)"); "the players act" or "no held round to
#: resume" are words, not commands, and a path or a quoted name ("/var/tmp/open_round",
#: '"start_shuffle"') is the client's text
_NEXT = re.compile(r"(?<![\w'./\"-])(?:[a-z]+_[a-z_]+|(?<=with )[a-z]+|(?<=\()[a-z]+(?=\)))"
                   r"(?![\w'./\"-])")  # not an arg's place_bet.amount
_ROLE = re.compile(r"^command '(?P<name>[a-z_]+)' needs ")


def cardctl_words(name: str) -> str:
    """API command ``name`` as cardctl spells it; the API's name for one cardctl has no words for
    (never an error: a command the daemon applied is not to fail for want of a name)."""
    return CARDCTL_COMMANDS.get(name, name)


def argument_words(name: str, field: str) -> str:
    """Field ``field`` of API command ``name`` as cardctl's argument or option (:data:`CARDCTL_ARGUMENTS`)."""
    return CARDCTL_ARGUMENTS.get((name, field), field.upper())


#: a way forward a refusal names with an argument (``void_shoe next_shoe=true``,
#: ``firmware_update allow_downgrade_by=NAME``): one cardctl command line, with the option
#: CARDCTL_ARGUMENTS gives that field
_WAY_WITH_ARG = re.compile(r"\b(?P<name>[a-z_]+) (?P<field>[a-z_0-9]+)=(?P<value>true|[A-Z]+)\b")


def _way_with_option(match: re.Match[str]) -> str:
    name, field, value = match["name"], match["field"], match["value"]
    option = CARDCTL_ARGUMENTS.get((name, field))
    if name not in CARDCTL_COMMANDS or option is None or not option.startswith("--"):
        return match[0]
    return f"cardctl {CARDCTL_COMMANDS[name]} {option}" + ("" if value == "true" else f" {value}")


def in_cardctl_words(line: str) -> str:
    """The daemon's refusal ``line`` (worded for the API) in cardctl's words: the refused command
    as cardctl spells it, and each next step as the cardctl command to type
    (``open_round refused: ...: open one with open_round first`` ->
    ``round open refused: ...: open one with cardctl round open first``)."""
    line = _ROLE.sub(lambda m: f"command '{cardctl_words(m['name'])}' needs ", line, count=1)
    head = _HEAD.match(line)
    field = _FIELD.match(line)
    start = 0
    if field is not None and field["name"] in CARDCTL_COMMANDS:
        words = f"{CARDCTL_COMMANDS[field['name']]} {argument_words(field['name'], field['field'])}"
        line = words + line[field.end():]
        start = len(words)
    elif head is not None and head["name"] in CARDCTL_COMMANDS:
        line = CARDCTL_COMMANDS[head["name"]] + line[head.end("name"):]
        start = len(CARDCTL_COMMANDS[head["name"]])
    rest = line[start:]
    rest = _WAY_WITH_ARG.sub(_way_with_option, rest)
    return line[:start] + _NEXT.sub(lambda m: f"cardctl {CARDCTL_COMMANDS[m[0]]}" if m[0] in CARDCTL_COMMANDS
                                    else m[0], rest)


# ---- devices -------------------------------------------------------------------------------

class DeviceName(click.Choice):
    """DEVICE as a person may type it: ``shoe`` or ``shoe-reader`` (the name status and watch show,
    the tracker's: devices.models.names), ``shuffler``; converted to the role the API takes. The
    names are read when a command that takes a DEVICE is defined, not at cardctl's start."""

    def __init__(self) -> None:
        from devices.models.names import MODEL_NAMES  # imports nothing: no model, tracker or daemon
        self.spellings = {**{model: role for role, model in MODEL_NAMES.items()}, **{role: role for role in MODEL_NAMES}}
        super().__init__(sorted(self.spellings))

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        return self.spellings[super().convert(value, param, ctx)]


# ---- output -------------------------------------------------------------------------------

def emit_json(document: Any, stream: IO[str] | None = None) -> None:
    """One JSON document (or one line of JSON lines) on stdout, flushed."""
    out = stream or sys.stdout
    out.write(json.dumps(document, default=str) + "\n")
    out.flush()


def money(cents: int | str | Fraction | None) -> str:
    """``devices.game.settlement.money``, the game's rules loaded only by a view that shows money."""
    from devices.game.settlement import money as shown_money
    return shown_money(cents)


def fail(message: str, exit_code: int = EXIT_FAILURE) -> CliError:
    """The error to raise: ``raise fail("...", EXIT_...)``."""
    return CliError(message, exit_code)


def check_output_directory(path: Path, named_by: str | None = None) -> None:
    """A usage error (exit 2) naming the problem when ``path``'s directory cannot take the file;
    ``named_by`` (an option, an argument's metavar) leads the line when given."""
    problem = output_directory_problem(path)
    if problem is not None:
        raise CliError(problem if named_by is None else f"{named_by} {problem}", EXIT_USAGE)


class OutputFile(click.Path):
    """An option's file the command writes when it is done: its directory is checked when the option
    is parsed (a usage error, exit 2), so a run of minutes does not end in a traceback for a mistyped
    folder, nor in a file named after the next option (``--plot --report``: click takes ``--report``
    as --plot's file)."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False, path_type=Path)

    def convert(self, value: str | os.PathLike[str], param: click.Parameter | None,
                ctx: click.Context | None) -> Path:
        if ctx is not None and os.fspath(value) in option_names(ctx.command):
            flag = param.opts[0] if param is not None and param.opts else "the option"
            self.fail(f"{os.fspath(value)} is an option, not a file name: give the file after {flag} "
                      f"({flag} FILE), or ./{os.fspath(value)} for a file of that name", param, ctx)
        path = super().convert(value, param, ctx)
        assert isinstance(path, Path)
        problem = output_directory_problem(path)
        if problem is not None:
            self.fail(problem, param, ctx)
        return path


def option_names(command: click.Command) -> set[str]:
    """Every spelling of ``command``'s options (``--plot``, ``-h``, ``--no-x``), ``--help`` included."""
    names = {"--help"}
    for param in command.params:
        if isinstance(param, click.Option):
            names.update(param.opts, param.secondary_opts)
    return names
