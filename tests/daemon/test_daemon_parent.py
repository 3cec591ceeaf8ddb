"""``cardd --stop-with-parent PID`` (cardd/daemon/parent.py): a daemon started by a program
(cardbench, the demo) stops, cleanly, when that program is killed outright: left running on the
bench's ptys, socket and journal, it would meet the tests of a later run. The parent here is a small program that starts cardd as cardbench does;
tests/bench/test_bench_signals.py and tests/cli/test_demo_and_completion.py kill the real ones."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.daemon.daemon_rig import (CARDD, START_TIMEOUT, Client, assert_stopped_cleanly, cardd_running, remove,
                                     run_cardd, state_dir, wait_listening, wait_until)

#: a program that starts cardd as its child and waits: each argument a JSON [command, state directory]
#: ("{parent}" in the command stands for this program's pid); it prints its daemons' pids, one JSON line.
#: Each daemon is started from a thread that ends at once, as cardbench's workers may: the end of the
#: thread that forked cardd is not the end of its parent (PR_SET_PDEATHSIG's mistake).
PARENT = r"""
import json, os, subprocess, sys, threading, time
pids = []
def start(spec):
    command, directory = json.loads(spec)
    command = [arg.replace("{parent}", str(os.getpid())) for arg in command]
    with open(os.path.join(directory, "cardd.out"), "x") as out, open(os.path.join(directory, "cardd.log"), "x") as err:
        pids.append(subprocess.Popen(command, stdout=out, stderr=err).pid)
for spec in sys.argv[1:]:
    thread = threading.Thread(target=start, args=(spec,))
    thread.start()
    thread.join()
print(json.dumps(pids), flush=True)
time.sleep(600)
"""
#: cardd where pidfd_open is missing (a kernel before 5.3): it falls back to getppid() on its 1 s tick
CARDD_WITHOUT_PIDFD = [sys.executable, "-c", "import os, sys; del os.pidfd_open; "
                       "from cardd.daemon.main import main; sys.exit(main())"]
#: a stop on the parent's end takes the watch's wake-up (at most the 1 s tick) and the stop itself
STOP_TIMEOUT = 20.0
WATCHING = "cardd stops when its parent ends (--stop-with-parent)"
ENDED = "the process that started cardd has ended (--stop-with-parent): stopping"


def simulated(directory: Path, program: list[str] | None = None, *, with_parent: bool = True) -> str:
    """PARENT's argument for one ``cardd --simulate`` in ``directory``."""
    command = [*(program or [str(CARDD)]), "--simulate", "--state-dir", str(directory), "--log-format", "json"]
    if with_parent:
        command += ["--stop-with-parent", "{parent}"]
    return json.dumps([command, str(directory)])


def log_lines(directory: Path) -> list[dict[str, Any]]:
    """cardd's JSON log lines in ``directory`` (what is not JSON, a last word, left out)."""
    lines = []
    for line in (directory / "cardd.log").read_text(errors="replace").splitlines():
        try:
            lines.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return lines


def wait_serving(directory: Path, pid: int) -> None:
    wait_listening(directory / "cardd.sock", lambda: None if cardd_running(pid) else
                   f"cardd ended: {(directory / 'cardd.log').read_text(errors='replace')[-3000:]}", START_TIMEOUT)


