"""A cardbench ended by a signal (``kill``, a closed terminal) stops the cardd it started, as Ctrl-C
does: a cardbench that left its daemon running on the bench's ptys and socket would hand a later
run reusing those pty numbers a daemon that was not its own."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cardd.bench.scenario import LIBRARY
from tests.daemon.daemon_rig import Client, assert_stopped_cleanly, remove, wait_until

ROOT = Path(__file__).resolve().parents[2]
#: a loaded 2-core machine may take this long to start a daemon and its simulated devices
START_S = 60.0


def _children(pid: int) -> set[int]:
    """The processes ``pid`` started that are alive (every thread's list: a thread pool starts them)."""
    found: set[int] = set()
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found.update(int(n) for n in (task / "children").read_text().split())
    except FileNotFoundError:  # ended meanwhile
        pass
    return found


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


def _daemons(bench: subprocess.Popen[str]) -> set[int]:
    return {pid for pid in _children(bench.pid) if "cardd" in _command(pid) and "--config" in _command(pid)}


def _daemons_of(bench: subprocess.Popen[str], count: int) -> set[int]:
    """The cardd processes ``bench`` runs, once there are ``count`` of them."""
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        assert bench.poll() is None, bench.communicate()
        daemons = _daemons(bench)
        if len(daemons) >= count:
            return daemons
        time.sleep(0.05)
    raise AssertionError(f"cardbench did not start {count} cardd within {START_S} s")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return "cardd" in _command(pid)  # not a pid reused by another program


def _bench(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(Path(sys.executable).with_name("cardbench")), *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _end(bench: subprocess.Popen[str], signum: int, daemons: set[int]) -> tuple[str, set[int]]:
    """Send ``signum`` to cardbench; its output once it has ended, and the daemons it started after
    the signal. Any daemon it left is killed here (after the asserts' facts are taken) so a failing
    run leaves nothing behind for the next tests."""
    bench.send_signal(signum)
    started: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while bench.poll() is None and time.monotonic() < deadline:
            started |= _daemons(bench) - daemons
            time.sleep(0.01)
        out, _ = bench.communicate(timeout=1)
    finally:
        left = {pid for pid in daemons | started if _alive(pid)}
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        if bench.poll() is None:
            bench.kill()
            bench.communicate()
    assert not left, f"cardd {left} still running after cardbench ended on {signal.Signals(signum).name}"
    return out, started


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_cardbench_soak_stops_its_daemon(signum: int) -> None:
    bench = _bench("soak", "--shoes", "1000", "--cut-at", "30", "--unplug-rate", "0", "--fault-rate", "0")
    daemons = _daemons_of(bench, 1)
    out, _ = _end(bench, signum, daemons)
    assert bench.returncode == 128 + signum and "PASS" not in out  # the signal ended it, not 1,000 shoes
    assert f"cardbench: interrupted ({signal.Signals(signum).name}); what it started is stopped" in out
    assert "Traceback" not in out, out


def test_a_sigkill_of_cardbench_stops_its_daemon_cleanly_and_the_next_run_removes_its_folder() -> None:
    """Nothing catches a SIGKILL (nor the OOM killer's): the daemon watches cardbench instead (cardbench
    starts it with ``--stop-with-parent``) and stops as on SIGTERM, and the next run removes its folder
    (journal, log), which would otherwise stay in /tmp for ever."""
    bench = _bench("soak", "--shoes", "1000", "--cut-at", "30", "--unplug-rate", "0", "--fault-rate", "0")
    (daemon,) = _daemons_of(bench, 1)
    arguments = _command(daemon).split()
    directory = Path(arguments[arguments.index("--config") + 1]).parent
    try:
        wait_until(lambda: (directory / "cardd.sock").exists() or not _alive(daemon), "cardd listening", START_S)
        Client(directory / "cardd.sock").close()  # it serves: its journal is open and its watch started
        bench.kill()
        bench.communicate()
        wait_until(lambda: not _alive(daemon), "cardd stopped after cardbench's SIGKILL", timeout=20)
        assert_stopped_cleanly(directory)
        # the killed run removed nothing; the next run removes its folder (core.rundirs: its owner is gone)
        assert directory.name.startswith(f"cardbench-soak-{bench.pid}-") and directory.is_dir()
        after = subprocess.run([str(Path(sys.executable).with_name("cardbench")), "run",
                                str(LIBRARY / "casino-000" / "clean-round.toml")], cwd=ROOT, capture_output=True,
                               text=True, timeout=120)
        assert after.returncode == 0, after.stdout + after.stderr
        assert not directory.exists()
    finally:
        if _alive(daemon):
            os.kill(daemon, signal.SIGKILL)
        if bench.poll() is None:
            bench.kill()
            bench.communicate()
        remove(directory)  # a killed cardbench removes nothing


def test_a_second_signal_does_not_cut_the_first_ones_cleanup_short() -> None:
    bench = _bench("soak", "--shoes", "1000", "--cut-at", "30", "--unplug-rate", "0", "--fault-rate", "0")
    daemons = _daemons_of(bench, 1)
    bench.send_signal(signal.SIGHUP)
    time.sleep(0.01)  # cardbench is stopping its daemon (a closed terminal, then a kill)
    out, _ = _end(bench, signal.SIGTERM, daemons)
    # the SIGTERM let pass, or, had cleanup ended before it came, killing the interpreter as it exits
    assert bench.returncode in (128 + signal.SIGHUP, -signal.SIGTERM), out
    assert "Traceback" not in out, out


def test_a_signal_to_cardbench_run_stops_the_running_daemons_and_starts_no_more() -> None:
    files = sorted(LIBRARY.rglob("*.toml"))
    assert len(files) > 6
    bench = _bench("run", str(LIBRARY), "--jobs", "2")
    daemons = _daemons_of(bench, 2)
    out, started = _end(bench, signal.SIGTERM, daemons)
    assert bench.returncode != 0
    # the scenarios not started were cancelled; each of the two threads may have taken its next one
    # (its daemon not up yet) just before the signal
    assert len(started) <= 2, (started, out)
    ran = re.findall(r"^(?:pass|FAIL|skip) ", out, re.MULTILINE)
    assert len(ran) < len(files), out
    assert "Traceback" not in out, out


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_cardbench_simulate_ends_its_workers_quietly(signum: int) -> None:
    bench = _bench("simulate", "--rounds", "100000000", "--jobs", "2", "--no-rounds")
    deadline = time.monotonic() + START_S
    while len(workers := _children(bench.pid)) < 2:
        assert bench.poll() is None and time.monotonic() < deadline, bench.communicate()
        time.sleep(0.05)
    bench.send_signal(signum)
    try:
        out, _ = bench.communicate(timeout=60)
    finally:
        left = {pid for pid in workers if Path(f"/proc/{pid}").exists()}
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert bench.returncode != 0 and not left, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
