"""Mermaid diagrams of every state machine, read from the live `transitions` machines.

    python -m devices.diagrams --write docs/state-machines.md   # regenerate
    python -m devices.diagrams --check docs/state-machines.md   # exit 1 when stale (CI)

Nothing here restates a state or a transition: each machine is the product's own (built by
the same code, or the round's shared one), so a diagram cannot drift from the behaviour.
"""
from __future__ import annotations

import argparse
import difflib
import sys
from collections import defaultdict
from pathlib import Path
from typing import Callable

from transitions import Machine

HEADER = """# State machines

Generated from the live `transitions` definitions by `make diagrams`
(`python -m devices.diagrams --write docs/state-machines.md`); `make check-diagrams` and
the tests fail when this file is stale. Do not edit by hand.
"""


def mermaid(machine: Machine) -> str:
    """A ``stateDiagram-v2`` of ``machine``: every state and every trigger, edges merged."""
    labels: dict[tuple[str, str], list[str]] = defaultdict(list)
    for name, event in machine.events.items():
        for source, transitions in event.transitions.items():
            for t in transitions:
                labels[(source, t.dest or source)].append(name)
    lines = ["stateDiagram-v2", f"    [*] --> {machine.initial}"]
    linked = {s for edge in labels for s in edge}
    lines += [f"    {s}" for s in machine.states if s not in linked]  # isolated states still show
    for (src, dst), names in labels.items():
        lines.append(f"    {src} --> {dst}: {' / '.join(sorted(set(names)))}")
    return "\n".join(lines) + "\n"


def _null_sink(_event: object) -> None:
    """Diagrams only read the machines' structure; their events go nowhere."""


def _shuffler() -> tuple[Machine, str]:
    from devices.models.shuffler_model import ShufflerModel
    return ShufflerModel(_null_sink).machine, ShufflerModel.__module__


def _shoe_reader() -> tuple[Machine, str]:
    from devices.models.shoe_reader_model import ShoeReaderModel
    return ShoeReaderModel(_null_sink).machine, ShoeReaderModel.__module__


def _shoe() -> tuple[Machine, str]:
    from devices.game.rules import HouseRules
    from devices.tracker.shoe import Shoe
    return Shoe(HouseRules.default(), _null_sink).machine, Shoe.__module__


def _round() -> tuple[Machine, str]:
    from devices.game import round_machine  # the one machine every round runs in
    return round_machine.MACHINE, round_machine.__name__


#: (title, how to get the live machine and the module that defines it)
MACHINES: tuple[tuple[str, Callable[[], tuple[Machine, str]]], ...] = (
    ("Shuffler", _shuffler),
    ("Shoe reader", _shoe_reader),
    ("Shoe life", _shoe),
    ("Round", _round),
)


def render() -> str:
    parts = [HEADER]
    for title, build in MACHINES:
        machine, module = build()
        where = module.replace(".", "/") + ".py"
        parts.append(f"\n## {title} (`{where}`)\n\n```mermaid\n{mermaid(machine)}```\n")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m devices.diagrams", description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="PATH", type=Path, help="write the diagrams to PATH")
    mode.add_argument("--check", metavar="PATH", type=Path, help="exit 1 when PATH differs from the live machines")
    args = ap.parse_args(argv)
    text = render()
    if args.write:
        args.write.write_text(text, encoding="utf-8")
        return 0
    current = args.check.read_text(encoding="utf-8") if args.check.exists() else ""
    if current == text:
        return 0
    diff = "".join(difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                        str(args.check), "live machines", n=1))
    sys.stderr.write(f"{args.check} is stale (the state machines changed): run `make diagrams` and commit it.\n"
                     f"{diff[:4000]}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
