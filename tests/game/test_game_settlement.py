"""Settlement on hand-built rounds: exact money, per hand and per player."""
from __future__ import annotations

import json
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest

from devices.game.hand import Hand
from devices.game.rules import HouseRules
from devices.game.round import Action, RuleViolation
from devices.game.settlement import settle, units

from devices.events import Reason
from tests.game.game_helpers import Recorder, cards, deal, new_round

RULES = HouseRules.default()


def _hand(box: int, index: int, text: str, stakes: dict[str, int], **kw) -> Hand:
    return Hand(box, index, stakes, cards(text), **kw)


def test_dealer_blackjack_takes_split_and_doubled_stakes() -> None:
    h1 = _hand(1, 0, "8S 3D TC", {"a": 1000}, from_split=True, took_double=True, doubled={"a": 1000}, stood=True)
    h2 = _hand(1, 1, "8C KD", {"a": 1000}, from_split=True, stood=True)
    s = settle(RULES, [h1, h2], cards("AH KS"), {}, set(), {}, {1: cards("8S 8C")})
    assert [ln.net for ln in s.lines] == [-2000, -1000] and s.house == 3000


def test_split_21_pushes_a_dealer_21_and_is_paid_even_money() -> None:
    h1 = _hand(1, 0, "AS KD", {"a": 1000}, from_split=True, split_aces=True, stood=True)
    assert not h1.blackjack
    push = settle(RULES, [h1], cards("7H 4C TD"), {}, set(), {}, {})
    win = settle(RULES, [h1], cards("7H TD"), {}, set(), {}, {})
    assert push.lines[0].outcome == "push" and win.lines[0].net == 1000


def test_odd_stakes_stay_exact() -> None:
    h = _hand(2, 0, "AS KD", {"a": 1005})
    s = settle(RULES, [h], cards("7H TD"), {(2, "a"): 333}, set(), {}, {})
    assert s.lines[0].net == Fraction(3015, 2) and s.lines[1].net == -333
    assert s.per_player() == {"a": Fraction(3015, 2) - 333}


def test_lines_are_json_serialisable() -> None:
    h = _hand(3, 0, "9S 9D", {"a": 1000, "b": 2000}, stood=True)
    s = settle(RULES, [h], cards("TH 7C"), {}, set(), {}, {})
    data = [ln.as_data() for ln in s.lines]
    assert json.loads(json.dumps(data))[1]["net"] == "2000"
    assert "b main at box 3 hand 1: win" in s.lines[1].describe()


def test_journal_messages_say_money_in_units_and_the_data_keeps_cents() -> None:
    """cardctl takes 25.50 for 2550 cents and shows units: the journal's text says the same
    units (the data fields, which programs read, stay in cents)."""
    rec = Recorder()
    r = new_round(RULES, [(3, "alice", 2550)], rec)
    r.reduce_bet(3, "alice", 2000)
    bet, reduced = rec.of(Reason.ACTION)
    assert bet.message.endswith("alice bets 25.50 on box 3") and bet.data["amount"] == 2550
    assert reduced.message.endswith("alice reduces his bet on box 3 to 20.00") and reduced.data["amount"] == 2000
    odd = settle(RULES, [_hand(2, 0, "AS KD", {"a": 1005})], cards("7H TD"), {}, set(), {}, {})
    assert odd.lines[0].describe() == "a main at box 2 hand 1: blackjack, stake 10.05, net 15.075"


@pytest.mark.parametrize(("cents", "grouping", "text"), [
    (2550, False, "25.50"), (-5, False, "-0.05"), (0, False, "0.00"),
    (123456789, False, "1234567.89"), (123456789, True, "1,234,567.89"),
    (Fraction(1, 2), False, "0.005"), (Fraction(-301501, 2), True, "-1,507.505"),
    (Fraction(4000, 2), True, "20.00"),  # a Fraction of whole cents
    (9007199254740993, True, "90,071,992,547,409.93"),  # beyond a float's 53 bits: still exact
])
def test_units_is_exact_and_groups_thousands_only_when_asked(cents: int | Fraction, grouping: bool, text: str) -> None:
    assert units(cents, grouping=grouping) == text


def _refusal(call: Callable[..., Any], *args: Any, **kw: Any) -> str:
    with pytest.raises(RuleViolation) as refused:
        call(*args, **kw)
    return refused.value.message


def test_refusals_name_amounts_in_units_like_every_other_message() -> None:
    """Default table: minimum 10.00 a player, maximum 1,000.00 a box; insurance up to half the bet."""
    rec = Recorder()
    r = new_round(RULES, [(3, "alice", 2550), (5, "bob", 90000)], rec)
    assert "alice's bet 5.50 on box 4 is below the minimum per player 10.00" in _refusal(r.place_bet, 4, "alice", 550)
    assert "box 5 would hold 1025.50, above the maximum per box 1000.00" in _refusal(r.place_bet, 5, "carol", 12550)
    assert "alice's bet 5.00 on box 3 is below the minimum per player 10.00 (0 withdraws it)" \
        in _refusal(r.reduce_bet, 3, "alice", 500)
    assert "alice's new bet 30.00 on box 3 must be lower than 25.50" in _refusal(r.reduce_bet, 3, "alice", 3000)
    assert "bet 25.5 on box 2 is not a positive amount in whole cents" in _refusal(r.place_bet, 2, "dan", 25.5)
    assert "bet -5.00 on box 2 is not a positive amount in whole cents" in _refusal(r.place_bet, 2, "dan", -500)
    # the journal's ACTION_REFUSED message is the same text
    assert [e.message for e in rec.of(Reason.ACTION_REFUSED)][0].endswith("below the minimum per player 10.00")
    r.no_more_bets("dealer-1")
    deal(r, "7S 8D AH 9C 9H")  # box 3: 7S 9C, box 5: 8D 9H, the dealer an ace (no hole card)
    # the limit first, then what it is half of
    assert "insurance 12.80 exceeds 12.75, half of alice's bet on box 3 (25.50)" in _refusal(r.insure, 3, "alice", 1280)
    assert "insurance 0.50 is below the minimum 1.00" in _refusal(r.insure, 3, "alice", 50)
    r.close_insurance("dealer-1")
    assert "double for 20.00 at" in (text := _refusal(r.act, 3, Action.DOUBLE, "dealer-1", amount=2000)) \
        and text.endswith("allowed exactly 25.50")
