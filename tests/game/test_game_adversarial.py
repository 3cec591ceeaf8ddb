"""Adversarial QA of the round: inputs in odd orders and rounds settled by hand from the seed sheets."""
from __future__ import annotations

import pytest

from devices.events import Reason, Role
from devices.game.inputs import CoPlayerChoice
from devices.game.round import Action
from devices.errors import RuleViolation

from tests.game.game_helpers import Recorder, deal, nets, new_round, rules_for, run, settlement_of, snapshot


@pytest.mark.parametrize("casino", ["casino-000", "casino-004"])  # both surrender windows
def test_no_surrender_once_the_player_has_asked_for_a_third_card(casino: str) -> None:
    rec = Recorder()
    r = new_round(rules_for(casino), [(1, "a", 1000), (2, "b", 1000)], rec)
    r.no_more_bets("dealer-1")
    deal(r, "5H 6H 9C 7D 8S")  # box 1: 12 against a 9
    r.act(1, Action.HIT, "a")  # the third card is asked for, not yet out of the shoe
    before = snapshot(r)
    with pytest.raises(RuleViolation) as exc:
        r.act(1, Action.SURRENDER, "a")
    assert exc.value.rule == "surrender_first_two_cards"
    assert snapshot(r) == before


def test_a_second_blackjack_pairs_bet_adds_to_the_first_and_is_settled_whole() -> None:
    rules = rules_for("casino-002")
    bp = rules.side_bets.blackjack_pairs
    r = new_round(rules, [(1, "a", 2000)])
    r.place_pairs_bet(1, "a", bp.min)
    r.place_pairs_bet(1, "a", bp.min)  # more chips on the same spot, as with a main bet
    r.no_more_bets("dealer-1")
    deal(r, "8H 6C 9S")  # box 1: 8 9, no pair
    r.act(1, Action.STAND, "a")
    deal(r, "TC 5D")  # dealer 6 10 5
    pairs = [ln for ln in settlement_of(r).lines if ln.kind == "pairs"]
    assert [(ln.stake, ln.net) for ln in pairs] == [(2 * bp.min, -2 * bp.min)]


def test_blackjack_pairs_bets_together_stay_within_the_maximum() -> None:
    rules = rules_for("casino-002")
    bp = rules.side_bets.blackjack_pairs
    r = new_round(rules, [(1, "a", 2000)])
    r.place_pairs_bet(1, "a", bp.max)
    before = snapshot(r)
    with pytest.raises(RuleViolation) as exc:
        r.place_pairs_bet(1, "a", bp.min)
    assert exc.value.rule == "side_bet_limits" and snapshot(r) == before


# ---- rounds settled by hand from the seed sheets ----------------------------------------------

def _play(casino: str, bets: list[tuple[int, str, int]], script: list[tuple]) -> dict[str, object]:
    r = new_round(rules_for(casino), bets)
    run(r, [("no_more_bets",)] + script)
    assert r.state == "complete"
    return {p: int(v) if v == int(v) else v for p, v in nets(r).items()}


def test_split_aces_making_21_lose_to_a_dealer_blackjack() -> None:
    # seed 000 10.2: split aces with a ten is 21, not blackjack; 12.1: a dealer blackjack beats any 21
    assert _play("casino-000", [(1, "a", 1000)], [
        ("deal", "AS TD AH"), ("act", 1, "split"), ("deal", "KC 9D"), ("deal", "AC")]) == {"a": -2000}


def test_double_after_split_pushes_against_a_dealer_21() -> None:
    # box 1: 8 8 split; hand 1: 8 3 doubled, draws a ten = 21; hand 2: 8 9 stands. Dealer 6 5 T = 21.
    assert _play("casino-000", [(1, "a", 1000)], [
        ("deal", "8S 6D 8H"), ("act", 1, "split"), ("deal", "3C"), ("act", 1, "double"), ("deal", "TC"),
        ("deal", "9D"), ("act", 1, "stand"), ("deal", "5S TH")]) == {"a": -1000}


