"""ManagedDevice against the in-memory device: handshakes retried until the device answers,
a lost transport reopened and greeted again, LinkDown while away, a broken event sink survived.
(tests/e2e/test_e2e_managed.py runs it over a real pty and pyusb with an unplug.)"""
from __future__ import annotations

import pytest
from fb_device import FakeDevice, MemoryTransport
from fb_wire import Wire, run, wait_for

from drivers import LinkDown, register_scheme, unregister_scheme
from drivers.reconnect import Backoff
from firmware_bridge.managed import ManagedDevice
from firmware_bridge.messages import Status, StatusRequest
from firmware_bridge.session import SessionConfig, SessionEventKind as K

pytestmark = pytest.mark.timeout(30)

# the host's link keeps its default timers (a loaded machine only slows the test down); a
# short handshake timeout makes the silent device's retries quick
QUICK = SessionConfig(handshake_timeout=0.1, stale_after=5.0)
FAST_RETRY = Backoff(initial=0.01, cap=0.05)


@pytest.fixture(autouse=True)
def _fbmem_scheme():
    """The fbmem:// scheme a Bench registers exists for one test only."""
    yield
    unregister_scheme("fbmem")


class Bench:
    """One FakeDevice that outlives the transports the driver registry makes for it."""

    def __init__(self, **device_options) -> None:
        self.to_host = Wire()
        self.device: FakeDevice | None = None
        self.device_options = device_options
        self.transports: list[MemoryTransport] = []
        register_scheme("fbmem", self.transport)

    def transport(self, url, **options) -> MemoryTransport:
        if self.device is None:  # made on the loop, like the Link inside it
            self.device = FakeDevice(self.to_host, **self.device_options)
        to_device = Wire(receiver=self.device.link.bytes_received)
        transport = MemoryTransport(to_device, url=url.text)
        self.to_host.receiver = transport.deliver
        self.transports.append(transport)
        return transport


def test_handshake_is_retried_until_the_device_answers():
    async def main():
        bench, events = Bench(answer=False), []
        managed = ManagedDevice("fbmem://shoe", None, events.append, QUICK, backoff=FAST_RETRY)
        await managed.start()
        await wait_for(lambda: bench.device is not None and len(bench.device.received) >= 3)  # HELLO, HELLO, ...
        assert not managed.connected and K.CONNECTED not in [e.kind for e in events]
        with pytest.raises(LinkDown, match=r"fbmem://shoe: device is not connected \(reconnecting\)"):
            await managed.request(StatusRequest(), expect=Status)
        bench.device.answer = True
        ident = await managed.wait_connected(timeout=5)
        assert ident.serial == "SN42" and len(bench.transports) == 1  # the same transport all along
        assert (await managed.request(StatusRequest(), expect=Status)).uptime_ms == 1234
        await managed.close()

    run(main())


def test_a_lost_transport_is_reported_reopened_and_greeted_again():
    async def main():
        bench, kinds = Bench(), []

        def on_event(event):
            kinds.append(event.kind)
            raise RuntimeError("the owner's bug")  # must not stop the supervision

        managed = ManagedDevice("fbmem://shoe", None, on_event, QUICK, backoff=FAST_RETRY)
        await managed.start()
        first = await managed.wait_connected(timeout=5)
        bench.transports[-1].close()  # what a driver does on an unplug
        await wait_for(lambda: kinds.count(K.CONNECTED) == 2)
        assert [k for k in kinds if k in (K.CONNECTED, K.DISCONNECTED, K.REBOOTED)] == [
            K.CONNECTED, K.DISCONNECTED, K.CONNECTED]
        assert len(bench.transports) == 2 and managed.ident.boot_id == first.boot_id
        await managed.request(StatusRequest(), expect=Status)

        bench.device.boot_id += 1  # the device rebooted while it was away
        bench.transports[-1].close()
        await wait_for(lambda: kinds.count(K.CONNECTED) == 3)
        assert K.REBOOTED in kinds and managed.ident.boot_id == bench.device.boot_id
        await managed.close()
        assert not managed.connected
        with pytest.raises(LinkDown):
            await managed.send(StatusRequest())

    run(main())
