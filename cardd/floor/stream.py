"""The live change feed: what the floor service saw change, for the HTTP API's event stream.

The service publishes each change (a table's state, a floor alarm, new records) to the
:class:`Hub`; each change gets an id, one more than the last. The hub keeps the most recent
changes in a bounded ring, so a client that reconnects with the id it saw last (SSE's
``Last-Event-ID``) gets exactly the changes it missed, and a client whose id the ring does not
hold, or never held (an id of an earlier run), gets ``None`` from :meth:`Hub.since`: it needs a
snapshot first, then the changes after it.

Ids start at the time of the hub's start in microseconds, so an id from an earlier run of
cardfloor is below every id of this run (unless that run published more than a million
changes a second on average) and is never taken for one of this run's; they stay below 2**53,
so a browser's JavaScript reads them exactly.
"""
from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import deque
from typing import Any, Literal

import msgspec

#: what a change is about: a table's state or status, a floor alarm, records archived, rounds
#: completed among them (a page's count without a read of the archive), the floor's own link
#: to the broker
Kind = Literal["table", "alarm", "records", "rounds", "broker"]
KINDS: tuple[str, ...] = ("table", "alarm", "records", "rounds", "broker")
#: the kinds about the whole floor, not a table: every client gets them, whatever its pits
FLOOR_WIDE: frozenset[str] = frozenset({"broker"})
#: how many recent changes a hub keeps for clients that reconnect
DEFAULT_CAPACITY = 10_000

_JSON = msgspec.json.Encoder()


class Change(msgspec.Struct, frozen=True):
    """One change: its id (increasing), what it is about, its data, and the whole change as a
    server-sent event (encoded once, when published, however many clients the stream sends it to)."""
    id: int
    kind: str
    data: dict[str, Any]
    #: ``id:``, ``event:`` and ``data:`` (the data as JSON, one line: msgspec writes a newline in a
    #: string as ``\n``) and the blank line that ends an event
    event: bytes


class Hub:
    """The ring of recent changes and the clients waiting for the next one.

    :meth:`publish` may be called from any thread (the receiver's, the service's loop); a
    waiter is woken on its own event loop."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, *, first_id: int | None = None) -> None:
        if capacity < 1:
            raise ValueError("a hub keeps at least one change")
        self._ring: deque[Change] = deque(maxlen=capacity)
        start = time.time_ns() // 1000 if first_id is None else first_id
        #: the id of the last change published; ``start - 1`` before the first
        self._last = start - 1
        self._start = start
        self._lock = threading.Lock()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = set()

    @property
    def last_id(self) -> int:
        """The id of the last change published (one below the first id before any)."""
        return self._last

    @property
    def waiting(self) -> int:
        """How many clients wait for a change now."""
        with self._lock:
            return len(self._waiters)

    def publish(self, kind: str, data: dict[str, Any]) -> int:
        """Keep a change and wake every waiter; its id."""
        if kind not in KINDS:
            raise ValueError(f"a change of kind {kind!r}: the kinds are {', '.join(KINDS)}")
        text = _JSON.encode(data).decode()
        with self._lock:
            self._last += 1
            event = f"id: {self._last}\r\nevent: {kind}\r\ndata: {text}\r\n\r\n".encode()
            self._ring.append(Change(self._last, kind, data, event))
            waiters, self._waiters = self._waiters, set()
        for loop, future in waiters:
            try:
                loop.call_soon_threadsafe(_wake, future)
            except RuntimeError:  # that loop is closed: nobody waits there any more
                pass
        return self._last

    def since(self, last_id: int | None) -> list[Change] | None:
        """The changes after ``last_id``, oldest first (empty when there is none yet); None when
        ``last_id`` is None, unknown (above the last id, or from before this hub started) or so
        old the ring has dropped a change after it: the client needs a snapshot."""
        if last_id is None:
            return None
        with self._lock:
            if last_id > self._last or last_id < self._start - 1:
                return None
            if last_id == self._last:
                return []
            first = self._ring[0].id
            if last_id < first - 1:
                return None
            # from the newest end: a client is nearly always a few changes behind, and skipping
            # from the oldest would walk the whole ring each time
            newer = list(itertools.islice(reversed(self._ring), self._last - last_id))
            newer.reverse()
            return newer

    async def wait(self, after_id: int, timeout: float) -> list[Change]:
        """The changes after ``after_id``, waiting up to ``timeout`` seconds for one; empty when
        none came (or when ``after_id`` needs a snapshot: ask :meth:`since`). A waiter cancelled
        (a client gone) is forgotten."""
        changes = self.since(after_id)
        if changes is None:
            return []
        if changes:
            return changes
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        waiter = (loop, future)
        with self._lock:
            published = self._last != after_id  # between since() and now
            if not published:
                self._waiters.add(waiter)
        if published:
            return self.since(after_id) or []
        try:
            await asyncio.wait({future}, timeout=timeout)
        finally:
            with self._lock:
                self._waiters.discard(waiter)
            future.cancel()
        return self.since(after_id) or []


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
