"""``firmware_update`` through the real daemon: the image it names is read only when it is a regular
file of bounded size, and off the event loop. ``/dev/zero`` was read without end (the kernel killed
the daemon at 24 GB), and a FIFO stopped the whole daemon until someone wrote to it."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from firmware_bridge.firmware import MAX_IMAGE_FILE_BYTES, generate_dev_keypair, public_key_bytes, sign_image
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe
from tests.daemon.daemon_rig import Daemon, write_config

pytestmark = pytest.mark.timeout(120)

#: the daemon's address space in this test (it needs about 0.4 GiB): a daemon that read /dev/zero
#: again would fail here with MemoryError instead of taking the test machine's memory
ADDRESS_SPACE = 1 << 30


def test_a_firmware_image_that_is_no_bounded_regular_file_is_refused_unread(directory: Path) -> None:
    private, public = generate_dev_keypair()
    key = directory / "fw.pub"
    key.write_bytes(public_key_bytes(public))
    fifo = directory / "image.fifo"
    os.mkfifo(fifo)  # no writer ever comes: an open that waited for one would wait for good
    sparse = directory / "huge.fw"
    with sparse.open("wb") as out:
        out.truncate(MAX_IMAGE_FILE_BYTES + 1)
    image = directory / "os1-1.1.0.fw"
    image.write_bytes(sign_image(SimulatedShoe.MODEL, "1.1.0", bytes(range(256)) * 8, private).to_bytes())
    with PtyEndpoint(SimulatedShoe(firmware_public_key=public_key_bytes(public))) as endpoint:
        config = write_config(directory, endpoint.url, None, firmware_key=key)
        daemon = Daemon(["--config", str(config)], directory / "cardd.sock",
                        prefix=["prlimit", f"--as={ADDRESS_SPACE}", "--"])
        client = daemon.client()
        client.wait_state(lambda s: s["devices"]["shoe-reader"]["usable"])
        refused = {fifo: f"{fifo}: a FIFO (named pipe), not a regular file: not read",
                   Path("/dev/zero"): "/dev/zero: a character device, not a regular file: not read",
                   sparse: f"{sparse}: {MAX_IMAGE_FILE_BYTES + 1:,} bytes, more than the "
                           f"{MAX_IMAGE_FILE_BYTES:,} taken: not read"}
        for path, why in refused.items():
            reply = client.command("firmware_update", device="shoe", image=str(path))
            assert reply == {"class": "ERROR", "id": reply["id"], "code": "failed",
                             "message": f"firmware_update: {why}"}, reply
            assert client.state()["devices"]["shoe-reader"]["ident"]["firmware"] == "1.0.0"  # answered, untouched
        seq = client.ok("firmware_update", device="shoe", image=str(image))  # a real image still goes
        record = client.request({"class": "LOG", "from_seq": seq, "to_seq": seq})["records"][0]
        assert record["data"]["result"]["ok"] is True and record["data"]["result"]["to_version"] == "1.1.0"
        client.close()
        code, err = daemon.stop()
        assert code == 0, err
