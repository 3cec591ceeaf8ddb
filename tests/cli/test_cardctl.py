"""cardctl through the real daemon (``cardd --simulate`` in a subprocess) and its simulated
devices: every answer parsed from --json, every error one line with its exit code."""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cardd.api import client as client_module
from cardd.api.client import ApiClient, ClientError, CommandRefused, DaemonNotRunning
from cardd.cli.common import EXIT_STDOUT_CLOSED
from cardd.cli.main import main as cardctl_main
from cardd.journal import Journal
from cardd.cli.table import retention_line
from tests.cli.cli_rig import CARDCTL, cardctl, device_urls, start_round
from tests.journal.journal_helpers import deleted_and_rechained, forge_head_file, journal_of_cards, tamper
from tests.support.groups import this_process, unix_groups
from tests.daemon.daemon_rig import Daemon, simulate, wait_until, write_config
from tests.support.pipes import run_into_closed_pipe, run_until_first_line_read





# ---- errors met first ------------------------------------------------------------------------

def test_no_daemon_on_the_default_socket_is_one_line_with_the_systemctl_line_and_exit_3():
    run = cardctl(None, "status", prefix=("env", "-u", "CARDD_SOCKET"))  # /run/cardd/cardd.sock: none here
    assert run.code == 3
    assert run.one_line_error() == ("cardctl: /run/cardd/cardd.sock: cardd is not running "
                                    "(start it: sudo systemctl start cardd)")


def test_no_daemon_on_another_socket_names_the_socket_tried_not_systemd(directory):
    # a cardd --simulate's socket: systemd's cardd would never listen there, so the line names no systemd
    for run in (cardctl(directory / "cardd.sock", "status"),
                cardctl(None, "status", prefix=("env", f"CARDD_SOCKET={directory / 'cardd.sock'}"))):
        assert run.code == 3
        line = run.one_line_error()
        assert line.startswith(f"cardctl: {directory / 'cardd.sock'}: cardd is not running on this socket, the one "
                               "tried (not the installed daemon's /run/cardd/cardd.sock;"), line
        assert "systemctl" not in line


def test_a_stale_socket_is_no_daemon(directory):
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(directory / "cardd.sock"))
    stale.close()  # the file stays, nobody listens
    run = cardctl(directory / "cardd.sock", "status", "--json")
    assert run.code == 3 and "not running" in run.one_line_error() and run.out == ""
    with pytest.raises(DaemonNotRunning, match="not running on this socket"):
        ApiClient(directory / "cardd.sock")


def test_a_socket_path_that_is_a_plain_file_is_named_not_a_socket(directory):
    plain = directory / "notes.txt"
    plain.write_text("not cardd\n")
    run = cardctl(plain, "status")
    assert run.code != 0 and run.out == ""
    assert run.one_line_error().endswith("notes.txt: not a socket (cardd's API socket is /run/cardd/cardd.sock; "
                                         "--socket or CARDD_SOCKET names another)")


