"""The endpoint's flush (what a device awaits before a reboot or an unplug): it ends when the
link has acknowledged every message sent, events or not, without waiting for the host to speak."""
from __future__ import annotations

import asyncio

import pytest

from firmware_bridge.messages import Heartbeat
from firmware_bridge.session import SessionConfig
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe

from tests.e2e.e2e_rig import open_host

pytestmark = pytest.mark.timeout(60)
#: a host that says nothing for a minute after its handshake (no heartbeat, no request)
QUIET_HOST = SessionConfig(heartbeat_interval=60.0, stale_after=120.0)


def test_flush_ends_on_the_link_ack_of_a_message_that_is_not_an_event() -> None:
    """Before, only an event's ACK (or a payload from the host) woke the flush: a Heartbeat sent
    to a quiet host kept it waiting for the host's next heartbeat (a second by default; a minute
    here, so the old flush outlived the 10 s bound)."""
    async def main(endpoint: PtyEndpoint) -> None:
        host = await open_host(endpoint.url, QUIET_HOST)
        try:
            def send_and_flush() -> object:
                endpoint.device.emit(Heartbeat(42))  # not an event: no event store, no numbering
                return endpoint.device.flush()
            await asyncio.to_thread(endpoint.call, send_and_flush, timeout=10.0)
            await host.until(lambda: Heartbeat(42) in host.of(Heartbeat))
        finally:
            await host.conn.close()

    with PtyEndpoint(SimulatedShoe(heartbeat_s=0)) as endpoint:
        asyncio.run(main(endpoint))
