"""cardctl's and cardd's answers to bad input: one line saying what and where,
with the usage exit code, never a library's exception or wording."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from cardd.api.client import ApiClient, CommandRefused
from cardd.cli.table import Cents, parse_counts, read_counts
from cardd.journal import Entry, Journal, JournalError
from devices.game.rules import HouseRules
from devices.game.settlement import money, units
from devices.tracker.snapshot import snapshot
from tests.cli.cli_rig import CARDCTL, cardctl, start_round
from tests.table.table_rig import TableRig
from cardd.daemon.main import main as cardd_main
from tests.daemon.daemon_rig import RULES, Daemon, run_cardd, simulate, write_config


# ---- amounts (no daemon: a bad amount is refused before cardctl connects) ----------------------

@pytest.mark.parametrize("amount", ["inf", "nan", "-inf", "1e400", "0", "abc"])
def test_an_amount_that_is_no_amount_is_a_usage_error(directory: Path, amount: str) -> None:
    run = cardctl(directory / "cardd.sock", "round", "bet", "3", "alice", "--", amount)
    assert run.code == 2, run.err
    assert "Traceback" not in run.err and amount in run.err


def test_a_negative_amount_is_refused_as_not_positive() -> None:
    with pytest.raises(Exception, match="must be positive"):
        Cents().convert("-5", None, None)


def test_more_than_2_decimals_is_refused_not_rounded(directory: Path) -> None:
    run = cardctl(directory / "cardd.sock", "round", "bet", "3", "alice", "25.505")
    assert run.code == 2 and "25.505: at most 2 decimals (cents)" in run.err, run.err


@pytest.mark.parametrize(("units", "cents"), [("25", 2500), ("25.50", 2550), ("0.29", 29), ("25.5", 2550),
                                              ("90071992547409.93", 9007199254740993)])
def test_an_amount_is_exact_cents(units: str, cents: int) -> None:
    assert Cents().convert(units, None, None) == cents


@pytest.mark.parametrize("token", ["AS=\u00b2", "AS=\u2460", "AS=1\u00b2"])
def test_a_remainder_count_in_digits_that_are_no_number_is_a_usage_error(directory: Path, token: str) -> None:
    """str.isdigit() takes a superscript 2 or a circled 1, which int() then refuses: one usage line,
    never the ValueError's traceback."""
    run = cardctl(directory / "cardd.sock", "shoe", "remainder", token)
    assert run.code == 2 and "Traceback" not in run.err and "a card with its count" in run.err, run.err


@pytest.mark.parametrize(("tokens", "counts"), [
    (("TH=2", "10H=3"), {"TH": 5}), (("as", "AS=2", "As"), {"AS": 4}), (("7h=1",), {"7H": 1})])
def test_a_card_typed_two_ways_in_a_remainder_adds_up(tokens: tuple[str, ...], counts: dict[str, int]) -> None:
    """The remainder's counts reach the daemon once per card: "TH" and "10H" were two keys of one
    card there, and one count replaced the other (5 tens of hearts reconciled as 3)."""
    assert parse_counts(tokens) == counts


def test_a_remainder_file_with_a_card_twice_is_refused_naming_it(tmp_path: Path) -> None:
    """json keeps the last of a repeated key: {"AS": 1, "AS": 2} went to the daemon as AS=2."""
    stub = tmp_path / "stub.json"
    stub.write_text('{"AS": 1, "7H": 1, "AS": 2}')
    with stub.open() as stream, pytest.raises(click.BadParameter) as refused:
        read_counts(stream)
    assert "AS given more than once" in str(refused.value.message)
    stub.write_text('{"AS": 1, "7H": 1}')
    with stub.open() as stream:
        assert read_counts(stream) == {"AS": 1, "7H": 1}


@pytest.mark.parametrize(("cents", "shown"), [(2550, "25.50"), (-125050, "-1,250.50"), ("3015/2", "15.075"),
                                              (9007199254740993, "90,071,992,547,409.93"), (None, "-")])
def test_views_show_state_amounts_exactly_in_units_with_thousands(cents: int | str | None, shown: str) -> None:
    """STATE's cents (an int, or "p/q" where 3:2 on an odd stake leaves half a cent) through the one
    formatter the journal's messages use: exact, never through a float."""
    assert money(cents) == shown


