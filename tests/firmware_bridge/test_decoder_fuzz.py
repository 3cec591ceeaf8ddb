"""Random and mutated byte streams in random chunkings: the decoder never raises, never
stalls, counts every bad segment and returns every frame that arrived intact.

What the decoder should return is worked out by :func:`reference_frame`, written here from
docs/protocol.md §1 (its own COBS, a bit-by-bit CRC-16, its own header parse), never by the
decoder under test: a decoder that skipped a check would return frames the reference refuses."""
from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_bridge.framing import (
    MAX_ENCODED_LEN,
    MAX_PAYLOAD,
    Frame,
    FrameDecoder,
    FrameKind,
    encode_frame,
)

#: docs/protocol.md §1: header kind, seq, ack, length u16; payload; CRC-16/CCITT-FALSE
REF_HEADER, REF_CRC, REF_MAX_FRAME = 5, 2, 1024

frames = st.builds(
    Frame,
    kind=st.sampled_from(list(FrameKind)),
    seq=st.integers(0, 255),
    ack=st.integers(0, 255),
    payload=st.one_of(st.binary(max_size=40), st.binary(min_size=250, max_size=MAX_PAYLOAD)),
)


@st.composite
def mutated(draw) -> bytes:
    """A valid frame's wire bytes with one defect: bit flip, truncation, insertion or duplicated slice."""
    wire = bytearray(encode_frame(draw(frames)))
    how = draw(st.sampled_from(["flip", "truncate", "insert", "duplicate"]))
    i = draw(st.integers(0, len(wire) - 1))
    if how == "flip":
        wire[i] ^= 1 << draw(st.integers(0, 7))
    elif how == "truncate":
        del wire[i:]
    elif how == "insert":
        wire[i:i] = draw(st.binary(min_size=1, max_size=4))
    else:
        j = draw(st.integers(i, len(wire)))
        wire[j:j] = wire[i:j]
    return bytes(wire)


pieces = st.lists(
    st.one_of(
        frames.map(lambda f: ("intact", f)),
        st.binary(max_size=60).map(lambda b: ("bytes", b)),
        st.binary(min_size=MAX_ENCODED_LEN - 2, max_size=MAX_ENCODED_LEN + 40).map(lambda b: ("bytes", b)),
        mutated().map(lambda b: ("bytes", b)),
    ),
    max_size=12,
)


def feed_in_chunks(stream: bytes, cuts: list[int]) -> tuple[list[Frame], FrameDecoder]:
    dec = FrameDecoder(on_error=lambda exc: None)
    out: list[Frame] = []
    start = 0
    for cut in sorted(set(c % (len(stream) + 1) for c in cuts)) + [len(stream)]:
        out += dec.feed(stream[start:cut])
        start = cut
    return out, dec


def reference_crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE bit by bit (poly 0x1021, init 0xFFFF, no reflection, no final XOR)."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def reference_frame(segment: bytes) -> Frame | None:
    """The frame in one segment between delimiters, or None if the protocol says it is bad."""
    if len(segment) > MAX_ENCODED_LEN:
        return None
    raw = bytearray()
    i = 0
    while i < len(segment):  # COBS: a code byte n, then n-1 data bytes, then a zero unless n is 0xFF or last
        code = segment[i]
        if i + code > len(segment):
            return None
        raw += segment[i + 1:i + code]
        i += code
        if code != 0xFF and i < len(segment):
            raw.append(0)
    if not REF_HEADER + REF_CRC <= len(raw) <= REF_MAX_FRAME:
        return None
    if reference_crc16(bytes(raw[:-REF_CRC])) != int.from_bytes(raw[-REF_CRC:], "big"):
        return None
    kind, seq, ack, length = raw[0], raw[1], raw[2], int.from_bytes(raw[3:5], "big")
    if length != len(raw) - REF_HEADER - REF_CRC or kind not in {k.value for k in FrameKind}:
        return None
    return Frame(FrameKind(kind), seq, ack, bytes(raw[REF_HEADER:-REF_CRC]))


def is_subsequence(needles: list, haystack: list) -> bool:
    it = iter(haystack)
    return all(any(n == h for h in it) for n in needles)


@settings(max_examples=5_000 if os.environ.get("CARDD_FULL") == "1" else 1_000, deadline=None)
@given(pieces, st.lists(st.integers(0, 10_000), max_size=20))
def test_decoder_survives_any_stream(items, cuts):
    stream = b"".join(encode_frame(x) if kind == "intact" else x for kind, x in items)
    intact = [x for kind, x in items if kind == "intact"]

    out, dec = feed_in_chunks(stream, cuts)
    whole, whole_dec = feed_in_chunks(stream, [])

    assert out == whole and dec.stats == whole_dec.stats  # chunking never changes the result
    assert is_subsequence(intact, out)  # every intact frame came out, in order
    assert dec.pending() <= MAX_ENCODED_LEN

    # the stream decoder agrees with the reference on each delimited segment: every segment
    # is one frame or one counted error, and every byte of a rejected segment is counted
    *segments, tail = stream.split(b"\x00")
    good, bad = [], []
    for seg in filter(None, segments):
        frame = reference_frame(seg)
        if frame is None:
            bad.append(seg)
        else:
            good.append(frame)
    overlong_tail = len(tail) > MAX_ENCODED_LEN
    assert out == good
    assert dec.stats.errors == len(bad) + overlong_tail
    assert dec.stats.bytes_discarded == sum(map(len, bad)) + (len(tail) if overlong_tail else 0)
