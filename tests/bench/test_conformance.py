"""The simulators pass every conformance requirement that applies to them (1.1 shuffler and shoe,
2.0 shoe), and cardbench conformance over a sim URL's pty reports it, JUnit XML included."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml

from cardd.bench.conformance import Outcome
from tests.bench.conformance_support import ids, run_against, shown

CARDBENCH = Path(sys.executable).with_name("cardbench")


@pytest.mark.parametrize("device,protocol", [("shuffler", "1.1"), ("shoe", "1.1"), ("shoe", "2.0")])
def test_a_simulator_passes_every_requirement_of_its_protocol(device: str, protocol: str) -> None:
    results = run_against(device, protocol)
    assert ids(results, Outcome.FAIL) == set(), shown(results)
    assert ids(results, Outcome.BLOCKED) == set(), shown(results)
    applicable = [r for r in results if r.outcome is not Outcome.NOT_APPLICABLE]
    assert applicable and all(protocol in r.requirement.protocols for r in applicable)


def test_an_overflowed_buffer_is_reported_and_passes() -> None:
    results = run_against("shoe", "1.1", "event_buffer=2")
    assert ids(results, Outcome.FAIL) == set(), shown(results)
    overflow = next(r for r in results if r.requirement.id == "3.2-overflow")
    assert "overflowed events reported" in overflow.message


def test_the_cli_reports_each_requirement_with_the_failing_bytes_and_junit(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    failing = subprocess.run(
        [str(CARDBENCH), "conformance", "sim://shuffler?faults=flapping_ident&heartbeat_s=0.3", "--only", "2.1-ack",
         "--only", "3-hello-ident", "--junit", str(report)], capture_output=True, text=True, timeout=120)
    assert failing.returncode == 1, failing.stderr
    lines = failing.stdout.splitlines()
    assert any(line.startswith("PASS") and "2.1-ack" in line for line in lines), failing.stdout
    fail = next(i for i, line in enumerate(lines) if line.startswith("FAIL") and "3-hello-ident" in line)
    assert lines[fail + 1].strip().startswith("bytes: 02 01 08")  # the two IDENTs, in hex
    cases = {case.name: case for suite in JUnitXml.fromfile(str(report)) for case in suite}
    assert set(cases) == {"2.1-ack", "3-hello-ident"}
    assert cases["2.1-ack"].is_passed
    assert isinstance(cases["3-hello-ident"].result[0], Failure)
    assert "bytes: 02 01 08" in (cases["3-hello-ident"].result[0].text or "")

    passing = subprocess.run(
        [str(CARDBENCH), "conformance", "sim://shoe?protocol=2.0", "--only", "8-device-proof", "--only",
         "8-enrolled-host", "--only", "7.3-forged-refused"], capture_output=True, text=True, timeout=120)
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert "protocol 2.0" in passing.stdout and "3 passed, 0 failed" in passing.stdout


def test_an_unknown_requirement_is_a_usage_error() -> None:
    got = subprocess.run([str(CARDBENCH), "conformance", "sim://shoe", "--only", "9.9-nothing"],
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 2 and "no requirement 9.9-nothing" in got.stderr


def test_a_device_that_is_not_there_is_one_line_and_exit_3(tmp_path: Path) -> None:
    got = subprocess.run([str(CARDBENCH), "conformance", str(tmp_path / "ttyNONE"), "--only", "2.1-ack"],
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 3 and "no such device" in got.stderr and "Traceback" not in got.stderr
