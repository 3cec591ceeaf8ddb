"""cardbench simulate: the Monte Carlo through the real deal tracker, its strategy table and its CLI."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import structlog
from click.testing import CliRunner
from pytest_mock import MockerFixture

from cardd.bench.program import cardbench
from cardd.bench.simulate import RoundResult, Simulation, SimulationError, Summary, rules_for, run
from cardd.bench.strategy import AlwaysStand, BasicStrategy
from cardd.cli.common import EXIT_STDOUT_CLOSED
from cardd.config import RULES_DIR
from core.cards import Card
from devices.game.dealer_odds import OUTCOMES, UP_CARDS, dealer_table
from devices.game.round_types import Action
from devices.game.rules import HouseRules, load_rules
from tests.support.pipes import run_into_closed_pipe


def figures(summary: str) -> str:
    """A run's summary without its elapsed-time line: the figures the seed decides."""
    timed = [line for line in summary.splitlines() if line.startswith("elapsed ")]
    assert len(timed) == 1, summary
    return "\n".join(line for line in summary.splitlines() if not line.startswith("elapsed "))


def cards(*names: str) -> list[Card]:
    return [Card.parse(n) for n in names]


@pytest.mark.parametrize("hand, up, first", [
    (("TS", "AH"), "5C", Action.STAND),          # soft 21
    (("6S", "5H"), "TC", Action.HIT),            # ENHC: no double of 11 against a ten
    (("6S", "5H"), "9C", Action.DOUBLE),
    (("5S", "5H"), "AC", Action.HIT),            # 5,5 plays as hard 10; ENHC: not doubled against an ace
    (("8S", "8H"), "TC", Action.HIT),            # ENHC: 8,8 not split against a ten
    (("8S", "8H"), "9C", Action.SPLIT),
    (("AS", "AH"), "AC", Action.HIT),            # ENHC: aces not split against an ace
    (("AS", "AH"), "TC", Action.SPLIT),
    (("9S", "9H"), "7C", Action.STAND),
    (("AS", "7H"), "4C", Action.DOUBLE),         # soft 18: double, else stand
    (("AS", "7H"), "9C", Action.HIT),
    (("TS", "2H"), "3C", Action.HIT),
    (("TS", "2H"), "4C", Action.STAND),
    (("TS", "6H"), "TC", Action.HIT),
])
def test_basic_strategy_cells(hand: tuple[str, str], up: str, first: Action) -> None:
    assert BasicStrategy().decide(cards(*hand), Card.parse(up))[0] is first


def test_refused_choices_fall_back() -> None:
    # soft 18 against 4 on three cards: the double is refused by the rules, the next choice is stand
    assert BasicStrategy().decide(cards("AS", "2H", "5D"), Card.parse("4C")) == (Action.DOUBLE, Action.STAND)
    # a pair the rules will not split plays its total: 8,8 = hard 16 against 9
    assert BasicStrategy().decide(cards("8S", "8H"), Card.parse("9C"))[1:] == (Action.HIT,)


def test_rounds_settle_through_the_tracker_and_add_up() -> None:
    rules = rules_for(load_rules(RULES_DIR / "casino-000.toml"), 6, 3)
    seen: list[RoundResult] = []
    summary = run(rules, 300, 3, BasicStrategy(), seed=7, each=seen.append)
    assert summary.rounds == len(seen) == 300
    assert summary.net == sum(r.net for r in seen)
    for r in seen:
        # each line of the table's settlement is in the round, and the hands' nets add up to it
        assert r.staked == 3 * rules.table.min_per_player
        assert sum(float(line["net"]) for line in r.lines) == pytest.approx(float(r.net))
        assert r.dealer_outcome in OUTCOMES
        assert {h["box"] for h in r.hands} == {1, 2, 3}
    doubled = [h for r in seen for h in r.hands if "double" in h["decisions"]]
    assert doubled and all(h["stake"] == 2 * rules.table.min_per_player and len(h["cards"]) == 3 for h in doubled)
    assert seen[0].as_json()["up"] == str(seen[0].up)


def test_same_seed_same_rounds() -> None:
    rules = rules_for(HouseRules.default(), 2, 1)
    a: list[dict[str, object]] = []
    b: list[dict[str, object]] = []
    run(rules, 50, 1, BasicStrategy(), 3, lambda r: a.append(r.as_json()))
    run(rules, 50, 1, BasicStrategy(), 3, lambda r: b.append(r.as_json()))
    assert a == b


