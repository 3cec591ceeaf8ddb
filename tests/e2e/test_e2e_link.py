"""The foundation's "done when", over a real pty (pyserial) and through pyusb's core alike."""
from __future__ import annotations

import asyncio

import pytest

from core.cards import Orientation
from firmware_bridge.errors import FirmwareSignatureError, FirmwareTransferError
from firmware_bridge.firmware import generate_dev_keypair, public_key_bytes, sign_image, update_firmware
from firmware_bridge.messages import (CardRead, DeckCheckResult, ShuffleComplete, StartShuffle, Status,
                                      StatusRequest)
from firmware_bridge.session import SessionEventKind
from simulators.faults import Faults
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler
from simulators.stack import fisher_yates, full_shoe

from tests.e2e.e2e_rig import FULL

CORRUPTED_READS = 50_000 if FULL else 5_000


def stack_of(n: int) -> list:
    """``n`` cards from as many shuffled 6-deck shoes as it takes."""
    cards: list = []
    while len(cards) < n:
        cards += fisher_yates(full_shoe(6))
    return cards[:n]


async def deal_all(endpoint, host, stack, timeout: float) -> list[CardRead]:
    endpoint.call(endpoint.device.load, stack)
    endpoint.call(endpoint.device.deal, len(stack))
    await host.until(lambda: len(host.by_type.get(CardRead, ())) >= len(stack), timeout)
    return host.of(CardRead)


async def wire_settled(endpoint, timeout: float = 10.0):
    """The device's wire statistics once every byte handed to the wire has been written."""
    deadline = asyncio.get_running_loop().time() + timeout
    while (wire := endpoint.state()["wire"]).writes != wire.bytes_to_host:
        assert asyncio.get_running_loop().time() < deadline, f"wire never settled at one byte per write: {wire}"
        await asyncio.sleep(0.01)
    return wire


def assert_exactly_once_in_order(reads: list[CardRead], stack: list) -> None:
    assert [r.index for r in reads] == list(range(1, len(stack) + 1))
    assert [r.card for r in reads] == stack
    assert all(r.orientation is Orientation.FACE_DOWN for r in reads)


@pytest.mark.soak
@pytest.mark.timeout(240)
def test_every_card_read_arrives_once_and_in_order_through_corruption(e2e):
    stack = stack_of(CORRUPTED_READS)
    faults = Faults(bit_flip_rate=0.01, byte_at_a_time=True, seed=11)

    async def body(endpoint, host):
        reads = await deal_all(endpoint, host, stack, timeout=200)
        assert_exactly_once_in_order(reads, stack)
        # one byte per write: compared once the wire is quiet (its last ACKs may still trickle)
        wire = await wire_settled(endpoint)
        host_link = host.conn.session.stats.link
        assert wire.writes == wire.bytes_to_host
        assert wire.flipped > len(stack) * 0.05  # corruption really happened, both ways
        assert host_link.framing.crc_errors + host_link.framing.cobs_errors > 0
        assert host.conn.session.stats.bad_messages == 0

    e2e(SimulatedShoe(faults=faults, heartbeat_s=0), body)  # both links with their default LinkConfig


@pytest.mark.timeout(60)
def test_reboot_mid_stream_is_detected_and_the_link_comes_back(e2e):
    stack = stack_of(600)

    async def body(endpoint, host):
        boot = host.ident.boot_id
        reads = await deal_all(endpoint, host, stack, timeout=30)
        await host.until(lambda: SessionEventKind.REBOOTED in host.kinds())
        assert host.ident.boot_id != boot
        assert_exactly_once_in_order(reads, stack)  # cards after the reboot arrived too
        status = await host.conn.request(StatusRequest(), expect=Status)
        assert status.cards_held == 0 and endpoint.state()["reboots"] == 1

    e2e(SimulatedShoe(faults=Faults(reboot_at=250), heartbeat_s=0), body)


