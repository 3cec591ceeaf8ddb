"""Run a simulated device by hand: ``python -m simulators shoe --pty``.

Prints the path to open (``serial://PATH`` for cardd) and serves until SIGINT or SIGTERM.
SIGUSR1 makes a shoe deal every card it holds as fast as its link allows (benchmarks/link.py).
See docs/simulators.md for every option and fault switch.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Sequence

import structlog

from firmware_bridge.cards import Card, CardCodeError

from simulators.faults import Faults, FaultSpecError
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler
from simulators.stack import fisher_yates, full_shoe


def parse_stack(text: str) -> list[Card]:
    """Cards from ``AS,KD,7H`` or from a file of card codes (separated by commas or spaces)."""
    if os.path.isfile(text):
        with open(text, encoding="utf-8") as handle:
            text = handle.read()
    return [Card.parse(code) for code in text.replace(",", " ").split()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m simulators", description=__doc__.split("\n")[0])
    parser.add_argument("device", choices=["shoe", "shuffler"])
    parser.add_argument("--pty", action="store_true", required=True,
                        help="serve on a pseudo-terminal (the only standalone transport)")
    parser.add_argument("--link", help="also make this path a symlink to the pty (e.g. /dev/cardd/shoe-SIM1)")
    parser.add_argument("--serial", help="serial number the device reports")
    parser.add_argument("--faults", default="", help='fault switches, e.g. "jam=2 missing=AS,7H bit_flip_rate=0.01"')
    parser.add_argument("--stack", help="card order (codes or a file): the shuffler's stacked mode, "
                                        "or the cards loaded into the shoe at start")
    parser.add_argument("--decks", type=int, default=0, help="shoe: load this many shuffled decks at start")
    parser.add_argument("--cut-at", type=int, help="shoe: cut card after this card")
    parser.add_argument("--pace", type=float, help="shoe: seconds between cards once loaded (default: on demand)")
    parser.add_argument("--shuffle-time", type=float, default=3.0, help="shuffler: seconds a shuffle takes")
    parser.add_argument("--heartbeat", type=float, default=1.0, help="seconds between heartbeats (0: none)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # stdout carries only the path, for scripts: logs go to stderr
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    try:
        faults = Faults.parse(args.faults)
        stack = parse_stack(args.stack) if args.stack else None
    except (FaultSpecError, CardCodeError, OSError) as exc:
        parser.error(str(exc))
    common = {"faults": faults, "heartbeat_s": args.heartbeat}
    if args.serial:
        common["serial"] = args.serial
    if args.device == "shuffler":
        device = SimulatedShuffler(shuffle_time_s=args.shuffle_time, **common)
        device.stack(stack)
    else:
        device = SimulatedShoe(pace_s=args.pace, **common)
        if stack is None and args.decks:
            stack = fisher_yates(full_shoe(args.decks))

    stop_signals = {signal.SIGINT, signal.SIGTERM}
    handled = stop_signals | {signal.SIGUSR1}
    signal.pthread_sigmask(signal.SIG_BLOCK, handled)  # the device's thread inherits the mask
    endpoint = PtyEndpoint(device, link=args.link).start()
    try:
        if args.device == "shoe" and stack:
            endpoint.call(device.load, stack, args.cut_at)
        print(endpoint.path, flush=True)
        print(f"{device.MODEL} {device.serial} on {endpoint.tty}; open serial://{endpoint.path}; "
              f"faults: {faults.active() or 'none'}; Ctrl-C to stop", file=sys.stderr, flush=True)
        while signal.sigwait(handled) not in stop_signals:
            if args.device == "shoe":  # SIGUSR1: the dealer draws every card left, on demand
                endpoint.call(lambda: device.deal(device.cards_held()))
    finally:
        endpoint.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