@pytest.mark.parametrize("cents", [1, 2550, 123456789, 9007199254740993])
def test_an_amount_in_a_journal_message_can_be_typed_back_to_cardctl(cents: int) -> None:
    assert Cents().convert(units(cents), None, None) == cents


@pytest.mark.parametrize(("option", "value"), [("--since", "nan"), ("--since", "inf"), ("--until", "-5"),
                                               ("--since", "99999999999999"), ("--until", "1969-07-20"),
                                               ("--round", "-1")])
def test_a_time_or_round_the_journal_cannot_have_is_a_usage_error(directory: Path, option: str, value: str) -> None:
    """Refused before cardctl connects, naming the value: it once reached the API client's own check
    (msgspec's "Expected `float` >= 0.0 - at `$.since`", exit 1) or, beyond 2262, the daemon
    (its journal query overflowed: "the daemon failed on this request")."""
    run = cardctl(directory / "cardd.sock", "log", f"{option}={value}")
    assert run.code == 2, run.err
    assert value in run.err and "`" not in run.err and "$." not in run.err and "Traceback" not in run.err


def test_log_help_says_the_newest_records_are_shown_oldest_first() -> None:
    """``log`` shows the newest matching records (as journalctl -n), printed in the order they were
    written: a supervisor asking for the last alarms gets the last ones of a 90-day journal."""
    run = cardctl(None, "log", "--help")
    text = " ".join(run.out.split())  # click wraps the help to the terminal
    assert run.code == 0 and "the newest this many matching records, printed oldest first" in text


# ---- the journal's query (a real daemon) -------------------------------------------------------

def test_an_unknown_reason_code_is_refused_naming_the_close_ones(daemon: Daemon) -> None:
    sock = daemon.socket_path
    run = cardctl(sock, "log", "--reason", "ROUND_VIOD")
    assert run.code == 2 and "no such reason code 'ROUND_VIOD'" in run.one_line_error()
    assert "ROUND_VOID" in run.err and run.out == ""
    with ApiClient(sock) as client, pytest.raises(CommandRefused) as refused:
        client.log(reason="ROUND_VIOD")
    assert refused.value.code == "bad-request"
    for known in ("ROUND_VOID", "DAEMON_START", "EXPORT_JOURNAL", "JOURNAL_PRUNED", "COMMAND_REFUSED"):
        assert cardctl(sock, "log", "--reason", known, "--json").code == 0, known
    started = cardctl(sock, "log", "--reason", "DAEMON_START", "--json").json()["records"]
    assert [r["reason"] for r in started] == ["DAEMON_START"]


@pytest.mark.parametrize("limit", ["100000", "0"])
def test_a_limit_out_of_range_is_a_usage_error_saying_the_range(daemon: Daemon, limit: str) -> None:
    run = cardctl(daemon.socket_path, "log", "--limit", limit)
    assert run.code == 2 and "1<=x<=10000" in run.err and "msgspec" not in run.err and "$.limit" not in run.err


# ---- probe -------------------------------------------------------------------------------------

def test_probe_of_a_silent_port_names_the_url_once_with_a_hint() -> None:
    master, follower = os.openpty()  # a port where nothing answers
    try:
        url = f"serial://{os.ttyname(follower)}"
        run = cardctl(None, "probe", url, "--timeout", "0.2")
    finally:
        os.close(master)
        os.close(follower)
    line = run.one_line_error()
    assert run.code == 3 and line.count(url) == 1, line
    assert "no handshake" in line and "not a cardd device" in line and "baud" in line


def test_probe_shows_link_times_in_ms() -> None:
    from simulators.rig import SimulatedTable
    with SimulatedTable.over_ptys() as sim:
        run = cardctl(None, "probe", sim.shoe.url)
    assert run.code == 0, run.err
    link = next(line for line in run.out.splitlines() if line.startswith("link: "))
    assert re.search(r"rtt last \d+\.\d\d ms", link), link
    assert not re.search(r"\d\.\d{3,}", link), link


# ---- cardd's own start ---------------------------------------------------------------------------

