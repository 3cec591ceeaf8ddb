import gc
import os
import threading

import pytest

from drivers.known_devices import by_role
from simulators.usb_backend import SimUsbBackend
from drv_helpers import EchoSide, PtyDevice


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.fixture(autouse=True)
def no_leaks():
    """Every drivers test must leave no thread, fd or open port behind."""
    gc.collect()
    threads, fds = set(threading.enumerate()), _fds()
    yield
    gc.collect()
    leaked_threads = [t.name for t in set(threading.enumerate()) - threads]
    assert not leaked_threads, f"leaked threads: {leaked_threads}"
    assert _fds() <= fds, f"leaked fds: {[os.readlink(f'/proc/self/fd/{f}') for f in _fds() - fds if os.path.exists(f'/proc/self/fd/{f}')]}"


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
