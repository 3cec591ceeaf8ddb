"""update_firmware through a DeviceConnection (mem://) to a device running the simulators' firmware receiver."""
from __future__ import annotations

import os

import pytest

from firmware_bridge.errors import FirmwareSignatureError, FirmwareTargetMismatch, FirmwareTransferError
from firmware_bridge.firmware import generate_dev_keypair, public_key_bytes, sign_image, update_firmware
from firmware_bridge.messages import FirmwareAbort, FirmwareBegin, FirmwareChunk, FirmwareCommit, FirmwareStage
from firmware_bridge.session import SessionConfig

from tests.firmware_bridge.fb_device import FAST, connection
from tests.support.aio import run

pytestmark = pytest.mark.timeout(30)

CONFIG = SessionConfig(link=FAST, heartbeat_interval=0.5)
IMAGE = os.urandom(5000)


@pytest.fixture(scope="module")
def keys():
    return generate_dev_keypair()


async def connected(keys, device_key=None):
    conn, device, _, _, _ = connection(CONFIG, public_key=public_key_bytes(device_key or keys[1]))
    await conn.open()
    return conn, device


def firmware_messages(device):
    return [m for m in device.received if isinstance(m, (FirmwareBegin, FirmwareChunk, FirmwareCommit, FirmwareAbort))]


def test_signed_image_is_transferred_and_installed(keys):
    async def main():
        conn, device = await connected(keys)
        signed = sign_image("CS-6000", "2.0.0", IMAGE, keys[0])
        progress = []
        result = await update_firmware(conn, signed, keys[1], progress=lambda done, total: progress.append(done))
        assert result.ok and result.stage is FirmwareStage.COMMIT
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
