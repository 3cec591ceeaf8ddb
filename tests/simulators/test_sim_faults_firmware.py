"""Fault switches parse from the CLI form; the device installs only verified firmware."""
from __future__ import annotations

import zlib

import pytest

from core.cards import Card
from firmware_bridge.firmware import generate_dev_keypair, public_key_bytes, sign_image
from firmware_bridge.messages import (FirmwareAbort, FirmwareAllowDowngrade, FirmwareBegin, FirmwareChunk, FirmwareCommit,
                                      FirmwareStage, Hello)
from simulators.faults import Faults, FaultSpecError
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler


def test_every_switch_parses_from_text():
    faults = Faults.parse("jam=2.5 jam_needs_clear door_open riffle_once face_up_at=7 missing=AS,7H; extra=KD foreign=1 "
                          "duplicate=QS unreadable_at=9 reboot_at=100 same_nonce bit_flip_rate=0.01 drop_rate=0.001 "
                          "byte_at_a_time ftdi_batching_ms=16 disconnect_for=1.5 disconnect_at=50 slow_ack_ms=30 "
                          "seed=4 legacy_1_0 event_buffer=16 repeat_read_at=3 conflicting_read_at=4 skip_read_at=5 "
                          "late_report_at=7 no_heartbeat wrong_role flapping_ident status_flood unknown_key cloned_serial "
                          "forged_tag replayed_capture downgrade_offer rogue_host accept_any_proof silent_overflow")
    assert faults.active() == {
        "jam": 2.5, "jam_needs_clear": True, "door_open": True, "riffle_once": True, "face_up_at": 7,
        "missing": (Card.parse("AS"), Card.parse("7H")), "extra": (Card.parse("KD"),), "foreign": 1,
        "duplicate": (Card.parse("QS"),), "unreadable_at": 9, "reboot_at": 100, "same_nonce": True, "bit_flip_rate": 0.01,
        "drop_rate": 0.001, "byte_at_a_time": True, "ftdi_batching_ms": 16.0, "disconnect_for": 1.5,
        "disconnect_at": 50, "slow_ack_ms": 30.0, "seed": 4, "legacy_1_0": True, "event_buffer": 16,
        "repeat_read_at": 3, "conflicting_read_at": 4, "skip_read_at": 5, "late_report_at": 7, "no_heartbeat": True,
        "wrong_role": True, "flapping_ident": True, "status_flood": True, "unknown_key": True, "cloned_serial": True,
        "forged_tag": True, "replayed_capture": True, "downgrade_offer": True, "rogue_host": True,
        "accept_any_proof": True, "silent_overflow": True,
    }
    assert set(faults.active()) == set(Faults.names())  # the test names every switch


def test_changes_keeps_a_switch_turned_off_for_set_faults():
    assert Faults.changes("drop_rate=0 no_heartbeat") == {"drop_rate": 0.0, "no_heartbeat": True}
    assert Faults.parse("drop_rate=0 no_heartbeat").active() == {"no_heartbeat": True}  # what active() drops
    shoe = SimulatedShoe(faults=Faults(drop_rate=1.0), heartbeat_s=0)
    shoe.set_faults(**Faults.changes("drop_rate=0"))
    assert shoe.faults.active() == {}


def test_unknown_switch_lists_the_known_ones():
    with pytest.raises(FaultSpecError, match="no fault switch 'jamm'.*jam_needs_clear"):
        Faults.parse("jamm")
    with pytest.raises(FaultSpecError, match="fault switch missing=XX: 'XX' is not a card"):
        Faults.parse("missing=XX")
    with pytest.raises(FaultSpecError, match="no fault switch"):
        Faults().replace(nope=1)


