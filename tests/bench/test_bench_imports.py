"""What loading the bench's scenarios imports: the daemon's command table words refusals with
``one_line`` (cardd.api.errors), and once imported the asyncio API server for it alone."""
from __future__ import annotations

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
