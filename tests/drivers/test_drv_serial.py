"""The serial transport over real pseudo-terminals."""
import asyncio
import errno
import os
import termios
import threading

import pytest
from structlog.testing import capture_logs

from drivers import (DeviceBusy, DeviceNotFound, PortClosed, LinkLost, PermissionDenied,
                     open_transport)
from drivers.serial_port import SerialTransport

from tests.drivers.drv_helpers import FirstChunkFails
from tests.support.aio import run
from tests.support.recorders import ListenerRecorder

pytestmark = pytest.mark.timeout(20)


def url(device, query=""):
    return f"serial://{device.link_path}{query}"


def test_byte_at_a_time_delivery_passes_every_byte_up(pty_device):
    async def main():
        rec = ListenerRecorder()
        transport = await open_transport(url(pty_device), rec)
        payload = bytes(range(256))
        for i, byte in enumerate(payload):
            pty_device.send(bytes([byte]))
            await rec.wait_bytes(i + 1)
        transport.close()
        return rec

    rec = run(main())
    assert rec.data == bytes(range(256))
    assert all(len(chunk) == 1 for chunk in rec.chunks)  # nothing held back waiting for more
    assert rec.lost == [None]


def test_ftdi_style_batches_arrive_whole_and_in_order(pty_device):
    # an FTDI adapter hands the host up to 64 bytes every 16 ms
    batches = [bytes([n]) * 64 for n in range(20)]

    async def main():
        rec = ListenerRecorder()
        transport = await open_transport(url(pty_device), rec)
        for batch in batches:
            pty_device.send(batch)
            await asyncio.sleep(0.016)
        await rec.wait_bytes(64 * len(batches))
        transport.close()
        return rec

    rec = run(main())
    assert rec.data == b"".join(batches)


def test_writes_larger_than_the_kernel_buffer_all_arrive_in_order(pty_device):
    payload = os.urandom(300_000)  # a pty buffers far less: the add_writer path must finish it

    async def main():
        rec = ListenerRecorder()
        transport = await open_transport(url(pty_device), rec)
        transport.write(payload[:100_000])
        transport.write(payload[100_000:])
        got = await pty_device.receive(len(payload))
        transport.close()
        return got

    assert run(main()) == payload


def test_url_settings_reach_the_line(pty_device):
    async def main():
        transport = await open_transport(url(pty_device, "?baud=9600&parity=E&stopbits=2&bytesize=7"),
                                         ListenerRecorder())
        attrs = termios.tcgetattr(pty_device.slave)  # the same line, seen from our side
        assert isinstance(transport, SerialTransport)
        settings = transport.line_settings()
        transport.close()
        return attrs, settings

    attrs, settings = run(main())
    assert attrs[4] == attrs[5] == termios.B9600  # the kernel line speed
    # a pty keeps only the speed (Linux forces CS8, no parity), so the rest is read back
    # from the port as pyserial configured it
    assert (settings["parity"], settings["stopbits"], settings["bytesize"]) == ("E", 2, 7)


def test_unplug_calls_connection_lost_once_naming_the_device(pty_device):
    async def main():
        rec = ListenerRecorder()
        transport = await open_transport(url(pty_device), rec)
        pty_device.send(b"last words")
        await rec.wait_bytes(10)
        pty_device.unplug()
        exc = await rec.wait_lost()
        await asyncio.sleep(0.05)  # any second report would land here
        transport.close()  # closing a lost link is a no-op
        with pytest.raises(PortClosed, match=pty_device.link_path):
            transport.write(b"x")
        return rec, exc, transport

    rec, exc, transport = run(main())
    assert rec.data == b"last words"
    assert len(rec.lost) == 1
    assert isinstance(exc, LinkLost) and pty_device.link_path in str(exc)
    assert not transport.is_open


@pytest.mark.parametrize("syscall", ["read", "write"])
def test_eio_is_an_unplug_too(pty_device, mocker, syscall):
    # Linux ptys report a closed master as end-of-file; real USB-serial adapters say EIO,
    # so the syscall is made to fail at the boundary
    async def main():
        rec = ListenerRecorder()
        transport = await open_transport(url(pty_device), rec)
        mocker.patch(f"drivers.serial_port.os.{syscall}",
                     side_effect=OSError(errno.EIO, "Input/output error"))
        if syscall == "read":
            pty_device.send(b"x")  # makes the fd readable
        else:
            transport.write(b"x")
            transport.write(b"y")  # still queued, failing again, reported once
            assert rec.lost == []  # never from inside write(): the caller is mid-send
        exc = await rec.wait_lost()
        await asyncio.sleep(0.05)  # any second report would land here
        return rec, exc, transport

    rec, exc, transport = run(main())
    assert len(rec.lost) == 1 and not transport.is_open
    assert isinstance(exc, LinkLost) and "errno 5" in str(exc) and pty_device.link_path in str(exc)
    assert isinstance(exc.__cause__, OSError)


