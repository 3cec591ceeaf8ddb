"""cardbench's own options, as cardctl's: -h (as --help) and --version."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CARDBENCH = str(Path(sys.executable).with_name("cardbench"))


def test_help_and_version() -> None:
    for option in ("-h", "--help"):
        done = subprocess.run([CARDBENCH, option], capture_output=True, text=True)
        assert done.returncode == 0 and done.stdout.startswith("Usage: cardbench") and "simulate" in done.stdout
    done = subprocess.run([CARDBENCH, "simulate", "-h"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("Usage: cardbench simulate")
    done = subprocess.run([CARDBENCH, "--version"], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "cardbench, version 0.1.0\n")
