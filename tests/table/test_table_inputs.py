"""The tracker's input records: one JSON form for each, a clear error for a bad one, one apply for all."""
from __future__ import annotations

import json
import random
from typing import Any

import pytest

from core.cards import Card
from core.errors import CarddError
from devices.events import Reason, Role
from devices.game.inputs import ROUND_INPUTS
from devices.game.round import Action, Round, Target
from devices.errors import RoundError, TableError
from devices.game.rules import HouseRules
from devices.tracker import inputs as i
from devices.tracker.recording import load, record_random_shoes, replay, save
from devices.tracker.table import Table
from firmware_bridge.messages import CardRead, DeviceRole, Ident, ShuffleComplete, encode
from core.cards import Orientation, shoe_composition

AS, TD = Card.parse("AS"), Card.parse("TD")
SUP = ("sup-1", Role.SUPERVISOR)
#: one of every record, with every kind of field: a record added without a sample fails below
SAMPLES: dict[type, Any] = {
    i.DeviceMessage: i.DeviceMessage("shoe-reader", CardRead(3, AS, Orientation.FACE_DOWN, 40)),
    i.LinkUp: i.LinkUp("shuffler"),
    i.LinkDown: i.LinkDown("shoe-reader"),
    i.Tick: i.Tick(),
    i.OpenRound: i.OpenRound(),
    i.PlaceBet: i.PlaceBet(1, "p1", 500),
    i.PlacePairsBet: i.PlacePairsBet(2, "p2", 100),
    i.NoMoreBets: i.NoMoreBets("dealer-1"),
    i.Insure: i.Insure(1, "p1", 250),
    i.EvenMoney: i.EvenMoney(1, "p1"),
    i.CloseInsurance: i.CloseInsurance("dealer-1"),
    i.Act: i.Act(3, Action.DOUBLE, "dealer-1", amount=300, player="p3",
                 co_players=(i.CoPlayerChoice("p4", True, amount=200), i.CoPlayerChoice("p5", False))),
    i.ReduceBet: i.ReduceBet(4, "p2", 0),
    i.TakeSeat: i.TakeSeat("p1", "dealer-1"),
    i.LeaveSeat: i.LeaveSeat("p1", "dealer-1"),
    i.AskForBox: i.AskForBox("p6", "dealer-1"),
    i.EnterCard: i.EnterCard(TD, "dealer-1"),
    i.DrawnInErrorDecision: i.DrawnInErrorDecision(True, "dealer-1"),
    i.DealerChange: i.DealerChange("dealer-2"),
    i.PlacementError: i.PlacementError(*SUP, assignments=((AS, Target("box", 1, 0)), (TD, Target("dealer")))),
    i.CardsToBoxWithoutWager: i.CardsToBoxWithoutWager(*SUP),
    i.ShuffleStarted: i.ShuffleStarted("dealer-1"),
    i.HandShuffled: i.HandShuffled("dealer-1"),
    i.ShoeRemainder: i.ShoeRemainder({AS: 2, TD: 0}, "dealer-1"),
    i.Resume: i.Resume(*SUP),
    i.Redeal: i.Redeal(*SUP),
    i.VoidShoe: i.VoidShoe(*SUP),
    i.ClearAlarm: i.ClearAlarm(4, *SUP),
    i.CardDealt: i.CardDealt(AS),
    i.Hold: i.Hold(Reason.DEVICE_STALE, "shoe-reader stale"),
    i.Flag: i.Flag(Reason.UNREADABLE_CARD, "card #4 could not be read", None),
    i.Void: i.Void(Reason.FACE_UP_CARD, "table", Role.DEALER, by_rule="seed 000 section 7"),
    i.ReconstructInitialDeal: i.ReconstructInitialDeal(*SUP),
    i.ReconstructAndRedeal: i.ReconstructAndRedeal(*SUP, also=(AS, TD)),
}


def test_every_record_has_a_sample_and_the_registry_is_the_table_and_round_inputs() -> None:
    assert set(SAMPLES) == set(i.RECORDS.values()) == set(i.TABLE_INPUTS) | set(ROUND_INPUTS)
    assert all(i.RECORDS[name].__name__ == name for name in i.RECORDS)


@pytest.mark.parametrize("record", list(SAMPLES.values()), ids=lambda r: type(r).__name__)
def test_every_record_survives_its_json_form(record: Any) -> None:
    data = json.loads(json.dumps(i.to_json(record)))
    assert data["v"] == i.FORMAT_VERSION and data["type"] == type(record).__name__
    assert i.from_json(data) == record


