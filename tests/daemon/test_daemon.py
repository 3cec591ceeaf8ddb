"""The real ``cardd`` in a subprocess, over its real Unix socket: the banner, STATE, a whole
round driven through COMMANDs with the simulated shoe's cards, restart after SIGKILL, WATCH
since_seq across a restart, and start-up refusals in one line."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


from cardd.journal import Journal
from tests.daemon.daemon_rig import (
    CARDD, START_TIMEOUT, Client, Daemon, deal_one, open_and_bet, play_out, remove, run_cardd, shuffle_and_load, sim_deal,
    simulate, state_dir, wait_devices, wait_until, write_config,
)
from firmware_bridge.messages import DeckCheckResult, ShuffleComplete, ShuffleProgress, decode
from simulators.rig import SimulatedTable
from tests.cli.cli_rig import cardctl
from tests.support.powercut import flip_bytes, middle_of_frame, stored_head, wal_frames_not_copied

CARD = re.compile(r'"((?:10|[2-9JQKA])[CDHS])"')



def test_version_banner_and_state_shape(directory):
    with simulate(directory) as daemon:
        client = daemon.client()
        assert client.version == {"class": "VERSION", "release": client.version["release"], "protocol": "1.1"}
        assert client.version["release"].startswith("cardd ")
        state = client.wait_state(lambda s: all(d["link"] == "up" for d in s["devices"].values()))
        assert set(state) >= {"devices", "shoe", "round", "holds", "alarms", "piles", "seq"}
        assert set(state["devices"]) == {"shuffler", "shoe-reader"}
        assert state["devices"]["shoe-reader"]["ident"]["serial"] == "SHOE0001"
        assert state["shoe"]["state"] == "idle" and state["round"] is None and state["alarms"] == []
        client.close()
        code, err = daemon.stop()
    assert code == 0, err
    assert not (directory / "cardd.sock").exists()  # a graceful stop removes the socket


def test_cardds_output_goes_to_files_in_the_state_directory_not_pipes(directory):
    """The rig gives cardd files: a pipe nobody reads fills at 64 KiB and the daemon's next log line
    would then block its loop. stop() still returns what cardd wrote on stderr."""
    with simulate(directory) as daemon:
        for fd in (1, 2):  # not pipe:[...]
            assert Path(os.readlink(f"/proc/{daemon.proc.pid}/fd/{fd}")).parent == directory
        assert daemon.stdout().startswith("cardd --simulate: journal ")
        code, err = daemon.stop()
    assert code == 0 and "cardd started" in err
    with simulate(directory) as again:  # a restart in the same directory has files of its own
        assert again.stderr_path != daemon.stderr_path and "cardd started" in again.stop()[1]
    assert daemon.stderr() == err


def test_a_whole_round_through_commands_with_the_simulated_shoe(directory):
    with simulate(directory) as daemon:
        client = daemon.client()
        assert client.request({"class": "WATCH"})["class"] == "ACK"
        deal = sim_deal(client)
        shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), deal)
        open_and_bet(client)
        state = play_out(client, deal, lambda s: None)
        r = state["round"]
        assert r["state"] == "complete" and r["house_result"] is not None
        assert len(r["dealer"]["cards"]) >= 2 and all(len(h[0]["cards"]) >= 2 for h in r["boxes"].values())
        # a wrong arg is an ERROR naming the field; who comes from the credentials only
        reply = client.command("place_bet", box=1, player="p1", amount="lots")
        assert reply["class"] == "ERROR" and reply["message"].startswith("place_bet.amount: ")
        reply = client.command("no_more_bets", who="someone-else")
        assert reply["class"] == "ERROR" and "credentials" in reply["message"]
        client.request({"class": "STATE"})  # the events of the last commands have arrived by now
        seqs = [e["seq"] for e in client.events]
        assert seqs == sorted(set(seqs))  # published in journal order, none twice
        assert any(e["reason"] == "CARD_ASSIGNED" for e in client.events)
        inputs = [e for e in client.events if e["kind"] == "input" and e["data"]["type"] == "NoMoreBets"]
        assert inputs and inputs[0]["who"] == "root" and inputs[0]["data"]["who"] == "root"
        client.close()
        assert daemon.stop()[0] == 0
    with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
        assert journal.verify().ok


def test_a_player_name_with_control_characters_is_refused_and_the_table_goes_on(directory):
    """A console's player name with a terminal escape: the bet is ERROR bad-args, and the journal
    keeps committing (it once took the name as a refused bet's ``who``, refused that record at
    its group commit and then failed every commit after it: every command and card)."""
    with simulate(directory) as daemon:
        client = daemon.client()
        client.wait_state(lambda s: all(d["link"] == "up" for d in s["devices"].values()))
        reply = client.command("place_bet", box=1, player="\x1b[31mX\r\nY", amount=500)
        assert reply["class"] == "ERROR" and reply["code"] == "bad-args", reply
        assert reply["message"].startswith("place_bet.player: ")
        seq = client.ok("counters", device="shoe")  # journaled: the commits go on
        record = client.request({"class": "LOG", "from_seq": seq, "to_seq": seq})["records"][0]
        assert record["reason"] == "COUNTERS"
        client.close()
        assert daemon.stop()[0] == 0


def test_a_refused_command_journals_at_most_a_kibibyte_of_what_the_client_sent(directory):
    """A refused attempt is journaled (even one from a caller without a role), and a record stays 90
    days: 64 KiB of args (or a 64 KiB field name quoted by the refusal) once went in whole, and four
    connections of a user with no role added 39 MB to the journal in 4 s."""
    with simulate(directory) as daemon:
        client = daemon.client()
        client.wait_state(lambda s: all(d["link"] == "up" for d in s["devices"].values()))
        for args in ({"device": "shoe", "junk": "x" * 60_000}, {"device": "shoe", "y" * 60_000: 1}):
            reply = client.command("selftest", **args)
            assert reply["class"] == "ERROR" and reply["code"] == "bad-args", reply
            record = client.request({"class": "LOG", "reason": "COMMAND_REFUSED", "limit": 10})["records"][-1]
            assert len(json.dumps(record)) < 2048, len(json.dumps(record))
            assert record["data"]["command"] == "selftest" and record["who"] == "root"
        assert record["data"]["args"]["too_long"]["bytes"] > 60_000
        small = client.command("selftest", device="shoe", junk=1)
        assert small["class"] == "ERROR"
        record = client.request({"class": "LOG", "reason": "COMMAND_REFUSED", "limit": 10})["records"][-1]
        assert record["data"]["args"] == {"device": "shoe", "junk": 1}  # a short one is kept whole
        # a table command the table refuses: its record kept the whole input (a 50 KB one here)
        reply = client.command("placement_error", assignments=[["AS", ["dealer", 0, 0]]] * 2500)
        assert reply["message"] == "placement_error refused: no round is open", reply
        record = client.request({"class": "LOG", "reason": "COMMAND_REFUSED", "limit": 10})["records"][-1]
        assert record["data"]["command"] == "placement_error" and len(json.dumps(record)) < 2048, len(json.dumps(record))
        assert record["data"]["args"]["too_long"]["bytes"] > 50_000
        client.close()
        assert daemon.stop()[0] == 0


def test_a_log_query_for_a_severity_that_is_none_is_a_bad_request(directory):
    """docs/api.md: a wrong field is bad-request; the journal's refusal came back as "failed"."""
    with simulate(directory) as daemon:
        client = daemon.client()
        reply = client.request({"class": "LOG", "severity": "boom"})
        assert reply["class"] == "ERROR" and reply["code"] == "bad-request", reply
        assert reply["message"] == "severity 'boom': one of info, warning, alarm"
        assert client.request({"class": "LOG", "severity": "alarm"})["class"] == "LOG"
        client.close()
        assert daemon.stop()[0] == 0


