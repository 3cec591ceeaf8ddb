"""DeviceConnection kept up against the in-memory device: handshakes retried until the device
answers, a lost port reopened and greeted again, PortClosed while away, a broken event sink survived.
(tests/e2e/test_e2e_connection.py runs it over a real pty and pyusb with an unplug.)"""
from __future__ import annotations

import pytest

from drivers import PortClosed
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.messages import Status, StatusRequest
from firmware_bridge.session import SessionEventKind as K

from tests.firmware_bridge.fb_device import FAST_RETRY, MANAGED_QUICK as QUICK, DeviceLine, connection, ident_of, kinds
from tests.support.aio import run
from tests.support.poll import until

pytestmark = pytest.mark.timeout(30)


def test_handshake_is_retried_until_the_device_answers():
    async def main():
        conn, _, line, _, events = connection(QUICK, name="shoe", answer=False)
        await conn.start()
        await until(lambda: len(line.device.received) >= 3)  # HELLO, HELLO, ...
        assert not conn.connected and K.CONNECTED not in kinds(events)
        with pytest.raises(PortClosed, match=r"mem://shoe: device is not connected \(reconnecting\)"):
            await conn.request(StatusRequest(), expect=Status)
        line.device.answer = True
        ident = await conn.wait_connected(timeout=5)
        assert ident.serial == "SN42" and line.connections == 1  # the same port all along
        assert (await conn.request(StatusRequest(), expect=Status)).uptime_ms == 1234
        await conn.close()

    run(main())


def test_a_lost_port_is_reported_reopened_and_greeted_again():
    async def main():
        line, kinds_seen = DeviceLine("shoe"), []

        def on_event(event):
            kinds_seen.append(event.kind)
            raise RuntimeError("the owner's bug")  # must not stop the supervision

        conn = DeviceConnection("mem://shoe", None, on_event, QUICK, backoff=FAST_RETRY)
        await conn.start()
        first = await conn.wait_connected(timeout=5)
        line.unplug()
        await until(lambda: kinds_seen.count(K.CONNECTED) == 2)
        assert [k for k in kinds_seen if k in (K.CONNECTED, K.DISCONNECTED, K.REBOOTED)] == [
            K.CONNECTED, K.DISCONNECTED, K.CONNECTED]
        assert line.connections == 2 and ident_of(conn).boot_id == first.boot_id
        await conn.request(StatusRequest(), expect=Status)

        line.device.boot_id += 1  # the device rebooted while it was away
        line.unplug()
        await until(lambda: kinds_seen.count(K.CONNECTED) == 3)
        assert K.REBOOTED in kinds_seen and ident_of(conn).boot_id == line.device.boot_id
        await conn.close()
        assert not conn.connected
        with pytest.raises(PortClosed):
            await conn.send(StatusRequest())

    run(main())
