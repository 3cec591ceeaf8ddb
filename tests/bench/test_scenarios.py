"""cardbench run: the scenario library through real daemons, JUnit XML, failures that name the step,
malformed scenarios refused with file and line, and what the library does not cover yet."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from junitparser import Failure, JUnitXml

from cardd.bench.program import cardbench
from cardd.bench.runner import run_scenario, stacked_shoe
from cardd.bench.scenario import LIBRARY, ScenarioError, load_scenario, scenario_files
from cardd.config import RULES_DIR
from cardd.daemon.backend import journal_reasons
from core.cards import Card, shoe_composition
from devices.events import Reason
from simulators.faults import Faults
from tests.export.card_checks import check_no_card_leaves

ROOT = Path(__file__).resolve().parents[2]
CASINOS = sorted(p.stem for p in (RULES_DIR).glob("casino-*.toml"))

#: Reason codes and fault switches no scenario covers. The library covers them all; a
#: code or switch added without a scenario fails the test until one expects it (or it is listed here
#: on purpose, with the reason).
#: The journal's own codes need its disk full under the daemon, which a scenario cannot do (its
#: daemon's journal is on the bench's disk): tests/daemon/test_daemon_full_disk.py fills a private tmpfs.
#: RULES_CHANGED needs a restart under other rules, which a scenario (one daemon, one rules file) cannot
#: do: tests/cli/test_input_errors.py restarts one.
#: EXPORT_BACKLOG and EXPORT_DRAINED need a floor broker that does not take the export, and a
#: scenario's daemon exports nowhere: tests/export/test_export_outages.py keeps one down.
#: DEVICE_NOT_TRUSTED needs a device configured for protocol 2.0, and a scenario's daemon speaks 1.1:
#: tests/daemon/test_daemon_enrolment.py refuses one.
EXPECTED_MISSING_REASONS: set[str] = {"JOURNAL_WRITE_FAILED", "JOURNAL_WRITE_RESUMED", "RULES_CHANGED",
                                      "EXPORT_BACKLOG", "EXPORT_DRAINED", "DEVICE_NOT_TRUSTED"}
#: The protocol 2.0 attack switches act only on a device speaking 2.0, and a scenario's daemon speaks
#: 1.1: tests/simulators/test_sim_protocol2.py runs each against a host speaking 2.0. The
#: conformance suite catches silent_overflow and accept_any_proof (tests/bench/test_conformance_faults_*.py).
EXPECTED_MISSING_FAULTS: set[str] = {"unknown_key", "cloned_serial", "forged_tag", "replayed_capture",
                                     "downgrade_offer", "rogue_host", "accept_any_proof", "silent_overflow"}


def scenario(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_library_has_scenarios_for_every_seed_casino_and_nothing_beside() -> None:
    files = scenario_files([LIBRARY])
    assert len(files) > 40
    assert files == [f for casino in CASINOS for f in scenario_files([LIBRARY / casino])]


def library_parts(most: int = 10) -> list[tuple[str, list[Path]]]:
    """The library a casino at a time, a casino's scenarios in parts of at most ``most`` files."""
    parts = []
    for casino in CASINOS:
        files = scenario_files([LIBRARY / casino])
        parts += [(casino, files[i:i + most]) for i in range(0, len(files), most)]
    return parts


# a part of the library a test (each a few scenarios, a daemon each), so that the library's daemons
# run side by side with the other tests
@pytest.mark.parametrize(("casino", "files"), library_parts(),
                         ids=[f"{casino}-{files[0].stem}" for casino, files in library_parts()])
def test_the_library_passes_and_writes_junit_a_consumer_reads(tmp_path: Path, casino: str, files: list[Path]) -> None:
    """The library passes; and its journals, kept (--keep-journals) and exported with the floor's
    default filter, name no card, while the same records sent whole do (tests/export/card_checks.py:
    the library is run once, here, for both)."""
    report, kept = tmp_path / "report.xml", tmp_path / "journals"
    result = CliRunner().invoke(cardbench, ["run", *map(str, files), "--jobs", "2", "--junit", str(report),
                                            "--keep-journals", str(kept)])
    assert result.exit_code == 0, result.output
    xml = JUnitXml.fromfile(str(report))
    cases = [case for suite in xml for case in suite]
    assert len(cases) == len(files) > 0
    assert all(case.is_passed for case in cases)
    assert {case.classname for case in cases} == {casino}
    journals = sorted(kept.glob("*.sqlite3"))
    assert [p.name for p in journals] == sorted(f"{casino}-{f.stem}.sqlite3" for f in files)
    assert sum(check_no_card_leaves(path) for path in journals) > 0


