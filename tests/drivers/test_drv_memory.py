"""mem://NAME, the in-memory loopback: a line's connections, bytes in order on a later loop turn,
hang-ups both ways, a wire the caller injects, and one clear error for each misuse."""
import asyncio

import pytest

from drivers import BadURL, DeviceNotFound, PortClosed, LinkLost, make_transport, parse_url
from drivers.memory import MemoryTransport, listen, memory_pair
from drivers.reconnect import Backoff, PortEvent, PortEventKind, ReconnectingPort

from tests.support.poll import until
from tests.support.recorders import ListenerRecorder


class Side:
    """A device side: records what it gets, on the end the line handed it."""

    def __init__(self):
        self.ends, self.rec = [], ListenerRecorder()

    def accept(self, end):
        self.ends.append(end)
        end.attach(self.rec)


async def turns(n=5):
    for _ in range(n):
        await asyncio.sleep(0)


async def connected(name):
    """A device side listening on mem://name and a host port opened to it."""
    side, host = Side(), ListenerRecorder()
    line = listen(name, side.accept)
    port = make_transport(f"mem://{name}")
    await port.open(host)
    return side, line, host, port


def test_mem_urls_parse_without_being_offered_in_error_messages():
    assert parse_url("mem://shoe").name == "shoe"
    assert isinstance(make_transport("mem://shoe"), MemoryTransport)
    assert "mem://" not in str(pytest.raises(BadURL, parse_url, "tcp://x").value)
    with pytest.raises(BadURL, match=r"^mem://shoe\?x=1: an in-memory port is mem://NAME, with no parameters"):
        make_transport("mem://shoe?x=1")


def test_bytes_cross_in_order_on_a_later_turn_and_both_ways():
    async def main():
        side, line, host, port = await connected("bench")
        port.write(b"one")
        port.write(b"two")
        assert side.rec.chunks == []  # never inside the writer's call
        await turns()
        assert side.rec.chunks == [b"one", b"two"]
        side.ends[0].write(b"back")
        await turns()
        assert host.chunks == [b"back"] and line.device_ends == side.ends
        line.close()

    asyncio.run(main())


def test_closing_either_end_hangs_up_the_other():
    async def main():
        side, line, host, port = await connected("plug")
        side.ends[0].close()  # unplugged from the device side
        await turns()
        assert len(host.lost) == 1 and isinstance(host.lost[0], LinkLost) and "hung up" in str(host.lost[0])
        assert not port.is_open
        with pytest.raises(PortClosed, match="^mem://plug: closed"):
            port.write(b"late")

        again = make_transport("mem://plug")  # a new connection reaches the same line
        await again.open(ListenerRecorder())
        again.close()
        await turns()
        assert side.rec.lost[-1] is not None and not side.ends[1].is_open and len(side.ends) == 2
        line.close()

    asyncio.run(main())


def test_nothing_listening_is_device_not_found():
    async def main():
        with pytest.raises(DeviceNotFound, match=r"^mem://nobody: nothing listens on mem://nobody"):
            await make_transport("mem://nobody").open(ListenerRecorder())

    asyncio.run(main())


def test_a_wire_the_caller_injects_carries_each_direction():
    async def main():
        def dropping_every_other(deliver):
            count = [0]

            def write(data):
                count[0] += 1
                if count[0] % 2:
                    deliver(data.upper())
            return write

        a, b = memory_pair(a_to_b=dropping_every_other)
        ra, rb = ListenerRecorder(), ListenerRecorder()
        await a.open(ra)
        await b.open(rb)
        for chunk in (b"x", b"y", b"z"):
            a.write(chunk)
        b.write(b"clean")
        await turns()
        assert rb.chunks == [b"X", b"Z"] and ra.chunks == [b"clean"]

    asyncio.run(main())


def test_a_reconnecting_port_reopens_a_mem_line_after_an_unplug():
    async def main():
        side = Side()
        events: list[PortEvent] = []
        line = listen("again", side.accept)
        port = ReconnectingPort("mem://again", ListenerRecorder(), events.append, backoff=Backoff(initial=0.001, cap=0.002))
        await port.start()
        await until(lambda: len(side.ends) >= 1)
        side.ends[0].close()
        await until(lambda: len(side.ends) >= 2)
        await port.close()
        kinds = [e.kind for e in events]
        assert kinds[:3] == [PortEventKind.CONNECTED, PortEventKind.DISCONNECTED, PortEventKind.RETRYING]
        line.close()

    asyncio.run(asyncio.wait_for(main(), 10))


def test_an_end_not_joined_cannot_be_attached():
    with pytest.raises(PortClosed, match="not joined"):
        MemoryTransport("mem://alone").attach(ListenerRecorder())