@contextlib.contextmanager
def not_cardd(path: Path, says: bytes) -> Iterator[None]:
    """A Unix socket server at ``path`` that is not cardd: it sends ``says`` to each client, then keeps
    the connection open and quiet until the test ends."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            held.append(client)
            client.sendall(says)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown(socket.SHUT_RDWR)
        server.close()
        thread.join()
        for client in held:
            client.close()


def test_a_silent_socket_ends_a_client_without_a_timeout_of_its_own(directory, monkeypatch):
    """verify-journal, watch and log --follow wait for their answers as long as it takes; a socket that
    never greets with VERSION kept them waiting for ever."""
    monkeypatch.setattr(client_module, "GREETING_TIMEOUT_S", 0.2)
    with not_cardd(directory / "quiet.sock", b""):
        with pytest.raises(ClientError, match=r"quiet\.sock: no answer from cardd within 0\.2 s \(is .*quiet\.sock "
                                              r"cardd's API socket\?\)"):
            ApiClient(directory / "quiet.sock", timeout=None)


def test_a_socket_that_speaks_something_else_is_asked_whether_it_is_cardd_s(directory):
    with not_cardd(directory / "other.sock", b"\x00\xffgarbage\n"):
        run = cardctl(directory / "other.sock", "verify-journal", "--json")
    assert run.code == 1 and run.out == ""
    assert run.one_line_error().endswith(f"(is {directory / 'other.sock'} cardd's API socket?)")


def test_socket_permission_denied_names_the_group_to_join(daemon):
    run = cardctl(daemon.socket_path, "status", prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"))
    assert run.code == 3
    assert "usermod -aG cardd-api" in run.one_line_error()


def test_usage_errors_exit_2(daemon):
    assert cardctl(daemon.socket_path, "round", "bet", "1").code == 2
    run = cardctl(daemon.socket_path, "round", "bet", "1", "alice", "lots")
    assert run.code == 2 and "lots" in run.err


def test_refused_and_unknown_commands_through_the_client(daemon):
    with ApiClient(daemon.socket_path) as client:
        with pytest.raises(CommandRefused) as refused:
            client.command("no_such_command")
        assert refused.value.code == "unknown-command"
        with pytest.raises(CommandRefused) as wrong:
            client.command("resume")
        assert wrong.value.code == "failed" and "no held round" in str(wrong.value)


# ---- queries ---------------------------------------------------------------------------------

def test_status_json_and_the_table_view(daemon):
    run = cardctl(daemon.socket_path, "status", "--json")
    assert run.code == 0, run.err
    document = run.json()
    assert document["protocol"] == "1.1" and document["state"]["devices"]["shoe-reader"]["link"] == "up"
    client = daemon.client()
    retention = client.wait_state(lambda s: s["retention"] is not None)["retention"]  # the prune at start
    client.close()
    text = cardctl(daemon.socket_path, "status")
    assert text.code == 0 and "SHOE0001" in text.out and "alarms: none" in text.out
    # nothing exported yet: every record waits for an export (more may have come since STATE)
    assert (f"retention ({retention['horizon_days']}-day horizon): pruned through seq 0, exported through seq 0, "
            in text.out)
    assert f"record(s) not exported (oldest {retention['oldest_unexported']})" in text.out


def test_status_counts_the_records_not_exported_now_not_at_the_last_prune(daemon):
    """The daemon checks retention at start and then hourly; the records journaled since count."""
    client = daemon.client()
    at_start = client.wait_state(lambda s: s["retention"] is not None)["retention"]
    client.close()
    start_round(daemon)  # a shoe shuffled, loaded and burnt, a round opened and bet: dozens of records
    run = cardctl(daemon.socket_path, "status", "--json")
    assert run.code == 0, run.err
    state = run.json()["state"]
    assert state["retention"]["exported_through"] == at_start["exported_through"] == 0
    assert state["retention"]["unexported"] == state["seq"] > at_start["unexported"]
    text = cardctl(daemon.socket_path, "status")
    shown = re.search(r", (\d+) record\(s\) not exported", text.out)
    assert shown and int(shown.group(1)) >= state["seq"], text.out  # (the status query may add records)


def test_the_retention_line_of_status():
    assert retention_line(None).plain.startswith("retention: not checked yet")
    late = {"pruned_through": 100, "exported_through": 120, "unexported": 30,
            "oldest_unexported": "2026-01-02T03:04:05.000000000Z", "unexported_past_horizon": True, "horizon_days": 120}
    past = retention_line(late)
    assert past.plain == (
        "retention (120-day horizon): pruned through seq 100, exported through seq 120, 30 record(s) not exported "
        "(oldest 2026-01-02T03:04:05.000000000Z): past the horizon, export them (cardctl log --export FILE)")
    assert past.style == "yellow"
    everything = {**late, "unexported": 0, "oldest_unexported": None, "unexported_past_horizon": False}
    line = retention_line(everything)
    assert line.plain == \
        "retention (120-day horizon): pruned through seq 100, exported through seq 120, 0 record(s) not exported"
    assert not line.style


def test_devices_lists_json(daemon):
    run = cardctl(None, "devices", "--json")
    assert run.code == 0, run.err
    assert set(run.json()) == {"devices", "not_listed"}


def test_technician_commands_answer_from_the_devices(daemon):
    sock = daemon.socket_path
    run = cardctl(sock, "selftest", "shoe", "--json")
    assert run.code == 0 and run.json()["passed"] is True
    counters = cardctl(sock, "counters", "shuffler", "--json")
    assert counters.code == 0 and set(counters.json()) == {"shuffles", "cards", "jams", "faults"}
    with ApiClient(sock) as client:
        client.command("sim_fault", device="shuffler", code="jam")
    assert cardctl(sock, "selftest", "shuffler").code == 1  # an active jam fails the self-test
    cleared = cardctl(sock, "clear-fault", "shuffler", "jam", "--json")
    assert cleared.code == 0 and cleared.json() == {"cleared": "jam"}
    assert cardctl(sock, "counters", "shuffler", "--json").json()["jams"] == 1
    shuffle = cardctl(sock, "shuffle", "--json")
    assert shuffle.code == 0 and shuffle.json() == {"decks": 6}


def test_a_round_an_alarm_and_the_supervisor_through_cardctl(daemon):
    start_round(daemon)
    sock = daemon.socket_path
    state = cardctl(sock, "status", "--json").json()["state"]
    assert state["round"]["wagers"] == {"1": {"alice": 2500, "bob": 1000}, "3": {"carol": 1050}}
    with ApiClient(sock) as client:
        client.command("sim_fault", device="shuffler", code="jam")
    client = daemon.client()
    state = client.wait_state(lambda s: bool(s["alarms"]) and s["round"]["held"] is not None)
    client.close()
    refused = cardctl(sock, "round", "continue")  # the shuffler is still jammed
    assert refused.code == 1
    # the table's words, and what ends the fault (cardctl may name its own commands in the line)
    assert re.match(r"cardctl: (resume|round continue) refused: the shuffler is in fault \(jam\): wait for the device to "
                    r"clear it, or a technician clears it with (clear_fault|cardctl clear-fault) once it is fixed: ",
                    refused.one_line_error()), refused.err
    assert cardctl(sock, "clear-fault", "shuffler", "jam").code == 0
    for alarm in state["alarms"]:
        assert cardctl(sock, "alarm", "clear", str(alarm["id"])).code == 0
    assert cardctl(sock, "round", "continue", "--json").code == 0
    after = cardctl(sock, "status", "--json").json()["state"]
    assert after["alarms"] == [] and after["round"]["held"] is None
    missing = cardctl(sock, "alarm", "clear", "999")
    assert missing.code == 1 and "999" in missing.one_line_error()
    assert cardctl(sock, "shoe", "void", "--json").code == 0
    assert cardctl(sock, "status", "--json").json()["state"]["shoe"]["state"] == "void"


def test_log_query_follow_and_export(daemon, directory):
    start_round(daemon)
    sock = daemon.socket_path
    run = cardctl(sock, "log", "--round", "1", "--json")
    assert run.code == 0, run.err
    reasons = [r["reason"] for r in run.json()["records"]]
    assert reasons == ["ACTION", "ACTION", "ACTION", "ROUND_STATE"], reasons  # round 1's bets, then its deal
    assert run.json()["records"][2]["message"] == "round 1: carol bets 10.50 on box 3"  # units, as cardctl took them
    assert all(r["data"].get("round") in (1, None) for r in run.json()["records"])
    alarms = cardctl(sock, "log", "--severity", "alarm", "--json").json()["records"]
    assert all(r["severity"] == "alarm" for r in alarms)
    none = cardctl(sock, "log", "--reason", "EVENT_GAP")  # no such record: said so, not an empty table
    assert none.code == 0 and none.out.strip() == "no records match", none.out
    export = directory / "round-1.csv"  # a filtered query: copied here, not an archive
    done = cardctl(sock, "log", "--round", "1", "--export", str(export), "--json")
    assert done.code == 0 and done.json()["exported"] > 3 and "sha256" not in done.json()
    lines = export.read_text().splitlines()
    assert lines[0].startswith("seq,time,kind") and len(lines) == done.json()["exported"] + 1
    again = cardctl(sock, "log", "--export", str(export))
    assert again.code == 2 and "never overwrites" in again.one_line_error()
    with ApiClient(sock) as client:
        assert client.log(reason="JOURNAL_EXPORTED").records == []  # a query export is journaled nowhere
    follower = subprocess.Popen([str(CARDCTL), "--socket", str(sock), "log",
                                 "--follow", "--json", "--limit", "1", "--reason", "OVERRIDE"],
                                stdout=subprocess.PIPE, text=True)
    try:
        with ApiClient(sock) as client:
            client.command("void_shoe")
        line = follower.stdout.readline() if follower.stdout else ""
        while "void" not in line and line:  # the void's OVERRIDE records: the shoe's, its round's
            line = follower.stdout.readline() if follower.stdout else ""
        assert '"reason": "OVERRIDE"' in line
    finally:
        follower.terminate()
        follower.wait(10)


def test_log_shows_an_input_record_as_its_input_not_its_payload_in_hex(daemon):
    sock = daemon.socket_path
    assert cardctl(sock, "counters", "shoe").code == 0
    journaled = cardctl(sock, "log", "--limit", "1000", "--json").json()["records"]
    inputs = {r["data"]["type"]: r for r in journaled if r["kind"] == "input"}
    ident, counters = (next(r for r in journaled if r["kind"] == "input" and r["source"] == "shoe-reader" and
                            r["data"].get("message", "").startswith(prefix))
                       for prefix in ("02", "18"))  # the payloads' type bytes (the two devices come in either order)
    shown = cardctl(sock, "log", "--limit", "1000", prefix=("env", "COLUMNS=400")).out
    row = {int(line.split()[0]): line for line in shown.splitlines() if line.split()[0].isdigit()}
    assert "input: Ident from the shoe-reader (role=SHOE model=OS-1 sim serial=SHOE0001 firmware_version=1.0.0" \
           in row[ident["seq"]] and ident["message"] not in row[ident["seq"]]
    assert "input: Counters from the shoe-reader (shuffles=0 cards=0 jams=0 faults=0)" in row[counters["seq"]]
    assert f"input: LinkUp (device={inputs['LinkUp']['source']})" in row[inputs["LinkUp"]["seq"]]  # no message of its own
    assert ident["message"] == ident["data"]["message"]  # --json keeps the record as journaled


def test_log_shows_a_table_input_by_its_command_name_with_money_in_units(daemon):
    # never "input: PlaceBet (amount=2500 box=1 player=alice)": a class name and cents
    start_round(daemon)
    shown = cardctl(daemon.socket_path, "log", "--limit", "1000", prefix=("env", "COLUMNS=400")).out
    # the message column, then the who column
    inputs = [" ".join(line.split("input: ", 1)[1].split()) for line in shown.splitlines() if "input: " in line]
    for line in ("open_round root", "place_bet (box=1 player=alice amount=25.00) root",
                 "place_bet (box=3 player=carol amount=10.50) root", "no_more_bets root"):
        assert line in inputs, (line, [i for i in inputs if "from the" not in i])


@pytest.mark.parametrize("view", [(), ("--json",)])
def test_log_into_a_closed_pipe_ends_quietly(daemon, view):
    """``cardctl log | head``: once the reader has gone the log ends with the shell's SIGPIPE code,
    no traceback and no error line."""
    start_round(daemon)
    done = run_into_closed_pipe([str(CARDCTL), "--socket", str(daemon.socket_path), "log", *view])
    assert (done.returncode, done.stderr) == (EXIT_STDOUT_CLOSED, "")


def test_watch_on_an_idle_table_ends_once_its_reader_has_gone(daemon):
    """``cardctl watch --json | head -1`` on a table where nothing happens: no next event would
    ever meet the closed pipe, so the watch notices the reader going away by itself."""
    first, code, err = run_until_first_line_read(
        [str(CARDCTL), "--socket", str(daemon.socket_path), "watch", "--json"], timeout=20)
    assert json.loads(first)["class"] == "STATE"
    assert (code, err) == (EXIT_STDOUT_CLOSED, "")


@pytest.mark.parametrize("ending", [signal.SIGINT, signal.SIGTERM])
def test_watch_into_a_file_ended_by_a_signal_writes_its_last_frame(daemon, directory, ending):
    """``cardctl watch > file``, then Ctrl-C or ``timeout 2``'s SIGTERM: a view redirected to a file
    writes its one frame as it ends, a SIGTERM too (never a file left empty)."""
    shown = directory / "watch.txt"
    with shown.open("w") as out:
        watching = subprocess.Popen([str(CARDCTL), "--socket", str(daemon.socket_path), "watch"], stdout=out,
                                    stderr=subprocess.PIPE, text=True)
        try:
            def connected() -> bool:  # its two connections (STATE, WATCH) are open: the view runs
                sockets = 0
                for fd in Path(f"/proc/{watching.pid}/fd").iterdir():
                    try:
                        sockets += os.readlink(fd).startswith("socket:")
                    except FileNotFoundError:  # closed between the listing and the look (its imports)
                        continue
                return sockets >= 2
            wait_until(connected, "cardctl watch connected")
            time.sleep(0.5)  # from its WATCH into the view (a margin, nothing measured)
            watching.send_signal(ending)
            _, err = watching.communicate(timeout=20)
        finally:
            if watching.poll() is None:
                watching.kill()
                watching.wait()
    assert (watching.returncode, err) == (0, "")
    assert "cardd table — cardd" in shown.read_text() and "shoe idle" in shown.read_text()


@pytest.mark.parametrize("options", [("--help",), ("--version",), ("log", "--help")])
def test_help_into_a_closed_pipe_ends_quietly(options):
    done = run_into_closed_pipe([str(CARDCTL), *options])
    assert (done.returncode, done.stderr) == (EXIT_STDOUT_CLOSED, "")


def test_verify_journal_through_the_daemon_and_on_a_file_names_the_first_bad_record(daemon, directory):
    sock = daemon.socket_path
    run = cardctl(sock, "verify-journal", "--json")
    assert run.code == 0 and run.json()["ok"] is True
    copy = directory / "copy.sqlite3"
    with ApiClient(sock):
        pass
    daemon.stop()
    shutil.copy(directory / "journal.sqlite3", copy)
    good = cardctl(None, "verify-journal", "--file", str(copy), "--json")
    assert good.code == 0 and good.json()["checked"] > 3
    tamper(copy, "UPDATE records SET reason = 'TAMPERED' WHERE seq = 2")
    bad = cardctl(None, "verify-journal", "--file", str(copy))
    assert bad.code == 5
    assert "record 2" in bad.one_line_error() or "seq 2" in bad.one_line_error()
    assert cardctl(None, "verify-journal", "--file", str(directory / "nope.sqlite3")).code == 2


@pytest.mark.parametrize("damage", ["an edited record", "not SQLite", "bytes appended"])
def test_verify_journal_file_json_answers_a_journal_damaged_at_open_on_stdout(tmp_path, damage):
    copy = journal_of_cards(tmp_path / "copy.sqlite3", 30)
    if damage == "an edited record":
        tamper(copy, "UPDATE records SET reason = 'TAMPERED' WHERE seq = 25")
    elif damage == "not SQLite":
        copy.write_bytes(b"not a database at all" * 300)
    else:
        with open(copy, "ab") as file:
            file.write(os.urandom(5000))
    run = cardctl(None, "verify-journal", "--file", str(copy), "--json")
    assert run.code == 5
    answer = run.json()  # the one JSON document a script reads, as for a chain verify() finds broken
    assert answer["ok"] is False and answer["journal"] == str(copy) and answer["problem"]
    assert answer["first_bad_seq"] == (25 if damage == "an edited record" else None)
    assert str(copy) in run.one_line_error()
    if damage == "bytes appended":
        assert answer["problem"].startswith("5000 bytes follow the last of its ")
        assert cardctl(None, "verify-journal", "--file", str(copy)).one_line_error() == \
            f"cardctl: journal {copy} is corrupt (first bad seq unknown): {answer['problem']}"


def test_verify_journal_through_the_daemon_finds_bytes_appended_to_its_file(daemon, directory):
    """The running daemon's verify: the same line as a check of the file, no seq to name."""
    path = directory / "journal.sqlite3"
    for _ in range(20):  # (a checkpoint after a new record cuts them off: on a busy machine, often)
        size = path.stat().st_size
        with open(path, "ab") as file:
            file.write(os.urandom(5000))
        run = cardctl(daemon.socket_path, "verify-journal")
        if path.stat().st_size == size + 5000:
            break  # the bytes were there all through the verify
    else:
        pytest.fail("a checkpoint cut the appended bytes off 20 times in a row")
    assert run.code == 5
    line = run.one_line_error()
    assert line.startswith(f"cardctl: journal {path} is corrupt (first bad seq unknown): ") and \
        " bytes follow the last of its " in line, line


