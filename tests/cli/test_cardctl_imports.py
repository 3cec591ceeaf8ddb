"""What cardctl imports: a subcommand's module only when that subcommand runs (cardd.cli.program's
lazy group), and nothing of the daemon, the simulators, the tracker or cryptography for a command
that only asks the daemon. Each run is the real cardctl entry point in its own process, against
the real ``cardd --simulate``; the modules it loaded are written when it exits."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.daemon.daemon_rig import Daemon

#: what a command that only reads the daemon's STATE has no use for
NOT_FOR_A_DAEMON_CLIENT = ("cardd.daemon", "cardd.journal", "simulators", "devices.tracker", "devices.models",
                           "cryptography", "firmware_bridge", "drivers")
#: the modules of cardctl's subcommands (cardd.cli.program's SUBCOMMANDS)
SUBCOMMAND_MODULES = ("cardd.cli.table", "cardd.cli.journal", "cardd.cli.device", "cardd.cli.firmware",
                      "cardd.cli.trace", "cardd.cli.watch", "cardd.cli.sim")
#: run cardctl's entry point; at exit, write the names of the loaded modules to argv[1]
RUNNER = """
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv[0] = "cardctl"
from cardd.cli.main import main
main()
"""


def loaded_by(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    modules = tmp_path / "modules.json"
    done = subprocess.run([sys.executable, "-c", RUNNER, str(modules), *args], capture_output=True, text=True,
                          timeout=60)
    return done, json.loads(modules.read_text())


def under(modules: list[str], packages: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in packages)]


def test_status_loads_nothing_of_the_daemon_the_simulators_the_tracker_or_cryptography(daemon: Daemon,
                                                                                          tmp_path: Path) -> None:
    done, modules = loaded_by(tmp_path, "--socket", str(daemon.socket_path), "status")
    assert done.returncode == 0 and "shoe:" in done.stdout, done.stderr
    assert "cardd.cli.table" in modules and "rich.table" in modules  # it did show the view
    assert under(modules, NOT_FOR_A_DAEMON_CLIENT) == []
    assert under(modules, SUBCOMMAND_MODULES) == ["cardd.cli.table"]


def test_status_as_json_loads_no_more(daemon: Daemon, tmp_path: Path) -> None:
    done, modules = loaded_by(tmp_path, "--socket", str(daemon.socket_path), "status", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["state"]["devices"], done.stderr
    assert under(modules, NOT_FOR_A_DAEMON_CLIENT) == []


@pytest.mark.parametrize("args", [("--version",), ("--help",)])
def test_the_program_alone_loads_no_subcommand(tmp_path: Path, args: tuple[str, ...]) -> None:
    done, modules = loaded_by(tmp_path, *args)
    assert done.returncode == 0 and done.stdout, done.stderr
    assert under(modules, SUBCOMMAND_MODULES + NOT_FOR_A_DAEMON_CLIENT) == []
    assert under(modules, ("rich", "structlog", "msgspec", "cardd.api.client")) == []


def test_a_command_that_opens_a_device_has_the_simulators_scheme(tmp_path: Path) -> None:
    """``probe sim://...`` parses (the simulators are imported by the commands that open a device):
    a simulated device that is not there is a BadURL naming the simulators' devices, a usage error."""
    done, modules = loaded_by(tmp_path, "probe", "sim://dealer")
    assert done.returncode == 2 and "no simulated device 'dealer'" in done.stderr, done.stderr
    assert "simulators" in modules
