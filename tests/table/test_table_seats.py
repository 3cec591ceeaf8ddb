"""Seats and the sheets' rules on boxes, and the burn on a dealer change, at the table: stacked
shoes worked by hand from one casino's sheet each, the money WRITTEN here (never computed by the
code under test), each refusal naming its rule (docs/rules.md)."""
from __future__ import annotations


import pytest

from cardd.config import RULES_DIR
from core.cards import Card
from devices.events import Reason
from devices.game.round import Action
from devices.errors import RuleViolation
from devices.tracker.inputs import (
    Act, AskForBox, DealerChange, LeaveSeat, NoMoreBets, OpenRound, PlaceBet, ReduceBet, TakeSeat,
)
from devices.game.rules import load_rules
from devices.tracker.snapshot import restore, snapshot
from tests.table.table_rig import TableRig

D = "dealer-1"


def rig_for(casino: str, **kw: bool) -> TableRig:
    return TableRig(load_rules(RULES_DIR / f"{casino}.toml"), **kw)


def refused(rig: TableRig, rule: str, record: object) -> None:
    with pytest.raises(RuleViolation) as e:
        rig.table.apply(record)  # type: ignore[arg-type]
    assert e.value.rule == rule, e.value
    assert rig.find(Reason.ACTION_REFUSED)[-1].data["rule"] == rule


def stand(rig: TableRig, box: int, player: str) -> None:
    rig.table.apply(Act(box, Action.STAND, D, player=player))


def test_s12_001_a_lone_player_plays_at_least_two_boxes() -> None:
    # "If there is only one player at the table, then he has to play at least on two boxes as a considered rule."
    rig = rig_for("casino-001", seat_second_player=False)  # burns 2C
    t = rig.table
    t.apply(TakeSeat("a", D))
    t.apply(OpenRound())
    t.apply(PlaceBet(3, "a", 2000))
    refused(rig, "lone_player_min_boxes", NoMoreBets(D))
    t.apply(PlaceBet(4, "a", 2000))
    t.apply(NoMoreBets(D))
    rig.deal("TC 6D 5H 8H TH")  # box 3: 18, box 4: 16, dealer 5
    stand(rig, 3, "a")
    t.apply(Act(4, Action.HIT, D, player="a"))
    rig.deal("4C")  # 20
    stand(rig, 4, "a")
    rig.deal("JD 2C")  # dealer 17
    assert rig.nets() == {"a": "4000"}
    assert t.round is not None and t.round.settlement is not None and t.round.settlement.house == -4000
    rig.assert_ledger()


def test_s13_001_two_seated_players_may_play_one_box_each_until_one_leaves() -> None:
    rig = rig_for("casino-001", seat_second_player=False)
    t = rig.table
    t.apply(TakeSeat("a", D))
    t.apply(TakeSeat("b", D))
    t.apply(OpenRound())
    t.apply(PlaceBet(2, "a", 1000))
    t.apply(PlaceBet(5, "b", 1000))
    t.apply(NoMoreBets(D))  # two players at the table
    rig.deal("TD 9S 7H 8C 9D")  # 18, 18, dealer 7
    stand(rig, 2, "a")
    stand(rig, 5, "b")
    rig.deal("QC")  # dealer 17
    assert rig.nets() == {"a": "1000", "b": "1000"}
    t.apply(LeaveSeat("b", D))
    t.apply(OpenRound())
    t.apply(PlaceBet(2, "a", 1000))
    refused(rig, "lone_player_min_boxes", NoMoreBets(D))


def _six_boxes_for_a_and_one_for_c(rig: TableRig, unit: int) -> None:
    t = rig.table
    t.apply(TakeSeat("a", D))
    t.apply(TakeSeat("c", D))
    t.apply(OpenRound())
    for box in range(1, 7):
        t.apply(PlaceBet(box, "a", unit))
    t.apply(PlaceBet(7, "c", unit))
    t.apply(TakeSeat("b", D))
    t.apply(AskForBox("b", D))


# each sheet's own sentence; the money at each table's minimum (000 and 002: 1000, 003: 2500)
GIVE_UP = {
    # 3.10 "he or she may be asked to relinquish all boxes except one to other players at the table"
    "casino-000": {"a": "5000", "b": "1000", "c": "1000"},
    # "he/she may be asked to give up these boxes ... the player may retain control of one box."
    "casino-002": {"a": "5000", "b": "1000", "c": "1000"},
    # "A player may control as many boxes as he wishes, providing that he does not prevent other players"
    "casino-003": {"a": "12500", "b": "2500", "c": "2500"},
}


