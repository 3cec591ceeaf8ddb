"""What protocol 2.0's frames cost the host per card frame, next to 1.1's (a benchmark, not a test).

One process, no port: a numbered CardRead event (the card path's frame) built and read back
N times by each framing, sending (``wire_frame``) and receiving (the stream decoder) timed
apart: 1.1, 2.0 plain (CRC-32C) and 2.0 tagged (the payload sealed with ChaCha20-Poly1305,
docs/protocol.md §7); then the AEAD alone (seal and open one card frame's payload), beside
an HMAC-SHA256 tag of the same bytes for comparison, and the bytes a card frame takes on
the wire with what a 921,600-baud line carries of them.

    .venv/bin/python benchmarks/frame_tag.py [--frames 20000]

benchmarks/link.py measures the 1.1 and 2.0 links end to end over a pty.
"""
from __future__ import annotations

import argparse
import hashlib
import hmac
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305  # noqa: E402

from core.cards import Card, Orientation  # noqa: E402
from firmware_bridge.framing import FrameDecoder, FrameKind, wire_frame  # noqa: E402
from firmware_bridge.framing2 import Framing2, SessionKeys  # noqa: E402
from firmware_bridge.messages import CardRead, Event, encode  # noqa: E402

LINE_BYTES_PER_S = 921_600 // 10  # 8N1: ten bits a byte


def per_call_us(fn: Callable[[int], object], n: int) -> float:
    """The best of three runs of ``fn(i)`` for i in range(n), in microseconds a call."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for i in range(n):
            fn(i)
        best = min(best, time.perf_counter() - start)
    return best / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=20_000)
    n = parser.parse_args().frames
    payload = encode(Event(1000, CardRead(5, Card.parse("AS"), Orientation.FACE_DOWN, 1234)))
    keys = SessionKeys(bytes(range(32)), bytes(range(32, 64)), bytes(16))
    mirrored = SessionKeys(keys.receive_key, keys.send_key, keys.session_id)

    rows: list[tuple[str, float, float, int]] = []
    frames_11 = [wire_frame(FrameKind.DATA, i % 256, 0, payload) for i in range(n)]
    decoder_11 = FrameDecoder()
    rows.append(("1.1 (CRC-16)", per_call_us(lambda i: wire_frame(FrameKind.DATA, i % 256, 0, payload), n),
                 per_call_us(lambda i: decoder_11.feed_fields(frames_11[i]), n), len(frames_11[0])))

    plain = Framing2()
    frames_plain = [plain.wire_frame(FrameKind.DATA, i % 256, 0, payload) for i in range(n)]
    decoder_plain = Framing2().decoder()
    rows.append(("2.0 plain (CRC-32C)", per_call_us(lambda i: plain.wire_frame(FrameKind.DATA, i % 256, 0, payload), n),
                 per_call_us(lambda i: decoder_plain.feed_fields(frames_plain[i]), n), len(frames_plain[0])))

    sender = Framing2()
    sender.install(keys)
    send_us = per_call_us(lambda i: sender.wire_frame(FrameKind.DATA, i % 256, 0, payload), n)
    fresh = Framing2()
    fresh.install(keys)
    frames_tagged = [fresh.wire_frame(FrameKind.DATA, i % 256, 0, payload) for i in range(3 * n)]
    receiver = Framing2()
    receiver.install(mirrored)
    decoder_tagged = receiver.decoder()
    # three timed runs over one stream of 3n frames, so each run's counters are new
    offsets = iter(range(0, 3 * n, n))
    best = float("inf")
    for offset in offsets:
        start = time.perf_counter()
        for i in range(offset, offset + n):
            decoder_tagged.feed_fields(frames_tagged[i])
        best = min(best, time.perf_counter() - start)
    assert decoder_tagged.stats.tagged_frames == 3 * n, decoder_tagged.stats
    rows.append(("2.0 tagged (ChaCha20-Poly1305)", send_us, best / n * 1e6, len(frames_tagged[0])))

    print(f"frame cost: python {sys.version.split()[0]}, {n:,} numbered CardRead frames ({len(payload)}-byte payload), "
          "best of 3")
    print(f"{'framing':32} {'send us':>8} {'receive us':>11} {'wire bytes':>11} {'921,600-baud line':>18}")
    for name, send, receive, size in rows:
        print(f"{name:32} {send:8.2f} {receive:11.2f} {size:11} {LINE_BYTES_PER_S // size:>12,} frames/s")
    header = bytes(9)
    aad = keys.session_id + header
    aead = ChaCha20Poly1305(keys.send_key)
    nonces = [i.to_bytes(12, "big") for i in range(n)]
    sealed = [aead.encrypt(nonces[i], payload, aad) for i in range(n)]
    seal_us = per_call_us(lambda i: aead.encrypt(nonces[i], payload, aad), n)
    open_us = per_call_us(lambda i: aead.decrypt(nonces[i], sealed[i], aad), n)
    hmac_us = per_call_us(lambda i: hmac.digest(keys.send_key, aad + payload, hashlib.sha256), n)
    print(f"AEAD alone: ChaCha20-Poly1305 seal {seal_us:.2f} us, open {open_us:.2f} us a frame "
          f"(an HMAC-SHA256 tag of the same bytes, no encryption: {hmac_us:.2f} us)")

if __name__ == "__main__":
    main()
