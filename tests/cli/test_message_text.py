"""A device's message as people read it: one function for trace/monitor/capture's ``fields`` and for
``cardctl log``'s input lines, so both show cards as ``AC``, a count per card by card, bytes in hex."""
from __future__ import annotations

import json
from typing import Any

from cardd.message_text import describe
from cardd.cli.journal import shown_message
from core.cards import Card, Orientation, shoe_composition
from devices.events import Role
from devices.game.round_types import Action
from devices.tracker.inputs import (Act, CoPlayerChoice, DrawnInErrorDecision, LinkUp, PlaceBet, Resume,
                                    to_json)
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


def test_a_table_input_shows_its_command_name_money_in_units_and_no_empty_field() -> None:
    # never "input: PlaceBet (amount=2500 box=1 player=alice)", "input: Act (... co_players=)" or
    # "input: Resume": a class name, cents, an empty field
    def record(inp: Any) -> dict[str, Any]:
        return {"kind": "input", "message": "", "data": to_json(inp)}
    assert shown_message(record(PlaceBet(box=1, player="alice", amount=125050))) == \
        "input: place_bet (box=1 player=alice amount=1,250.50)"
    assert shown_message(record(Act(box=1, action=Action.HIT, who="ann"))) == "input: act (box=1 action=hit)"
    assert shown_message(record(Resume(who="sue", role=Role.SUPERVISOR))) == "input: resume"
    double = Act(box=1, action=Action.DOUBLE, who="ann", player="alice", co_players=(
        CoPlayerChoice("bob", True), CoPlayerChoice("carl", True, amount=1250), CoPlayerChoice("dee", False)))
    assert shown_message(record(double)) == ("input: act (box=1 action=double player=alice "
                                             "co_players=bob=joins; carl=joins:12.50; dee=declines)")
    assert shown_message(record(DrawnInErrorDecision(exposed=False, who="ann"))) == \
        "input: drawn_in_error (exposed=False)"  # a False is an answer, not an empty field
    assert shown_message(record(LinkUp("shoe-reader"))) == "input: LinkUp (device=shoe-reader)"  # no command