@pytest.mark.parametrize("gone", [1, 100, 199])
def test_verify_journal_file_names_a_deleted_record_whose_chain_was_rehashed(tmp_path, gone):
    """Every hash after it recomputed, the head and its head file rewritten to match: only the
    run of seqs shows the gap, wherever it is."""
    copy = journal_of_cards(tmp_path / "copy.sqlite3", 200)
    tamper(copy, *deleted_and_rechained(copy, gone))
    forge_head_file(copy)
    run = cardctl(None, "verify-journal", "--file", str(copy))
    assert run.code == 5
    assert run.one_line_error() == f"cardctl: journal {copy} is corrupt at seq {gone}: record {gone} missing (deleted?)"
    answer = cardctl(None, "verify-journal", "--file", str(copy), "--json").json()
    assert (answer["ok"], answer["first_bad_seq"], answer["problem"]) == (False, gone, f"record {gone} missing (deleted?)")


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_verify_journal_file_on_an_export_says_it_is_one_not_that_it_is_corrupt(tmp_path, fmt):
    source = journal_of_cards(tmp_path / "journal.sqlite3", 20)
    with Journal.open(source) as journal:
        journal.export(tmp_path / f"archive.{fmt}", fmt=fmt)
    run = cardctl(None, "verify-journal", "--file", str(tmp_path / f"archive.{fmt}"))
    assert run.code == 2  # was 5, "corrupt ... not an SQLite database", for a good archive
    assert run.one_line_error().startswith(f"cardctl: {tmp_path / f'archive.{fmt}'}: a journal export (JSON lines "
                                           "or CSV), not a journal file: ")


