"""USB bulk transport through pyusb: one reader thread, one writer thread, bytes on the loop (a
bounded write backlog; at most ``CLOSE_WAIT_S`` at close). docs/architecture.md, "USB bulk"."""
from __future__ import annotations

import asyncio
import errno
import threading
import time
from typing import Any

import structlog
import usb.core
import usb.util

from drivers.errors import (LIBUSB_HINT, PERMISSION_HINT, DeviceBusy, DeviceNotFound, DriverError,
                            PortClosed, LinkLost, PermissionDenied, UsbUnavailable, os_words)
from drivers.transport import Transport, TransportListener, WriteBacklog, deliver
from drivers.urls import DeviceURL, parse_url

log = structlog.get_logger(__name__)

READ_SIZE = 512  # a few packets per transfer; a short packet ends the transfer early
READ_TIMEOUT_MS = 50  # how soon the reader notices close(); not a data timeout
WRITE_TIMEOUT_MS = 100  # one bulk write at most; a timeout is retried, so it only bounds close()
WRITE_CHUNK = 4096  # bytes the writer thread takes from the backlog per bulk write
#: the longest close() waits for the threads (one read or write timeout, with room to spare)
CLOSE_WAIT_S = 0.5


def _usb_open_error(name: str, exc: usb.core.USBError) -> DriverError:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return PermissionDenied(name, f"permission denied on the USB device: {PERMISSION_HINT}")
    if exc.errno == errno.EBUSY:
        return DeviceBusy(name, "busy: its interface is claimed by another process or driver")
    if exc.errno == errno.ENODEV:
        return DeviceNotFound(name, "device went away while opening")
    return DriverError(name, f"cannot open USB device: {os_words(exc)}")


def read_serial_number(dev: usb.core.Device) -> str | None:
    """The device's serial number string, or None if it has none. Reading it opens the
    device, so a USBError (EACCES without the udev rule) is raised, not hidden: pyusb's
    ``serial_number`` turns that into "no langid", which would read as "not found"."""
    try:
        return dev.serial_number
    except ValueError:
        usb.util.get_langids(dev)  # raises the USBError pyusb swallowed, if there was one
        return None
    finally:
        usb.util.dispose_resources(dev)


