"""The scenario table: stacked cards, the inputs, and the expected settlement or refusal, run for
every seed casino's rules file. Expectations come from the sheets (game_helpers.SHEET), not from
the TOML files, so a rules file that drifts from its sheet fails here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from devices.events import Reason
from devices.game.inputs import CoPlayerChoice
from devices.errors import RuleViolation

from tests.game.game_helpers import (
    CASINOS, SHEET, Recorder, ace_splits_allowed, nets, new_round, rules_for, run, settlement_of, snapshot,
)

A = [(1, "a", 10000)]
AB = [(1, "a", 10000), (2, "b", 10000)]
A2 = [(1, "a", 10000), (2, "a", 10000)]  # one player on two boxes
ABC1 = [(1, "a", 10000), (1, "b", 10000), (1, "c", 10000)]
GO = ("no_more_bets",)


def JOINS(player: str) -> CoPlayerChoice:
    return CoPlayerChoice(player, True)


def DECLINES(player: str, stays_on: int | None = None) -> CoPlayerChoice:
    return CoPlayerChoice(player, False, stays_on=stays_on)


def refused(rule: str) -> dict[str, Any]:
    return {"refused": rule}


def sheet(key: str, yes: Any, no: Any) -> Any:
    """Expectation that depends on what a casino's sheet says about ``key``."""
    return lambda casino: yes if SHEET[casino][key] else no


@dataclass(frozen=True)
class Scenario:
    name: str
    bets: list[tuple[int, str, int]]
    script: Any  # list[tuple[...]] or casino -> that
    expect: Any  # {"nets": {...}, "outcomes": {...}} or {"refused": rule}, or casino -> that


