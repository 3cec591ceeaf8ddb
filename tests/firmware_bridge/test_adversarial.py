"""Adversarial cases for the session and the managed device: a device swapped on the same
port (reported as REPLACED, not passed off as a reboot), and other hostile peers."""
from __future__ import annotations

import pytest
from fb_device import device_pair
from fb_wire import run, wait_for
from test_managed import FAST_RETRY, QUICK as MANAGED_QUICK, Bench
from test_session import QUICK, kinds

from firmware_bridge.managed import ManagedDevice
from firmware_bridge.session import DeviceSession, SessionEventKind as K

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
