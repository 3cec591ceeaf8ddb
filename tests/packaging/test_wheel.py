"""cardd's wheel works outside the checkout: built by packaging/build_wheel.py (``make wheel``),
installed into a fresh venv in a temporary folder (its dependencies from the hashed runtime lock,
then the wheel alone), and run from a directory that is not the checkout, with nothing of the
checkout on the path: ``cardd --simulate`` deals and ``cardctl status`` answers it, ``cardbench run``
runs a scenario of the library by name. The rules and the library are the package's data; a wheel
that left them out stops at the first command ("no such rules file .../site-packages/rules/...").

One wheel and one venv serve the module (about 10 s to build and install, pip's cache warm).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cardd.bench.scenario import LIBRARY
from cardd.config import RULES_DIR
from tests.daemon.daemon_rig import (Client, remove, shuffle_and_load, sim_deal, state_dir, wait_devices,
                                     wait_listening)

ROOT = Path(__file__).resolve().parents[2]
#: one worker runs the whole module (make test: --dist loadgroup): the wheel is built and installed once
# The package is built (and installed) once: a session fixture, in the one worker that runs this
# file (make test: --dist loadfile). A module fixture is built again each time a worker comes back
# to this module from another one's test (pytest tears module fixtures down between modules).
pytestmark = pytest.mark.xdist_group("wheel")
RUNTIME_LOCK = ROOT / "requirements" / "runtime.txt"


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    cwd: Path  # a folder outside the checkout, the commands' current directory

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    @property
    def env(self) -> dict[str, str]:
        """The environment of a user's shell: nothing says where the checkout or the test's venv is."""
        keep = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        return {**keep, "PATH": f"{self.venv / 'bin'}:/usr/bin:/bin"}

    def run(self, *command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(command), cwd=self.cwd, env=self.env, capture_output=True, text=True,
                              timeout=timeout)


def _pip(python: Path, *args: str) -> None:
    done = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"pip {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-3000:]}"


@pytest.fixture(scope="session")  # once a worker: see above
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, str(ROOT / "packaging" / "build_wheel.py"), str(base / "dist")],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = Path(built.stdout.strip())
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    _pip(python, "install", "--quiet", "--require-hashes", "-r", str(RUNTIME_LOCK))
    _pip(python, "install", "--quiet", "--no-deps", str(wheel))
    _pip(python, "check")
    cwd = base / "elsewhere"
    cwd.mkdir()
    return Installed(wheel, venv, cwd)


def test_the_wheel_holds_the_rules_and_the_scenario_library(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for folder in (RULES_DIR, LIBRARY):
        shipped = {f"{path.relative_to(ROOT).as_posix()}" for path in folder.rglob("*.toml")}
        assert shipped and shipped <= names, f"left out of the wheel: {sorted(shipped - names)}"


def test_the_wheel_holds_the_floor_s_migrations_and_pages(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    shipped = {path.relative_to(ROOT).as_posix() for folder in ("migrations", "web")
               for path in (ROOT / "cardd" / "floor" / folder).iterdir() if path.is_file()}
    assert {"cardd/floor/web/login.html", "cardd/floor/migrations/0002_audit.sql"} <= shipped
    assert shipped <= names, f"left out of the wheel: {sorted(shipped - names)}"


def test_the_installed_commands_import_cardd_from_the_venv_not_the_checkout(installed: Installed) -> None:
    probe = "import cardd, core, devices; print(cardd.__file__); print(core.__file__)"
    done = installed.run(installed.bin("python"), "-c", probe)
    assert done.returncode == 0, done.stderr
    for line in done.stdout.split():
        assert Path(line).is_relative_to(installed.venv), done.stdout
    assert not installed.cwd.is_relative_to(ROOT)


@pytest.fixture
def simulated(installed: Installed) -> Iterator[Path]:
    """The installed ``cardd --simulate`` running, its state (journal, socket) in a fresh folder."""
    directory = state_dir()  # a socket path under 108 bytes
    with (directory / "cardd.out").open("w") as out, (directory / "cardd.log").open("w") as err:
        proc = subprocess.Popen([installed.bin("cardd"), "--simulate", "--state-dir", str(directory),
                                 "--stop-with-parent", str(os.getpid())], cwd=installed.cwd, env=installed.env,
                                stdout=out, stderr=err)
    try:
        _wait_listening(proc, directory)
        yield directory
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        log = (directory / "cardd.log").read_text(errors="replace")
        remove(directory)
        assert code == 0, log[-3000:]


def _wait_listening(proc: subprocess.Popen[bytes], directory: Path, timeout: float = 30.0) -> None:
    """Until cardd's socket takes a connection; its log when it exits first."""
    def ended() -> str | None:
        if proc.poll() is None:
            return None
        return f"cardd exited with {proc.returncode}: {(directory / 'cardd.log').read_text(errors='replace')[-3000:]}"
    wait_listening(directory / "cardd.sock", ended, timeout)


def test_the_installed_cardd_simulate_deals_and_cardctl_answers_it(installed: Installed, simulated: Path) -> None:
    client = Client(simulated / "cardd.sock")
    try:
        wait_devices(client)
        state = shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), sim_deal(client))
        assert state["rules"] == "casino-000" and state["shoe"]["cards_out"] >= 1, state
    finally:
        client.close()
    status = installed.run(installed.bin("cardctl"), "--socket", str(simulated / "cardd.sock"), "status")
    assert status.returncode == 0, status.stderr
    assert "rules casino-000" in status.stdout, status.stdout


def test_the_installed_cardbench_runs_a_library_scenario_by_name(installed: Installed) -> None:
    done = installed.run(installed.bin("cardbench"), "run", "casino-001/clean-round")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 0 failed" in done.stderr, done.stderr
    assert str(installed.venv) in done.stderr  # the scenario is the installed package's file


def test_the_installed_cardbench_names_the_library_when_a_scenario_is_not_in_it(installed: Installed) -> None:
    done = installed.run(installed.bin("cardbench"), "run", "casino-009")
    assert done.returncode == 2, done.stdout + done.stderr
    assert ("casino-009: no such file or folder, nor a scenario of the library (a casino: casino-000, "
            "casino-001, casino-002, casino-003, casino-004;") in " ".join(done.stderr.split()), done.stderr
