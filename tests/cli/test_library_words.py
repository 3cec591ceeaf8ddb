"""What a person reads when the daemon, cardctl or cardbench refuses input a library refused
first (msgspec, tomllib, SQLite): cardd's own words, exactly, whatever the library's release
says. msgspec 0.23 words a string that is not UTF-8 otherwise than 0.22 did, and the daemon
passed that text on; tomllib's and SQLite's messages reached a line the same way. One test per
entry point, each through the real command: the daemon's socket, ``cardd --check-config``,
``cardd --simulate --rules``, ``cardd``'s start, ``cardbench run``, ``cardctl verify-journal``."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cli.cli_rig import cardctl
from tests.daemon.daemon_rig import RULES, Daemon, run_cardd, write_config

CARDBENCH = Path(sys.executable).with_name("cardbench")

#: a TOML text with a value missing on its third line (tomllib: "Invalid value (at line 3, column 9)")
BROKEN_TOML_LINE_3 = 'description = "x"\nstep = []\nrules = = 1\n'
#: our words for it, wherever TOML is read
MISSING_VALUE = "expected a value (a string, a number, true or false, a date, an array or an inline table)"


def test_the_api_answers_lines_a_library_refused_in_the_daemons_own_words(daemon: Daemon) -> None:
    """A console sending Latin-1, a stray byte, JSON cut short or malformed, a command's argument
    not among its values: each ERROR is the daemon's sentence, and the connection stays."""
    lines = [
        (b'{"class": "STATE", "id": "Jos\xe9"}\n', "bad-json", "not a JSON line: a string is not UTF-8 (byte 29)"),
        (b'\xff{"class": "STATE"}\n', "bad-json", "not a JSON line: not UTF-8 text (byte 0)"),
        (b'{nope\n', "bad-json", "not a JSON line: object keys must be strings (byte 1)"),
        (b'{"class": "STATE", "id": "s"} x\n', "bad-json",
         "not a JSON line: trailing characters after the JSON value (byte 30)"),
        (b'{"class": "STATE", "id":\n', "bad-json", "not a JSON line: the line ends before its JSON value does "
                                                   "(byte 24)"),
        (b'{"class": "LOG", "id": "l", "limit": 0}\n', "bad-request", "limit: expected a whole number of at least 1"),
        (b'{"class": "COMMAND", "id": "x", "name": "export_journal", "args": {"format": "xml"}}\n', "bad-args",
         "export_journal.format: 'xml': expected one of csv, jsonl"),
    ]
    client = daemon.client()
    try:
        answers = []
        for line, _, _ in lines:
            client.stream.write(line)
            client.stream.flush()
            answers.append(client.read())
        after = client.state()
    finally:
        client.close()
    assert [(a["class"], a["code"], a["message"]) for a in answers] == [("ERROR", code, message)
                                                                        for _, code, message in lines]
    assert "shoe" in after


def test_check_config_names_a_toml_mistake_in_cardds_words(directory: Path) -> None:
    config = write_config(directory, "serial:///dev/cardd/shoe", "serial:///dev/cardd/shuffler")
    config.write_text(config.read_text().replace("[journal]", "[journal]\nretention_days = \n", 1))
    line = config.read_text().splitlines().index("retention_days = ") + 1
    done = run_cardd("--check-config", "--config", str(config))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"cardd: {config}: line {line}, column 18: not valid TOML: {MISSING_VALUE}\n"


def test_a_rules_file_that_is_not_toml_is_named_in_cardds_words(directory: Path) -> None:
    """The same rules file through the configuration (--check-config) and through --simulate --rules."""
    rules = directory / "house.toml"
    rules.write_text("[shoe]\ndecks = 6\n[shoe]\n")
    config = write_config(directory, "serial:///dev/cardd/shoe", "serial:///dev/cardd/shuffler")
    config.write_text(config.read_text().replace(str(RULES), str(rules)))
    said = (f"{rules}: (syntax): line 3, column 6: not valid TOML: the table [shoe] is declared twice; "
            "allowed: TOML 1.0 syntax")
    checked = run_cardd("--check-config", "--config", str(config))
    assert (checked.returncode, checked.stderr) == (2, f"cardd: {config}: table.rules: {said}\n")
    simulated = run_cardd("--simulate", "--rules", str(rules))
    assert (simulated.returncode, simulated.stderr) == (2, f"cardd: --rules {rules}: {said}\n")


def test_the_daemon_refuses_to_start_on_a_journal_that_is_no_database_in_its_own_words(directory: Path) -> None:
    config = write_config(directory, "serial:///dev/cardd/shoe", "serial:///dev/cardd/shuffler")
    journal = directory / "journal.sqlite3"
    journal.write_bytes(b"these are a technician's notes, not a journal\n" * 200)
    done = run_cardd("--config", str(config))
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (f"cardd: journal {journal} is corrupt (first bad seq unknown): not an "
                                            "SQLite database, or its header is damaged (SQLITE_NOTADB)")


def test_verify_journal_names_a_file_that_is_no_database_in_cardctls_words(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite3"
    journal.write_bytes(b"these are a technician's notes, not a journal\n" * 200)
    run = cardctl(None, "verify-journal", "--file", str(journal))
    assert run.code == 5
    assert run.one_line_error() == (f"cardctl: journal {journal} is corrupt (first bad seq unknown): not an SQLite "
                                    "database, or its header is damaged (SQLITE_NOTADB)")


def test_cardbench_run_names_a_scenario_that_is_not_toml_in_its_own_words(tmp_path: Path) -> None:
    scenario = tmp_path / "broken.toml"
    scenario.write_text(BROKEN_TOML_LINE_3)
    done = subprocess.run([str(CARDBENCH), "run", str(scenario)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    shown = " ".join(done.stderr.split())  # the console may wrap a long line: the words are what count
    assert f"FAIL {scenario}:3: not valid TOML: {MISSING_VALUE} (column 9)" in shown, done.stderr
