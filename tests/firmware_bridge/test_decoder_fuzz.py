"""Random and mutated byte streams in random chunkings: the decoder never raises, never
stalls, counts every bad segment and returns every frame that arrived intact."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_bridge.errors import FrameError
from firmware_bridge.framing import (
    MAX_ENCODED_LEN,
    MAX_PAYLOAD,
    Frame,
    FrameDecoder,
    FrameKind,
    decode_frame,
    encode_frame,
)

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


def is_subsequence(needles: list, haystack: list) -> bool:
    it = iter(haystack)
    return all(any(n == h for h in it) for n in needles)


@settings(max_examples=2000, deadline=None)
@given(pieces, st.lists(st.integers(0, 10_000), max_size=20))
def test_decoder_survives_any_stream(items, cuts):
    stream = b"".join(encode_frame(x) if kind == "intact" else x for kind, x in items)
    intact = [x for kind, x in items if kind == "intact"]

    out, dec = feed_in_chunks(stream, cuts)
    whole, whole_dec = feed_in_chunks(stream, [])

    assert out == whole and dec.stats == whole_dec.stats  # chunking never changes the result
    assert is_subsequence(intact, out)  # every intact frame came out, in order
    assert dec.pending() <= MAX_ENCODED_LEN

    # the stream decoder agrees with decoding each delimited segment on its own: every segment
    # is one frame or one counted error, and every byte of a rejected segment is counted
    *segments, tail = stream.split(b"\x00")
    good, bad = [], []
    for seg in filter(None, segments):
        try:
            good.append(decode_frame(seg))
        except FrameError:
            bad.append(seg)
    overlong_tail = len(tail) > MAX_ENCODED_LEN
    assert out == good
    assert dec.stats.errors == len(bad) + overlong_tail
    assert dec.stats.bytes_discarded == sum(map(len, bad)) + (len(tail) if overlong_tail else 0)
