"""Protocol 2.0 frames: CRC-32C before the handshake, ChaCha20-Poly1305 after it (a tapped frame
shows no payload), and every hostile frame refused and counted (a bad tag, a replay, a
reordering, another session's or direction's frame, a plain frame inside a session, a 1.x
frame); and the link carrying them over a damaged wire."""
from __future__ import annotations

import asyncio
import random

import pytest
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from firmware_bridge.crc32c import crc32c
from firmware_bridge.errors import TagCounterExhausted
from firmware_bridge.framing import FrameDecoder, FrameKind, cobs_decode, cobs_encode, wire_frame
from firmware_bridge.framing2 import (
    MAX_PAYLOAD_2,
    Decoder2Stats,
    Framing2,
    SessionKeys,
    direction_of,
    frame_nonce,
    plain_frame_bytes,
    tagged_frame_bytes,
)
from firmware_bridge.link import LinkConfig, LinkEvent, LinkState

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


def test_the_aead_is_chacha20_poly1305_rfc_8439():
    # RFC 8439, section 2.8.2: the AEAD the frames are sealed with
    key = bytes(range(0x80, 0xA0))
    nonce = bytes.fromhex("07000000 4041424344454647")
    aad = bytes.fromhex("50515253c0c1c2c3c4c5c6c7")
    plaintext = (b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, "
                 b"sunscreen would be it.")
    sealed = ChaCha20Poly1305(key).encrypt(nonce, plaintext, aad)
    assert sealed[:16] == bytes.fromhex("d31a8d34648e60db7b86afbc53ef7ec2")
    assert sealed[-16:] == bytes.fromhex("1ae10b594f09e26a7e902ecbd0600691")


def test_nonce_is_the_direction_and_the_counter():
    assert frame_nonce(0, 1) == bytes(11) + b"\x01"
    assert frame_nonce(1, 0x01020304) == b"\x01" + bytes(7) + bytes([1, 2, 3, 4])
    assert direction_of(KEY_AB, KEY_BA) == 0 and direction_of(KEY_BA, KEY_AB) == 1
    a, b = pair()
    assert a.keys is not None and b.keys is not None
    assert {a.keys.send_direction, b.keys.send_direction} == {0, 1}


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
    header = bytes([0x61, 0, 0, 0, len(CARD), 0, 0, 0, 1])
    assert raw[:9] == header and len(raw) == 9 + len(CARD) + 16
    # the header is the associated data (with the session id), the payload is encrypted
    assert raw[9:] == ChaCha20Poly1305(KEY_AB).encrypt(frame_nonce(0, 1), CARD, SESSION + header)
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


def test_a_tapped_frame_does_not_show_its_payload():
    a, _ = pair()
    hole_card = CARD  # a CardRead of a card dealt face down
    wire = b"".join(a.wire_frame(FrameKind.DATA, i, 0, hole_card) for i in range(2))
    raw = [cobs_decode(w) for w in wire.split(b"\x00") if w]
    assert all(hole_card not in r and r[9:-16] != hole_card for r in raw)
    assert raw[0][9:-16] != raw[1][9:-16]  # the same card twice: two unrelated ciphertexts
    for length in range(3, len(hole_card)):  # not a run of it either
        assert not any(hole_card[i : i + length] in r[9:] for r in raw for i in range(len(hole_card) - length + 1)), length


def test_a_header_changed_on_the_cable_is_refused():
    a, _ = pair()
    raw = bytearray(a.frame_bytes(FrameKind.DATA, 1, 2, CARD))
    for offset in (1, 2, 8):  # seq, ack, counter: the associated data
        _, b = pair()
        damaged = bytearray(raw)
        damaged[offset] ^= 0x01
        frames, stats = taken(b, b"\x00" + cobs_encode(bytes(damaged)) + b"\x00")
        assert frames == [] and stats.tag_errors == 1, offset
    _, b = pair()
    damaged = bytearray(raw)
    damaged[0] = 0x62  # DATA made ACK
    frames, stats = taken(b, b"\x00" + cobs_encode(bytes(damaged)) + b"\x00")
    assert frames == [] and stats.tag_errors == 1