def test_verify_journal_file_that_sqlite_cannot_open_is_a_failure_not_an_integrity_finding(
        tmp_path, mocker, monkeypatch, capsys):
    copy = journal_of_cards(tmp_path / "copy.sqlite3", 10)
    cannot_open = sqlite3.OperationalError("unable to open database file")  # as SQLite raises it
    cannot_open.sqlite_errorcode, cannot_open.sqlite_errorname = sqlite3.SQLITE_CANTOPEN, "SQLITE_CANTOPEN"
    mocker.patch("cardd.journal.connection.sqlite3.connect",  # as on a disk SQLite cannot open the file on
                 side_effect=cannot_open)
    monkeypatch.setattr(sys, "argv", ["cardctl", "verify-journal", "--file", str(copy)])
    with pytest.raises(SystemExit) as ended:
        cardctl_main()
    assert ended.value.code == 1  # exit 5 says the chain is broken: nothing was read of it
    assert capsys.readouterr().err == f"cardctl: journal {copy}: SQLite cannot open the file (SQLITE_CANTOPEN)\n"


# ---- straight to a device --------------------------------------------------------------------

#: the subcommands that open a device by URL themselves, each with its arguments after the URL
#: (a --duration: a tool that waited quietly instead of failing ends, and fails the test)
DIRECT = {"probe": (), "monitor": ("--duration", "3"), "monitor --talk": ("--talk", "--duration", "3"),
          "capture": ("{directory}/trace", "--duration", "3")}