def test_a_missing_journal_directory_is_named_by_check_config_and_at_start(directory: Path) -> None:
    config = write_config(directory, "serial:///dev/cardd/shoe", None)
    missing = directory / "no-such-dir"
    config.write_text(config.read_text().replace(str(directory / "journal.sqlite3"),
                                                 str(missing / "journal.sqlite3")))
    for args in (("--check-config",), ()):
        done = run_cardd(*args, "--config", str(config))
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done
        assert "journal.path" in done.stderr and f"the directory {missing} does not exist" in done.stderr, done
        assert "unable to open" not in done.stderr


SERVICE_UID = 64531  # no such user: the service user of a test, without a passwd entry


def run_cardd_as(uid: int, *args: str) -> tuple[int, str]:
    """cardd's main() in a child forked from this process that became ``uid`` (group ``uid``, no
    others): its exit code and what it printed. Forked, not run: another uid cannot run the
    Python installed under root's home; the child's checks meet the kernel's real permissions.
    The child checks the configuration once as root first (never starts a daemon as root)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        code = 99
        try:
            os.close(read_end)
            # once as root first: the modules its path imports lazily (termios, ...) are loaded
            # while they can be, from a Python the uid below could not read
            sys.stdout = sys.stderr = open(os.devnull, "w")
            cardd_main(["--check-config", *(a for a in args if a != "--check-config")])
            sys.stdout = sys.stderr = os.fdopen(write_end, "w")
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            code = cardd_main(list(args))
        except BaseException as exc:  # the test shows it
            print(f"child failed: {exc!r}", file=sys.stderr)
        finally:
            sys.stderr.flush()
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as printed:
        out = printed.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out


def test_a_journal_directory_the_service_user_cannot_write_is_named_by_check_config_and_at_start(
        directory: Path) -> None:
    """The directory root made (0755, root's): the service user could read its configuration and
    would die at the first commit; --check-config, run as that user, names the directory instead."""
    config = write_config(directory, "serial:///dev/cardd/shoe", "serial:///dev/cardd/shuffler")
    for args in (("--check-config",), ()):
        code, err = run_cardd_as(SERVICE_UID, *args, "--config", str(config))
        assert code == 2 and err.count("\n") == 1, err
        assert "journal.path" in err and (f"permission denied: the user running cardd (uid {SERVICE_UID}) cannot write "
                                          f"in the directory {directory}") in err, err  # core.files' words
        assert f"uid {SERVICE_UID}" in err and "chown cardd:cardd" in err, err
    os.chown(directory, SERVICE_UID, SERVICE_UID)  # the service's now, but a journal file left by root
    Journal.open(directory / "journal.sqlite3", create=True).close()
    code, err = run_cardd_as(SERVICE_UID, "--check-config", "--config", str(config))
    assert code == 2 and f"{directory / 'journal.sqlite3'}: the user running cardd" in err, err
    for made in directory.glob("journal.sqlite3*"):
        os.chown(made, SERVICE_UID, SERVICE_UID)
    code, out = run_cardd_as(SERVICE_UID, "--check-config", "--config", str(config))
    assert code == 0 and out.endswith(": ok (rules " + str(RULES) + f", journal {directory / 'journal.sqlite3'}, "
                                      f"socket {directory / 'cardd.sock'})\n"), out


def test_other_house_rules_between_shoes_after_a_clean_stop_are_taken_and_journaled(directory: Path) -> None:
    """The table stopped cleanly between shoes (here before its first): --check-config takes other
    rules, and the start journals RULES_CHANGED from the old to the new (name and SHA-256). Where
    the change is refused (a shoe in play, an unclean stop) both name it: tests/table/
    test_table_snapshot_files.py has the rule, the test below the daemon's refusal."""
    config = write_config(directory, "serial:///dev/cardd/shoe", None)
    code, err = Daemon(["--config", str(config)], directory / "cardd.sock").stop()
    assert code == 0, err
    other = RULES.with_name("casino-001.toml")
    config.write_text(config.read_text().replace(str(RULES), str(other)))
    checked = run_cardd("--check-config", "--config", str(config))
    assert checked.returncode == 0, checked.stderr
    code, err = Daemon(["--config", str(config)], directory / "cardd.sock").stop()
    assert code == 0, err
    with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
        [changed] = journal.query(reason="RULES_CHANGED", limit=None)
        assert journal.verify().ok
    assert (changed.severity, changed.data["from"]["name"], changed.data["to"]["name"]) == (
        "warning", "casino-000", "casino-001")
    assert changed.data["message"].startswith("house rules changed between shoes: 'casino-000' (sha256 ")


def test_other_house_rules_mid_shoe_are_named_by_check_config_and_at_start(directory: Path) -> None:
    """A journal whose table has a shoe in play (built by the table's own rig): other rules are
    refused by --check-config and at start, in one line naming both rules and what is in the way."""
    rig = TableRig(HouseRules.default())  # shuffled, verified, loaded, burnt: the shoe in play
    with Journal.open(directory / "journal.sqlite3", create=True) as journal:
        journal.append([Entry(kind="start", reason="TEST_START", source="test")],
                       snapshot={"table": snapshot(rig.table), "device_states": {}})
    config = write_config(directory, "serial:///dev/cardd/shoe", None)
    for args in (("--check-config",), ()):
        done = run_cardd(*args, "--config", str(config))
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done
        assert re.search(r"table\.rules: .*casino-000\.toml: the table ran under other house rules \('default', "
                         r"sha256 [0-9a-f]{12}\.\.\.\), not these \('casino-000', sha256 [0-9a-f]{12}\.\.\.\) and the "
                         r"shoe is in_play: house rules change only between shoes", done.stderr), done.stderr


def test_the_journal_names_its_missing_directory(directory: Path) -> None:
    missing = directory / "no-such-dir"
    with pytest.raises(JournalError, match=f"the directory {missing} does not exist"):
        Journal.open(missing / "journal.sqlite3", create=True)


def test_a_state_dir_that_is_a_file_is_named_not_a_directory(directory: Path) -> None:
    a_file = directory / "state"
    a_file.write_text("")
    done = run_cardd("--simulate", "--state-dir", str(a_file))
    assert done.returncode == 2 and done.stderr == f"cardd: --state-dir {a_file}: not a directory\n", done


def test_a_second_simulate_on_a_state_dir_in_use_leaves_the_first_daemons_devices_alone(directory: Path) -> None:
    with simulate(directory) as first:
        links = {name: os.readlink(directory / name) for name in ("shoe", "shuffler")}
        done = run_cardd("--simulate", "--state-dir", str(directory))
        # the pty links the first daemon reopens after a replug are still its own (they were replaced by the
        # second one's, then removed when it stopped)
        assert all((directory / name).is_symlink() for name in links), list(directory.iterdir())
        assert {name: os.readlink(directory / name) for name in ("shoe", "shuffler")} == links
        assert done.returncode == 1 and done.stdout == "", done  # no journal and socket named: not its own
        assert done.stderr.splitlines()[-1] == (
            f"cardd: journal {directory / 'journal.sqlite3'} is open for writing elsewhere (lock "
            f"{directory / 'journal.sqlite3-lock'}): is another cardd --simulate running on --state-dir {directory}?")
        run = cardctl(first.socket_path, "probe", f"serial://{directory / 'shoe'}")
        assert run.code == 3 and "busy: held by pid" in run.one_line_error()


# ---- help that is true ---------------------------------------------------------------------------

def test_shoe_help_names_only_its_subcommands() -> None:
    run = cardctl(None, "shoe", "--help")
    commands = run.out.split("Commands:")[1]
    assert run.code == 0 and [line.split()[0] for line in commands.strip().splitlines()] == [
        "enter-card", "hand-shuffled", "remainder", "shuffle-started", "void"]


def test_alarm_without_a_subcommand_lists_the_open_alarms(daemon: Daemon) -> None:
    sock = daemon.socket_path
    assert cardctl(sock, "alarm", "--json").json() == {"alarms": []}
    assert "alarms: none" in cardctl(sock, "alarm").out
    start_round(daemon)  # a jam during a round is an alarm
    client = daemon.client()
    client.ok("sim_fault", device="shuffler", code="jam")
    state = client.wait_state(lambda s: bool(s["alarms"]))
    client.close()
    listed = cardctl(sock, "alarm", "--json")
    assert listed.code == 0 and listed.json() == {"alarms": state["alarms"]}
    view = cardctl(sock, "alarm").out
    assert all(f"alarm {a['id']}: {a['reason']}" in view for a in state["alarms"]), view


# ---- clear-fault -------------------------------------------------------------------------------

def test_clear_fault_of_a_fault_not_there_is_refused_at_once_saying_the_state(daemon: Daemon) -> None:
    sock = daemon.socket_path
    none = cardctl(sock, "clear-fault", "shuffler", "jam")  # not asked: the device would wait 5 s
    assert none.code == 1 and none.one_line_error() == "cardctl: the shuffler has no jam fault (state idle)"
    assert cardctl(sock, "clear-fault", "shuffler", "nonsense").code == 2  # the daemon names the known codes
    client = daemon.client()
    client.ok("sim_fault", device="shuffler", code="jam")
    state = client.wait_state(lambda s: s["devices"]["shuffler"]["fault"] == "jam")
    client.close()
    assert state["devices"]["shuffler"]["state"] == "fault"
    assert cardctl(sock, "clear-fault", "shuffler", "jam", "--json").code == 0
    assert cardctl(sock, "status", "--json").json()["state"]["devices"]["shuffler"]["fault"] is None


# ---- shoe remainder --file, checked before it is sent (a real daemon) ------------------------------

@pytest.mark.parametrize(("content", "why"), [
    ('{"AS": "two"}', "['AS']: expected a whole number, got 'two'"),
    ('["AS", 2]', ": expected an object, got"),
    ('{"AS": -1}', ": AS: -1 is not a card with a count of 0 or more"),
    ('{"ZZ": 1}', " key 'ZZ': not a card"),
    ('{"TH": 1, "10H": 2}', ": keys 'TH' and '10H' are the same (TH): give it once"),
])
def test_a_remainder_file_the_daemon_would_refuse_is_refused_before_it_is_sent(daemon: Daemon, tmp_path: Path,
                                                                               content: str, why: str) -> None:
    """A file such as {"AS": "two"} or a JSON list never reaches the daemon (which would journal the
    refused command) nor reads as "not list": the daemon's own decoding of the args and the shoe's own
    count check refuse it here, one error line naming the file, the card and what the file may hold."""
    stub = tmp_path / "stub.json"
    stub.write_text(content)
    run = cardctl(daemon.socket_path, "shoe", "remainder", "--file", str(stub))
    assert run.code == 2, run.err
    (error,) = [line for line in run.err.splitlines() if line.startswith("Error:")]
    assert error.startswith(f"Error: Invalid value for --file: {stub}{why}")
    assert error.endswith('(the file holds a JSON object of card -> count, each a whole number 0 or more: '
                          '{"AS": 2, "7H": 1})')
    assert "list" not in error and "Traceback" not in run.err
    with ApiClient(daemon.socket_path) as client:
        assert client.log(reason="COMMAND_REFUSED").records == []  # never sent: nothing journaled


@pytest.mark.parametrize("name", [b"Jos\xe9", b"ok\xed\xa0\x80"])  # Latin-1's e acute; an encoded surrogate
def test_a_name_typed_in_another_encoding_is_a_usage_error_and_nothing_is_sent(daemon: Daemon, name: bytes) -> None:
    """A terminal set to Latin-1 sends bytes that are not UTF-8 (Python holds them as surrogates,
    which the API's JSON cannot carry): one line naming the text, exit 2, nothing journaled."""
    with ApiClient(daemon.socket_path) as client:
        before = client.state()["seq"]
    done = subprocess.run([os.fsencode(CARDCTL), b"--socket", os.fsencode(daemon.socket_path), b"seat", b"take", name],
                          capture_output=True, timeout=60)
    err = done.stderr.decode("utf-8", "backslashreplace")
    assert done.returncode == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("cardctl: '") and "is not UTF-8 text" in err, err
    with ApiClient(daemon.socket_path) as client:
        assert [r.reason for r in client.log(from_seq=before + 1).records if r.kind != "input"] == [], "journaled"
