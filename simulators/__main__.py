"""Run a simulated device by hand: ``python -m simulators shoe --pty``.

Prints the path to open (``serial://PATH`` for cardd) and serves until SIGINT or SIGTERM.
SIGUSR1 makes a shoe deal every card it holds as fast as its link allows (benchmarks/link.py).
See docs/simulators.md for every option and fault switch.
"""
from __future__ import annotations

import argparse
import math
import os
import signal
import sys
from pathlib import Path
from typing import Sequence

import structlog

from core.cards import Card, CardCodeError
from core.files import output_directory_problem, read_problem
from firmware_bridge.errors import FirmwareError
from firmware_bridge.firmware import load_public_key

from simulators.device import check_serial
from simulators.faults import Faults, FaultSpecError
from simulators.protocol2 import Protocol2
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import MAX_CARDS, SimulatedShoe, check_cut
from simulators.shuffler import SimulatedShuffler
from simulators.stack import fisher_yates, full_shoe


class StackSpecError(ValueError):
    """A ``--stack`` that is neither a readable file of card codes nor a list of card codes."""


def parse_stack(text: str) -> list[Card]:
    """Cards from ``AS,KD,7H`` or from a file of card codes (separated by commas or spaces).

    A bad entry is one :class:`StackSpecError` naming the file (or the argument) and the
    entry's position, so a typo in a 312-card file is found at once."""
    source = "--stack"
    if os.path.isfile(text):
        source = f"--stack file {text}"
        try:
            with open(text, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise StackSpecError(f"{source}: cannot read it: {exc}") from None
    elif os.sep in text or text.endswith(".txt"):
        raise StackSpecError(f"--stack {text!r}: no such file (give a file of card codes, or codes like AS,KD,7H)")
    codes = text.replace(",", " ").split()
    if not codes:
        raise StackSpecError(f"{source}: no card codes in it")
    cards = []
    for position, code in enumerate(codes, 1):
        try:
            cards.append(Card.parse(code))
        except CardCodeError as exc:
            raise StackSpecError(f"{source}: card {position} of {len(codes)}: {exc}") from None
    return cards


def _at_least(low: float, kind: type = float):
    """An argparse type: a number of ``kind`` that is ``low`` or more."""
    words = "a whole number" if kind is int else "a number"

    def convert(raw: str) -> float:
        try:
            value = kind(raw)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value >= low):
            raise argparse.ArgumentTypeError(f"{raw!r}: expected {words}, {low:g} or more")
        return value
    convert.__name__ = words  # argparse names the type by this in its own messages
    return convert


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
    parser.add_argument("--decks", type=_at_least(0, int), default=0, help="shoe: load this many shuffled decks at start")
    parser.add_argument("--cut-at", type=_at_least(1, int), help="shoe: cut card after this card")
    parser.add_argument("--pace", type=_at_least(0.0), help="shoe: seconds between cards once loaded (default: on demand)")
    parser.add_argument("--shuffle-time", type=_at_least(0.0), default=3.0, help="shuffler: seconds a shuffle takes")
    parser.add_argument("--heartbeat", type=_at_least(0.0), default=1.0, help="seconds between heartbeats (0: none)")
    parser.add_argument("--firmware-key", metavar="FILE",
                        help="the Ed25519 public key (32 raw bytes or PEM) whose signed images the device accepts "
                             "(cardctl firmware flash); without it every firmware update is refused")
    parser.add_argument("--protocol", choices=["1.1", "2.0"], default="1.1",
                        help="the protocol the device speaks (2.0: enrolled with no host, so any host that proves "
                             "its key gets a session, but no firmware or technician command)")
    return parser


def parse_options(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, Faults, list[Card] | None]:
    """The command line checked in full before anything starts: a bad value is one argparse
    error (exit code 2) that names the option and what it accepts."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        faults = Faults.parse(args.faults)
        faults.check_for(args.device)
        stack = parse_stack(args.stack) if args.stack else None
    except (FaultSpecError, StackSpecError) as exc:
        parser.error(f"--faults: {exc}" if isinstance(exc, FaultSpecError) else str(exc))
    if args.device == "shuffler" and (args.decks or args.cut_at is not None or args.pace is not None):
        parser.error("--decks, --cut-at and --pace are shoe options; a shuffler takes --stack and --shuffle-time")
    if args.device == "shoe" and stack is not None and args.decks:
        parser.error("give the shoe --stack or --decks, not both")
    cards = max(len(stack or ()), args.decks * 52) if args.device == "shoe" else 0
    if cards > MAX_CARDS:
        parser.error(f"a shoe holds at most {MAX_CARDS} cards ({MAX_CARDS // 52} decks): CardRead.index is 16 bits")
    try:
        check_cut(args.cut_at, cards)
    except ValueError as exc:
        parser.error(f"--cut-at {args.cut_at}: {exc}")
    if args.serial is not None:
        try:
            check_serial(args.serial)
        except ValueError as exc:
            parser.error(f"--serial: {exc}")
    args.firmware_public_key = None
    if args.firmware_key is not None:
        try:
            with open(args.firmware_key, "rb") as key_file:
                args.firmware_public_key = load_public_key(key_file.read())
        except OSError as exc:
            parser.error(f"--firmware-key {read_problem(Path(args.firmware_key), exc)}")
        except FirmwareError as exc:
            parser.error(f"--firmware-key {args.firmware_key}: {exc}")
    link_problem = output_directory_problem(Path(args.link)) if args.link else None
    if link_problem is not None:
        parser.error(f"--link {link_problem}")
    return args, faults, stack


def main(argv: Sequence[str] | None = None) -> int:
    args, faults, stack = parse_options(argv)
    # stdout carries only the path, for scripts: logs go to stderr
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    common = {"faults": faults, "heartbeat_s": args.heartbeat, "firmware_public_key": args.firmware_public_key}
    if args.serial is not None:
        common["serial"] = args.serial
    device: SimulatedShuffler | SimulatedShoe
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
    try:
        protocol2 = Protocol2() if args.protocol == "2.0" else None
        endpoint = PtyEndpoint(device, link=args.link, protocol2=protocol2).start()
    except RuntimeError as exc:  # e.g. --link in a directory we may not write
        print(f"python -m simulators: error: {exc}", file=sys.stderr, flush=True)
        return 1
    try:
        if isinstance(device, SimulatedShoe) and stack:
            endpoint.call(device.load, stack, args.cut_at)
        print(endpoint.path, flush=True)
        print(f"{device.MODEL} {device.serial} on {endpoint.tty}; open serial://{endpoint.path}; "
              f"protocol {args.protocol}; faults: {faults.active() or 'none'}; Ctrl-C to stop", file=sys.stderr, flush=True)
        while signal.sigwait(handled) not in stop_signals:
            if isinstance(device, SimulatedShoe):  # SIGUSR1: the dealer draws every card left, on demand
                shoe = device
                endpoint.call(lambda: shoe.deal(shoe.cards_held()))
    finally:
        endpoint.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
