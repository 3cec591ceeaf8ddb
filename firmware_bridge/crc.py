"""CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF, not reflected, xorout 0; check("123456789") = 0x29B1.

Table-driven, one table lookup per byte. Frames are short (a card read is 16 bytes on the
wire), so this is far from the bottleneck of the link.
"""
from __future__ import annotations

POLY = 0x1021
INIT = 0xFFFF


def _make_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ POLY) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return tuple(table)


_TABLE = _make_table()


def crc16(data: bytes, crc: int = INIT) -> int:
    """CRC-16/CCITT-FALSE of ``data``; pass a previous result as ``crc`` to continue it."""
    table = _TABLE
    for byte in data:
        crc = ((crc << 8) & 0xFF00) ^ table[(crc >> 8) ^ byte]
    return crc
