"""How a program that cleans up after itself ends on a signal (core.ctrl_c.end_like_ctrl_c),
in this process: tests/conftest.py puts the handlers back after each test."""
from __future__ import annotations

import signal
import subprocess

import pytest

from core.ctrl_c import end_like_ctrl_c, ending_deferred, interrupted_exit_code


def test_the_first_signal_raises_and_the_next_ones_are_let_pass() -> None:
    end_like_ctrl_c()
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGHUP)
    signal.raise_signal(signal.SIGTERM)  # during the first one's cleanup: nothing
    signal.raise_signal(signal.SIGINT)
    assert interrupted_exit_code() == 128 + signal.SIGHUP


def test_a_signal_while_a_child_starts_is_raised_once_the_child_is_held() -> None:
    end_like_ctrl_c()
    held: list[subprocess.Popen[bytes]] = []
    try:
        with pytest.raises(KeyboardInterrupt):
            with ending_deferred():
                signal.raise_signal(signal.SIGTERM)  # as if it came inside Popen
                held.append(subprocess.Popen(["sleep", "30"]))
        assert len(held) == 1 and held[0].poll() is None  # started, and the program has it to stop
        assert interrupted_exit_code() == 128 + signal.SIGTERM
    finally:
        for child in held:
            child.kill()
            child.wait()


def test_a_block_without_a_signal_raises_nothing_and_a_new_program_starts_clean() -> None:
    end_like_ctrl_c()
    with pytest.raises(KeyboardInterrupt):
        with ending_deferred():
            signal.raise_signal(signal.SIGINT)
    end_like_ctrl_c()  # the next program run in this process
    with ending_deferred():
        pass
    assert interrupted_exit_code() == 128 + signal.SIGINT  # none ended this one: Ctrl-C's code by default


def test_a_signal_ignored_by_whoever_started_the_program_stays_ignored() -> None:
    """A job started with `&` by a shell script has SIGINT ignored: Ctrl-C at the terminal is not
    for it, and a program that cleans up after itself leaves it so (Python's own rule)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    end_like_ctrl_c()
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    signal.raise_signal(signal.SIGINT)  # nothing
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGTERM)
