"""Mermaid diagrams of every state machine, read from the live `transitions` machines.

    python -m devices.diagrams --write docs/state-machines.md   # regenerate
    python -m devices.diagrams --check docs/state-machines.md   # exit 1 when stale (CI)

Nothing here restates a state or a transition: each machine is the product's own (built by
the same code, or the round's declared Machine, whose transition table every round runs on), so a
diagram cannot drift from the behaviour.
"""
from __future__ import annotations

import sys
from collections import defaultdict
from typing import Callable

from transitions import Machine

from core.generated import write_or_check

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
    return write_or_check(argv, prog="python -m devices.diagrams", description=(__doc__ or "").splitlines()[0],
                          render=render, source="the live state machines", make_target="diagrams")


if __name__ == "__main__":
    sys.exit(main())