def test_state_never_shows_an_undealt_card(directory):
    """The test owns the simulated devices (so it knows the stack) and configures cardd with their ptys."""
    with SimulatedTable.over_ptys() as sim:
        config = write_config(directory, sim.shoe.url, sim.shuffler.url)
        daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
        try:
            client = daemon.client()

            def deal(n: int) -> None:
                sim.shoe.call(sim.shoe.device.deal, n)

            def check(state: dict[str, Any]) -> None:
                remaining = sim.shoe.call(lambda: list(sim.shoe.device._stack))
                loaded = loaded_stack[0]
                dealt = Counter(str(c) for c in loaded[:len(loaded) - len(remaining)])
                shown = Counter(CARD.findall(json_text(state)))
                assert shown <= dealt, f"STATE shows cards still in the shoe: {shown - dealt}"
                assert remaining, "the test needs undealt cards left"

            loaded_stack: list[list[Any]] = []

            def load() -> None:
                sim.hand_off()
                stack = sim.shoe.call(lambda: list(sim.shoe.device._stack))
                loaded_stack.append(list(reversed(stack)))  # the shoe pops from the end

            shuffle_and_load(client, load, deal)
            open_and_bet(client)
            state = play_out(client, deal, check)
            assert state["round"]["state"] == "complete"
            client.close()
        finally:
            code, err = daemon.stop()
    assert code == 0, err


