"""The table flows a dealer or supervisor runs from cardctl beyond casino-000's (--simulate's): a
co-player's reduction at seed 003's box maximum, even money, Blackjack Pairs, a hand-shuffled shoe,
a dealer change, an unreadable card, a co-player's answer to a double or split. The real ``cardctl``
against a real ``cardd`` on the casino's rules, its simulated devices behind real ptys (the bench's
rig: ``cardd --simulate`` runs casino-000 only)."""
from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from cardd.bench.runner import BenchRig
from cardd.bench.scenario import Deal, DeviceSetup, Devices, Load, Scenario, Shuffle
from cardd.config import RULES_DIR
from tests.cli.cli_rig import cardctl
from tests.daemon.daemon_rig import Daemon, remove, state_dir


@contextmanager
def table(rules: str | Scenario) -> Iterator[BenchRig]:
    """A fresh cardd on ``rules`` (e.g. "casino-003"), or on a scenario's rules with its devices'
    stack and faults, with its simulated devices, devices linked."""
    scenario = Scenario(description=rules, rules=rules, step=[]) if isinstance(rules, str) else rules
    directory = state_dir()  # a socket path under 108 bytes
    try:
        with BenchRig(scenario, RULES_DIR / f"{scenario.rules}.toml", directory) as rig:
            yield rig
    finally:
        remove(directory)


def shoe_in_play(rig: BenchRig) -> None:
    """Shuffle (by the rules' way), load and burn, through the API: the shoe in play."""
    rig.do(Shuffle())
    rig.do(Load())


def ok(rig: BenchRig, *args: str) -> str:
    run = cardctl(rig.socket, *args)
    assert run.code == 0, (args, run.err)
    return run.out


def test_a_co_player_reduces_at_the_box_maximum_to_the_stake_the_refusal_names() -> None:
    # seed 003: the owner's raise takes box 1 to 3,100.00 (maximum 2,500.00): bob must cut 600.00, to 1,400.00
    with table("casino-003") as rig:
        shoe_in_play(rig)
        for args in (("round", "open"), ("round", "bet", "1", "alice", "100"), ("round", "bet", "1", "bob", "2000"),
                     ("round", "bet", "1", "alice", "1000")):
            ok(rig, *args)
        refused = cardctl(rig.socket, "round", "no-more-bets")
        assert refused.code == 1
        line = refused.one_line_error()
        # the cut and the new stake, and the command: reduce_bet's amount is the new stake
        # (the command in the API's words, or in cardctl's where cardctl rewords refusals)
        assert re.search(r"box 1 is 600\.00 over the maximum: the co-players reduce their bets first with "
                         r"(reduce_bet|cardctl round reduce) \(bob by 600\.00, to 1400\.00\)$", line), line
        announced = rig.api().log(reason="BOX_OVER_MAXIMUM").records[-1]
        assert announced.message.endswith("bob reduces by 600.00, to 1400.00"), announced.message
        # the stake the line names, typed back as it stands
        out = ok(rig, "round", "reduce", "1", "bob", "1400.00")
        assert out.startswith(("reduce_bet: ok (journal seq ", "round reduce: ok (journal seq "))
        assert rig.state()["round"]["wagers"]["1"] == {"alice": 110000, "bob": 140000}
        ok(rig, "round", "no-more-bets")


def test_round_reduce_to_0_withdraws_and_refuses_a_raise() -> None:
    with table("casino-003") as rig:
        shoe_in_play(rig)
        for args in (("round", "open"), ("round", "bet", "2", "alice", "100"), ("round", "bet", "2", "bob", "50")):
            ok(rig, *args)
        raised = cardctl(rig.socket, "round", "reduce", "2", "bob", "60")
        assert raised.code == 1 and "must be lower than 50.00 (0 withdraws it)" in raised.one_line_error()
        negative = cardctl(rig.socket, "round", "reduce", "--", "2", "bob", "-1")
        assert negative.code == 2 and "an amount must be 0 or more" in negative.err
        ok(rig, "round", "reduce", "2", "bob", "0")
        assert rig.state()["round"]["wagers"]["2"] == {"alice": 10000}


