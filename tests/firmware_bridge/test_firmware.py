"""Signed images: build, parse, verify; the device-side receiver refuses every defect."""
from __future__ import annotations

import hashlib
import os

import pytest
from cryptography.hazmat.primitives import serialization

from firmware_bridge.errors import (
    FirmwareError,
    FirmwareFormatError,
    FirmwareSignatureError,
    FirmwareTargetMismatch,
    FirmwareTransferError,
)
from firmware_bridge.firmware import (
    SIGNATURE_LEN,
    FirmwareHeader,
    SignedImage,
    generate_dev_keypair,
    load_public_key,
    public_key_bytes,
    sign_image,
    verify_image,
    verify_on_device,
    verify_signature,
)

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
    with pytest.raises(FirmwareFormatError, match="model at byte 5") as err:
        SignedImage.from_bytes(b"CDFW\x01\x09abc")
    assert str(err.value).endswith(": 43 44 46 57 01 09 61 62 63")  # the offending bytes, in hex


def test_public_key_loading(keys):
    raw = public_key_bytes(keys[1])
    pem = keys[1].public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert public_key_bytes(load_public_key(raw)) == raw
    assert public_key_bytes(load_public_key(pem)) == raw
    with pytest.raises(FirmwareError, match="not an Ed25519 public key"):
        load_public_key(b"nonsense")


@pytest.mark.parametrize(("data", "what"), [
    (b"nonsense", "8 bytes, not PEM"),
    (b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "a PEM block whose public key cannot be read"),
    (b"-----BEGIN PUBLIC KEY-----\nnot base64 at all\n", "a PEM block whose public key cannot be read"),
])
def test_a_key_file_that_is_no_key_is_one_line_in_our_words(data, what):
    """cardd --check-config and cardctl firmware flash --key show this line: cryptography's own text
    (a FAQ link, ASN.1 tags) said nothing to a technician."""
    with pytest.raises(FirmwareError) as err:
        load_public_key(data)
    assert str(err.value).startswith(f"not an Ed25519 public key (32 raw bytes or PEM): {what}")
    assert "cryptography" not in str(err.value) and "ASN.1" not in str(err.value)


def test_device_check_accepts_a_good_image(signed, keys):
    raw_key = public_key_bytes(keys[1])
    args = (signed.header_bytes, signed.image, signed.sha256, signed.signature)
    assert verify_on_device(*args, raw_key, model="CS-6000") == "2.4.1"
    assert verify_on_device(*args, keys[1], model="CS-6000") == "2.4.1"


def test_device_check_refuses_forgery_digest_and_model(signed, keys):
    other_private, _ = generate_dev_keypair()
    forged = sign_image("CS-6000", "6.6.6", IMAGE, other_private)
    with pytest.raises(FirmwareSignatureError, match="does not verify"):
        verify_on_device(forged.header_bytes, forged.image, forged.sha256, forged.signature, keys[1], model="CS-6000")
    with pytest.raises(FirmwareTransferError, match="SHA-256 of the received image"):
        verify_on_device(signed.header_bytes, signed.image, hashlib.sha256(b"x").digest(), signed.signature,
                         keys[1], model="CS-6000")
    with pytest.raises(FirmwareTargetMismatch, match="model 'CS-6000', this device is 'SHOE-2'"):
        verify_on_device(signed.header_bytes, signed.image, signed.sha256, signed.signature, keys[1], model="SHOE-2")


def test_signature_length_constant_matches_ed25519(keys):
    assert len(keys[0].sign(b"x")) == SIGNATURE_LEN
