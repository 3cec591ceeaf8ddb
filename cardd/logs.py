"""The daemon's logs: structlog, configured once, human-readable on a terminal, JSON lines under systemd.

``configure_logging("auto")`` renders for a person when stderr is a terminal and one JSON
object per line otherwise (under systemd stderr is the journal's stream socket); ``console``
or ``json`` force one (``cardd --log-format``). Under the journal (``$JOURNAL_STREAM`` names
stderr) each line also starts with its syslog priority, ``<4>``, which journald strips and
stores, so ``journalctl -u cardd -p warning`` works. The standard library's ``logging``
(asyncio, libraries) goes through the same processors and renderer.

Device-controlled text (a serial number, a firmware name) must never forge a log line: the
JSON renderer escapes control characters, and before the console renderer every text value
holding one is written as its ``repr``.
"""
from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping
from typing import Literal, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

LogFormat = Literal["auto", "console", "json"]
Rendered = Literal["console", "json"]

#: C0 and C1 controls (ESC starts terminal escapes), DEL, and Unicode's line and paragraph separators
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SYSLOG_PRIORITY = {"debug": 7, "info": 6, "warning": 4, "error": 3, "exception": 3, "critical": 2}


class Escaped:
    """Text shown as its repr, however the console renderer formats it (str() for the event,
    repr() for values): not a str, so the renderer cannot print it raw or repr it twice."""

    __slots__ = ("shown",)

    def __init__(self, text: str) -> None:
        self.shown = repr(text)

    def __repr__(self) -> str:
        return self.shown

    __str__ = __repr__


def escape_control_characters(logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
    """Text values holding a control character are shown as their repr: a newline or an escape
    sequence in device text cannot start a fake line or repaint the terminal. (The console
    renderer itself quotes text with spaces or newlines, but prints ESC and U+2028 raw.)"""
    for key, value in event.items():
        if isinstance(value, str) and _CONTROL.search(value):
            event[key] = Escaped(value)
    return event


class _JournalPriority:
    """Wraps a renderer: ``<N>`` before each line so journald records the level as PRIORITY."""

    def __init__(self, renderer: Processor) -> None:
        self.renderer = renderer

    def __call__(self, logger: WrappedLogger, method: str, event: EventDict) -> str:
        level = str(event.get("level", method))
        line = self.renderer(logger, method, event)
        return f"<{_SYSLOG_PRIORITY.get(level, 6)}>{line!s}"


def under_journal(stream: TextIO, environ: Mapping[str, str]) -> bool:
    """True if ``stream`` is the journal's stream socket: ``$JOURNAL_STREAM`` is its ``DEV:INODE``."""
    try:
        found = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):  # a StringIO, a closed stream
        return False
    return environ.get("JOURNAL_STREAM", "") == f"{found.st_dev}:{found.st_ino}"


def resolve_format(fmt: LogFormat, stream: TextIO, environ: Mapping[str, str]) -> Rendered:
    if fmt != "auto":
        return fmt
    return "console" if stream.isatty() and not under_journal(stream, environ) else "json"


def configure_logging(fmt: LogFormat = "auto", level: str = "info", *, stream: TextIO | None = None,
                      environ: Mapping[str, str] | None = None) -> Rendered:
    """Configure structlog and the standard library's root logger to write to ``stream`` (stderr)
    at ``level`` and above; returns the format chosen. Calling it again replaces the setup."""
    out = sys.stderr if stream is None else stream
    env = os.environ if environ is None else environ
    rendered = resolve_format(fmt, out, env)
    threshold = logging.getLevelNamesMapping()[level.upper()]
    renderer: Processor
    if rendered == "json":
        renderer = structlog.processors.JSONRenderer()
        if under_journal(out, env):
            renderer = _JournalPriority(renderer)
        last: list[Processor] = [structlog.processors.format_exc_info, renderer]
    else:
        colors = out.isatty() and "NO_COLOR" not in env
        last = [escape_control_characters, structlog.dev.ConsoleRenderer(colors=colors)]
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.processors.StackInfoRenderer(), *last],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=structlog.WriteLoggerFactory(out),
        cache_logger_on_first_use=True,
    )
    _route_standard_logging(out, threshold, shared, last)
    return rendered


class _Handler(logging.StreamHandler):
    """cardd's handler on the root logger (found and replaced when configured again)."""


def _route_standard_logging(stream: TextIO, threshold: int, shared: list[Processor], last: list[Processor]) -> None:
    handler = _Handler(stream)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *last],
    ))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(threshold)