def test_a_wrong_expectation_fails_naming_file_step_and_difference(tmp_path: Path) -> None:
    clean = (LIBRARY / "casino-000" / "clean-round.toml").read_text()
    wrong = scenario(tmp_path, clean.replace("settlement = { p1 = 1000 }", "settlement = { p1 = 999 }"))
    report = tmp_path / "report.xml"
    result = CliRunner().invoke(cardbench, ["run", str(wrong), "--junit", str(report)])
    assert result.exit_code == 1
    message = f"{wrong}: step 7 (expect): expected p1 net 999, got p1 net 1000"
    assert message in " ".join(result.output.split())  # rich may wrap the line
    (case,) = [case for suite in JUnitXml.fromfile(str(report)) for case in suite]
    (failure,) = case.result
    assert isinstance(failure, Failure) and failure.message == message


def test_a_state_path_that_is_not_in_state_is_named_not_read_as_none(tmp_path: Path) -> None:
    clean = (LIBRARY / "casino-000" / "clean-round.toml").read_text()
    typo = scenario(tmp_path, clean.replace('"round.dealer.total" = 17', '"round.dealr.total" = 17'))
    result = run_scenario(typo)
    assert not result.passed
    assert result.message.startswith(f"{typo}: step 7 (expect): expected round.dealr.total = 17, got "
                                      "round.dealr.total = None; STATE's round has no 'dealr' (it has: "), result.message
    assert "dealer" in result.message.split("(it has: ")[1]


def test_a_refusal_that_does_not_come_fails(tmp_path: Path) -> None:
    path = scenario(tmp_path, 'description = "x"\n[[step]]\ndo = "command"\nname = "take_seat"\n'
                              'args = { player = "p9" }\nrefused = "failed"\n')
    result = run_scenario(path)
    assert not result.passed
    assert result.message == f"{path}: step 1 (command take_seat): expected ERROR failed, got ACK"


def test_a_refusal_with_the_daemon_s_own_code_passes(tmp_path: Path) -> None:
    """bad-args is what the daemon answers for a command's wrong field (docs/api.md, ERROR): a
    scenario may expect it, and the real daemon gives it."""
    path = scenario(tmp_path, 'description = "x"\n[[step]]\ndo = "command"\nname = "take_seat"\n'
                              'args = { player = 9 }\nrefused = "bad-args"\n')
    result = run_scenario(path)
    assert result.passed, result.message


