import pytest
import usb.backend.libusb0
import usb.backend.libusb1
import usb.backend.openusb
import usb.libloader

from drivers.known_devices import by_role
from simulators.usb_backend import SimUsbBackend

from tests.drivers.drv_helpers import EchoSide, PtyDevice


@pytest.fixture(autouse=True)
def _no_leaks(no_leaks):
    """Every drivers test must leave no thread, fd or open port behind (tests/conftest.py checks)."""
    yield


@pytest.fixture
def pty_device(tmp_path):
    device = PtyDevice(str(tmp_path / "shuffler-A1"))
    yield device
    device.unplug()


@pytest.fixture
def usb_shoe():
    """A simulated shoe on a SimUsbBackend, bound to an echoing device side, bound to a kernel
    driver at first (as Linux may do) so the driver's detach path runs."""
    backend = SimUsbBackend()
    side = EchoSide()
    shoe = by_role("shoe")
    side.device = backend.add_device(side, vid=shoe.vid, pid=shoe.pid, serial="SHOE0001",
                                     kernel_driver=True)
    return backend, side.device, side


@pytest.fixture
def without_libusb(monkeypatch):
    """A machine without libusb: pyusb's lookup of the system library (the boundary) finds
    nothing, and no backend it loaded earlier is cached, so pyusb's own core raises
    NoBackendError whether or not this machine has libusb installed."""
    monkeypatch.setattr(usb.libloader, "locate_library", lambda *args, **kwargs: None)
    monkeypatch.setattr(usb.backend.libusb1, "_lib_object", None)
    monkeypatch.setattr(usb.backend.libusb1, "_lib", None)
    monkeypatch.setattr(usb.backend.libusb0, "_lib", None)
    monkeypatch.setattr(usb.backend.openusb, "_lib", None)