SCENARIOS = [
    Scenario("stand_19_beats_dealer_17", A, [GO, ("deal", "TS 7H 9C"), ("act", 1, "stand"), ("deal", "TD")],
             {"nets": {"a": 10000}, "outcomes": {"a": ["win"]}}),
    Scenario("hit_bust_dealer_still_draws", A, [GO, ("deal", "TS 7H 6C"), ("act", 1, "hit"), ("deal", "8D"),
                                                ("deal", "TD")], {"nets": {"a": -10000}, "outcomes": {"a": ["bust"]}}),
    Scenario("hit_then_push_on_17", A, [GO, ("deal", "TS 7H 6C"), ("act", 1, "hit"), ("deal", "AD"),
                                        ("act", 1, "stand"), ("deal", "KD")], {"nets": {"a": 0}, "outcomes": {"a": ["push"]}}),
    Scenario("double_takes_one_card", A, [GO, ("deal", "5S 6H 6C"), ("act", 1, "double"), ("deal", "9D"),
                                          ("deal", "TD 2C")], {"nets": {"a": 20000}, "outcomes": {"a": ["win"]}}),
    Scenario("double_on_three_cards_refused", A, [GO, ("deal", "5S 6H 3C"), ("act", 1, "hit"), ("deal", "2D"),
                                                  ("act", 1, "double")], refused("double_on_two_cards")),
    Scenario("no_hit_on_21", AB, [GO, ("deal", "TS 9S 6H 5C 7C"), ("act", 1, "hit"), ("deal", "6D"),
                                  ("act", 1, "hit")], refused("no_draw_on_21")),
    Scenario("no_hit_on_blackjack", AB, [GO, ("deal", "AS 9S 6H KC 7C"), ("act", 1, "hit")], refused("no_draw_on_21")),
    Scenario("dealer_blackjack_beats_every_hand_doubles_included", AB,
             [GO, ("deal", "TS 5S AH 9C 6C"), ("close",), ("act", 1, "stand"), ("act", 2, "double"), ("deal", "9D"),
              ("deal", "KD")],
             {"nets": {"a": -10000, "b": -20000}, "outcomes": {"a": ["dealer_blackjack"], "b": ["dealer_blackjack"]}}),
    Scenario("both_blackjack_push", A, [GO, ("deal", "AS AH KC"), ("close",), ("deal", "TD")],
             {"nets": {"a": 0}, "outcomes": {"a": ["push"]}}),
    Scenario("blackjack_pays_3_to_2", A, [GO, ("deal", "AS 9H KC"), ("deal", "TD")],
             {"nets": {"a": 15000}, "outcomes": {"a": ["blackjack"]}}),
    Scenario("blackjack_beats_dealer_21", AB, [GO, ("deal", "AS 5S 7H KC 6C"), ("act", 2, "hit"), ("deal", "TD"),
                                               ("deal", "4C TH")], {"nets": {"a": 15000, "b": 0}}),
    Scenario("dealer_stands_on_soft_17", A, [GO, ("deal", "TS 6H 9C"), ("act", 1, "stand"), ("deal", "AD")],
             {"nets": {"a": 10000}, "dealer": 2}),
    Scenario("dealer_draws_16_stands_hard_17", A, [GO, ("deal", "TS 6H 8C"), ("act", 1, "stand"), ("deal", "TD AC")],
             {"nets": {"a": 10000}, "dealer": 3}),
    Scenario("insurance_pays_2_to_1", A, [GO, ("deal", "TS AH 9C"), ("insure", 1, "a", 5000), ("close",),
                                          ("act", 1, "stand"), ("deal", "KD")],
             {"nets": {"a": 0}, "outcomes": {"a": ["dealer_blackjack", "win"]}}),
    Scenario("insurance_lost_hand_wins", A, [GO, ("deal", "TS AH 9C"), ("insure", 1, "a", 5000), ("close",),
                                             ("act", 1, "stand"), ("deal", "5D 2C")], {"nets": {"a": 5000}}),
    Scenario("insurance_over_half_refused", A, [GO, ("deal", "TS AH 9C"), ("insure", 1, "a", 5001)],
             refused("insurance_half_bet")),
    Scenario("insurance_under_minimum_refused", A, [GO, ("deal", "TS AH 9C"), ("insure", 1, "a", 50)],
             refused("insurance_minimum")),
    Scenario("insurance_up_to_half_of_all_his_bets", A2,
             [GO, ("deal", "TS 9S AH 9C 9D"), ("insure", 1, "a", 10000), ("close",), ("act", 1, "stand"),
              ("act", 2, "stand"), ("deal", "KD")],
             sheet("insurance_all_bets", {"nets": {"a": 0}, "outcomes": {"a": ["dealer_blackjack", "dealer_blackjack",
                                                                                "win"]}},
                   refused("insurance_half_bet"))),
    Scenario("insurance_over_half_of_all_his_bets_refused", A2,
             [GO, ("deal", "TS 9S AH 9C 9D"), ("insure", 1, "a", 5000), ("insure", 2, "a", 5001)],
             refused("insurance_half_bet")),
    Scenario("even_money_paid_whatever_the_dealer_makes", A, [GO, ("deal", "AS AH KC"), ("even", 1, "a"), ("close",),
                                                              ("deal", "KD")],
             {"nets": {"a": 10000}, "outcomes": {"a": ["even_money"]}}),
    Scenario("even_money_or_insurance_not_both", A, [GO, ("deal", "AS AH KC"), ("even", 1, "a"), ("insure", 1, "a", 5000)],
             refused("insurance_or_even_money")),
    Scenario("even_money_needs_blackjack", A, [GO, ("deal", "TS AH 9C"), ("even", 1, "a")],
             refused("even_money_needs_blackjack")),
    Scenario("split_eights", A, [GO, ("deal", "8S 6H 8C"), ("act", 1, "split"), ("deal", "TD"), ("act", 1, "stand"),
                                 ("deal", "9C"), ("act", 1, "stand"), ("deal", "TH TC")],
             {"nets": {"a": 20000}, "outcomes": {"a": ["win", "win"]}}),
    Scenario("third_split_needs_four_hands", A,
             [GO, ("deal", "8S 6H 8C"), ("act", 1, "split"), ("deal", "8D"), ("act", 1, "split"), ("deal", "8H"),
              ("act", 1, "split"), ("deal", "TD"), ("act", 1, "stand"), ("deal", "TD"), ("act", 1, "stand"),
              ("deal", "TD"), ("act", 1, "stand"), ("deal", "TD"), ("act", 1, "stand"), ("deal", "TH TC")],
             lambda c: {"nets": {"a": 40000}} if SHEET[c]["hands"] == 4 else refused("split_hands_limit")),
    Scenario("split_beyond_hand_limit_refused", A,
             [GO, ("deal", "8S 6H 8C"), ("act", 1, "split"), ("deal", "8D"), ("act", 1, "split"), ("deal", "8H"),
              ("act", 1, "split"), ("deal", "8C"), ("act", 1, "split")], refused("split_hands_limit")),
    Scenario("split_aces_one_card_each_21_is_not_blackjack", A,
             [GO, ("deal", "AS 9H AC"), ("act", 1, "split"), ("deal", "KD"), ("deal", "5C"), ("deal", "TD")],
             {"nets": {"a": 0}, "outcomes": {"a": ["win", "lose"]}}),
    Scenario("split_ace_takes_no_hit", A, [GO, ("deal", "AS 9H AC"), ("act", 1, "split"), ("deal", "5D"),
                                           ("act", 1, "hit")], refused("split_aces_one_card")),
    Scenario("resplit_aces", A, [GO, ("deal", "AS 9H AC"), ("act", 1, "split"), ("deal", "AD"), ("act", 1, "split"),
                                 ("deal", "KD 5C 7C"), ("deal", "TD")],
             lambda c: {"nets": {"a": -10000}} if ace_splits_allowed(c, 2) else refused("ace_split_limit")),
    Scenario("aces_split_three_times", A,
             [GO, ("deal", "AS 9H AC"), ("act", 1, "split"), ("deal", "AD"), ("act", 1, "split"), ("deal", "AH"),
              ("act", 1, "split"), ("deal", "KD 5C 7C 9C"), ("deal", "TD")],
             lambda c: {"nets": {"a": 0}, "outcomes": {"a": ["win", "lose", "lose", "win"]}}
             if ace_splits_allowed(c, 3) else refused("ace_split_limit")),
    Scenario("surrender_half_back", A, [GO, ("deal", "TS 6H 6C"), ("act", 1, "surrender"), ("deal", "TD TC")],
             sheet("surrender", {"nets": {"a": -5000}, "outcomes": {"a": ["surrender"]}},
                   refused("surrender_not_offered"))),
    # 000 6.2 and 001 refuse it; 004's surrender names no exception for the ace: half is lost, even
    # when the dealer then makes blackjack (no hole card)
    Scenario("surrender_against_an_ace_only_where_the_sheet_allows", A,
             [GO, ("deal", "TS AH 6C"), ("close",), ("act", 1, "surrender"), ("deal", "KD")],
             lambda c: refused("surrender_not_offered") if not SHEET[c]["surrender"] else
             {"nets": {"a": -5000}, "outcomes": {"a": ["surrender"]}} if SHEET[c]["surrender_against_ace"]
             else refused("no_surrender_against_ace")),
    Scenario("surrender_after_the_first_draw", AB,
             [GO, ("deal", "TS 9S 6H 5C 7C"), ("act", 1, "hit"), ("deal", "2D"), ("act", 2, "surrender"),
              ("act", 1, "stand"), ("deal", "TD TC")],
             lambda c: refused("surrender_not_offered") if not SHEET[c]["surrender"] else
             {"nets": {"a": 10000, "b": -5000}} if SHEET[c]["own_card_window"] else refused("surrender_window")),
    Scenario("no_surrender_after_split", A, [GO, ("deal", "8S 6H 8C"), ("act", 1, "split"), ("act", 1, "surrender")],
             sheet("surrender", refused("no_surrender_after_split"), refused("surrender_not_offered"))),
    Scenario("co_players_ride_a_double_one_declines", ABC1,
             [GO, ("deal", "5S 6H 6C"), ("act", 1, "double", {"player": "a", "co_players": (JOINS("b"), DECLINES("c"))}),
              ("deal", "9D"), ("deal", "TD 2C")],
             {"nets": {"a": 20000, "b": 20000, "c": 10000}}),
    Scenario("co_player_declines_a_split_stays_on_first_hand", ABC1,
             [GO, ("deal", "8S 6H 8C"),
              ("act", 1, "split", {"player": "a", "co_players": (DECLINES("b", 1), JOINS("c"))}), ("deal", "TD"),
              ("act", 1, "stand", {"player": "a"}), ("deal", "9C"), ("act", 1, "stand", {"player": "a"}),
              ("deal", "TH TC")],
             {"nets": {"a": 20000, "b": 10000, "c": 20000}}),
    Scenario("owner_cannot_answer_as_a_co_player", ABC1,
             [GO, ("deal", "5S 6H 6C"), ("act", 1, "double", {"player": "a", "co_players": (
                 DECLINES("a"), JOINS("b"), JOINS("c"))})],
             refused("co_player_choice")),
    Scenario("fourth_player_on_a_box_refused", ABC1, [("bet", 1, "d", 10000)], refused("players_per_box")),
    Scenario("bet_below_table_minimum_refused", [], [("bet", 1, "a", 100)], refused("table_minimum")),
    Scenario("box_over_maximum_refused", A, [("bet", 1, "b", 300000)], refused("box_maximum")),
    Scenario("no_such_box_refused", [], [("bet", 8, "a", 10000)], refused("no_such_box")),
    # refusals, each by the rule that names it
    Scenario("no_double_on_a_split_ace", A, [GO, ("deal", "AS 9H AC"), ("act", 1, "split"), ("deal", "AD"),
                                              ("act", 1, "double")],
             lambda c: refused("no_double_on_split_aces" if ace_splits_allowed(c, 2) else "split_aces_one_card")),
    Scenario("no_hit_after_a_double", AB, [GO, ("deal", "5S 9S 6H 6C 7C"), ("act", 1, "double"), ("deal", "2D"),
                                           ("act", 1, "hit")], refused("double_one_card")),
    Scenario("no_surrender_after_a_hit", AB, [GO, ("deal", "TS 9S 6H 2C 7C"), ("act", 1, "hit"), ("deal", "2D"),
                                              ("act", 1, "surrender")],
             sheet("surrender", refused("surrender_first_two_cards"), refused("surrender_not_offered"))),
    Scenario("no_hit_after_standing", AB, [GO, ("deal", "TS 9S 6H 7C 7D"), ("act", 1, "stand"), ("act", 1, "hit")],
             refused("hand_complete")),
    Scenario("no_decision_while_a_card_is_due", AB, [GO, ("deal", "TS 9S 6H 2C 7C"), ("act", 1, "hit"),
                                                     ("act", 1, "stand")], refused("card_expected")),
    Scenario("not_this_boxs_turn", AB, [GO, ("deal", "TS 9S 6H 7C 7D"), ("act", 2, "stand")], refused("not_this_box")),
    Scenario("bet_must_be_positive_cents", [], [("bet", 1, "a", -5)], refused("bet_amount")),
    Scenario("insurance_once_per_player", A, [GO, ("deal", "TS AH 9C"), ("insure", 1, "a", 5000),
                                              ("insure", 1, "a", 5000)], refused("insurance_once")),
    Scenario("insurance_needs_a_wager_on_the_box", A, [GO, ("deal", "TS AH 9C"), ("insure", 1, "z", 5000)],
             refused("insurance_needs_wager")),
    Scenario("even_money_once", A, [GO, ("deal", "AS AH KC"), ("even", 1, "a"), ("even", 1, "a")],
             refused("even_money_once")),
    Scenario("pairs_bet_needs_a_wager", A, [("pairs", 3, "z", 1000)],
             sheet("pairs", refused("side_bet_needs_wager"), refused("side_bet_not_offered"))),
    Scenario("pairs_bet_within_its_limits", A, [("pairs", 1, "a", 10**6)],
             sheet("pairs", refused("side_bet_limits"), refused("side_bet_not_offered"))),
    Scenario("suited_777", A, [GO, ("deal", "7S 9H 7S"), ("act", 1, "hit"), ("deal", "7S"), ("deal", "TD")],
             sheet("side_777", {"nets": {"a": 65000}}, {"nets": {"a": 10000}})),
    Scenario("777_loses_to_dealer_blackjack_77_stands", A,
             [GO, ("deal", "7S AH 7S"), ("close",), ("act", 1, "hit"), ("deal", "7S"), ("deal", "KD")],
             sheet("side_777", {"nets": {"a": -5000}}, {"nets": {"a": -10000}})),
    Scenario("mixed_777", A, [GO, ("deal", "7S 9H 7D"), ("act", 1, "hit"), ("deal", "7C"), ("deal", "TD")],
             sheet("side_777", {"nets": {"a": 20000}}, {"nets": {"a": 10000}})),
    Scenario("five_card_21", A, [GO, ("deal", "2S 9H 3C"), ("act", 1, "hit"), ("deal", "2D"), ("act", 1, "hit"),
                                 ("deal", "4H"), ("act", 1, "hit"), ("deal", "TD"), ("deal", "TD")],
             sheet("side_777", {"nets": {"a": 20000}}, {"nets": {"a": 10000}})),
    Scenario("seven_card_hand", A, [GO, ("deal", "2S 9H AC")] + [s for c in "2D 2H AD 2C 2D".split()
                                                                  for s in (("act", 1, "hit"), ("deal", c))]
             + [("act", 1, "stand"), ("deal", "TD")],
             sheet("side_777", {"nets": {"a": 0}}, {"nets": {"a": -10000}})),
    Scenario("seven_card_hand_stays_paid_after_a_bust", A,
             [GO, ("deal", "2S 9H AC")] + [s for c in "2D 2H AD 2C 2D TD".split() for s in (("act", 1, "hit"), ("deal", c))]
             + [("deal", "TD")],
             sheet("side_777", {"nets": {"a": 0}}, {"nets": {"a": -10000}})),
    Scenario("suited_77_paid_at_once_stays_paid_after_a_split", A,
             [GO, ("deal", "7S 9H 7S"), ("act", 1, "split"), ("deal", "TD"), ("act", 1, "stand"), ("deal", "TC"),
              ("act", 1, "stand"), ("deal", "8D")],
             sheet("side_777", {"nets": {"a": 5000}}, {"nets": {"a": 0}})),
    Scenario("pairs_perfect", A, [("pairs", 1, "a", 1000), GO, ("deal", "8S 6H 8S"), ("act", 1, "stand"),
                                  ("deal", "TD TC")],
             sheet("pairs", {"nets": {"a": 35000}}, refused("side_bet_not_offered"))),
    Scenario("pairs_colored", A, [("pairs", 1, "a", 1000), GO, ("deal", "8S 6H 8C"), ("act", 1, "stand"),
                                  ("deal", "TD TC")],
             sheet("pairs", {"nets": {"a": 22000}}, refused("side_bet_not_offered"))),
    Scenario("pairs_mixed", A, [("pairs", 1, "a", 1000), GO, ("deal", "8S 6H 8D"), ("act", 1, "stand"),
                                ("deal", "TD TC")],
             sheet("pairs", {"nets": {"a": 16000}}, refused("side_bet_not_offered"))),
    Scenario("pairs_lost", A, [("pairs", 1, "a", 1000), GO, ("deal", "8S 6H 9D"), ("act", 1, "stand"),
                               ("deal", "TD TC")],
             sheet("pairs", {"nets": {"a": 9000}}, refused("side_bet_not_offered"))),
    Scenario("double_for_less", A, [GO, ("deal", "5S 6H 6C"), ("act", 1, "double", {"amount": 5000}), ("deal", "9D"),
                                    ("deal", "TD 2C")],
             sheet("double_for_less", {"nets": {"a": 15000}}, refused("double_amount"))),
    Scenario("double_after_split", A, [GO, ("deal", "5S 6H 5C"), ("act", 1, "split"), ("deal", "6D"),
                                       ("act", 1, "double"), ("deal", "9D"), ("deal", "TD"), ("act", 1, "stand"),
                                       ("deal", "TH TC")],
             sheet("das", {"nets": {"a": 30000}}, refused("no_double_after_split"))),
    # hand 1's T+A is a split 21: it closes, except at 004 where it may still be doubled (the owner stands)
    Scenario("split_tens_of_different_rank", A,
             lambda c: [GO, ("deal", "TS 6H KC"), ("act", 1, "split"), ("deal", "AD")]
             + [("act", 1, "stand")] * SHEET[c]["double_on_split_21"] + [("deal", "9D"), ("act", 1, "stand"),
                                                                        ("deal", "TH TC")],
             sheet("split_rank_only", refused("split_pairs_only"), {"nets": {"a": 20000}, "outcomes": {"a": ["win", "win"]}})),
]


