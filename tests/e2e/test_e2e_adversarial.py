"""Adversarial end-to-end cases over a real pty and pyusb's core: the device goes away or
reboots in the middle of something the host is doing."""
from __future__ import annotations

import asyncio

import pytest

from drivers import LinkDown
from firmware_bridge.errors import FirmwareTransferError
from firmware_bridge.firmware import generate_dev_keypair, public_key_bytes, sign_image, update_firmware
from firmware_bridge.messages import Counters, Status, StatusRequest
from firmware_bridge.session import SessionEventKind
from simulators.shoe import SimulatedShoe

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
        pending = asyncio.ensure_future(host.conn.request(StatusRequest(), expect=Counters, timeout=30))
        await host.until(lambda: host.of(Status))  # the device is mid-conversation
        endpoint.stop()
        with pytest.raises(LinkDown, match="device went away before it answered StatusRequest"):
            await asyncio.wait_for(pending, 10)
        await host.until(lambda: SessionEventKind.DISCONNECTED in host.kinds())

    e2e(SimulatedShoe(heartbeat_s=0), body)