def test_close_reports_connection_lost_none_once(pty_device):
    async def main():
        rec = ListenerRecorder()
        transport = await open_transport(url(pty_device), rec)
        assert transport.is_open
        transport.close()
        transport.close()
        return rec

    assert run(main()).lost == [None]


def test_missing_device_says_not_found_with_the_path(tmp_path):
    path = str(tmp_path / "shuffler-NOPE")

    async def main():
        await open_transport(f"serial://{path}", ListenerRecorder())

    with pytest.raises(DeviceNotFound) as info:
        run(main())
    assert path in str(info.value) and "not" in str(info.value).lower()
    assert info.value.device == path


def test_second_open_is_refused_as_busy(pty_device):
    async def main():
        first = await open_transport(url(pty_device), ListenerRecorder())
        try:
            with pytest.raises(DeviceBusy, match="exclusive lock") as info:
                await open_transport(url(pty_device), ListenerRecorder())
        finally:
            first.close()
        return info.value

    assert pty_device.link_path in str(run(main()))


def test_permission_denied_names_the_group_and_the_install_doc(pty_device, mocker):
    # as root a chmod 000 pty still opens: make the open syscall refuse, at the boundary
    mocker.patch("serial.serialposix.os.open",
                 side_effect=PermissionError(errno.EACCES, "Permission denied"))

    async def main():
        await open_transport(url(pty_device), ListenerRecorder())

    with pytest.raises(PermissionDenied) as info:
        run(main())
    message = str(info.value)
    assert pty_device.link_path in message and "'cardd' group" in message
    assert "docs/install.md" in message


def test_serial_transport_refuses_a_non_serial_url():
    with pytest.raises(ValueError, match="serial://"):
        SerialTransport("usb://1209:c4d0")


def test_reads_are_event_driven_on_the_loop_without_a_thread(pty_device):
    async def main():
        before = threading.active_count()
        rec = ListenerRecorder()
        transport = await open_transport(url(pty_device), rec)
        pty_device.send(b"abc")
        await rec.wait_bytes(3)
        during = threading.active_count()
        transport.close()
        return before, during

    before, during = run(main())
    assert during == before


def test_a_listener_that_raises_is_logged_and_later_bytes_still_arrive(pty_device):
    async def main():
        rec = FirstChunkFails()
        transport = await open_transport(url(pty_device), rec)
        pty_device.send(b"first")
        await rec.wait_bytes(5)
        pty_device.send(b"second")
        await rec.wait_bytes(11)
        transport.close()
        return rec

    with capture_logs() as logs:
        rec = run(main())  # run() fails the test if the exception reached the loop
    assert rec.data == b"firstsecond" and rec.lost == [None]
    [failed] = [e for e in logs if e["event"] == "listener_failed"]
    assert failed["device"] == pty_device.link_path and failed["head"] == b"first".hex(" ")


def test_a_device_that_stops_reading_cannot_grow_the_backlog_without_bound(pty_device):
    """The peer never reads: every write stays queued. The backlog stops at MAX_BACKLOG, the
    oldest bytes go, and what the device reads once it drains is the newest data, in order."""
    from drivers.transport import MAX_BACKLOG
    chunks = [os.urandom(4096) for _ in range(3 * MAX_BACKLOG // 4096)]

    async def main():
        transport = await open_transport(url(pty_device), ListenerRecorder())
        assert isinstance(transport, SerialTransport)
        for chunk in chunks:
            transport.write(chunk)
        assert transport.backlog == MAX_BACKLOG and transport.bytes_dropped > 0
        got = await pty_device.receive(1)
        while True:  # drain everything the kernel and the backlog hold
            try:
                got += await pty_device.receive(1, timeout=0.5)
            except TimeoutError:
                break
        transport.close()
        return got

    got = run(main())
    newest = b"".join(chunks)[-MAX_BACKLOG:]
    assert got.endswith(newest)
