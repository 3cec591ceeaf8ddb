"""The cardctl tests' rig: the real ``cardctl`` console script against the real ``cardd
--simulate`` (tests.daemon.daemon_rig), its output and exit code as a person or script sees them."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.daemon.daemon_rig import Daemon, shuffle_and_load

CARDCTL = Path(sys.executable).with_name("cardctl")


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def one_line_error(self) -> str:
        """stderr, asserted to be exactly one line starting with ``cardctl: ``."""
        lines = self.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("cardctl: "), self.err
        return lines[0]


def cardctl(socket: Path | None, *args: str, timeout: float = 60, prefix: tuple[str, ...] = (),
            cwd: Path | None = None) -> Run:
    command = [*prefix, str(CARDCTL)] + (["--socket", str(socket)] if socket is not None else []) + list(args)
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    return Run(done.returncode, done.stdout, done.stderr)


def device_urls(first_line: str) -> dict[str, str]:
    """The device URLs from ``cardd --simulate``'s first stdout line."""
    parts = dict(part.strip().split(" ", 1) for part in first_line.split(":", 1)[1].split(","))
    return {"shoe": parts["shoe"], "shuffler": parts["shuffler"]}


def start_round(daemon: Daemon) -> None:
    """Shuffle, load and burn through the API; then a round opened and bet through cardctl."""
    client = daemon.client()
    shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), lambda n: client.ok("sim_deal", cards=n))
    client.close()
    sock = daemon.socket_path
    for args in (("round", "open"), ("round", "bet", "1", "alice", "25"), ("round", "bet", "1", "bob", "10"),
                 ("round", "bet", "3", "carol", "10.50"), ("round", "no-more-bets")):
        run = cardctl(sock, *args, "--json")
        assert run.code == 0, (args, run.err)
        assert run.json()["kind"] == "input"
