"""update_firmware through a DeviceConnection (mem://) to a device running the simulators' firmware receiver."""
from __future__ import annotations

import asyncio
import os

import pytest

from firmware_bridge.errors import FirmwareError, FirmwareSignatureError, FirmwareTargetMismatch, FirmwareTransferError
from firmware_bridge.firmware import generate_dev_keypair, public_key_bytes, sign_image, update_firmware
from firmware_bridge.messages import FirmwareAbort, FirmwareBegin, FirmwareChunk, FirmwareCommit, FirmwareStage
from firmware_bridge.session import SessionConfig

from tests.firmware_bridge.fb_device import FAST, connection
from tests.support.aio import run
from tests.support.poll import until

pytestmark = pytest.mark.timeout(30)

CONFIG = SessionConfig(link=FAST, heartbeat_interval=0.5)
IMAGE = os.urandom(5000)


@pytest.fixture(scope="module")
def keys():
    return generate_dev_keypair()


async def connected(keys, device_key=None, **device_options):
    conn, device, _, _, _ = connection(CONFIG, public_key=public_key_bytes(device_key or keys[1]), **device_options)
    await conn.open()
    return conn, device


def firmware_messages(device):
    return [m for m in device.received if isinstance(m, (FirmwareBegin, FirmwareChunk, FirmwareCommit, FirmwareAbort))]


def test_signed_image_is_transferred_and_installed(keys):
    async def main():
        conn, device = await connected(keys)
        signed = sign_image("CS-6000", "2.0.0", IMAGE, keys[0])
        progress = []
        update = await update_firmware(conn, signed, keys[1], progress=lambda done, total: progress.append(done))
        assert update.result.ok and update.result.stage is FirmwareStage.COMMIT
        assert (update.from_version, update.to_version, update.downgrade_allowed_by) == ("1.0.0", "2.0.0", None)
        assert device.firmware_version == "2.0.0"
        chunks = [m for m in device.received if isinstance(m, FirmwareChunk)]
        assert len(chunks) == 10 and b"".join(c.data for c in chunks) == IMAGE
        assert progress[-1] == len(IMAGE)
        await conn.close()

    run(main())


def test_badly_signed_image_never_leaves_the_host(keys):
    async def main():
        conn, device = await connected(keys)
        forger, _ = generate_dev_keypair()
        with pytest.raises(FirmwareSignatureError, match="image refused"):
            await update_firmware(conn, sign_image("CS-6000", "9.9.9", IMAGE, forger), keys[1])
        with pytest.raises(FirmwareTargetMismatch, match="model 'SHOE-2', the device is 'CS-6000'"):
            await update_firmware(conn, sign_image("SHOE-2", "1.1.0", IMAGE, keys[0]), keys[1])
        assert firmware_messages(device) == [] and device.firmware_version == "1.0.0"
        await conn.close()

    run(main())


def test_device_refusal_aborts_and_raises(keys):
    async def main():
        _, other_public = generate_dev_keypair()
        conn, device = await connected(keys, device_key=other_public)  # the device trusts another key
        with pytest.raises(FirmwareTransferError, match="device refused COMMIT"):
            await update_firmware(conn, sign_image("CS-6000", "2.0.0", IMAGE, keys[0]), keys[1])
        assert isinstance(firmware_messages(device)[-1], FirmwareAbort)
        assert device.firmware_version == "1.0.0"
        await conn.close()

    run(main())


def test_a_lower_version_is_refused_before_anything_is_sent_unless_a_technician_allows_it(keys):
    """A genuine older image is refused by host and device alike, unless a technician allows it."""
    async def main():
        session, device = await connected(keys, firmware_version="2.0.0")
        older = sign_image("CS-6000", "1.10.0", IMAGE, keys[0])
        with pytest.raises(FirmwareError, match="version 1.10.0 is lower than the running 2.0.0"):
            await update_firmware(session, older, keys[1])
        assert firmware_messages(device) == [] and device.firmware_version == "2.0.0"
        update = await update_firmware(session, older, keys[1], allow_downgrade_by="J. Doe (tech 4411)")
        assert update.result.ok and device.firmware_version == "1.10.0"
        assert (update.from_version, update.to_version) == ("2.0.0", "1.10.0")
        assert update.downgrade_allowed_by == "J. Doe (tech 4411)"
        await session.close()

    run(main())


@pytest.mark.parametrize("options, what", [
    ({"chunk_size": 0}, "chunk_size 0"),
    ({"chunk_size": 2000}, "chunk_size 2000"),
    ({"chunk_size": True}, "chunk_size True"),
    ({"timeout": 0}, "timeout 0"),
    ({"allow_downgrade_by": " "}, "allow_downgrade_by"),
    ({"allow_downgrade_by": "x\nforged"}, "allow_downgrade_by"),
])
def test_bad_arguments_are_refused_before_anything_is_sent(keys, options, what):
    async def main():
        session, device = await connected(keys)
        with pytest.raises(FirmwareError, match=what):
            await update_firmware(session, sign_image("CS-6000", "2.0.0", IMAGE, keys[0]), keys[1], **options)
        assert firmware_messages(device) == [] and device.firmware_version == "1.0.0"
        await session.close()

    run(main())


def test_any_failure_after_begin_sends_abort(keys):
    async def main():
        session, device = await connected(keys)
        signed = sign_image("CS-6000", "2.0.0", IMAGE, keys[0])

        def broken_progress(done: int, total: int) -> None:
            raise RuntimeError("progress display crashed")

        with pytest.raises(RuntimeError, match="progress display crashed"):
            await update_firmware(session, signed, keys[1], progress=broken_progress)
        assert isinstance(firmware_messages(device)[-1], FirmwareAbort)

        def cancel_at_300(done: int, total: int) -> None:
            if done == 300:
                transfer.cancel()

        transfer = asyncio.ensure_future(update_firmware(session, signed, keys[1], chunk_size=100, progress=cancel_at_300))
        with pytest.raises(asyncio.CancelledError):
            await transfer
        await until(lambda: isinstance(firmware_messages(device)[-1], FirmwareAbort), what="an ABORT after the cancel")
        assert device.firmware_version == "1.0.0"
        await session.close()

    run(main())