@pytest.mark.parametrize("text, where, what", [
    ('description = "x"\n[[step]]\ndo = "deal"\ncards = "two"\n', 4,
     "step[0].cards: expected a whole number, got a string"),
    ('description = "x"\n[[step]]\ndo = "shuffle"\n[[step]]\ndo = "dance"\n', 5,
     "step[1].do: 'dance': expected one of command, deal, expect, faults, load, play, remainder, rounds, shuffle, "
     "wait"),
    ('description = "x"\n[[step]]\ndo = "shuffle"\nuntil = "maybe"\n', 4,
     "step[0].until: 'maybe': expected one of refused, verified"),
    ('description = "x"\n[[step]]\ndo = "load"\nuntil = "maybe"\n', 4,
     "step[0].until: 'maybe': expected one of loaded, refused"),
    ('description = "x"\nrules = "casino-999"\nstep = []\n', 2, "rules 'casino-999': expected a rules file"),
    ('descripton = "x"\nstep = []\n', 1, "unknown field 'descripton'"),
    ('step = []\n\n[devices.shoe]\nfualts = ""\n', 4, "devices.shoe: unknown field 'fualts'"),
    ('step = []\n', 1, "field 'description' is missing"),
    ('description = "x"\nstep = []\nrules = = 1\n', 3, "not valid TOML: expected a value (a string, a number, "
     "true or false, a date, an array or an inline table) (column 9)"),
    ('description = "x"\nstep = [1, 2\n', 2, "not valid TOML: an array is not closed with ']' (the end of the file)"),
    ('description = "x"\nstep = []\n[devices.shoe]\nfaults = ""\n[devices.shuffler]\nfaults = ""\n'
     'stack = ["2C", "QX"]\n', 7, "devices.shuffler.stack: 'QX' is not a card: expected rank A,2-9,T(10),J,Q,K"),
    ('description = "x"\nstep = []\n[devices.shoe]\nstack = ["AS"]\n', 4,
     "devices.shoe.stack: expected the stack under [devices.shuffler]"),
    ('description = "x"\n[[step]]\ndo = "shuffle"\n[[step]]\ndo = "remainder"\ndrop = ["1S"]\n', 6,
     "step 2 (remainder) drop: '1S' is not a card"),
    ('description = "x"\n[[step]]\ndo = "shuffle"\n[[step]]\ndo = "command"\nname = "open_rnd"\n', 6,
     "step 2 (command): unknown command 'open_rnd' (did you mean 'open_round'?): expected one of act, ask_for_box,"),
    ('description = "x"\n[[step]]\ndo = "expect"\nevents = ["BURN", "SETLED"]\n', 4,
     "step 1 (expect) events: unknown reason code 'SETLED' (did you mean 'SETTLED'?): expected a journaled reason"),
    ('description = "x"\n[[step]]\ndo = "expect"\nevents = ["BURN"]\nno_events = ["ROUND_VOIDED"]\n', 5,
     "step 1 (expect) no_events: unknown reason code 'ROUND_VOIDED' (did you mean 'ROUND_VOID'?)"),
    ('description = "x"\n[[step]]\ndo = "expect"\nalarms = ["COMMAND_REFUSED"]\n', 4,
     "step 1 (expect) alarms: unknown reason code 'COMMAND_REFUSED'"),
    ('description = "x"\n[[step]]\ndo = "shuffle"\n[[step]]\ndo = "command"\nname = "open_round"\n'
     'refused = "faild"\n', 7, "step 2 (command) refused: unknown ERROR code 'faild' (did you mean 'failed'?): "
     "expected one of bad-args, bad-json, bad-request, busy, device-offline, failed,"),
])
def test_a_malformed_scenario_is_refused_with_file_line_and_what_was_expected(
        tmp_path: Path, text: str, where: int, what: str) -> None:
    path = scenario(tmp_path, text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert what in message
    assert message.startswith(f"{path}:{where}: "), message


def test_a_scenario_that_is_not_utf_8_is_refused_naming_file_line_and_byte(tmp_path: Path) -> None:
    path = tmp_path / "latin-1.toml"
    path.write_bytes('description = "x"\n# caf\u00e9\nstep = []\n'.encode("latin-1"))
    assert load_error(path) == f"{path}:2: not UTF-8 text (byte 23)"
    result = CliRunner().invoke(cardbench, ["run", str(path)])  # a FAIL line, not a traceback
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1 and "not UTF-8 text (byte 23)" in result.output, result.output


def test_rules_beside_the_scenario_by_file_name_and_a_broken_rules_file_are_the_scenario_s_to_name(
        tmp_path: Path) -> None:
    (tmp_path / "house.toml").write_text((RULES_DIR / "casino-000.toml").read_text())
    beside = scenario(tmp_path, 'description = "x"\nrules = "house.toml"\nstep = []\n')
    assert load_scenario(beside).rules_path(beside) == tmp_path / "house.toml"  # not rules/house.toml.toml
    (tmp_path / "house.toml").write_bytes(b"# caf\xe9\n" + (RULES_DIR / "casino-000.toml").read_bytes())
    assert load_error(beside).startswith(f"{beside}:2: rules 'house.toml': {tmp_path / 'house.toml'}: (file): "
                                         "not UTF-8 text")
    result = CliRunner().invoke(cardbench, ["run", str(beside)])  # a FAIL line, not a traceback
    assert isinstance(result.exception, SystemExit) and result.exit_code == 1, result.exception


def test_the_daemon_own_records_may_be_expected(tmp_path: Path) -> None:
    path = scenario(tmp_path, 'description = "x"\n[[step]]\ndo = "expect"\n'
                              'events = ["DAEMON_START", "SELFTEST"]\nno_events = ["COMMAND_REFUSED", "JOURNAL_EXPORTED"]\n')
    assert load_scenario(path).expected_reasons() == {"DAEMON_START", "SELFTEST"}


def test_a_missing_event_names_what_was_journaled_without_an_empty_reason(tmp_path: Path) -> None:
    path = scenario(tmp_path, 'description = "x"\n[[step]]\ndo = "shuffle"\n'
                              '[[step]]\ndo = "expect"\nevents = ["SHOE_VOID"]\n')
    result = run_scenario(path)
    assert not result.passed
    assert result.message.startswith(f"{path}: step 2 (expect): expected events ['SHOE_VOID'], got none of them; "
                                      "journaled: ['DAEMON_START', "), result.message
    assert "''" not in result.message, result.message


def test_a_bad_fault_switch_is_refused(tmp_path: Path) -> None:
    path = scenario(tmp_path, 'description = "x"\nstep = []\n[devices.shoe]\nfaults = "jam=1"\n')
    with pytest.raises(ScenarioError, match="jam is for the shuffler only"):
        load_scenario(path)
    result = CliRunner().invoke(cardbench, ["run", str(path)])
    assert result.exit_code == 1 and "jam is for the shuffler only" in result.output
    assert load_error(path).startswith(f"{path}:4: ")  # the line of its faults key
    in_a_step = scenario(tmp_path, 'description = "x"\n\n[[step]]\ndo = "shuffle"\n[[step]]\ndo = "faults"\n'
                                   'device = "shoe"\nset = "jam=1"\n', "step.toml")
    assert load_error(in_a_step).startswith(f"{in_a_step}:8: ") and "shuffler only" in load_error(in_a_step)


def load_error(path: Path) -> str:
    with pytest.raises(ScenarioError) as refused:
        load_scenario(path)
    return str(refused.value)


@pytest.mark.parametrize("command", [
    ["run", "--junit", "{out}", str(LIBRARY / "casino-000" / "clean-round.toml")],
    ["replay", "--junit", "{out}", str(ROOT / "tests" / "traces" / "casino-000-clean-round.trace")],
    ["soak", "--shoes", "1", "--plot", "{out}"],
    ["soak", "--shoes", "1", "--report", "{out}"],
    ["simulate", "--rounds", "2", "--out", "{out}"],
], ids=lambda c: f"{c[0]} {c[-2] if c[0] != 'run' and c[0] != 'replay' else c[1]}")
def test_a_report_file_in_a_missing_directory_is_a_usage_error_before_anything_runs(
        tmp_path: Path, command: list[str]) -> None:
    out = tmp_path / "no-such-dir" / "report"
    result = CliRunner().invoke(cardbench, [part.replace("{out}", str(out)) for part in command])
    assert isinstance(result.exception, SystemExit), result.exception  # it was a traceback once the run ended
    assert result.exit_code == 2 and f"{out}: the directory {out.parent} does not exist" in result.output, \
        result.output


def test_a_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cardbench, ["run", str(tmp_path / "nothing.toml")])
    assert result.exit_code == 2 and "no such file or folder" in result.output


