"""core.rundirs: a run's temporary directory that a SIGKILLed run (cardbench, the demo, cardd
--simulate) left is removed by the next run, and nothing else is: real child processes, killed
for real, and real directories."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from core.rundirs import MARKER, keep, make_run_directory, process_start, remove_left_behind

ROOT = Path(__file__).resolve().parents[2]
#: a child that makes its run directory in argv[1], says where, and waits to be killed
OWNER = ("import sys, time; from core.rundirs import make_run_directory; "
         "print(make_run_directory('cardbench-soak-', sys.argv[1]), flush=True); time.sleep(600)")


@contextmanager
def owner(parent: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    child = subprocess.Popen([sys.executable, "-c", OWNER, str(parent)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        yield child, Path(child.stdout.readline().strip())
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


def test_the_directory_of_a_killed_run_is_removed_by_the_next_and_a_live_ones_is_not(tmp_path: Path) -> None:
    with owner(tmp_path) as (killed, left), owner(tmp_path) as (_, live):
        assert left.is_dir() and live.is_dir()
        (left / "journal.sqlite3").write_bytes(b"x" * 100)
        assert left.name.startswith(f"cardbench-soak-{killed.pid}-{process_start(killed.pid)}-")
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        mine = make_run_directory("cardbench-", tmp_path)
        assert not left.exists()  # its owner is gone
        assert live.is_dir() and (live / MARKER).is_file()  # its owner runs on
        assert mine.is_dir() and (mine / MARKER).read_text() == f"{os.getpid()} {process_start(os.getpid())}\n"


def test_a_zombie_owner_is_gone(tmp_path: Path) -> None:
    """Killed but not yet reaped by its parent: nothing of it runs, its directory goes."""
    with owner(tmp_path) as (child, left):
        os.kill(child.pid, signal.SIGKILL)
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # dead, still in the process table
        assert process_start(child.pid) is None
        assert remove_left_behind(tmp_path) == [left]


def test_a_pid_given_to_another_process_since_is_told_apart_by_its_start_time(tmp_path: Path) -> None:
    pid, start = os.getpid(), process_start(os.getpid())
    assert start is not None
    reused = tmp_path / f"cardd-demo-{pid}-{start - 1}-abcd1234"  # this pid, an earlier process's start
    reused.mkdir()
    (reused / MARKER).write_text(f"{pid} {start - 1}\n")
    own = tmp_path / f"cardd-demo-{pid}-{start}-abcd1234"
    own.mkdir()
    (own / MARKER).write_text(f"{pid} {start}\n")
    assert remove_left_behind(tmp_path) == [reused]
    assert own.is_dir()


def test_nothing_cardd_did_not_make_as_a_run_directory_is_touched(tmp_path: Path) -> None:
    gone = 2 ** 22 + 1  # above the kernel's largest pid: no such process
    someone_elses = tmp_path / "elsewhere"
    someone_elses.mkdir()
    (someone_elses / "data").write_text("keep")
    cases = {
        "no marker (made before, or by hand)": tmp_path / f"cardbench-{gone}-1-aaaaaaaa",
        "a marker naming another owner": tmp_path / f"cardbench-{gone}-2-bbbbbbbb",
        "another program's name": tmp_path / f"myapp-{gone}-3-cccccccc",
        "a name without the owner": tmp_path / "cardbench-soak-dddddddd",
    }
    for path in cases.values():
        path.mkdir()
    (cases["a marker naming another owner"] / MARKER).write_text(f"{os.getpid()} 2\n")
    (cases["another program's name"] / MARKER).write_text(f"{gone} 3\n")
    (cases["a name without the owner"] / MARKER).write_text(f"{gone} 4\n")
    link = tmp_path / f"cardbench-{gone}-5-eeeeeeee"  # a symlink named like one: never followed
    link.symlink_to(someone_elses)
    (someone_elses / MARKER).write_text(f"{gone} 5\n")
    kept = tmp_path / f"cardbench-soak-{gone}-6-ffffffff"
    kept.mkdir()
    (kept / MARKER).write_text(f"{gone} 6\n")
    keep(kept)  # a failed soak's folder, kept for a person
    assert remove_left_behind(tmp_path) == []
    assert all(path.is_dir() for path in cases.values()), cases
    assert link.is_symlink() and (someone_elses / "data").read_text() == "keep" and kept.is_dir()


def test_a_killed_runs_directory_given_back_to_cardd_simulate_is_kept_while_it_runs() -> None:
    """`cardd --simulate` killed, then `cardd --simulate --state-dir` on the directory it printed, to
    resume that table: the next run's clean-up must not take it for one left behind (its marker
    still names the dead owner) and remove it under the running daemon."""
    from tests.daemon.daemon_rig import Daemon
    tmp_path = Path(tempfile.mkdtemp(prefix="rd-", dir="/tmp"))  # pytest's is too long for the socket's path
    with owner(tmp_path) as (killed, left):
        killed.send_signal(signal.SIGKILL)
        killed.wait()
    daemon = Daemon(["--simulate", "--state-dir", str(left)], left / "cardd.sock")
    try:
        assert remove_left_behind(tmp_path) == [] and (left / "journal.sqlite3").exists()
        daemon.client().close()  # still serving
    finally:
        daemon.stop()
        shutil.rmtree(tmp_path, ignore_errors=True)
