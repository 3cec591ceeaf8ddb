"""cardbench simulate's report: the elapsed time and rounds/s, the players' hands' rates with their
standard deviations worked from the counts, "too few rounds" where no deviation can be quoted, the
dealer table over the rounds the dealer played out, --rules by a seed casino's name, the progress
line on a terminal."""
from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from cardd.bench.program import cardbench
from cardd.bench.simulate import HAND_FIGURES, MIN_ROUNDS, RoundResult, Simulation, Summary, rules_for
from cardd.bench.strategy import BasicStrategy
from cardd.config import RULES_DIR
from core.cards import Card
from devices.game.hand import hand_total
from devices.game.rules import HouseRules
from tests.bench.test_simulate import figures
from tests.support.terminal import Tmux, kept_open

CARDBENCH = str(Path(sys.executable).with_name("cardbench"))
#: a rate line of the hands' table: name, hands with it, rate, and "± sd" or "(too few rounds)"
RATE = re.compile(r"│ (\w+) +│ +([\d,]+) │ +(\d\.\d{4}) (?:± (\d\.\d{4})|\(too few rounds\)) │")


def simulate(*options: str) -> str:
    result = CliRunner().invoke(cardbench, ["simulate", "--no-rounds", "--jobs", "1", *options])
    assert result.exit_code == 0, result.output
    return result.output


def rates(output: str) -> dict[str, tuple[int, float, float | None]]:
    found = {m[1]: (int(m[2].replace(",", "")), float(m[3]), float(m[4]) if m[4] else None)
             for m in RATE.finditer(output)}
    assert sorted(found) == sorted(HAND_FIGURES), output
    return found


def test_the_summary_gives_the_time_the_speed_and_each_rate_with_its_deviation() -> None:
    output = simulate("--rounds", "600", "--boxes", "2", "--seed", "4")
    assert re.search(r"^elapsed \d+\.\d s, [\d,]+ rounds/s$", output, re.M), output
    assert re.search(r"net per round, per unit of initial bet: mean [+-]\d\.\d{4}, standard deviation \d\.\d{4}$",
                     output, re.M), output
    hands = int(re.search(r"players' hands \(([\d,]+)\)", output)[1].replace(",", ""))  # type: ignore[index]
    assert hands >= 1200  # two boxes, and their splits
    found = rates(output)
    assert sum(found[name][0] for name in ("win", "push", "loss")) == hands
    for name, (count, rate, sd) in found.items():
        p = count / hands
        assert rate == round(p, 4) and sd == round(math.sqrt(p * (1 - p) / hands), 4), (name, output)
    assert "95 % interval" in output


def test_too_few_rounds_are_said_not_shown_as_a_zero_width_interval() -> None:
    output = simulate("--rounds", str(MIN_ROUNDS - 1), "--seed", "2")
    assert "95 % interval" not in output and f"interval: too few rounds, fewer than {MIN_ROUNDS}" in output
    assert "standard deviation: too few rounds" in output
    assert all(sd is None for _, _, sd in rates(output).values())
    # enough rounds, but too few blackjacks or busts in them for a rate's deviation: said per rate
    output = simulate("--rounds", "120", "--strategy", "stand", "--seed", "2")
    found = rates(output)
    assert found["bust"] == (0, 0.0, None) and found["loss"][2] is not None


def dealer_played_out(result: RoundResult) -> bool:
    """Some hand neither bust nor surrendered when the dealer's turn came (from the round's own JSON)."""
    return any(hand_total([Card.parse(c) for c in h["cards"]])[0] <= 21 and "surrender" not in h["decisions"]
               for h in result.as_json()["hands"])


def test_the_dealer_table_counts_only_rounds_the_dealer_played_out() -> None:
    rules = rules_for(HouseRules.default(), 6, 1)
    simulation = Simulation(rules, 1, BasicStrategy(), seed=6)
    results = list(simulation.rounds(500))
    summary = Summary()
    for result in results:
        summary.add(result)
    played = [r for r in results if dealer_played_out(r)]
    assert 0 < len(played) < len(results)  # under basic strategy some rounds end with every hand bust
    assert summary.dealer_rounds == len(played) == sum(sum(c.values()) for c in summary.dealer.values())
    output = simulate("--rounds", "500", "--seed", "6")
    assert f"in the {len(played)} rounds the dealer played out" in output.replace("\n", " "), output


def test_rules_by_a_seed_casinos_name_as_in_cardd() -> None:
    by_name = simulate("--rules", "casino-003", "--rounds", "150", "--seed", "3")
    by_path = simulate("--rules", str(RULES_DIR / "casino-003.toml"), "--rounds", "150", "--seed", "3")
    assert figures(by_name) == figures(by_path) and "casino-003" in by_name
    wrong = CliRunner().invoke(cardbench, ["simulate", "--rules", "casino-999", "--rounds", "5"])
    assert wrong.exit_code == 2 and "Traceback" not in wrong.output
    assert "--rules casino-999: no such rules file" in wrong.output and "casino-003" in wrong.output


def test_a_terminal_sees_the_rounds_done_and_the_time_left() -> None:
    """On a terminal (tmux), with the JSON lines elsewhere, a progress line counts the rounds done
    of those asked and the time left; off a terminal, stderr holds none of it."""
    tmux = Tmux("simulate-progress", kept_open(CARDBENCH, "simulate", "--rounds", "5000000", "--no-rounds",
                                               "--jobs", "1"), width=100, height=10)
    try:
        screen = tmux.wait_for(lambda s: re.search(r"rounds .* [\d,]+/5000000 left (\d+:\d\d:\d\d|-:--:--)", s)
                               is not None or "ended with" in s)
        assert "ended with" not in screen, screen
    finally:
        tmux.close()
    done = subprocess.run([CARDBENCH, "simulate", "--rounds", "200", "--jobs", "1"], capture_output=True, text=True)
    assert done.returncode == 0 and "left" not in done.stderr and "/200" not in done.stderr, done.stderr
