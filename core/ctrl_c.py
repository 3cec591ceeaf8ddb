"""Ctrl-C and the signals that end a program like it, for every entry point (cardctl, cardbench,
the demo, the daemon before it serves): the one owner of the process's signal state.
Why it imports next to nothing: docs/architecture.md, "Ctrl-C"."""
from __future__ import annotations

import sys
from contextlib import contextmanager

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads it as True
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Iterator
    from types import FrameType
    from typing import Any, NoReturn, TypeVar

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


# ---- a program that cleans up after itself: SIGTERM and SIGHUP end it as Ctrl-C does ---------------

_ended_by: list[int] = []  # the signal that ended this program, once one has
_deferred: list[int] = []  # inside ending_deferred (main thread, where Python runs signal handlers): what came


def ending_signals() -> tuple[int, ...]:
    """What ends a program that cleans up after itself (:func:`end_like_ctrl_c`): SIGINT, SIGTERM, SIGHUP."""
    import signal
    return (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def end_like_ctrl_c() -> None:
    """Ctrl-C, SIGTERM and SIGHUP end this program alike: the first raises KeyboardInterrupt in the
    main thread, so its ``finally`` blocks stop the children it started (a ``kill`` or a closed
    terminal must not leave a daemon running on ptys and sockets the next run reuses), and any
    after it is let pass, so that cleanup is not cut short. cardd.cli.common's Program then exits
    128 + the signal's number with one line (:func:`ended_by`, :func:`interrupted_exit_code`)."""
    import signal
    _ended_by.clear()
    for signum in ending_signals():
        if signal.getsignal(signum) is not signal.SIG_IGN:  # ignored by who started it (a `&` job): stays so
            signal.signal(signum, _first_ends)


def _first_ends(signum: int, frame: FrameType | None) -> None:
    import signal
    if _deferred:  # raised where the block ends (ending_deferred)
        _deferred[-1] = signum
        return
    _ended_by.append(signum)
    for ending in ending_signals():  # a Python handler, not SIG_IGN: a child started meanwhile keeps the default
        signal.signal(ending, _already_ending)
    raise KeyboardInterrupt


@contextmanager
def ending_deferred() -> Iterator[None]:
    """Starting a child that is to be stopped: the KeyboardInterrupt of an ending signal that comes
    meanwhile is raised where the block ends, not inside ``subprocess.Popen`` (the child would run
    with nobody holding it to stop it: an orphaned daemon)."""
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield  # handlers run in the main thread only: nothing is raised here
        return
    _deferred.append(0)
    try:
        yield
    finally:
        came = _deferred.pop()
        if came:  # the one that came meanwhile ends the program now (or at the outer block's end)
            _first_ends(came, None)


def _already_ending(signum: int, frame: FrameType | None) -> None:
    """A second signal while the first one's cleanup runs: nothing."""


def ended_by() -> int | None:
    """The signal that ended this program (:func:`end_like_ctrl_c`), or None while none has."""
    return _ended_by[-1] if _ended_by else None


def interrupted_exit_code() -> int:
    """The shell's exit code for the signal that ended this program (130 for a Ctrl-C)."""
    import signal
    return 128 + (_ended_by[-1] if _ended_by else signal.SIGINT)


def stop_child(proc: subprocess.Popen[Any] | None, signum: int, timeout: float) -> None:
    """Stop a child process this program started (it may have ended already: a Ctrl-C reaches the
    whole process group): ``signum``, then SIGKILL if it is still there after ``timeout`` seconds."""
    import subprocess
    if proc is None:
        return
    if proc.poll() is None:
        proc.send_signal(signum)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
