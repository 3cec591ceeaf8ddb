"""cardbench record / replay: every trace in tests/traces/ replays into a fresh daemon to its golden
file; the traces cover each seed casino and each fault class; a tampered golden, a command with
another outcome and a damaged trace each fail in one message naming the file and the line;
--update-golden rewrites; a format 1 trace (cardctl capture before format 2) still reads."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from click.testing import CliRunner
from junitparser import JUnitXml

from cardd.bench.program import cardbench
from cardd.bench.replay import FAULT_CLASSES, UNTRACED_CLASSES, golden_path, trace_files
from cardd.bench.scenario import load_scenario
from cardd.config import RULES_DIR
from cardd.trace.format import Said, read_trace
from firmware_bridge.messages import CardRead
from simulators.faults import Faults

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "tests" / "traces"
CASINOS = sorted(p.stem for p in RULES_DIR.glob("casino-*.toml"))
#: a short trace (a hand-shuffled table: no shuffler to replay)
SHORT = TRACES / "casino-003-clean-round.trace"


def copy(trace: Path, into: Path) -> Path:
    shutil.copy(trace, into / trace.name)
    shutil.copy(golden_path(trace), into / golden_path(trace).name)
    return into / trace.name


def test_every_trace_replays_to_its_golden(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    result = CliRunner().invoke(cardbench, ["replay", str(TRACES), "--jobs", "2", "--junit", str(report)])
    assert result.exit_code == 0, result.output
    cases = [case for suite in JUnitXml.fromfile(str(report)) for case in suite]
    assert len(cases) == len(trace_files([TRACES])) >= 13 and all(case.is_passed for case in cases)


def test_the_traces_cover_every_seed_casino_and_every_fault_class() -> None:
    headers = [read_trace(path).header for path in trace_files([TRACES])]
    assert {h["rules"] for h in headers} == set(CASINOS)
    switches = set().union(*(load_scenario(ROOT / h["scenario"]).fault_switches() for h in headers))
    for name, members in FAULT_CLASSES.items():
        assert switches & members, f"no trace for the fault class {name}"
    # every switch of the simulators is in exactly one class: a new one must be placed
    classified = [s for classes in (FAULT_CLASSES, UNTRACED_CLASSES) for members in classes.values() for s in members]
    assert sorted(classified) == sorted(set(Faults.names()) - {"seed"})
    overflow = golden_path(TRACES / "casino-000-shoe-event-buffer-overflow.trace").read_text()
    assert '"reason": "DEVICE_DROPPED_EVENTS"' in overflow  # the buffer did overflow


def test_a_tampered_golden_fails_naming_trace_line_expected_and_got_and_update_golden_rewrites_it(
        tmp_path: Path) -> None:
    trace = copy(SHORT, tmp_path)
    golden = golden_path(trace)
    lines = golden.read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1) if '"reason": "SETTLED"' in line)
    original = lines[number - 1]
    lines[number - 1] = re.sub(r'"net": "\d+"', '"net": "999"', original)
    assert lines[number - 1] != original
    golden.write_text("\n".join(lines) + "\n")
    report = tmp_path / "report.xml"
    failed = CliRunner().invoke(cardbench, ["replay", str(trace), "--junit", str(report)])
    assert failed.exit_code == 1
    # the fields that differ, one line each, not the two records' long JSON lines
    net = re.search(r'"net": "(\d+)"', original)[1]  # type: ignore[index]
    head = f"FAIL {trace}: {golden.name} line {number}: the replay's record differs:"
    shown = failed.output.splitlines()
    assert head in shown and f'  data.net: golden "999", replay "{net}"' in shown, failed.output
    assert original not in failed.output and lines[number - 1] not in failed.output
    failure = [case for suite in JUnitXml.fromfile(str(report)) for case in suite][0].result[0]
    assert failure.message.splitlines()[0] == head.removeprefix("FAIL ")

    updated = CliRunner().invoke(cardbench, ["replay", str(trace), "--update-golden"])
    assert updated.exit_code == 0, updated.output
    assert golden.read_text() == golden_path(SHORT).read_text()


def test_a_command_with_another_outcome_than_recorded_fails_naming_the_line(tmp_path: Path) -> None:
    trace = copy(SHORT, tmp_path)
    lines = trace.read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1) if '"api": "open_round"' in line)
    lines[number - 1] = lines[number - 1].replace('"outcome": "ack"', '"outcome": "refused:failed"')
    trace.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(cardbench, ["replay", str(trace)])
    assert result.exit_code == 1
    assert f"{trace}:{number}: open_round: recorded refused:failed, the replay got ack" in result.output.replace("\n", "")


def test_a_damaged_trace_is_one_clear_error_naming_file_and_line(tmp_path: Path) -> None:
    trace = copy(SHORT, tmp_path)
    lines = trace.read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1) if '"type": "CardRead"' in line)
    entry = json.loads(lines[number - 1])
    damages = {
        "a cut line": lines[number - 1][:40],
        "a payload that is not a message": json.dumps(entry | {"payload": "ff00"}),
        "a device the header does not name": json.dumps(entry | {"device": "roulette"}),
    }
    for what, damaged in damages.items():
        trace.write_text("\n".join(lines[:number - 1] + [damaged] + lines[number:]) + "\n")
        result = CliRunner().invoke(cardbench, ["replay", str(trace)])
        assert result.exit_code == 1, what
        failures = [line for line in result.output.splitlines() if line.startswith("FAIL ") and ".trace:" in line]
        assert len(failures) == 1 and failures[0].startswith(f"FAIL {trace}:{number}: "), (what, result.output)
        assert "Traceback" not in result.output
    trace.write_text('{"hello": 1}\n')
    result = CliRunner().invoke(cardbench, ["replay", str(trace)])
    assert result.exit_code == 1 and f"{trace}:1: not a cardd trace" in result.output


def test_a_format_1_trace_still_reads(tmp_path: Path) -> None:
    header = {"cardd_trace": 1, "started": "2026-11-23T10:00:00+00:00",
              "device": {"url": "serial:///dev/x", "role": "shoe", "model": "OS-1 sim", "serial": "SHOE0001",
                         "firmware": "1.0.0", "protocol": "1.1"},
              "link": {"url": "serial:///dev/x", "scheme": "serial", "serial_settings": None}}
    card = {"t": 0.5, "type": "CardRead", "payload": "3000022a00000002b0"}
    event = {"t": 0.6, "event": "connected", "detail": "x"}
    path = tmp_path / "old.trace"
    path.write_text("\n".join(json.dumps(line) for line in (header, card, event)) + "\n")
    trace = read_trace(path)
    assert list(trace.devices) == ["shoe"] and trace.devices["shoe"]["serial"] == "SHOE0001"
    assert len(trace.entries) == 1 and isinstance(trace.entries[0], Said) and trace.entries[0].device == "shoe"
    assert isinstance(trace.entries[0].message, CardRead) and str(trace.entries[0].message.card) == "TH"
