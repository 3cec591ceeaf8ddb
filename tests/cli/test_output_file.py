"""One check for a file a command writes (cardctl log --export, cardbench --junit/--out/...): its
directory exists and is writable here, else a usage error (exit 2) naming it, worded the same in
both programs."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from pytest_mock import MockerFixture

from cardd.bench.program import cardbench
from cardd.cli.common import EXIT_USAGE, CliError, check_output_directory


def _cardbench_error(out: Path) -> str:
    result = CliRunner().invoke(cardbench, ["simulate", "--rounds", "2", "--out", str(out)])
    assert result.exit_code == EXIT_USAGE and isinstance(result.exception, SystemExit), result.output
    return result.output


def _cardctl_error(out: Path) -> str:
    with pytest.raises(CliError) as refused:
        check_output_directory(out)
    assert refused.value.exit_code == EXIT_USAGE
    return str(refused.value)


def test_a_missing_directory_reads_the_same_in_cardctl_and_cardbench(tmp_path: Path) -> None:
    out = tmp_path / "no-such-dir" / "report"
    expected = f"{out}: the directory {out.parent} does not exist"
    assert _cardctl_error(out) == expected and expected in _cardbench_error(out)


def test_a_directory_not_writable_here_reads_the_same_in_cardctl_and_cardbench(
        tmp_path: Path, mocker: MockerFixture) -> None:
    out = tmp_path / "report"
    # the tests may run as root, for whom every directory is writable: the syscall answers "no"
    real_access = os.access
    mocker.patch("os.access", lambda path, mode: False if Path(path) == tmp_path else real_access(path, mode))
    expected = f"{out}: permission denied: you cannot write in the directory {tmp_path}"
    assert _cardctl_error(out) == expected
    assert expected in " ".join(_cardbench_error(out).split()), "the bench words it as cardctl does"


def test_a_writable_directory_passes(tmp_path: Path) -> None:
    check_output_directory(tmp_path / "report")
