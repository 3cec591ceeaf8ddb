"""cardctl's and cardd's answers to bad input met by a new user: one line saying what and where,
with the usage exit code, never a library's exception or wording."""
from __future__ import annotations

from pathlib import Path

import pytest

from cardd.cli.table import Cents
from tests.cli.cli_rig import cardctl


# ---- amounts (no daemon: a bad amount is refused before cardctl connects) ----------------------

@pytest.mark.parametrize("amount", ["inf", "nan", "-inf", "1e400", "0", "abc"])
def test_an_amount_that_is_no_amount_is_a_usage_error(directory: Path, amount: str) -> None:
    run = cardctl(directory / "cardd.sock", "round", "bet", "3", "alice", "--", amount)
    assert run.code == 2, run.err
    assert "Traceback" not in run.err and amount in run.err


def test_a_negative_amount_is_refused_as_not_more_than_0() -> None:
    with pytest.raises(Exception, match="more than 0"):
        Cents().convert("-5", None, None)


def test_more_than_2_decimals_is_refused_not_rounded(directory: Path) -> None:
    run = cardctl(directory / "cardd.sock", "round", "bet", "3", "alice", "25.505")
    assert run.code == 2 and "25.505: at most 2 decimals (cents)" in run.err, run.err


@pytest.mark.parametrize(("units", "cents"), [("25", 2500), ("25.50", 2550), ("0.29", 29), ("25.5000", 2550),
                                              ("90071992547409.93", 9007199254740993)])
def test_an_amount_is_exact_cents(units: str, cents: int) -> None:
    assert Cents().convert(units, None, None) == cents
