"""Adversarial cases for the device connection and its sessions: a device swapped on the same
port (reported as REPLACED, not passed off as a reboot), and other hostile peers."""
from __future__ import annotations

import asyncio

import pytest

from drivers import PortClosed, register_scheme, unregister_scheme
from drivers.memory import MemoryTransport
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.errors import LinkReset, SessionClosed
from firmware_bridge.link import Link
from firmware_bridge.messages import Hello, Refused, Status, StatusRequest
from firmware_bridge.session import SessionConfig, SessionEventKind as K

from tests.firmware_bridge.fb_device import (FAST, FAST_RETRY, MANAGED_QUICK, QUICK, DeviceLine, connection,
                                             ident_of, kinds, session_of)
from tests.support.aio import run
from tests.support.poll import until

pytestmark = pytest.mark.timeout(30)


async def opened(**device_options):
    conn, device, line, _, events = connection(**device_options)
    await conn.open()
    return conn, device, events


def test_another_device_after_a_reset_is_reported_as_replaced():
    async def main():
        conn, device, events = await opened()
        device.serial = "SN99"  # a technician swapped the shuffler; the new one boots and resets the link
        device.reboot()
        await until(lambda: kinds(events).count(K.CONNECTED) == 2)
        replaced = [e for e in events if e.kind is K.REPLACED]
        assert len(replaced) == 1 and "SN42" in replaced[0].detail and "SN99" in replaced[0].detail
        assert kinds(events)[2:] == [K.IDENT, K.REPLACED, K.REBOOTED, K.CONNECTED]
        assert ident_of(conn).serial == "SN99"
        await conn.close()

    run(main())


def test_an_unsolicited_ident_of_another_model_is_reported_even_with_the_same_boot_id():
    async def main():
        conn, device, events = await opened()
        device.model = "CS-7000"
        device.send(device.ident())  # same boot id, different model: not a reboot, still not the same device
        await until(lambda: K.REPLACED in kinds(events))
        replaced = next(e for e in events if e.kind is K.REPLACED)
        assert "CS-6000 SN42" in replaced.detail and "CS-7000 SN42" in replaced.detail
        assert ident_of(conn).model == "CS-7000"  # what the host believes follows what answers
        await conn.close()

    run(main())


def test_the_same_device_rebooting_is_not_replaced():
    async def main():
        conn, device, events = await opened()
        device.reboot()
        await until(lambda: kinds(events).count(K.CONNECTED) == 2)
        assert K.REBOOTED in kinds(events) and K.REPLACED not in kinds(events)
        await conn.close()

    run(main())


def test_another_device_plugged_in_while_away_is_reported_as_replaced():
    async def main():
        conn, _, line, _, events = connection(MANAGED_QUICK, name="shuffler")
        await conn.start()
        await conn.wait_connected(timeout=5)
        line.device.serial, line.device.boot_id = "SN77", 0x7777  # unplugged, another unit plugged in
        line.unplug()
        await until(lambda: kinds(events).count(K.CONNECTED) == 2)
        replaced = [e for e in events if e.kind is K.REPLACED]
        assert len(replaced) == 1 and "SN42" in replaced[0].detail and "SN77" in replaced[0].detail
        assert "while away" in replaced[0].detail and replaced[0].ident is not None and replaced[0].ident.serial == "SN77"
        await conn.close()

    run(main())


class SlowToOpen(MemoryTransport):
    """A mem:// port whose open() takes until the test lets it finish (a USB claim, a slow tty)."""

    made: list["SlowToOpen"] = []

    def __init__(self, url) -> None:
        super().__init__(url)  # slow://NAME reaches the line on NAME
        self.release = asyncio.Event()
        self.made.append(self)

    async def open(self, listener) -> None:
        await self.release.wait()
        await super().open(listener)


def test_close_while_waiting_for_the_link_ends_open_at_once_with_session_closed():
    async def main():
        conn, device, line, _, _ = connection(SessionConfig(link=FAST, handshake_timeout=10.0))  # open() alone would wait 20 s
        line.cut()  # nobody answers the RESET
        opening = asyncio.ensure_future(conn.open())
        await until(lambda: line.to_device.written)  # the RESET is out
        await conn.close()
        with pytest.raises(SessionClosed):
            await asyncio.wait_for(opening, 5)  # the pytest timeout would not say which way it hung
        assert not conn.connected
        await until(lambda: device.hangups == 1)

    run(main())


