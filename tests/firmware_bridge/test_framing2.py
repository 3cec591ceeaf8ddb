"""Protocol 2.0 frames: CRC-32C before the handshake, the tag after it, and every hostile frame
refused and counted (a bad tag, a replay, a reordering, another session's or direction's frame,
a plain frame inside a session, a 1.x frame); and the link carrying them over a damaged wire."""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import random

import pytest

from firmware_bridge.crc32c import crc32c
from firmware_bridge.errors import TagCounterExhausted
from firmware_bridge.framing import FrameDecoder, FrameKind, cobs_decode, cobs_encode, wire_frame
from firmware_bridge.framing2 import (
    MAX_PAYLOAD_2,
    Decoder2Stats,
    Framing2,
    SessionKeys,
    frame_tag,
    plain_frame_bytes,
    tagged_frame_bytes,
)
from firmware_bridge.link import LinkConfig, LinkState

from tests.firmware_bridge.fb_wire import Wire, make_pair
from tests.support.aio import run
from tests.support.poll import until

pytestmark = pytest.mark.timeout(30)

KEY_AB, KEY_BA = bytes(range(32)), bytes(range(32, 64))
SESSION = bytes(range(0xA0, 0xB0))
CARD = bytes.fromhex("30 00 05 31 00 00 00 04 d2")


def pair(session: bytes = SESSION) -> tuple[Framing2, Framing2]:
    """Two ends of one session: a sends with KEY_AB and checks with KEY_BA, b the other way."""
    a, b = Framing2(), Framing2()
    a.install(SessionKeys(KEY_AB, KEY_BA, session))
    b.install(SessionKeys(KEY_BA, KEY_AB, session))
    return a, b


def taken(framing: Framing2, *wire: bytes):
    decoder = framing.decoder()
    return decoder.feed_fields(b"".join(wire)), decoder.stats


def test_tag_is_hmac_sha256_truncated_rfc_4231():
    # RFC 4231, test case 2: key "Jefe", data "what do ya want for nothing?"
    data = b"what do ya want for nothing?"
    tag = frame_tag(b"Jefe", data[:16], data[16:])
    assert tag == bytes.fromhex("5bdcc146bf60754e6a042426089575c7")


def test_plain_frame_layout_and_round_trip():
    raw = plain_frame_bytes(FrameKind.DATA, 3, 7, CARD)
    assert raw[:5] == bytes([0x21, 3, 7, 0, len(CARD)]) and raw[5:-4] == CARD
    assert int.from_bytes(raw[-4:], "big") == crc32c(raw[:-4])
    frames, stats = taken(Framing2(), Framing2().wire_frame(FrameKind.DATA, 3, 7, CARD))
    assert frames == [(FrameKind.DATA, 3, 7, CARD)] and stats.errors == 0 and stats.tagged_frames == 0