def test_even_money_taken_then_a_dealer_blackjack() -> None:
    # seed 000 5.5: even money is paid 1:1 at once; the dealer's blackjack takes nothing back
    assert _play("casino-000", [(1, "a", 1000), (2, "b", 1000)], [
        ("deal", "AS 9C AD KH 7C"), ("even", 1, "a"), ("close",), ("act", 2, "stand"),
        ("deal", "QS")]) == {"a": 1000, "b": -1000}


def test_insurance_over_several_boxes_under_half_all_bets() -> None:
    # seed 001: one player insures up to half of the total of all his bets, here on one box
    assert _play("casino-001", [(1, "a", 1000), (2, "a", 1000)], [
        ("deal", "9S 8C AD TH 9H"), ("insure", 1, "a", 1000), ("close",), ("act", 1, "stand"),
        ("act", 2, "stand"), ("deal", "KD")]) == {"a": 0}


def test_a_co_player_who_declines_a_split_rides_one_hand_only() -> None:
    # box 1: owner a, co-player b declines the split; dealer 6 T 8 busts
    assert _play("casino-000", [(1, "a", 1000), (1, "b", 1000)], [
        ("deal", "8S 6D 8H"), ("act", 1, "split", {"player": "a", "co_players": (CoPlayerChoice("b", False, stays_on=1),)}),
        ("deal", "TC"), ("act", 1, "stand", {"player": "a"}), ("deal", "9D"), ("act", 1, "stand", {"player": "a"}),
        ("deal", "TS 8C")]) == {"a": 2000, "b": 1000}


def test_seven_card_21_wins_both_bonuses_at_once_then_the_hand() -> None:
    # seed 001: five-card 21 and a seven-card hand each pay 1:1 at once; the hand then beats 20
    assert _play("casino-001", [(1, "a", 1000)], [
        ("deal", "AS 9C AH"), ("act", 1, "hit"), ("deal", "2C"), ("act", 1, "hit"), ("deal", "2D"),
        ("act", 1, "hit"), ("deal", "AD"), ("act", 1, "hit"), ("deal", "AC"), ("act", 1, "hit"),
        ("deal", "3S"), ("deal", "TD")]) == {"a": 3000}


@pytest.mark.parametrize("amount", [1000.0, 1500.5, True])
def test_a_double_for_an_amount_that_is_not_whole_cents_is_refused(amount) -> None:
    r = new_round(rules_for("casino-000"), [(1, "a", 2000)])  # seed 000 doubles for less
    r.no_more_bets("dealer-1")
    deal(r, "5H 6H 6C")
    before = snapshot(r)
    with pytest.raises(RuleViolation) as exc:
        r.act(1, Action.DOUBLE, "a", amount=amount)
    assert exc.value.rule == "double_amount" and snapshot(r) == before


def test_a_void_round_journals_every_stake_it_gives_back_side_bets_and_insurance_too() -> None:
    rules = rules_for("casino-002")  # Blackjack Pairs offered
    rec = Recorder()
    r = new_round(rules, [(1, "a", 2000), (2, "b", 2000)], rec)
    r.place_pairs_bet(1, "a", rules.side_bets.blackjack_pairs.min)
    r.no_more_bets("dealer-1")
    deal(r, "9S 8C AD TH 9H")  # dealer ace: insurance
    r.insure(2, "b", 1000)
    r.close_insurance("dealer-1")
    r.act(1, Action.DOUBLE, "a")  # 9 8 doubled: 2000 more on the layout
    r.void(Reason.REDEAL, "sup-1", Role.SUPERVISOR)
    returned = rec.of(Reason.ROUND_VOID)[-1].data["returned"]
    assert returned == {"1:a": 4000, "2:b": 2000, "1:a:pairs": rules.side_bets.blackjack_pairs.min,
                        "2:b:insurance": 1000}
