"""What loading the bench's scenarios imports: the daemon's command table words refusals with
``one_line`` (cardd.api.errors), and once imported the asyncio API server for it alone; and what
the bench's record and replay import of cardctl (none of its commands: the trace format is below both)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("module", ["cardd.bench.scenario", "cardd.daemon.commands"])
def test_loading_scenarios_does_not_import_the_api_server(module: str) -> None:
    probe = f"import sys, {module}; print('cardd.api.server' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False", f"{module} imports cardd.api.server"


def test_the_server_still_offers_one_line() -> None:
    from cardd.api.errors import one_line as shared
    from cardd.api.server import one_line
    assert one_line is shared and one_line("a\n  b") == "a b"


@pytest.mark.parametrize("module", ["cardd.bench.replay", "cardd.trace.format", "cardd.trace.device"])
def test_the_trace_format_and_the_replay_import_no_cardctl_command(module: str) -> None:
    """The trace format is below both programs: the bench reads and writes it without cardctl's commands."""
    probe = f"import json, sys, {module}; print(json.dumps([m for m in sys.modules if m.startswith('cardd.cli.')]))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    commands = {"cardd.cli.trace", "cardd.cli.device", "cardd.cli.table", "cardd.cli.program"}
    assert not loaded & commands, f"{module} imports {sorted(loaded & commands)}"
