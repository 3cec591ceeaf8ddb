"""How many rounds per second ``cardbench simulate`` plays (a benchmark, not a test).

The rounds go through the real deal tracker (Table.apply: device messages, bets, decisions,
the round's rules, events and settlement; each shoe reconciled), exactly as ``cardbench simulate``
plays them, each round's JSON line built and written to /dev/null (``--no-rounds``: not built).
``--jobs N`` deals the shoes in N processes as ``cardbench simulate --jobs`` does (default: the
CPUs available). The target: 1,000,000 rounds, 1 box, basic strategy, under 60 s
(>= 16,000 rounds/s, in-process); ``--transport pty`` records the full stack's rounds per second.
Prints wall time, the CPU time of this process and its workers, and the load average, because
the machine is shared and wall time alone says little.

    .venv/bin/python benchmarks/bench_simulate.py [--rounds 1000000] [--boxes 1] [--strategy basic]
        [--jobs N] [--no-rounds] [--transport pty]
"""
from __future__ import annotations

import argparse
import logging
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import structlog  # noqa: E402

from cardd.bench.pty_transport import simulation_for  # noqa: E402
from cardd.bench.simulate import default_jobs, play, rules_for, run_jobs  # noqa: E402
from cardd.bench.strategy import STRATEGIES  # noqa: E402
from devices.game.rules import HouseRules  # noqa: E402

TARGET = 16_000


def cpu_seconds() -> float:
    """User + system CPU of this process and of its children that ended (the workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1_000_000)
    ap.add_argument("--decks", type=int, default=6)
    ap.add_argument("--boxes", type=int, default=1)
    ap.add_argument("--strategy", choices=sorted(STRATEGIES), default="basic")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=None, help="processes (in-process transport; default: the CPUs)")
    ap.add_argument("--no-rounds", action="store_true", help="do not build the JSON lines")
    ap.add_argument("--transport", choices=("inprocess", "pty"), default="inprocess",
                    help="pty: the simulators behind ptys and the library's feed")
    args = ap.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    rules = rules_for(HouseRules.default(), args.decks, args.boxes)
    jobs = 1 if args.transport == "pty" else args.jobs or default_jobs()
    sink = open(os.devnull, "w")

    def write(line: str) -> None:
        sink.write(line + "\n")

    load_before = os.getloadavg()[0]
    start, cpu_start = time.perf_counter(), cpu_seconds()
    strategy = STRATEGIES[args.strategy]()
    if args.transport == "pty":
        simulation = simulation_for(args.transport, rules, args.boxes, strategy, args.seed)
        summary = play(simulation, args.rounds,
                       (lambda result: None) if args.no_rounds else (lambda result: write(result.json_line())))
    else:
        summary = run_jobs(rules, args.rounds, args.boxes, strategy, args.seed, jobs, None if args.no_rounds else write)
    elapsed, cpu = time.perf_counter() - start, cpu_seconds() - cpu_start
    rate = args.rounds / elapsed
    interval = summary.edge_interval()
    print(f"simulate benchmark: {args.rounds:,} rounds, {args.decks} decks, {args.boxes} box(es), "
          f"strategy {args.strategy}, transport {args.transport}, {jobs} job(s), "
          f"{'no JSON lines' if args.no_rounds else 'JSON lines written to /dev/null'}")
    verdict = f" (target >= {TARGET:,}: {'met' if rate >= TARGET else 'NOT met'})" if args.transport == "inprocess" else ""
    print(f"  {elapsed:.1f} s, {rate:,.0f} rounds/s{verdict}")
    print(f"  CPU {cpu:.1f} s ({1e6 * cpu / args.rounds:.1f} us per round, {args.rounds / cpu:,.0f} rounds per CPU second); "
          f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    quoted = "too few rounds for an interval" if interval is None else \
        f"95 % interval {100 * interval[0]:.3f} % .. {100 * interval[1]:.3f} %"
    print(f"  house edge {100 * summary.house_edge:.3f} % ({quoted})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