def test_a_hand_shuffled_shoe_even_money_a_co_players_double_an_unreadable_card_and_a_dealer_change() -> None:
    # seed 003 (hand shuffle, burn 3, even money for an insured blackjack, co-players, a dealer change burns 1)
    # burn 2C 3C 4C; box 1 5S, box 2 AS, dealer AC, box 1 6H (11), box 2 KH (blackjack); box 1's double
    # card 9D (card #9) the shoe cannot read; the dealer draws 6C: soft 17, stands
    stack = ["2C", "3C", "4C", "5S", "AS", "AC", "6H", "KH", "9D", "6C"]
    scenario = Scenario(description="flows", rules="casino-003", step=[],
                        devices=Devices(shuffler=DeviceSetup(stack=stack), shoe=DeviceSetup(faults="unreadable_at=9")))
    with table(scenario) as rig:
        out = ok(rig, "shoe", "hand-shuffled")
        assert out.startswith(("hand_shuffled: ok (journal seq ", "shoe hand-shuffled: ok (journal seq "))
        assert rig.state()["shoe"]["state"] == "verified"
        rig.do(Load())
        for args in (("round", "open"), ("round", "bet", "1", "alice", "25"), ("round", "bet", "1", "bob", "25"),
                     ("round", "bet", "2", "carol", "50"), ("round", "no-more-bets")):
            ok(rig, *args)
        rig.do(Deal(cards=5))
        assert rig.state()["round"]["state"] == "insurance"
        ok(rig, "round", "even-money", "2", "carol")
        ok(rig, "round", "close-insurance")
        # the owner doubles; his co-player answers for his own money: he joins
        lacking = cardctl(rig.socket, "round", "act", "1", "double", "--player", "alice")
        assert lacking.code == 1 and "each co-player on box 1 hand 1 answers the double once: bob" in lacking.err
        for wrong in ("bob=maybe", "bob=declines:3", "=joins", "bob=joins:0"):
            assert cardctl(rig.socket, "round", "act", "1", "double", "--co-player", wrong).code == 2, wrong
        ok(rig, "round", "act", "1", "double", "--player", "alice", "--co-player", "bob=joins")
        assert rig.state()["round"]["boxes"]["1"][0]["doubled"] == {"alice": 2500, "bob": 2500}
        logged = cardctl(rig.socket, "log", "--limit", "1000", prefix=("env", "COLUMNS=400")).out
        assert "input: act (box=1 action=double player=alice co_players=bob=joins) root" in " ".join(logged.split())
        rig.do(Deal(cards=1, wait=False))  # card #9: unreadable
        rig.api().wait_state(lambda s: s["awaiting_entry"] is not None, 10.0, 0.02)
        entered = ok(rig, "shoe", "enter-card", "9d")
        assert entered.splitlines()[1] == "card #9 entered by the dealer as 9D", entered
        assert rig.state()["round"]["boxes"]["1"][0]["cards"] == ["5S", "6H", "9D"]
        changed = ok(rig, "dealer-change")
        assert changed.splitlines()[1].endswith("one card burns after this round"), changed
        rig.do(Deal(cards=1))  # the dealer's 6C: soft 17
        final = rig.state()
        assert final["round"]["state"] == "complete", final["round"]
        assert final["shoe"]["state"] == "burning" and final["shoe"]["burn_remaining"] == 1  # the new dealer's burn
        actions = [r.message for r in rig.api().log(reason="ACTION").records]
        assert "round 1: carol takes even money at box 2: paid 50.00 at once" in actions
        (double,) = [r for r in rig.api().log(reason="ACTION").records if r.data["action"] == "double"]
        assert double.data["co_players"] == [{"player": "bob", "joins": True, "amount": None, "stays_on": None}]


def test_a_blackjack_pairs_bet() -> None:
    with table(Scenario(description="pairs", rules="casino-002", step=[])) as rig:
        rig.do(Shuffle())
        rig.do(Load())
        ok(rig, "round", "open")
        ok(rig, "round", "bet", "1", "alice", "25")
        out = ok(rig, "round", "pairs", "1", "alice", "5")
        assert out.startswith(("pairs_bet: ok (journal seq ", "round pairs: ok (journal seq "))
        assert "round 1: alice bets 5.00 on Blackjack Pairs at box 1" in [
            r.message for r in rig.api().log(reason="ACTION").records]
        refused = cardctl(rig.socket, "round", "pairs", "1", "alice", "100")
        assert refused.code == 1 and "Blackjack Pairs bet 100.00 (with 5.00 already) outside 5.00..100.00" in refused.err


def test_the_dealer_who_starts_the_shuffler_is_named_on_the_shoes_verification(daemon: Daemon) -> None:
    sock = daemon.socket_path
    out = cardctl(sock, "shoe", "shuffle-started")
    assert out.code == 0, out.err
    assert out.out.startswith(("shuffle_started: ok (journal seq ", "shoe shuffle-started: ok (journal seq "))
    client = daemon.client()
    client.ok("start_shuffle")
    client.wait_state(lambda s: s["shoe"]["state"] == "verified")
    by_hand = cardctl(sock, "shoe", "hand-shuffled")  # casino-000 has a shuffler: no hand shuffle replaces it
    assert by_hand.code == 1 and 'shuffle = "automatic"' in by_hand.one_line_error()
    (verified,) = client.request({"class": "LOG", "reason": "SHOE_VERIFIED"})["records"]
    client.close()
    assert verified["data"]["operator"] == "root"  # cardctl's user ("not recorded" without shuffle-started)


def test_round_act_help_names_what_the_rules_allow_for_less() -> None:
    run = cardctl(None, "round", "act", "--help")
    text = " ".join(run.out.split())
    assert "a double or split for less" not in text
    assert "the owner's double for less, where the house rules allow it" in text and "a split is always for the stake" in text


def test_insurance_over_half_of_all_bets_names_the_half_first() -> None:
    # seed 001: insurance on all of a player's boxes together at most half of all his bets
    # burn 2C; box 1 9S, box 2 8C, dealer AD, box 1 TH, box 2 9H
    scenario = Scenario(description="insurance", rules="casino-001", step=[],
                        devices=Devices(shuffler=DeviceSetup(stack=["2C", "9S", "8C", "AD", "TH", "9H"])))
    with table(scenario) as rig:
        shoe_in_play(rig)
        for args in (("round", "open"), ("round", "bet", "1", "p1", "50"), ("round", "bet", "2", "p1", "50"),
                     ("round", "no-more-bets")):
            ok(rig, *args)
        rig.do(Deal(cards=5))
        over = cardctl(rig.socket, "round", "insure", "1", "p1", "50.01")
        assert over.code == 1
        assert over.one_line_error().endswith("insurance 50.01 exceeds 50.00, half of all p1's bets (100.00)")