def test_the_json_form_is_plain_and_readable() -> None:
    assert i.to_json(SAMPLES[i.Act]) == {"v": 2, "type": "Act", "box": 3, "action": "double", "who": "dealer-1",
                                         "amount": 300, "player": "p3", "co_players": [
                                             {"player": "p4", "joins": True, "amount": 200, "stays_on": None},
                                             {"player": "p5", "joins": False, "amount": None, "stays_on": None}]}
    split = {"v": 1, "type": "Act", "box": 2, "action": "split", "who": "d", "player": "a",
             "co_players": [{"player": "b", "joins": False, "stays_on": 2}]}  # left-out fields take their defaults
    assert i.from_json(split) == i.Act(2, Action.SPLIT, "d", player="a",
                                       co_players=(i.CoPlayerChoice("b", False, stays_on=2),))
    assert i.to_json(SAMPLES[i.ShoeRemainder]) == {"v": 2, "type": "ShoeRemainder", "returned": {"AS": 2, "TD": 0},
                                                   "who": "dealer-1"}
    assert i.to_json(SAMPLES[i.PlacementError])["assignments"] == [["AS", ["box", 1, 0]], ["TD", ["dealer", None, None]]]
    assert i.to_json(SAMPLES[i.DeviceMessage])["message"] == encode(SAMPLES[i.DeviceMessage].message).hex()
    assert i.from_json({"v": 1, "type": "Act", "box": 1, "action": "hit", "who": "p1"}) == i.Act(1, Action.HIT, "p1")


def test_a_device_message_names_the_unit_that_numbered_it_and_version_1_records_still_read() -> None:
    read = i.DeviceMessage("shoe-reader", SAMPLES[i.DeviceMessage].message, 7, ("shoe", "OS-1", "SN1"))
    data = json.loads(json.dumps(i.to_json(read)))
    assert data["v"] == 2 and data["unit"] == ["shoe", "OS-1", "SN1"] and i.from_json(data) == read
    version_1 = {"v": 1, "type": "DeviceMessage", "device": "shoe-reader", "event_index": 7,
                 "message": data["message"]}  # as journals, recordings and snapshots before version 2 hold it
    assert i.from_json(version_1) == i.DeviceMessage("shoe-reader", read.message, 7)


@pytest.mark.parametrize("data, names", [
    ([], "a JSON object"),
    ({"type": "Tick"}, "version None"),
    ({"v": 3, "type": "Tick"}, "version 3 is not one of 1, 2"),
    ({"v": 1, "type": "apply"}, "unknown input record type 'apply'"),
    ({"v": 1, "type": "_Recorder"}, "unknown input record type '_Recorder'"),
    ({"v": 1, "type": "PlaceBet", "box": 1, "player": "p1"}, "PlaceBet: field 'amount' is missing"),
    ({"v": 1, "type": "PlaceBet", "box": 1, "player": "p1", "amount": 5, "x": 1}, "PlaceBet: unknown field(s) x"),
    ({"v": 1, "type": "PlaceBet", "box": True, "player": "p1", "amount": 5}, "PlaceBet.box: expected a whole number"),
    ({"v": 1, "type": "PlaceBet", "box": 1, "player": 7, "amount": 5}, "PlaceBet.player: expected str"),
    ({"v": 1, "type": "EnterCard", "card": "ZZ", "who": "d"}, "EnterCard.card: not a card: 'ZZ'"),
    ({"v": 1, "type": "Resume", "who": "s", "role": "king"}, "Resume.role: 'king' is not one of "),
    ({"v": 1, "type": "Act", "box": 1, "action": "fold", "who": "p"}, "Act.action: 'fold' is not one of hit, stand, double"),
    ({"v": 1, "type": "Act", "box": 1, "action": "hit", "who": "p", "co_players": "p2"},
     "Act.co_players: expected a list"),
    ({"v": 1, "type": "Act", "box": 1, "action": "hit", "who": "p", "co_players": ["p2"]},
     "Act.co_players[0]: expected an object"),
    ({"v": 1, "type": "Act", "box": 1, "action": "split", "who": "p", "co_players": [{"player": "b"}]},
     "Act.co_players[0]: field 'joins' is missing"),
    ({"v": 1, "type": "Act", "box": 1, "action": "split", "who": "p",
      "co_players": [{"player": "b", "joins": False, "hand": 2}]}, "Act.co_players[0]: unknown field(s) hand"),
    ({"v": 1, "type": "ReduceBet", "box": 1, "player": "p", "amount": "all"}, "ReduceBet.amount: expected a whole"),
    ({"v": 1, "type": "TakeSeat", "who": "d"}, "TakeSeat: field 'player' is missing"),
    ({"v": 1, "type": "DeviceMessage", "device": "shoe-reader", "message": "zz"},
     "DeviceMessage.message: not an encoded firmware message"),
    ({"v": 1, "type": "DeviceMessage", "device": "shoe-reader", "message": "ff00"},
     "DeviceMessage.message: not an encoded firmware message"),
    ({"v": 1, "type": "ShoeRemainder", "returned": {"AS": 1, "XX": 2}, "who": "d"},
     "ShoeRemainder.returned key 'XX': not a card"),
    # one card spelled twice: its counts once replaced each other (5 ten of hearts counted as 3)
    ({"v": 1, "type": "ShoeRemainder", "returned": {"TH": 2, "10H": 3}, "who": "d"},
     "ShoeRemainder.returned: keys 'TH' and '10H' are the same (TH): give it once"),
    ({"v": 1, "type": "ShoeRemainder", "returned": {"as": 1, "AS": 1}, "who": "d"},
     "ShoeRemainder.returned: keys 'as' and 'AS' are the same (AS)"),
    ({"v": 1, "type": "PlacementError", "who": "s", "role": "supervisor", "assignments": [["AS", ["hand", 1, 0]]]},
     "PlacementError.assignments[0][1]: a target is"),
])
def test_a_bad_record_is_refused_naming_what_is_wrong(data: Any, names: str) -> None:
    with pytest.raises(i.InputDecodeError) as refused:
        i.from_json(data)
    assert names in str(refused.value)
    assert isinstance(refused.value, CarddError)


