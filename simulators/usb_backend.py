"""A pyusb backend whose USB devices are simulated, so host code runs through pyusb's core
(descriptors, claiming, bulk transfers and libusb's errors as libusb's backend gives them).
Binding a device side, and the one configuration each device has: docs/simulators.md, "How an
endpoint runs a device"."""
from __future__ import annotations

import array
import errno
import itertools
import threading
import time
from types import SimpleNamespace as _Descriptor  # pyusb reads descriptor fields as attributes
from dataclasses import dataclass, field
from typing import Iterator, Protocol

import usb.backend
from usb.core import USBError, USBTimeoutError

EP_IN = 0x81
EP_OUT = 0x01
MAX_PACKET = 64
_LANGID_EN_US = 0x0409
_STRING_INDEX = {"manufacturer": 1, "product": 2, "serial": 3}


class DeviceSide(Protocol):
    def host_wrote(self, data: bytes) -> None: ...


def _error(code: int) -> USBError:
    """The USBError libusb's backend raises for a LIBUSB_ERROR_* code."""
    text = {-1: "Input/output error", -2: "Invalid parameter",
            -4: "No such device (it may have been disconnected)", -5: "Entity not found",
            -6: "Resource busy", -9: "Pipe error"}[code]
    number = {-1: errno.EIO, -2: errno.EINVAL, -4: errno.ENODEV, -5: errno.ENOENT,
              -6: errno.EBUSY, -9: errno.EPIPE}[code]
    return USBError(text, code, number)


def _timeout() -> USBTimeoutError:
    return USBTimeoutError("Operation timed out", -7, errno.ETIMEDOUT)


@dataclass
class _Handle:
    device: "SimUsbDevice"
    generation: int  # a handle only works for the plug-in it was opened on
    claimed: set[int] = field(default_factory=set)
    closed: bool = False


