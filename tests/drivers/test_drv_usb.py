"""The USB bulk transport through pyusb's own core, on the simulated backend."""
import asyncio
import errno
import os
import threading

import pytest
import usb.core
from structlog.testing import capture_logs

from drivers import (DeviceBusy, DeviceNotFound, DriverError, PortClosed, LinkLost, PermissionDenied,
                     UsbUnavailable, open_transport)
from drivers.known_devices import by_role
from drivers.usb_bulk import UsbBulkTransport

from tests.drivers.drv_helpers import EchoSide, FirstChunkFails
from tests.support.aio import run
from tests.support.recorders import ListenerRecorder

pytestmark = pytest.mark.timeout(20)
SHOE_URL = "usb://1209:c4d0?serial=SHOE0001"


def usb_threads():
    return [t for t in threading.enumerate() if t.name.startswith("usb-")]


def test_bytes_flow_both_ways_after_detaching_the_kernel_driver(usb_shoe):
    backend, device, side = usb_shoe

    async def main():
        rec = ListenerRecorder()
        transport = await open_transport(SHOE_URL, rec, backend=backend)
        transport.write(b"hello ")
        transport.write(b"shoe")
        data = await rec.wait_bytes(10)
        transport.close()
        return data, rec

    data, rec = run(main())
    assert bytes(side.received) == b"hello shoe"
    assert data == b"HELLO SHOE"
    assert device.kernel_driver_attached is False
    assert rec.lost == [None]
    assert usb_threads() == []


def test_a_long_stream_from_the_device_arrives_intact(usb_shoe):
    backend, device, _ = usb_shoe
    payload = os.urandom(20_000)

    async def main():
        rec = ListenerRecorder()
        transport = await open_transport(SHOE_URL, rec, backend=backend)
        for start in range(0, len(payload), 37):  # odd-sized pieces, many transfers
            device.send_to_host(payload[start:start + 37])
        data = await rec.wait_bytes(len(payload))
        transport.close()
        return data

    assert run(main()) == payload


def test_the_serial_number_picks_the_device(usb_shoe):
    backend, first, first_side = usb_shoe
    second_side = EchoSide()
    shoe = by_role("shoe")
    second_side.device = backend.add_device(second_side, vid=shoe.vid, pid=shoe.pid, serial="SHOE0002")

    async def main():
        transport = await open_transport("usb://1209:c4d0?serial=SHOE0002", ListenerRecorder(), backend=backend)
        transport.write(b"to two")
        await asyncio.sleep(0)
        transport.close()

    run(main())
    assert bytes(second_side.received) == b"to two" and first_side.received == b""


def test_unplug_reports_connection_lost_once_and_ends_the_threads(usb_shoe):
    backend, device, _ = usb_shoe

    async def main():
        rec = ListenerRecorder()
        transport = await open_transport(SHOE_URL, rec, backend=backend)
        device.send_to_host(b"before")
        await rec.wait_bytes(6)
        device.unplug()
        exc = await rec.wait_lost()
        await asyncio.sleep(0.1)  # a second report (from the writer thread too) would land here
        transport.close()
        with pytest.raises(PortClosed):
            transport.write(b"x")
        return rec, exc

    rec, exc = run(main())
    assert rec.data == b"before"
    assert len(rec.lost) == 1
    assert isinstance(exc, LinkLost) and "ENODEV" in str(exc) and SHOE_URL in str(exc)
    assert isinstance(exc.__cause__, usb.core.USBError) and exc.__cause__.errno == errno.ENODEV
    assert usb_threads() == []


def test_a_write_error_also_loses_the_link(usb_shoe, mocker):
    backend, _, _ = usb_shoe
    mocker.patch.object(backend, "bulk_write",
                        side_effect=usb.core.USBError("Pipe error", -9, errno.EPIPE))

    async def main():
        rec = ListenerRecorder()
        transport = await open_transport(SHOE_URL, rec, backend=backend)
        transport.write(b"stalls")
        exc = await rec.wait_lost()
        return exc

    exc = run(main())
    assert isinstance(exc, LinkLost) and "EPIPE" in str(exc) and "write" in str(exc)
    assert usb_threads() == []