def test_close_while_the_port_opens_starts_no_link_and_leaves_it_closed():
    async def main():
        line = DeviceLine("slow")
        register_scheme("slow", lambda url, **options: SlowToOpen(url))
        try:
            conn = DeviceConnection("slow://slow", config=QUICK, backoff=FAST_RETRY)
            opening = asyncio.ensure_future(conn.open())
            await until(lambda: SlowToOpen.made)  # open() now waits inside the transport's open
            await conn.close()
            SlowToOpen.made[-1].release.set()
            with pytest.raises(SessionClosed):
                await asyncio.wait_for(opening, 5)
        finally:
            unregister_scheme("slow")
        assert line.to_device.written == []  # no RESET sent by a link nobody will close
        assert not SlowToOpen.made[-1].is_open and line.connections == 0

    run(main())


def test_a_refused_rehandshake_is_retried_not_dropped_with_the_session_claiming_connected():
    async def main():
        conn, device, events = await opened()
        device.answer = False  # rebooted into a state that is not ready for a host yet
        device.reboot()
        await until(lambda: [type(m) for m in device.received].count(Hello) == 2)  # the re-handshake HELLO
        device.send(Refused(Hello.TYPE, "booting, try again"))
        await until(lambda: session_of(conn).stats.messages_received == 2)  # the IDENT, then the refusal
        await asyncio.sleep(0)  # let the handshake task see it
        assert not conn.connected  # no IDENT from this boot yet
        device.answer = True
        await until(lambda: kinds(events).count(K.CONNECTED) == 2)
        assert conn.connected and ident_of(conn).boot_id == device.boot_id
        await conn.close()

    run(main())


def test_a_managed_device_that_turns_incompatible_on_a_reboot_is_greeted_again_not_abandoned():
    async def main():
        conn, _, line, _, events = connection(MANAGED_QUICK, name="shuffler")
        await conn.start()
        await conn.wait_connected(timeout=5)
        line.device.protocol_major = 2  # an update to firmware of another protocol generation
        line.device.reboot()
        await until(lambda: K.INCOMPATIBLE in kinds(events))
        assert not conn.connected
        line.device.protocol_major = 1  # the technician flashes the right firmware back
        line.device.reboot()
        await until(lambda: kinds(events).count(K.CONNECTED) == 2)
        assert conn.connected and line.connections == 1  # the same port all along
        assert (await conn.request(StatusRequest(), expect=Status)).uptime_ms == 1234
        await conn.close()

    run(main())


def test_messages_asked_for_after_the_session_closed_ends_at_once_instead_of_waiting_forever():
    async def main():
        conn, device, events = await opened()
        await conn.close()
        stream = conn.messages()  # a consumer that starts a moment too late
        assert await asyncio.wait_for(anext(stream, "ended"), 5) == "ended"

    run(main())


def test_wait_connected_on_a_closed_managed_device_raises_instead_of_waiting_forever():
    async def main():
        DeviceLine("shoe", answer=False)  # a device that never answers: no session will ever come up
        conn = DeviceConnection("mem://shoe", None, None, MANAGED_QUICK, backoff=FAST_RETRY)
        await conn.start()
        waiting = asyncio.ensure_future(conn.wait_connected())  # no timeout: the caller trusts close()
        await asyncio.sleep(0.05)
        await conn.close()
        with pytest.raises(PortClosed, match="closed"):
            await asyncio.wait_for(waiting, 5)
        with pytest.raises(PortClosed, match="closed"):
            await asyncio.wait_for(conn.wait_connected(), 5)

    run(main())


def test_a_reboot_before_the_request_was_even_acknowledged_fails_it_once_with_no_stray_error():
    """The device reboots while the request is still on its way: the caller gets one LinkReset,
    and no 'Future exception was never retrieved' is left for asyncio to log as an error."""
    import gc

    async def main():
        conn, device, events = await opened()
        device.link.close()  # the request frame reaches a device that has died ...
        device.link = Link(device._write, device._payload, None, FAST, name="device")
        pending = asyncio.ensure_future(conn.request(StatusRequest(), expect=Status, timeout=5))
        await asyncio.sleep(0.01)
        device.reboot()  # ... and comes back with a RESET before it ever acknowledged it
        with pytest.raises(LinkReset):
            await asyncio.wait_for(pending, 5)
        del pending
        gc.collect()
        await asyncio.sleep(0)
        await conn.close()

    run(main())
