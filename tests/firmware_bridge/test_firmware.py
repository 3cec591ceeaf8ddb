"""Signed images: build, parse, verify; the device-side receiver refuses every defect."""
from __future__ import annotations

import hashlib
import os
import zlib

import pytest
from cryptography.hazmat.primitives import serialization

from firmware_bridge.errors import FirmwareError, FirmwareFormatError, FirmwareSignatureError
from firmware_bridge.firmware import (
    SIGNATURE_LEN,
    FirmwareHeader,
    FirmwareReceiver,
    SignedImage,
    generate_dev_keypair,
    load_public_key,
    public_key_bytes,
    sign_image,
    verify_image,
    verify_signature,
)
from firmware_bridge.messages import FirmwareAbort, FirmwareBegin, FirmwareChunk, FirmwareCommit, FirmwareStage

IMAGE = os.urandom(3000)


@pytest.fixture(scope="module")
def keys():
    return generate_dev_keypair()


@pytest.fixture(scope="module")
def signed(keys):
    return sign_image("CS-6000", "2.4.1", IMAGE, keys[0])


def test_good_image_verifies_and_round_trips_through_a_file(signed, keys):
    parsed = SignedImage.from_bytes(signed.to_bytes())
    assert parsed == signed
    assert verify_image(parsed, keys[1]) == FirmwareHeader("CS-6000", "2.4.1", len(IMAGE))


def test_header_layout(signed):
    assert signed.header_bytes == b"CDFW\x01\x07CS-6000\x052.4.1" + len(IMAGE).to_bytes(4, "big")


def test_wrong_key_is_refused(signed):
    _, other = generate_dev_keypair()
    with pytest.raises(FirmwareSignatureError, match="does not verify against public key " + public_key_bytes(other).hex()):
        verify_image(signed, other)


def test_tampered_image_is_refused(signed, keys):
    data = bytearray(signed.to_bytes())
    data[len(signed.header_bytes) + 100] ^= 0x01
    with pytest.raises(FirmwareSignatureError, match="image refused"):
        verify_image(SignedImage.from_bytes(bytes(data)), keys[1])


def test_tampered_header_is_refused(signed, keys):
    data = signed.to_bytes().replace(b"2.4.1", b"2.4.2", 1)  # someone relabels an old build
    with pytest.raises(FirmwareSignatureError):
        verify_image(SignedImage.from_bytes(data), keys[1])


def test_truncated_signature_is_refused(signed, keys):
    with pytest.raises(FirmwareFormatError, match="file has 3063 bytes after the header"):
        SignedImage.from_bytes(signed.to_bytes()[:-1])
    with pytest.raises(FirmwareSignatureError, match="signature is 63 bytes"):
        verify_signature(signed.header_bytes, signed.image, signed.signature[:-1], keys[1])


def test_unsigned_or_foreign_files_are_refused_clearly():
    with pytest.raises(FirmwareFormatError, match="not a firmware image: magic 7f 45 4c 46"):
        SignedImage.from_bytes(b"\x7fELF" + bytes(100))
    with pytest.raises(FirmwareFormatError, match="image format 02"):
        SignedImage.from_bytes(b"CDFW\x02")
    with pytest.raises(FirmwareFormatError, match="model at byte 5"):
        SignedImage.from_bytes(b"CDFW\x01\x09abc")


def test_public_key_loading(keys):
    raw = public_key_bytes(keys[1])
    pem = keys[1].public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert public_key_bytes(load_public_key(raw)) == raw
    assert public_key_bytes(load_public_key(pem)) == raw
    with pytest.raises(FirmwareError, match="not an Ed25519 public key"):
        load_public_key(b"nonsense")


def transfer_messages(signed, chunk=512):
    yield FirmwareBegin(len(signed.image), chunk, signed.sha256, signed.signature, signed.header_bytes)
    for off in range(0, len(signed.image), chunk):
        data = signed.image[off : off + chunk]
        yield FirmwareChunk(off, zlib.crc32(data), data)
    yield FirmwareCommit()


def test_receiver_installs_a_good_image(signed, keys):
    rx = FirmwareReceiver(keys[1], "CS-6000")
    results = [rx.handle(m) for m in transfer_messages(signed)]
    assert all(r.ok for r in results), results
    assert results[-1].stage is FirmwareStage.COMMIT and results[-1].offset == 0
    assert results[-2].offset == len(IMAGE)
    assert rx.installed == FirmwareHeader("CS-6000", "2.4.1", len(IMAGE))


def test_receiver_checks_the_signature_itself(keys):
    other_private, _ = generate_dev_keypair()
    forged = sign_image("CS-6000", "6.6.6", IMAGE, other_private)
    rx = FirmwareReceiver(keys[1], "CS-6000")
    results = [rx.handle(m) for m in transfer_messages(forged)]
    assert all(r.ok for r in results[:-1])
    assert not results[-1].ok and "does not verify" in results[-1].detail
    assert rx.installed is None


def test_receiver_refuses_other_models_bad_chunks_and_wrong_digests(signed, keys):
    rx = FirmwareReceiver(keys[1], "SHOE-2")
    begin, first, *_ = transfer_messages(signed)
    refused = rx.handle(begin)
    assert not refused.ok and "model 'CS-6000', this device is 'SHOE-2'" in refused.detail

    rx = FirmwareReceiver(keys[1], "CS-6000")
    assert rx.handle(begin).ok
    bad = FirmwareChunk(0, first.crc32 ^ 1, first.data)
    result = rx.handle(bad)
    assert not result.ok and "CRC-32" in result.detail and result.offset == 0
    gap = rx.handle(FirmwareChunk(512, zlib.crc32(b"x"), b"x"))
    assert not gap.ok and "expected 0" in gap.detail

    wrong_digest = FirmwareBegin(len(IMAGE), 512, hashlib.sha256(b"other").digest(), signed.signature, signed.header_bytes)
    msgs = list(transfer_messages(signed))
    results = [rx.handle(m) for m in [wrong_digest, *msgs[1:]]]
    assert not results[-1].ok and "SHA-256" in results[-1].detail
    assert rx.handle(FirmwareCommit()).detail == "COMMIT without BEGIN"
    assert rx.handle(FirmwareAbort("operator")).ok


def test_signature_length_constant_matches_ed25519(keys):
    assert len(keys[0].sign(b"x")) == SIGNATURE_LEN
