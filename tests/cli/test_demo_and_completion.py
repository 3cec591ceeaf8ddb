"""``make demo``'s program (``python -m cardd.cli.demo --fast``) through the real daemon, and
cardctl's shell completion."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.cli.cli_rig import CARDCTL, cardctl
from tests.daemon.daemon_rig import assert_stopped_cleanly, remove, state_dir, wait_until


@pytest.mark.timeout(400)
def test_the_demo_plays_a_whole_shoe_through_the_daemon_and_its_journal_verifies():
    directory = state_dir()
    try:
        done = subprocess.run([sys.executable, "-m", "cardd.cli.demo", "--fast", "--state-dir", str(directory)],
                              capture_output=True, text=True, timeout=380)
        assert done.returncode == 0, done.stderr[-3000:]
        out = done.stdout
        played = re.search(r"rounds played: (\d+), voided: (\d+)", out)
        assert played and int(played.group(1)) >= 10 and int(played.group(2)) >= 1
        assert "FACE_UP_CARD" in out and "SHUFFLER_MALFUNCTION" in out and "shoe-reader offline" in out
        assert re.search(r"reconciliation: .*reconciled", out)
        dealt = re.search(r"cards dealt: (\d+), returned undealt: (\d+)", out)
        assert dealt and int(dealt.group(1)) + int(dealt.group(2)) == 312
        assert re.search(r"box \d -?[\d,]+\.\d\d", out)  # money per box
        assert "chain intact" in out
        decisions = dict(re.findall(r"(hit|stand|double|split|surrender|insurance) (\d+)", out.split("decisions: ")[1]
                                    .splitlines()[0]))
        assert int(decisions["hit"]) > 0 and int(decisions["stand"]) > 0
        verify = cardctl(None, "verify-journal", "--file", str(directory / "journal.sqlite3"), "--json")
        assert verify.code == 0 and verify.json()["ok"] is True
    finally:
        remove(directory)


def processes_naming(text: str) -> list[int]:
    """The pids of the processes whose command line names ``text`` (the demo's own directory)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and text.encode() in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue  # it ended while we looked
    return pids


@contextmanager
def interruptible_demo(tmp: Path, *options: str) -> Iterator[subprocess.Popen[str]]:
    """The demo in a session of its own (a terminal's process group), its temporary directory in
    ``tmp`` (TMPDIR); killed with its group in the end if it is still there."""
    demo = subprocess.Popen([sys.executable, "-m", "cardd.cli.demo", *options], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp)})
    try:
        yield demo
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()


def assert_ended_by_ctrl_c(demo: subprocess.Popen[str], err: str, tmp: Path) -> None:
    """Exit 130 with one line, no traceback, and nothing left in ``tmp``."""
    assert demo.returncode == 130, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "interrupted" in err
    assert list(tmp.iterdir()) == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("whole_group", [True, False], ids=["ctrl-c-in-a-terminal", "sigint-to-the-demo-alone"])
def test_ctrl_c_stops_the_demo_its_daemon_and_removes_its_directory(whole_group):
    """A terminal's Ctrl-C reaches the demo and the daemon it started (one process group); a
    SIGINT to the demo alone must stop the daemon just the same."""
    tmp = state_dir()  # the demo's own temporary directory goes in here (TMPDIR)
    try:
        with interruptible_demo(tmp, "--no-watch") as demo:
            assert demo.stdout is not None
            assert "technician: start the shuffler" in demo.stdout.readline()  # the daemon serves; play began
            created = list(tmp.glob("cardd-demo-*"))  # (the daemon's simulators make theirs too)
            assert len(created) == 1
            assert [pid for pid in processes_naming(str(created[0])) if pid != demo.pid]  # its daemon runs
            if whole_group:
                os.killpg(demo.pid, signal.SIGINT)
            else:
                demo.send_signal(signal.SIGINT)
            _, err = demo.communicate(timeout=60)
        assert_ended_by_ctrl_c(demo, err, tmp)
        wait_until(lambda: not processes_naming(str(tmp)), "the demo's daemon stopped", timeout=5)
    finally:
        remove(tmp)


