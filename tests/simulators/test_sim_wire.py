"""Each byte-level fault switch has the documented effect on what reaches the transport."""
from __future__ import annotations

import asyncio

import pytest

from simulators.faults import Faults
from drivers import make_transport
from drivers.memory import MemoryTransport, listen
from simulators.wire import FaultyWire, memory_wires

from tests.support.poll import until

DATA = bytes(range(1, 256)) * 40  # 10,200 bytes


def run_wire(faults: Faults, body) -> None:
    async def main():
        writes: list[bytes] = []
        wire = FaultyWire(lambda: faults, writes.append, asyncio.get_running_loop())
        try:
            await body(wire, writes)
        finally:
            wire.close()
    asyncio.run(main())


def test_clean_wire_passes_bytes_in_one_write():
    async def body(wire, writes):
        wire.to_host(DATA)
        assert writes == [DATA] and wire.from_host(DATA) == DATA
    run_wire(Faults(), body)


def test_bit_flips_at_rate_p_change_one_bit_per_damaged_byte():
    async def body(wire, writes):
        wire.to_host(DATA)
        [out] = writes
        diffs = [a ^ b for a, b in zip(out, DATA) if a != b]
        assert all(bin(d).count("1") == 1 for d in diffs)
        assert len(diffs) == wire.stats.flipped and 50 <= len(diffs) <= 160  # p=0.01 of 10,200
        back = wire.from_host(DATA)
        assert back != DATA and len(back) == len(DATA)  # both directions
    run_wire(Faults(bit_flip_rate=0.01, seed=3), body)


def test_drops_lose_bytes_both_ways():
    async def body(wire, writes):
        wire.to_host(DATA)
        lost = len(DATA) - len(writes[0])
        assert lost == wire.stats.dropped and 150 <= lost <= 260  # p=0.02
        assert len(wire.from_host(DATA)) < len(DATA)
    run_wire(Faults(drop_rate=0.02, seed=5), body)


def test_same_seed_same_damage():
    outs = []

    async def body(wire, writes):
        wire.to_host(DATA)
        outs.append(writes[0])
    run_wire(Faults(bit_flip_rate=0.05, seed=9), body)
    run_wire(Faults(bit_flip_rate=0.05, seed=9), body)
    assert outs[0] == outs[1]


def test_byte_at_a_time_writes_each_byte_alone():
    async def body(wire, writes):
        wire.to_host(b"\x00abc\x00")
        wire.to_host(b"de")
        await until(lambda: len(writes) >= 7)
        assert writes == [b"\x00", b"a", b"b", b"c", b"\x00", b"d", b"e"]
    run_wire(Faults(byte_at_a_time=True), body)


def test_ftdi_batching_gathers_writes_into_one_per_period():
    async def body(wire, writes):
        for chunk in (b"ab", b"cd", b"ef"):
            wire.to_host(chunk)
        assert writes == []  # held by the latency timer
        await until(lambda: writes)
        assert writes == [b"abcdef"]  # the first write out is the whole batch
    run_wire(Faults(ftdi_batching_ms=16), body)


def test_slow_acks_hold_device_output_in_order():
    async def body(wire, writes):
        wire.to_host(b"ack1")
        wire.to_host(b"ack2")
        await asyncio.sleep(0)
        assert writes == []
        await until(lambda: len(writes) >= 2)
        assert writes == [b"ack1", b"ack2"]
    run_wire(Faults(slow_ack_ms=20), body)


@pytest.mark.parametrize("spec", ["bit_flip_rate=2", "drop_rate=-0.1", "byte_at_a_time=maybe", "slow_ack_ms"])
def test_bad_switch_values_are_refused_by_name(spec):
    from simulators.faults import FaultSpecError

    with pytest.raises(FaultSpecError, match=spec.split("=")[0]):
        Faults.parse(spec)



def test_the_fault_switches_impair_a_mem_line_both_ways():
    """memory_wires puts the FaultyWire into drivers' in-memory loopback (mem://)."""
    faults = Faults(bit_flip_rate=0.01, seed=7, ftdi_batching_ms=5)

    async def main():
        from_host, to_host = [], []

        class Device:
            def bytes_received(self, data):
                from_host.append(data)

            def connection_lost(self, exc):
                pass

        class Host(Device):
            def bytes_received(self, data):
                to_host.append(data)

        ends: list[MemoryTransport] = []

        def accept(end: MemoryTransport) -> None:
            ends.append(end)
            end.attach(Device())

        wire_to_host, wire_to_device = memory_wires(lambda: faults)
        line = listen("faulty", accept, to_host=wire_to_host, to_device=wire_to_device)
        port = make_transport("mem://faulty")
        await port.open(Host())
        port.write(DATA)
        for _ in range(3):
            ends[0].write(DATA[:100])  # three writes, gathered into one batch
        await until(lambda: bool(to_host), timeout=5)
        line.close()
        [got_by_device] = from_host
        assert len(got_by_device) == len(DATA) and got_by_device != DATA  # bits flipped towards the device
        assert len(to_host) == 1 and len(to_host[0]) == 300  # one FTDI-style batch towards the host

    asyncio.run(main())
