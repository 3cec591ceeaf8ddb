"""Serial transport: pyserial opens and configures the port, the asyncio loop moves bytes
(``add_reader``/``add_writer``, no thread, no polling; a bounded write backlog; one
``connection_lost`` on an unplug). docs/architecture.md, "The serial transport"."""
from __future__ import annotations

import asyncio
import errno
import os

import serial
import structlog

from drivers.errors import (PERMISSION_HINT, DeviceBusy, DeviceNotFound, DriverError, PortClosed,
                            LinkLost, PermissionDenied, os_words)
from drivers.transport import Transport, TransportListener, WriteBacklog, deliver
from drivers.urls import DeviceURL, parse_url

log = structlog.get_logger(__name__)

READ_CHUNK = 4096
_PARITY = {"N": serial.PARITY_NONE, "E": serial.PARITY_EVEN, "O": serial.PARITY_ODD,
           "M": serial.PARITY_MARK, "S": serial.PARITY_SPACE}
_BUSY = {errno.EWOULDBLOCK, errno.EAGAIN, errno.EBUSY}


def open_error(path: str, exc: BaseException) -> DriverError:
    """The one clear error for a port that would not open, from the errno behind ``exc``."""
    code = getattr(exc, "errno", None)
    if code == errno.ENOENT:
        return DeviceNotFound(path, "no such device (is it plugged in? is the udev rule "
                              "installed? see docs/install.md)")
    if code in (errno.EACCES, errno.EPERM):
        return PermissionDenied(path, f"permission denied: {PERMISSION_HINT}")
    if code in _BUSY:
        return DeviceBusy(path, "busy: another process holds the port's exclusive lock "
                          "(is another cardd or a terminal program running?)")
    return DriverError(path, f"cannot open serial port: {os_words(exc)}")


class SerialTransport(Transport):
    def __init__(self, url: DeviceURL | str) -> None:
        self._url = parse_url(url)
        if self._url.scheme != "serial":
            raise ValueError(f"SerialTransport needs a serial:// URL, not {self._url}")
        self.url = self._url.text
        self.path: str = self._url.path or ""
        self._port: serial.Serial | None = None
        self._fd = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: TransportListener | None = None
        self._out = WriteBacklog(self.path, "serial_backlog_dropped")  # what the kernel did not take yet

    @property
    def is_open(self) -> bool:
        return self._port is not None

    @property
    def backlog(self) -> int:
        """Bytes accepted by write() that the kernel has not taken yet (at most MAX_BACKLOG)."""
        return len(self._out)

    @property
    def bytes_dropped(self) -> int:
        """Oldest backlog discarded beyond MAX_BACKLOG (the device was not reading)."""
        return self._out.dropped

    def line_settings(self) -> dict[str, object]:
        """What pyserial applied to the open port (baudrate, parity, stopbits, bytesize, ...)."""
        if self._port is None:
            raise PortClosed(self.path, "serial port is not open")
        return self._port.get_settings()

    async def open(self, listener: TransportListener) -> None:
        if self._port is not None:
            raise DriverError(self.path, "already open")
        settings = self._url.serial_settings
        assert settings is not None
        port = serial.Serial(baudrate=settings.baud, parity=_PARITY[settings.parity],
                             stopbits=settings.stopbits, bytesize=settings.bytesize,
                             timeout=0, write_timeout=0, exclusive=True)
        port.port = self.path
        try:
            port.open()
        except (serial.SerialException, OSError) as exc:
            raise open_error(self.path, exc) from exc
        self._port, self._fd = port, port.fileno()
        self._loop, self._listener = asyncio.get_running_loop(), listener
        self._loop.add_reader(self._fd, self._on_readable)
        log.info("serial_open", device=self.path, baud=settings.baud, parity=settings.parity)

    def _on_readable(self) -> None:
        try:
            data = os.read(self._fd, READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return  # spurious wake-up
        except OSError as exc:
            self._lose(self._lost_by(exc, "read"), exc)
            return
        if not data:
            self._lose(LinkLost(self.path, "link lost: end of file (device gone)"), None)
            return
        assert self._listener is not None
        deliver(self._listener, data, self.path)

    def write(self, data: bytes) -> None:
        if self._port is None:
            raise PortClosed(self.path, "write on a closed serial port")
        waiting = bool(self._out)  # if so, the writer callback is armed: queue behind it
        self._out.add(data)
        if not waiting:
            self._flush()
            if self._out and self._port is not None:
                assert self._loop is not None
                self._loop.add_writer(self._fd, self._on_writable)

    def _flush(self) -> None:
        try:
            while self._out:
                self._out.consume(os.write(self._fd, self._out.data))
        except (BlockingIOError, InterruptedError):
            pass  # kernel buffer full: the writer callback sends the rest
        except OSError as exc:
            # reported on the next loop turn, as the USB driver does: the caller of write()
            # (the link, mid-send) never sees its own connection_lost re-enter it
            self._out.clear()
            assert self._loop is not None
            self._loop.call_soon(self._lose, self._lost_by(exc, "write"), exc)

    def _on_writable(self) -> None:
        self._flush()
        if not self._out and self._port is not None:
            assert self._loop is not None
            self._loop.remove_writer(self._fd)

    def _lost_by(self, exc: OSError, where: str) -> LinkLost:
        return LinkLost(self.path, f"link lost on {where}: {os.strerror(exc.errno or 0)} "
                        f"(errno {exc.errno}); unplugged?")

    def close(self) -> None:
        self._lose(None, None)

    def _lose(self, exc: LinkLost | None, cause: BaseException | None) -> None:
        """Release the port and tell the listener once; later calls do nothing."""
        port, self._port = self._port, None
        if port is None:
            return
        if cause is not None and exc is not None:
            exc.__cause__ = cause
        assert self._loop is not None
        self._loop.remove_reader(self._fd)
        self._loop.remove_writer(self._fd)
        self._out.clear()
        try:
            port.close()
        except (OSError, serial.SerialException):
            pass  # an unplugged port may refuse a clean close; the fd is gone either way
        self._fd = -1
        if exc is not None:
            log.warning("serial_lost", device=self.path, reason=str(exc))
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.connection_lost(exc)
