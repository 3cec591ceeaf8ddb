"""A Ctrl-C (SIGINT) ends the real ``cardctl`` quietly with exit 130 whenever it lands: while
cardctl still imports (most of a short command's time; Python printed a KeyboardInterrupt
traceback) and once it runs (click said 'Aborted!' and exit 1). The other entry points, through the
same core.ctrl_c.run_entry_point, while they import: ``cardbench``, the demo (``python -m
cardd.cli.demo``, what ``make demo`` runs) and the daemon ``cardd`` before it serves (once it
serves, a Ctrl-C stops it cleanly with exit 0: tests/daemon).

Where the signal lands is made certain, not timed: during the imports the child sends it to itself
as it starts importing a given module (a sitecustomize on its PYTHONPATH, run by Python's site
before cardctl's own code); once it runs, the test sends it when cardctl has connected to a socket
that never answers. (A signal sent "right after spawn" lands wherever the child happens to be:
before Python's handler, which kills it quietly, or inside Python's own start, site's .pth files,
where Python itself prints a fatal error: neither is cardctl's code.)"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from core.ctrl_c import EXIT_INTERRUPTED
from tests.cli.cli_rig import CARDCTL
from tests.daemon.daemon_rig import CARDD

CARDBENCH = Path(sys.executable).with_name("cardbench")

#: the child's own SIGINT as it starts importing LAND_AT; MARK says it was sent
HOOK = '''
import importlib.abc, os, signal, sys

class _CtrlC(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == {land_at!r}:
            sys.meta_path.remove(self)
            open({mark!r}, "w").close()
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, _CtrlC())
'''


#: the child's own SIGINT as soon as its simulated devices have started (SimulatedTable.start returned)
AFTER_THE_DEVICES_START = '''
import importlib.abc, importlib.util, os, signal, sys

class _CtrlC(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "simulators.rig":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            start = module.SimulatedTable.start

            def started(table):
                start(table)
                open({mark!r}, "w").close()
                os.kill(os.getpid(), signal.SIGINT)
                return table
            module.SimulatedTable.start = started
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, _CtrlC())
'''


def run_signalled_at(command: list[str], land_at: str, tmp_path: Path, hook: str = HOOK,
                     **env: str) -> subprocess.CompletedProcess[str]:
    """``command`` run to its end, with its own SIGINT as it starts importing ``land_at`` (or where
    ``hook`` sends it)."""
    mark = tmp_path / "signalled"
    (tmp_path / "sitecustomize.py").write_text(hook.format(land_at=land_at, mark=str(mark)))
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(command, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": path, **env})
    assert mark.exists(), f"{land_at} was imported before the hook: the signal never came ({done.stderr})"
    return done


@pytest.mark.parametrize("land_at", ["click", "rich.console", "msgspec", "cardd.cli.table"])
def test_ctrl_c_while_cardctl_imports_ends_it_quietly_with_130(land_at: str, tmp_path: Path) -> None:
    done = run_signalled_at([str(CARDCTL), "--socket", str(tmp_path / "none.sock"), "status"], land_at, tmp_path)
    assert (done.returncode, done.stderr, done.stdout) == (EXIT_INTERRUPTED, "", "")


def test_ctrl_c_while_cardbench_imports_ends_it_quietly_with_130(tmp_path: Path) -> None:
    # the scenario runner: the daemon's modules, most of cardbench's 0.6 s of imports
    done = run_signalled_at([str(CARDBENCH), "simulate", "--rounds", "1"], "cardd.bench.runner", tmp_path)
    assert (done.returncode, done.stderr, done.stdout) == (EXIT_INTERRUPTED, "", "")


def test_ctrl_c_while_the_demo_imports_ends_it_quietly_with_130(tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    done = run_signalled_at([sys.executable, "-m", "cardd.cli.demo", "--fast", "--state-dir", str(directory)],
                            "cardd.journal", tmp_path)
    assert (done.returncode, done.stderr, done.stdout) == (EXIT_INTERRUPTED, "", "")
    assert not directory.exists()  # nothing was started


@pytest.mark.parametrize("land_at", [
    "cardd.daemon.app",  # its modules (the entry point's imports)
    "cardd.daemon.simulation",  # --simulate's, imported once the command line is read
])
def test_ctrl_c_before_the_daemon_serves_ends_it_quietly_with_130(land_at: str, tmp_path: Path) -> None:
    done = run_signalled_at([str(CARDD), "--simulate", "--state-dir", str(tmp_path / "sim"), "--log-format", "json"],
                            land_at, tmp_path)
    assert (done.returncode, done.stderr, done.stdout) == (EXIT_INTERRUPTED, "", "")


def test_ctrl_c_while_cardctl_waits_for_the_daemon_ends_it_quietly_with_130(tmp_path: Path) -> None:
    path = tmp_path / "silent.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen()
        server.settimeout(60)
        child = subprocess.Popen([str(CARDCTL), "--socket", str(path), "status"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        try:
            connection, _ = server.accept()  # cardctl has imported everything and waits for VERSION
            with connection:
                child.send_signal(signal.SIGINT)
                out, err = child.communicate(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert (child.returncode, err, out) == (EXIT_INTERRUPTED, "", "")


def test_ctrl_c_once_the_simulated_devices_started_stops_them_and_removes_their_directory(tmp_path: Path) -> None:
    # before the daemon serves: its --simulate devices are up, the daemon not yet made
    temp = tmp_path / "tmp"
    temp.mkdir()
    done = run_signalled_at([str(CARDD), "--simulate", "--log-format", "json"], "simulators.rig", tmp_path,
                            AFTER_THE_DEVICES_START, TMPDIR=str(temp))
    assert done.returncode == EXIT_INTERRUPTED and "Traceback" not in done.stderr, done.stderr  # (its log lines)
    assert list(temp.iterdir()) == []  # the cardd-sim-... directory made for the devices is removed
