"""How fast cardctl starts: a benchmark (prints figures), not a test.

    .venv/bin/python benchmarks/cli.py [--runs 20]

Starts the real ``cardd --simulate`` (its simulated devices behind ptys, a journal in a new
directory) and prints:

- the wall time of ``cardctl --version`` and of ``cardctl status`` against that daemon (the whole
  process: interpreter start, imports, the API round trip, the view), the median of ``--runs``
  runs each, with their targets;
- what each subcommand imports, from ``python -X importtime``: ``cardctl NAME --help`` imports
  the subcommand's module as a run of it does (cardctl imports a subcommand's module only when
  it is used), and ``--version`` and ``status`` as they run; the total and the modules cardctl
  imports that took longest, each with its imports (cumulative).

The machine's load moves wall times a lot (2 cores shared): compare figures of one run.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _procs import stop_process  # noqa: E402

BIN = Path(sys.executable).parent
CARDD, CARDCTL = BIN / "cardd", BIN / "cardctl"
VERSION_TARGET_MS = 100.0
STATUS_TARGET_MS = 200.0
#: a subcommand of each module cardctl loads on demand (cardd.cli.program's SUBCOMMANDS), and the groups
SUBCOMMANDS = ("status", "round", "log", "devices", "firmware", "capture", "watch")
TOP = 5
START_TIMEOUT_S = 60.0
#: ``import time: self | cumulative | <two spaces a level>name``, in microseconds
IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$")


def wall_ms(args: list[str], env: dict[str, str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run([str(CARDCTL), *args], env=env, capture_output=True, text=True, timeout=60)
        times.append((time.perf_counter() - start) * 1000)
        if done.returncode != 0:
            raise SystemExit(f"cardctl {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return times


def import_times(args: list[str], env: dict[str, str]) -> tuple[float, list[tuple[str, float]]]:
    """The import time (ms) of ``cardctl ARGS`` past Python's own start (``site``) and the slowest
    modules it imports: those cardctl's modules import themselves (the second level of
    ``-X importtime``'s tree, under cardctl's modules and the subcommand's), each with its imports."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "cardd.cli.main", *args], env=env,
                          capture_output=True, text=True, timeout=60)
    total = 0.0
    below: dict[int, list[tuple[str, float]]] = {}  # importtime writes a module after what it imported
    top: list[tuple[str, float]] = []
    for line in done.stderr.splitlines():
        match = IMPORT_LINE.match(line)
        if match is None:
            continue
        level, name, cumulative = (len(match[3]) - 1) // 2, match[4], int(match[2]) / 1000
        children = below.pop(level + 1, [])
        below.setdefault(level, []).append((name, cumulative))
        if level == 0 and name not in ("site", "encodings"):
            total += cumulative
            top += children if name.startswith(("cardd", "core")) else [(name, cumulative)]
    return total, sorted(top, key=lambda item: -item[1])[:TOP]


def start_daemon(directory: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([str(CARDD), "--simulate", "--state-dir", str(directory)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, text=True)
    socket = directory / "cardd.sock"
    deadline = time.monotonic() + START_TIMEOUT_S
    env = {**os.environ, "CARDD_SOCKET": str(socket)}
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"cardd --simulate exited {proc.returncode} before it served")
        if socket.exists() and subprocess.run([str(CARDCTL), "status", "--json"], env=env, capture_output=True,
                                              timeout=60).returncode == 0:
            return proc
        time.sleep(0.2)
    stop_process(proc)
    raise SystemExit(f"cardd --simulate did not answer within {START_TIMEOUT_S:.0f} s")


def line(what: str, times: list[float], target: float) -> str:
    median = statistics.median(times)
    verdict = "within" if median <= target else "OVER"
    return (f"{what}: median {median:.0f} ms of {len(times)} runs (min {min(times):.0f}, max {max(times):.0f}); "
            f"target {target:.0f} ms: {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each command timed (the median is printed)")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="cardd-bench-cli-"))
    env = {**os.environ, "CARDD_SOCKET": str(directory / "cardd.sock")}
    proc = start_daemon(directory)
    try:
        print(f"cardctl start-up ({os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}):")
        print("  " + line("cardctl --version", wall_ms(["--version"], env, args.runs), VERSION_TARGET_MS))
        print("  " + line("cardctl status (a running cardd --simulate)", wall_ms(["status"], env, args.runs),
                          STATUS_TARGET_MS))
        print("imports (python -X importtime, ms, cumulative):")
        for what in (["--version"], ["status"], *([name, "--help"] for name in SUBCOMMANDS)):
            total, top = import_times(what, env)
            slowest = ", ".join(f"{name} {ms:.0f}" for name, ms in top)
            print(f"  cardctl {' '.join(what)}: {total:.0f} ms; slowest: {slowest}")
    finally:
        stop_process(proc)
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
