"""The table flows a dealer or supervisor runs from cardctl beyond casino-000's (--simulate's): a
co-player's reduction at seed 003's box maximum, even money, Blackjack Pairs, a hand-shuffled shoe,
a dealer change, an unreadable card, a co-player's answer to a double or split. The real ``cardctl``
against a real ``cardd`` on the casino's rules, its simulated devices behind real ptys (the bench's
rig: ``cardd --simulate`` runs casino-000 only)."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cardd.bench.runner import BenchRig
from cardd.bench.scenario import Load, Scenario, Shuffle
from tests.cli.cli_rig import cardctl
from tests.daemon.daemon_rig import remove, state_dir

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def table(rules: str) -> Iterator[BenchRig]:
    """A fresh cardd on ``rules`` (e.g. "casino-003") with its simulated devices, devices linked."""
    directory = state_dir()  # a socket path under 108 bytes
    try:
        with BenchRig(Scenario(description=rules, rules=rules, step=[]), ROOT / "rules" / f"{rules}.toml",
                      directory) as rig:
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
        assert line.endswith("box 1 is 600.00 over the maximum: the co-players reduce their bets first with "
                             "reduce_bet (bob by 600.00, to 1400.00)"), line
        announced = rig.api().log(reason="BOX_OVER_MAXIMUM").records[-1]
        assert announced.message.endswith("bob reduces by 600.00, to 1400.00"), announced.message
        # the stake the line names, typed back as it stands
        out = ok(rig, "round", "reduce", "1", "bob", "1400.00")
        assert out.startswith("reduce_bet: ok (journal seq ")
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
        assert negative.code == 2 and "an amount is 0 or more" in negative.err
        ok(rig, "round", "reduce", "2", "bob", "0")
        assert rig.state()["round"]["wagers"]["2"] == {"alice": 10000}
