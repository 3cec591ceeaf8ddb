"""Scenarios worked by hand from one casino's sheet each: box control (who decides), co-players'
answers to a double or a split, the box maximum, and the rules one sheet states and the others do
not. Each is a stacked shoe (burn cards not fed: the round starts at its first card) with the money
WRITTEN here, worked from the sheet, never computed by the code under test. The refusals name the
rule (docs/rules.md)."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from devices.events import Reason
from devices.game.inputs import CoPlayerChoice
from devices.game.round import Action, Round
from devices.errors import RuleViolation
from tests.game.game_helpers import Recorder, deal, nets, new_round, rules_for, snapshot

HIT, STAND, DOUBLE, SPLIT, SURRENDER = Action.HIT, Action.STAND, Action.DOUBLE, Action.SPLIT, Action.SURRENDER


def joins(player: str, amount: int | None = None) -> CoPlayerChoice:
    return CoPlayerChoice(player, True, amount=amount)


def declines(player: str, stays_on: int | None = None) -> CoPlayerChoice:
    return CoPlayerChoice(player, False, stays_on=stays_on)


def refused(r: Round, rule: str, call: Callable[..., Any], *args: Any, **kw: Any) -> None:
    """The input is refused by ``rule``, journaled, and changes nothing."""
    before = snapshot(r)
    with pytest.raises(RuleViolation) as e:
        call(*args, **kw)
    assert e.value.rule == rule, e.value
    assert snapshot(r) == before


def act(r: Round, box: int, action: Action, player: str, *co: CoPlayerChoice, amount: int | None = None) -> None:
    r.act(box, action, "dealer-1", amount=amount, player=player, co_players=co)


def house(r: Round) -> Any:
    assert r.settlement is not None
    return r.settlement.house


def table(casino: str, bets: list[tuple[int, str, int]]) -> tuple[Round, Recorder]:
    rec = Recorder()
    return new_round(rules_for(casino), bets, rec), rec


# ---- box control ------------------------------------------------------------------------------

def test_s1_003_only_the_owner_doubles_co_players_decline_or_join() -> None:
    # "The first player at the table ... calls the cards"; "If the box owner decides to double and the
    # others refuse, then only one extra card is dealt to that box."
    r, _ = table("casino-003", [(1, "a", 10000), (1, "b", 5000), (1, "c", 2500)])
    r.no_more_bets("dealer-1")
    deal(r, "6S 5H 5D")  # box 1: 11; dealer 5
    refused(r, "box_owner_decides", act, r, 1, DOUBLE, "b")
    refused(r, "co_player_choice", act, r, 1, DOUBLE, "a", joins("c"))  # b's answer is missing
    act(r, 1, DOUBLE, "a", declines("b"), joins("c"))
    deal(r, "9S")  # 20, one card
    deal(r, "TC 7H")  # dealer 5+10+7 = 22
    assert nets(r) == {"a": 20000, "b": 5000, "c": 5000}
    assert house(r) == -30000


def test_s2_003_a_declined_split_stays_on_the_first_hand_and_each_answers_the_double_again() -> None:
    # "If the box owner decides to split and the others refuse, then they continue to play on the first
    # of the split hands." "Doubling down on a split hand is possible"
    r, rec = table("casino-003", [(1, "a", 10000), (1, "b", 10000), (1, "c", 5000)])
    r.no_more_bets("dealer-1")
    deal(r, "8S 6H 8D")
    refused(r, "split_hand_choice", act, r, 1, SPLIT, "a", declines("b", 2), joins("c"))
    act(r, 1, SPLIT, "a", declines("b"), joins("c"))
    assert [h.stakes for h in r.hands] == [{"a": 10000, "b": 10000, "c": 5000}, {"a": 10000, "c": 5000}]
    deal(r, "3H")  # hand 1: 11
    act(r, 1, DOUBLE, "a", declines("b"), joins("c"))
    deal(r, "TD")  # hand 1: 21
    deal(r, "9C")  # hand 2: 17
    act(r, 1, STAND, "a")
    deal(r, "TS 3D")  # dealer 6+10+3 = 19
    assert nets(r) == {"a": 10000, "b": 10000, "c": 5000}  # a +20000-10000, b +10000, c +10000-5000
    assert house(r) == -25000
    split = [e for e in rec.of(Reason.ACTION) if e.data.get("action") == "split"][0]
    assert split.data["player"] == "a" and [c["player"] for c in split.data["co_players"]] == ["b", "c"]


def test_s3_003_the_owner_stands_so_no_co_player_may_split_or_double() -> None:
    # "If the box owner decides not to split or double, then the other players cannot split or double."
    # (a second box keeps the players' turn open after box 1 stands)
    r, _ = table("casino-003", [(1, "a", 5000), (1, "b", 5000), (2, "d", 5000)])
    r.no_more_bets("dealer-1")
    deal(r, "TS 7C 9H TC TD")  # box 1: T,T = 20; box 2: 17; dealer 9
    refused(r, "box_owner_decides", act, r, 1, SPLIT, "b")
    act(r, 1, STAND, "a")
    refused(r, "box_owner_decides", act, r, 1, DOUBLE, "b")  # the owner check comes first
    act(r, 2, STAND, "d")
    deal(r, "8D")  # dealer 17
    assert nets(r) == {"a": 5000, "b": 5000, "d": 0}
    assert house(r) == -10000


def test_s4_003_insurance_is_each_player_s_own_choice_on_a_shared_box() -> None:
    # "all players sharing the box, may decide individually whether or not to accept insurance"
    r, _ = table("casino-003", [(1, "a", 10000), (1, "b", 6000), (1, "c", 5000)])
    r.no_more_bets("dealer-1")
    deal(r, "TS AH 9D")  # box 1: 19; dealer ace
    r.insure(1, "a", 5000)
    refused(r, "insurance_half_bet", r.insure, 1, "b", 3001)  # "up to half their original stake"
    r.insure(1, "b", 3000)
    r.close_insurance("dealer-1")
    refused(r, "box_owner_decides", act, r, 1, STAND, "c")
    act(r, 1, STAND, "a")
    deal(r, "KD")  # dealer blackjack
    assert nets(r) == {"a": 0, "b": 0, "c": -5000}  # a -10000+10000, b -6000+6000
    assert house(r) == 5000


def test_s5_000_a_co_player_cannot_hit_and_joins_the_owner_s_double_for_less_with_his_own_amount() -> None:
    # 3.10 "priority is given to the first player on a box"; 9.1.1 "between the table's minimum and the initial bet"
    r, _ = table("casino-000", [(3, "a", 20000), (3, "b", 10000)])
    r.no_more_bets("dealer-1")
    deal(r, "5C 6D 6H")  # box 3: 11; dealer 6
    refused(r, "box_owner_decides", act, r, 3, HIT, "b")
    refused(r, "double_amount", act, r, 3, DOUBLE, "a", joins("b", 500), amount=10000)  # 500 < minimum 1000
    act(r, 3, DOUBLE, "a", joins("b"), amount=10000)
    deal(r, "2S")  # 13, closed
    deal(r, "TH 9S")  # dealer 6+10+9 = 25
    assert nets(r) == {"a": 30000, "b": 20000}
    assert house(r) == -50000


def test_s6_001_only_the_owner_surrenders_and_the_box_folds_with_him() -> None:
    # "Other players participating in a box may not influence the decisions of the player holding the
    # respective hand"; surrender "lose 1/2 of the considered bets"
    r, _ = table("casino-001", [(1, "a", 4000), (1, "b", 2000), (2, "c", 1000)])
    r.no_more_bets("dealer-1")
    deal(r, "TS 9D TH 6C 8S")  # box 1: 16, box 2: 17, dealer 10
    refused(r, "box_owner_decides", act, r, 1, SURRENDER, "b")
    act(r, 1, SURRENDER, "a")
    act(r, 2, STAND, "c")
    deal(r, "7C")  # dealer 17
    assert nets(r) == {"a": -2000, "b": -1000, "c": 0}
    assert house(r) == 3000


def test_s7_002_a_declined_split_stays_on_the_first_hand_by_default_and_a_split_21_is_not_doubled() -> None:
    # 002 is silent on the declined split: the default first hand applies. "double any two cards
    # (except Blackjack and 21)"
    r, _ = table("casino-002", [(1, "a", 10000), (1, "b", 10000)])
    r.no_more_bets("dealer-1")
    deal(r, "TH 7S KD")  # T,K: "identical value"
    refused(r, "split_hand_choice", act, r, 1, SPLIT, "a", declines("b", 2))
    act(r, 1, SPLIT, "a", declines("b"))
    deal(r, "AS")  # hand 1: 21 (split tens receiving an ace), closed
    refused(r, "no_draw_on_21", act, r, 1, DOUBLE, "a")
    deal(r, "9C")  # hand 2: 19
    act(r, 1, STAND, "a")
    deal(r, "TD")  # dealer 17
    assert nets(r) == {"a": 20000, "b": 10000}
    assert house(r) == -30000


def test_s8_004_a_split_hand_s_21_may_be_doubled() -> None:
    # "It is possible to «double» the bet in any combination of two play cards (the exclusion is Black Jack)."
    r, _ = table("casino-004", [(1, "a", 10000)])
    r.no_more_bets("dealer-1")
    deal(r, "TH 7S KD")
    act(r, 1, SPLIT, "a")
    deal(r, "AS")  # hand 1: T+A = 21, not a blackjack: it waits for the owner
    refused(r, "no_draw_on_21", act, r, 1, HIT, "a")
    act(r, 1, DOUBLE, "a")
    deal(r, "5D")  # 10+1+5 = 16
    deal(r, "9C")  # hand 2: 19
    act(r, 1, STAND, "a")
    deal(r, "TD")  # dealer 17
    assert nets(r) == {"a": -10000}  # hand 1 -20000, hand 2 +10000
    assert house(r) == 10000


def test_s9_000_a_co_player_who_declines_a_split_chooses_the_second_card() -> None:
    # 10.1 "If there is another player on the box and he or she does not want to split, they must choose
    # the card to leave their bet on."
    r, rec = table("casino-000", [(2, "a", 10000), (2, "b", 5000)])
    r.no_more_bets("dealer-1")
    deal(r, "9H 8C 9S")
    refused(r, "split_hand_choice", act, r, 2, SPLIT, "a", declines("b"))
    act(r, 2, SPLIT, "a", declines("b", 2))
    assert [h.stakes for h in r.hands] == [{"a": 10000}, {"a": 10000, "b": 5000}]
    deal(r, "7D")  # hand 1: 16
    act(r, 2, HIT, "a")
    deal(r, "TC")  # 26, bust
    deal(r, "AC")  # hand 2: soft 20
    act(r, 2, STAND, "a")
    deal(r, "TS")  # dealer 18
    assert nets(r) == {"a": 0, "b": 5000}
    assert house(r) == -5000
    split = [e for e in rec.of(Reason.ACTION) if e.data.get("action") == "split"][0]
    assert split.data["moved_to_second_hand"] == ["b"]


def test_s24_004_box_control_where_the_sheet_is_silent_the_owner_decides() -> None:
    # 004 never mentions co-players: the defaults (3 players per box, the owner decides) apply
    r, _ = table("casino-004", [(1, "a", 10000), (1, "b", 5000)])
    r.no_more_bets("dealer-1")
    deal(r, "5S 9H 6C")  # 11 against 9
    refused(r, "box_owner_decides", act, r, 1, DOUBLE, "b")
    refused(r, "box_owner_decides", r.act, 1, DOUBLE, "dealer-1")  # a shared box: the decider must be named
    act(r, 1, DOUBLE, "a", declines("b"))
    deal(r, "9D")  # 20
    deal(r, "8C")  # dealer 17
    assert nets(r) == {"a": 20000, "b": 5000}
    assert house(r) == -25000


# ---- the box maximum ---------------------------------------------------------------------------

def test_s10_003_the_owner_has_priority_at_the_box_maximum_and_the_co_players_reduce() -> None:
    # "If the total wagered on one box exceeds the table maximum, then the box owner has priority and
    # the other players must reduce their stakes." (min 2500, max 250000)
    r, rec = table("casino-003", [(4, "a", 100000), (4, "b", 100000), (4, "c", 40000)])
    r.place_bet(4, "a", 60000)  # a 160000, box 300000: 50000 over
    announced = rec.of(Reason.BOX_OVER_MAXIMUM)[-1].data
    assert announced["over"] == 50000 and announced["reduce"] == {"c": 37500, "b": 12500}  # latest first
    assert r.reductions_at_maximum(4) == {"c": 37500, "b": 12500}
    # each cut with the stake to reduce to: reduce_bet's amount is the new stake, not the cut
    assert rec.of(Reason.BOX_OVER_MAXIMUM)[-1].message.endswith(
        "the owner has priority; c reduces by 375.00, to 25.00, b reduces by 125.00, to 875.00")
    refused(r, "box_maximum_reduce", r.no_more_bets, "dealer-1")
    with pytest.raises(RuleViolation) as closing:
        r.no_more_bets("dealer-1")
    assert closing.value.message == ("box 4 is 500.00 over the maximum: the co-players reduce their bets first with "
                                     "reduce_bet (c by 375.00, to 25.00, b by 125.00, to 875.00)")
    refused(r, "box_maximum", r.place_bet, 4, "b", 5000)  # the priority is the owner's only
    refused(r, "table_minimum", r.reduce_bet, 4, "c", 1000)
    r.reduce_bet(4, "c", 2500)  # box 262500
    refused(r, "box_maximum_reduce", r.no_more_bets, "dealer-1")
    r.reduce_bet(4, "b", 87500)  # box 250000
    r.no_more_bets("dealer-1")
    deal(r, "TD 6S QH")  # 20 against 6
    act(r, 4, STAND, "a")
    deal(r, "5C 4D 9H")  # dealer 24
    assert nets(r) == {"a": 160000, "b": 87500, "c": 2500}
    assert house(r) == -250000


def test_s11_000_no_priority_at_the_maximum_the_owner_s_raise_is_refused() -> None:
    r, _ = table("casino-000", [(1, "a", 100000), (1, "b", 90000)])
    refused(r, "box_maximum", r.place_bet, 1, "a", 20000)  # 210000 > 200000
    r.place_bet(1, "a", 10000)  # exactly 200000
    r.no_more_bets("dealer-1")
    deal(r, "9S TH 9C")
    act(r, 1, STAND, "a")
    deal(r, "7D")  # dealer 17
    assert nets(r) == {"a": 110000, "b": 90000}
    assert house(r) == -200000


def test_a_bet_is_reduced_or_withdrawn_only_by_its_player_before_no_more_bets() -> None:
    r, rec = table("casino-002", [(1, "a", 3000), (1, "b", 2000)])
    refused(r, "reduce_needs_wager", r.reduce_bet, 1, "c", 1000)
    refused(r, "bet_amount", r.reduce_bet, 1, "b", 2000)  # not lower
    r.reduce_bet(1, "a", 0)  # the owner withdraws: b, next in betting order, owns the box
    assert r.wagers == {1: {"b": 2000}}
    r.no_more_bets("dealer-1")
    refused(r, "round_state", r.reduce_bet, 1, "b", 1000)
    deal(r, "TS 7H 9C")
    act(r, 1, STAND, "b")
    deal(r, "TD")  # dealer 17
    assert nets(r) == {"b": 2000}


# ---- one sheet's rules -------------------------------------------------------------------------

def test_s15_004_unlimited_ace_splits_make_five_hands() -> None:
    # "In case of the Ace you can do unlimited spleens."
    r, _ = table("casino-004", [(1, "a", 2000)])
    r.no_more_bets("dealer-1")
    deal(r, "AS 9D AH")
    for ace in ("AD", "AC", "AS"):  # each new ace on hand 1 waits: the owner may split again
        act(r, 1, SPLIT, "a")
        deal(r, ace)
    act(r, 1, SPLIT, "a")  # the fourth split: five hands
    assert len(r.hands) == 5
    deal(r, "TH 9C 5D KC 7H")  # 21, 20, 16, 21, 18
    deal(r, "8S")  # dealer 17
    assert nets(r) == {"a": 6000}  # 4 x 2000 - 2000
    assert house(r) == -6000


def test_s16_003_ace_splits_stop_at_three() -> None:
    # "All pairs may be split up to three (3) times, resulting in four split hands." "Aces can be split also"
    r, _ = table("casino-003", [(1, "a", 5000)])
    r.no_more_bets("dealer-1")
    deal(r, "AS 9D AH")
    for ace in ("AD", "AC"):
        act(r, 1, SPLIT, "a")
        deal(r, ace)
    act(r, 1, SPLIT, "a")  # the third split: four hands
    deal(r, "AS")  # hand 1: A,A = 12, closed
    refused(r, "ace_split_limit", act, r, 1, SPLIT, "a")
    deal(r, "TH 9C KC")  # 21, 20, 21
    deal(r, "8S")  # dealer 17
    assert nets(r) == {"a": 10000}  # -5000 + 3 x 5000
    assert house(r) == -10000


def test_s17_004_surrender_against_an_ace_and_insurance_from_half_the_table_minimum() -> None:
    # "The size of the bet may vary from the half of the minimum of the table to half of the player's bet."
    r, _ = table("casino-004", [(1, "a", 10000), (2, "b", 4000)])
    r.no_more_bets("dealer-1")
    deal(r, "TC TS AS 6H 9H")  # box 1: 16, box 2: 19, dealer ace
    refused(r, "insurance_minimum", r.insure, 2, "b", 400)  # below 1000 / 2
    r.close_insurance("dealer-1")
    act(r, 1, SURRENDER, "a")
    act(r, 2, STAND, "b")
    deal(r, "KH")  # dealer blackjack: the surrender stands
    assert nets(r) == {"a": -5000, "b": -4000}
    assert house(r) == 9000


def test_s18_000_no_surrender_against_an_ace() -> None:
    # 6.2 "Players cannot «Surrender» if the dealer's card is an Ace."
    r, _ = table("casino-000", [(1, "a", 10000), (2, "b", 4000)])
    r.no_more_bets("dealer-1")
    deal(r, "TC TS AS 6H 9H")
    r.close_insurance("dealer-1")
    refused(r, "no_surrender_against_ace", act, r, 1, SURRENDER, "a")
    act(r, 1, STAND, "a")
    act(r, 2, STAND, "b")
    deal(r, "KH")
    assert nets(r) == {"a": -10000, "b": -4000}
    assert house(r) == 14000


def test_s21_002_dealer_blackjack_takes_the_split_and_doubled_stakes() -> None:
    # "Blackjack: ... This is the highest hand and beats all others." (reading of "the players' initial
    # bet will lose": docs/rules.md, every stake on a beaten hand loses)
    r, _ = table("casino-002", [(1, "a", 10000)])
    r.no_more_bets("dealer-1")
    deal(r, "8C AD 8H")
    r.close_insurance("dealer-1")
    act(r, 1, SPLIT, "a")
    deal(r, "3S")  # hand 1: 11
    act(r, 1, DOUBLE, "a")
    deal(r, "5C")  # 16
    deal(r, "TC")  # hand 2: 18
    act(r, 1, STAND, "a")
    deal(r, "KS")  # dealer blackjack
    assert nets(r) == {"a": -30000}
    assert house(r) == 30000


def test_s22_002_insurance_up_to_half_the_bet_is_the_default_not_the_sheet_s_rule() -> None:
    # 002 names no insurance maximum: the default half_box_stake applies (docs/rules.md)
    r, _ = table("casino-002", [(1, "a", 10000)])
    r.no_more_bets("dealer-1")
    deal(r, "TS AH 9C")
    refused(r, "insurance_half_bet", r.insure, 1, "a", 5001)
    r.insure(1, "a", 5000)
    r.close_insurance("dealer-1")
    act(r, 1, STAND, "a")
    deal(r, "KD")
    assert nets(r) == {"a": 0}


def test_s23_003_insuring_a_blackjack_is_paid_even_money() -> None:
    # "Any player(s) wishing to insure a Blackjack against a dealers Ace, will be paid even money."
    r, rec = table("casino-003", [(1, "a", 10000), (1, "b", 5000)])
    r.no_more_bets("dealer-1")
    deal(r, "AS AH KD")  # box 1 blackjack, dealer ace
    refused(r, "even_money_for_blackjack", r.insure, 1, "b", 1000)
    r.even_money(1, "b")
    assert rec.of(Reason.ACTION)[-1].message.endswith("b takes even money at box 1: paid 50.00 at once")  # units
    r.close_insurance("dealer-1")
    deal(r, "6C")  # dealer soft 17 stands ("stand on any seventeen (17), hard or soft")
    assert nets(r) == {"a": 15000, "b": 5000}
    assert house(r) == -20000


def test_s23_000_insuring_a_blackjack_is_insurance_where_the_sheet_says_nothing_else() -> None:
    # 000 5.2 lets "players" insure, 5.5 offers even money "As an option"
    r, _ = table("casino-000", [(1, "a", 10000), (1, "b", 5000)])
    r.no_more_bets("dealer-1")
    deal(r, "AS AH KD")
    r.insure(1, "b", 1000)
    r.close_insurance("dealer-1")
    deal(r, "6C")  # dealer soft 17: no blackjack, the insurance loses
    assert nets(r) == {"a": 15000, "b": 6500}  # b: 5000 x 3/2 - 1000
    assert house(r) == -21500


def test_003_a_co_player_at_the_minimum_is_told_to_withdraw_with_a_new_stake_of_0() -> None:
    r, rec = table("casino-003", [(2, "a", 100000), (2, "b", 2500)])
    r.place_bet(2, "a", 150000)  # a 250000: b, at the table minimum, cannot reduce: he withdraws
    with pytest.raises(RuleViolation) as closing:
        r.no_more_bets("dealer-1")
    assert closing.value.message.endswith("(b by 25.00, to 0.00, withdrawing his bet)")
    r.reduce_bet(2, "b", 0)
    r.no_more_bets("dealer-1")


def test_001_insurance_over_half_of_all_bets_names_the_half_then_what_it_is_half_of() -> None:
    # not "insurance 50.01 ... exceeds half of all p1's bets 100.00", which reads as if the half were 100.00
    r, _ = table("casino-001", [(1, "p1", 5000), (2, "p1", 5000)])
    r.no_more_bets("dealer-1")
    deal(r, "9S 8C AD TH 9H")  # the dealer's ace: insurance
    with pytest.raises(RuleViolation) as over:
        r.insure(1, "p1", 5001)
    assert over.value.message == "insurance 50.01 exceeds 50.00, half of all p1's bets (100.00)"
    r.insure(1, "p1", 2500)
    with pytest.raises(RuleViolation) as again:
        r.insure(2, "p1", 2501)
    assert again.value.message == "insurance 25.01 with 25.00 already (50.01) exceeds 50.00, half of all p1's bets (100.00)"


def test_an_amount_on_a_split_or_a_hit_is_refused_not_ignored() -> None:
    # no rules key allows a split for less: the amount was taken and ignored, the split made for the stake
    r, _ = table("casino-000", [(1, "a", 10000)])
    r.no_more_bets("dealer-1")
    deal(r, "8S 6D 8H")
    with pytest.raises(RuleViolation) as split:
        r.act(1, SPLIT, "dealer-1", amount=5000)
    assert (split.value.rule, split.value.message) == (
        "double_amount", "an amount is only for a double for less, not a split (a split is for the stake)")
    refused(r, "double_amount", r.act, 1, HIT, "dealer-1", amount=5000)
    r.act(1, SPLIT, "dealer-1")
