"""Protocol 1.1 on the host, against a device written here on a mem:// line: numbered events
(resume point, duplicates dropped, gaps reported, confirmations coalesced) and request ids
(each answer to its own request, a late answer taken by none). The device's buffer is tested
alone (EventStore); tests/e2e/test_e2e_events.py runs the whole path over ptys and pyusb. What a
unit that another host confirmed events of says (EventsDropped CONFIRMED) runs a simulated shoe
behind a real pty."""
from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from structlog.testing import capture_logs

from core.cards import Card, Orientation
from drivers.memory import listen
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.delivery import EventDelivery
from firmware_bridge.errors import EventIndexError, RequestTimeout
from firmware_bridge.messages import (
    Answer,
    CardRead,
    DeviceRole,
    DropReason,
    Event,
    EventsDropped,
    EventsJournaled,
    Heartbeat,
    Hello,
    Ident,
    Message,
    Request,
    ResumeEvents,
    ShoeLoaded,
    Status,
    StatusRequest,
    DeviceState,
    decode,
)
from firmware_bridge.session import SessionConfig, SessionEvent
from firmware_bridge.session import SessionEventKind as K
from simulators.event_store import EventStore
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe
from simulators.stack import full_shoe
from tests.firmware_bridge.fb_device import FAST_RETRY, QUICK, FakeDevice, kinds
from tests.firmware_bridge.fb_wire import Wire
from tests.support.aio import run
from tests.support.poll import until

pytestmark = pytest.mark.timeout(30)


def card(index: int) -> CardRead:
    return CardRead(index, Card.parse("AS"), Orientation.FACE_DOWN, index)


# ---- the device's buffer ----------------------------------------------------------------------


def test_the_store_numbers_from_one_and_forgets_only_what_is_confirmed():
    store = EventStore(capacity=4)
    assert [store.add(card(i)) for i in (1, 2, 3)] == [1, 2, 3]
    store.confirm(1)
    assert (store.first_index, store.last_index, len(store)) == (2, 3, 2)
    assert store.resume(1) == [] and store.get(2) == card(2)


def test_a_full_store_pushes_out_the_oldest_and_says_so_when_they_are_asked_for():
    store = EventStore(capacity=3)
    for i in range(1, 8):
        store.add(card(i))
    assert (store.first_index, store.overflowed) == (5, 4)
    assert store.resume(0) == [EventsDropped(1, 4, DropReason.OVERFLOW)]


def test_events_a_host_confirmed_before_are_reported_to_a_host_that_asks_for_them():
    store = EventStore()
    for i in range(1, 6):
        store.add(card(i))
    store.confirm(3)
    assert store.resume(1) == [EventsDropped(2, 2, DropReason.CONFIRMED)]
    assert store.first_index == 4


def test_a_host_ahead_of_the_store_moves_its_numbering_on():
    store = EventStore()  # a factory reset: the host's journal goes further than this store
    store.add(card(1))
    assert store.resume(40) == [] and store.add(card(2)) == 41


# ---- the host's judgement ---------------------------------------------------------------------


def test_delivery_drops_what_it_has_and_reports_what_it_skipped():
    delivery = EventDelivery()
    delivery.resume(10)
    assert delivery.accept(9) == (False, range(0))
    assert delivery.accept(11) == (True, range(0))
    assert delivery.accept(14) == (True, range(12, 14))
    assert delivery.dropped(12, 10) == range(15, 22) and delivery.last == 21
    stats = delivery.stats
    assert (stats.delivered, stats.duplicates_dropped, stats.gaps, stats.missing, stats.dropped_by_device) == (2, 1, 1, 2, 7)


# ---- a 1.1 device on a mem:// line ----------------------------------------------------------