@pytest.mark.parametrize("casino", CASINOS)
@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_scenario(sc: Scenario, casino: str) -> None:
    expect = sc.expect(casino) if callable(sc.expect) else sc.expect
    rec = Recorder()
    r = new_round(rules_for(casino), sc.bets, rec)
    for i, step in enumerate(sc.script(casino) if callable(sc.script) else sc.script):
        before = snapshot(r)
        try:
            run(r, [step])
        except RuleViolation as e:
            assert "refused" in expect, f"step {i} {step} refused unexpectedly: {e}"
            assert e.rule == expect["refused"], f"step {i} {step}: {e}"
            assert snapshot(r) == before, "a refusal changed the round"
            last = rec.events[-1]
            assert last.reason == Reason.ACTION_REFUSED and last.data["rule"] == e.rule
            return
    assert "refused" not in expect, f"expected a refusal by {expect['refused']}"
    assert r.state == "complete"
    got = settlement_of(r).per_player()
    assert got == expect["nets"]
    assert settlement_of(r).house == -sum(got.values())
    for player, outcomes in expect.get("outcomes", {}).items():
        main = [ln.outcome for ln in settlement_of(r).lines if ln.player == player and ln.kind in
                ("main", "surrender", "even_money", "insurance")]
        assert main == outcomes
    if "dealer" in expect:
        assert len(r.dealer_cards) == expect["dealer"]
    assert rec.of(Reason.SETTLED), "settlement lines are journaled"