@pytest.mark.parametrize("decks", [1, 3, 8])
def test_any_deck_count(decks: int) -> None:
    summary = run(rules_for(HouseRules.default(), decks, 2), 200, 2, BasicStrategy(), 1)
    assert summary.rounds == 200


def test_bad_sizes_refused() -> None:
    with pytest.raises(SimulationError, match="1 to 8 decks"):
        rules_for(HouseRules.default(), 9, 1)
    with pytest.raises(SimulationError, match="boxes 1 to 7"):
        rules_for(HouseRules.default(), 6, 8)


@pytest.mark.soak
def test_always_stand_dealer_matches_the_exact_table() -> None:
    """Standing on two cards, the dealer's cards are a uniform draw: its finals follow the exact table."""
    rounds = 200_000 if os.environ.get("CARDD_FULL") else 12_000
    rules = rules_for(HouseRules.default(), 1, 1)
    summary = run(rules, rounds, 1, AlwaysStand(), seed=11)
    exact = dealer_table(1)
    total = summary.rounds
    for up in UP_CARDS:
        n = sum(summary.dealer[up].values())
        observed = summary.dealer_observed(up)
        for o in OUTCOMES:
            p = float(exact[up][o])
            sd = (p * (1 - p) / n) ** 0.5
            assert abs(observed[o] - p) <= 5 * sd + 1e-9, (up, o, observed[o], p, n, total)
    # standing on anything loses badly: the edge is far above basic strategy's
    interval = summary.edge_interval()
    assert interval is not None and interval[0] > 0.05


