"""End-to-end delivery (protocol 1.1, docs/protocol.md §3.2) over a real pty and the pyusb path:
a shoe dealing while the link is reset from either side, the device unplugged and rebooted,
the host "crashing" before it confirmed, the device's buffer overflowing, and a 1.0 device.
The application here journals in a list: ``confirmed`` is what it told the device."""
from __future__ import annotations

import asyncio
import random
from typing import Callable

import pytest

from firmware_bridge.connection import DeviceConnection
from firmware_bridge.messages import (CardRead, DeviceState, DropReason, EventsDropped, Fault, FaultCleared, FaultCode,
                                     Heartbeat, Message, ShoeEmpty, ShoeLoaded, Status, StatusRequest)
from firmware_bridge.session import SessionConfig, SessionEvent
from firmware_bridge.session import SessionEventKind as K
from simulators.endpoint import Endpoint
from simulators.faults import Faults
from simulators.shoe import SimulatedShoe
from simulators.stack import full_shoe
from tests.e2e.e2e_rig import FULL, Host, make_endpoint, transport_options


class Journal:
    """The application: records each numbered event, confirms (or not) what it recorded; the
    other messages and the session events go to ``host`` (the e2e rig's recorder)."""

    def __init__(self, confirmed: int = 0, *, confirm_up_to: int | None = None) -> None:
        self.records: list[tuple[int, Message]] = []
        self.confirmed = confirmed  # what journaled_index() says
        self.confirm_up_to = confirm_up_to  # None: confirm everything recorded

    def connect(self, endpoint: Endpoint) -> DeviceConnection:
        conn = DeviceConnection(endpoint.url, lambda msg: self.host.seen(msg), self.event, SessionConfig(stale_after=10.0),
                                journaled_index=lambda: self.confirmed, on_indexed=self.record,
                                **transport_options(endpoint))
        self.host = Host(conn)
        return conn

    def record(self, index: int, msg: Message) -> None:
        self.records.append((index, msg))
        if self.confirm_up_to is None or index <= self.confirm_up_to:
            self.confirmed = index
            self.host.conn.confirm(index)
        self.host.changed.set()

    def event(self, event: SessionEvent) -> None:
        self.host.events.append(event)
        self.host.changed.set()

    def indexes(self) -> list[int]:
        return [index for index, _ in self.records]

    def reads(self) -> list[int]:
        return [msg.index for _, msg in self.records if isinstance(msg, CardRead)]

    def kinds(self) -> list[K]:
        return self.host.kinds()

    async def until(self, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
        await self.host.until(predicate, timeout)


class StatusJournal(Journal):
    """A Journal that notes each Status with the events recorded when it came."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[tuple[int, Status]] = []

    def connect(self, endpoint: Endpoint) -> DeviceConnection:
        conn = super().connect(endpoint)
        conn._on_message = self.seen
        return conn

    def seen(self, msg: Message) -> None:
        if isinstance(msg, Status):
            self.statuses.append((len(self.records), msg))
        self.host.seen(msg)


async def device_state(endpoint: Endpoint, predicate, timeout: float = 10.0) -> dict:
    """Poll the device's state until ``predicate(state)`` holds."""
    async with asyncio.timeout(timeout):
        while not predicate(state := await asyncio.to_thread(endpoint.state)):
            await asyncio.sleep(0.01)
    return state


def device_resets_link(endpoint: Endpoint) -> None:
    if endpoint.link is not None:
        endpoint.link.reset("test: device resets the link")


async def deal_through_resets(endpoint: Endpoint, device: SimulatedShoe, decks: int, resets: int, seed: int) -> None:
    """Deal ``decks`` decks while the link is reset from both sides at random moments, the device
    unplugged once and rebooted once: every event reaches the application once, in order."""
    rng = random.Random(seed)
    cards = 52 * decks
    journal = Journal()
    conn = journal.connect(endpoint)
    await conn.open()
    try:
        endpoint.set_faults(disconnect_for=0.2, disconnect_at=cards // 3, reboot_at=2 * cards // 3)
        endpoint.call(device.load, full_shoe(decks))
        endpoint.call(device.deal, cards)
        for point in sorted(rng.sample(range(2, cards), resets)):  # reset at random points of the stream
            await journal.until(lambda: len(journal.records) >= point, timeout=60)
            if conn.session is not None and rng.random() < 0.5:
                conn.session.link.reset("test: host resets the link")
            else:
                endpoint.call(device_resets_link, endpoint)
        await journal.until(lambda: any(isinstance(m, ShoeEmpty) for _, m in journal.records), timeout=60)
        stats = conn.event_stats
    finally:
        await conn.close()
    print(f"{resets} resets: {stats}")
    # the resets fell in the stream and resumes followed: how many resets a handshake absorbs at once
    # depends on the machine's load (4 of 12 and 7 of 40 seen on a loaded 2-core machine, 14-21 of 40
    # idle), so this asks only that resumes happened at all; the asserts below are the property
    assert stats.resumes >= 2
    total = cards + 2  # ShoeLoaded, every card, ShoeEmpty
    assert journal.indexes() == list(range(1, total + 1))  # each index once, in order, none lost
    assert journal.reads() == list(range(1, cards + 1))
    assert K.EVENT_GAP not in journal.kinds() and K.EVENTS_DROPPED not in journal.kinds()
    assert {K.DISCONNECTED, K.REBOOTED} <= set(journal.kinds())
    assert device.events.last_index == total  # the store survived the reboot: one numbering


@pytest.mark.timeout(90)
def test_every_event_arrives_once_in_order_through_resets_unplug_and_reboot(link_path):
    device = SimulatedShoe(faults=Faults(drop_rate=0.0005, seed=3), heartbeat_s=0)
    endpoint, _ = make_endpoint(link_path, device)
    with endpoint:
        asyncio.run(deal_through_resets(endpoint, device, decks=2, resets=12, seed=1))


@pytest.mark.soak
@pytest.mark.timeout(1800)
def test_soak_every_event_arrives_once_in_order_through_resets():
    decks, resets = (60, 600) if FULL else (6, 40)
    device = SimulatedShoe(faults=Faults(drop_rate=0.001, seed=11), heartbeat_s=0)
    endpoint, _ = make_endpoint("pty", device)
    with endpoint:
        asyncio.run(deal_through_resets(endpoint, device, decks=decks, resets=resets, seed=7))


@pytest.mark.timeout(60)
def test_a_new_host_after_a_crash_gets_exactly_what_the_old_one_had_not_confirmed(link_path):
    device = SimulatedShoe(heartbeat_s=0)
    endpoint, _ = make_endpoint(link_path, device)

    async def main():
        first = Journal(confirm_up_to=20)  # journals 20 events, then "crashes" before confirming more
        conn = first.connect(endpoint)
        await conn.open()
        endpoint.call(device.load, full_shoe(1))
        endpoint.call(device.deal, 30)
        await first.until(lambda: len(first.records) == 31)
        await device_state(endpoint, lambda s: s["events_confirmed"] == 20)
        await conn.close()  # dropped: events 21..31 were delivered, never confirmed
        endpoint.call(device.deal, 5)  # the dealer goes on while no host listens
        await device_state(endpoint, lambda s: s["event_index"] == 36)

        second = Journal(confirmed=first.confirmed)
        conn = second.connect(endpoint)
        await conn.open()
        try:
            await second.until(lambda: len(second.records) == 16)
            await asyncio.sleep(0.1)  # nothing more comes
            assert second.indexes() == list(range(21, 37))  # the unconfirmed ones again, then the new ones
            assert second.reads() == list(range(20, 36))
            assert conn.event_stats.duplicates_dropped == 0 and K.EVENTS_DROPPED not in second.kinds()
            await device_state(endpoint, lambda s: s["events_kept"] == 0)  # all confirmed now
        finally:
            await conn.close()

    with endpoint:
        asyncio.run(main())


@pytest.mark.timeout(60)
def test_an_overflowing_buffer_is_reported_with_what_it_pushed_out(link_path):
    device = SimulatedShoe(faults=Faults(event_buffer=8), heartbeat_s=0)
    endpoint, _ = make_endpoint(link_path, device)

    async def main():
        first = Journal(confirm_up_to=0)  # delivers, never journals: the device keeps everything it can
        conn = first.connect(endpoint)
        await conn.open()
        endpoint.call(device.load, full_shoe(1))
        endpoint.call(device.deal, 20)
        await first.until(lambda: len(first.records) == 21)  # the live stream lost nothing
        state = await device_state(endpoint, lambda s: s["event_index"] == 21)
        assert (state["events_kept"], state["events_overflowed"]) == (8, 13)
        await conn.close()

        second = Journal()
        conn = second.connect(endpoint)
        await conn.open()
        try:
            await second.until(lambda: len(second.records) == 8)
            assert second.indexes() == list(range(14, 22))
            assert second.host.of(EventsDropped) == [EventsDropped(1, 13, DropReason.OVERFLOW)]
            assert [e.detail for e in second.host.events if e.kind is K.EVENTS_DROPPED] == [
                "events 1..13 (13) are lost: overflow"]
            assert conn.event_stats.dropped_by_device == 13 and K.EVENT_GAP not in second.kinds()
        finally:
            await conn.close()

    with endpoint:
        asyncio.run(main())


@pytest.mark.timeout(60)
def test_a_fault_cleared_that_an_overflow_pushed_out_ends_with_the_status_the_host_asks_for(link_path):
    """The host journaled a jam; while no host listens the jam is cleared and the dealer goes on,
    and the device's full buffer pushes the FaultCleared out. The next host is told what is lost
    (EventsDropped(OVERFLOW)) and asks, once, for the device's Status: no fault."""
    device = SimulatedShoe(faults=Faults(event_buffer=4), heartbeat_s=0)
    endpoint, _ = make_endpoint(link_path, device)

    async def main():
        first = Journal()
        conn = first.connect(endpoint)
        await conn.open()
        endpoint.call(device.raise_fault, FaultCode.JAM)
        await first.until(lambda: [type(m) for _, m in first.records] == [Fault])
        await device_state(endpoint, lambda s: s["events_confirmed"] == 1)
        await conn.close()
        endpoint.call(device.clear_fault, FaultCode.JAM)  # event 2, pushed out by the 6 below
        endpoint.call(device.load, full_shoe(1))
        endpoint.call(device.deal, 5)
        await device_state(endpoint, lambda s: s["event_index"] == 8)

        second = Journal(confirmed=first.confirmed)
        conn = second.connect(endpoint)
        await conn.open()
        try:
            await second.until(lambda: len(second.records) == 4 and bool(second.host.of(Status)))
            assert second.host.of(EventsDropped) == [EventsDropped(2, 3, DropReason.OVERFLOW)]
            assert FaultCleared not in [type(m) for _, m in second.records]  # lost: only the Status says
            status, = second.host.of(Status)
            assert (status.state, status.fault) == (DeviceState.DEALING, 0)  # cards still in it, no fault
            await conn.send(Heartbeat(0))  # acknowledged: anything asked before it has arrived
            assert (await device_state(endpoint, lambda s: True))["faults_active"] == []
            assert len(second.host.of(Status)) == 1  # asked once
        finally:
            await conn.close()

    with endpoint:
        asyncio.run(main())


@pytest.mark.timeout(60)
def test_a_1_0_device_still_deals(link_path):
    device = SimulatedShoe(faults=Faults(legacy_1_0=True), heartbeat_s=0)
    endpoint, _ = make_endpoint(link_path, device)

    async def main():
        journal = Journal()
        conn = journal.connect(endpoint)
        ident = await conn.open()
        try:
            assert (ident.protocol_major, ident.protocol_minor) == (1, 0)
            endpoint.call(device.load, full_shoe(1))
            endpoint.call(device.deal, 52)
            await journal.until(lambda: bool(journal.host.of(ShoeEmpty)))
            assert [m.index for m in journal.host.of(CardRead)] == list(range(1, 53))
            assert journal.records == [] and conn.event_stats.resumes == 0  # nothing numbered
            assert (await conn.request(StatusRequest(), expect=Status)).cards_held == 0  # matched by type
            state = await asyncio.to_thread(endpoint.state)
            assert state["protocol"] == "1.0" and state["event_index"] == 0
        finally:
            await conn.close()

    with endpoint:
        asyncio.run(main())


@pytest.mark.timeout(60)
def test_the_status_asked_after_a_handshake_comes_after_every_event_the_device_sends_again(link_path):
    """A shoe dealt while no host listened: the next host's handshake has it send those reads again
    (more than the 256 unacknowledged at a time: it holds up to 257 with no host), then asks for its
    Status, which comes after the last of them: its cards_held counts them out (the table compares)."""
    device = SimulatedShoe(heartbeat_s=0)
    endpoint, _ = make_endpoint(link_path, device)

    async def main():
        endpoint.call(device.load, full_shoe(6))
        endpoint.call(device.deal, 300)  # the shoe deals until the events it keeps for a host reach 257
        state = await device_state(endpoint, lambda s: s["event_index"] == 257 and s["pending_deals"] > 0)
        journal = StatusJournal()
        conn = journal.connect(endpoint)
        await conn.open()
        try:
            await journal.until(lambda: bool(journal.statuses))
            recorded, status = journal.statuses[0]
            assert status.cards_held == 312 - recorded + 1, (recorded, status, state)  # ShoeLoaded is no card
            assert recorded >= 257
        finally:
            await conn.close()

    with endpoint:
        asyncio.run(main())


@pytest.mark.timeout(60)
def test_a_shoe_loaded_and_a_fault_cleared_are_each_followed_by_the_shoes_status(link_path):
    """The table compares a shoe's count with each Status: asked only after a handshake, a stack
    loaded short or long, or cards a misfeed let out unseen, showed only at the next handshake. A
    1.1 shoe's ShoeLoaded and FaultCleared (numbered events) each draw a Status now, which comes
    after them and counts out every read before it; the reads between ask nothing."""
    device = SimulatedShoe(heartbeat_s=0)
    endpoint, _ = make_endpoint(link_path, device)

    async def main():
        journal = StatusJournal()
        conn = journal.connect(endpoint)
        await conn.open()
        try:
            await journal.until(lambda: len(journal.statuses) == 1)  # the handshake's
            endpoint.call(device.load, full_shoe(1))
            endpoint.call(device.deal, 3)
            await journal.until(lambda: len(journal.statuses) == 2 and len(journal.records) == 4)
            endpoint.call(device.raise_fault, FaultCode.JAM)
            endpoint.call(device.clear_fault, FaultCode.JAM)
            await journal.until(lambda: len(journal.statuses) == 3)
            endpoint.call(device.deal, 2)
            await journal.until(lambda: len(journal.records) == 8)
            await conn.send(Heartbeat(0))  # acknowledged: anything asked before it has arrived
            _, (loaded, at_load), (cleared, at_clear) = journal.statuses
            assert [type(m) for _, m in journal.records][:1] == [ShoeLoaded] and 1 <= loaded <= 4
            reads = sum(isinstance(m, CardRead) for _, m in journal.records[:loaded])
            assert at_load.cards_held == 52 - reads  # after the load, every read before it out
            assert [type(m) for _, m in journal.records][4:6] == [Fault, FaultCleared] and cleared == 6
            assert (at_clear.cards_held, at_clear.fault) == (49, 0)
        finally:
            await conn.close()

    with endpoint:
        asyncio.run(main())
