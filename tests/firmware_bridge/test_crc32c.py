"""CRC-32C against RFC 3720's vectors and a bit-by-bit reference."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from firmware_bridge.crc32c import crc32c

# RFC 3720, appendix B.4 (the RFC lists each CRC's bytes least significant first)
ISCSI_READ_PDU = bytes.fromhex(
    "01c00000000000000000000000000000"
    "14000000000004000000001400000018"
    "28000000000000000200000000000000"
)
RFC_3720_VECTORS = [
    (bytes(32), "aa 36 91 8a"),
    (b"\xff" * 32, "43 ab a8 62"),
    (bytes(range(32)), "4e 79 dd 46"),
    (bytes(range(31, -1, -1)), "5c db 3f 11"),
    (ISCSI_READ_PDU, "56 3a 96 d9"),
]


def reference_crc32c(data: bytes) -> int:
    """CRC-32C computed bit by bit from its definition (reflected polynomial 0x82F63B78)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_check_value():
    assert crc32c(b"123456789") == 0xE3069283


def test_rfc_3720_vectors():
    for data, crc_bytes_lsb_first in RFC_3720_VECTORS:
        assert crc32c(data).to_bytes(4, "little") == bytes.fromhex(crc_bytes_lsb_first), data.hex()


def test_empty_input():
    assert crc32c(b"") == 0


@given(st.binary(max_size=300), st.integers(min_value=0, max_value=300))
def test_matches_reference_and_continues(data, cut):
    assert crc32c(data) == reference_crc32c(data)
    assert crc32c(data[cut:], crc32c(data[:cut])) == crc32c(data)
