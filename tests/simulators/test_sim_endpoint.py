"""The endpoint's flush (what a device awaits before a reboot or an unplug): it ends when the
link has acknowledged every message sent, events or not, without waiting for the host to speak.
Each link the endpoint makes is the device's only while it is current: a device that rebooted
inside a payload callback gets nothing more of the old link."""
from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from firmware_bridge.framing import Frame, FrameKind, encode_frame
from firmware_bridge.link import LinkState
from firmware_bridge.messages import CardRead, ClearFault, FaultCode, Heartbeat, Message, ShoeEmpty, StatusRequest, encode
from firmware_bridge.session import SessionConfig
from simulators import endpoint as endpoint_module
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe
from simulators.stack import full_shoe

from tests.e2e.e2e_rig import open_host
from tests.support.poll import until

pytestmark = pytest.mark.timeout(60)
#: a host that says nothing for a minute after its handshake (no heartbeat, no request)
QUIET_HOST = SessionConfig(heartbeat_interval=60.0, stale_after=120.0)


def test_flush_ends_on_the_link_ack_of_a_message_that_is_not_an_event() -> None:
    """The link's ACK of any message wakes the flush, not only an event's ACK (or a payload from
    the host): else a Heartbeat sent to a quiet host would keep it waiting for the host's next
    heartbeat (a second by default; a minute here, past the 10 s bound)."""
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


def test_on_write_is_called_as_the_device_writes_to_its_line() -> None:
    """The public hook benchmarks/daemon.py stamps the cards with: a message sent is written to
    the line (and the hook called) before the send returns, then the host reads it."""
    async def main(endpoint: PtyEndpoint) -> None:
        host = await open_host(endpoint.url, QUIET_HOST)
        marks: list[str] = []
        try:
            def send() -> None:  # on the device's loop: nothing else is written meanwhile
                endpoint.on_write = lambda: marks.append("write")
                marks.append("send")
                endpoint.device.emit(Heartbeat(43))
                marks.append("sent")
                endpoint.on_write = None
            await asyncio.to_thread(endpoint.call, send)
            assert marks == ["send", "write", "sent"]
            await host.until(lambda: Heartbeat(43) in host.of(Heartbeat))
        finally:
            await host.conn.close()

    with PtyEndpoint(SimulatedShoe(heartbeat_s=0)) as endpoint:
        asyncio.run(main(endpoint))


class RebootsOnClearFault(SimulatedShoe):
    """Reboots at once, inside the payload callback, when told to clear a fault; notes every
    message it handles with the boot it was handled in."""

    def __init__(self) -> None:
        super().__init__(heartbeat_s=0)
        self.handled: list[tuple[int, str]] = []

    def handle(self, msg: Message) -> list[Message]:
        self.handled.append((self.boot_id, type(msg).__name__))
        if isinstance(msg, ClearFault):
            self.reboot()
            return []
        return super().handle(msg)


def test_a_device_that_reboots_inside_a_payload_callback_gets_nothing_more_of_the_old_link() -> None:
    """Two messages in one chunk: the first reboots the device, which starts a new link. The
    second was the old link's (acknowledged on it, to the device as it was): the rebooted device
    never handles it; each link the endpoint makes hands its payloads to the device only while
    it is the device's link."""
    device = RebootsOnClearFault()
    with PtyEndpoint(device) as endpoint:
        boot = device.boot_id
        chunk = b"".join(encode_frame(frame) for frame in (
            Frame(FrameKind.RESET, payload=b"host"),  # the host's RESET: the device's link is up
            Frame(FrameKind.DATA, seq=0, payload=encode(ClearFault(FaultCode.JAM))),
            Frame(FrameKind.DATA, seq=1, payload=encode(StatusRequest()))))

        def feed() -> tuple[int, str | None, list[tuple[int, str]]]:
            old = endpoint.link
            assert old is not None and old.state is LinkState.DOWN  # waiting for a host's RESET
            old.bytes_received(chunk)
            new = endpoint.link
            assert new is not None and new is not old
            return device.boot_id, new.state.value, list(device.handled)

        rebooted, state, handled = endpoint.call(feed)
        assert rebooted != boot and state == "resetting"  # the new link says RESET to the host
        assert handled == [(boot, "ClearFault")]


def test_the_event_window_sends_more_as_the_host_acknowledges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Event sends have no done callback: after each chunk of the host's bytes the endpoint finds
    the acknowledged ones at the front of its window and sends what waited. With a window of 2,
    20 cards dealt in one go reach the host, in order, then ShoeEmpty; nothing but the host's
    ACKs frees the window for the reads after the last card."""
    monkeypatch.setattr(endpoint_module, "EVENT_WINDOW", 2)

    async def main(endpoint: PtyEndpoint) -> None:
        host = await open_host(endpoint.url, QUIET_HOST)
        try:
            stack = full_shoe(1)[:20]
            await asyncio.to_thread(endpoint.call, endpoint.device.load, stack)
            await asyncio.to_thread(endpoint.call, endpoint.device.deal, len(stack))
            await host.until(lambda: host.of(ShoeEmpty))
            assert [(read.index, read.card) for read in host.of(CardRead)] == list(enumerate(stack, 1))
        finally:
            await host.conn.close()

    with PtyEndpoint(SimulatedShoe(heartbeat_s=0)) as endpoint:
        asyncio.run(main(endpoint))


def test_events_in_flight_when_the_link_goes_leave_no_unretrieved_failure(caplog: pytest.LogCaptureFixture) -> None:
    """The device reboots while its link holds unacknowledged event sends (the wire holds its
    frames back): the old link fails them all, and the endpoint retrieves those failures, so
    asyncio logs no 'Future exception was never retrieved' once they are collected."""
    async def main(endpoint: PtyEndpoint) -> None:
        host = await open_host(endpoint.url, QUIET_HOST)
        try:
            endpoint.set_faults(slow_ack_ms=2000)  # the reads below are sent, and not acknowledged yet
            sent_before = endpoint.state()["link_stats"].data_sent
            stack = full_shoe(1)[:5]
            await asyncio.to_thread(endpoint.call, endpoint.device.load, stack)
            await asyncio.to_thread(endpoint.call, endpoint.device.deal, len(stack))
            await until(lambda: endpoint.state()["cards_out"] == len(stack))

            def reboot_with_reads_in_flight() -> int:
                assert endpoint.link is not None
                sent = endpoint.link.stats.data_sent - sent_before  # ShoeLoaded, the reads, ShoeEmpty
                endpoint.device.reboot()
                gc.collect()  # the failed sends the old link held go now: asyncio logs one never retrieved at once
                return sent

            assert await asyncio.to_thread(endpoint.call, reboot_with_reads_in_flight) == len(stack) + 2
            assert host.of(CardRead) == []  # none acknowledged: the wire still held them
            assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
        finally:
            await host.conn.close()

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        with PtyEndpoint(SimulatedShoe(heartbeat_s=0)) as endpoint:
            asyncio.run(main(endpoint))
