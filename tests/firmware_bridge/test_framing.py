"""COBS, CRC-16 and frame layout: known vectors, round trips, limits and resync."""
from __future__ import annotations

import binascii

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_bridge.crc import crc16
from firmware_bridge.errors import (
    CobsError,
    FrameError,
    CrcMismatch,
    FrameTooLong,
    FrameTooShort,
    LengthMismatch,
    UnknownFrameKind,
)
from firmware_bridge.framing import (
    MAX_ENCODED_LEN,
    MAX_FRAME_LEN,
    MAX_PAYLOAD,
    Frame,
    FrameDecoder,
    FrameKind,
    cobs_decode,
    cobs_encode,
    decode_frame,
    _quick_fields,
    encode_frame,
    frame_bytes,
)


def test_crc_check_value():
    assert crc16(b"123456789") == 0x29B1


def test_crc_of_nothing_is_init():
    assert crc16(b"") == 0xFFFF


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600), st.integers(0, 600))
def test_crc_matches_stdlib_crc_hqx_and_continues(data, cut):
    # binascii.crc_hqx is the same polynomial, unreflected, with the init we pass: an independent oracle
    assert crc16(data) == binascii.crc_hqx(data, 0xFFFF)
    assert crc16(data[cut:], crc16(data[:cut])) == crc16(data)


@pytest.mark.parametrize(
    "raw, encoded",
    [  # the examples of Cheshire & Baker's COBS paper, as listed on the COBS Wikipedia page
        (b"\x00", b"\x01\x01"),
        (b"\x00\x00", b"\x01\x01\x01"),
        (b"\x00\x11\x00", b"\x01\x02\x11\x01"),
        (b"\x11\x22\x00\x33", b"\x03\x11\x22\x02\x33"),
        (b"\x11\x22\x33\x44", b"\x05\x11\x22\x33\x44"),
        (b"\x11\x00\x00\x00", b"\x02\x11\x01\x01\x01"),
        (bytes(range(1, 255)), b"\xff" + bytes(range(1, 255))),
        (bytes(range(0, 255)), b"\x01\xff" + bytes(range(1, 255))),
        (bytes(range(1, 256)), b"\xff" + bytes(range(1, 255)) + b"\x02\xff"),
        (bytes(range(2, 256)) + b"\x00", b"\xff" + bytes(range(2, 256)) + b"\x01\x01"),
        (bytes(range(3, 256)) + b"\x00\x01", b"\xfe" + bytes(range(3, 256)) + b"\x02\x01"),
    ],
)
def test_cobs_known_vectors(raw, encoded):
    assert cobs_encode(raw) == encoded
    assert cobs_decode(encoded) == raw


def test_cobs_decoder_also_accepts_the_short_form_of_a_full_last_block():
    assert cobs_decode(b"\xff" + bytes(range(1, 255))) == bytes(range(1, 255))


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=1200))
def test_cobs_round_trip_has_no_zero_and_bounded_overhead(data):
    enc = cobs_encode(data)
    assert 0 not in enc
    assert len(enc) <= len(data) + len(data) // 254 + 2
    assert cobs_decode(enc) == data


@pytest.mark.parametrize(
    "bad, words",
    [(b"\x05\x11\x22", "needs 4 bytes, 2 remain"), (b"\x03\x11\x00", "0x00 at byte 2")],
)
def test_cobs_errors_say_where_and_show_hex(bad, words):
    with pytest.raises(CobsError) as err:
        cobs_decode(bad)
    assert words in str(err.value)
    assert bad.hex(" ") in str(err.value)


@pytest.mark.parametrize("kind", list(FrameKind))
@pytest.mark.parametrize("payload", [b"", b"\x00", b"\x30\x00\x05\x31\x00", bytes(MAX_PAYLOAD)])
def test_frame_round_trip(kind, payload):
    frame = Frame(kind, seq=0xFE, ack=0x00, payload=payload)
    wire = encode_frame(frame)
    assert wire[0] == 0 and wire[-1] == 0 and 0 not in wire[1:-1]
    assert decode_frame(wire[1:-1]) == frame


