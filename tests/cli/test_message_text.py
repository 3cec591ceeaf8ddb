"""A device's message as people read it: one function for trace/monitor/capture's ``fields`` and for
``cardctl log``'s input lines, so both show cards as ``AC``, a count per card by card, bytes in hex."""
from __future__ import annotations

import json
from typing import Any

from cardd.cli.trace import describe
from cardd.cli.journal import shown_message
from core.cards import Card, Orientation, shoe_composition
from firmware_bridge.messages import (CardRead, DeckCheckResult, Event, FirmwareChunk, Message, ShuffleComplete,
                                      encode)


def test_a_count_per_card_is_keyed_by_the_card_as_people_write_it() -> None:
    fields = describe(ShuffleComplete(card_count=312, composition=shoe_composition(6)))
    assert fields["composition"]["AC"] == 6 and len(fields["composition"]) == 52, fields  # once "{Card(rank=..."
    assert json.loads(json.dumps(fields)) == fields


def test_cards_bytes_and_inner_messages_are_plain() -> None:
    ace = Card.parse("AC")
    check = describe(DeckCheckResult(ok=False, decks=6, missing=((ace, 1),), extra=(), unrecognised=0))
    assert check["missing"] == [["AC", 1]] and check["extra"] == [], check  # once "((Card(rank=...), 1),)"
    assert describe(FirmwareChunk(offset=0, crc32=1, data=b"\x01\xff"))["data"] == "01ff"
    event = describe(Event(index=7, message=CardRead(index=1, card=ace, orientation=Orientation.FACE_DOWN,
                                                     device_time_ms=5)))
    assert event["message"] == {"type": "CardRead", "index": 1, "card": "AC", "orientation": "FACE_DOWN",
                                "device_time_ms": 5}


def test_the_log_line_shows_the_same_fields() -> None:
    ace = Card.parse("AC")
    read = CardRead(index=1, card=ace, orientation=Orientation.FACE_DOWN, device_time_ms=5)
    def record(message: Message) -> dict[str, Any]:
        return {"kind": "input", "message": "", "data": {"type": "DeviceMessage", "device": "shoe-reader",
                                                         "message": encode(message).hex()}}
    assert shown_message(record(read)) == ("input: CardRead from the shoe-reader "
                                     "(index=1 card=AC orientation=FACE_DOWN device_time_ms=5)")
    check = DeckCheckResult(ok=False, decks=6, missing=((ace, 1),), extra=(), unrecognised=0)
    assert "missing=AC,1 extra= unrecognised=0" in shown_message(record(check))
