"""The table's alarms reach people who are not looking at cardctl: each raised and cleared goes to
the system log at its priority (the ``<N>`` journald reads under $JOURNAL_STREAM), and runs the
``[notify] command`` with the facts in its environment. The real daemon on simulated devices the
test owns (a fault raised on the shuffler, as a jam does), a real command (a script that appends
its environment to a file)."""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cardd.config import ConfigError, parse_config
from firmware_bridge.messages import FaultCode
from simulators.rig import SimulatedTable
from tests.daemon.daemon_rig import Daemon, open_and_bet, shuffle_and_load, wait_until, write_config

#: runs cardd with $JOURNAL_STREAM naming its stderr (the rig's log file), as systemd does for a
#: service whose output is the journal's stream socket: cardd then starts each line with <N>
UNDER_JOURNAL = [sys.executable, "-c", "import os, sys; s = os.fstat(2); "
                 "os.environ['JOURNAL_STREAM'] = f'{s.st_dev}:{s.st_ino}'; os.execv(sys.argv[1], sys.argv[1:])"]


def hook_script(directory: Path, body: str = "") -> Path:
    """A notify command: appends its CARDD_* environment as a JSON line to ``notified.jsonl``."""
    script = directory / "page-the-pit"
    script.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                      f"with open({str(directory / 'notified.jsonl')!r}, 'a') as out:\n"
                      "    out.write(json.dumps({k: v for k, v in os.environ.items()}) + '\\n')\n" + body)
    script.chmod(0o755)
    return script


def notified(directory: Path) -> list[dict[str, str]]:
    path = directory / "notified.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def log_lines(daemon: Daemon) -> list[tuple[str, dict[str, Any]]]:
    """cardd's log as (priority prefix, JSON object) pairs."""
    lines = []
    for line in daemon.stderr().splitlines():
        if line.startswith("<") and ">" in line[:4]:
            prefix, _, rest = line.partition(">")
            try:
                lines.append((prefix + ">", json.loads(rest)))
            except ValueError:
                continue
    return lines


@contextmanager
def table_with_hook(directory: Path, notify: str) -> Iterator[tuple[Daemon, SimulatedTable]]:
    with SimulatedTable.over_ptys() as sim:
        config = write_config(directory, sim.shoe.url, sim.shuffler.url)
        config.write_text(config.read_text() + "\n[notify]\n" + notify)
        daemon = Daemon(["--config", str(config)], directory / "cardd.sock", prefix=UNDER_JOURNAL)
        try:
            client = daemon.client()
            client.wait_state(lambda s: all(d["link"] == "up" for d in s["devices"].values()))
            client.close()
            yield daemon, sim
        finally:
            code, err = daemon.stop()
            assert code == 0, err


def round_held(daemon: Daemon, sim: SimulatedTable) -> list[dict[str, Any]]:
    """A round dealing when the shuffler jams: it is held; the table's alarms open (ROUND_HELD among them)."""
    client = daemon.client()
    shuffle_and_load(client, sim.hand_off, lambda n: sim.shoe.call(sim.shoe.device.deal, n))
    open_and_bet(client)
    sim.shuffler.call(sim.shuffler.device.raise_fault, FaultCode.JAM)
    state = client.wait_state(lambda s: any(a["reason"] == "ROUND_HELD" for a in s["alarms"]))
    client.close()
    return list(state["alarms"])


def test_an_alarm_raised_and_cleared_runs_the_command_and_reaches_the_system_log(directory: Path) -> None:
    script = hook_script(directory)
    with table_with_hook(directory, f'command = "{script}"\ntable = "BJ-07"\n') as (daemon, sim):
        alarms = round_held(daemon, sim)
        alarm = next(a for a in alarms if a["reason"] == "ROUND_HELD")
        client = daemon.client()
        command_seq = client.ok("clear_alarm", alarm_id=alarm["id"])  # its input's record; the clearing's follows
        client.close()
        wait_until(lambda: any(n["CARDD_EVENT"] == "cleared" for n in notified(directory)), "the clearing's run")
        runs = notified(directory)
        assert sorted(n["CARDD_ALARM_ID"] for n in runs if n["CARDD_EVENT"] == "raised") == \
            sorted(str(a["id"]) for a in alarms)  # every alarm raised, one run each
        raised = next(n for n in runs if n["CARDD_EVENT"] == "raised" and n["CARDD_ALARM_ID"] == str(alarm["id"]))
        cleared = next(n for n in runs if n["CARDD_EVENT"] == "cleared")
        facts = {k: v for k, v in raised.items() if k.startswith("CARDD_")}
        assert facts.pop("CARDD_TIME").endswith("+00:00") and int(facts.pop("CARDD_SEQ")) < command_seq
        assert facts == {"CARDD_EVENT": "raised", "CARDD_ALARM": "ROUND_HELD", "CARDD_ALARM_ID": str(alarm["id"]),
                         "CARDD_SEVERITY": "alarm", "CARDD_REASON": "ROUND_HELD", "CARDD_SOURCE": alarm["source"],
                         "CARDD_MESSAGE": alarm["message"], "CARDD_TABLE": "BJ-07", "CARDD_SUPPRESSED": "0"}
        assert {k for k in raised if not k.startswith("CARDD_")} <= {"PATH", "LANG", "PWD", "SHLVL", "_", "LC_CTYPE"}
        assert (cleared["CARDD_ALARM"], cleared["CARDD_ALARM_ID"], cleared["CARDD_REASON"]) == \
            ("ROUND_HELD", str(alarm["id"]), "ALARM_CLEARED") and int(cleared["CARDD_SEQ"]) > command_seq
        wait_until(lambda: any(e.get("event") == "table_alarm_cleared" for _, e in log_lines(daemon)),
                   "the clearing in the log")
        told = [(prefix, e) for prefix, e in log_lines(daemon) if e.get("event", "").startswith("table_alarm_")]
        assert sorted((prefix, e["event"], e["alarm_id"]) for prefix, e in told) == sorted(
            [("<3>", "table_alarm_raised", a["id"]) for a in alarms]  # err: journalctl -p warning lists them
            + [("<6>", "table_alarm_cleared", alarm["id"])])  # info
        assert next(e for _, e in told if e["alarm_id"] == alarm["id"])["message"] == alarm["message"]