def test_frame_layout_is_header_payload_crc_big_endian():
    raw = frame_bytes(Frame(FrameKind.DATA, 7, 9, b"\xab"))
    assert raw[:6] == b"\x01\x07\x09\x00\x01\xab"
    assert int.from_bytes(raw[6:], "big") == crc16(raw[:6])


def test_oversized_payload_is_refused_when_encoding():
    with pytest.raises(ValueError, match="MAX_PAYLOAD"):
        frame_bytes(Frame(FrameKind.DATA, payload=bytes(MAX_PAYLOAD + 1)))


def test_decoded_length_limit_is_enforced():
    raw = bytes([1, 0, 0]) + (MAX_FRAME_LEN - 6).to_bytes(2, "big") + bytes(MAX_FRAME_LEN - 6)
    raw += crc16(raw).to_bytes(2, "big")
    with pytest.raises(FrameTooLong, match="MAX_FRAME_LEN"):
        decode_frame(cobs_encode(raw))


def test_parse_errors_are_typed_and_show_bytes():
    with pytest.raises(FrameTooShort, match="at least 7"):
        decode_frame(cobs_encode(b"\x01\x02"))
    good = bytearray(frame_bytes(Frame(FrameKind.ACK, 0, 3)))
    good[-1] ^= 0x01
    with pytest.raises(CrcMismatch, match="received") as err:
        decode_frame(cobs_encode(bytes(good)))
    assert cobs_encode(bytes(good)).hex(" ") in str(err.value)
    body = b"\x7f\x00\x00\x00\x00"
    with pytest.raises(UnknownFrameKind, match="0x7f"):
        decode_frame(cobs_encode(body + crc16(body).to_bytes(2, "big")))


def test_length_field_catches_a_damaged_closing_delimiter():
    # 00 -> 01 on the closing delimiter appends a zero byte after decoding; with this CRC
    # (no final XOR) crc(body + crc_hi) == crc_lo << 8, so only the length field notices
    frame = Frame(FrameKind.DATA, 0x5A, 0, b"ab90")
    raw = frame_bytes(frame)
    assert crc16(raw[:-1]) == raw[-1] << 8  # the CRC alone would accept it
    segment = encode_frame(frame)[1:-1] + b"\x01"
    with pytest.raises(LengthMismatch, match="says 4 payload bytes, frame holds 5"):
        decode_frame(segment)


def test_long_error_text_is_truncated():
    with pytest.raises(CobsError) as err:
        cobs_decode(b"\xff" * 300)
    assert "... (300 bytes)" in str(err.value)
    assert len(str(err.value)) < 300


def test_decoder_resyncs_after_garbage_and_counts_it():
    seen: list[FrameError] = []
    dec = FrameDecoder(on_error=seen.append)
    f1, f2 = Frame(FrameKind.DATA, 1, 0, b"hi"), Frame(FrameKind.ACK, 0, 2)
    stream = b"\x13\x37garbage" + encode_frame(f1) + b"\xff\xfe\x00\x05\x01" + encode_frame(f2)
    assert dec.feed(stream) == [f1, f2]
    assert dec.stats.frames == 2
    assert dec.stats.errors == 3 and len(seen) == 3  # three garbage segments
    assert dec.stats.bytes_discarded == len(b"\x13\x37garbage") + len(b"\xff\xfe") + len(b"\x05\x01")


def test_decoder_byte_by_byte_equals_whole():
    frames = [Frame(FrameKind.DATA, i, i, bytes([i]) * i) for i in range(20)]
    stream = b"".join(encode_frame(f) for f in frames)
    dec = FrameDecoder()
    out = []
    for i in range(len(stream)):
        out += dec.feed(stream[i : i + 1])
    assert out == frames


def test_decoder_buffer_is_bounded_and_recovers():
    dec = FrameDecoder()
    for _ in range(50):
        assert dec.feed(b"\x55" * 700) == []
        assert dec.pending() <= MAX_ENCODED_LEN
    assert dec.stats.oversize == 1
    assert dec.stats.bytes_discarded == 50 * 700
    good = Frame(FrameKind.DATA, 3, 4, b"ok")
    assert dec.feed(encode_frame(good)) == [good]
    assert dec.stats.oversize == 1