def test_every_single_bit_flip_of_a_plain_frame_is_refused():
    raw = plain_frame_bytes(FrameKind.DATA, 3, 7, CARD)
    for bit in range(8 * len(raw)):
        damaged = bytearray(raw)
        damaged[bit // 8] ^= 1 << (bit % 8)
        frames, stats = taken(Framing2(), b"\x00" + cobs_encode(bytes(damaged)) + b"\x00")
        assert frames == [] and stats.errors == 1, bit


def test_tagged_frame_layout_and_round_trip():
    a, b = pair()
    raw = a.frame_bytes(FrameKind.DATA, 0, 0, CARD)
    assert raw[:9] == bytes([0x61, 0, 0, 0, len(CARD), 0, 0, 0, 1]) and raw[9:-16] == CARD
    assert raw[-16:] == hmac.digest(KEY_AB, SESSION + raw[:-16], hashlib.sha256)[:16]
    wire = [a.wire_frame(FrameKind.DATA, i, 0, CARD) for i in range(3)] + [a.wire_frame(FrameKind.ACK, 0, 5, b"")]
    frames, stats = taken(b, *wire)
    assert frames == [(FrameKind.DATA, i, 0, CARD) for i in range(3)] + [(FrameKind.ACK, 0, 5, b"")]
    assert stats.tagged_frames == 4 and stats.errors == 0


def test_every_single_bit_flip_of_a_tagged_frame_is_refused():
    a, _ = pair()
    raw = a.frame_bytes(FrameKind.DATA, 1, 2, CARD)
    for bit in range(8 * len(raw)):
        _, b = pair()
        damaged = bytearray(raw)
        damaged[bit // 8] ^= 1 << (bit % 8)
        frames, stats = taken(b, b"\x00" + cobs_encode(bytes(damaged)) + b"\x00")
        assert frames == [] and stats.errors == 1, bit


def test_forged_tag_is_refused_and_counted():
    a, b = pair()
    raw = bytearray(a.frame_bytes(FrameKind.DATA, 0, 0, CARD))
    raw[-16:] = bytes(16)
    frames, stats = taken(b, b"\x00" + cobs_encode(bytes(raw)) + b"\x00")
    assert frames == [] and stats.tag_errors == 1


def test_replayed_frame_is_refused_and_counted():
    a, b = pair()
    first = a.wire_frame(FrameKind.DATA, 0, 0, CARD)
    frames, stats = taken(b, first, a.wire_frame(FrameKind.DATA, 1, 0, CARD), first)
    assert [f[1] for f in frames] == [0, 1] and stats.replayed == 1 and stats.tag_errors == 0


def test_reordered_frames_are_refused_and_counted():
    a, b = pair()
    one, two, three = (a.wire_frame(FrameKind.DATA, i, 0, CARD) for i in range(3))
    frames, stats = taken(b, two, one, three)
    assert [f[1] for f in frames] == [1, 2] and stats.replayed == 1


def test_a_lost_frame_leaves_a_gap_that_is_taken():
    a, b = pair()
    one, _lost, three = (a.wire_frame(FrameKind.DATA, i, 0, CARD) for i in range(3))
    frames, stats = taken(b, one, three)
    assert [f[1] for f in frames] == [0, 2] and stats.errors == 0  # the link NAKs the gap


def test_frame_from_another_session_is_refused():
    earlier, _ = pair(session=bytes(16))
    capture = [earlier.wire_frame(FrameKind.DATA, i, 0, CARD) for i in range(3)]
    _, b = pair()
    frames, stats = taken(b, *capture)
    assert frames == [] and stats.tag_errors == 3


def test_frame_with_another_sessions_keys_is_refused():
    other = Framing2()
    other.install(SessionKeys(bytes(32), bytes([1]) * 32, SESSION))
    _, b = pair()
    frames, stats = taken(b, other.wire_frame(FrameKind.DATA, 0, 0, CARD))
    assert frames == [] and stats.tag_errors == 1


def test_reflected_frame_is_refused():
    a, _ = pair()
    frames, stats = taken(a, a.wire_frame(FrameKind.DATA, 0, 0, CARD))
    assert frames == [] and stats.tag_errors == 1


def test_plain_frames_inside_a_session():
    _, b = pair()
    plain = Framing2()
    data, ack = plain.wire_frame(FrameKind.DATA, 0, 0, CARD), plain.wire_frame(FrameKind.ACK, 0, 1, b"")
    reset = plain.wire_frame(FrameKind.RESET, 0, 0, bytes(4))
    # before any tagged frame: the handshake's last plain ACK is taken, plain DATA never is
    frames, stats = taken(b, data, ack, reset)
    assert frames == [(FrameKind.ACK, 0, 1, b""), (FrameKind.RESET, 0, 0, bytes(4))] and stats.unauthenticated == 1


def test_plain_ack_refused_once_a_tagged_frame_came():
    a, b = pair()
    plain = Framing2()
    decoder = b.decoder()
    decoder.feed_fields(a.wire_frame(FrameKind.ACK, 0, 0, b""))
    frames = decoder.feed_fields(plain.wire_frame(FrameKind.ACK, 0, 1, b"") + plain.wire_frame(FrameKind.NAK, 0, 1, b""))
    assert frames == [] and decoder.stats.unauthenticated == 2
    frames = decoder.feed_fields(plain.wire_frame(FrameKind.RESET, 0, 0, b"abcd"))
    assert frames == [(FrameKind.RESET, 0, 0, b"abcd")]  # a reset always: it only ends the session


def test_the_device_tags_only_once_the_host_did():
    host, device = Framing2(), Framing2()
    device.install(SessionKeys(KEY_BA, KEY_AB, SESSION), tag_once_peer_does=True)
    assert device.frame_bytes(FrameKind.DATA, 0, 0, CARD)[0] == 0x21  # a resent IDENT2 stays plain
    host.install(SessionKeys(KEY_AB, KEY_BA, SESSION))
    frames, _ = taken(device, host.wire_frame(FrameKind.DATA, 0, 0, b"proof"))
    assert frames == [(FrameKind.DATA, 0, 0, b"proof")]
    assert device.frame_bytes(FrameKind.ACK, 0, 1, b"")[0] == 0x62


def test_tagged_frame_without_a_session_key():
    a, _ = pair()
    frames, stats = taken(Framing2(), a.wire_frame(FrameKind.DATA, 0, 0, CARD))
    assert frames == [] and stats.tag_errors == 1


def test_resets_are_never_tagged():
    a, _ = pair()
    assert a.frame_bytes(FrameKind.RESET, 0, 0, b"abcd")[0] == 0x24
    with pytest.raises(ValueError):
        tagged_frame_bytes(FrameKind.RESET, 0, 0, b"abcd", 1, KEY_AB, SESSION)


def test_a_1x_frame_is_counted_as_a_downgrade_offer_and_refused():
    frames, stats = taken(Framing2(), wire_frame(FrameKind.DATA, 0, 0, CARD))
    assert frames == [] and stats.legacy_frames == 1


def test_a_1x_decoder_refuses_2_0_frames():
    decoder = FrameDecoder()
    a, _ = pair()
    assert decoder.feed_fields(Framing2().wire_frame(FrameKind.DATA, 0, 0, CARD) + a.wire_frame(FrameKind.DATA, 0, 0, CARD)) == []
    assert decoder.stats.errors == 2


def test_cleared_keys_mean_plain_frames_again():
    a, b = pair()
    a.clear()
    b.clear()
    frames, stats = taken(b, a.wire_frame(FrameKind.DATA, 0, 0, CARD))
    assert frames == [(FrameKind.DATA, 0, 0, CARD)] and stats.tagged_frames == 0


def test_counter_exhaustion_refuses_to_send(monkeypatch):
    a, _ = pair()
    a._sent = 0xFFFFFFFF - 1
    a.frame_bytes(FrameKind.DATA, 0, 0, CARD)
    with pytest.raises(TagCounterExhausted):
        a.frame_bytes(FrameKind.DATA, 0, 0, CARD)


def test_longest_payload():
    a, b = pair()
    payload = bytes(range(256)) * 3 + bytes(MAX_PAYLOAD_2 - 768)
    frames, _ = taken(b, a.wire_frame(FrameKind.DATA, 0, 0, payload))
    assert frames == [(FrameKind.DATA, 0, 0, payload)]
    with pytest.raises(ValueError):
        a.frame_bytes(FrameKind.DATA, 0, 0, payload + b"x")


def test_decoder_result_does_not_depend_on_chunking():
    a, b_whole = pair()
    rng = random.Random(4)
    stream = b"".join(a.wire_frame(FrameKind.DATA, i % 256, 0, bytes(rng.randrange(256) for _ in range(rng.randrange(40))))
                      for i in range(200))
    stream += b"\x55" * 3000 + b"\x00"  # a run longer than any frame
    whole, stats = taken(b_whole, stream)
    _, b_chunked = pair()
    decoder, chunked, pos = b_chunked.decoder(), [], 0
    while pos < len(stream):
        n = rng.randint(1, 60)
        chunked += decoder.feed_fields(stream[pos : pos + n])
        pos += n
    assert len(whole) == 200 and chunked == whole and stats.oversize == decoder.stats.oversize == 1


def test_link_carries_tagged_frames_over_a_damaged_wire():
    async def main():
        fa, fb = pair()
        config = LinkConfig(initial_rto=0.02, min_rto=0.005, max_rto=0.2)
        a, b = make_pair(Wire(seed=1, corrupt=0.05, drop=0.02), Wire(seed=2, corrupt=0.05, drop=0.02), config,
                         framings=(fa, fb))
        a.link.start()
        await until(lambda: a.link.state is LinkState.UP and b.link.state is LinkState.UP)
        to_b = [bytes([i % 256]) * (i % 50) + b"\x00card" for i in range(300)]
        await asyncio.gather(*(a.link.send(p) for p in to_b))
        await until(lambda: len(b.delivered) == 300)
        assert b.delivered == to_b
        framing = b.link.stats.framing
        assert isinstance(framing, Decoder2Stats)
        assert framing.tagged_frames > 300 and framing.tag_errors + framing.crc_errors + framing.cobs_errors > 0
        a.link.close()
        b.link.close()

    run(main())


def test_link_refuses_an_injected_frame():
    async def main():
        fa, fb = pair()
        a, b = make_pair(framings=(fa, fb))
        a.link.start()
        await until(lambda: a.link.state is LinkState.UP and b.link.state is LinkState.UP)
        await a.link.send(b"one")
        await until(lambda: b.delivered == [b"one"])
        # someone on the cable: a plain DATA frame, a forged tagged one, a replay of the first
        b.link.bytes_received(Framing2().wire_frame(FrameKind.DATA, 1, 0, b"forged"))
        rogue = Framing2()
        rogue.install(SessionKeys(bytes(32), bytes([1]) * 32, SESSION))
        b.link.bytes_received(rogue.wire_frame(FrameKind.DATA, 1, 0, b"forged"))
        first_data = next(w for w in a.wire_out.written if cobs_decode(w[1:-1])[0] == 0x61)
        b.link.bytes_received(first_data)
        await a.link.send(b"two")
        await until(lambda: b.delivered == [b"one", b"two"])
        stats = b.link.stats.framing
        assert isinstance(stats, Decoder2Stats)
        assert (stats.unauthenticated, stats.tag_errors, stats.replayed) == (1, 1, 1)
        a.link.close()
        b.link.close()

    run(main())
