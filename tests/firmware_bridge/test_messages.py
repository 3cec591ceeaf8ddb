"""Every message type survives encode/decode, and every defect is a MessageDecodeError."""
from __future__ import annotations

import struct
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_bridge import wire_types as wt
from core.cards import ALL_CARDS, Card, Orientation, shoe_composition
from core.text import printable
from firmware_bridge.messages import (
    ENVELOPES,
    CardRead,
    InnerMessage,
    DeviceRole,
    Ident,
    DeckCheckResult,
    Event,
    MessageDecodeError,
    ShuffleComplete,
    decode,
    encode,
    message_types,
)

cards = st.sampled_from(ALL_CARDS)


def strategy_for(codec: wt.FieldCodec) -> st.SearchStrategy:
    if isinstance(codec, wt.Int):
        return st.integers(0, 2 ** (8 * codec._struct.size) - 1)
    if isinstance(codec, wt.Bool):
        return st.booleans()
    if isinstance(codec, wt.Enum8):
        return st.sampled_from(list(codec.enum_type))
    if isinstance(codec, wt.Text):
        return st.text(max_size=60)
    if isinstance(codec, wt.Blob):
        return st.binary(max_size=300)
    if isinstance(codec, wt.Fixed):
        return st.binary(min_size=codec.size, max_size=codec.size)
    if isinstance(codec, wt.CardField):
        return cards
    if isinstance(codec, wt.Composition):
        return st.fixed_dictionaries({c: st.integers(0, 255) for c in ALL_CARDS})
    if isinstance(codec, wt.CardCounts):
        return st.lists(st.tuples(cards, st.integers(0, 255)), max_size=10).map(tuple)
    if isinstance(codec, InnerMessage):  # any message but an envelope (1.1: Event, Request, Answer)
        return st.deferred(lambda: plain_messages)
    raise AssertionError(f"no strategy for {codec!r}")


def message_strategy(cls) -> st.SearchStrategy:
    return st.fixed_dictionaries({name: strategy_for(codec) for name, codec in cls.FIELDS}).map(lambda kw: cls(**kw))


plain_messages = st.one_of([message_strategy(cls) for cls in message_types().values() if cls not in ENVELOPES])
all_messages = st.one_of([message_strategy(cls) for cls in message_types().values()])


def texts_shown(msg):
    """``msg`` as the host decodes it: every text field through core.text.printable."""
    return replace(msg, **{name: printable(getattr(msg, name)) for name, codec in msg.FIELDS
                           if isinstance(codec, wt.Text)},
                   **{name: texts_shown(getattr(msg, name)) for name, codec in msg.FIELDS
                      if isinstance(codec, InnerMessage)})


def texts_of(msg) -> list[str]:
    inner = [text for name, codec in msg.FIELDS if isinstance(codec, InnerMessage) for text in texts_of(getattr(msg, name))]
    return [getattr(msg, name) for name, codec in msg.FIELDS if isinstance(codec, wt.Text)] + inner


@settings(max_examples=500, deadline=None)
@given(all_messages)
def test_every_message_round_trips(msg):
    assert decode(encode(msg)) == texts_shown(msg)  # == msg whenever its text needs no escaping


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=120))
def test_random_payloads_decode_or_fail_cleanly(payload):
    try:
        msg = decode(payload)
    except MessageDecodeError as exc:
        assert payload[:8].hex(" ") in str(exc)
    else:
        # the same bytes again, unless the host escaped a text (an escape always writes a backslash;
        # escaping is not reversible, and escaped text is left as it is when escaped again)
        if not any("\\" in text for text in texts_of(msg)):
            assert encode(msg) == payload
        assert all(unsafe not in text for text in texts_of(msg) for unsafe in "\x00\x1b\r\n\u202e")


FIXED_WIDTH = [cls for cls in message_types().values() if all(codec.fixed_layout() for _, codec in cls.FIELDS)]


@settings(max_examples=1000, deadline=None)
@given(st.sampled_from(FIXED_WIDTH), st.integers(0, 2**32 - 1), st.binary(max_size=12), st.integers(-1, 1))
def test_an_event_of_a_fixed_width_message_reads_as_its_inner_message(cls, index, body, off_by):
    """Event(CardRead) and its kin are read in one step: the same message, or the same error, as
    the inner message read on its own (out-of-range values and wrong lengths included)."""
    size = struct.calcsize(">" + "".join(codec.fixed_layout().fmt for _, codec in cls.FIELDS)) + off_by
    inner = bytes([cls.TYPE]) + (body * 12)[:max(size, 0)]
    payload = bytes([0x07]) + index.to_bytes(4, "big") + inner
    try:
        expected = Event(index, decode(inner))
    except MessageDecodeError as exc:
        with pytest.raises(MessageDecodeError) as err:
            decode(payload)
        assert f"Event.message: inner message: {exc.reason}" in str(err.value)
    else:
        assert decode(payload) == expected


@pytest.mark.parametrize("field", ["model", "serial", "firmware_version"])
def test_device_text_is_decoded_escaped(field):
    ident = Ident(DeviceRole.SHOE, "OS-1", "SN1", "1.0", 1, 0, 7)
    hostile = replace(ident, **{field: "a\x1b[31m\r\nb\u202ec\u2066\u200bd\x7f\x85 é漢"})  # type: ignore[arg-type]  # one str field, named by the parameter
    decoded = decode(encode(hostile))
    assert getattr(decoded, field) == "a\\x1b[31m\\x0d\\x0ab\\u202ec\\u2066\\u200bd\\x7f\\x85 é漢"


def test_card_read_wire_bytes():
    msg = CardRead(index=5, card=Card.parse("AS"), orientation=Orientation.FACE_DOWN, device_time_ms=1234)
    assert encode(msg) == bytes.fromhex("30 0005 31 00 000004d2")


def test_shuffle_complete_carries_counts_not_order():
    msg = ShuffleComplete(card_count=312, composition=shoe_composition(6))
    payload = encode(msg)
    assert len(payload) == 1 + 2 + 52
    assert payload[3:] == bytes([6] * 52)


@pytest.mark.parametrize(
    "payload, words",
    [
        (b"", "empty payload"),
        (b"\x99", "unknown message type 0x99"),
        (bytes.fromhex("30 00"), "CardRead.index"),
        (bytes.fromhex("30 0001 3f 00 00000000"), "0x3f is not a card"),
        (bytes.fromhex("30 0001 31 02 00000000"), "not a Orientation"),
        (bytes.fromhex("30 0001 31 00 00000000 ff"), "1 bytes left over"),
        (bytes.fromhex("13 02"), "boolean must be 0x00 or 0x01"),
    ],
)
def test_decode_errors_say_what_and_show_bytes(payload, words):
    with pytest.raises(MessageDecodeError) as err:
        decode(payload)
    assert words in str(err.value)
    assert payload[:4].hex(" ") in str(err.value)


def test_deck_check_names_cards():
    msg = DeckCheckResult(ok=False, decks=6, missing=((Card.parse("AS"), 1),), extra=((Card.parse("7H"), 2),), unrecognised=1)
    back = decode(encode(msg))
    assert isinstance(back, DeckCheckResult) and back.missing == ((Card.parse("AS"), 1),)


def test_card_parse_refuses_nonsense():
    with pytest.raises(ValueError, match="not a card"):
        Card.parse("ZZ")
    assert str(Card.parse("10d")) == "TD"