@pytest.mark.parametrize("spec, why", [
    ("jam=abc", "fault switch jam=abc: expected a number of seconds, 0 or more"),
    ("jam", "fault switch jam: expected a number of seconds, 0 or more"),
    ("jam=inf", "fault switch jam=inf: expected a number of seconds"),
    ("slow_ack_ms=-5", "fault switch slow_ack_ms=-5: expected a number of milliseconds, 0 or more"),
    ("event_buffer=0", "fault switch event_buffer=0: expected a whole number of events, 1 or more"),
    ("bit_flip_rate=2", "fault switch bit_flip_rate=2: expected a probability from 0 to 1"),
    ("face_up_at=0", "fault switch face_up_at=0: expected a card position, 1 or more"),
    ("foreign=2.5", "fault switch foreign=2.5: expected a whole number, 0 or more"),
    ("door_open=maybe", "fault switch door_open=maybe: expected no value, or one of 1/0"),
])
def test_a_bad_value_says_what_the_switch_expects_in_words(spec, why):
    with pytest.raises(FaultSpecError) as info:
        Faults.parse(spec)
    assert str(info.value).startswith(why)
    assert "field type" not in str(info.value) and "convert" not in str(info.value)


@pytest.mark.parametrize("device, spec, why", [
    (SimulatedShoe, "jam=2", "fault switch jam is for the shuffler only: a shoe does not shuffle"),
    (SimulatedShoe, "jam_needs_clear", "fault switch jam_needs_clear is for the shuffler only"),
    (SimulatedShoe, "door_open", "fault switch door_open is for the shuffler only: a shoe has no door"),
    (SimulatedShuffler, "unreadable_at=3", "fault switch unreadable_at is for the shoe only"),
    (SimulatedShuffler, "repeat_read_at=3", "fault switch repeat_read_at is for the shoe only"),
    (SimulatedShuffler, "conflicting_read_at=3", "fault switch conflicting_read_at is for the shoe only"),
    (SimulatedShuffler, "skip_read_at=3", "fault switch skip_read_at is for the shoe only"),
    (SimulatedShoe, "late_report_at=3", "fault switch late_report_at is for the shuffler only: a shoe sends no "
                                        "shuffle reports"),
])
def test_a_switch_the_device_does_not_honour_is_refused(device, spec, why):
    with pytest.raises(FaultSpecError, match=why):
        device(faults=Faults.parse(spec), heartbeat_s=0)
    built = device(heartbeat_s=0)
    with pytest.raises(FaultSpecError, match=why):
        built.set_faults(**Faults.parse(spec).active())
    assert built.faults.active() == {}  # the refused change was not applied


def test_switches_both_devices_honour_are_accepted_by_both():
    shared = "face_up_at=3 missing=AS extra=KD foreign=1 duplicate=QS reboot_at=9 seed=2 byte_at_a_time"
    for device in (SimulatedShoe, SimulatedShuffler):
        assert device(faults=Faults.parse(shared), heartbeat_s=0).faults.face_up_at == 3


@pytest.fixture(scope="module")
def keys():
    private, public = generate_dev_keypair()
    return private, public_key_bytes(public)


def transfer(h, signed, chunk=100, corrupt_chunk=None):
    results = [h.send(FirmwareBegin(len(signed.image), chunk, signed.sha256, signed.signature, signed.header_bytes))[0]]
    for offset in range(0, len(signed.image), chunk):
        data = signed.image[offset:offset + chunk]
        crc = zlib.crc32(data) ^ (1 if offset == corrupt_chunk else 0)
        results += h.send(FirmwareChunk(offset, crc, data))
    results += h.send(FirmwareCommit())
    return results


def test_verified_image_is_installed_and_the_device_reboots_with_the_new_version(run_device, keys):
    private, public = keys
    signed = sign_image(SimulatedShoe.MODEL, "2.1.0", bytes(range(256)) * 3, private)

    async def body(h):
        boot = h.send(Hello(1, 0, "t"))[0].boot_id
        results = transfer(h, signed)
        assert all(r.ok for r in results), results
        assert results[-1].stage is FirmwareStage.COMMIT
        await h.until_true(lambda: h.device.state()["reboots"] == 1)
        ident = h.send(Hello(1, 0, "t"))[0]
        assert ident.firmware_version == "2.1.0" and ident.boot_id != boot
    run_device(lambda: SimulatedShoe(heartbeat_s=0, firmware_public_key=public), body)


