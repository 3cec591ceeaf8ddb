"""The hop from a device connection to the deal tracker: messages and link events become input records.

:meth:`Feed.callbacks` gives a connection's ``on_message`` and ``on_event`` for one device, and
:meth:`Feed.run_ticks` applies a :class:`Tick` about once a second; nothing the tracker raises
reaches the connection (logged, ``tracker_input_failed``). Which event becomes which record:
docs/deal-tracking.md, "Inputs"::

    feed = Feed(table)
    on_message, on_event = feed.callbacks("shoe-reader")
    ticks = asyncio.create_task(feed.run_ticks())"""
from __future__ import annotations

import asyncio
from typing import Callable

import structlog

from core.callbacks import call_logged
from core.errors import CarddError
from devices.events import Event
from devices.tracker.inputs import DeviceMessage, LinkDown, LinkUp, TableInput, Tick
from devices.tracker.table import Table
from firmware_bridge.messages import Message
from firmware_bridge.session import SessionEvent, SessionEventKind

log = structlog.get_logger(__name__)

#: Called after each input the feed applied, with the events it caused.
Applied = Callable[[TableInput, list[Event]], None]
#: a device refused as not trusted (protocol 2.0) is gone to the table as an unplugged one is: a live round held
_LINK_DOWN = frozenset({SessionEventKind.DISCONNECTED, SessionEventKind.LINK_FAILED, SessionEventKind.INCOMPATIBLE,
                        SessionEventKind.NOT_TRUSTED})


class Feed:
    """Routes connections' messages and events, and a periodic tick, into one table."""

    def __init__(self, table: Table, on_applied: Applied | None = None) -> None:
        self.table = table
        self._on_applied = on_applied

    def callbacks(self, device: str) -> tuple[Callable[[Message], None], Callable[[SessionEvent], None]]:
        """``(on_message, on_event)`` for the connection of ``device`` ("shuffler" or "shoe-reader")."""
        def on_message(msg: Message) -> None:
            self.message(device, msg)

        def on_event(event: SessionEvent) -> None:
            self.connection_event(device, event)

        return on_message, on_event

    def message(self, device: str, msg: Message) -> list[Event]:
        """One message from ``device``; returns the events it caused (none if it was refused)."""
        return self.apply(DeviceMessage(device, msg))

    def connection_event(self, device: str, event: SessionEvent) -> list[Event]:
        """One event of ``device``'s connection, mapped as the module docstring says."""
        caused: list[Event] = []
        if event.kind is SessionEventKind.CONNECTED:
            caused += self.apply(LinkUp(device))
            if event.ident is not None:
                caused += self.apply(DeviceMessage(device, event.ident))
        elif event.kind in _LINK_DOWN:
            caused += self.apply(LinkDown(device))
        return caused

    def tick(self) -> list[Event]:
        return self.apply(Tick())

    async def run_ticks(self, interval: float = 1.0) -> None:
        """Apply a Tick every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            self.tick()

    def apply(self, inp: TableInput) -> list[Event]:
        """Apply ``inp``; a failure is logged, never raised (the caller is a connection's callback)."""
        try:
            caused = self.table.apply(inp)
        except CarddError as exc:  # refused: the tracker journaled why, if it is a refusal it journals
            log.warning("tracker_input_refused", input=type(inp).__name__, error=str(exc))
            return []
        except Exception:
            log.exception("tracker_input_failed", input=type(inp).__name__)
            return []
        if self._on_applied is not None:
            call_logged(log, "feed_on_applied_failed", self._on_applied, inp, caused, input=type(inp).__name__)
        return caused
