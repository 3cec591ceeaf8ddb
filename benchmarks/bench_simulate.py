"""How many rounds per second ``cardbench simulate`` plays in-process (a benchmark, not a test).

The rounds go through the real deal tracker (Table.apply: device messages, bets, decisions,
the round's rules, events and settlement; each shoe reconciled), exactly as ``cardbench simulate``
plays them, with the per-round JSON lines built but not written (``--write`` writes them to
/dev/null as well). The issue's target: 1,000,000 rounds, 1 box, basic strategy, under 60 s
(>= 16,000 rounds/s, in-process); ``--transport pty`` records the full stack's rounds per second.

    .venv/bin/python benchmarks/bench_simulate.py [--rounds 1000000] [--boxes 1] [--strategy basic] [--write]
        [--transport pty]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import structlog  # noqa: E402

from cardd.bench.pty_transport import simulation_for  # noqa: E402
from cardd.bench.simulate import RoundResult, play, rules_for  # noqa: E402
from cardd.bench.strategy import STRATEGIES  # noqa: E402
from devices.game.rules import HouseRules  # noqa: E402

TARGET = 16_000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1_000_000)
    ap.add_argument("--decks", type=int, default=6)
    ap.add_argument("--boxes", type=int, default=1)
    ap.add_argument("--strategy", choices=sorted(STRATEGIES), default="basic")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--write", action="store_true", help="also write each round's JSON line to /dev/null")
    ap.add_argument("--transport", choices=("inprocess", "pty"), default="inprocess",
                    help="pty: the simulators behind ptys and the library's feed")
    args = ap.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    rules = rules_for(HouseRules.default(), args.decks, args.boxes)
    sink = open(os.devnull, "w")

    def write(result: RoundResult) -> None:
        sink.write(json.dumps(result.as_json(), separators=(",", ":")) + "\n")

    start = time.perf_counter()
    simulation = simulation_for(args.transport, rules, args.boxes, STRATEGIES[args.strategy](), args.seed)
    summary = play(simulation, args.rounds, write if args.write else lambda result: None)
    elapsed = time.perf_counter() - start
    rate = args.rounds / elapsed
    low, high = summary.edge_interval()
    print(f"simulate benchmark: {args.rounds:,} rounds, {args.decks} decks, {args.boxes} box(es), "
          f"strategy {args.strategy}, transport {args.transport}{', JSON lines written' if args.write else ''}")
    verdict = f" (target >= {TARGET:,}: {'met' if rate >= TARGET else 'NOT met'})" if args.transport == "inprocess" else ""
    print(f"  {elapsed:.1f} s, {rate:,.0f} rounds/s{verdict}")
    print(f"  house edge {100 * summary.house_edge:.3f} % (95 % interval {100 * low:.3f} % .. {100 * high:.3f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