def test_cli_writes_lines_and_summary(tmp_path: Path) -> None:
    out = tmp_path / "rounds.jsonl"
    result = CliRunner().invoke(cardbench, ["simulate", "--rounds", "40", "--decks", "2", "--boxes", "2",
                                       "--strategy", "stand", "--seed", "5", "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 40 and all(h["decisions"] in ([], ["stand"]) for r in lines for h in r["hands"])
    assert "house edge" in result.output and "exact" in result.output


def test_stdout_holds_only_the_json_lines_when_a_library_warns(mocker: MockerFixture) -> None:
    """A warning logged during the run (a link, a device, the tracker: none does on a healthy run,
    so the test has the run's start log one as the firmware bridge would) goes to stderr:
    ``cardbench simulate | jq`` reads JSON lines only."""
    import cardd.bench.program as bench_program
    real = bench_program.run_jobs

    def warns_then_runs(*args: Any, **kw: Any) -> Summary:
        structlog.get_logger("firmware_bridge.link").warning("link_failed", link="shoe", why="test")
        return real(*args, **kw)

    mocker.patch.object(bench_program, "run_jobs", side_effect=warns_then_runs)
    result = CliRunner().invoke(cardbench, ["simulate", "--rounds", "5", "--jobs", "1", "--seed", "2"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 5 and all(isinstance(json.loads(line), dict) for line in lines), result.stdout
    assert "link_failed" in result.stderr and "house edge" in result.stderr


@pytest.mark.parametrize("options", [("--rounds", "1000", "--jobs", "2"), ("--rounds", "1000", "--jobs", "1"),
                                     ("--rounds", "1", "--jobs", "1"), ("--rounds", "10", "--no-rounds")])
def test_a_closed_stdout_ends_the_run_quietly(options: tuple[str, ...]) -> None:
    """``cardbench simulate | head -2``: the lines meet a pipe nobody reads (1 round: only at the
    final flush; --no-rounds: rich's summary); the run ends with the shell's SIGPIPE code and
    nothing on stderr."""
    cardbench = Path(sys.executable).with_name("cardbench")
    done = run_into_closed_pipe([str(cardbench), "simulate", "--seed", "1", *options])
    assert (done.returncode, done.stderr) == (EXIT_STDOUT_CLOSED, "")


@pytest.mark.parametrize("rules_name, decks, boxes", [(None, 2, 3), ("casino-001.toml", 6, 2), ("casino-003.toml", 1, 1)])
def test_jobs_do_not_change_the_output(tmp_path: Path, rules_name: str | None, decks: int, boxes: int) -> None:
    """Each shoe has its own generator: two or three processes dealing alternate shoes write the
    same lines, in the same order, and the same summary as one process dealing them all."""
    outputs, summaries = [], []
    for jobs in (1, 2, 3):
        out = tmp_path / f"jobs{jobs}.jsonl"
        rules = ["--rules", str(RULES_DIR / rules_name)] if rules_name else []
        result = CliRunner().invoke(cardbench, ["simulate", "--rounds", "300", "--decks", str(decks), "--boxes", str(boxes),
                                           "--seed", "9", "--jobs", str(jobs), "--out", str(out), *rules])
        assert result.exit_code == 0, result.output
        outputs.append(out.read_bytes())
        summaries.append(figures(result.output))
    assert outputs[0] == outputs[1] == outputs[2] and summaries[0] == summaries[1] == summaries[2]
    rounds = [json.loads(line) for line in outputs[0].decode().splitlines()]
    assert [r["round"] for r in rounds] == list(range(1, 301)) and rounds[-1]["shoe"] > 3


@pytest.mark.parametrize("rules_name", [None, "casino-001.toml", "casino-003.toml", "casino-004.toml"])
def test_a_line_is_its_round_as_compact_json(rules_name: str | None) -> None:
    """json_line is written out field by field: it must stay what json.dumps gives for as_json()."""
    base = load_rules(RULES_DIR / rules_name) if rules_name else HouseRules.default()
    results: list[RoundResult] = []
    run(rules_for(base, 2, min(3, base.table.boxes)), 300, min(3, base.table.boxes), BasicStrategy(), 11,
        results.append)
    by_hand = RoundResult(1, 1, Card.parse("AS"), [Card.parse("AS"), Card.parse("KD")],
                          [{"box": 1, "hand": 0, "cards": ["9C", "8D"], "decisions": ["stand"], "stake": 10,
                            "net": "-10"}],
                          [{"player": 'p"1\u00e9', "box": 1, "hand": None, "kind": "insurance", "stake": 5,
                            "net": "10", "outcome": "win"}], 10, 0)  # a line with no hand, a name to escape
    for result in [*results, by_hand]:
        assert result.json_line() == json.dumps(result.as_json(), separators=(",", ":"))


def test_a_shoe_dealt_alone_is_the_same_shoe() -> None:
    rules = rules_for(HouseRules.default(), 2, 2)
    seen: list[RoundResult] = []
    run(rules, 80, 2, BasicStrategy(), 4, seen.append)
    third = [r.as_json() | {"round": None} for r in seen if r.shoe == 3]  # numbered within the run
    alone = [r.as_json() | {"round": None} for r in Simulation(rules, 2, BasicStrategy(), 4).shoe_rounds(3)]
    assert seen[-1].shoe > 3 and third and alone == third


def test_a_worker_error_reaches_the_user() -> None:
    result = CliRunner().invoke(cardbench, ["simulate", "--rounds", "2000", "--decks", "1", "--boxes", "7", "--jobs", "2",
                                       "--no-rounds"])
    assert result.exit_code == 1 and "ran out of cards" in result.output


def test_cli_pty_transport_refuses_jobs() -> None:
    result = CliRunner().invoke(cardbench, ["simulate", "--transport", "pty", "--jobs", "2"])
    assert result.exit_code == 2 and "--jobs 2" in result.output


def test_cli_refuses_a_bad_deck_count() -> None:
    result = CliRunner().invoke(cardbench, ["simulate", "--decks", "9"])
    assert result.exit_code == 2 and "--decks" in result.output


def test_pty_transport_plays_the_same_rounds_through_the_devices() -> None:
    from cardd.bench.pty_transport import PtySimulation
    rules = rules_for(HouseRules.default(), 1, 2)
    simulation = PtySimulation(rules, 2, BasicStrategy(), seed=4)
    try:
        results = list(simulation.rounds(60))
        # the shuffler behind its pty shuffled every shoe; every card came through the feed
        assert simulation.sim.shuffler.state()["counters"]["shuffles"] == simulation.shoes > 1
        assert simulation.table.shoe.cards_out == simulation.sim.shoe.state()["cards_out"]
        assert simulation.table.shoe.state in ("in_play", "last_round", "complete")
    finally:
        simulation.close()
    assert [r.number for r in results] == list(range(1, 61))
    assert all(r.dealer_outcome in OUTCOMES and len(r.hands) >= 2 for r in results)
    assert sum(float(line["net"]) for r in results for line in r.lines) == pytest.approx(
        sum(float(r.net) for r in results))


def test_cli_pty_transport() -> None:
    result = CliRunner().invoke(cardbench, ["simulate", "--rounds", "30", "--transport", "pty", "--no-rounds"])
    assert result.exit_code == 0, result.output
    assert "30 rounds" in result.output