def test_a_stacked_shoe_is_a_full_shoe_with_the_cards_on_top() -> None:
    shoe = stacked_shoe(["QS", "QS", "2C"], 6)
    assert shoe[:3] == [Card.parse("QS"), Card.parse("QS"), Card.parse("2C")]
    assert sorted(map(str, shoe)) == sorted(str(c) for c, n in shoe_composition(6).items() for _ in range(n))


def test_which_reason_codes_and_fault_switches_the_library_covers() -> None:
    reasons: set[str] = set()
    faults: set[str] = set()
    for path in scenario_files([LIBRARY]):
        loaded = load_scenario(path)
        reasons |= loaded.expected_reasons()
        faults |= loaded.fault_switches()
    known_reasons = {r.value for r in Reason}
    journaled = journal_reasons()  # the table's and the daemon's own (COMMAND_REFUSED, DAEMON_START ...)
    assert reasons <= journaled, f"scenarios expect reasons that do not exist: {sorted(reasons - journaled)}"
    missing_reasons = known_reasons - reasons
    missing_faults = set(Faults.names()) - {"seed"} - faults
    assert missing_reasons == EXPECTED_MISSING_REASONS, f"not covered: {sorted(missing_reasons)}"
    assert missing_faults == EXPECTED_MISSING_FAULTS, f"not covered: {sorted(missing_faults)}"


def test_a_path_that_does_not_exist_is_a_name_in_the_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no casino-000 here: the names are the library's, from any directory
    assert scenario_files([Path("casino-001/clean-round")]) == [LIBRARY / "casino-001" / "clean-round.toml"]
    assert scenario_files([Path("casino-001/clean-round.toml")]) == [LIBRARY / "casino-001" / "clean-round.toml"]
    assert scenario_files([Path("casino-003")]) == sorted((LIBRARY / "casino-003").glob("*.toml"))
    (tmp_path / "casino-003").mkdir()  # a folder of that name where cardbench runs is taken as the path it is
    (tmp_path / "casino-003" / "mine.toml").write_text("")
    assert scenario_files([Path("casino-003")]) == [Path("casino-003") / "mine.toml"]
    for name in ("casino-009", "../rules/casino-000", str(LIBRARY.parent / "nothing")):
        with pytest.raises(ScenarioError, match=r"no such file or folder, nor a scenario of the library \(a casino: "
                                                r"casino-000, casino-001, casino-002, casino-003, casino-004;"):
            scenario_files([Path(name)])
