"""The session, driven by its DeviceConnection over a mem:// line to an in-memory device:
handshake, requests, reboots, staleness, failures."""
from __future__ import annotations

import asyncio

import pytest

from drivers import PortClosed

from core.cards import Card, Orientation
from firmware_bridge.errors import IncompatibleProtocol, RequestRefused, RequestTimeout
from firmware_bridge.link import LinkState
from firmware_bridge.messages import (
    Calibrate,
    CardRead,
    ClearFault,
    Counters,
    CountersRequest,
    FaultCleared,
    FaultCode,
    Heartbeat,
    Hello,
    Ident,
    Refused,
    ShoeLoaded,
    Status,
    StatusRequest,
)
from firmware_bridge import session as session_module
from firmware_bridge.session import SessionConfig, SessionEventKind as K

from tests.firmware_bridge.fb_device import QUICK, connection, ident_of, kinds, session_of, settle
from tests.support.aio import run
from tests.support.poll import until

pytestmark = pytest.mark.timeout(30)


async def hung_up(device) -> int:
    """How many connections the host ended, once the device side has seen them go."""
    await until(lambda: device.hangups > 0)
    await settle()
    return device.hangups


def test_handshake_request_and_messages():
    async def main():
        conn, device, line, messages, events = connection()
        ident = await conn.open()
        session = session_of(conn)
        assert ident == device.ident() and conn.ident == ident and session.ident == ident and conn.connected
        assert kinds(events) == [K.IDENT, K.CONNECTED]
        assert isinstance(device.received[0], Hello) and device.received[0].protocol_major == 1

        status = await conn.request(StatusRequest(), expect=Status)
        assert status.uptime_ms == 1234

        stream = conn.messages()
        read = CardRead(1, Card.parse("AS"), Orientation.FACE_DOWN, 10)
        device.send(read)
        assert await asyncio.wait_for(anext(stream), 1.0) == read
        assert messages[-1] == read and ident in messages and status in messages  # answers reach on_message too
        await conn.close()
        assert await anext(stream, "ended") == "ended"
        assert await hung_up(device) == 1
        s = session.stats
        # the IDENT, two Status (the host asks a 1.0 device for it after the handshake) and the read
        assert s.messages_received == 4 and s.requests == 3 and s.handshakes == 1 and s.link is not None and s.link.data_delivered == 4

    run(main())


def test_incompatible_major_version_is_refused_naming_both():
    async def main():
        conn, device, line, _, events = connection(protocol_major=2)
        with pytest.raises(IncompatibleProtocol, match=r"device CS-6000 SN42 speaks protocol 2\.0, this host speaks 1\.1"):
            await conn.open()
        assert K.INCOMPATIBLE in kinds(events) and K.CONNECTED not in kinds(events)
        assert await hung_up(device) == 1 and line.connections == 1
        with pytest.raises(PortClosed, match="mem://device: device is closed"):
            await conn.send(StatusRequest())

    run(main())


def test_silent_device_times_out_the_handshake():
    async def main():
        conn, device, line, _, _ = connection(answer=False)
        with pytest.raises(RequestTimeout, match="no Ident within 0.5s after Hello"):
            await conn.open()
        assert await hung_up(device) == 1 and line.connections == 1

    run(main())


def test_device_reboot_is_detected_and_handshake_redone():
    async def main():
        conn, device, line, _, events = connection()
        await conn.open()
        device.reboot()
        await until(lambda: kinds(events).count(K.CONNECTED) == 2)
        assert kinds(events)[2:] == [K.IDENT, K.REBOOTED, K.CONNECTED]
        assert ident_of(conn).boot_id == device.boot_id and session_of(conn).stats.reboots == 1
        assert [type(m) for m in device.received].count(Hello) == 2
        assert (await conn.request(StatusRequest(), expect=Status)).state.name == "IDLE"
        await conn.close()

    run(main())


def test_fresh_ident_mid_stream_means_reboot():
    async def main():
        conn, device, line, _, events = connection()
        await conn.open()
        device.boot_id = 0x2002
        device.send(device.ident())  # unsolicited, with a new boot id
        await until(lambda: kinds(events).count(K.CONNECTED) == 2)
        assert K.REBOOTED in kinds(events) and ident_of(conn).boot_id == 0x2002
        assert [type(m) for m in device.received].count(Hello) == 2
        await conn.close()

    run(main())


