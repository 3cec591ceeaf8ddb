"""DeviceSession against an in-memory device: handshake, requests, reboots, staleness, failures."""
from __future__ import annotations

import asyncio

import pytest
from fb_device import FAST, device_pair, settle
from fb_wire import run, wait_for

from core.cards import Card, Orientation
from firmware_bridge.errors import IncompatibleProtocol, RequestRefused, RequestTimeout, SessionClosed
from firmware_bridge.link import LinkState
from firmware_bridge.messages import (
    Calibrate,
    CardRead,
    Counters,
    CountersRequest,
    Heartbeat,
    Hello,
    Ident,
    Status,
    StatusRequest,
)
from firmware_bridge import session as session_module
from firmware_bridge.session import DeviceSession, SessionConfig, SessionEventKind as K

pytestmark = pytest.mark.timeout(30)

QUICK = SessionConfig(link=FAST, handshake_timeout=0.5, heartbeat_interval=0.02, stale_after=0.15, retry_delay=0.02,
                      stats_interval=0.05)


async def open_session(config=QUICK, **device_options):
    transport, device = device_pair(**device_options)
    messages, events = [], []
    session = DeviceSession(transport, messages.append, events.append, config)
    return session, device, transport, messages, events


def kinds(events):
    return [e.kind for e in events]


def test_handshake_request_and_messages():
    async def main():
        session, device, transport, messages, events = await open_session()
        ident = await session.open()
        assert ident == device.ident() and session.ident == ident and session.connected
        assert kinds(events) == [K.IDENT, K.CONNECTED]
        assert isinstance(device.received[0], Hello) and device.received[0].protocol_major == 1

        status = await session.request(StatusRequest(), expect=Status)
        assert status.uptime_ms == 1234

        stream = session.messages()
        read = CardRead(1, Card.parse("AS"), Orientation.FACE_DOWN, 10)
        device.send(read)
        assert await asyncio.wait_for(anext(stream), 1.0) == read
        assert messages[-1] == read and ident in messages and status in messages  # answers reach on_message too
        await session.close()
        assert await anext(stream, "ended") == "ended"
        assert transport.closed == 1
        s = session.stats
        assert s.messages_received == 3 and s.requests == 2 and s.handshakes == 1 and s.link.data_delivered == 3

    run(main())


def test_incompatible_major_version_is_refused_naming_both():
    async def main():
        session, device, transport, _, events = await open_session(protocol_major=2)
        with pytest.raises(IncompatibleProtocol, match=r"device CS-6000 SN42 speaks protocol 2\.0, this host speaks 1\.1"):
            await session.open()
        assert K.INCOMPATIBLE in kinds(events) and K.CONNECTED not in kinds(events)
        assert transport.closed == 1
        with pytest.raises(SessionClosed):
            await session.send(StatusRequest())

    run(main())


def test_silent_device_times_out_the_handshake():
    async def main():
        session, device, transport, _, _ = await open_session(answer=False)
        with pytest.raises(RequestTimeout, match="no Ident within 0.5s after Hello"):
            await session.open()
        assert transport.closed == 1

    run(main())


def test_device_reboot_is_detected_and_handshake_redone():
    async def main():
        session, device, _, _, events = await open_session()
        await session.open()
        device.reboot()
        await wait_for(lambda: kinds(events).count(K.CONNECTED) == 2)
        assert kinds(events)[2:] == [K.IDENT, K.REBOOTED, K.CONNECTED]
        assert session.ident.boot_id == device.boot_id and session.stats.reboots == 1
        assert [type(m) for m in device.received].count(Hello) == 2
        assert (await session.request(StatusRequest(), expect=Status)).state.name == "IDLE"
        await session.close()

    run(main())


def test_fresh_ident_mid_stream_means_reboot():
    async def main():
        session, device, _, _, events = await open_session()
        await session.open()
        device.boot_id = 0x2002
        device.send(device.ident())  # unsolicited, with a new boot id
        await wait_for(lambda: kinds(events).count(K.CONNECTED) == 2)
        assert K.REBOOTED in kinds(events) and session.ident.boot_id == 0x2002
        assert [type(m) for m in device.received].count(Hello) == 2
        await session.close()

    run(main())


