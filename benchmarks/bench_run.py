"""Wall time of ``cardbench run`` over the whole scenario library (a benchmark, not a test).

Each scenario starts its own cardd and simulated devices, so this is mostly start-up and the
scenarios' own waits; the library's figure is taken with ``--jobs 2`` (docs/performance.md).

    .venv/bin/python benchmarks/bench_run.py [--jobs 2] [--library cardd/bench/scenarios]
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--library", type=Path, default=ROOT / "cardd" / "bench" / "scenarios",
                    help="the scenarios run (a file or a directory; default: the whole library)")
    args = ap.parse_args()
    cardbench = Path(sys.executable).with_name("cardbench")
    library = args.library
    scenarios = len(list(library.rglob("*.toml"))) if library.is_dir() else 1
    load = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run([str(cardbench), "run", str(library), "--jobs", str(args.jobs)],
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    # CPU of cardbench, its simulators and every cardd it started (waited-for children): swings less than
    # the wall time on a shared machine
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"cardbench run: {scenarios} scenarios, --jobs {args.jobs}: {elapsed:.1f} s wall, "
          f"{usage.ru_utime + usage.ru_stime:.1f} s CPU (bench, simulators, daemons), load {load:.1f} at start, "
          f"exit {done.returncode} ({'all passed' if done.returncode == 0 else 'FAILURES'})")
    if done.returncode:
        print(done.stderr[-3000:], file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
