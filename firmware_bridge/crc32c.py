"""CRC-32C (Castagnoli), the check of every protocol 2.0 frame sent before the handshake.

Width 32, polynomial 0x1EDC6F41 (0x82F63B78 reflected), init 0xFFFFFFFF, input and output
reflected, final XOR 0xFFFFFFFF; check("123456789") = 0xE3069283 (RFC 3720, appendix B.4,
gives more vectors; the tests check them). Why Castagnoli and not zlib's IEEE polynomial: it
keeps a Hamming distance of 6 up to far longer frames than ours, and it is what the hardware
CRC units of device microcontrollers and SSE 4.2 compute. The standard library has no CRC-32C
and no locked package computes it, so this is a table (one lookup per byte): a Python loop,
about 0.1 us a byte, which only the handshake's few frames pay; after the handshake the
frame's authentication tag replaces it (docs/protocol.md, §7).
"""
from __future__ import annotations

POLY_REFLECTED = 0x82F63B78
INIT = 0xFFFFFFFF
XOR_OUT = 0xFFFFFFFF


def _table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ POLY_REFLECTED if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_TABLE = _table()


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C of ``data``; pass a previous result as ``crc`` to continue it over more bytes."""
    table = _TABLE
    crc ^= XOR_OUT
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ XOR_OUT
