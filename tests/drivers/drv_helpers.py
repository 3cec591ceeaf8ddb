"""Test doubles for the drivers' tests: real pseudo-terminals and a recording listener."""
from __future__ import annotations

import asyncio
import os
import tty

from simulators.usb_backend import SimUsbDevice

from tests.support.recorders import ListenerRecorder


class PtyDevice:
    """A serial device made of a real pty pair, reachable at a stable symlink (like udev's
    /dev/cardd/shuffler-A1). ``unplug`` closes the master (the driver sees EIO/EOF);
    ``replug`` makes a new pair and re-points the symlink."""

    def __init__(self, link_path: str) -> None:
        self.link_path = link_path
        self.master = self.slave = -1
        self.plugged = False
        self.replug()

    def replug(self) -> None:
        self.master, self.slave = os.openpty()
        tty.setraw(self.master)
        tty.setraw(self.slave)
        os.set_blocking(self.master, False)
        tmp = self.link_path + ".new"
        os.symlink(os.ttyname(self.slave), tmp)
        os.replace(tmp, self.link_path)  # atomic, as udev does it
        self.plugged = True

    def unplug(self) -> None:
        if self.plugged:
            os.close(self.master)
            os.close(self.slave)
            self.plugged = False

    def send(self, data: bytes) -> None:
        """The device sends ``data`` to the host."""
        os.write(self.master, data)

    async def receive(self, count: int, timeout: float = 5) -> bytes:
        """What the host wrote, ``count`` bytes, read event-driven from the master."""
        loop = asyncio.get_running_loop()
        got = bytearray()
        ready = asyncio.Event()
        loop.add_reader(self.master, ready.set)
        try:
            async with asyncio.timeout(timeout):
                while len(got) < count:
                    await ready.wait()
                    ready.clear()
                    try:
                        got += os.read(self.master, 65536)
                    except BlockingIOError:
                        pass
        finally:
            loop.remove_reader(self.master)
        return bytes(got)


class EchoSide:
    """Device side for the simulated USB backend: records what the host wrote, echoes it
    back upper-cased (so a test can tell the two directions apart)."""

    def __init__(self) -> None:
        self.device: SimUsbDevice | None = None  # set after add_device
        self.received = bytearray()

    def host_wrote(self, data: bytes) -> None:
        self.received += data
        if self.device is not None:
            self.device.send_to_host(data.upper())


class FirstChunkFails(ListenerRecorder):
    """A listener whose first ``bytes_received`` raises (a bug in the layer above)."""

    def bytes_received(self, data: bytes) -> None:
        first = not self.chunks
        super().bytes_received(data)
        if first:
            raise RuntimeError("listener bug on the first chunk")
