"""cardbench randomness: the simulator's Fisher-Yates passes, the riffle_once fault switch fails."""
from __future__ import annotations

import json
import os
import random

import pytest
from click.testing import CliRunner

from cardd.bench.program import cardbench
from cardd.bench.randomness import MINIMUM_SHUFFLES, ShuffleSource, binomial_allowance, chi2_sf, qualify
from simulators.faults import FaultSpecError, Faults
from simulators.shoe import SimulatedShoe
from simulators.stack import riffle_once

#: CI size; the full qualification (docs/bench.md) is 100,000 shuffles
SHUFFLES = 100_000 if os.environ.get("CARDD_FULL") else 1040
#: the CLI test's size: like SHUFFLES, at or above the minimum, so a pass there is a PASS verdict
CLI_SHUFFLES = 520


def test_the_sizes_ci_runs_are_enough_for_a_verdict() -> None:
    # 5 expected per cell of the card-by-position table: shuffles x decks / (52 x decks) >= 5
    assert MINIMUM_SHUFFLES == 260
    assert SHUFFLES >= MINIMUM_SHUFFLES and CLI_SHUFFLES >= MINIMUM_SHUFFLES


@pytest.mark.soak
@pytest.mark.parametrize("decks", [1, 2])
def test_fisher_yates_passes(decks: int) -> None:
    # seeded, so the run is repeatable: at the 99 % level an unbiased shuffler fails each test by
    # chance about once in 100 runs (seed 2026 happens to be such a run for the runs test: z = 2.73)
    report = qualify(ShuffleSource(decks, seed=1).orders(SHUFFLES), decks)
    assert report.passed, report.as_json()
    assert len(report.tests) == 3


@pytest.mark.soak
def test_single_riffle_fails_every_test() -> None:
    report = qualify(ShuffleSource(1, fault="riffle_once", seed=2026).orders(SHUFFLES), 1)
    assert not report.passed
    assert [t.passed for t in report.tests] == [False, False, False], report.as_json()


def test_the_order_comes_from_the_shoe_reads() -> None:
    # every shuffle is a full deck as the shoe read it, and shuffles differ
    orders = ShuffleSource(1, seed=1).orders(3)
    assert all(sorted(map(str, o)) == sorted(map(str, orders[0])) and len(set(o)) == 52 for o in orders)
    assert orders[0] != orders[1]


def test_riffle_once_is_a_merge_of_two_runs() -> None:
    out = riffle_once(range(52), random.Random(4))
    descents = sum(1 for a, b in zip(out, out[1:]) if b < a)
    assert sorted(out) == list(range(52)) and descents <= 26
    # the two packets of the cut each keep their order: the output has at most two rising sequences
    rising = 1 + sum(1 for v in range(1, 52) if out.index(v) < out.index(v - 1))
    assert rising <= 2


def test_riffle_once_is_the_shufflers_switch_only() -> None:
    assert Faults.parse("riffle_once").riffle_once
    with pytest.raises(FaultSpecError, match="shuffler only"):
        SimulatedShoe(faults=Faults(riffle_once=True))


def test_statistics_helpers() -> None:
    assert chi2_sf(51, 51) == pytest.approx(0.47, abs=0.01)
    assert chi2_sf(77.39, 51) == pytest.approx(0.01, abs=0.002)  # the 99 % point of chi2(51)
    assert binomial_allowance(52, 0.01) == 3


def test_cli_pass_and_fail() -> None:
    ok = CliRunner().invoke(cardbench, ["randomness", "--shuffles", str(CLI_SHUFFLES), "--seed", "9", "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["passed"] is True and json.loads(ok.output)["verdict"] == "PASS"
    bad = CliRunner().invoke(cardbench, ["randomness", "--shuffles", str(CLI_SHUFFLES), "--seed", "9",
                                    "--fault", "riffle_once"])
    assert bad.exit_code == 1 and "FAIL" in bad.output


def test_too_few_shuffles_for_the_chi_squared_cells_is_no_pass() -> None:
    few = CliRunner().invoke(cardbench, ["randomness", "--shuffles", "10", "--seed", "1"])
    assert few.exit_code == 3, few.output
    assert "INCONCLUSIVE" in few.output and "PASS (" not in few.output and "at least 260 shuffles" in few.output
    as_json = json.loads(CliRunner().invoke(cardbench, ["randomness", "--shuffles", "10", "--seed", "1", "--json"]).output)
    assert as_json["verdict"] == "INCONCLUSIVE" and as_json["passed"] is False
    assert [t["conclusive"] for t in as_json["tests"]] == [False, True, True]
    # one short of the minimum is still no verdict; the minimum itself judges
    assert qualify(ShuffleSource(1, seed=1).orders(MINIMUM_SHUFFLES - 1), 1).verdict == "INCONCLUSIVE"
    assert qualify(ShuffleSource(1, seed=1).orders(MINIMUM_SHUFFLES), 1).verdict == "PASS"


def test_a_failure_the_other_tests_can_judge_fails_below_the_minimum() -> None:
    few = CliRunner().invoke(cardbench, ["randomness", "--shuffles", "20", "--seed", "9", "--fault", "riffle_once"])
    assert few.exit_code == 1 and "FAIL" in few.output
