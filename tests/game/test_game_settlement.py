"""Settlement on hand-built rounds: exact money, per hand and per player."""
from __future__ import annotations

import json
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest

from devices.game.hand import Hand
from devices.game.rules import HouseRules
from devices.game.round import Action
from devices.errors import RuleViolation
from devices.game.settlement import settle, units

from devices.events import Reason
from tests.game.game_helpers import Recorder, cards, deal, new_round, rules_for, run, settlement_of

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


# ---- the payouts each seed sheet states (../shared/seeds/), money worked by hand ------------------
#
# One round per payout a sheet states, one box, played through the round as a table plays it. The
# money each line must come to is worked out here from the sheet's own words and the stake (in
# cents, in the comment beside it), never taken from the settlement code. A sheet that states no
# ratio for something (002's win and blackjack) has no case for it here.

Case = tuple[str, str, int, list[tuple[Any, ...]], list[tuple[str, int | None, int]]]

PAYOUTS: dict[str, Case] = {
    # ---- casino-000 (seed 000), table minimum 10.00 ----
    "000 11.1 a winning bet 1:1": (
        "casino-000", "TS 9H 9D", 2000, [("act", 1, "stand"), ("deal", "8C")],
        [("main", 0, 2000)]),  # 19 v 17: 20.00 at 1:1
    "000 7.1.1 blackjack 3:2 against a 9, paid at once": (
        "casino-000", "AS 9H KD", 2000, [("deal", "8C")],
        [("main", 0, 3000)]),  # 20.00 x 3/2, whatever the dealer's 9 8 makes
    "000 7.1.3 blackjack 3:2 against a 10 when the dealer makes none": (
        "casino-000", "AS TH KD", 2000, [("deal", "7C")],
        [("main", 0, 3000)]),  # dealer TH 7C, 17
    "000 7.1.2 blackjack against a dealer blackjack neither wins nor loses": (
        "casino-000", "AS TH KD", 2000, [("deal", "AC")],
        [("main", 0, 0)]),
    "000 5.2 insurance 2:1 when the dealer makes blackjack": (
        "casino-000", "9S AH 9D", 2000, [("insure", 1, "p1", 1000), ("close",), ("act", 1, "stand"), ("deal", "KD")],
        [("main", 0, -2000), ("insurance", None, 2000)]),  # the 10.00 insurance wins 20.00; the 18 loses 20.00
    "000 5.3 insurance lost when the dealer's second card is no ten": (
        "casino-000", "9S AH 9D", 2000, [("insure", 1, "p1", 1000), ("close",), ("act", 1, "stand"), ("deal", "7C")],
        [("main", 0, 0), ("insurance", None, -1000)]),  # soft 18 v 18: a tie (13.1)
    "000 5.5 even money: a blackjack paid 1:1 against the dealer's ace": (
        "casino-000", "AS AH KD", 2000, [("even", 1, "p1"), ("close",), ("deal", "7C")],
        [("even_money", 0, 2000)]),
    "000 6.1 surrender loses half the bet": (
        "casino-000", "TS 9H 6D", 2000, [("act", 1, "surrender"), ("deal", "8C")],
        [("surrender", 0, -1000)]),
    "000 8.1.3 a double for less, won at 1:1 on the whole stake": (
        "casino-000", "6S 9H 5D", 2000, [("act", 1, "double", {"amount": 1000}), ("deal", "TC 8C")],
        [("main", 0, 3000)]),  # 20.00 + 10.00 doubled, 21 v 17
    "000 12.1 a dealer blackjack beats a 21 of three cards": (
        "casino-000", "7S AH 4D", 2000, [("close",), ("act", 1, "hit"), ("deal", "TC KD")],
        [("main", 0, -2000)]),
    "000 10.2 split aces: an ace and a ten is 21, not blackjack, paid 1:1": (
        "casino-000", "AS 9H AD", 2000, [("act", 1, "split"), ("deal", "KD 8C 8S")],
        [("main", 0, 2000), ("main", 1, 2000)]),  # 21 and 19 v 17, 20.00 each at 1:1
    "000 13.1 a tie: neither wins nor loses": (
        "casino-000", "TS 8H 8D", 2000, [("act", 1, "stand"), ("deal", "KC")],
        [("main", 0, 0)]),
    # ---- casino-001 (seed 001), table minimum 5.00 ----
    "001 a winning bet 1:1": (
        "casino-001", "TS 9H 9D", 1000, [("act", 1, "stand"), ("deal", "8C")],
        [("main", 0, 1000)]),
    "001 Black Jack 3:2": (
        "casino-001", "AS 9H KD", 1000, [("deal", "8C")],
        [("main", 0, 1500)]),
    "001 Black Jack against the dealer's same combination: no payment": (
        "casino-001", "AS TH KD", 1000, [("deal", "AC")],
        [("main", 0, 0)]),
    "001 surrender loses 1/2 of the bet": (
        "casino-001", "TS 9H 6D", 1000, [("act", 1, "surrender"), ("deal", "8C")],
        [("surrender", 0, -500)]),
    "001 insurance 2:1 against the dealer's Black Jack": (
        "casino-001", "9S AH 9D", 1000, [("insure", 1, "p1", 500), ("close",), ("act", 1, "stand"), ("deal", "KD")],
        [("main", 0, -1000), ("insurance", None, 1000)]),
    "001 insurance lost without the dealer's Black Jack": (
        "casino-001", "9S AH 9D", 1000, [("insure", 1, "p1", 500), ("close",), ("act", 1, "stand"), ("deal", "7C")],
        [("main", 0, 0), ("insurance", None, -500)]),
    "001 even money: payment at the rate 1:1": (
        "casino-001", "AS AH KD", 1000, [("even", 1, "p1"), ("close",), ("deal", "7C")],
        [("even_money", 0, 1000)]),
    "001 77 of one suit 0,5:1, paid at once": (
        "casino-001", "7S 9H 7S", 1000, [("act", 1, "stand"), ("deal", "8C")],
        [("bonus_77", 0, 500), ("main", 0, -1000)]),  # 14 v 17 loses; the bonus stays paid
    "001 777 of different suits 1:1": (
        "casino-001", "7S 9H 7H", 1000, [("act", 1, "hit"), ("deal", "7D 8C")],
        [("bonus_777", 0, 1000), ("main", 0, 1000)]),  # and the 21 beats 17 at 1:1
    "001 777 of one suit 5:1": (
        "casino-001", "7S 9H 7S", 1000, [("act", 1, "hit"), ("deal", "7S 8C")],
        [("bonus_77", 0, 500), ("bonus_777", 0, 5000), ("main", 0, 1000)]),
    "001 777 loses if the dealer draws Black Jack": (
        "casino-001", "7S AH 7H", 1000, [("close",), ("act", 1, "hit"), ("deal", "7D KD")],
        [("main", 0, -1000)]),
    "001 21 of 5 cards: 1:1 at once, then the bet plays on": (
        "casino-001", "2S 9H 3D", 1000, [("act", 1, "hit"), ("deal", "2C"), ("act", 1, "hit"), ("deal", "4H"),
                                          ("act", 1, "hit"), ("deal", "TD 8C")],
        [("five_card_21", 0, 1000), ("main", 0, 1000)]),  # 2+3+2+4+10 = 21 in five cards, then 21 v 17
    "001 7 or more cards not over 21: 1:1 at once, then the bet plays on": (
        "casino-001", "2S 9H 2D", 1000, [("act", 1, "hit"), ("deal", "2C"), ("act", 1, "hit"), ("deal", "3H"),
                                          ("act", 1, "hit"), ("deal", "2H"), ("act", 1, "hit"), ("deal", "3C"),
                                          ("act", 1, "hit"), ("deal", "4S"), ("act", 1, "stand"), ("deal", "8C")],
        [("seven_card_hand", 0, 1000), ("main", 0, 1000)]),  # 2+2+2+3+2+3+4 = 18 in seven cards, 18 v 17
    # ---- casino-002 (seed 002), table minimum 10.00: it states no ratio for a win or a blackjack ----
    "002 insurance paid 2 to 1, the initial bet lost to the dealer's Blackjack": (
        "casino-002", "9S AH 9D", 2000, [("insure", 1, "p1", 1000), ("close",), ("act", 1, "stand"), ("deal", "KD")],
        [("main", 0, -2000), ("insurance", None, 2000)]),
    "002 insurance lost when the dealer makes no Blackjack": (
        "casino-002", "9S AH 9D", 2000, [("insure", 1, "p1", 1000), ("close",), ("act", 1, "stand"), ("deal", "7C")],
        [("main", 0, 0), ("insurance", None, -1000)]),
    "002 a player Blackjack stands off the dealer's": (
        "casino-002", "AS TH KD", 2000, [("deal", "AC")],
        [("main", 0, 0)]),
    "002 even money: payment of 1 to 1": (
        "casino-002", "AS AH KD", 2000, [("even", 1, "p1"), ("close",), ("deal", "7C")],
        [("even_money", 0, 2000)]),
    "002 split aces receiving a ten are 21, not Blackjack: a stand off with the dealer's 21": (
        "casino-002", "AS 9H AD", 2000, [("act", 1, "split"), ("deal", "KD QC 2S TC")],
        [("main", 0, 0), ("main", 1, 0)]),  # 21 and 21 (A Q) v the dealer's 9 2 T: same point count
    # ---- casino-003 (seed 003), table minimum 25.00 ----
    "003 winning bets at even money": (
        "casino-003", "TS 9H 9D", 2500, [("act", 1, "stand"), ("deal", "8C")],
        [("main", 0, 2500)]),
    "003 Blackjack at three to two": (
        "casino-003", "AS 9H KD", 2500, [("deal", "8C")],
        [("main", 0, 3750)]),  # 25.00 x 3/2
    "003 a Blackjack always beats twenty one": (
        "casino-003", "AS TH KD", 2500, [("deal", "5C 6D")],
        [("main", 0, 3750)]),  # the dealer's T 5 6: 21 of three cards
    "003 winning insurance bets at two to one": (
        "casino-003", "9S AH 9D", 2500, [("insure", 1, "p1", 1250), ("close",), ("act", 1, "stand"), ("deal", "KD")],
        [("main", 0, -2500), ("insurance", None, 2500)]),  # 12.50 insured, 25.00 won
    "003 insurance a losing bet without the dealer's Blackjack": (
        "casino-003", "9S AH 9D", 2500, [("insure", 1, "p1", 1250), ("close",), ("act", 1, "stand"), ("deal", "7C")],
        [("main", 0, 0), ("insurance", None, -1250)]),
    "003 a Blackjack insured against the dealer's ace is paid even money": (
        "casino-003", "AS AH KD", 2500, [("even", 1, "p1"), ("close",), ("deal", "7C")],
        [("even_money", 0, 2500)]),
    "003 a split ace and a ten: twenty one, paid even money": (
        "casino-003", "AS 9H AD", 2500, [("act", 1, "split"), ("deal", "KD 8C 8S")],
        [("main", 0, 2500), ("main", 1, 2500)]),
    "003 a double: an additional stake equal to the original, one card": (
        "casino-003", "6S 9H 5D", 2500, [("act", 1, "double"), ("deal", "TC 8C")],
        [("main", 0, 5000)]),  # 50.00 on the hand, 21 v 17 at even money
    "003 the same total: a stand off": (
        "casino-003", "TS 8H 8D", 2500, [("act", 1, "stand"), ("deal", "KC")],
        [("main", 0, 0)]),
    # ---- casino-004 (seed 004), table minimum 10.00 ----
    "004 all winning bets 1:1": (
        "casino-004", "TS 9H 9D", 1000, [("act", 1, "stand"), ("deal", "8C")],
        [("main", 0, 1000)]),
    "004 Black Jack 3:2": (
        "casino-004", "AS 9H KD", 1000, [("deal", "8C")],
        [("main", 0, 1500)]),
    "004 Black Jack against the dealer's Black Jack: neither lost": (
        "casino-004", "AS TH KD", 1000, [("deal", "AC")],
        [("main", 0, 0)]),
    "004 insurance 2:1 against the dealer's Black Jack": (
        "casino-004", "9S AH 9D", 1000, [("insure", 1, "p1", 500), ("close",), ("act", 1, "stand"), ("deal", "KD")],
        [("main", 0, -1000), ("insurance", None, 1000)]),
    "004 no Black Jack: no interest of insurance": (
        "casino-004", "9S AH 9D", 1000, [("insure", 1, "p1", 500), ("close",), ("act", 1, "stand"), ("deal", "7C")],
        [("main", 0, 0), ("insurance", None, -500)]),
    "004 equal money: Black Jack paid 1:1": (
        "casino-004", "AS AH KD", 1000, [("even", 1, "p1"), ("close",), ("deal", "7C")],
        [("even_money", 0, 1000)]),
    "004 surrender loses the half of the bet": (
        "casino-004", "TS 9H 6D", 1000, [("act", 1, "surrender"), ("deal", "8C")],
        [("surrender", 0, -500)]),
    "004 surrender against an ace too (the sheet names no exception for it)": (
        "casino-004", "TS AH 6D", 1000, [("close",), ("act", 1, "surrender"), ("deal", "8C")],
        [("surrender", 0, -500)]),
    "004 split aces with a ten: plays like 21, paid 1:1": (
        "casino-004", "AS 9H AD", 1000, [("act", 1, "split"), ("deal", "KD 8C 8S")],
        [("main", 0, 1000), ("main", 1, 1000)]),
    "004 a double: the same sum again, one card": (
        "casino-004", "6S 9H 5D", 1000, [("act", 1, "double"), ("deal", "TC 8C")],
        [("main", 0, 2000)]),
}


@pytest.mark.parametrize("case", PAYOUTS)
def test_each_payout_the_seed_sheets_state(case: str) -> None:
    casino, initial_deal, stake, script, lines = PAYOUTS[case]
    r = new_round(rules_for(casino), [(1, "p1", stake)])
    r.no_more_bets("dealer-1")
    run(r, [("deal", initial_deal), *script])
    assert r.state == "complete", f"{case}: {r.state} after the script, next {r.expected_next()}"
    s = settlement_of(r)
    assert sorted((ln.kind, ln.hand if ln.hand is not None else -1, ln.net) for ln in s.lines) == sorted(
        (kind, hand if hand is not None else -1, net) for kind, hand, net in lines)
    assert all(ln.player == "p1" for ln in s.lines)
    assert s.house == -sum(net for _, _, net in lines)