@pytest.mark.timeout(120)
def test_a_sigkill_of_the_demo_stops_its_daemon_cleanly_all_the_same():
    """Nothing catches a SIGKILL: the demo starts cardd with ``--stop-with-parent``, and the daemon
    stops as on SIGTERM once the demo has ended, never left running for ever."""
    tmp = state_dir()
    table = tmp / "table"
    try:
        with interruptible_demo(tmp, "--no-watch", "--state-dir", str(table)) as demo:
            assert demo.stdout is not None
            assert "technician: start the shuffler" in demo.stdout.readline()  # the daemon serves; play began
            assert [pid for pid in processes_naming(str(table)) if pid != demo.pid]  # its daemon runs
            demo.kill()  # the demo alone, not its session: as the OOM killer would
            demo.communicate()
            wait_until(lambda: not processes_naming(str(table)), "the demo's daemon stopped", timeout=20)
        assert_stopped_cleanly(table)
    finally:
        for pid in processes_naming(str(table)):
            os.kill(pid, signal.SIGKILL)
        remove(tmp)


@pytest.mark.timeout(200)
def test_the_directory_of_a_sigkilled_demo_is_removed_by_the_next_demo():
    """A killed demo removes nothing: its directory (journal, log) stayed in /tmp for ever. The next
    demo removes it as it starts (core.rundirs: its owner is gone), and leaves its own alone."""
    tmp = state_dir()
    try:
        with interruptible_demo(tmp, "--no-watch") as first:
            assert first.stdout is not None
            assert "technician: start the shuffler" in first.stdout.readline()
            (left,) = tmp.iterdir()
            first.kill()
            first.communicate()
            wait_until(lambda: not processes_naming(str(left)), "the killed demo's daemon stopped", timeout=20)
        assert left.is_dir() and (left / "journal.sqlite3").exists()
        with interruptible_demo(tmp, "--no-watch") as second:
            assert second.stdout is not None and second.stderr is not None
            assert "technician: start the shuffler" in second.stdout.readline()
            (mine,) = tmp.iterdir()
            assert mine != left and not left.exists()
            second.send_signal(signal.SIGINT)
            _, err = second.communicate(timeout=60)
        assert_ended_by_ctrl_c(second, err, tmp)
    finally:
        for path in tmp.iterdir():
            for pid in processes_naming(str(path)):
                os.kill(pid, signal.SIGKILL)
        remove(tmp)


@pytest.mark.timeout(400)
def test_ctrl_c_during_the_summary_ends_in_one_line_and_removes_the_directory():
    """The shoe played, the daemon stopped, the summary half printed: a Ctrl-C there ends the demo
    as one anywhere else does. The summary waits at its gate (a FIFO nobody opens for writing)
    after its reconciliation line, so the Ctrl-C lands inside it, however slow the machine."""
    tmp, gates = state_dir(), state_dir()  # the gate apart: tmp must end up empty
    gate = gates / "summary"
    os.mkfifo(gate)
    try:
        with interruptible_demo(tmp, "--fast", "--summary-gate", str(gate)) as demo:
            assert demo.stdout is not None and demo.stderr is not None
            for line in demo.stdout:
                if line.startswith("reconciliation: "):
                    break
            else:
                raise AssertionError(f"the demo ended before its summary: {demo.wait()}, {demo.stderr.read()[-3000:]}")
            assert [pid for pid in processes_naming(str(tmp)) if pid != demo.pid] == []  # the daemon stopped first
            assert len(list(tmp.glob("cardd-demo-*"))) == 1  # its journal is still there, for the summary
            os.killpg(demo.pid, signal.SIGINT)
            rest, err = demo.communicate(timeout=60)
        assert_ended_by_ctrl_c(demo, err, tmp)
        assert "journal:" not in rest  # it stopped at the gate, before the journal's check
    finally:
        remove(tmp)
        remove(gates)


def test_shell_completion_scripts_and_completions():
    for shell in ("bash", "zsh", "fish"):
        script = subprocess.run([str(CARDCTL)], env={**os.environ, "_CARDCTL_COMPLETE": f"{shell}_source"},
                                capture_output=True, text=True)
        assert script.returncode == 0 and "_CARDCTL_COMPLETE" in script.stdout, shell
    words = subprocess.run([str(CARDCTL)], capture_output=True, text=True,
                           env={**os.environ, "_CARDCTL_COMPLETE": "bash_complete", "COMP_WORDS": "cardctl ro",
                                "COMP_CWORD": "1"})
    assert "round" in words.stdout
