"""docs/protocol.md's protocol 2.0 sections stay true: their worked frames are what the code
produces. Run this file as a script to print them for pasting after a change:
``.venv/bin/python tests/firmware_bridge/test_protocol2_doc.py``."""
from __future__ import annotations

import pathlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from core.cards import Card, Orientation
from firmware_bridge.framing import FrameKind, cobs_encode
from firmware_bridge.framing2 import (
    TAGGED_HEADER_LEN,
    Framing2,
    SessionKeys,
    direction_of,
    frame_nonce,
    plain_frame_bytes,
)
from firmware_bridge.handshake2 import DeviceHandshake, HostHandshake, fingerprint, raw_public_key
from firmware_bridge.messages import CardRead, Event, encode

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "protocol.md"

#: the worked examples' session: keys and session id anyone can type in to check a tag
HOST_TO_DEVICE_KEY = bytes(range(0x00, 0x20))
DEVICE_TO_HOST_KEY = bytes(range(0x20, 0x40))
SESSION_ID = bytes(range(0xA0, 0xB0))


def card_event() -> bytes:
    card = CardRead(index=5, card=Card.parse("AS"), orientation=Orientation.FACE_DOWN, device_time_ms=1234)
    return encode(Event(1000, card))


def frame_examples() -> list[tuple[str, bytes, int, bytes]]:
    """(title, frame before COBS, header length, the payload it carries)."""
    shoe = Framing2()
    keys = SessionKeys(DEVICE_TO_HOST_KEY, HOST_TO_DEVICE_KEY, SESSION_ID)
    shoe.install(keys)
    first = shoe.frame_bytes(FrameKind.DATA, 0, 1, card_event())
    second = shoe.frame_bytes(FrameKind.ACK, 0, 2, b"")
    return [
        ("2.0 plain DATA (before the handshake): EVENT 1000, the CARD READ, seq 0, ack 1",
         plain_frame_bytes(FrameKind.DATA, 0, 1, card_event()), 5, card_event()),
        ("2.0 plain RESET with nonce 12 34 56 78", plain_frame_bytes(FrameKind.RESET, 0, 0, bytes.fromhex("12345678")),
         5, bytes.fromhex("12345678")),
        ("2.0 tagged DATA from the shoe, the session's first frame (counter 1): the same EVENT, seq 0, ack 1",
         first, 9, card_event()),
        ("2.0 tagged ACK from the shoe, counter 2, ack 2", second, 9, b""),
    ]


def frame_block(title: str, raw: bytes, header_len: int, payload: bytes) -> str:
    check = 4 if header_len == 5 else 16
    lines = [f"{title}:"]
    if header_len == TAGGED_HEADER_LEN:  # what is sealed, and under which nonce and associated data
        direction = direction_of(DEVICE_TO_HOST_KEY, HOST_TO_DEVICE_KEY)
        counter = int.from_bytes(raw[5:9], "big")
        lines += [f"    nonce    {frame_nonce(direction, counter).hex(' ')}",
                  f"    aad      {(SESSION_ID + raw[:header_len]).hex(' ')}",
                  f"    payload  {payload.hex(' ') or '-'}"]
    lines += [
        f"    frame    {raw[:header_len].hex(' ')} | {raw[header_len:-check].hex(' ') or '-'} | {raw[-check:].hex(' ')}",
        f"    wire     00 {cobs_encode(raw).hex(' ')} 00",
    ]
    return "\n".join(lines)


def handshake_example() -> str:
    """A whole handshake from fixed keys and challenges (Ed25519 signatures are deterministic)."""
    host_identity = Ed25519PrivateKey.from_private_bytes(bytes([0x01]) * 32)
    shoe_identity = Ed25519PrivateKey.from_private_bytes(bytes([0x02]) * 32)
    host_ephemeral = X25519PrivateKey.from_private_bytes(bytes([0x03]) * 32)
    shoe_ephemeral = X25519PrivateKey.from_private_bytes(bytes([0x04]) * 32)
    shoe_key = raw_public_key(shoe_identity.public_key())
    host = HostHandshake(host_identity, "table-7", {("shoe", "CR-200", "SHOE0001"): shoe_key}.get,
                         random_bytes=lambda n: bytes([0x11]) * n, new_ephemeral=lambda: host_ephemeral)
    shoe = DeviceHandshake(shoe_identity, "shoe", "CR-200", "SHOE0001", "2.0.1", 77,
                           raw_public_key(host_identity.public_key()), random_bytes=lambda n: bytes([0x22]) * n,
                           new_ephemeral=lambda: shoe_ephemeral)
    hello = host.hello()
    ident = shoe.on_hello(hello)
    _, keys, proof = host.on_ident(ident)
    assert shoe.on_proof(proof).keys.session_id == keys.session_id

    def lines(data: bytes) -> list[str]:
        return [f"             {data[i:i + 32].hex(' ')}" for i in range(0, len(data), 32)]

    return "\n".join([
        "identity keys (Ed25519 private): host 01 × 32, shoe 02 × 32; X25519 private: host 03 × 32, shoe 04 × 32;",
        "challenges: host 11 × 32, shoe 22 × 32",
        f"shoe key fingerprint {fingerprint(shoe_key)}",
        f"HELLO2 ({len(hello)} bytes)", *lines(hello),
        f"IDENT2 ({len(ident)} bytes)", *lines(ident),
        f"PROOF2 ({len(proof)} bytes)", *lines(proof),
        f"host -> device key  {keys.send_key.hex(' ')}",
        f"device -> host key  {keys.receive_key.hex(' ')}",
        f"session id          {keys.session_id.hex(' ')}",
    ])


def test_doc_2_0_handshake_matches_the_code():
    assert handshake_example() in DOC.read_text(), "docs/protocol.md 2.0 handshake example out of date"


def test_doc_2_0_frames_match_the_code():
    text = DOC.read_text()
    for title, raw, header_len, payload in frame_examples():
        assert frame_block(title, raw, header_len, payload) in text, f"docs/protocol.md 2.0 example out of date: {title}"


if __name__ == "__main__":
    print(handshake_example())
    print()
    for example in frame_examples():
        print(frame_block(*example))
        print()