@pytest.mark.parametrize("tool", list(DIRECT))
def test_a_device_the_daemon_holds_names_the_holder_and_a_missing_one_hints_devices(directory, tool):
    command, *rest = tool.split()
    args = [arg.format(directory=directory) for arg in DIRECT[tool]]
    with simulate(directory) as running:
        urls = device_urls(running.stdout().splitlines()[0])  # printed before cardd listens
        client = running.client()
        client.wait_state(lambda s: all(d["link"] == "up" for d in s["devices"].values()))
        client.close()
        busy = cardctl(None, command, urls["shoe"], *args)
        assert busy.code == 3, busy
        assert f"pid {running.proc.pid} (cardd)" in busy.one_line_error() and busy.out == ""
    missing = cardctl(None, command, "serial:///dev/cardd/no-such-shoe", *args)
    assert missing.code == 3 and "cardctl devices" in missing.one_line_error() and missing.out == ""
    assert cardctl(None, command, "gopher://x", *args).code == 2
    assert not (directory / "trace").exists()


def test_monitor_talk_to_a_silent_device_is_one_line_not_a_quiet_wait():
    """A port that opens but never answers (no device behind it, the wrong baud rate): the
    handshake fails in one line, exit 3, before the --duration is out."""
    master, slave = os.openpty()
    try:
        run = cardctl(None, "monitor", "--talk", f"serial://{os.ttyname(slave)}", "--duration", "20")
    finally:
        os.close(master)
        os.close(slave)
    assert run.code == 3 and "no handshake within" in run.one_line_error()