def test_the_same_keys_are_never_installed_twice():
    a, _ = pair()
    keys = a.keys
    assert keys is not None
    a.clear()
    with pytest.raises(ValueError, match="nonces would repeat"):
        a.install(keys)
    a.install(SessionKeys(KEY_AB, KEY_BA, bytes(16)))  # a new session: new keys


def test_every_refusal_is_counted_once_in_its_counter():
    a, b = pair()
    reflected = b.wire_frame(FrameKind.DATA, 0, 0, CARD)  # b's own frame, come back to it
    first = a.wire_frame(FrameKind.DATA, 0, 0, CARD)
    forged = bytearray(cobs_decode(a.wire_frame(FrameKind.DATA, 1, 0, CARD)[1:-1]))
    forged[-1] ^= 0x80
    other, _ = pair(session=bytes(16))
    stream = [
        first,
        b"\x00" + cobs_encode(bytes(forged)) + b"\x00",  # tag_errors
        first,  # replayed
        reflected,  # tag_errors
        other.wire_frame(FrameKind.DATA, 0, 0, CARD),  # tag_errors: another session
        Framing2().wire_frame(FrameKind.DATA, 0, 0, CARD),  # unauthenticated
        wire_frame(FrameKind.DATA, 0, 0, CARD),  # legacy_frames: a downgrade
        a.wire_frame(FrameKind.DATA, 2, 0, CARD),
    ]
    frames, stats = taken(b, *stream)
    assert [f[1] for f in frames] == [0, 2]
    assert (stats.tag_errors, stats.replayed, stats.unauthenticated, stats.legacy_frames) == (3, 1, 1, 1)
    assert stats.errors == 6 and stats.tagged_frames == 2


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
        tagged_frame_bytes(FrameKind.RESET, 0, 0, b"abcd", 1, KEY_AB, SESSION, direction=0)


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


def test_counter_exhaustion_refuses_to_send():
    a, b = pair()
    a._sent = 0xFFFFFFFF - 1
    assert a.counters_left == 1
    last = a.wire_frame(FrameKind.DATA, 0, 0, CARD)
    assert a.counters_left == 0
    with pytest.raises(TagCounterExhausted):
        a.frame_bytes(FrameKind.DATA, 0, 0, CARD)
    frames, _ = taken(b, last)
    assert frames == [(FrameKind.DATA, 0, 0, CARD)]  # the last counter is still a good frame


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


def test_link_raises_counter_exhaustion_to_its_owner():
    async def main():
        fa, fb = pair()
        slow = LinkConfig(initial_rto=2.0, min_rto=2.0, max_rto=4.0)  # no resend of the last payload
        a, b = make_pair(config=slow, framings=(fa, fb))
        a.link.start()
        await until(lambda: a.link.state is LinkState.UP and b.link.state is LinkState.UP)
        fa._sent = 0xFFFFFFFF - 1  # one counter left: the last payload
        await a.link.send(b"last")
        await until(lambda: b.delivered == [b"last"])
        with pytest.raises(TagCounterExhausted):
            await a.link.send(b"one too many")
        assert a.link.state is LinkState.FAILED and a.events[-1][0] is LinkEvent.FAILED
        assert "shake hands again" in a.events[-1][1] and a.link.stats.write_errors == 0
        with pytest.raises(TagCounterExhausted):  # and every send after it, until a reset
            await a.link.send(b"later")
        b.link.reset("the peer resets")  # the link comes up again, the session's counters are still spent
        await until(lambda: a.link.state is LinkState.UP and b.link.state is LinkState.UP)
        with pytest.raises(TagCounterExhausted):
            await a.link.send(b"still the old keys")
        assert [e for e, _ in a.events].count(LinkEvent.FAILED) == 2
        # the owner shakes hands anew: a reset (plain, so still possible), new keys both sides
        a.link.reset("new session")
        await until(lambda: a.link.state is LinkState.UP and b.link.state is LinkState.UP)
        fa.install(SessionKeys(KEY_AB, KEY_BA, bytes(16)))
        fb.install(SessionKeys(KEY_BA, KEY_AB, bytes(16)))
        await a.link.send(b"next session")
        await until(lambda: b.delivered == [b"last", b"next session"])
        a.link.close()
        b.link.close()

    run(main())