def test_silence_is_stale_and_a_heartbeat_makes_it_fresh():
    async def main():
        session, device, _, _, events = await open_session()
        await session.open()
        await wait_for(lambda: K.STALE in kinds(events))
        assert any(type(m).__name__ == "Heartbeat" for m in device.received)  # the host kept beating
        device.send(Heartbeat(5))
        await wait_for(lambda: K.FRESH in kinds(events))
        assert kinds(events).count(K.STALE) == 1
        await session.close()

    run(main())


def test_link_failure_is_reported_and_recovered_without_reboot():
    async def main():
        session, device, transport, _, events = await open_session()
        await session.open()
        transport.wire_out.cut = device.wire_out.cut = True
        await wait_for(lambda: K.LINK_FAILED in kinds(events))
        await wait_for(lambda: session.link.stats.resets_sent >= 3)  # it keeps trying...
        assert kinds(events).count(K.LINK_FAILED) == 1  # ...and says so once per outage
        transport.wire_out.cut = device.wire_out.cut = False
        await wait_for(lambda: kinds(events).count(K.CONNECTED) == 2)
        assert K.REBOOTED not in kinds(events)  # same boot id: the device kept its state
        assert session.link.state is LinkState.UP
        await session.request(StatusRequest(), expect=Status)
        await session.close()

    run(main())


def test_request_timeout_and_refusal_are_clear():
    async def main():
        session, device, _, _, _ = await open_session()
        await session.open()
        with pytest.raises(RequestTimeout, match="no Counters within 0.05s after CountersRequest"):
            await session.request(CountersRequest(), expect=Counters, timeout=0.05)
        with pytest.raises(RequestRefused, match="refused message 0x35: a shuffler has no optical reader"):
            await session.request(Calibrate(), expect=Ident)
        assert session.stats.request_timeouts == 1
        await session.close()

    run(main())


def test_bad_payload_is_reported_not_fatal():
    async def main():
        session, device, _, messages, events = await open_session()
        await session.open()
        device.send(b"\x99\x01\x02")
        await wait_for(lambda: K.BAD_MESSAGE in kinds(events))
        bad = next(e for e in events if e.kind is K.BAD_MESSAGE)
        assert "unknown message type 0x99" in bad.detail and "99 01 02" in bad.detail
        assert await session.request(StatusRequest(), expect=Status)
        assert session.stats.bad_messages == 1
        await session.close()

    run(main())


def test_transport_loss_ends_the_session():
    async def main():
        session, device, transport, _, events = await open_session()
        await session.open()
        stream = session.messages()
        waiter = asyncio.ensure_future(anext(stream, "ended"))
        await settle()
        transport.close()  # as a driver does on unplug
        assert await asyncio.wait_for(waiter, 1.0) == "ended"
        assert K.DISCONNECTED in kinds(events)
        with pytest.raises(SessionClosed):
            await session.request(StatusRequest(), expect=Status)
        await session.close()

    run(main())


class LogRecorder:
    """Stands in for the module's structlog logger (the log sink is a boundary; other tests may
    configure structlog globally with cached loggers, so capture_logs would be unreliable)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, dict]] = []

    def __getattr__(self, level):
        return lambda event, **kw: self.lines.append((event, kw))


def test_link_statistics_are_logged_periodically(monkeypatch):
    logs = LogRecorder()
    monkeypatch.setattr(session_module, "log", logs)

    # Only the stats interval is short: link and handshake timers far above any stall of a
    # loaded machine, so the session is up and the line comes however slow the loop runs.
    patient = SessionConfig(handshake_timeout=10.0, heartbeat_interval=0.02, stale_after=60.0, stats_interval=0.05)

    async def main():
        session, device, _, _, _ = await open_session(patient)
        await session.open()
        await wait_for(lambda: any(event == "link_stats" for event, _ in logs.lines), timeout=20)
        line = next(kw for event, kw in logs.lines if event == "link_stats")
        assert line["device"] == "mem://device" and line["frames_sent"] > 0 and line["framing_crc_errors"] == 0
        await session.close()

    run(main())
