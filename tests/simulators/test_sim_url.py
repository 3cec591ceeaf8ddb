"""sim:// URLs: a bad one is one BadURL naming the URL and the problem, before anything starts."""
import pytest

import simulators  # noqa: F401 - registers sim://
from drivers import BadURL, make_transport, parse_url
from simulators.shoe import SimulatedShoe
from simulators.sim_url import make_device, protocol2_for, running


@pytest.mark.parametrize("url, why", [
    ("sim://dealer", "no simulated device 'dealer'; simulated devices: shuffler, shoe"),
    ("sim://shoe?pace_s=-1", "pace_s=-1: expected a number of seconds, 0 or more"),
    ("sim://shoe?pace_s=nan", "pace_s=nan: expected a number of seconds, 0 or more"),
    ("sim://shuffler?shuffle_time_s=soon", "shuffle_time_s=soon: expected a number of seconds, 0 or more"),
    ("sim://shuffler?pace_s=1", "unknown parameter 'pace_s' for sim://shuffler (allowed: faults, serial, shuffle_time_s, heartbeat_s, protocol, host_key)"),
    ("sim://shoe?protocol=3.0", "protocol=3.0: expected 1.1 or 2.0"),
    ("sim://shoe?host_key=" + "ab" * 32, "host_key is the enrolled host of a protocol 2.0 device: give protocol=2.0 too"),
    ("sim://shoe?protocol=2.0&host_key=abc", "host_key=abc...: expected 64 hex digits (an Ed25519 public key)"),
    ("sim://shoe?faults=jamm", "no fault switch 'jamm'"),
    ("sim://shoe?faults=drop_rate=3", "fault switch drop_rate=3: expected a probability from 0 to 1"),
    ("sim://shoe?faults=jam=2", "fault switch jam is for the shuffler only: a shoe does not shuffle"),
    ("sim://shuffler?faults=unreadable_at=3", "fault switch unreadable_at is for the shoe only"),
    # an IDENT carries the serial in a u8-length text: longer, and every HELLO would fail inside
    ("sim://shoe?serial=" + "x" * 256, "serial 'xxxxxxxxxxxxxxxx...': expected 1 to 255 UTF-8 bytes"),
    ("sim://shuffler?serial=", "serial '': expected 1 to 255 UTF-8 bytes"),
])
def test_bad_sim_urls_are_one_clear_error(url, why):
    before = running()
    with pytest.raises(BadURL) as error:
        make_transport(url)
    assert str(error.value).startswith(url + ": ") and why in str(error.value)
    assert running() == before  # nothing was started


def test_options_reach_the_device():
    url = parse_url("sim://shoe?serial=SHOE0042&pace_s=0.5&faults=face_up_at=7+unreadable_at=9")
    shoe = make_device(url.name or "", url.params, url.text)  # as endpoint_for passes it
    assert isinstance(shoe, SimulatedShoe)
    assert (shoe.serial, shoe.pace_s, shoe.faults.face_up_at, shoe.faults.unreadable_at) == ("SHOE0042", 0.5, 7, 9)


def test_a_protocol_2_0_url_names_the_enrolled_host():
    key = bytes(range(32))
    url = parse_url(f"sim://shoe?protocol=2.0&host_key={key.hex()}")
    options = protocol2_for(url.params, url.text)
    assert options is not None and options.enrolled_host_key == key
    assert protocol2_for(parse_url("sim://shoe").params, "sim://shoe") is None