def test_image_signed_with_another_key_is_refused(run_device, keys):
    other, _ = generate_dev_keypair()
    signed = sign_image(SimulatedShoe.MODEL, "6.6.6", b"evil" * 100, other)

    async def body(h):
        result = transfer(h, signed)[-1]
        assert not result.ok and "refused" in result.detail
        assert h.send(Hello(1, 0, "t"))[0].firmware_version == "1.0.0"
    run_device(lambda: SimulatedShoe(heartbeat_s=0, firmware_public_key=keys[1]), body)


def test_image_for_another_model_and_bad_chunk_crc_are_refused(run_device, keys):
    private, public = keys

    async def body(h):
        wrong_model = transfer(h, sign_image("CS-6 sim", "2.0.0", b"x" * 300, private))[-1]
        assert not wrong_model.ok and "model" in wrong_model.detail
        results = transfer(h, sign_image(SimulatedShoe.MODEL, "2.0.0", b"y" * 300, private), corrupt_chunk=100)
        bad = [r for r in results if r.stage is FirmwareStage.CHUNK and not r.ok]
        assert bad and "CRC-32" in bad[0].detail
        assert h.send(FirmwareAbort("test"))[0].ok
        assert not h.send(FirmwareCommit())[0].ok  # nothing in progress after ABORT
        assert h.send(Hello(1, 0, "t"))[0].firmware_version == "1.0.0"
    run_device(lambda: SimulatedShoe(heartbeat_s=0, firmware_public_key=public), body)


def test_device_without_a_key_refuses_updates(run_device):
    async def body(h):
        [result] = h.send(FirmwareBegin(10, 10, b"\0" * 32, b"\0" * 64, b""))
        assert not result.ok and "public key" in result.detail
    run_device(lambda: SimulatedShoe(heartbeat_s=0), body)


def test_a_reboot_mid_transfer_forgets_the_partial_image_and_keeps_the_running_firmware(run_device, keys):
    """A device's transfer buffer is RAM: after a power glitch a COMMIT (a host that carried
    on, or a stale one) finds nothing to install, and the device still runs its old firmware."""
    private, public = keys
    signed = sign_image(SimulatedShoe.MODEL, "2.2.0", b"z" * 300, private)

    async def body(h):
        assert all(r.ok for r in h.send(FirmwareBegin(len(signed.image), 100, signed.sha256, signed.signature,
                                                       signed.header_bytes)))
        for offset in range(0, 300, 100):
            data = signed.image[offset:offset + 100]
            assert h.send(FirmwareChunk(offset, zlib.crc32(data), data))[0].ok
        h.device.reboot()  # power glitch before COMMIT
        [commit] = h.send(FirmwareCommit())
        assert not commit.ok and "no transfer in progress" in commit.detail
        assert h.send(Hello(1, 0, "t"))[0].firmware_version == "1.0.0"
    run_device(lambda: SimulatedShoe(heartbeat_s=0, firmware_public_key=public), body)


def test_the_device_refuses_a_lower_version_unless_the_host_says_a_technician_allowed_it(run_device, keys):
    """A host that skips its own check still cannot downgrade the device."""
    private, public = keys
    older = sign_image(SimulatedShoe.MODEL, "0.9.0", b"old" * 100, private)

    async def body(h):
        refused = transfer(h, older)
        assert refused[0].stage is FirmwareStage.BEGIN and not refused[0].ok
        assert "version 0.9.0 is lower than the running 1.0.0" in refused[0].detail
        assert h.send(Hello(1, 0, "t"))[0].firmware_version == "1.0.0"
        [allowed] = h.send(FirmwareAllowDowngrade("J. Doe (tech 4411)"))
        assert allowed.ok and "J. Doe (tech 4411)" in allowed.detail
        assert all(r.ok for r in transfer(h, older))
        await h.until_true(lambda: h.device.state()["firmware_version"] == "0.9.0")
        # the permission was for that one transfer
        assert not transfer(h, sign_image(SimulatedShoe.MODEL, "0.8.0", b"x" * 100, private))[0].ok
    run_device(lambda: SimulatedShoe(heartbeat_s=0, firmware_public_key=public), body)
