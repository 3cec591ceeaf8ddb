"""Property tests over random shoes and random legal (and illegal) decisions, every seed casino."""
from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devices.game.round import Action, Round
from devices.errors import RoundError, RuleViolation
from core.cards import Card

from tests.game.game_helpers import CASINOS, Recorder, rules_for, snapshot
from tests.game.game_sim import LazyShoe, play_round

RULES = {c: rules_for(c) for c in CASINOS}
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), casino=st.sampled_from(CASINOS), boxes=st.integers(1, 7))
def test_every_card_is_assigned_exactly_once_and_the_dealer_waits(seed: int, casino: str, boxes: int) -> None:
    rng = random.Random(seed)
    rules = RULES[casino]
    drawn: list[Card] = []
    dealer_draws_while_open: list[str] = []

    def on_card(r: Round, card: Card) -> None:
        drawn.append(card)
        expected = r.expected_next()
        assert expected is not None, f"a card while the round expects none ({r.state})"
        if expected.kind == "dealer" and r.state != "initial_deal":
            open_hands = [h.label() for h in r.hands if not h.complete]
            if open_hands:
                dealer_draws_while_open.extend(open_hands)

    r = play_round(rules, rng, LazyShoe(rules.decks, rng), boxes=boxes, on_card=on_card)
    assert [c for c, _ in r.assignments] == drawn  # each card read taken once, in order
    placed = Counter(r.dealer_cards) + Counter(c for h in r.hands for c in h.cards)
    assert placed == Counter(drawn)  # and it sits in exactly one hand
    assert not dealer_draws_while_open
    assert len(r.dealer_cards) >= 2  # no hole card: the dealer always completes his hand after the players


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), casino=st.sampled_from(CASINOS))
def test_settlements_add_up(seed: int, casino: str) -> None:
    rng = random.Random(seed)
    rec = Recorder()
    r = play_round(RULES[casino], rng, sink=rec, boxes=rng.randint(1, 4))
    s = r.settlement
    assert s is not None and s.house == -sum(s.per_player().values())
    journaled = sum((Fraction(e.data["net"]) for e in rec.events if e.reason == "SETTLED"), Fraction(0))
    assert journaled == -s.house
    # every stake on every hand is settled exactly once, by a main, surrender or even-money line
    main = Counter((ln.player, ln.box, ln.hand) for ln in s.lines if ln.kind in ("main", "surrender", "even_money"))
    assert main == Counter((p, h.box, h.index) for h in r.hands for p in h.stakes)
    # co-players: every hand a player is on carries exactly his bet (a join stakes it again, a declined
    # split moves or keeps it), a double adds at most that, and nobody's bet is lost between hands
    for h in r.hands:
        assert all(stake == r.wagers[h.box][p] for p, stake in h.stakes.items())
        assert set(h.doubled) <= set(h.stakes) and all(0 < d <= h.stakes[p] for p, d in h.doubled.items())
    for box, stakes in r.wagers.items():
        assert all(any(p in h.stakes for h in r.box_hands[box]) for p in stakes)
    for ln in s.lines:
        if ln.kind == "main":
            assert ln.net in (-ln.stake, 0, ln.stake, Fraction(3, 2) * ln.stake)
        elif ln.kind == "surrender":
            assert ln.net == Fraction(-ln.stake, 2)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), casino=st.sampled_from(CASINOS))
def test_refusals_never_change_the_round(seed: int, casino: str) -> None:
    rng = random.Random(seed)
    refusals = []

    def wild(r: Round) -> None:
        box = rng.randint(1, 7)
        action = rng.choice(list(Action))
        before = snapshot(r)
        try:
            r.act(box, action, amount=rng.choice([None, 1, 500, 10**9]),
                  player=rng.choice([None, f"p{box}", f"q{box}"]))
        except RuleViolation as e:
            assert snapshot(r) == before, f"{action} at box {box} refused by {e.rule} but changed the round"
            refusals.append(e.rule)
        except RoundError:
            pytest.fail("only RuleViolation is expected here")

    r = play_round(RULES[casino], rng, on_act=wild)
    assert r.state == "complete"
