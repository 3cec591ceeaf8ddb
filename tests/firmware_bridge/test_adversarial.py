"""Adversarial cases for the session and the managed device: a device swapped on the same
port (reported as REPLACED, not passed off as a reboot), and other hostile peers."""
from __future__ import annotations

import asyncio

import pytest
from fb_device import FAST, MemoryTransport, device_pair
from fb_wire import Wire, run, wait_for
from test_managed import FAST_RETRY, QUICK as MANAGED_QUICK, Bench
from test_session import QUICK, kinds

from drivers import LinkDown
from firmware_bridge.errors import LinkReset, SessionClosed
from firmware_bridge.link import Link
from firmware_bridge.managed import ManagedDevice
from firmware_bridge.messages import Hello, Refused, Status, StatusRequest
from firmware_bridge.session import DeviceSession, SessionConfig, SessionEventKind as K

pytestmark = pytest.mark.timeout(30)


async def opened(**device_options):
    transport, device = device_pair(**device_options)
    events: list = []
    session = DeviceSession(transport, None, events.append, QUICK)
    await session.open()
    return session, device, events


def test_another_device_after_a_reset_is_reported_as_replaced():
    async def main():
        session, device, events = await opened()
        device.serial = "SN99"  # a technician swapped the shuffler; the new one boots and resets the link
        device.reboot()
        await wait_for(lambda: kinds(events).count(K.CONNECTED) == 2)
        replaced = [e for e in events if e.kind is K.REPLACED]
        assert len(replaced) == 1 and "SN42" in replaced[0].detail and "SN99" in replaced[0].detail
        assert kinds(events)[2:] == [K.IDENT, K.REPLACED, K.REBOOTED, K.CONNECTED]
        assert session.ident.serial == "SN99"
        await session.close()

    run(main())


def test_an_unsolicited_ident_of_another_model_is_reported_even_with_the_same_boot_id():
    async def main():
        session, device, events = await opened()
        device.model = "CS-7000"
        device.send(device.ident())  # same boot id, different model: not a reboot, still not the same device
        await wait_for(lambda: K.REPLACED in kinds(events))
        replaced = next(e for e in events if e.kind is K.REPLACED)
        assert "CS-6000 SN42" in replaced.detail and "CS-7000 SN42" in replaced.detail
        assert session.ident.model == "CS-7000"  # what the host believes follows what answers
        await session.close()

    run(main())


def test_the_same_device_rebooting_is_not_replaced():
    async def main():
        session, device, events = await opened()
        device.reboot()
        await wait_for(lambda: kinds(events).count(K.CONNECTED) == 2)
        assert K.REBOOTED in kinds(events) and K.REPLACED not in kinds(events)
        await session.close()

    run(main())


def test_another_device_plugged_in_while_away_is_reported_as_replaced():
    async def main():
        bench, events = Bench(), []
        managed = ManagedDevice("fbmem://shuffler", None, events.append, MANAGED_QUICK, backoff=FAST_RETRY)
        await managed.start()
        await managed.wait_connected(timeout=5)
        bench.device.serial, bench.device.boot_id = "SN77", 0x7777  # unplugged, another unit plugged in
        bench.transports[-1].close()
        await wait_for(lambda: kinds(events).count(K.CONNECTED) == 2)
        replaced = [e for e in events if e.kind is K.REPLACED]
        assert len(replaced) == 1 and "SN42" in replaced[0].detail and "SN77" in replaced[0].detail
        assert "while away" in replaced[0].detail and replaced[0].ident.serial == "SN77"
        await managed.close()

    run(main())


class SlowToOpen(MemoryTransport):
    """A transport whose open() takes until the test lets it finish (a USB claim, a slow tty)."""

    def __init__(self) -> None:
        super().__init__(Wire(cut=True))
        self.release = asyncio.Event()

    async def open(self, listener) -> None:
        await self.release.wait()
        await super().open(listener)


def test_close_while_waiting_for_the_link_ends_open_at_once_with_session_closed():
    async def main():
        transport = MemoryTransport(Wire(cut=True))  # nobody answers the RESET
        patient = SessionConfig(link=FAST, handshake_timeout=10.0)  # open() alone would wait 20 s
        session = DeviceSession(transport, config=patient)
        opening = asyncio.ensure_future(session.open())
        await wait_for(lambda: transport.wire_out.written)  # the RESET is out
        await session.close()
        with pytest.raises(SessionClosed):
            await asyncio.wait_for(opening, 5)  # the pytest timeout would not say which way it hung
        assert not session.connected and transport.closed == 1

    run(main())


