"""The host's side of numbered events (protocol 1.1, docs/protocol.md §3.2): each index once, in order.

One :class:`EventDelivery` per device connection outlives its sessions. It knows the highest
event index the application has been given (or that the application said it journaled, at a
handshake) and judges each :class:`~firmware_bridge.messages.Event` that arrives: an index at
or below it is a resend the application already has (dropped, counted); the next index is
delivered; a higher one is delivered too, and the indexes skipped are reported as a gap, never
passed over silently. A device's EventsDropped moves the mark past events it no longer has.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

#: what accept() says of the event that follows the last one (deliver it, nothing skipped), made once
_NEXT: tuple[bool, range] = (True, range(0))


@dataclass(slots=True)
class DeliveryStats:
    delivered: int = 0  # events given to the application
    duplicates_dropped: int = 0  # resent events it already had
    gaps: int = 0  # times an index was skipped
    missing: int = 0  # indexes skipped, in all
    dropped_by_device: int = 0  # indexes the device said it no longer has (EventsDropped), not delivered before
    resumes: int = 0  # ResumeEvents sent (one per handshake with a 1.1 device)
    confirms_sent: int = 0  # EventsJournaled sent


class EventDelivery:
    def __init__(self) -> None:
        # the highest index the application has (delivered, or journaled as said at resume)
        self.last = 0
        self._stats = DeliveryStats()

    @property
    def stats(self) -> DeliveryStats:
        return replace(self._stats)

    def count(self, **increments: int) -> None:
        for name, by in increments.items():
            setattr(self._stats, name, getattr(self._stats, name) + by)

    def resume(self, journaled: int) -> None:
        """A handshake: the device will send every event after ``journaled`` again."""
        self.last = max(self.last, journaled)
        self._stats.resumes += 1

    def restart(self, journaled: int) -> None:
        """Another unit answers now: its numbering has nothing to do with the last one's."""
        self.last = journaled
        self._stats.resumes += 1

    @property
    def delivered_up_to(self) -> int:
        return self.last

    def accept(self, index: int) -> tuple[bool, range]:
        """Whether to deliver the event ``index``, and the indexes skipped before it (empty: none)."""
        if index == self.last + 1:  # the next one, as nearly every event comes: no range to build
            self.last = index
            self._stats.delivered += 1
            return _NEXT
        if index <= self.last:
            self._stats.duplicates_dropped += 1
            return False, range(0)
        skipped = range(self.last + 1, index)
        if skipped:
            self._stats.gaps += 1
            self._stats.missing += len(skipped)
        self.last = index
        self._stats.delivered += 1
        return True, skipped

    def dropped(self, first: int, count: int) -> range:
        """The device no longer has ``first`` .. ``first + count - 1``: those the application
        does not have either (any skipped before ``first`` included) are lost, and the mark
        moves past them."""
        lost = range(self.last + 1, first + count)
        if lost:
            self._stats.dropped_by_device += len(lost)
            self.last = lost[-1]
        return lost