def test_seed_001_bonuses_are_journaled_the_moment_they_are_won() -> None:
    rec = Recorder()
    r = new_round(rules_for("casino-001"), A, rec)
    run(r, [GO, ("deal", "7S 9H 7S")])
    paid = rec.of(Reason.SETTLED)
    assert r.state == "players" and [e.data["kind"] for e in paid] == ["bonus_77"] and paid[0].data["paid_at_once"]
    assert paid[0].data["net"] == "5000"
    run(r, [("act", 1, "hit"), ("deal", "7S"), ("deal", "TD")])  # suited 777, dealer 19
    lines = settlement_of(r).lines
    assert [e.data["kind"] for e in rec.of(Reason.SETTLED)] == [ln.kind for ln in lines]  # each line journaled once
    assert [ln.kind for ln in lines] == ["bonus_77", "main", "bonus_777"]


@pytest.mark.parametrize("casino", CASINOS)
@pytest.mark.parametrize("up,at_once", [("9H", True), ("2D", True), ("TH", False), ("AH", False)])
def test_a_blackjack_that_cannot_be_matched_is_paid_at_once(casino: str, up: str, at_once: bool) -> None:
    """Seed 000 7.1.1: against an up card that cannot make blackjack, the 3:2 is paid at once."""
    rec = Recorder()
    r = new_round(rules_for(casino), AB, rec)
    run(r, [GO, ("deal", f"AS 9S {up} KC 9C")])  # box 1 blackjack, box 2 18
    paid = [e.data for e in rec.of(Reason.SETTLED)]
    if at_once:
        assert paid == [dict(paid[0], player="a", box=1, kind="main", outcome="blackjack", net="15000")]
        assert paid[0]["paid_at_once"] and r.state == "players"
    else:
        assert paid == []
    if r.state == "insurance":
        run(r, [("close",)])
    run(r, [("act", 2, "stand")])
    while r.state == "dealer":
        run(r, [("deal", "TD")])
    assert [e.data["kind"] for e in rec.of(Reason.SETTLED)] == [ln.kind for ln in settlement_of(r).lines]
    assert nets(r)["a"] == (0 if up == "AH" else 15000)  # paid once, at once or at the end; AH TD: both blackjack


@pytest.mark.parametrize("casino", CASINOS)
def test_even_money_is_journaled_when_taken(casino: str) -> None:
    rec = Recorder()
    r = new_round(rules_for(casino), A, rec)
    run(r, [GO, ("deal", "AS AH KC"), ("even", 1, "a")])
    assert [(e.data["kind"], e.data["net"]) for e in rec.of(Reason.SETTLED)] == [("even_money", "10000")]
    run(r, [("close",), ("deal", "KD")])  # the dealer makes blackjack: even money stands
    assert len(rec.of(Reason.SETTLED)) == len(settlement_of(r).lines) == 1 and nets(r) == {"a": 10000}