@contextmanager
def under_parent(*daemons: str) -> Iterator[tuple[subprocess.Popen[str], list[int]]]:
    """PARENT with ``daemons`` (simulated's), and their pids once each serves; in the end whatever
    is left of them killed (tests/conftest.py knows only the daemons it started itself)."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT, *daemons], stdout=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        assert parent.stdout is not None
        pids = json.loads(parent.stdout.readline())
        for spec, pid in zip(daemons, pids):
            wait_serving(Path(json.loads(spec)[1]), pid)
        yield parent, pids
    finally:
        parent.kill()
        parent.wait()
        for pid in pids:
            if cardd_running(pid):
                os.kill(pid, signal.SIGKILL)
            wait_until(lambda: not cardd_running(pid), f"cardd {pid} killed", timeout=STOP_TIMEOUT)


@pytest.mark.timeout(180)
def test_a_sigkill_of_its_parent_stops_cardd_cleanly_and_only_the_cardd_asked_to(directory):
    """Two daemons under one parent, one with the option: the parent's SIGKILL stops that one as
    SIGTERM would (its stop record journaled, its socket removed); the other, as under systemd,
    watches nothing and keeps serving."""
    watched, unwatched = directory, state_dir()
    try:
        with under_parent(simulated(watched), simulated(unwatched, with_parent=False)) as (parent, pids):
            parent.kill()
            parent.wait()
            wait_until(lambda: not cardd_running(pids[0]), "cardd stopped after its parent's SIGKILL", STOP_TIMEOUT)
            assert_stopped_cleanly(watched)
            assert [line["watched_by"] for line in log_lines(watched) if line["event"] == WATCHING] == ["pidfd"]
            assert ENDED in [line["event"] for line in log_lines(watched)]
            assert not any(line.get("level") == "error" for line in log_lines(watched)), log_lines(watched)
            assert cardd_running(pids[1])  # no option, no watch
            Client(unwatched / "cardd.sock", timeout=5.0).close()
            assert not any("--stop-with-parent" in line["event"] for line in log_lines(unwatched))
    finally:
        remove(unwatched)


@pytest.mark.timeout(120)
def test_without_pidfd_open_cardd_notices_its_parent_gone_on_its_tick(directory):
    with under_parent(simulated(directory, CARDD_WITHOUT_PIDFD)) as (parent, pids):
        watching = [line for line in log_lines(directory) if line["event"] == WATCHING]
        assert [line["watched_by"] for line in watching] == ["getppid"]
        parent.kill()
        parent.wait()
        wait_until(lambda: not cardd_running(pids[0]), "cardd stopped after its parent's SIGKILL", STOP_TIMEOUT)
        assert_stopped_cleanly(directory)
        assert ENDED in [line["event"] for line in log_lines(directory)]


def test_a_pid_that_is_not_its_parent_ends_cardd_at_once_in_one_line(directory):
    """Nothing is opened or made (not even --state-dir): a wrong pid would otherwise leave a daemon
    that no end would stop, and a parent already gone has nobody to serve."""
    table, not_the_parent = directory / "table", os.getppid()  # pytest's parent, alive and not cardd's
    done = run_cardd("--simulate", "--state-dir", str(table), "--stop-with-parent", str(not_the_parent))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"cardd: --stop-with-parent {not_the_parent}: process {not_the_parent} is not "
                                  f"cardd's parent (that is {os.getpid()}")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not table.exists()


#: a test process in miniature: starts cardd through the tests' own rig (daemon_rig.Daemon), prints
#: its pid, then waits to be killed
RIG_USER = r"""
import json, sys, time
from pathlib import Path
from tests.daemon.daemon_rig import Daemon
directory = Path(sys.argv[1])
daemon = Daemon(["--simulate", "--state-dir", str(directory)], directory / "cardd.sock")
print(json.dumps(daemon.proc.pid), flush=True)
time.sleep(600)
"""


@pytest.mark.timeout(120)
def test_a_test_process_killed_outright_leaves_no_daemon_of_the_rig_running(directory):
    """The tests' rig starts cardd as cardbench does, with ``--stop-with-parent``: a pytest killed
    by a CI timeout's SIGKILL (tests/conftest.py never runs then) leaves no daemon it had started
    running."""
    user = subprocess.Popen([sys.executable, "-c", RIG_USER, str(directory)], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    pid = 0
    try:
        assert user.stdout is not None
        pid = json.loads(user.stdout.readline())
        assert cardd_running(pid)
        user.kill()
        user.wait()
        wait_until(lambda: not cardd_running(pid), "the rig's cardd stopped after its test's SIGKILL", STOP_TIMEOUT)
    finally:
        user.kill()
        user.wait()
        if pid and cardd_running(pid):
            os.kill(pid, signal.SIGKILL)
