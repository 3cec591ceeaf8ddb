"""Settlement on hand-built rounds: exact money, per hand and per player."""
from __future__ import annotations

import json
from fractions import Fraction

from devices.game.hand import Hand
from devices.game.rules import HouseRules
from devices.game.settlement import settle

from devices.events import Reason
from tests.game.game_helpers import Recorder, cards, new_round

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
