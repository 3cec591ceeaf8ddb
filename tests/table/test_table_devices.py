"""Device models: link life, staleness from an injected clock, faults, one event per transition."""
from __future__ import annotations

import pytest

from devices.events import Reason
from devices.models.shoe_reader_model import ShoeReaderModel
from devices.models.shuffler_model import ShufflerModel
from core.cards import Card, Orientation
from firmware_bridge.messages import (
    CardRead, DeviceRole, DeviceState, Fault, FaultCleared, FaultCode, Heartbeat, Ident, ShoeEmpty, ShoeLoaded,
    ShuffleComplete, ShuffleProgress, Status,
)
from core.cards import shoe_composition

from tests.support.recorders import FakeClock

pytestmark = pytest.mark.timeout(30)


def ident(role: DeviceRole, boot: int = 1) -> Ident:
    return Ident(role, "sim", "SN1", "1.0.0", 1, 0, boot)


def reader() -> tuple[ShoeReaderModel, list, FakeClock]:
    events: list = []
    clock = FakeClock()
    m = ShoeReaderModel(events.append, clock=clock, stale_after_s=3.0)
    m.link_up()
    m.on_message(ident(DeviceRole.SHOE))
    return m, events, clock


def test_every_transition_is_an_event() -> None:
    m, events, _ = reader()
    m.on_message(ShoeLoaded(0))
    m.on_message(CardRead(1, Card.parse("AS"), Orientation.FACE_DOWN, 0))
    m.on_message(ShoeEmpty(1, 0))
    path = [(e.data["from"], e.data["to"]) for e in events]
    assert path == [("offline", "connecting"), ("connecting", "idle"), ("idle", "loaded"),
                    ("loaded", "dealing"), ("dealing", "idle")]
    assert all(e.reason is Reason.DEVICE_STATE and e.source == "shoe-reader" for e in events)


def test_silence_makes_a_device_stale_and_only_proof_of_life_brings_it_back() -> None:
    m, events, clock = reader()
    m.on_message(ShoeLoaded(0))
    clock.now += 2.9
    assert not m.check_heartbeat()
    clock.now += 0.2
    assert m.check_heartbeat() and m.state == "stale" and not m.accepts_reads
    assert events[-1].reason is Reason.DEVICE_STALE
    m.on_message(CardRead(1, Card.parse("AS"), Orientation.FACE_DOWN, 0))
    assert m.state == "stale"  # a card read is not proof of life
    m.on_message(Heartbeat(5))
    assert m.state == "loaded" and events[-1].reason is Reason.DEVICE_RECOVERED


def test_fault_and_clear_return_to_the_state_before() -> None:
    m, events, _ = reader()
    m.on_message(ShoeLoaded(0))
    m.on_message(Fault(FaultCode.COVER_OPEN, 0, "lid open"))
    assert m.state == "fault" and events[-1].reason is Reason.DEVICE_FAULT
    assert "COVER_OPEN" in events[-1].message
    m.on_message(FaultCleared(FaultCode.JAM))  # another fault's clearing changes nothing
    assert m.state == "fault"
    m.on_message(FaultCleared(FaultCode.COVER_OPEN))
    assert m.state == "loaded"