def json_text(state: dict[str, Any]) -> str:
    import json
    return json.dumps(state)


def test_restart_after_sigkill_holds_the_live_round_and_watch_resumes_from_its_seq(directory):
    with simulate(directory) as daemon:
        client = daemon.client()
        deal = sim_deal(client)
        shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), deal)
        open_and_bet(client)
        deal_one(client, deal)
        deal_one(client, deal)
        before = client.state()
        assert before["round"]["state"] == "initial_deal" and before["round"]["held"] is None
        last_seq = before["seq"]
        client.close()
        daemon.kill()
    with simulate(directory) as daemon:
        client = daemon.client()
        after = client.state()
        r = after["round"]
        assert r["id"] == before["round"]["id"] and r["held"] is not None  # held, never continued or voided
        assert r["boxes"] == before["round"]["boxes"] and r["dealer"] == before["round"]["dealer"]
        assert after["shoe"]["cards_out"] == before["shoe"]["cards_out"]
        reply = client.request({"class": "WATCH", "since_seq": last_seq})
        assert reply["class"] == "ACK"
        replayed = [e["seq"] for e in client.events]
        assert replayed == list(range(last_seq + 1, reply["seq"] + 1))  # no gap, none twice
        assert client.events[0]["kind"] == "start"
        assert any(e["reason"] == "ROUND_HELD" or "held" in e["message"] for e in client.events)
        # the supervisor decides: a re-deal, journaled with who
        seq = client.ok("redeal")
        log = client.request({"class": "LOG", "from_seq": seq, "to_seq": seq})
        assert log["records"][0]["who"] == "root" and log["records"][0]["data"]["type"] == "Redeal"
        client.close()
        assert daemon.stop()[0] == 0
    with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
        assert journal.verify().ok


