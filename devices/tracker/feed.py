"""The hop from a device connection to the deal tracker: messages and link events become input records.

A connection (``DeviceSession`` or ``ManagedDevice``) calls ``on_message(Message)`` and
``on_event(SessionEvent)``; :meth:`Feed.callbacks` gives both for one device, bound to its
name, and :meth:`Feed.run_ticks` applies a :class:`Tick` about once a second so the device
models notice silence. Each becomes a record of :mod:`devices.tracker.inputs` applied with
:meth:`Table.apply`::

    feed = Feed(table)
    on_message, on_event = feed.callbacks("shoe-reader")
    session = DeviceSession(SerialTransport(url), on_message, on_event, config)
    ticks = asyncio.create_task(feed.run_ticks())

Nothing the tracker raises reaches the connection: a refused or failing input is logged
(structlog, ``tracker_input_failed``) and the feed goes on with the next one.

Connection events, as the tracker sees them:

- CONNECTED: :class:`LinkUp`, then the device's IDENT as a :class:`DeviceMessage` (the model
  compares boot ids itself: a reboot mid-round holds the round); a 1.1 device's events of that
  session come after it (the session holds back what comes during its handshake);
- DISCONNECTED, LINK_FAILED, INCOMPATIBLE: :class:`LinkDown` (the device is out of play);
- the rest carry nothing new for the tracker: IDENT, REBOOTED and REPLACED come with an IDENT
  the model gets as a message, and STALE/FRESH are decided by the model's own clock (ticks).
"""
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
_LINK_DOWN = frozenset({SessionEventKind.DISCONNECTED, SessionEventKind.LINK_FAILED, SessionEventKind.INCOMPATIBLE})


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
