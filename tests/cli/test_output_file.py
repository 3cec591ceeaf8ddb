"""One check for a file a command writes (cardctl log --export, cardbench --junit/--out/...): its
directory exists and is writable here, else a usage error (exit 2) naming it, worded the same in
both programs."""
from __future__ import annotations

import os
import subprocess
import sys
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


CARDBENCH = Path(sys.executable).with_name("cardbench")


@pytest.mark.parametrize("options", [["--plot", "--report"], ["--report", "--plot"]])
def test_an_output_option_without_its_file_is_refused_not_a_file_named_after_the_next_option(
        tmp_path: Path, options: list[str]) -> None:
    """``cardbench soak --plot --report``, the two options as the README lists them without their
    files: click would take the second as the first's file and run the soak into it."""
    done = subprocess.run([str(CARDBENCH), "soak", "--shoes", "1", "--cut-at", "30", *options], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    first, second = options
    assert done.returncode == EXIT_USAGE, done
    assert (f"{second} is an option, not a file name: give the file after {first} ({first} FILE), "
            f"or ./{second} for a file of that name") in " ".join(done.stderr.split())
    assert list(tmp_path.iterdir()) == [] and done.stdout == ""  # nothing ran, nothing written