@pytest.mark.timeout(60)
def test_shuffle_and_verify_a_six_deck_shoe_through_the_session(e2e):
    async def body(endpoint, host):
        await host.conn.send(StartShuffle(6))
        await host.until(lambda: host.of(DeckCheckResult))
        [complete] = host.of(ShuffleComplete)
        assert complete.card_count == 312 and set(complete.composition.values()) == {6}
        assert host.of(DeckCheckResult)[0].ok

    e2e(SimulatedShuffler(heartbeat_s=0), body)


@pytest.mark.timeout(60)
def test_disconnect_is_seen_by_the_host(e2e):
    async def body(endpoint, host):
        endpoint.call(endpoint.device.load, full_shoe(1))
        endpoint.call(endpoint.device.deal, 10)
        await host.until(lambda: SessionEventKind.DISCONNECTED in host.kinds())
        assert [r.index for r in host.of(CardRead)] == [1, 2, 3]

    e2e(SimulatedShoe(faults=Faults(disconnect_for=0.2, disconnect_at=3), heartbeat_s=0), body)


@pytest.mark.timeout(60)
def test_signed_firmware_update_reboots_the_device_into_the_new_version(e2e):
    private, public = generate_dev_keypair()
    signed = sign_image(SimulatedShoe.MODEL, "1.4.0", bytes(range(256)) * 20, private)

    async def body(endpoint, host):
        update = await update_firmware(host.conn, signed, public)
        assert update.result.ok
        await host.until(lambda: SessionEventKind.REBOOTED in host.kinds()
                         and host.ident.firmware_version == "1.4.0")
        assert endpoint.state()["firmware_version"] == "1.4.0"

    e2e(SimulatedShoe(heartbeat_s=0, firmware_public_key=public_key_bytes(public)), body)


@pytest.mark.timeout(60)
def test_unsigned_firmware_never_leaves_the_host_and_forged_images_are_refused_by_the_device(e2e):
    private, public = generate_dev_keypair()
    forger, _ = generate_dev_keypair()
    forged = sign_image(SimulatedShoe.MODEL, "6.6.6", b"\x90" * 1000, forger)

    async def body(endpoint, host):
        with pytest.raises(FirmwareSignatureError):
            await update_firmware(host.conn, forged, public)  # the host refuses first
        # a host with the forger's key would send it: the device still refuses
        with pytest.raises(FirmwareTransferError, match="refused"):
            await update_firmware(host.conn, forged, forged_public)
        assert host.ident.firmware_version == "1.0.0"
        assert endpoint.state()["reboots"] == 0

    forged_public = forger.public_key()
    e2e(SimulatedShoe(heartbeat_s=0, firmware_public_key=public_key_bytes(public)), body)


@pytest.mark.timeout(60)
def test_a_device_that_reuses_its_reset_nonce_at_every_boot_loses_no_card(e2e):
    """The second boot's RESET carries the first boot's nonce. It is a new reset (the
    device had sent DATA since that nonce was accepted), not a repeat of a lost RESET_ACK."""
    stack = stack_of(30)

    async def body(endpoint, host):
        endpoint.call(endpoint.device.load, stack)
        for boot in (1, 2, 3):
            endpoint.call(endpoint.device.deal, 10)
            await host.until(lambda: len(host.of(CardRead)) >= 10 * boot)
            if boot < 3:
                endpoint.call(endpoint.device.reboot)
                await host.until(lambda: host.kinds().count(SessionEventKind.REBOOTED) == boot)
        assert_exactly_once_in_order(host.of(CardRead), stack)
        assert host.conn.session is not None and host.conn.session.stats.link.peer_resets == 2
        assert SessionEventKind.LINK_FAILED not in host.kinds()  # no reboot was taken for a lost RESET_ACK

    e2e(SimulatedShoe(faults=Faults(same_nonce=True), heartbeat_s=0), body)
