"""Soak: a long exchange over a badly impaired wire, both directions at once.

Reduced by default; ``CARDD_FULL=1 .venv/bin/python -m pytest tests/firmware_bridge -m soak``
runs the full size (100,000 payloads each way)."""
from __future__ import annotations

import asyncio
from functools import partial
import os

import pytest

from firmware_bridge.link import LinkConfig, LinkState

from tests.firmware_bridge.fb_wire import Wire, make_pair
from tests.support.aio import run
from tests.support.poll import until

FULL = os.environ.get("CARDD_FULL") == "1"
PAYLOADS = 100_000 if FULL else 3_000


@pytest.mark.soak
@pytest.mark.timeout(3600 if FULL else 60)
def test_soak_exactly_once_in_order_under_heavy_impairment():
    async def main():
        impaired = partial(Wire, drop=0.08, corrupt=0.08, duplicate=0.08, reorder=0.05)
        cfg = LinkConfig(initial_rto=0.02, min_rto=0.002, max_rto=0.1, max_retries=30)
        a, b = make_pair(impaired(seed=7), impaired(seed=8), cfg)
        a.link.start()
        await until(lambda: a.link.state is LinkState.UP and b.link.state is LinkState.UP)
        to_b = [i.to_bytes(4, "big") * (1 + i % 9) for i in range(PAYLOADS)]
        to_a = [(PAYLOADS - i).to_bytes(4, "big") for i in range(PAYLOADS)]
        for start in range(0, PAYLOADS, 1000):  # keep within the send queue limit
            await asyncio.gather(*(a.link.send(p) for p in to_b[start : start + 1000]),
                                 *(b.link.send(p) for p in to_a[start : start + 1000]))
        await until(lambda: len(a.delivered) == PAYLOADS and len(b.delivered) == PAYLOADS, timeout=60)
        assert b.delivered == to_b and a.delivered == to_a
        assert a.link.state is LinkState.UP and b.link.state is LinkState.UP
        assert a.link.stats.framing.errors > 0 and a.link.stats.duplicates_dropped + b.link.stats.duplicates_dropped > 0
        a.link.close()
        b.link.close()

    run(main())
