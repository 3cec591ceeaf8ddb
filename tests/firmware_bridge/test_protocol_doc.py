"""docs/protocol.md stays true: its worked examples and its message table are what the code
produces. Run this file as a script to print both for pasting after a protocol change:
``.venv/bin/python tests/firmware_bridge/test_protocol_doc.py``."""
from __future__ import annotations

import pathlib

from firmware_bridge import wire_types as wt
from core.cards import Card, Orientation
from firmware_bridge.framing import Frame, FrameKind, cobs_encode, encode_frame, frame_bytes
from firmware_bridge.messages import (
    Answer,
    CardRead,
    DropReason,
    Event,
    EventsDropped,
    EventsJournaled,
    Heartbeat,
    InnerMessage,
    Refused,
    Request,
    ResumeEvents,
    Status,
    StatusRequest,
    DeviceState,
    encode,
    message_types,
)

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def describe(codec: wt.FieldCodec) -> str:
    if isinstance(codec, wt.Int):
        return f"u{8 * codec._struct.size}"
    if isinstance(codec, wt.Bool):
        return "bool (u8 0/1)"
    if isinstance(codec, wt.Enum8):
        return f"u8 {codec.enum_type.__name__}"
    if isinstance(codec, wt.Text):
        return "text (u8 length + UTF-8)"
    if isinstance(codec, wt.Blob):
        return f"bytes (u{8 * codec.length._struct.size} length + data)"
    if isinstance(codec, wt.Fixed):
        return f"{codec.size} bytes"
    if isinstance(codec, wt.CardField):
        return "card (u8)"
    if isinstance(codec, wt.Composition):
        return "52 × u8 count"
    if isinstance(codec, wt.CardCounts):
        return "u8 n + n × (card u8, count u8)"
    if isinstance(codec, InnerMessage):
        return "message (the rest of the payload: type u8 + fields; not an envelope)"
    raise AssertionError(f"no description for {codec!r}")


def message_table() -> str:
    rows = ["| code | message | dir | fields (in order) |", "|---|---|---|---|"]
    for code, cls in sorted(message_types().items()):
        doc = (cls.__doc__ or "").strip()
        direction = doc.split(":")[0] if doc[:4] in ("H->D", "D->H") else "both"
        fields = ", ".join(f"{name}: {describe(codec)}" for name, codec in cls.FIELDS) or "(none)"
        rows.append(f"| 0x{code:02x} | {cls.__name__} | {direction} | {fields} |")
    return "\n".join(rows)


def examples() -> list[tuple[str, Frame]]:
    card = CardRead(index=5, card=Card.parse("AS"), orientation=Orientation.FACE_DOWN, device_time_ms=1234)
    return [
        ("HEARTBEAT from the host (uptime 1000 ms), DATA seq 3, ack 7", Frame(FrameKind.DATA, 3, 7, encode(Heartbeat(1000)))),
        ("CARD READ from the shoe (card 5, ace of spades, face down, t=1234 ms), DATA seq 0, ack 0",
         Frame(FrameKind.DATA, 0, 0, encode(card))),
        ("ACK: everything before seq 1 received", Frame(FrameKind.ACK, 0, 1)),
        ("RESET with nonce 12 34 56 78", Frame(FrameKind.RESET, 0, 0, bytes.fromhex("12345678"))),
        # protocol 1.1 (§3.2, §3.3)
        ("EVENT 1000 from the shoe: the same CARD READ, numbered (1.1), DATA seq 0, ack 1",
         Frame(FrameKind.DATA, 0, 1, encode(Event(1000, card)))),
        ("EVENTS JOURNALED up to event 1000, from the host (1.1), DATA seq 2, ack 1",
         Frame(FrameKind.DATA, 2, 1, encode(EventsJournaled(1000)))),
        ("RESUME EVENTS after event 998, the host's first message after IDENT (1.1), DATA seq 1, ack 1",
         Frame(FrameKind.DATA, 1, 1, encode(ResumeEvents(998)))),
        ("EVENTS DROPPED: events 3 to 7 (5) pushed out of a full buffer (1.1), DATA seq 1, ack 2",
         Frame(FrameKind.DATA, 1, 2, encode(EventsDropped(3, 5, DropReason.OVERFLOW)))),
        ("REQUEST 0x0102: STATUS REQUEST with a request id (1.1), DATA seq 4, ack 9",
         Frame(FrameKind.DATA, 4, 9, encode(Request(0x0102, StatusRequest())))),
        ("ANSWER 0x0102: the STATUS it asked for (idle, no fault, 0 cards, up 1000 ms) (1.1), DATA seq 9, ack 5",
         Frame(FrameKind.DATA, 9, 5, encode(Answer(0x0102, Status(DeviceState.IDLE, 0, 0, 1000))))),
        ("ANSWER 0x0103: REFUSED CALIBRATE (0x35, reason \"busy\") (1.1), DATA seq 10, ack 5",
         Frame(FrameKind.DATA, 10, 5, encode(Answer(0x0103, Refused(0x35, "busy"))))),
    ]


def example_block(title: str, frame: Frame) -> str:
    raw = frame_bytes(frame)
    return "\n".join([
        f"{title}:",
        f"    payload  {frame.payload.hex(' ') or '(none)'}",
        f"    frame    {raw[:5].hex(' ')} | {raw[5:-2].hex(' ') or '-'} | {raw[-2:].hex(' ')}",
        f"    COBS     {cobs_encode(raw).hex(' ')}",
        f"    wire     {encode_frame(frame).hex(' ')}",
    ])


def test_doc_examples_match_the_code():
    text = DOC.read_text()
    for title, frame in examples():
        assert example_block(title, frame) in text, f"docs/protocol.md example out of date: {title}"


def test_doc_message_table_matches_the_code():
    assert message_table() in DOC.read_text(), "docs/protocol.md message table out of date"


if __name__ == "__main__":
    print(message_table())
    print()
    for title, frame in examples():
        print(example_block(title, frame))
        print()
