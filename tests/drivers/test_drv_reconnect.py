"""The reconnecting port, across real pty unplugs and simulated USB unplugs.

The backoff sleep is injected: it records the delay and yields once, so the tests run the
whole retry schedule without waiting for it.
"""
import asyncio
import errno
import os

import pytest
from structlog.testing import capture_logs

from drivers import PortClosed
from drivers.reconnect import Backoff, PortEventKind, ReconnectingPort
from drivers.transport import Transport

from tests.support.aio import run
from tests.support.poll import until
from tests.support.recorders import ListenerRecorder

pytestmark = pytest.mark.timeout(20)
CYCLES = 300 if os.environ.get("CARDD_FULL") == "1" else 25  # unplug/replug cycles of the soak
CONNECTED, DISCONNECTED, RETRYING = PortEventKind.CONNECTED, PortEventKind.DISCONNECTED, PortEventKind.RETRYING


class Harness:
    """Drives a ReconnectingPort: records events and sleeps, runs a hook on each event."""

    def __init__(self, url, on_event=None, **options):
        self.events, self.sleeps = [], []
        self.rec = ListenerRecorder()
        self.hook = on_event or (lambda event: None)
        self.port = ReconnectingPort(url, self.rec, self._event, sleep=self._sleep, **options)
        self._changed = asyncio.Event()

    def _event(self, event):
        self.events.append(event)
        self._changed.set()
        self.hook(event)

    async def _sleep(self, delay):
        self.sleeps.append(delay)
        await asyncio.sleep(0)

    def kinds(self):
        return [e.kind for e in self.events]

    async def until(self, condition):
        await until(condition, timeout=5, changed=self._changed)

    async def until_connected(self, times=1):
        await self.until(lambda: self.kinds().count(CONNECTED) >= times)


def test_backoff_doubles_from_a_tenth_and_caps_at_five_seconds():
    assert [Backoff().delay(n) for n in range(1, 10)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]


def test_without_libusb_a_usb_port_retries_with_backoff_and_says_why(without_libusb):
    url = "usb://1209:c4d0?serial=SHOE0001"

    async def main():
        h = Harness(url)
        with capture_logs() as logs:
            await h.port.start()
            await h.until(lambda: len(h.events) >= 4)
            await h.port.close()
        return h, logs

    h, logs = run(main())
    assert h.kinds()[:4] == [RETRYING] * 4 and h.sleeps[:4] == [0.1, 0.2, 0.4, 0.8]
    for event in h.events:
        assert event.reason.startswith(f"{url}: ") and "libusb-1.0-0" in event.reason
    retries = [line for line in logs if line["event"] == "port_retrying"]
    assert retries and all(line["log_level"] == "warning" and "libusb" in line["reason"] for line in retries)


def test_serial_port_survives_unplug_and_replug(pty_device):
    def replug_after_three_retries(event):
        if event.kind is RETRYING and event.attempt == 3:
            pty_device.replug()

    async def main():
        h = Harness(f"serial://{pty_device.link_path}", replug_after_three_retries)
        await h.port.start()
        await h.until_connected()
        h.port.write(b"one")
        assert await pty_device.receive(3) == b"one"
        pty_device.unplug()
        await h.until(lambda: DISCONNECTED in h.kinds())
        with pytest.raises(PortClosed):
            h.port.write(b"lost")
        await h.until_connected(2)
        h.port.write(b"two")
        assert await pty_device.receive(3) == b"two"
        pty_device.send(b"back")
        await h.rec.wait_bytes(4)
        await h.port.close()
        return h

    h = run(main())
    assert h.kinds() == [CONNECTED, DISCONNECTED, RETRYING, RETRYING, RETRYING, CONNECTED]
    assert pty_device.link_path in h.events[1].reason
    assert [e.attempt for e in h.events if e.kind is RETRYING] == [1, 2, 3]
    assert h.sleeps == [0.1, 0.2, 0.4]
    assert "no such device" in h.events[3].reason  # while unplugged the symlink dangles
    assert h.rec.data == b"back"


def test_a_device_absent_at_start_is_retried_with_capped_backoff(tmp_path, pty_device):
    missing = str(tmp_path / "shuffler-LATE")

    def plug_in_after_ten(event):
        if event.kind is RETRYING and event.attempt == 10:
            os.symlink(os.ttyname(pty_device.slave), missing)

    async def main():
        h = Harness(f"serial://{missing}", plug_in_after_ten)
        await h.port.start()
        await h.until_connected()
        await h.port.close()
        return h

    h = run(main())
    assert h.sleeps == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0, 5.0]
    assert h.kinds() == [RETRYING] * 10 + [CONNECTED]


def test_permission_denied_just_after_hotplug_is_retried(pty_device, mocker):
    real_open = os.open
    refusals: list[str] = []

    def open_before_udev_applies_the_group(path, flags, *args):
        if len(refusals) < 2:
            refusals.append(path)
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(path, flags, *args)

    mocker.patch("serial.serialposix.os.open", side_effect=open_before_udev_applies_the_group)

    async def main():
        h = Harness(f"serial://{pty_device.link_path}")
        await h.port.start()
        await h.until_connected()
        await h.port.close()
        return h

    h = run(main())
    assert h.kinds() == [RETRYING, RETRYING, CONNECTED]
    assert all("permission denied" in e.reason for e in h.events[:2])