def test_a_failing_command_is_logged_once_and_the_alarms_beyond_the_minute_counted(directory: Path) -> None:
    script = hook_script(directory, "sys.exit(3)\n")
    with table_with_hook(directory, f'command = "{script}"\nmax_per_minute = 2\n') as (daemon, sim):
        alarms = round_held(daemon, sim)  # at least two: with their clearing, beyond the minute's two runs
        client = daemon.client()
        for alarm in alarms:
            client.ok("clear_alarm", alarm_id=alarm["id"])
        client.close()
        assert len(alarms) >= 2
        wait_until(lambda: len(notified(directory)) >= 2, "two runs")
        wait_until(lambda: len([e for _, e in log_lines(daemon) if e.get("event") == "alarm_hook_failed"]) >= 1 and
                   any(e.get("event") == "alarm_hook_suppressing" for _, e in log_lines(daemon)), "the counting")
    lines = [e for _, e in log_lines(daemon)]
    failed = [e for e in lines if e.get("event") == "alarm_hook_failed"]
    assert [(e["failure"], e["exit_code"]) for e in failed] == [("exit", 3)], failed  # once, not twice
    assert len(notified(directory)) == 2  # the minute's two runs; the other notices counted
    assert len([e for e in lines if e.get("event") == "alarm_hook_suppressing"]) == 1


@pytest.mark.parametrize(("command", "said"), [
    ("page-the-pit", "notify.command: \"page-the-pit\": expected an absolute path"),
    ("{dir}/missing", "notify.command: \"{dir}/missing\": no such file"),
    ("{dir}/not-executable", "notify.command: \"{dir}/not-executable\": expected an executable file"),
    ("{dir}", "notify.command: \"{dir}\": expected an executable file"),
])
def test_a_notify_command_that_cannot_run_is_one_line_naming_the_key(tmp_path: Path, command: str, said: str) -> None:
    (tmp_path / "not-executable").write_text("#!/bin/sh\n")
    text = ('[devices]\nshoe = "serial:///dev/cardd/shoe"\n[table]\nrules = "/etc/cardd/rules.toml"\n'
            f'[notify]\ncommand = "{command.format(dir=tmp_path)}"\n')
    with pytest.raises(ConfigError) as refused:
        parse_config(text, "cardd.toml")
    assert "\n" not in str(refused.value) and str(refused.value).startswith("cardd.toml: ")
    assert said.format(dir=tmp_path) in str(refused.value), str(refused.value)
    assert os.access(tmp_path, os.X_OK)  # a directory is "executable" too: still refused


def test_a_command_that_outlives_its_timeout_is_killed_and_logged(directory: Path) -> None:
    script = hook_script(directory, "print(os.getpid(), file=open(sys.argv[0] + '.pid', 'w'), flush=True)\n"
                                    "import time\ntime.sleep(600)\n")
    with table_with_hook(directory, f'command = "{script}"\ntimeout_s = 0.5\n') as (daemon, sim):
        round_held(daemon, sim)
        wait_until(lambda: any(e.get("event") == "alarm_hook_failed" for _, e in log_lines(daemon)), "the timeout")
        [failed] = [e for _, e in log_lines(daemon) if e.get("event") == "alarm_hook_failed"]
        assert (failed["failure"], failed["timeout_s"]) == ("timeout", 0.5), failed
        pid = int(Path(f"{script}.pid").read_text())
        wait_until(lambda: not Path(f"/proc/{pid}").exists() or
                   Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z", "the command killed")
