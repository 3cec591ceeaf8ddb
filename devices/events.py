"""Events the device models and the deal tracker emit, and the reason codes they carry.

Every state change and every irregularity is an :class:`Event`. The daemon journals each
one durably; tests assert on them. Reason codes are stable strings: they are what a
regulator's report, a supervisor's screen and a log search key on, so never rename one.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable


class Severity(enum.StrEnum):
    INFO = "info"
    WARNING = "warning"  # needs attention, play continues
    ALARM = "alarm"  # play is held or blocked until someone acts


class Role(enum.StrEnum):
    """Who may act. Overrides (resume, re-deal, void, accept) need SUPERVISOR."""

    DEALER = "dealer"
    SUPERVISOR = "supervisor"
    TECHNICIAN = "technician"


class Reason(enum.StrEnum):
    # device models
    DEVICE_STATE = "DEVICE_STATE"  # a device model changed state
    DEVICE_STALE = "DEVICE_STALE"  # heartbeat lost
    DEVICE_OFFLINE = "DEVICE_OFFLINE"
    DEVICE_FAULT = "DEVICE_FAULT"
    DEVICE_RECOVERED = "DEVICE_RECOVERED"
    READ_FROM_STALE_DEVICE = "READ_FROM_STALE_DEVICE"  # refused card read
    # shoe life
    SHOE_STATE = "SHOE_STATE"
    SHOE_VERIFIED = "SHOE_VERIFIED"
    SHOE_REFUSED = "SHOE_REFUSED"  # missing / extra cards at verification
    CUT_CARD_OUT = "CUT_CARD_OUT"
    BURN = "BURN"
    DEALER_CHANGE_BURN = "DEALER_CHANGE_BURN"
    RECONCILED = "RECONCILED"
    RECONCILIATION_FAILED = "RECONCILIATION_FAILED"
    SHOE_VOID = "SHOE_VOID"
    # round
    ROUND_STATE = "ROUND_STATE"
    CARD_ASSIGNED = "CARD_ASSIGNED"
    ACTION = "ACTION"
    ACTION_REFUSED = "ACTION_REFUSED"
    SETTLED = "SETTLED"
    ROUND_HELD = "ROUND_HELD"
    ROUND_RESUMED = "ROUND_RESUMED"
    ROUND_VOID = "ROUND_VOID"
    REDEAL = "REDEAL"
    # irregularities
    SHUFFLER_MALFUNCTION = "SHUFFLER_MALFUNCTION"
    FACE_UP_CARD = "FACE_UP_CARD"
    FOREIGN_CARD = "FOREIGN_CARD"
    UNREADABLE_CARD = "UNREADABLE_CARD"
    CARD_ENTERED_BY_DEALER = "CARD_ENTERED_BY_DEALER"
    CARD_EXPOSED_IN_ERROR = "CARD_EXPOSED_IN_ERROR"
    CARD_DRAWN_IN_ERROR = "CARD_DRAWN_IN_ERROR"
    PLACEMENT_ERROR = "PLACEMENT_ERROR"
    CARDS_TO_BOX_WITHOUT_WAGER = "CARDS_TO_BOX_WITHOUT_WAGER"
    OVERRIDE = "OVERRIDE"
    OVERRIDE_REFUSED = "OVERRIDE_REFUSED"
    # appended later: the deal tracker (devices/tracker/table.py) and the shoe (the cut card)
    DEALING_BLOCKED = "DEALING_BLOCKED"  # a card left a shoe that may not be dealt (refused, unverified, complete)
    ALARM_CLEARED = "ALARM_CLEARED"  # a supervisor cleared an open alarm
    CUT_CARD_MISPLACED = "CUT_CARD_MISPLACED"  # the cut card came out where the cut rules do not put it (shoe)
    BOX_OVER_MAXIMUM = "BOX_OVER_MAXIMUM"  # the owner's priority took a box over its maximum: who must reduce
    # what hostile and broken devices do (appended after the reasons above, whose order stays)
    WRONG_DEVICE = "WRONG_DEVICE"  # a device of another role identified on a port: refused, never used
    OUT_OF_ORDER_REPORT = "OUT_OF_ORDER_REPORT"  # a shuffler report its shoe's state does not expect: ignored
    REPEATED_READ = "REPEATED_READ"  # a card read with an index already seen since the load: not dealt again
    MISSING_READ = "MISSING_READ"  # a card read skipped indexes: cards left the shoe unseen; round held
    # appended later: a protocol 1.1 device's events the journal lacks (raised by the daemon, docs/protocol.md §3.2)
    EVENT_GAP = "EVENT_GAP"  # event indexes skipped in the device's stream
    EVENTS_LOST = "EVENTS_LOST"  # the device no longer has events the journal lacks
    DEVICE_DROPPED_EVENTS = "DEVICE_DROPPED_EVENTS"  # the device's own EventsDropped report
    # appended later: the daemon's journal could not be written (its disk full; cardd/daemon/tracker_service.py)
    JOURNAL_WRITE_FAILED = "JOURNAL_WRITE_FAILED"  # a commit failed: its records are kept and written again
    JOURNAL_WRITE_RESUMED = "JOURNAL_WRITE_RESUMED"  # the first commit after a failure: how long, how many waited
    # appended later: the daemon restarted under other house rules, between shoes (devices/tracker/snapshot.py)
    RULES_CHANGED = "RULES_CHANGED"
    # appended later: the shoe reader's count (its Status after each handshake) against the table's
    SHOE_COUNT_MISMATCH = "SHOE_COUNT_MISMATCH"  # the shoe holds more or fewer cards than the table expects
    # appended later: a device that asks for a handshake again and again (raised by the daemon)
    DEVICE_FLAPPING = "DEVICE_FLAPPING"  # re-identified or reset its link soon after each handshake: backed off
    # appended later: a void that lets in the next shoe (devices/tracker/table.py)
    NEXT_SHOE_TAKES_OVER = "NEXT_SHOE_TAKES_OVER"  # the next shoe's reports came in with the void: it is the shoe now
    # appended later: a repeated card index that carries another card than its first read
    CONFLICTING_READ = "CONFLICTING_READ"  # one index, two cards: a damaged or forged read; play stops
    # appended later: a device that sends more status than its budget (raised by the daemon)
    DEVICE_FLOODING = "DEVICE_FLOODING"  # status messages past the device's budget are left out, not journaled
    # appended later: the floor export's backlog (raised and cleared by the daemon, cardd/daemon/export_service.py)
    EXPORT_BACKLOG = "EXPORT_BACKLOG"  # records wait for a broker longer than export.backlog_alarm_s
    EXPORT_DRAINED = "EXPORT_DRAINED"  # the backlog reached the broker: its alarm is over
    # appended later: a protocol 2.0 device refused (raised by the daemon, cardd/daemon/devices.py)
    DEVICE_NOT_TRUSTED = "DEVICE_NOT_TRUSTED"  # unknown key, failed proof, bad tags or a downgrade: refused


@dataclass(frozen=True, slots=True, init=False)
class Event:
    reason: Reason
    source: str  # "shuffler", "shoe-reader", "shoe", "round", "table"
    message: str  # one human sentence: what happened and where
    severity: Severity = Severity.INFO
    data: dict[str, Any] = field(default_factory=dict)  # JSON-serialisable details
    who: str | None = None  # the person behind an input or override

    def __init__(self, reason: Reason, source: str, message: str, severity: Severity = Severity.INFO,
                 data: dict[str, Any] | None = None, who: str | None = None) -> None:
        # Written out, not generated: a frozen dataclass's own __init__ looks object.__setattr__ up
        # for every field, half the cost of an event, and the deal tracker builds about 13 a round.
        _SET_REASON(self, reason)
        _SET_SOURCE(self, source)
        _SET_MESSAGE(self, message)
        _SET_SEVERITY(self, severity)
        _SET_DATA(self, {} if data is None else data)
        _SET_WHO(self, who)


def _slot_setter(name: str) -> Callable[[Event, Any], None]:
    """The slot's own setter: what object.__setattr__ finds for the field, read once."""
    setter: Callable[[Event, Any], None] = vars(Event)[name].__set__
    return setter


_SET_REASON, _SET_SOURCE, _SET_MESSAGE = _slot_setter("reason"), _slot_setter("source"), _slot_setter("message")
_SET_SEVERITY, _SET_DATA, _SET_WHO = _slot_setter("severity"), _slot_setter("data"), _slot_setter("who")


EventSink = Callable[[Event], None]