class Device11(FakeDevice):
    """Speaks 1.1: IDENT says so, requests in envelopes wait in ``requests`` for the test to answer."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.requests: list[Request] = []
        self.resumes: list[int] = []
        self.journaled: list[int] = []

    def ident(self) -> Ident:
        return Ident(DeviceRole.SHOE, self.model, self.serial, self.firmware_version, 1, 1, self.boot_id)

    def _payload(self, payload: bytes) -> None:
        msg = decode(payload)
        self.received.append(msg)
        if isinstance(msg, Hello):
            self.send(self.ident())
        elif isinstance(msg, Request):
            self.requests.append(msg)
        elif isinstance(msg, ResumeEvents):
            self.resumes.append(msg.journaled_index)
        elif isinstance(msg, EventsJournaled):
            self.journaled.append(msg.up_to_index)


class Rig:
    def __init__(self, name: str, journaled: int | Callable[[], int] | None = None) -> None:
        self.device = Device11()
        self.line = listen(name, self.device.attach)
        self.indexed: list[tuple[int, Message]] = []
        self.messages: list[Message] = []
        self.events: list = []
        provider = journaled if journaled is None or callable(journaled) else (lambda: journaled)
        self.conn = DeviceConnection(self.line.url, self.messages.append, self.events.append, QUICK,
                                     journaled_index=provider,
                                     on_indexed=lambda i, m: self.indexed.append((i, m)), backoff=FAST_RETRY)

    async def open(self) -> None:
        """Open, and answer the Status the host asks for after the handshake: ``requests`` is then
        empty, for what a test asks."""
        await self.conn.open()
        await until(lambda: self.device.resumes)
        await until(lambda: self.device.requests)
        [asked] = self.device.requests
        assert asked.message == StatusRequest()
        self.device.send(Answer(asked.request_id, Status(DeviceState.IDLE, 0, 0, 1)))
        await until(lambda: Status(DeviceState.IDLE, 0, 0, 1) in self.messages)
        self.device.requests.clear()

    async def close(self) -> None:
        await self.conn.close()
        self.line.close()


def test_the_host_resumes_from_its_journal_and_gets_each_index_once_in_order():
    async def main():
        rig = Rig("events-resume", journaled=2)
        await rig.open()
        assert rig.device.resumes == [2]  # the first thing after IDENT
        for index in (1, 2, 3, 4, 3, 5):  # what a device resends after a reset: some the host has
            rig.device.send(Event(index, card(index)))
        await until(lambda: len(rig.indexed) == 3)
        await asyncio.sleep(0.05)
        assert [i for i, _ in rig.indexed] == [3, 4, 5] and rig.indexed[0][1] == card(3)
        assert not any(isinstance(m, CardRead) for m in rig.messages)  # on_indexed instead, not both
        assert rig.conn.event_stats.duplicates_dropped == 3 and K.EVENT_GAP not in kinds(rig.events)
        await rig.close()

    run(main())


def test_an_on_indexed_that_fails_is_logged_and_the_events_after_it_still_come():
    async def main():
        rig = Rig("events-callback-fails", journaled=0)

        def indexed(index: int, msg: Message) -> None:
            if index == 2:
                raise RuntimeError("the owner's bug")
            rig.indexed.append((index, msg))
        rig.conn._on_indexed = indexed
        await rig.open()
        with capture_logs() as logs:
            for index in (1, 2, 3):
                rig.device.send(Event(index, card(index)))
            await until(lambda: len(rig.indexed) == 2)
        assert [i for i, _ in rig.indexed] == [1, 3] and rig.conn.event_stats.delivered == 3
        [failed] = [e for e in logs if e["event"] == "on_indexed_failed"]
        assert (failed["device"], failed["message"], failed["log_level"]) == (rig.line.url, "CardRead", "error")
        await rig.close()

    run(main())


def test_another_unit_on_the_port_starts_its_own_numbering():
    async def main():
        rig = Rig("events-replaced")  # no journal: the mark is what this connection delivered of the unit
        await rig.open()
        for index in (1, 2, 3):
            rig.device.send(Event(index, card(index)))
        await until(lambda: len(rig.indexed) == 3)
        rig.device.serial, rig.device.resumes = "SN99", []  # a swapped shoe, its events from 1
        rig.device.reboot()
        await until(lambda: rig.device.resumes)
        for index in (1, 2):
            rig.device.send(Event(index, card(index)))
        await until(lambda: len(rig.indexed) == 5)
        assert [i for i, _ in rig.indexed] == [1, 2, 3, 1, 2] and K.REPLACED in kinds(rig.events)
        await rig.close()

    run(main())


def test_a_skipped_index_is_reported_never_passed_over():
    async def main():
        rig = Rig("events-gap", journaled=0)
        await rig.open()
        for index in (1, 2, 5):
            rig.device.send(Event(index, card(index)))
        await until(lambda: len(rig.indexed) == 3)
        gaps = [e for e in rig.events if e.kind is K.EVENT_GAP]
        assert len(gaps) == 1 and "events 3..4 (2) never came; next came 5" in gaps[0].detail
        stats = rig.conn.event_stats
        assert (stats.gaps, stats.missing, stats.delivered) == (1, 2, 3)
        await rig.close()

    run(main())


def test_events_the_device_no_longer_has_are_reported_and_passed_on():
    async def main():
        rig = Rig("events-dropped", journaled=0)
        await rig.open()
        rig.device.send(EventsDropped(1, 4, DropReason.OVERFLOW))
        rig.device.send(Event(5, ShoeLoaded(5)))
        await until(lambda: len(rig.indexed) == 1)
        assert [e.detail for e in rig.events if e.kind is K.EVENTS_DROPPED] == ["events 1..4 (4) are lost: overflow"]
        assert EventsDropped(1, 4, DropReason.OVERFLOW) in rig.messages  # for the journal
        assert K.EVENT_GAP not in kinds(rig.events) and rig.conn.event_stats.dropped_by_device == 4
        await rig.close()

    run(main())


@pytest.mark.parametrize("resumed_from", [0, 2], ids=["no-mark-of-this-unit", "journaled-some-of-them"])
def test_events_another_host_confirmed_are_lost_to_a_journal_that_lacks_them(resumed_from):
    """A shoe dealt at another host, which confirmed its events 1..4, comes to this host. Told 0
    (this journal has none of the unit's events) it says 1..4 are gone; told 2, that 3..4 are. Either
    way this journal lacks them and cannot tell whether any journal has them (another table's, or a
    tool that let them go): EVENTS_DROPPED, and the EventsDropped goes on for the record."""
    shoe = SimulatedShoe("SHOE-SPARE", heartbeat_s=0)
    config = SessionConfig(stale_after=10.0)

    async def device_state(endpoint: PtyEndpoint, predicate) -> dict:
        while not predicate(state := await asyncio.to_thread(endpoint.state)):
            await asyncio.sleep(0.01)
        return state

    async def main(endpoint: PtyEndpoint) -> None:
        other: DeviceConnection  # the other table's host: journals each event and confirms it
        other = DeviceConnection(endpoint.url, None, None, config, journaled_index=lambda: 0,
                                 on_indexed=lambda index, _: other.confirm(index))
        await other.open()
        endpoint.call(shoe.load, full_shoe(1))
        endpoint.call(shoe.deal, 3)
        await asyncio.wait_for(device_state(endpoint, lambda s: s["events_confirmed"] == 4), 10)
        await other.close()

        indexed: list[int] = []
        messages: list[Message] = []
        events: list[SessionEvent] = []
        conn = DeviceConnection(endpoint.url, messages.append, events.append, config,
                                journaled_index=lambda: resumed_from, on_indexed=lambda i, _: indexed.append(i))
        try:
            await conn.open()
            endpoint.call(shoe.deal, 1)  # dealt here: event 5, journaled like any
            await until(lambda: indexed == [5])
            dropped = EventsDropped(resumed_from + 1, 4 - resumed_from, DropReason.CONFIRMED)
            assert [m for m in messages if isinstance(m, EventsDropped)] == [dropped]  # for the journal
            lost = [e.detail for e in events if e.kind is K.EVENTS_DROPPED]
            assert lost == [f"events {resumed_from + 1}..4 ({4 - resumed_from}) are lost: confirmed"]
            assert conn.resumed_from == resumed_from
            stats = conn.event_stats
            assert (stats.dropped_by_device, stats.gaps, stats.duplicates_dropped) == (4 - resumed_from, 0, 0)
        finally:
            await conn.close()

    with PtyEndpoint(shoe) as endpoint:
        run(main(endpoint))


def test_resumed_from_is_what_the_last_resume_events_said():
    async def main():
        journaled = [0]
        rig = Rig("events-resumed-from", journaled=lambda: journaled[0])
        assert rig.conn.resumed_from is None  # no handshake yet
        await rig.open()
        assert rig.device.resumes == [0] and rig.conn.resumed_from == 0
        journaled[0] = 3
        rig.device.reboot()
        await until(lambda: len(rig.device.resumes) == 2)
        assert rig.device.resumes[-1] == 3 and rig.conn.resumed_from == 3
        await rig.close()

    run(main())


def test_confirmations_of_one_loop_turn_go_out_as_one_message():
    async def main():
        rig = Rig("events-confirm", journaled=0)
        await rig.open()
        for index in range(1, 11):
            rig.device.send(Event(index, card(index)))
        await until(lambda: len(rig.indexed) == 10)
        for index in range(1, 11):
            rig.conn.confirm(index)
        rig.conn.confirm(4)  # behind: nothing to say
        await until(lambda: rig.device.journaled)
        await asyncio.sleep(0.05)
        assert rig.device.journaled == [10] and rig.conn.event_stats.confirms_sent == 1
        with pytest.raises(EventIndexError, match="cannot confirm event 11: only events up to 10 were delivered"):
            rig.conn.confirm(11)
        await rig.close()

    run(main())


def test_without_a_journal_the_connection_lets_the_device_forget_nothing():
    """A host that keeps no journal (a diagnostic tool) says at every handshake that it journaled
    none of the events, never NO_JOURNAL (the device would let go of what it kept), and confirms
    none: the device keeps them all for the host that journals them. What the device resends after
    a reboot this connection delivered already is not given twice; events another host confirmed
    are lost to nobody here."""
    async def main():
        rig = Rig("events-no-journal")
        await rig.open()
        assert rig.device.resumes == [0] and rig.conn.resumed_from == 0
        for index in (1, 2, 3):
            rig.device.send(Event(index, card(index)))
        await until(lambda: len(rig.indexed) == 3)
        with pytest.raises(EventIndexError, match="cannot confirm event 3: this connection keeps no journal"):
            rig.conn.confirm(3)
        rig.device.reboot()
        await until(lambda: len(rig.device.resumes) == 2)
        assert rig.device.resumes == [0, 0]
        for index in (1, 2, 3, 4):  # everything it keeps, again, and a new one
            rig.device.send(Event(index, card(index)))
        await until(lambda: len(rig.indexed) == 4)
        rig.device.send(EventsDropped(5, 2, DropReason.CONFIRMED))  # a journaling host has them
        await until(lambda: EventsDropped(5, 2, DropReason.CONFIRMED) in rig.messages)
        await asyncio.sleep(0.05)
        assert [i for i, _ in rig.indexed] == [1, 2, 3, 4] and rig.device.journaled == []
        assert K.EVENTS_DROPPED not in kinds(rig.events) and rig.conn.event_stats.confirms_sent == 0
        await rig.close()

    run(main())


def test_two_requests_for_the_same_answer_type_each_get_their_own():
    async def main():
        rig = Rig("events-ids", journaled=0)
        await rig.open()
        first = asyncio.ensure_future(rig.conn.request(StatusRequest(), expect=Status, timeout=5))
        second = asyncio.ensure_future(rig.conn.request(StatusRequest(), expect=Status, timeout=5))
        await until(lambda: len(rig.device.requests) == 2)
        one, two = rig.device.requests
        assert one.request_id != two.request_id and one.message == two.message == StatusRequest()
        rig.device.send(Answer(two.request_id, Status(DeviceState.IDLE, 0, 2, 2000)))  # the second first
        rig.device.send(Answer(one.request_id, Status(DeviceState.IDLE, 0, 1, 1000)))
        assert (await first).cards_held == 1 and (await second).cards_held == 2
        await rig.close()

    run(main())


def test_a_late_answer_is_not_taken_by_the_next_request():
    async def main():
        rig = Rig("events-late", journaled=0)
        await rig.open()
        with pytest.raises(RequestTimeout):
            await rig.conn.request(StatusRequest(), expect=Status, timeout=0.05)
        late = rig.device.requests[0]
        nxt = asyncio.ensure_future(rig.conn.request(StatusRequest(), expect=Status, timeout=5))
        await until(lambda: len(rig.device.requests) == 2)
        rig.device.send(Answer(late.request_id, Status(DeviceState.IDLE, 0, 99, 1)))  # the timed-out one's
        await asyncio.sleep(0.05)
        assert not nxt.done()
        rig.device.send(Answer(rig.device.requests[1].request_id, Status(DeviceState.IDLE, 0, 7, 2)))
        assert (await nxt).cards_held == 7
        assert rig.conn.session is not None and rig.conn.session.stats.late_answers == 1
        await rig.close()

    run(main())


def test_a_1_0_device_gets_no_envelopes_and_is_matched_by_type():
    async def main():
        device = FakeDevice()  # IDENT says 1.0
        line = listen("events-legacy", device.attach)
        conn = DeviceConnection(line.url, None, None, QUICK, journaled_index=lambda: 7, backoff=FAST_RETRY)
        await conn.open()
        assert (await conn.request(StatusRequest(), expect=Status)).uptime_ms == 1234
        # no ResumeEvents, no Request; the host's own StatusRequest after the handshake, then this one
        await until(lambda: len([m for m in device.received if not isinstance(m, Heartbeat)]) == 3)
        assert [type(m) for m in device.received if not isinstance(m, Heartbeat)] == [Hello, StatusRequest, StatusRequest]
        assert conn.event_stats.resumes == 0
        await conn.close()
        line.close()

    run(main())


def test_the_host_asks_every_device_for_its_status_after_every_handshake_and_a_1_1_device_after_an_overflow():
    """A 1.0 device's events are lost in a link reset (a FaultCleared among them): its Status, asked
    for after each handshake, says what it is now. A 1.1 device resends its events, but its Status
    also says how many cards it holds now (the table checks the shoe's count with it): asked after
    each handshake too, and once more when its full buffer pushed events out (EventsDropped(OVERFLOW)).
    Events a host confirmed before (CONFIRMED) were journaled: nothing more to ask."""
    async def main():
        device = FakeDevice()  # IDENT says 1.0
        line = listen("events-legacy-status", device.attach)
        conn = DeviceConnection(line.url, None, None, QUICK, backoff=FAST_RETRY)

        def asked() -> list[type]:  # heartbeats go at any time: not what this is about
            return [type(m) for m in device.received if not isinstance(m, Heartbeat)]

        await conn.open()
        await until(lambda: len(asked()) == 2)
        device.reboot()  # the device resets the link: a new handshake
        await until(lambda: len(asked()) == 4)
        assert asked() == [Hello, StatusRequest] * 2
        await conn.close()
        line.close()

        rig = Rig("events-status")
        await rig.open()  # asked once after the first handshake (answered there)
        rig.device.reboot()
        await until(lambda: len(rig.device.resumes) == 2)
        await until(lambda: len(rig.device.requests) == 1)  # and after this one
        await rig.conn.send(Heartbeat(0))  # acknowledged: what the host sent before it has arrived
        assert [r.message for r in rig.device.requests] == [StatusRequest()]
        # (reason, whether the handshake's request was answered first, the requests in all)
        for reason, answered, requests in ((DropReason.CONFIRMED, True, 1), (DropReason.OVERFLOW, True, 2),
                                           (DropReason.OVERFLOW, False, 1)):
            rig.device.requests.clear()
            rig.device.reboot()
            await until(lambda: len(rig.device.resumes) == 3)
            await until(lambda: len(rig.device.requests) == 1)  # the handshake's
            if answered:
                rig.device.send(Answer(rig.device.requests[0].request_id, Status(DeviceState.IDLE, 0, 0, 2)))
                await until(lambda: Status(DeviceState.IDLE, 0, 0, 2) in rig.messages)  # to the application
            rig.device.send(EventsDropped(1, 5, reason))  # its answer to ResumeEvents
            await until(lambda: EventsDropped(1, 5, reason) in rig.messages)
            await rig.conn.send(Heartbeat(0))
            # one request while the handshake's waits: its answer comes after the events resent
            assert [r.message for r in rig.device.requests] == [StatusRequest()] * requests, (reason, answered)
            rig.device.resumes.pop()
        await rig.close()

    run(main())


def test_events_held_back_by_a_handshake_that_fails_are_not_delivered():
    """Events that reach the host while its handshake is under way are held until CONNECTED. Here a
    device sends one right after its IDENT, before ResumeEvents, and the line to it dies, so
    ResumeEvents is never acknowledged and the handshake fails: what it held must not reach the
    application without a CONNECTED (the device resends it after the next ResumeEvents)."""
    to_host, to_device = Wire(), Wire()

    class HastyDevice(Device11):
        def _payload(self, payload: bytes) -> None:
            super()._payload(payload)
            if isinstance(self.received[-1], Hello):
                self.send(Event(1, card(1)))  # too early: the host has not said where to resume
                to_device.cut = True  # and nothing the host sends reaches the device any more

    async def main():
        device = HastyDevice()
        line = listen("events-held-then-failed", device.attach, to_host=to_host.carrying, to_device=to_device.carrying)
        indexed: list[tuple[int, Message]] = []
        events: list = []
        conn = DeviceConnection(line.url, lambda m: None, events.append, QUICK, journaled_index=lambda: 0,
                                on_indexed=lambda i, m: indexed.append((i, m)), backoff=FAST_RETRY)
        opening = asyncio.ensure_future(conn.open())
        await until(lambda: K.LINK_FAILED in kinds(events) or opening.done(), timeout=10)
        await asyncio.sleep(0.05)
        assert K.IDENT in kinds(events) and K.CONNECTED not in kinds(events)
        assert indexed == []  # held back, then dropped with the failed handshake: never delivered
        opening.cancel()
        await asyncio.gather(opening, return_exceptions=True)
        await conn.close()
        line.close()

    run(main())


def test_a_device_that_never_answers_the_status_blocks_nothing_and_one_line_says_so():
    """The Status asked after a handshake is one request in the background: a device that does not
    answer it (here it never does) still has its events delivered meanwhile, and when the request
    times out one status_not_answered warning says what is not checked."""
    async def main():
        rig = Rig("events-status-silent", journaled=0)
        with capture_logs() as logs:
            await rig.conn.open()
            await until(lambda: rig.device.requests)  # asked, never answered
            for index in (1, 2, 3):
                rig.device.send(Event(index, card(index)))
            await until(lambda: len(rig.indexed) == 3)  # delivered while the request waits
            await until(lambda: any(e["event"] == "status_not_answered" for e in logs), timeout=5)
        [line] = [e for e in logs if e["event"] == "status_not_answered"]
        assert line["log_level"] == "warning" and "no Status within" in line["error"], line
        assert "card count are not checked" in line["consequence"]
        assert [r.message for r in rig.device.requests] == [StatusRequest()]  # one request, not retried
        await rig.close()

    run(main())