def test_decoder_counts_an_overlong_run_inside_one_chunk():
    dec = FrameDecoder()
    good = Frame(FrameKind.ACK, 0, 1)
    assert dec.feed(b"\x00" + b"\x22" * (MAX_ENCODED_LEN + 1) + encode_frame(good)) == [good]
    assert dec.stats.oversize == 1 and dec.stats.bytes_discarded == MAX_ENCODED_LEN + 1


def test_idle_delimiters_are_not_errors():
    dec = FrameDecoder()
    assert dec.feed(b"\x00" * 100) == []
    assert dec.stats.errors == 0


def _crc16_bit_by_bit(data: bytes, crc: int = 0xFFFF) -> int:
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 0xFFFF))
def test_crc_matches_a_bit_by_bit_reference(data, init):
    # crc16 is binascii.crc_hqx itself now: this oracle shares no code with it
    assert crc16(data, init) == _crc16_bit_by_bit(data, init)


def _decoded_alone(segment: bytes) -> tuple[Frame | None, type[FrameError] | None]:
    try:
        return decode_frame(segment), None
    except FrameError as exc:
        return None, type(exc)


@pytest.mark.parametrize("payload", [b"", b"\x07\x00\x00\x00\x05\x30\x00\x01\x0c\x02\x00\x00\x00\x09",
                                     b"\xff" * 9, bytes(range(1, 60)), bytes(200), b"\xff\x00" * 120])
def test_decoder_says_what_decode_frame_says_of_every_damaged_segment(payload):
    """The decoder reads short frames in one pass of its own: every one-byte change and every
    cut of a frame's segment must come out of it as decode_frame says (the frame, or the error
    counted under its own name)."""
    segment = encode_frame(Frame(FrameKind.DATA, 0xFF, 0x80, payload))[1:-1]
    damaged = [segment[:cut] for cut in range(1, len(segment))]
    for at in range(len(segment)):
        for value in (0x01, 0x02, 0x07, 0xFE, 0xFF, segment[at] ^ 0x01):
            if value not in (0, segment[at]):  # a 0x00 would split it in two
                damaged.append(segment[:at] + bytes([value]) + segment[at + 1:])
    for candidate in [segment, *damaged]:
        frame, error = _decoded_alone(candidate)
        dec = FrameDecoder()
        assert dec.feed(b"\x00" + candidate + b"\x00") == ([] if frame is None else [frame]), candidate.hex()
        counted = {name for name in ("cobs_errors", "crc_errors", "too_short", "oversize", "unknown_kind",
                                     "length_errors") if getattr(dec.stats, name)}
        want = set() if error is None else {
            CobsError: {"cobs_errors"}, CrcMismatch: {"crc_errors"}, FrameTooShort: {"too_short"},
            FrameTooLong: {"oversize"}, UnknownFrameKind: {"unknown_kind"}, LengthMismatch: {"length_errors"}}[error]
        assert counted == want, candidate.hex()
        assert dec.stats.frames == (frame is not None)
        assert dec.stats.bytes_discarded == (0 if frame is not None else len(candidate))


def test_feed_fields_are_the_frames_fields():
    frames = [Frame(FrameKind.DATA, 5, 6, b"\x30\x00\x01"), Frame(FrameKind.ACK, 0, 7), Frame(FrameKind.RESET, 0, 0, b"abcd")]
    stream = b"".join(encode_frame(f) for f in frames)
    assert FrameDecoder().feed_fields(stream) == [(f.kind, f.seq, f.ack, f.payload) for f in frames]


@pytest.mark.timeout(10)
@pytest.mark.parametrize("segment", [b"\x00", b"\x02\x01\x00", bytes(20)])
def test_the_one_pass_read_refuses_a_zero_byte_instead_of_looping(segment: bytes) -> None:
    """The decoder splits on 0x00, so no segment it reads holds one; a code 0 where a block starts
    once made the one-pass read wait forever for that block to end (it never advanced)."""
    assert _quick_fields(segment) is None
    with pytest.raises(FrameError):  # the slow path names what is wrong
        decode_frame(segment)