def test_unasked_idents_while_a_handshake_is_due_are_counted_not_handed_on():
    """A device that says IDENT unasked again and again, a new boot id each time: the first asks for
    a handshake, and those that come while it is due add nothing (its HELLO asks who answers) and
    are counted, not handed on: each was a journal record and a device state change."""
    unasked = range(0x3000, 0x3000 + 50)

    async def main():
        conn, device, line, messages, events = connection()
        await conn.open()
        session = session_of(conn)
        for boot in unasked:
            device.boot_id = boot
            device.send(device.ident())

        def handed_on() -> int:  # the unasked ones among the IDENTs on_message got (answers say the last boot)
            return sum(1 for m in messages if isinstance(m, Ident) and m.boot_id in unasked[:-1])

        await until(lambda: handed_on() + session.stats.idents_ignored >= len(unasked) - 1 and conn.connected)
        handshakes = kinds(events).count(K.CONNECTED)
        # each handshake after the first was asked for by one unasked IDENT, and may have taken another,
        # queued behind it, as its HELLO's answer: at most two handed on per handshake
        assert 1 <= handed_on() <= 2 * (handshakes - 1), (handed_on(), handshakes)
        assert session.stats.idents_ignored >= len(unasked) - 1 - handed_on()
        assert session.stats.idents_ignored >= len(unasked) // 2  # most came while a handshake was due
        await conn.close()

    run(main())


def test_silence_is_stale_and_a_heartbeat_makes_it_fresh():
    async def main():
        conn, device, line, _, events = connection()
        await conn.open()
        await until(lambda: K.STALE in kinds(events))
        assert any(type(m).__name__ == "Heartbeat" for m in device.received)  # the host kept beating
        device.send(Heartbeat(5))
        await until(lambda: K.FRESH in kinds(events))
        assert kinds(events).count(K.STALE) == 1
        await conn.close()

    run(main())


def test_link_failure_is_reported_and_recovered_without_reboot():
    async def main():
        conn, device, line, _, events = connection()
        await conn.open()
        line.cut()
        await until(lambda: K.LINK_FAILED in kinds(events))
        await until(lambda: session_of(conn).link.stats.resets_sent >= 3)  # it keeps trying...
        assert kinds(events).count(K.LINK_FAILED) == 1  # ...and says so once per outage
        line.cut(False)
        await until(lambda: kinds(events).count(K.CONNECTED) == 2)
        assert K.REBOOTED not in kinds(events)  # same boot id: the device kept its state
        assert session_of(conn).link.state is LinkState.UP and line.connections == 1  # the port stayed open
        await conn.request(StatusRequest(), expect=Status)
        await conn.close()

    run(main())


def test_request_timeout_and_refusal_are_clear():
    async def main():
        conn, device, line, _, _ = connection()
        await conn.open()
        with pytest.raises(RequestTimeout, match="no Counters within 0.05s after CountersRequest"):
            await conn.request(CountersRequest(), expect=Counters, timeout=0.05)
        with pytest.raises(RequestRefused, match="device refused Calibrate: a shuffler has no optical reader"):
            await conn.request(Calibrate(), expect=Ident)
        assert session_of(conn).stats.request_timeouts == 1
        await conn.close()

    run(main())


def test_a_command_whose_effect_is_an_event_ends_with_the_devices_refusal():
    """ClearFault's effect comes as an event (FaultCleared), never as its answer; a device that
    will not clear the fault answers Refused, and that ends the wait with its reason (the wait
    would otherwise run to its timeout and say only that nothing came)."""
    async def main():
        conn, _, _, messages, _ = connection()
        await conn.open()
        with pytest.raises(RequestRefused) as refused:
            await conn.send_expecting(ClearFault(FaultCode.DOOR_OPEN), FaultCleared, timeout=10.0)
        assert str(refused.value) == (f"{conn.url}: device refused ClearFault: fault DOOR_OPEN clears only when its "
                                      "cause is removed")
        assert [m for m in messages if isinstance(m, Refused)] == [
            Refused(ClearFault.TYPE, "fault DOOR_OPEN clears only when its cause is removed")]  # the owner heard it too
        await conn.close()

    run(main())


def test_bad_payload_is_reported_not_fatal():
    async def main():
        conn, device, line, messages, events = connection()
        await conn.open()
        device.send(b"\x99\x01\x02")
        await until(lambda: K.BAD_MESSAGE in kinds(events))
        bad = next(e for e in events if e.kind is K.BAD_MESSAGE)
        assert "unknown message type 0x99" in bad.detail and "99 01 02" in bad.detail
        assert await conn.request(StatusRequest(), expect=Status)
        assert session_of(conn).stats.bad_messages == 1
        await conn.close()

    run(main())


