"""Adversarial end-to-end cases over a real pty and pyusb's core: the device goes away or
reboots in the middle of something the host is doing."""
from __future__ import annotations

import asyncio

import pytest

from drivers import PortClosed
from firmware_bridge.errors import FirmwareTransferError
from firmware_bridge.firmware import generate_dev_keypair, public_key_bytes, sign_image, update_firmware
from firmware_bridge.messages import Counters, Fault, FaultCode, Status, StatusRequest
from firmware_bridge.session import SessionEventKind
from simulators.shoe import SimulatedShoe

from tests.e2e.e2e_rig import make_endpoint, open_host

pytestmark = pytest.mark.timeout(60)


def test_simulator_stopped_mid_firmware_transfer_fails_it_clearly_and_the_device_keeps_its_firmware(e2e):
    private, public = generate_dev_keypair()
    signed = sign_image(SimulatedShoe.MODEL, "3.0.0", bytes(range(256)) * 40, private)

    async def body(endpoint, host):
        def unplug_after_three_chunks(done: int, total: int) -> None:
            if done == 3 * 256:
                endpoint.stop()  # the device goes away between two chunks

        with pytest.raises(FirmwareTransferError, match="transfer of .* 3.0.0 stopped"):
            await update_firmware(host.conn, signed, public, chunk_size=256, progress=unplug_after_three_chunks)
        await host.until(lambda: SessionEventKind.DISCONNECTED in host.kinds())
        assert endpoint.device.firmware_version == "1.0.0"  # no COMMIT ever reached it

    e2e(SimulatedShoe(heartbeat_s=0, firmware_public_key=public_key_bytes(public)), body)


def test_a_reboot_mid_firmware_transfer_fails_it_and_the_session_comes_back_on_the_old_firmware(e2e):
    private, public = generate_dev_keypair()
    signed = sign_image(SimulatedShoe.MODEL, "3.1.0", bytes(range(256)) * 40, private)

    async def body(endpoint, host):
        def glitch_after_three_chunks(done: int, total: int) -> None:
            if done == 3 * 256:
                endpoint.loop.call_soon_threadsafe(endpoint.device.reboot)  # a power glitch

        with pytest.raises(FirmwareTransferError):
            await update_firmware(host.conn, signed, public, chunk_size=256, progress=glitch_after_three_chunks)
        await host.until(lambda: SessionEventKind.REBOOTED in host.kinds() and host.conn.connected)
        assert host.ident.firmware_version == "1.0.0"
        assert (await host.conn.request(StatusRequest(), expect=Status)).state.name == "IDLE"

    e2e(SimulatedShoe(heartbeat_s=0, firmware_public_key=public_key_bytes(public)), body)


def test_simulator_stopped_while_a_request_waits_ends_the_request_at_once(e2e):
    async def body(endpoint, host):
        # Counters never answers a StatusRequest: the request waits until the device goes
        await host.until(lambda: host.of(Status))  # the Status asked after the handshake came first
        before = len(host.of(Status))
        pending = asyncio.ensure_future(host.conn.request(StatusRequest(), expect=Counters, timeout=30))
        # its Status: the device took the request (its frame acknowledged) and is mid-conversation
        await host.until(lambda: len(host.of(Status)) > before)
        endpoint.stop()
        with pytest.raises(PortClosed, match="device went away before it answered StatusRequest"):
            await asyncio.wait_for(pending, 10)
        await host.until(lambda: SessionEventKind.DISCONNECTED in host.kinds())

    e2e(SimulatedShoe(heartbeat_s=0), body)


#: what a hostile device puts in its text fields: a terminal clear, a forged log line, a bidi
#: override, a zero-width joiner and a line separator
HOSTILE = "\x1b[2J\r\n2026-11-23 [info] all clear\u202eevil\u200d\u2028"
HOSTILE_SHOWN = "\\x1b[2J\\x0d\\x0a2026-11-23 [info] all clear\\u202eevil\\u200d\\u2028"


def test_device_text_is_escaped_where_it_enters_the_host():
    """Ident strings and a Fault detail full of control characters reach every
    consumer (the session's ident, its events, the messages) escaped, never raw."""
    endpoint, transport = make_endpoint("pty", SimulatedShoe(serial="SN" + HOSTILE, heartbeat_s=0))

    async def main() -> None:
        host = await open_host(**transport())
        try:
            endpoint.call(endpoint.device.raise_fault, FaultCode.SENSOR, 3, "lens" + HOSTILE)
            await host.until(lambda: host.of(Fault))
            assert host.conn.ident is not None and host.conn.ident.serial == "SN" + HOSTILE_SHOWN
            assert host.of(Fault)[0].detail == "lens" + HOSTILE_SHOWN
            shown = [e.detail for e in host.events] + [e.ident.serial for e in host.events if e.ident]
            assert HOSTILE_SHOWN in " ".join(shown)
            assert all(s.isprintable() for s in shown)
        finally:
            await host.conn.close()

    with endpoint:
        asyncio.run(main())
