"""A slow messages() consumer over a real pty: the queue is bounded, the overflow counted,
and the consumer cannot miss it (the iterator ends with MessagesOverflow after what it held).

Failed before: the queue was unbounded (a slow consumer grew memory without limit) and nothing was counted.
"""
from __future__ import annotations

import asyncio

import pytest

from core.cards import shoe_composition
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.errors import MessagesOverflow
from firmware_bridge.messages import CardRead, ShoeLoaded, Status
from firmware_bridge.session import SessionConfig
from simulators.rig import SimulatedTable

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("no_leaks")]
LIMIT = 40


def test_a_slow_consumer_gets_what_fitted_then_one_overflow_error_and_the_drop_is_counted() -> None:
    async def main(sim: SimulatedTable) -> None:
        received: list = []
        conn = DeviceConnection(sim.shoe.url, received.append, None, SessionConfig(host_name="slow",
                                                                                   messages_limit=LIMIT))
        try:
            await conn.open()
            while not any(isinstance(m, Status) for m in received):  # the host asks for it after the handshake
                await asyncio.sleep(0.01)
            slow, fast = conn.messages(), conn.messages()
            first_slow = asyncio.ensure_future(anext(slow))  # both iterators are listening now
            first_fast = asyncio.ensure_future(anext(fast))
            await asyncio.sleep(0)
            stack = [c for c, n in shoe_composition(2).items() for _ in range(n)]  # 104 cards
            await asyncio.to_thread(sim.shoe.call, sim.shoe.device.load, stack)
            assert isinstance(await asyncio.wait_for(first_slow, 10), ShoeLoaded)
            assert isinstance(await asyncio.wait_for(first_fast, 10), ShoeLoaded)
            fast_reads = []

            async def keep_up() -> None:
                async for msg in fast:
                    if isinstance(msg, CardRead):
                        fast_reads.append(msg)
                    if len(fast_reads) == len(stack):
                        return
            keeping = asyncio.ensure_future(keep_up())
            await asyncio.to_thread(sim.shoe.call, sim.shoe.device.deal, len(stack))
            while sum(isinstance(m, CardRead) for m in received) < len(stack):
                await asyncio.sleep(0.01)
            await asyncio.wait_for(keeping, 10)  # a consumer that keeps up loses nothing
            assert [m.index for m in fast_reads] == list(range(1, len(stack) + 1))
            got = []
            with pytest.raises(MessagesOverflow, match=f"fell {LIMIT} messages behind"):
                async for msg in slow:  # the slow one finally reads: what fitted, then the error
                    got.append(msg)
            reads = [m.index for m in got if isinstance(m, CardRead)]  # a heartbeat may sit among them
            assert len(got) == LIMIT and reads == list(range(1, len(reads) + 1)) and len(reads) >= LIMIT - 2
            stats = conn.stats
            assert stats.overflows == 1 and stats.messages_dropped >= len(stack) - LIMIT
        finally:
            await conn.close()

    with SimulatedTable.over_ptys(shuffle_time_s=0) as sim:
        asyncio.run(main(sim))
