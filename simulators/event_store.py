"""A device's numbered events, kept until the host confirms them as journaled (protocol 1.1): kept
across ``reboot()``, bounded, the oldest pushed out when full (:attr:`overflowed`).
docs/simulators.md, "How an endpoint runs a device"; docs/protocol.md §3.2."""
from __future__ import annotations

from collections import deque

from typing import Any

from firmware_bridge.messages import NO_JOURNAL, DropReason, EventsDropped, Message, decode, encode

#: unconfirmed events a device keeps by default (docs/protocol.md §3.2)
DEFAULT_CAPACITY = 4096


class EventStore:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"event buffer of {capacity}: at least 1 event")
        self.capacity = capacity
        self.last_index = 0  # the index of the newest event (0: none yet)
        self.confirmed = 0  # the highest index a host confirmed as journaled
        self.overflowed = 0  # events pushed out unconfirmed, in the store's life
        self._events: deque[Message] = deque()  # indexes last_index - len + 1 .. last_index

    def __len__(self) -> int:
        return len(self._events)

    @property
    def first_index(self) -> int:
        """The index of the oldest event kept (last_index + 1 when none is)."""
        return self.last_index - len(self._events) + 1

    def add(self, msg: Message) -> int:
        """Number ``msg`` and keep it; returns its index."""
        while len(self._events) >= self.capacity:
            self._events.popleft()
            self.overflowed += 1
        self._events.append(msg)
        self.last_index += 1
        return self.last_index

    def memory(self) -> dict[str, Any]:
        """What a device writes to its memory (simulators/nvram.py): the numbering and each kept event's bytes."""
        return {"last_index": self.last_index, "confirmed": self.confirmed, "overflowed": self.overflowed,
                "kept": [encode(msg).hex() for msg in self._events]}

    def restore(self, data: Any) -> None:
        """Back to what :meth:`memory` gave; ValueError if it is not that."""
        try:
            kept = [decode(bytes.fromhex(text)) for text in data["kept"]]
            last_index, confirmed, overflowed = int(data["last_index"]), int(data["confirmed"]), int(data["overflowed"])
        except Exception as exc:  # any damage: not what a device wrote
            raise ValueError(f"events: {type(exc).__name__}: {exc}") from None
        self.last_index, self.confirmed, self.overflowed = last_index, confirmed, overflowed
        self._events = deque(kept[-self.capacity:])

    def get(self, index: int) -> Message:
        return self._events[index - self.first_index]

    def confirm(self, up_to: int) -> None:
        """The host journaled every event up to ``up_to``: forget them. An index beyond the
        newest event (a host that journaled more than this store ever numbered: a factory
        reset or another unit) moves the numbering past it, so no new event reuses an index."""
        events = self._events
        if up_to > self.last_index:
            self.last_index = up_to
            events.clear()
        # the kept events from first_index through up_to go (first_index taken once, not an event)
        forget = min(len(events), up_to - self.first_index + 1)
        if forget == len(events):
            events.clear()
        else:
            for _ in range(forget):
                events.popleft()
        self.confirmed = max(self.confirmed, up_to)

    def resume(self, journaled: int) -> list[EventsDropped]:
        """The host journaled up to ``journaled`` and asks for everything after it: what of that
        is gone, to report before the events resent from :attr:`first_index`. NO_JOURNAL: a host
        without a journal; everything kept counts as handled, only new events go to it."""
        if journaled == NO_JOURNAL:
            journaled = self.last_index
        self.confirm(journaled)
        gone: list[EventsDropped] = []
        start = journaled + 1
        if start <= self.confirmed:  # a host confirmed these before; this one's journal lacks them
            gone.append(EventsDropped(start, self.confirmed - start + 1, DropReason.CONFIRMED))
            start = self.confirmed + 1
        if start < self.first_index:
            gone.append(EventsDropped(start, self.first_index - start, DropReason.OVERFLOW))
        return gone