def test_only_records_have_a_json_form() -> None:
    with pytest.raises(TypeError, match="is not an input record"):
        i.to_json(Target("dealer"))


def test_apply_takes_every_table_input_and_nothing_else() -> None:
    for cls in i.TABLE_INPUTS:
        table = Table(HouseRules.default(), lambda e: None, clock=lambda: 0.0)
        try:
            table.apply(SAMPLES[cls])
        except CarddError as exc:  # refused by the table in this state, but taken as an input
            assert "is not a table input" not in str(exc), cls
    table = Table(HouseRules.default(), lambda e: None, clock=lambda: 0.0)
    for not_an_input in (i.CardDealt(AS), i.Hold(Reason.DEVICE_STALE, "x"), "OpenRound", CardRead(1, AS, Orientation.FACE_DOWN, 0)):
        with pytest.raises(TableError, match="is not a table input"):
            table.apply(not_an_input)  # type: ignore[arg-type]


def test_apply_returns_the_events_its_input_caused() -> None:
    events: list = []
    table = Table(HouseRules.default(), events.append, clock=lambda: 0.0)
    caused = table.apply(i.LinkUp("shuffler"))
    caused += table.apply(i.DeviceMessage("shuffler", Ident(DeviceRole.SHUFFLER, "sim", "s-1", "1.0.0", 1, 0, 1)))
    assert caused == events and [e.data["to"] for e in caused] == ["connecting", "idle"]
    decks = table.rules.decks
    caused = table.apply(i.DeviceMessage("shuffler", ShuffleComplete(52 * decks, shoe_composition(decks))))
    assert caused == events[2:] and caused


def test_a_round_applies_its_records_by_type() -> None:
    r = Round(HouseRules.default(), lambda e: None)
    r.apply(i.PlaceBet(1, "p1", 1000))
    r.apply(i.NoMoreBets("dealer-1"))
    assert r.apply(i.CardDealt(AS)) == Target("box", 1, 0)
    assert r.box_hands[1][0].cards == [AS]
    with pytest.raises(RoundError, match="OpenRound is not a round input"):
        r.apply(i.OpenRound())  # type: ignore[arg-type]  # a table input, not a round's


def test_a_recording_is_saved_and_loaded_as_json_lines(tmp_path) -> None:
    records, played = record_random_shoes(HouseRules.default(), random.Random(5), shoes=1)
    path = tmp_path / "shoe.jsonl"
    save(records, path)
    assert len(path.read_text().splitlines()) == len(records)
    loaded = load(path)
    assert loaded == records
    table = Table(HouseRules.default(), lambda e: None, clock=lambda: 0.0, stale_after_s=1e9)
    replay(table, loaded)
    assert table.shoe.state == "reconciled" and table.played == played.played
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace('"DeviceMessage"', '"Teleport"')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(i.InputDecodeError, match=f"{path}:4: unknown input record type 'Teleport'"):
        load(path)
    path.write_text("{not json\n")
    with pytest.raises(i.InputDecodeError, match=f"{path}:1: not JSON"):
        load(path)