def test_probe_a_free_simulated_device_shows_identity_and_protocol():
    from simulators.rig import SimulatedTable
    with SimulatedTable.over_ptys() as sim:
        run = cardctl(None, "probe", sim.shoe.url, "--json")
    assert run.code == 0, run.err
    found = run.json()
    assert found["serial"] == "SHOE0001" and found["protocol"].startswith("1.")
    assert found["stats"]["link"]["frames_received"] > 0


def test_every_subcommand_has_an_example_in_its_help():
    from cardd.cli.program import cli
    import click

    def walk(group: click.Group, path: list[str]) -> Iterator[list[str]]:
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                yield from walk(command, path + [name])
            yield path + [name]

    # in this process (click's runner, the program's own command tree): the text is the one
    # `cardctl ... --help` prints, without starting the program fifty times
    from click.testing import CliRunner
    for path in walk(cli, []):
        run = CliRunner().invoke(cli, [*path, "--help"])
        assert run.exit_code == 0 and "Example:" in run.output, path


# ---- roles -----------------------------------------------------------------------------------

ROLE_GROUPS = this_process({"api": "cardd-c-api", "dealer": "cardd-c-dealer"})
DEALER_UID = 64532


@pytest.fixture
def role_groups() -> Iterator[dict[str, int]]:
    with unix_groups(ROLE_GROUPS) as gids:
        yield gids