class UsbBulkTransport(Transport):
    def __init__(self, url: DeviceURL | str, *, backend: Any = None) -> None:
        self._url = parse_url(url)
        if self._url.scheme != "usb":
            raise ValueError(f"UsbBulkTransport needs a usb:// URL, not {self._url}")
        self.url = self._url.text
        self._backend = backend
        self._dev: usb.core.Device | None = None
        self._ep_in = self._ep_out = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: TransportListener | None = None
        self._stop = threading.Event()  # closing or lost: the reader ends, the writer empties the backlog
        self._abandon = threading.Event()  # close() stopped waiting: the writer drops what is left
        self._pending = threading.Condition()  # guards _backlog, _running, _released
        self._backlog = WriteBacklog(self.url, "usb_backlog_dropped")
        self._threads: list[threading.Thread] = []
        self._running = 0  # threads not yet ended
        self._released = False
        self._lost = False
        self.write_timeouts = 0  # bulk writes the device did not take in time (retried)

    @property
    def is_open(self) -> bool:
        return self._dev is not None and not self._lost

    @property
    def backlog(self) -> int:
        """Bytes accepted by write() that the writer thread has not taken yet (at most MAX_BACKLOG)."""
        with self._pending:
            return len(self._backlog)

    @property
    def bytes_dropped(self) -> int:
        """Oldest backlog discarded beyond MAX_BACKLOG (the device was not reading)."""
        with self._pending:
            return self._backlog.dropped

    def _find(self) -> usb.core.Device:
        wanted = self._url.serial_number
        refused: list[usb.core.USBError] = []

        def matches(dev: usb.core.Device) -> bool:
            if wanted is None:
                return True
            try:
                return read_serial_number(dev) == wanted
            except usb.core.USBError as exc:
                refused.append(exc)
                return False

        try:
            dev = usb.core.find(idVendor=self._url.vid, idProduct=self._url.pid,
                                custom_match=matches, backend=self._backend)
        except usb.core.NoBackendError as exc:  # pyusb's own text names neither device nor fix
            raise UsbUnavailable(self.url, f"cannot open: {LIBUSB_HINT}") from exc
        if dev is None:
            if refused:  # a device is there but we may not look: say so, not "not found"
                raise _usb_open_error(self.url, refused[0]) from refused[0]
            which = f" with serial {wanted}" if wanted else ""
            raise DeviceNotFound(self.url, f"no USB device {self._url.vid:04x}:"
                                 f"{self._url.pid:04x}{which} (plugged in? see docs/install.md)")
        return dev

    async def open(self, listener: TransportListener) -> None:
        if self._dev is not None:
            raise DriverError(self.url, "this transport was already opened; transports are "
                              "single-use: make a new one")
        dev = self._find()
        try:
            if dev.is_kernel_driver_active(0):
                dev.detach_kernel_driver(0)
            dev.set_configuration()
            usb.util.claim_interface(dev, 0)
            intf = dev.get_active_configuration()[(0, 0)]
            ep_in = usb.util.find_descriptor(intf, custom_match=lambda e: _is_bulk(e, usb.util.ENDPOINT_IN))
            ep_out = usb.util.find_descriptor(intf, custom_match=lambda e: _is_bulk(e, usb.util.ENDPOINT_OUT))
            if ep_in is None or ep_out is None:
                raise DriverError(self.url, "interface 0 has no bulk IN and OUT endpoints "
                                  "(not a cardd device, or wrong firmware)")
        except usb.core.USBError as exc:
            usb.util.dispose_resources(dev)
            raise _usb_open_error(self.url, exc) from exc
        except DriverError:
            usb.util.dispose_resources(dev)
            raise
        self._dev, self._ep_in, self._ep_out = dev, ep_in.bEndpointAddress, ep_out.bEndpointAddress
        self._loop, self._listener = asyncio.get_running_loop(), listener
        self._stop.clear()
        self._running = 2
        self._threads = [
            threading.Thread(target=self._read_loop, name=f"usb-read {self.url}", daemon=True),
            threading.Thread(target=self._write_loop, name=f"usb-write {self.url}", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        log.info("usb_open", device=self.url, bus=dev.bus, address=dev.address)

    # --- threads -----------------------------------------------------------------------
    def _read_loop(self) -> None:
        dev = self._dev
        assert dev is not None
        try:
            while not self._stop.is_set():
                try:
                    data = dev.read(self._ep_in, READ_SIZE, READ_TIMEOUT_MS)
                except usb.core.USBTimeoutError:
                    continue
                if data:
                    self._to_loop(self._deliver, bytes(data))
        except Exception as exc:  # noqa: BLE001 - any failure ends the link, never the thread silently
            self._fail(exc, "read")
        finally:
            self._thread_ended()

    def _write_loop(self) -> None:
        dev = self._dev
        assert dev is not None
        try:
            while True:
                with self._pending:
                    while not self._backlog and not self._stop.is_set():
                        self._pending.wait()
                    if not self._backlog or self._abandon.is_set():
                        return  # closing, and nothing (more) will be sent
                    chunk = self._backlog.take(WRITE_CHUNK)
                view = memoryview(chunk)
                while view and not self._abandon.is_set():
                    try:
                        view = view[dev.write(self._ep_out, view, WRITE_TIMEOUT_MS):]
                    except usb.core.USBTimeoutError:
                        # pyusb does not say how much went out: resend it all (the framing
                        # above drops a repeated partial frame), as long as the link is open
                        self.write_timeouts += 1
        except Exception as exc:  # noqa: BLE001
            self._fail(exc, "write")
        finally:
            self._thread_ended()

    def _thread_ended(self) -> None:
        with self._pending:
            self._running -= 1
        if self._stop.is_set():
            self._release()  # close() may have stopped waiting for this thread

    def _fail(self, exc: Exception, where: str) -> None:
        if self._stop.is_set():
            return  # closing: errors from tearing down are expected
        lost = LinkLost(self.url, f"link lost on {where}: {os_words(exc)}; unplugged?")
        lost.__cause__ = exc
        self._to_loop(self._lose, lost)

    def _to_loop(self, callback: Any, arg: Any) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(callback, arg)
        except RuntimeError:
            self._stop.set()  # the loop is closed: nobody to tell, so just stop

    # --- on the loop -------------------------------------------------------------------
    def _deliver(self, data: bytes) -> None:
        if self._listener is not None and not self._lost:
            deliver(self._listener, data, self.url)

    def write(self, data: bytes) -> None:
        if not self.is_open:
            raise PortClosed(self.url, "write on a closed USB link")
        with self._pending:
            self._backlog.add(data)
            self._pending.notify()

    def close(self) -> None:
        self._lose(None)

    def _lose(self, exc: LinkLost | None) -> None:
        """Stop and join the threads, release the device, tell the listener once."""
        if self._lost or self._dev is None:
            return
        self._lost = True
        with self._pending:
            self._stop.set()
            self._pending.notify_all()
        deadline = time.monotonic() + CLOSE_WAIT_S
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
        with self._pending:
            self._abandon.set()  # a device too slow to take it within CLOSE_WAIT_S: drop the rest
            self._backlog.clear()
        self._release()
        if exc is not None:
            log.warning("usb_lost", device=self.url, reason=str(exc))
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.connection_lost(exc)


    def _release(self) -> None:
        """Release the interface and the device once both threads have ended: by close(), or
        by the last thread if close() stopped waiting (never under a transfer in progress)."""
        with self._pending:
            if self._released or self._running > 0 or self._dev is None:
                return
            self._released = True
        try:
            usb.util.release_interface(self._dev, 0)
        except usb.core.USBError:
            pass  # unplugged: nothing left to release
        usb.util.dispose_resources(self._dev)


def _is_bulk(endpoint: Any, direction: int) -> bool:
    return (usb.util.endpoint_type(endpoint.bmAttributes) == usb.util.ENDPOINT_TYPE_BULK
            and usb.util.endpoint_direction(endpoint.bEndpointAddress) == direction)
