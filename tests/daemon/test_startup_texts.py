"""What a person starting cardd reads: ``cardd --simulate`` names its journal and socket before
any log line and, once it listens, the cardctl command to try (which works as printed); groups
the configuration names but the machine lacks are said once, with the commands that make them."""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

from simulators.rig import SimulatedTable
from tests.daemon.daemon_rig import CARDD, Daemon, state_dir, remove, write_config
from tests.support.groups import this_process

CARDCTL = CARDD.parent / "cardctl"
READY = "cardd --simulate: ready; try: "


def test_simulate_names_journal_and_socket_first_and_the_command_to_try_once_it_listens(directory: Path) -> None:
    # stdout and stderr in one file, in the order they were written, as a terminal shows them
    output = directory / "terminal.txt"
    with output.open("x") as both:
        proc = subprocess.Popen([str(CARDD), "--simulate", "--state-dir", str(directory), "--log-format", "console",
                                 "--stop-with-parent", str(os.getpid())], stdout=both, stderr=both)
    try:
        deadline = time.monotonic() + 30
        while READY not in output.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, output.read_text()[-3000:]
            time.sleep(0.05)
        lines = output.read_text().splitlines()
        assert lines[0].startswith(f"cardd --simulate: journal {directory / 'journal.sqlite3'}, "
                                   f"socket {directory / 'cardd.sock'}, "), lines[:3]
        ready = [line for line in lines if line.startswith(READY)]
        assert len(ready) == 1 and lines.index(ready[0]) > 0, lines
        command = shlex.split(ready[0].removeprefix(READY))
        assert command == ["cardctl", "--socket", str(directory / "cardd.sock"), "status"]
        done = subprocess.run([str(CARDCTL), *command[1:]], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0 and "shoe" in done.stdout, done.stdout + done.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, output.read_text()[-3000:]


def test_missing_groups_are_said_once_with_the_commands_that_create_them() -> None:
    missing = this_process({"api": "cardd-m-api", "supervisor": "cardd-m-super", "technician": "cardd-m-tech"})
    directory = state_dir()
    try:
        with SimulatedTable.over_ptys() as sim:
            roles = {"dealer": "root", "supervisor": missing["supervisor"], "technician": missing["technician"]}
            config = write_config(directory, sim.shoe.url, sim.shuffler.url, roles=roles, api_group=missing["api"])
            daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
            for _ in range(3):  # connections do not repeat it
                client = daemon.client()
                client.state()
                client.close()
            code, log = daemon.stop()
        assert code == 0, log
        said = daemon.log_lines("groups_missing")
        assert len(said) == 1, log
        (line,) = said
        assert line["level"] == "warning"
        assert line["groups"] == [missing["api"], missing["supervisor"], missing["technician"]]
        assert line["create"] == "as root: " + "; ".join(
            f"groupadd --system {missing[key]}" for key in ("api", "supervisor", "technician"))
        assert line["effect"] == (f"the socket keeps the daemon's group ({missing['api']} is the API's); only root "
                                  "and the daemon's own user hold the supervisor and technician roles")
        # and nowhere else in the log
        assert sum(missing["supervisor"] in text for text in log.splitlines()) == 1, log
    finally:
        remove(directory)