def test_missing_device_is_not_found_with_vid_pid_and_serial(usb_shoe):
    backend, _, _ = usb_shoe

    async def main():
        await open_transport("usb://1209:c4d0?serial=NOPE", ListenerRecorder(), backend=backend)

    with pytest.raises(DeviceNotFound, match="1209:c4d0 with serial NOPE"):
        run(main())


def test_no_libusb_is_one_driver_error_naming_the_device_and_the_package(without_libusb):
    async def main():
        await open_transport(SHOE_URL, ListenerRecorder())

    with pytest.raises(DriverError) as info:
        run(main())
    assert isinstance(info.value, UsbUnavailable) and info.value.device == SHOE_URL
    message = str(info.value)
    assert message.startswith(f"{SHOE_URL}: ") and "libusb-1.0-0" in message and "docs/install.md" in message
    assert isinstance(info.value.__cause__, usb.core.NoBackendError)  # pyusb's own core said so


def test_a_claimed_device_is_busy(usb_shoe):
    backend, _, _ = usb_shoe

    async def main():
        first = await open_transport(SHOE_URL, ListenerRecorder(), backend=backend)
        try:
            with pytest.raises(DeviceBusy, match="claimed"):
                await open_transport(SHOE_URL, ListenerRecorder(), backend=backend)
        finally:
            first.close()

    run(main())


def test_access_denied_names_the_group(usb_shoe, mocker):
    backend, _, _ = usb_shoe
    mocker.patch.object(backend, "open_device", side_effect=usb.core.USBError(
        "Access denied (insufficient permissions)", -3, errno.EACCES))

    async def main():
        await UsbBulkTransport(SHOE_URL, backend=backend).open(ListenerRecorder())

    with pytest.raises(PermissionDenied, match="'cardd' group") as info:
        run(main())
    assert "docs/install.md" in str(info.value)


def test_a_listener_that_raises_is_logged_and_the_reader_thread_goes_on(usb_shoe):
    backend, device, _ = usb_shoe

    async def main():
        rec = FirstChunkFails()
        transport = await open_transport(SHOE_URL, rec, backend=backend)
        device.send_to_host(b"first")
        await rec.wait_bytes(5)
        device.send_to_host(b"second")
        await rec.wait_bytes(11)
        alive = [t.is_alive() for t in usb_threads()]
        transport.close()
        return rec, alive

    with capture_logs() as logs:
        rec, alive = run(main())
    assert rec.data == b"firstsecond" and rec.lost == [None]
    assert alive == [True, True]
    assert [e["device"] for e in logs if e["event"] == "listener_failed"] == [SHOE_URL]


def test_a_slow_out_endpoint_bounds_the_backlog_and_close_does_not_wait_for_it(usb_shoe):
    """The device takes 64 bytes per 50 ms. What it has not taken stays within
    MAX_BACKLOG (the oldest dropped and counted, as on serial), and close() returns without
    draining it; the writer thread ends by itself within one write timeout."""
    from drivers.transport import MAX_BACKLOG
    from drivers.usb_bulk import CLOSE_WAIT_S, WRITE_CHUNK
    backend, device, side = usb_shoe
    device.out_packet_delay_s = 0.05
    chunks = [os.urandom(4096) for _ in range(3 * MAX_BACKLOG // 4096)]

    async def main():
        transport = await open_transport(SHOE_URL, ListenerRecorder(), backend=backend)
        assert isinstance(transport, UsbBulkTransport)
        for chunk in chunks:
            transport.write(chunk)
        assert transport.backlog <= MAX_BACKLOG
        assert transport.bytes_dropped >= len(chunks) * 4096 - MAX_BACKLOG - WRITE_CHUNK
        started = asyncio.get_running_loop().time()
        transport.close()
        return asyncio.get_running_loop().time() - started

    blocked = run(main())
    assert blocked <= CLOSE_WAIT_S + 0.5  # the bound is the point: the old close drained 3 MiB at 1.3 kB/s
    for thread in usb_threads():
        thread.join(5)
    assert usb_threads() == []
    assert len(side.received) < 64 * 1024  # most of it was never written: dropped or abandoned