def test_a_device_in_fault_that_reports_another_fault_has_that_one_now_journaled() -> None:
    """The device says what is wrong now, in its Status (asked after a handshake) or a Fault event:
    the model's active fault follows it, one DEVICE_FAULT names the change, and only the current
    fault's clearing ends it."""
    m, events, _ = reader()
    m.on_message(ShoeLoaded(0))
    m.on_message(Fault(FaultCode.JAM, 3, "card stuck"))
    before = len(events)
    m.on_message(Status(DeviceState.FAULT, FaultCode.COVER_OPEN, 312, 1000))
    assert m.state == "fault" and m.active_fault is not None and m.active_fault.code is FaultCode.COVER_OPEN
    changed, = events[before:]
    assert changed.reason is Reason.DEVICE_FAULT and changed.source == "shoe-reader"
    assert changed.data == {"device": "shoe-reader", "from": "fault", "to": "fault", "trigger": "status",
                            "fault": "COVER_OPEN", "position": 0, "detail": "cover open (reported in its status)",
                            "previous": "JAM"}
    assert changed.message == ("shoe-reader: fault now COVER_OPEN at position 0 cover open (reported in its "
                               "status) (was JAM)")
    m.on_message(Status(DeviceState.FAULT, FaultCode.COVER_OPEN, 312, 1000))  # the same again: nothing new
    m.on_message(FaultCleared(FaultCode.JAM))  # the fault it no longer has
    assert m.state == "fault" and len(events) == before + 1
    m.on_message(Fault(FaultCode.MOTOR, 0, "motor stalled"))  # a Fault event the same way
    assert m.active_fault == Fault(FaultCode.MOTOR, 0, "motor stalled")
    assert events[-1].reason is Reason.DEVICE_FAULT and events[-1].data["trigger"] == "fault"
    assert events[-1].message == "shoe-reader: fault now MOTOR at position 0 motor stalled (was COVER_OPEN)"
    m.on_message(FaultCleared(FaultCode.MOTOR))
    assert m.state == "loaded" and m.active_fault is None and events[-1].reason is Reason.DEVICE_RECOVERED


def test_a_device_stale_in_fault_comes_back_with_the_fault_its_status_names() -> None:
    m, events, clock = reader()
    m.on_message(Fault(FaultCode.SENSOR, 0, ""))
    clock.now += 5
    m.check_heartbeat()
    before = len(events)
    m.on_message(Status(DeviceState.FAULT, FaultCode.DOOR_OPEN, 0, 1000))
    back, = events[before:]  # one event: back to fault, naming the fault it has now
    assert m.state == "fault" and back.reason is Reason.DEVICE_FAULT and back.data["fault"] == "DOOR_OPEN"


def test_a_fault_outlives_a_silence() -> None:
    m, _, clock = reader()
    m.on_message(Fault(FaultCode.SENSOR, 0, ""))
    clock.now += 5
    m.check_heartbeat()
    assert m.state == "stale"
    m.on_message(Heartbeat(1))
    assert m.state == "fault"


def test_a_stale_device_whose_status_says_no_fault_comes_back_where_it_was_not_through_fault() -> None:
    m, events, clock = reader()
    m.on_message(ShoeLoaded(0))
    m.on_message(Fault(FaultCode.SENSOR, 0, ""))
    clock.now += 5
    m.check_heartbeat()
    assert m.state == "stale"
    before = len(events)
    m.on_message(Status(DeviceState.IDLE, 0, 312, 1000))  # the fault ended while it was silent
    assert m.state == "loaded" and m.active_fault is None
    assert [e.reason for e in events[before:]] == [Reason.DEVICE_RECOVERED]  # no DEVICE_FAULT on the way


def test_status_reports_faults_and_reboot_shows_in_ident() -> None:
    m, events, _ = reader()
    m.on_message(Status(DeviceState.FAULT, 1, 0, 0))
    assert m.state == "fault"
    m.on_message(ident(DeviceRole.SHOE, boot=2))
    assert m.state == "idle" and events[-1].data["rebooted"] is True


def test_disconnect_from_anywhere_goes_offline() -> None:
    m, events, _ = reader()
    m.on_message(ShoeLoaded(0))
    m.link_down()
    assert m.state == "offline" and events[-1].reason is Reason.DEVICE_OFFLINE
    assert not m.usable


def test_shuffler_shuffles_and_hands_off() -> None:
    events: list = []
    s = ShufflerModel(events.append, clock=FakeClock())
    s.link_up()
    s.on_message(ident(DeviceRole.SHUFFLER))
    s.on_message(ShuffleProgress(10, 3))
    assert s.state == "shuffling"
    s.on_message(ShuffleComplete(312, shoe_composition(6)))
    assert s.state == "ready"
    s.stack_taken()
    assert s.state == "idle"
    s.on_message(ShuffleComplete(312, shoe_composition(6)))  # an instant shuffle sends no progress
    assert s.state == "ready"
    assert [e.data["to"] for e in events][-3:] == ["idle", "shuffling", "ready"]