@pytest.mark.parametrize("casino", sorted(GIVE_UP))
def test_s14_a_player_on_several_boxes_gives_one_up_to_a_seated_player_who_asks(casino: str) -> None:
    rig = rig_for(casino)
    t, unit = rig.table, rig.rules.table.min_per_player
    _six_boxes_for_a_and_one_for_c(rig, unit)
    refused(rig, "give_up_boxes", NoMoreBets(D))  # every box taken; a owns six, c one (never asked)
    t.apply(ReduceBet(6, "a", 0))
    t.apply(PlaceBet(6, "b", unit))
    t.apply(NoMoreBets(D))
    assert t.asking_for_box == []  # b owns a box: his request is met
    rig.deal("TS 9H 8D TC 7S KH 9C 6D 8S 9D QC 7H JD 8H TD")  # 18 18 18 17 17 18 19, dealer 6
    for box in range(1, 8):
        stand(rig, box, {6: "b", 7: "c"}.get(box, "a"))
    rig.deal("TH 6C")  # dealer 22
    assert rig.nets() == GIVE_UP[casino]
    rig.assert_ledger()


@pytest.mark.parametrize("casino", ["casino-001", "casino-004"])
def test_s14c_where_the_sheet_has_no_such_rule_nobody_is_asked_to_give_a_box_up(casino: str) -> None:
    # 004 "Each player is allowed to place a bet on one or several boxes"; 001 says nothing of giving boxes up
    rig = rig_for(casino)
    _six_boxes_for_a_and_one_for_c(rig, rig.rules.table.min_per_player)
    assert "no one to give a box up" in rig.find(Reason.ACTION)[-1].message  # the request is journaled
    rig.table.apply(NoMoreBets(D))
    assert rig.table.round is not None and rig.table.round.state == "initial_deal"
    assert rig.table.asking_for_box == ["b"]


def test_nobody_is_asked_for_his_last_box() -> None:
    rig = rig_for("casino-000")
    t = rig.table
    t.apply(OpenRound())
    for box in range(1, 8):
        t.apply(PlaceBet(box, f"p{box}", 1000))
    t.apply(TakeSeat("b", D))
    t.apply(AskForBox("b", D))
    t.apply(NoMoreBets(D))  # everyone owns one box: b waits
    assert t.asking_for_box == ["b"]


def test_seat_inputs_must_fit_who_is_seated_and_survive_a_power_loss() -> None:
    rig = rig_for("casino-000")
    t = rig.table
    t.apply(TakeSeat("a", D))
    refused(rig, "not_seated", TakeSeat("a", D))
    refused(rig, "not_seated", LeaveSeat("z", D))
    refused(rig, "not_seated", AskForBox("z", D))
    t.apply(TakeSeat("b", D))
    t.apply(AskForBox("b", D))
    back = restore(rig.rules, lambda e: None, snapshot(t))
    assert back.seated == ["a", "b"] and back.asking_for_box == ["b"]
    t.apply(LeaveSeat("b", D))  # leaving ends his request
    assert t.seated == ["a"] and t.asking_for_box == []


def _one_box_round(rig: TableRig, amount: int, first_three: str, dealer_draws: str) -> None:
    """Player a alone on box 1 (first three cards: box, dealer, box), stands; the dealer draws."""
    t = rig.table
    t.apply(OpenRound())
    t.apply(PlaceBet(1, "a", amount))
    t.apply(NoMoreBets(D))
    rig.deal(first_three)
    stand(rig, 1, "a")
    rig.deal(dealer_draws)


def test_s19_003_a_dealer_change_mid_shoe_burns_one_card() -> None:
    # "Should the dealer change during the middle of the shoe, then this dealer will burn one card"
    rig = TableRig(load_rules(RULES_DIR / "casino-003.toml"), load=False)
    rig.shuffle_ok()  # by hand: the dealer declares it
    rig.load_and_burn("7D 8D 9D")
    _one_box_round(rig, 2500, "TS 7C QS", "TD")  # 20 against 17
    assert rig.nets() == {"a": "2500"}
    rig.table.apply(DealerChange("dealer-2"))
    rig.read("4S")  # burnt by the new dealer
    _one_box_round(rig, 2500, "9H 6C 9S", "TH 5S")  # 18 against 21
    assert rig.nets() == {"a": "-2500"}
    assert rig.table.burn_pile == [Card.parse(c) for c in "7D 8D 9D 4S".split()]
    rig.assert_ledger()


@pytest.mark.parametrize("casino", ["casino-000", "casino-001", "casino-002", "casino-004"])
def test_s20_a_dealer_change_burns_nothing_where_the_sheet_does_not_say_so(casino: str) -> None:
    rig = TableRig(load_rules(RULES_DIR / f"{casino}.toml"), load=False)
    rig.shuffle_ok()
    rig.load_and_burn("7D")  # these sheets burn one after the shuffle (000 4.8; the others: the site's one)
    _one_box_round(rig, 1000, "TS 7C QS", "TD")  # 20 against 17
    assert rig.nets() == {"a": "1000"}
    rig.table.apply(DealerChange("dealer-2"))
    assert "no burn" in rig.find(Reason.DEALER_CHANGE_BURN)[-1].message
    _one_box_round(rig, 1000, "9H 6C 9S", "TH 5S")  # the next card out goes to box 1: 18 against 21
    assert rig.nets() == {"a": "-1000"}
    assert rig.table.burn_pile == [Card.parse("7D")]
    rig.assert_ledger()
