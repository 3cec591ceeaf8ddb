"""A RESET flood from a hostile device on a real pty: the log stays readable.

A line per RESET (link_state and session_event) would write 48,000 lines/s: at most ``burst``
lines of a kind per interval are written and one ``log_rate_limited``
line per kind says how many were left out, when the interval ends (a loop timer). The clocks are
the real ones: a slow machine may spread the flood over a few intervals, and every assertion
holds for any number of them, while a flood written line by line fails them.
"""
from __future__ import annotations

import asyncio
import os
import select
import tty

import pytest
from structlog.testing import capture_logs

from firmware_bridge.connection import DeviceConnection
from firmware_bridge.framing import Frame, FrameKind, encode_frame
from firmware_bridge.session import SessionConfig

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("no_leaks")]
RESETS = 2_000
BURST, INTERVAL_S = 5, 1.0  # RateLimitedLog's defaults


def test_a_reset_flood_is_summarised_in_the_log_not_written_line_by_line() -> None:
    master, slave = os.openpty()
    tty.setraw(slave)
    path = os.ttyname(slave)

    async def main() -> None:
        conn = DeviceConnection(f"serial://{path}", None, None, SessionConfig(host_name="flood"))
        await conn.start()
        while conn.session is None:  # the port is open (opening it flushes what came before)
            await asyncio.sleep(0.01)
        flood = b"".join(encode_frame(Frame(FrameKind.RESET, payload=i.to_bytes(4, "big"))) for i in range(RESETS))
        loop = asyncio.get_running_loop()
        writing = loop.run_in_executor(None, _write_all, master, flood)  # the hostile device: a new nonce each time

        def peer_resets() -> int:
            return conn.session.link.stats.peer_resets if conn.session else 0
        while peer_resets() < RESETS:
            await asyncio.sleep(0.01)
            _drain(master)
        await writing
        # the last interval's summary is at most an interval away; bounded, so a missing one fails
        # the assertions below, not the test's timeout
        deadline = loop.time() + INTERVAL_S + 5.0
        while loop.time() < deadline and not any(
                e["event"] == "log_rate_limited" and e["key"] == "peer_reset" for e in logs):
            await asyncio.sleep(0.05)
            _drain(master)
        await conn.close()

    with capture_logs() as logs:
        try:
            asyncio.run(main())
        finally:
            os.close(master)
            os.close(slave)
    peer = [e for e in logs if e["event"] == "link_state" and e.get("link_event") == "peer_reset"]
    summaries = [e for e in logs if e["event"] == "log_rate_limited" and e["key"] == "peer_reset"]
    # On a loaded machine the flood can outlast one interval: then a few windows, each of BURST
    # lines and one summary. Every RESET is either a line or counted in a summary, and the lines
    # stay a handful per window.
    assert 1 <= len(summaries) <= 10, f"{len(summaries)} summaries for one flood"
    assert all(s["written"] == BURST for s in summaries)
    assert len(peer) + sum(s["suppressed"] for s in summaries) == RESETS
    assert len(peer) <= BURST * (len(summaries) + 1), f"{len(peer)} link_state lines for {RESETS} RESETs"
    assert len(logs) < 100, f"{len(logs)} log lines for {RESETS} RESETs"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view[:4096]):]


def _drain(fd: int) -> None:
    """Read what the host wrote (its RESET_ACKs and HELLOs), so the pty never fills."""
    while select.select([fd], [], [], 0)[0]:
        if not os.read(fd, 65536):
            return