def test_a_command_outside_the_callers_role_exits_4_naming_the_role(directory, role_groups):
    from simulators.rig import SimulatedTable
    with SimulatedTable.over_ptys() as sim:
        config = write_config(directory, sim.shoe.url, sim.shuffler.url, roles={"dealer": ROLE_GROUPS["dealer"]},
                              api_group=ROLE_GROUPS["api"])
        running = Daemon(["--config", str(config)], directory / "cardd.sock")
        try:
            as_dealer = ("setpriv", f"--reuid={DEALER_UID}", f"--regid={role_groups['api']}",
                         f"--groups={role_groups['api']},{role_groups['dealer']}")
            assert cardctl(running.socket_path, "status", "--json", prefix=as_dealer).code == 0
            refused = cardctl(running.socket_path, "shoe", "void", prefix=as_dealer)
            assert refused.code == 4
            # cardctl's words for the command, not the API's void_shoe
            assert refused.one_line_error().startswith("cardctl: command 'shoe void' needs the supervisor role; ")
            assert cardctl(running.socket_path, "counters", "shoe", prefix=as_dealer).code == 4
            # the dealer's between-round commands: the daemon checks the role, cardctl relays
            passed = cardctl(running.socket_path, "round", "drawn-in-error", "exposed", prefix=as_dealer)
            assert passed.code == 1 and "no card drawn in error waits" in passed.one_line_error()
            no_role = ("setpriv", f"--reuid={DEALER_UID}", f"--regid={role_groups['api']}",
                       f"--groups={role_groups['api']}")
            for command in (("round", "drawn-in-error", "unexposed"), ("shoe", "remainder", "AS=1")):
                refused = cardctl(running.socket_path, *command, prefix=no_role)
                assert refused.code == 4 and "dealer" in refused.one_line_error(), refused.err
        finally:
            running.stop()