class SimUsbDevice:
    """One simulated device. Thread-safe: the host's reader/writer threads and the device
    side may call in concurrently."""

    def __init__(self, side: DeviceSide, *, vid: int, pid: int, serial: str, bus: int,
                 address: int, manufacturer: str, product: str, kernel_driver: bool) -> None:
        self.side = side
        self.vid, self.pid, self.serial = vid, pid, serial
        self.bus, self.address = bus, address
        self.strings = {1: manufacturer, 2: product, 3: serial}
        self.kernel_driver_attached = kernel_driver
        self.attached = True
        self.generation = 0
        self.configuration = 0
        self._to_host = bytearray()
        #: a slow OUT endpoint (a device that NAKs most OUT tokens): each packet of a bulk
        #: write takes this long; a write that does not fit its timeout ends in ETIMEDOUT
        #: after the packets that fit went through, as libusb reports it
        self.out_packet_delay_s = 0.0
        self._claimed_by: _Handle | None = None
        self._cond = threading.Condition()

    # --- device side -------------------------------------------------------------------
    def send_to_host(self, data: bytes) -> None:
        """Queue bytes for the host's next bulk IN reads (dropped while unplugged)."""
        with self._cond:
            if self.attached:
                self._to_host += data
                self._cond.notify_all()

    def unplug(self) -> None:
        """The cable is pulled: every open handle now fails with ENODEV, blocked reads wake."""
        with self._cond:
            self.attached = False
            self._to_host.clear()
            self._claimed_by = None
            self._cond.notify_all()

    def replug(self, address: int | None = None) -> None:
        """Plugged in again: a fresh device (new address), unconfigured, empty buffers."""
        with self._cond:
            self.generation += 1
            self.attached = True
            self.configuration = 0
            self.address = address if address is not None else self.address + 1
            self._cond.notify_all()

    # --- host side (called by the backend) ---------------------------------------------
    def _check(self, handle: _Handle) -> None:
        if handle.closed or not self.attached or handle.generation != self.generation:
            raise _error(-4)

    def _claim(self, handle: _Handle, intf: int) -> None:
        with self._cond:
            self._check(handle)
            if intf != 0:
                raise _error(-5)
            if self.kernel_driver_attached or (self._claimed_by not in (None, handle)):
                raise _error(-6)
            self._claimed_by = handle
            handle.claimed.add(intf)

    def _release(self, handle: _Handle, intf: int) -> None:
        with self._cond:
            handle.claimed.discard(intf)
            if self._claimed_by is handle:
                self._claimed_by = None
            self._check(handle)

    def _forget(self, handle: _Handle) -> None:
        with self._cond:
            if self._claimed_by is handle:
                self._claimed_by = None
            handle.claimed.clear()
            handle.closed = True

    def _read(self, handle: _Handle, buff: array.array, timeout_ms: int) -> int:
        # libusb: timeout 0 means wait for ever
        deadline = None if timeout_ms == 0 else time.monotonic() + timeout_ms / 1000
        with self._cond:
            while True:
                self._check(handle)
                if self._to_host:
                    n = min(len(buff), len(self._to_host))
                    buff[:n] = array.array("B", self._to_host[:n])
                    del self._to_host[:n]
                    return n
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise _timeout()
                self._cond.wait(remaining)

    def _write(self, handle: _Handle, data: array.array, timeout_ms: int) -> int:
        with self._cond:
            self._check(handle)
            if 0 not in handle.claimed and self._claimed_by is not handle:
                raise _error(-6)
            taken = self._slow_out(handle, len(data), timeout_ms)
        if taken:
            self.side.host_wrote(data[:taken].tobytes())  # outside the lock: the side may send_to_host
        if taken < len(data):
            raise _timeout()
        return taken

    def _slow_out(self, handle: _Handle, size: int, timeout_ms: int) -> int:
        """How many of ``size`` bytes the OUT endpoint takes within the timeout (call locked)."""
        delay = self.out_packet_delay_s
        if delay <= 0:
            return size
        packets = -(-size // MAX_PACKET)
        budget = packets * delay if timeout_ms == 0 else min(packets * delay, timeout_ms / 1000)
        deadline = time.monotonic() + budget
        while (remaining := deadline - time.monotonic()) > 0:
            self._cond.wait(remaining)  # woken early by an unplug
            self._check(handle)
        return min(size, int(budget / delay) * MAX_PACKET)

    def _string(self, index: int, langid: int) -> bytes:
        if index == 0:
            body = _LANGID_EN_US.to_bytes(2, "little")
        elif index in self.strings and langid == _LANGID_EN_US:
            body = self.strings[index].encode("utf-16-le")
        else:
            raise _error(-9)  # a real device stalls on an unknown string
        return bytes([2 + len(body), 3]) + body


class SimUsbBackend(usb.backend.IBackend):
    """pyusb backend over simulated devices; see the module docstring for binding."""

    def __init__(self) -> None:
        super().__init__()
        self._devices: list[SimUsbDevice] = []
        self._addresses = itertools.count(2)
        self._lock = threading.Lock()

    def add_device(self, side: DeviceSide, *, vid: int, pid: int, serial: str, bus: int = 1,
                   manufacturer: str = "cardd", product: str = "cardd simulated device",
                   kernel_driver: bool = False) -> SimUsbDevice:
        """Plug a simulated device in. ``kernel_driver`` starts it bound to a kernel driver
        (claiming fails with EBUSY until the host detaches it, as on Linux)."""
        with self._lock:
            device = SimUsbDevice(side, vid=vid, pid=pid, serial=serial, bus=bus,
                                  address=next(self._addresses), manufacturer=manufacturer,
                                  product=product, kernel_driver=kernel_driver)
            self._devices.append(device)
            return device

    def remove_device(self, device: SimUsbDevice) -> None:
        device.unplug()
        with self._lock:
            self._devices.remove(device)

    # --- usb.backend.IBackend ----------------------------------------------------------
    def enumerate_devices(self) -> Iterator[SimUsbDevice]:
        with self._lock:
            present = [d for d in self._devices if d.attached]
        return iter(present)

    def get_parent(self, dev: SimUsbDevice) -> None:
        return None

    def get_device_descriptor(self, dev: SimUsbDevice) -> _Descriptor:
        return _Descriptor(
            bLength=18, bDescriptorType=1, bcdUSB=0x0200, bDeviceClass=0, bDeviceSubClass=0,
            bDeviceProtocol=0, bMaxPacketSize0=MAX_PACKET, idVendor=dev.vid, idProduct=dev.pid,
            bcdDevice=0x0100, iManufacturer=1, iProduct=2, iSerialNumber=3,
            bNumConfigurations=1, address=dev.address, bus=dev.bus, port_number=1,
            port_numbers=(1,), speed=2)  # 2 = LIBUSB_SPEED_FULL

    def get_configuration_descriptor(self, dev: SimUsbDevice, config: int) -> _Descriptor:
        if config != 0:
            raise IndexError("configuration index out of range")
        return _Descriptor(
            bLength=9, bDescriptorType=2, wTotalLength=32, bNumInterfaces=1,
            bConfigurationValue=1, iConfiguration=0, bmAttributes=0x80, bMaxPower=50,
            extra_descriptors=[])

    def get_interface_descriptor(self, dev: SimUsbDevice, intf: int, alt: int,
                                 config: int) -> _Descriptor:
        if (intf, alt, config) != (0, 0, 0):
            raise IndexError("interface index out of range")
        return _Descriptor(
            bLength=9, bDescriptorType=4, bInterfaceNumber=0, bAlternateSetting=0,
            bNumEndpoints=2, bInterfaceClass=0xFF, bInterfaceSubClass=0, bInterfaceProtocol=0,
            iInterface=0, extra_descriptors=[])

    def get_endpoint_descriptor(self, dev: SimUsbDevice, ep: int, intf: int, alt: int,
                                config: int) -> _Descriptor:
        if (intf, alt, config) != (0, 0, 0) or ep not in (0, 1):
            raise IndexError("endpoint index out of range")
        return _Descriptor(
            bLength=7, bDescriptorType=5, bEndpointAddress=(EP_IN, EP_OUT)[ep],
            bmAttributes=0x02, wMaxPacketSize=MAX_PACKET, bInterval=0, bRefresh=0,
            bSynchAddress=0, extra_descriptors=[])

    def open_device(self, dev: SimUsbDevice) -> _Handle:
        if not dev.attached:
            raise _error(-4)
        return _Handle(dev, dev.generation)

    def close_device(self, dev_handle: _Handle) -> None:
        dev_handle.device._forget(dev_handle)

    def set_configuration(self, dev_handle: _Handle, config_value: int) -> None:
        dev_handle.device._check(dev_handle)
        if config_value not in (0, 1):
            raise _error(-5)
        dev_handle.device.configuration = config_value

    def get_configuration(self, dev_handle: _Handle) -> int:
        dev_handle.device._check(dev_handle)
        return dev_handle.device.configuration

    def set_interface_altsetting(self, dev_handle: _Handle, intf: int, altsetting: int) -> None:
        dev_handle.device._check(dev_handle)
        if (intf, altsetting) != (0, 0):
            raise _error(-5)

    def claim_interface(self, dev_handle: _Handle, intf: int) -> None:
        dev_handle.device._claim(dev_handle, intf)

    def release_interface(self, dev_handle: _Handle, intf: int) -> None:
        dev_handle.device._release(dev_handle, intf)

    def bulk_write(self, dev_handle: _Handle, ep: int, intf: int, data: array.array,
                   timeout: int) -> int:
        if ep != EP_OUT:
            raise _error(-2)
        return dev_handle.device._write(dev_handle, data, timeout)

    def bulk_read(self, dev_handle: _Handle, ep: int, intf: int, buff: array.array,
                  timeout: int) -> int:
        if ep != EP_IN:
            raise _error(-2)
        return dev_handle.device._read(dev_handle, buff, timeout)

    def ctrl_transfer(self, dev_handle: _Handle, bmRequestType: int, bRequest: int, wValue: int,
                      wIndex: int, data: array.array, timeout: int) -> int:
        device = dev_handle.device
        device._check(dev_handle)
        # only GET_DESCRIPTOR(string) is answered; a real device stalls on what it lacks
        if bmRequestType != 0x80 or bRequest != 0x06 or wValue >> 8 != 3:
            raise _error(-9)
        payload = device._string(wValue & 0xFF, wIndex)[: len(data)]
        data[: len(payload)] = array.array("B", payload)
        return len(payload)

    def clear_halt(self, dev_handle: _Handle, ep: int) -> None:
        dev_handle.device._check(dev_handle)

    def reset_device(self, dev_handle: _Handle) -> None:
        dev_handle.device._check(dev_handle)
        dev_handle.device.configuration = 0

    def is_kernel_driver_active(self, dev_handle: _Handle, intf: int) -> bool:
        dev_handle.device._check(dev_handle)
        return dev_handle.device.kernel_driver_attached

    def detach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:
        dev_handle.device._check(dev_handle)
        if not dev_handle.device.kernel_driver_attached:
            raise _error(-5)  # libusb: LIBUSB_ERROR_NOT_FOUND when no driver is bound
        dev_handle.device.kernel_driver_attached = False

    def attach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:
        dev_handle.device._check(dev_handle)
        dev_handle.device.kernel_driver_attached = True
