"""A real terminal for the tests: a program in tmux, its screen as a person sees it (and with its
colour codes), and the width a terminal gives each character."""
from __future__ import annotations

import ctypes
import locale
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache


class Tmux:
    """``command`` running in a detached tmux session of ``width`` x ``height`` cells, on a tmux
    server of its own (no configuration file, no other session: another test's or a person's
    server may have other global options and environment), which :meth:`close` ends."""

    def __init__(self, name: str, command: list[str], width: int = 160, height: int = 60) -> None:
        assert shutil.which("tmux"), "tmux is installed by make sysdeps"
        self.name = name
        self._directory = tempfile.mkdtemp(prefix="cardd-tmux-")
        self._server = ["tmux", "-f", "/dev/null", "-S", os.path.join(self._directory, "server")]
        # the size is the terminal's alone: a COLUMNS or LINES in the environment would override it
        subprocess.run([*self._server, "new-session", "-d", "-s", name, "-x", str(width), "-y", str(height),
                        "env", "-u", "COLUMNS", "-u", "LINES", *command], check=True)

    def screen(self, escapes: bool = False, history: bool = False) -> str:
        """The screen's lines; with ``escapes``, with the SGR codes of their colours and attributes;
        with ``history``, the lines scrolled off the top before them."""
        return subprocess.run([*self._server, "capture-pane", "-p", *(["-e"] if escapes else []),
                               *(["-S", "-"] if history else []), "-t", self.name],
                              capture_output=True, text=True, check=True).stdout

    def wait_for(self, check: Callable[[str], bool], timeout: float = 20.0, escapes: bool = False,
                 history: bool = False) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen(escapes, history)
            if check(screen):
                return screen
            assert time.monotonic() < deadline, f"the screen never showed it:\n{screen}"
            time.sleep(0.1)

    def resize(self, width: int, height: int) -> None:
        """The terminal resized, as a person drags its window: the program gets SIGWINCH."""
        subprocess.run([*self._server, "resize-window", "-t", self.name, "-x", str(width), "-y", str(height)],
                       check=True)

    def send_keys(self, *keys: str) -> None:
        """Keys typed into the terminal, in tmux's names (``C-c`` for Ctrl-C)."""
        subprocess.run([*self._server, "send-keys", "-t", self.name, *keys], check=True)

    def close(self) -> None:
        subprocess.run([*self._server, "kill-server"], capture_output=True)
        shutil.rmtree(self._directory, ignore_errors=True)


def kept_open(*command: str) -> list[str]:
    """``command`` in a shell that says how it ended (``ended with CODE``) and keeps the terminal
    open to read: a program that ends (or crashes) leaves its last screen."""
    return ["sh", "-c", shlex.join(command) + '; echo "ended with $?"; sleep 600']


@lru_cache(maxsize=None)
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None)
    libc.wcwidth.argtypes = [ctypes.c_wchar]
    libc.wcwidth.restype = ctypes.c_int
    return libc


@contextmanager
def _utf8_ctype() -> Iterator[None]:
    saved = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C.UTF-8")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)


@lru_cache(maxsize=65536)
def terminal_width(char: str) -> int:
    """The cells a terminal gives ``char``: the C library's wcwidth in a UTF-8 locale, which tmux
    uses (-1 for a character it does not print)."""
    with _utf8_ctype():
        width: int = _libc().wcwidth(char)
    return width


def line_width(line: str) -> int:
    """The cells ``line`` (no escape codes) takes on a terminal."""
    return sum(max(terminal_width(char), 0) for char in line)