def test_usb_port_survives_unplug_and_replug(usb_shoe):
    backend, device, side = usb_shoe

    def replug_on_second_retry(event):
        if event.kind is RETRYING and event.attempt == 2:
            device.replug()

    async def main():
        h = Harness("usb://1209:c4d0?serial=SHOE0001", replug_on_second_retry, backend=backend)
        await h.port.start()
        await h.until_connected()
        h.port.write(b"a")
        await h.rec.wait_bytes(1)
        device.unplug()
        await h.until_connected(2)
        h.port.write(b"b")
        await h.rec.wait_bytes(2)
        await h.port.close()
        return h

    h = run(main())
    assert h.kinds() == [CONNECTED, DISCONNECTED, RETRYING, RETRYING, CONNECTED]
    assert "ENODEV" in h.events[1].reason
    assert h.rec.data == b"AB" and bytes(side.received) == b"ab"


def test_a_failing_event_sink_does_not_stop_the_link(pty_device):
    def broken(event):
        raise RuntimeError("sink bug")

    async def main():
        h = Harness(f"serial://{pty_device.link_path}", broken)
        await h.port.start()
        await h.until_connected()
        pty_device.send(b"still here")
        await h.rec.wait_bytes(10)
        await h.port.close()
        return h

    assert run(main()).rec.data == b"still here"


def test_close_stops_retrying_and_reports_nothing_more(tmp_path):
    async def main():
        h = Harness(f"serial://{tmp_path}/never")
        await h.port.start()
        await h.until(lambda: len(h.events) >= 3)
        await h.port.close()
        count = len(h.events)
        await asyncio.sleep(0.05)
        return h, count

    h, count = run(main())
    assert len(h.events) == count and set(h.kinds()) == {RETRYING}
    assert not h.port.connected


@pytest.mark.soak
@pytest.mark.timeout(300)
def test_many_unplug_cycles_leave_nothing_behind(pty_device, usb_shoe):
    """Serial and USB links through CYCLES unplug/replug cycles (CARDD_FULL=1: 300)."""
    backend, device, _ = usb_shoe

    def replug_serial(event):
        if event.kind is RETRYING and event.attempt == 2:
            pty_device.replug()

    def replug_usb(event):
        if event.kind is RETRYING and event.attempt == 2:
            device.replug()

    async def main():
        every_link_lasts = Backoff(stable=0)  # each cycle starts the schedule over, as after a long session
        serial_port = Harness(f"serial://{pty_device.link_path}", replug_serial, backoff=every_link_lasts)
        usb_port = Harness("usb://1209:c4d0?serial=SHOE0001", replug_usb, backend=backend, backoff=every_link_lasts)
        await serial_port.port.start()
        await usb_port.port.start()
        for cycle in range(1, CYCLES + 1):
            await serial_port.until_connected(cycle)
            await usb_port.until_connected(cycle)
            pty_device.send(bytes([cycle % 256]))
            usb_port.port.write(b"u")
            await serial_port.rec.wait_bytes(cycle)
            await usb_port.rec.wait_bytes(cycle)
            pty_device.unplug()
            device.unplug()
        await serial_port.until_connected(CYCLES + 1)
        await usb_port.until_connected(CYCLES + 1)
        await serial_port.port.close()
        await usb_port.port.close()
        return serial_port, usb_port

    serial_port, usb_port = run(main())
    assert serial_port.rec.data == bytes(c % 256 for c in range(1, CYCLES + 1))
    assert usb_port.rec.data == b"U" * CYCLES
    assert serial_port.kinds().count(DISCONNECTED) == usb_port.kinds().count(DISCONNECTED) == CYCLES


class Flapping(Transport):
    """A device that opens fine and is gone at once, every time (a loose connector, a device
    crashing on enumeration): each open succeeds, each link dies on the next loop turn."""

    def __init__(self, url, **options):
        self.url, self._listener = url.text, None

    async def open(self, listener):
        self._listener = listener
        asyncio.get_running_loop().call_soon(self.close)

    def write(self, data):
        raise PortClosed(self.url, "gone")

    def close(self):
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.connection_lost(PortClosed(self.url, "dropped right after open"))

    @property
    def is_open(self):
        return self._listener is not None


def test_a_link_that_drops_right_after_each_open_backs_off_instead_of_reopening_at_full_rate():
    from drivers import register_scheme, unregister_scheme
    register_scheme("flap", Flapping)

    async def main():
        h = Harness("flap://shuffler")
        await h.port.start()
        await h.until(lambda: len(h.sleeps) >= 8)
        await h.port.close()
        return h

    try:
        h = run(main())
    finally:
        unregister_scheme("flap")
    assert h.kinds()[:3] == [CONNECTED, DISCONNECTED, RETRYING]
    assert h.sleeps[:8] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]  # not 0.1 forever
