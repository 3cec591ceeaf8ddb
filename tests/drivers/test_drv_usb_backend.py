"""The simulated backend behaves as libusb's does, seen through pyusb's core."""
import errno

import pytest
import usb.core
import usb.util

from simulators.usb_backend import EP_IN, EP_OUT, SimUsbBackend

from tests.drivers.drv_helpers import EchoSide

pytestmark = pytest.mark.timeout(20)


@pytest.fixture
def sim():
    backend = SimUsbBackend()
    side = EchoSide()
    side.device = backend.add_device(side, vid=0x1209, pid=0xC4D0, serial="SHOE0001",
                                     product="cardd shoe")
    found = usb.core.find(idVendor=0x1209, idProduct=0xC4D0, backend=backend)
    yield backend, side.device, found
    usb.util.dispose_resources(found)


def test_descriptors_and_strings(sim):
    _, device, found = sim
    assert (found.idVendor, found.idProduct) == (0x1209, 0xC4D0)
    assert found.serial_number == "SHOE0001" and found.product == "cardd shoe"
    assert (found.bus, found.address) == (1, device.address)
    intf = found[0][(0, 0)]
    addresses = sorted(ep.bEndpointAddress for ep in intf)
    assert addresses == [EP_OUT, EP_IN]
    assert all(usb.util.endpoint_type(ep.bmAttributes) == usb.util.ENDPOINT_TYPE_BULK for ep in intf)


def test_read_times_out_like_libusb(sim):
    _, _, found = sim
    found.set_configuration()
    with pytest.raises(usb.core.USBTimeoutError) as info:
        found.read(EP_IN, 64, 20)
    assert info.value.errno == errno.ETIMEDOUT and info.value.backend_error_code == -7


def test_read_returns_queued_bytes_up_to_the_buffer(sim):
    _, device, found = sim
    found.set_configuration()
    device.send_to_host(b"abcdef")
    assert bytes(found.read(EP_IN, 4, 100)) == b"abcd"
    assert bytes(found.read(EP_IN, 64, 100)) == b"ef"


def test_unplug_fails_handles_with_enodev_and_hides_the_device(sim):
    backend, device, found = sim
    found.set_configuration()
    device.unplug()
    with pytest.raises(usb.core.USBError) as info:
        found.read(EP_IN, 64, 1000)
    assert info.value.errno == errno.ENODEV
    with pytest.raises(usb.core.USBError) as info:
        found.write(EP_OUT, b"x")
    assert info.value.errno == errno.ENODEV
    assert usb.core.find(idVendor=0x1209, backend=backend) is None


def test_replug_is_a_fresh_device_old_handles_stay_dead(sim):
    backend, device, found = sim
    found.set_configuration()
    old_address = device.address
    device.unplug()
    device.replug()
    again = usb.core.find(idVendor=0x1209, backend=backend)
    assert again.address != old_address
    again.set_configuration()
    again.write(EP_OUT, b"hi")
    assert bytes(again.read(EP_IN, 64, 100)) == b"HI"
    with pytest.raises(usb.core.USBError) as info:
        found.read(EP_IN, 64, 100)
    assert info.value.errno == errno.ENODEV
    usb.util.dispose_resources(again)


def test_kernel_driver_must_be_detached_before_claiming():
    backend = SimUsbBackend()
    backend.add_device(EchoSide(), vid=0x1209, pid=0xC4D0, serial="S", kernel_driver=True)
    found = usb.core.find(idVendor=0x1209, backend=backend)
    assert found.is_kernel_driver_active(0)
    with pytest.raises(usb.core.USBError) as info:
        usb.util.claim_interface(found, 0)
    assert info.value.errno == errno.EBUSY
    found.detach_kernel_driver(0)
    usb.util.claim_interface(found, 0)
    usb.util.dispose_resources(found)


def test_unknown_requests_stall(sim):
    _, _, found = sim
    with pytest.raises(usb.core.USBError) as info:
        found.ctrl_transfer(0x40, 0x01, 0, 0, b"")  # a vendor request the device lacks
    assert info.value.errno == errno.EPIPE
