"""DeviceConnection, the daemon's way to a device, over the pty and the pyusb path: an unplug is
reported, the device is reopened and greeted again, and card reads carry on."""
from __future__ import annotations

import asyncio

import pytest

from drivers.errors import PortClosed
from drivers.reconnect import Backoff
from firmware_bridge.connection import FLAPPING_AFTER, DeviceConnection
from firmware_bridge.messages import CardRead, Ident, Message, Status, StatusRequest
from firmware_bridge.session import SessionConfig, SessionEvent, SessionEventKind as K
from simulators.faults import Faults
from simulators.shoe import SimulatedShoe
from simulators.stack import full_shoe

from tests.e2e.e2e_rig import make_endpoint, transport_options
from tests.support.poll import until


class Seen:
    """Messages and events as the conn device delivered them, and a way to wait for one."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.events: list[SessionEvent] = []
        self.changed = asyncio.Event()

    def message(self, msg: Message) -> None:
        self.messages.append(msg)
        self.changed.set()

    def event(self, event: SessionEvent) -> None:
        self.events.append(event)
        self.changed.set()

    def kinds(self) -> list[K]:
        return [e.kind for e in self.events if e.kind in (K.CONNECTED, K.DISCONNECTED, K.REBOOTED)]

    def reads(self) -> list[int]:
        return [m.index for m in self.messages if isinstance(m, CardRead)]

    async def until(self, predicate, timeout: float = 20.0) -> None:
        await until(predicate, timeout=timeout, changed=self.changed)


@pytest.mark.timeout(60)
def test_a_device_connection_reconnects_after_an_unplug_and_card_reads_resume(link_path):
    device = SimulatedShoe(faults=Faults(disconnect_for=0.3, disconnect_at=2), heartbeat_s=0)
    endpoint, _ = make_endpoint(link_path, device)
    seen = Seen()

    async def main():
        conn = DeviceConnection(endpoint.url, seen.message, seen.event, SessionConfig(stale_after=10.0),
                                **transport_options(endpoint))
        await conn.start()
        try:
            ident = await conn.wait_connected(timeout=10)
            assert ident.serial == device.serial and seen.kinds() == [K.CONNECTED]
            endpoint.call(device.load, full_shoe(1))
            endpoint.call(device.deal, 5)  # the shoe goes off the wire after card 2 for 0.3 s
            await seen.until(lambda: K.DISCONNECTED in seen.kinds())
            with pytest.raises(PortClosed, match="not connected"):
                await conn.request(StatusRequest(), expect=Status)
            await seen.until(lambda: seen.kinds().count(K.CONNECTED) == 2)
            assert seen.kinds() == [K.CONNECTED, K.DISCONNECTED, K.CONNECTED]  # same boot: no REBOOTED
            assert conn.connected and conn.ident is not None and conn.ident.boot_id == ident.boot_id
            endpoint.call(device.deal, 2)
            await seen.until(lambda: seen.reads()[-2:] == [6, 7])  # the shoe kept its place
            assert seen.reads()[:2] == [1, 2]
            assert (await conn.request(StatusRequest(), expect=Status)).cards_held == 52 - 7
        finally:
            await conn.close()
        assert not conn.connected

    with endpoint:
        asyncio.run(main())


@pytest.mark.timeout(60)
def test_a_device_connection_waits_for_a_device_that_is_not_there_yet(link_path):
    device = SimulatedShoe(heartbeat_s=0)
    endpoint, _ = make_endpoint(link_path, device)
    seen = Seen()

    async def main():
        url, options = endpoint.url, transport_options(endpoint)
        retries: list[float] = []

        async def sleep(delay: float) -> None:  # the real backoff, counted: each one follows a failed open
            retries.append(delay)
            await asyncio.sleep(delay)

        conn = DeviceConnection(url, seen.message, seen.event, sleep=sleep, **options)
        await conn.start()
        try:
            await until(lambda: len(retries) >= 3, what="three failed opens")  # nothing reported, nothing raised
            assert seen.events == [] and not conn.connected
            with pytest.raises(PortClosed, match=r"not connected \(reconnecting\)"):
                await conn.send(StatusRequest())
            await asyncio.to_thread(endpoint.start)  # the device is plugged in
            await conn.wait_connected(timeout=10)
            assert (await conn.request(StatusRequest(), expect=Status)).cards_held == 0
        finally:
            await conn.close()
            await asyncio.to_thread(endpoint.stop)

    asyncio.run(main())


@pytest.mark.timeout(60)
def test_a_device_that_flaps_its_identity_is_shaken_hands_with_on_the_backoff_and_reported_once(link_path):
    """A new boot id at every HELLO and another IDENT unasked right behind the answer: each handshake
    is asked for again at once, which would go on without end: each waits the backoff's next
    step (the one Backoff: 0.1 s doubling to 5 s) and the third in a row is one FLAPPING event."""
    endpoint, _ = make_endpoint(link_path, SimulatedShoe(faults=Faults(flapping_ident=True), heartbeat_s=0))
    seen = Seen()
    backoff = Backoff()
    waits = 9  # the schedule reaches its cap
    delays: list[float] = []

    async def sleep(delay: float) -> None:  # the delays the connection asks for, not waited: each comes soon
        delays.append(delay)

    async def main() -> None:
        await asyncio.to_thread(endpoint.start)
        conn = DeviceConnection(endpoint.url, seen.message, seen.event, SessionConfig(stale_after=10.0),
                                sleep=sleep, backoff=backoff, **transport_options(endpoint))
        await conn.start()
        try:
            await seen.until(lambda: len(delays) >= waits)
        finally:
            await conn.close()
            await asyncio.to_thread(endpoint.stop)

    asyncio.run(main())
    assert delays[:waits] == [backoff.delay(n) for n in range(1, waits + 1)]
    assert delays[waits - 1] == backoff.cap
    flapping = [e for e in seen.events if e.kind is K.FLAPPING]
    assert len(flapping) == 1, flapping
    assert flapping[0].detail.startswith(f"re-identified or reset its link {FLAPPING_AFTER} times in a row, each "
                                         "less than 5 s after the handshake before (the last: unasked IDENT: boot id ")
    handshakes = [e for e in seen.events if e.kind is K.CONNECTED]
    idents = [m for m in seen.messages if isinstance(m, Ident)]
    assert len(idents) <= 2 * (len(handshakes) + 1)  # the answer and the one unasked IDENT behind it


@pytest.mark.timeout(60)
def test_a_device_that_floods_its_status_gets_its_budget_and_the_answers_and_events_all_get_through(link_path):
    """A protocol 1.1 shoe sends its Status unasked as fast as the link takes it: once its budget is
    spent one FLOODING event says so and the rest is left out, counted; every Status the host asks for
    (tied to its request by its id) and every numbered card read still arrives, each once."""
    endpoint, _ = make_endpoint(link_path, SimulatedShoe(faults=Faults(status_flood=True), heartbeat_s=0))
    seen = Seen()
    config = SessionConfig(stale_after=10.0)

    async def main() -> None:
        await asyncio.to_thread(endpoint.start)
        conn = DeviceConnection(endpoint.url, seen.message, seen.event, config, **transport_options(endpoint))
        try:
            await conn.open()
            await seen.until(lambda: any(e.kind is K.FLOODING for e in seen.events))
            left_out = conn.stats.status_left_out
            assert left_out > 0
            for _ in range(5):  # each answered at once, in a window whose budget is spent
                answer = await conn.request(StatusRequest(), Status, timeout=5.0)
                assert answer.cards_held == 0
            await asyncio.to_thread(endpoint.call, endpoint.device.load, full_shoe(1))
            await asyncio.to_thread(endpoint.call, endpoint.device.deal, 52)
            await seen.until(lambda: len(seen.reads()) >= 52)
            # it floods on all the while: once the new window's budget is spent, more are left out
            await until(lambda: conn.stats.status_left_out > left_out, timeout=20.0, what="more left out")
        finally:
            await conn.close()
            await asyncio.to_thread(endpoint.stop)

    asyncio.run(main())
    assert seen.reads() == list(range(1, 53))
    assert len([e for e in seen.events if e.kind is K.FLOODING]) == 1
