"""Device URLs and the scheme registry."""
import asyncio

import pytest

from drivers import BadURL, make_transport, open_transport, parse_url, register_scheme, unregister_scheme
from drivers.serial_port import SerialTransport
from drivers.memory import MemoryTransport, listen
from drivers.urls import SerialSettings
from drivers.usb_bulk import UsbBulkTransport


def test_serial_url_with_settings():
    url = parse_url("serial:///dev/cardd/shuffler-A1?baud=9600&parity=e&stopbits=2")
    assert (url.scheme, url.path) == ("serial", "/dev/cardd/shuffler-A1")
    assert url.serial_settings == SerialSettings(baud=9600, parity="E", stopbits=2, bytesize=8)


def test_serial_url_defaults():
    assert parse_url("serial:///dev/ttyACM0").serial_settings == SerialSettings(115200, "N", 1, 8)
    settings = parse_url("serial:///dev/ttyS0?stopbits=1.5").serial_settings
    assert settings is not None and settings.stopbits == 1.5


def test_usb_url():
    url = parse_url("usb://1209:c4d0?serial=SHOE0001")
    assert (url.scheme, url.vid, url.pid, url.serial_number) == ("usb", 0x1209, 0xC4D0, "SHOE0001")
    assert parse_url("usb://1209:C4D0").serial_number is None


@pytest.mark.parametrize("name", ["shuffler", "shoe"])
def test_sim_url(name):
    url = parse_url(f"sim://{name}")
    assert (url.scheme, url.name, str(url)) == ("sim", name, f"sim://{name}")


@pytest.mark.parametrize("text, why", [
    ("/dev/ttyACM0", "no scheme"),
    ("serial://dev/ttyACM0", "absolute device path"),
    ("serial:///dev/ttyACM0?baud=fast", "baud='fast'"),
    ("serial:///dev/ttyACM0?baud=10", "baud='10'"),
    ("serial:///dev/ttyACM0?parity=X", "parity='X'"),
    ("serial:///dev/ttyACM0?stopbits=3", "stopbits='3'"),
    ("serial:///dev/ttyACM0?speed=9600", "unknown parameter 'speed'"),
    ("serial:///dev/ttyACM0?baud=9600&baud=19200", "given twice"),
    ("usb://c4d0", "not a hex VID:PID"),
    ("usb://1209:c4d0/extra", "not a hex VID:PID"),
    ("usb://1209:c4d0?serial=", "serial= is empty"),
    ("usb://1209:c4d0?sn=X", "unknown parameter 'sn'"),
    ("sim://Shoe!", "not a device name"),
    ("1sim://shoe", "unknown scheme '1sim'"),
    ("tcp://10.0.0.1:4000", "unknown scheme 'tcp'; accepted forms: "),
    ("loop://echo", "unknown scheme 'loop'"),  # parses only while registered (see below)
])
def test_bad_urls_get_one_error_with_the_accepted_forms(text, why):
    with pytest.raises(BadURL) as info:
        parse_url(text)
    message = str(info.value)
    assert text in message and why in message
    assert "serial:///dev/" in message and "usb://VID:PID" in message and "sim://" in message
    assert "not a device name" not in message or why == "not a device name"


def test_the_accepted_forms_are_one_short_line():
    message = str(pytest.raises(BadURL, parse_url, "tcp://10.0.0.1:4000").value)
    forms = message.split("; accepted forms: ")[1]
    assert forms.split(" | ") == ["serial:///dev/PATH[?baud=115200&parity=N&stopbits=1&bytesize=8]",
                                  "usb://VID:PID[?serial=SN]", "sim://shuffler|shoe"]
    assert message == f"tcp://10.0.0.1:4000: unknown scheme 'tcp'; accepted forms: {forms}" and len(forms) < 120


def test_the_factory_builds_the_driver_for_the_scheme():
    assert isinstance(make_transport("serial:///dev/ttyACM0"), SerialTransport)
    assert isinstance(make_transport("usb://1209:c4d0"), UsbBulkTransport)


def test_an_unregistered_scheme_is_one_clear_error():
    with pytest.raises(BadURL, match=r"^nosuch://thing: unknown scheme 'nosuch'; accepted forms: serial://"):
        make_transport("nosuch://thing")


class _Echo:
    """The device side of an in-memory line: sends back what it receives."""

    def __init__(self, end: MemoryTransport) -> None:
        self.end = end
        end.attach(self)

    def bytes_received(self, data):
        self.end.write(data)

    def connection_lost(self, exc):
        pass


def test_a_registered_scheme_opens_through_its_factory():
    received: list[bytes] = []

    class Listener:
        bytes_received = received.append

        def connection_lost(self, exc):
            pass

    async def main():
        line = listen("echo", _Echo)  # loop://echo reaches it: a MemoryTransport connects by name
        transport = await open_transport("loop://echo?depth=2", Listener())
        transport.write(b"ping")
        for _ in range(10):  # there and back: a few turns of the loop, never inside write()
            await asyncio.sleep(0)
        line.close()
        return transport

    register_scheme("loop", lambda url, **options: MemoryTransport(url), form="loop://NAME[?depth=N]")
    try:
        transport = asyncio.run(main())
        assert str(pytest.raises(BadURL, parse_url, "tcp://x").value).endswith(" | loop://NAME[?depth=N]")
    finally:
        unregister_scheme("loop")
    assert transport.url == "loop://echo?depth=2" and received == [b"ping"]
    with pytest.raises(BadURL, match="unknown scheme 'loop'"):
        parse_url("loop://echo")


@pytest.mark.parametrize("text, why", [
    ("usb://1209:c4d0]", "not a valid host part"),  # urllib alone says "Invalid IPv6 URL"
    ("serial://[tty]/dev/ttyS0", "not a valid host part"),
    ("sim://[shoe]", "not a valid host part"),
    # everything after '#' would be dropped silently: another device would be opened
    ("usb://1209:c4d0?serial=SHOE#2", r"'#'.*%23"),
    ("serial:///dev/cardd/shuffler#2", r"'#'.*%23"),
])
def test_brackets_and_fragments_are_refused_as_bad_urls_naming_the_url(text, why):
    with pytest.raises(BadURL, match=why) as info:
        parse_url(text)
    assert text in str(info.value)


def test_a_percent_encoded_hash_in_a_usb_serial_number_is_kept():
    assert parse_url("usb://1209:c4d0?serial=SHOE%232").serial_number == "SHOE#2"