def test_port_loss_ends_the_session_and_the_connection_waits_for_the_device():
    async def main():
        conn, device, line, messages, events = connection()
        await conn.open()
        session = session_of(conn)
        await until(lambda: Status in map(type, messages))  # the 1.0 device's Status, asked after the handshake
        stream = conn.messages()
        waiter = asyncio.ensure_future(anext(stream, "ended"))
        await settle()
        line.close()  # unplugged, and nothing answers at mem://device any more
        await until(lambda: K.DISCONNECTED in kinds(events))
        assert conn.session is None and not conn.connected
        with pytest.raises(PortClosed, match=r"mem://device: device is not connected \(reconnecting\)"):
            await conn.request(StatusRequest(), expect=Status)
        await until(lambda: session.link.state is LinkState.CLOSED)  # the session is over
        assert not waiter.done()  # the connection's messages go on across unplugs...
        await conn.close()
        assert await asyncio.wait_for(waiter, 1.0) == "ended"  # ...until it is closed

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
        conn, device, _, _, _ = connection(patient)
        await conn.open()
        await until(lambda: any(event == "link_stats" for event, _ in logs.lines), timeout=20)
        line = next(kw for event, kw in logs.lines if event == "link_stats")
        assert line["device"] == "mem://device" and line["frames_sent"] > 0 and line["framing_crc_errors"] == 0
        await conn.close()

    run(main())


@pytest.mark.parametrize("numbered_apart", [True, False])
def test_a_numbered_event_goes_to_on_numbered_when_given(numbered_apart):
    """The card path: an Event that comes with no request waiting and no handshake under way
    goes to on_numbered when the owner gave one, else to on_message, as every other message."""
    from firmware_bridge.framing import Frame, FrameKind, encode_frame
    from firmware_bridge.identity import IdentityTracker
    from firmware_bridge.messages import Event, encode
    from firmware_bridge.session import DeviceSession

    async def main():
        messages: list[object] = []
        numbered: list[object] = []
        written: list[bytes] = []
        session = DeviceSession(written.append, "mem://device", on_message=messages.append, on_event=lambda e: None,
                                identity=IdentityTracker(), on_numbered=numbered.append if numbered_apart else None)
        session.link.bytes_received(encode_frame(Frame(FrameKind.RESET, payload=b"\x01\x02\x03\x04")))
        event = Event(7, CardRead(1, Card.parse("AS"), Orientation.FACE_DOWN, 10))
        session.link.bytes_received(encode_frame(Frame(FrameKind.DATA, 0, 0, encode(event))))
        assert (numbered, messages) == (([event], []) if numbered_apart else ([], [event]))
        await session.close()

    run(main())


@pytest.mark.parametrize("turns", [0, 1, 2], ids=["with-its-ident", "a-turn-later", "two-turns-later"])
def test_a_device_that_resets_the_link_as_a_handshake_ends_is_asked_for_its_status_only_after_the_next(turns):
    # the device answers HELLO and reboots at once or a loop turn or two later (its RESET right behind
    # its IDENT): the handshake it answered was on a link it has left. A Status asked there (at the
    # handshake's end, or by the request the handshake left to run a turn later) reached a 1.1 device
    # not yet resumed on its new link, which answered before the events it is to resend: its count
    # had cards out whose reads the host did not have yet, a false SHOE_COUNT_MISMATCH. On the link
    # the device rebooted onto it hears HELLO first, then the one StatusRequest.
    async def main():
        conn, device, line, _, events = connection(reboot_after_ident=True, reboot_turns=turns)
        await conn.open()
        await until(lambda: K.REBOOTED in kinds(events) and kinds(events)[-1] is K.CONNECTED)
        await until(lambda: StatusRequest in [type(m) for boot, m in device.received_at_boot if boot == device.boot_id])
        await settle(0.1)
        rebooted = [type(m) for boot, m in device.received_at_boot
                    if boot == device.boot_id and not isinstance(m, Heartbeat)]
        assert rebooted == [Hello, StatusRequest]
        assert ident_of(conn).boot_id == device.boot_id
        await conn.close()

    run(main())


def test_a_shoe_loaded_or_a_fault_cleared_asks_for_the_status_again():
    # a new stack's count starts at its load, and a jam or misfeed may have let cards out unseen:
    # the table compares the shoe's count then, not only at the next handshake. A card read asks nothing.
    async def main():
        conn, device, line, messages, _ = connection()
        await conn.open()

        def asked() -> int:
            return [type(m) for m in device.received].count(StatusRequest)

        await until(lambda: asked() == 1)  # the handshake's
        device.send(CardRead(1, Card.parse("AS"), Orientation.FACE_DOWN, 10))
        device.send(ShoeLoaded(20))
        await until(lambda: asked() == 2)
        device.send(FaultCleared(FaultCode.JAM))
        await until(lambda: asked() == 3)
        device.send(CardRead(2, Card.parse("KD"), Orientation.FACE_DOWN, 30))
        await until(lambda: isinstance(messages[-1], CardRead) and messages[-1].index == 2)
        await settle(0.05)
        assert asked() == 3
        assert [type(m) for m in messages].count(Status) == 3  # each answer reached the application
        await conn.close()

    run(main())