def test_check_config_good_and_bad(directory):
    good = write_config(directory, "serial:///dev/cardd/shoe", None)
    result = run_cardd("--check-config", "--config", str(good))
    assert result.returncode == 0 and result.stdout.startswith(f"{good}: ok"), result
    bad = directory / "bad.toml"
    bad.write_text(good.read_text().replace("[journal]", "[journal]\nretention_days = 30"))
    result = run_cardd("--check-config", "--config", str(bad))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "journal.retention_days" in result.stderr and str(bad) in result.stderr
    rules = directory / "rules.toml"
    rules.write_text("[table]\nnot_a_key = 1\n")
    broken = directory / "broken-rules.toml"
    broken.write_text(good.read_text().replace(str(Path(good.read_text().split('rules = "')[1].split('"')[0])),
                                               str(rules)))
    result = run_cardd("--check-config", "--config", str(broken))
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "table.rules" in result.stderr, result
    result = run_cardd("--config", str(directory / "missing.toml"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "no such file" in result.stderr


def test_check_config_refuses_a_usb_shuffler_without_serial_beside_the_shoe_of_its_model(directory):
    config = write_config(directory, "usb://1209:c4d0?serial=SHOE0001", "usb://1209:c4d0")
    result = run_cardd("--check-config", "--config", str(config))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result
    assert 'devices.shuffler: "usb://1209:c4d0": possibly the same device as devices.shoe ' in result.stderr


def test_automatic_shuffle_rules_without_a_shuffler_are_a_warning_of_check_config_and_at_start(directory):
    """The daemon runs (a technician's shoe on a bench), but such a table could never start a shoe."""
    shoe_only = write_config(directory, "serial:///dev/cardd/shoe", None)  # casino-000: shuffle = "automatic"
    result = run_cardd("--check-config", "--config", str(shoe_only))
    assert result.returncode == 0 and result.stdout.startswith(f"{shoe_only}: ok"), result
    (warning,) = result.stderr.splitlines()
    assert warning.startswith("cardd: warning:") and "devices.shuffler" in warning and '"automatic"' in warning
    assert str(shoe_only) in warning
    by_hand = directory / "by-hand.toml"
    by_hand.write_text(shoe_only.read_text().replace("casino-000.toml", "casino-003.toml"))
    result = run_cardd("--check-config", "--config", str(by_hand))
    assert result.returncode == 0 and result.stderr == "", result
    with_shuffler = directory / "with-shuffler.toml"
    with_shuffler.write_text(shoe_only.read_text().replace("[devices]", '[devices]\nshuffler = "serial:///dev/cardd/shuffler"'))
    result = run_cardd("--check-config", "--config", str(with_shuffler))
    assert result.returncode == 0 and result.stderr == "", result
    daemon = Daemon(["--config", str(shoe_only), "--log-format", "json"], directory / "cardd.sock")
    daemon.client().close()
    code, err = daemon.stop()
    assert code == 0
    logged = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert [line["warning"] for line in logged if line.get("event") == "config_warning"] == [warning.removeprefix(
        "cardd: warning: ")]


@pytest.mark.parametrize("damage", ["an edit", "bytes appended"])
def test_a_corrupt_journal_refuses_to_start_in_one_line(directory, damage):
    with simulate(directory) as daemon:
        daemon.client().close()
        assert daemon.stop()[0] == 0
    if damage == "an edit":
        with sqlite3.connect(directory / "journal.sqlite3") as conn:  # an edit behind the chain's back
            conn.execute("DROP TRIGGER IF EXISTS records_no_update")
            triggers = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")]
            for name in triggers:
                conn.execute(f"DROP TRIGGER {name}")
            conn.execute("UPDATE records SET who = 'mallory' WHERE seq = 1")
    else:
        with open(directory / "journal.sqlite3", "ab") as file:  # after the last checkpoint (the stop's)
            file.write(os.urandom(5000))
    result = run_cardd("--simulate", "--state-dir", str(directory), "--log-format", "json")
    assert result.returncode == 1
    line = [l for l in result.stderr.splitlines() if l.startswith("cardd:")]
    assert len(line) == 1 and "corrupt" in line[0] and "journal.sqlite3" in line[0], result.stderr
    assert damage == "an edit" or "5000 bytes follow the last of its " in line[0], line[0]
    assert "Traceback" not in result.stderr


AHEAD = re.compile(r"since_seq (\d+) is ahead of the journal, whose last record is seq (\d+): give the seq of the "
                   r"last event received \(or no since_seq, for live events only\)")


def test_watch_since_a_seq_the_journal_has_not_reached_is_refused_in_one_line(directory):
    """The documented maximum (2^63 - 1) reached SQLite as 2^63 (ERROR internal), and a seq ahead of
    the journal's last record was ACKed: the events up to it were then never sent. Both are a
    bad-request naming the journal's last seq, and the connection can WATCH from a real one."""
    with simulate(directory) as daemon:
        client = daemon.client()
        head = wait_devices(client)["seq"]
        for since in (2**63 - 1, head + 1000):
            reply = client.request({"class": "WATCH", "since_seq": since})
            assert (reply["class"], reply.get("code")) == ("ERROR", "bad-request"), reply
            named = AHEAD.fullmatch(reply["message"])
            assert named is not None and int(named[1]) == since and head <= int(named[2]) < since, reply
        reply = client.request({"class": "WATCH", "since_seq": head})  # not left watching by a refusal
        assert reply["class"] == "ACK", reply
        seq = client.ok("selftest", device="shoe")
        while not any(e["seq"] == seq for e in client.events):
            client.events.append(client.read())
        assert [e["seq"] for e in client.events] == list(range(head + 1, seq + 1))  # no gap, none twice
        client.close()
        assert daemon.stop()[0] == 0


def test_a_wal_damaged_after_a_kill_while_dealing_stops_the_start_naming_the_records_lost(directory):
    """SIGKILL while the shoe deals, then 8 bytes flipped in a WAL frame no checkpoint had copied:
    SQLite reads the WAL up to that frame and no further, a shorter chain sound in itself. The
    daemon must not go on from it (reusing the lost records' seqs): it stops naming them, as
    cardctl verify-journal does, and leaves the WAL as it found it."""
    path = directory / "journal.sqlite3"
    wal = Path(f"{path}-wal")
    for _ in range(3):  # a kill just after a checkpoint leaves no frame to damage: deal again
        daemon = Daemon(["--simulate", "--state-dir", str(directory)], directory / "cardd.sock")
        client = daemon.client()
        if client.state()["shoe"]["state"] == "idle":
            shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), sim_deal(client))
        before = client.state()["shoe"]["cards_out"]
        client.ok("sim_deal", cards=40)
        client.wait_state(lambda s: s["shoe"]["cards_out"] >= before + 20)
        daemon.kill()
        client.close()
        frames = wal_frames_not_copied(path)
        if len(frames) >= 4:
            break
    else:
        raise AssertionError("every kill came just after a checkpoint")
    committed = stored_head(path)
    flip_bytes(wal, middle_of_frame(wal, frames[len(frames) // 2]))
    first = stored_head(path) + 1
    assert first <= committed
    damaged = wal.read_bytes()
    result = run_cardd("--simulate", "--state-dir", str(directory), "--log-format", "json")
    lines = [line for line in result.stderr.splitlines() if line.startswith("cardd:")]
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    lost = f"record {first} was" if first == committed else f"records {first}..{committed} were"
    assert f"journal {path} is corrupt at seq {first}: {lost} committed but the journal ends at seq {first - 1}" \
        in lines[0], lines[0]
    assert wal.read_bytes() == damaged
    verified = cardctl(None, "verify-journal", "--file", str(path), "--json")
    assert verified.code == 5 and verified.json()["first_bad_seq"] == first
    assert wal.read_bytes() == damaged


def test_a_second_daemon_on_the_same_socket_refuses_in_one_line(directory):
    with simulate(directory) as daemon:
        other = state_dir()
        try:
            config = write_config(other, "serial:///dev/cardd-none", None)
            text = config.read_text().replace(str(other / "cardd.sock"), str(directory / "cardd.sock"))
            config.write_text(text)
            result = run_cardd("--config", str(config), "--log-format", "json")
        finally:
            remove(other)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert "already running" in result.stderr
        assert daemon.stop()[0] == 0


def test_technician_commands_reach_the_devices_and_are_journaled(directory):
    with simulate(directory) as daemon:
        client = daemon.client()
        client.wait_state(lambda s: all(d["link"] == "up" for d in s["devices"].values()))
        seq = client.ok("selftest", device="shoe")
        record = client.request({"class": "LOG", "from_seq": seq, "to_seq": seq})["records"][0]
        assert record["kind"] == "command" and record["who"] == "root"
        assert record["data"]["result"]["passed"] is True
        assert record["data"]["message"] == "selftest of shoe by root (uid 0)"  # what `cardctl log` shows
        seq = client.ok("counters", device="shuffler")
        record = client.request({"class": "LOG", "from_seq": seq, "to_seq": seq})["records"][0]
        assert set(record["data"]["result"]) == {"shuffles", "cards", "jams", "faults"}
        assert record["data"]["message"] == "counters of shuffler by root (uid 0)"
        reply = client.command("selftest", device="toaster")
        assert reply["class"] == "ERROR" and reply["code"] == "bad-args" and "toaster" in reply["message"]
        reply = client.command("clear_fault", device="shoe", code="gremlins")
        assert reply["class"] == "ERROR" and reply["code"] == "bad-args" and "gremlins" in reply["message"]
        reply = client.command("firmware_update", device="shoe", image="/tmp/image.bin")
        assert reply["class"] == "ERROR" and "public_key" in reply["message"]
        reply = client.command("selftest")
        assert reply["class"] == "ERROR" and reply["code"] == "bad-args" and "device" in reply["message"]
        client.close()
        assert daemon.stop()[0] == 0


def test_the_shuffle_command_is_journaled_before_the_shufflers_reports_on_it(directory):
    """The journal's order is what happened: the technician's start_shuffle (who loaded the shuffler,
    then the command) before every report of the shuffle it started, and its ACK names that record."""
    with simulate(directory) as daemon:
        client = daemon.client()
        wait_devices(client)
        seq = client.ok("start_shuffle")
        client.wait_state(lambda s: s["shoe"]["state"] == "verified")
        records: list[dict] = []

        def journaled_to_the_deck_check() -> bool:  # STATE shows what was applied, LOG what was committed
            records[:] = client.request({"class": "LOG", "from_seq": seq - 1})["records"]
            return any(r["kind"] == "input" and r["source"] == "shuffler"
                       and isinstance(decode(bytes.fromhex(r["data"]["message"])), DeckCheckResult) for r in records)

        wait_until(journaled_to_the_deck_check, "the deck check's record in the journal")
        client.close()
    started, command, *after = records
    assert (started["kind"], started["data"]["type"]) == ("input", "ShuffleStarted"), started
    assert (command["seq"], command["reason"], command["data"]["result"]) == (seq, "START_SHUFFLE", {"decks": 6})
    reports = [decode(bytes.fromhex(r["data"]["message"])) for r in after
               if r["kind"] == "input" and r["source"] == "shuffler"]
    kinds = [type(m) for m in reports if isinstance(m, (ShuffleProgress, ShuffleComplete, DeckCheckResult))]
    assert kinds[0] is ShuffleProgress and kinds[-2:] == [ShuffleComplete, DeckCheckResult], kinds


def test_a_missing_device_is_offline_never_fatal_and_a_command_for_it_names_it(directory):
    config = write_config(directory, f"serial://{directory}/no-shoe", f"serial://{directory}/no-shuffler")
    daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
    try:
        client = daemon.client()
        state = client.state()
        assert {d["link"] for d in state["devices"].values()} == {"down"}
        reply = client.command("start_shuffle")
        assert reply["class"] == "ERROR" and reply["code"] == "device-offline"
        assert "shuffler" in reply["message"] and "no-shuffler" in reply["message"]
        client.close()
    finally:
        code, err = daemon.stop()
    assert code == 0, err


def test_a_configured_rate_limit_is_enforced_per_connection(directory):
    """``[api] rate`` and ``burst`` reach the API (the pattern of tests/api's flood test, through the
    real daemon): 60 requests at once against a burst of 10 get an ERROR flood and the connection closed."""
    config = write_config(directory, f"serial://{directory}/no-shoe", None, api={"rate": 2.0, "burst": 10})
    daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
    try:
        flooder = daemon.client()
        flooder.stream.write(b'{"class": "STATE"}\n' * 60)
        flooder.stream.flush()
        received = []
        while line := flooder.stream.readline():
            received.append(json.loads(line))
        flooder.close()
        calm = daemon.client()  # the limit is per connection: another one is answered
        calm.state()
        calm.close()
    finally:
        code, err = daemon.stop()
    assert code == 0, err
    states, last = received[:-1], received[-1]
    assert 10 <= len(states) < 60 and {r["class"] for r in states} == {"STATE"}, [r["class"] for r in received]
    assert last["class"] == "ERROR" and last["code"] == "flood"
    assert last["message"] == "more than 2 requests per second: closing"


def test_systemd_hears_ready_status_and_stopping(directory):
    notify = directory / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(str(notify))
        listener.settimeout(20)
        daemon = Daemon(["--simulate", "--state-dir", str(directory)], directory / "cardd.sock",
                        env={"NOTIFY_SOCKET": str(notify)})
        try:
            first = listener.recv(4096).decode().splitlines()
            assert first[0] == "READY=1" and first[1].startswith("STATUS=shoe idle")
            assert (directory / "cardd.sock").exists()  # READY only once the API listens
        finally:
            code, _ = daemon.stop()
        said: list[str] = []
        while not any(line == "STOPPING=1" for line in said):
            said += listener.recv(4096).decode().splitlines()
    assert code == 0


def test_a_graceful_stop_is_journaled(directory):
    with simulate(directory) as daemon:
        client = daemon.client()
        seq = client.state()["seq"]
        client.close()
        assert daemon.stop()[0] == 0
    with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
        assert journal.verify().ok
        stop = journal.query(newest_first=True, limit=1)[0]
    assert (stop.kind, stop.reason, stop.source) == ("stop", "DAEMON_STOP", "cardd") and stop.seq > seq


def _records_in_the_database_file_alone(journal_path: Path, copy: Path) -> int:
    """The records the database file holds without its WAL: what checkpoints copied into it."""
    copy.write_bytes(journal_path.read_bytes())
    conn = sqlite3.connect(copy)
    try:
        return int(conn.execute("SELECT count(*) FROM records").fetchone()[0])
    finally:
        conn.close()


def test_the_running_daemon_checkpoints_its_wal_off_the_card_path(directory, tmp_path):
    # the daemon's own task copies the WAL into the database file each second after new records,
    # so SQLite's checkpoint (at 1,000 WAL pages) never lands in a card's commit; a handful of
    # records here, which SQLite alone would have left in the WAL until the daemon stopped
    with simulate(directory) as daemon:
        client = daemon.client()
        seq = client.state()["seq"]
        client.close()
        journal_path = directory / "journal.sqlite3"
        wait_until(lambda: _records_in_the_database_file_alone(journal_path, tmp_path / "copy.db") >= seq,
                   "the daemon's checkpoint of its WAL into the database file", timeout=10)
        assert daemon.proc.poll() is None


def simulate_banner(proc: subprocess.Popen[str]) -> tuple[Path, Path, Path, Path]:
    """The journal, socket, shoe and shuffler paths a ``cardd --simulate`` prints first."""
    assert proc.stdout is not None
    banner = next(line for line in proc.stdout if line.startswith("cardd --simulate:"))
    found = re.fullmatch(r"cardd --simulate: journal (\S+), socket (\S+), shoe serial://(\S+), "
                         r"shuffler serial://(\S+), rules (\S+)\n", banner)
    assert found is not None, banner
    journal, sock, shoe, shuffler = (Path(found[i]) for i in range(1, 5))
    return journal, sock, shoe, shuffler


def test_simulate_without_a_state_dir_removes_its_temporary_directories_on_exit() -> None:
    proc = subprocess.Popen([str(CARDD), "--simulate", "--log-format", "json"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        journal, sock, shoe, shuffler = simulate_banner(proc)
        made = {journal.parent, shoe.parent, shuffler.parent}
        assert all(path.name.startswith("cardd-sim-") and path.is_dir() for path in made)
        wait_for(lambda: Client(sock, timeout=2.0)).close()
        assert journal.exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert not any(path.exists() for path in made)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_a_simulate_daemon_killed_with_sigkill_leaves_nothing_outside_its_state_dir(directory: Path) -> None:
    """The crash tests SIGKILL ``cardd --simulate --state-dir D``: no exit code runs, so whatever it
    made outside D (its devices' ptys had a temporary directory each) would stay in /tmp for good."""
    proc = subprocess.Popen([str(CARDD), "--simulate", "--state-dir", str(directory), "--log-format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        journal, sock, shoe, shuffler = simulate_banner(proc)
        assert (journal.parent, sock.parent) == (directory, directory)
        assert (shoe, shuffler) == (directory / "shoe", directory / "shuffler")
        wait_for(lambda: Client(sock, timeout=2.0)).close()
        assert shoe.is_symlink() and Path(os.readlink(shoe)).parts[:3] == ("/", "dev", "pts")
    finally:
        proc.kill()
        proc.communicate()
    # a restart on the same directory takes the stale links over
    with simulate(directory) as daemon:
        client = daemon.client()
        assert client.wait_state(lambda s: s["devices"]["shoe-reader"]["link"] == "up")
        client.close()
        assert daemon.stop()[0] == 0
    assert not shoe.exists() and not shuffler.exists()


def wait_for(connect: Callable[[], Client], timeout: float = START_TIMEOUT) -> Client:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return connect()
        except OSError:
            assert time.monotonic() < deadline, "cardd never listened"
            time.sleep(0.05)


def test_sim_switches_turns_a_fault_on_and_off_again(directory):
    """``sim_switches`` with ``no_heartbeat`` makes the shoe go stale; ``no_heartbeat=0`` (a switch
    back at its default) must switch it off again, and the reader comes back."""
    with simulate(directory) as daemon:
        client = daemon.client()
        client.wait_state(lambda s: s["devices"]["shoe-reader"]["state"] == "idle")
        client.ok("sim_switches", device="shoe", switches="no_heartbeat")
        client.wait_state(lambda s: s["devices"]["shoe-reader"]["state"] == "stale")
        client.ok("sim_switches", device="shoe", switches="no_heartbeat=0")
        client.wait_state(lambda s: s["devices"]["shoe-reader"]["state"] == "idle")
        client.close()
        assert daemon.stop()[0] == 0
