"""Calling someone else's callback: its failure is logged and never stops the caller.

Every layer hands bytes, messages and events to callbacks it does not own (a transport's
listener, a connection's ``on_message``, the feed's ``on_applied``); this is the one way they
are called. It lives in core, which every layer may import.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol


class ExceptionLogger(Protocol):
    """What :func:`call_logged` needs of a logger (a structlog logger is one)."""

    def exception(self, event: str, **context: Any) -> Any: ...


def call_logged(log: ExceptionLogger, what: str, fn: Callable[..., Any], *args: Any, **context: Any) -> None:
    """Call ``fn(*args)``; an exception there is logged as ``what`` (with ``context``, e.g. the
    device, and the head of any bytes argument) and swallowed: an owner's broken callback must
    never stop the loop, a reader thread, a link or a supervisor that called it. Hot paths call
    this per chunk, so the bytes are only looked at once something failed."""
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - the callee's bug, reported where it happened
        for arg in args:
            if isinstance(arg, (bytes, bytearray)):
                context.setdefault("size", len(arg))
                context.setdefault("head", bytes(arg[:32]).hex(" "))
        log.exception(what, **context)