def test_close_while_the_transport_opens_starts_no_link_and_leaves_it_closed():
    async def main():
        transport = SlowToOpen()
        session = DeviceSession(transport, config=QUICK)
        opening = asyncio.ensure_future(session.open())
        await asyncio.sleep(0)  # open() now waits inside transport.open
        await session.close()
        transport.release.set()
        with pytest.raises(SessionClosed):
            await asyncio.wait_for(opening, 5)
        assert transport.wire_out.written == []  # no RESET sent by a link nobody will close
        assert not transport.is_open

    run(main())


def test_a_refused_rehandshake_is_retried_not_dropped_with_the_session_claiming_connected():
    async def main():
        session, device, events = await opened()
        device.answer = False  # rebooted into a state that is not ready for a host yet
        device.reboot()
        await wait_for(lambda: [type(m) for m in device.received].count(Hello) == 2)  # the re-handshake HELLO
        device.send(Refused(Hello.TYPE, "booting, try again"))
        await wait_for(lambda: session.stats.messages_received == 2)  # the IDENT, then the refusal
        await asyncio.sleep(0)  # let the handshake task see it
        assert not session.connected  # no IDENT from this boot yet
        device.answer = True
        await wait_for(lambda: kinds(events).count(K.CONNECTED) == 2)
        assert session.connected and session.ident.boot_id == device.boot_id
        await session.close()

    run(main())


def test_a_managed_device_that_turns_incompatible_on_a_reboot_is_greeted_again_not_abandoned():
    async def main():
        bench, events = Bench(), []
        managed = ManagedDevice("fbmem://shuffler", None, events.append, MANAGED_QUICK, backoff=FAST_RETRY)
        await managed.start()
        await managed.wait_connected(timeout=5)
        bench.device.protocol_major = 2  # an update to firmware of another protocol generation
        bench.device.reboot()
        await wait_for(lambda: K.INCOMPATIBLE in kinds(events))
        assert not managed.connected
        bench.device.protocol_major = 1  # the technician flashes the right firmware back
        bench.device.reboot()
        await wait_for(lambda: kinds(events).count(K.CONNECTED) == 2)
        assert managed.connected and len(bench.transports) == 1  # the same port all along
        assert (await managed.request(StatusRequest(), expect=Status)).uptime_ms == 1234
        await managed.close()

    run(main())


def test_messages_asked_for_after_the_session_closed_ends_at_once_instead_of_waiting_forever():
    async def main():
        session, device, events = await opened()
        await session.close()
        stream = session.messages()  # a consumer that starts a moment too late
        assert await asyncio.wait_for(anext(stream, "ended"), 5) == "ended"

    run(main())


def test_wait_connected_on_a_closed_managed_device_raises_instead_of_waiting_forever():
    async def main():
        Bench(answer=False)  # a device that never answers: no session will ever come up
        managed = ManagedDevice("fbmem://shoe", None, None, MANAGED_QUICK, backoff=FAST_RETRY)
        await managed.start()
        waiting = asyncio.ensure_future(managed.wait_connected())  # no timeout: the caller trusts close()
        await asyncio.sleep(0.05)
        await managed.close()
        with pytest.raises(LinkDown, match="closed"):
            await asyncio.wait_for(waiting, 5)
        with pytest.raises(LinkDown, match="closed"):
            await asyncio.wait_for(managed.wait_connected(), 5)

    run(main())


def test_a_reboot_before_the_request_was_even_acknowledged_fails_it_once_with_no_stray_error():
    """The device reboots while the request is still on its way: the caller gets one LinkReset,
    and no 'Future exception was never retrieved' is left for asyncio to log as an error."""
    import gc

    async def main():
        session, device, events = await opened()
        device.link.close()  # the request frame reaches a device that has died ...
        device.link = Link(device.wire_out.write, device._payload, None, FAST, name="device")
        session.transport.wire_out.receiver = device.link.bytes_received
        pending = asyncio.ensure_future(session.request(StatusRequest(), expect=Status, timeout=5))
        await asyncio.sleep(0.01)
        device.reboot()  # ... and comes back with a RESET before it ever acknowledged it
        with pytest.raises(LinkReset):
            await asyncio.wait_for(pending, 5)
        del pending
        gc.collect()
        await asyncio.sleep(0)
        await session.close()

    run(main())
