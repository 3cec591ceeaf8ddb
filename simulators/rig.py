"""A simulated table: a shuffler and a shoe, each behind its own endpoint, and the dealer's hands
between them. The shuffled stack goes from shuffler to shoe physically (:meth:`hand_off`),
never over a host link: the host learns each card only when the shoe reads it.

    table = SimulatedTable.over_ptys(shuffle_time_s=2.0, pace_s=0.2)
    with table:
        ...  # host opens table.shuffler.url and table.shoe.url, sends StartShuffle(6)
        table.hand_off()  # once DeckCheckResult arrived: the stack goes into the shoe
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from simulators.endpoint import Endpoint
from simulators.faults import Faults
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler
from simulators.stack import StackCard

#: the dealer puts the cut card about a third from the back (the seeds' house rules)
DEFAULT_PENETRATION = 2 / 3


def cut_card_at(cards: int, penetration: float, cut_at: int | None = None) -> int:
    """After which card of a stack of ``cards`` the cut card goes: ``cut_at`` when given, else at
    ``penetration`` of the stack (at least after the first card)."""
    return cut_at if cut_at is not None else max(1, int(cards * penetration))


class SimulatedTable:
    def __init__(self, shuffler: Endpoint[SimulatedShuffler], shoe: Endpoint[SimulatedShoe]) -> None:
        self.shuffler = shuffler
        self.shoe = shoe

    @classmethod
    def over_ptys(cls, *, shuffle_time_s: float = 0.0, pace_s: float | None = None,
                  shuffler_faults: Faults | None = None, shoe_faults: Faults | None = None,
                  directory: str | os.PathLike[str] | None = None, **device_kwargs: Any) -> "SimulatedTable":
        """A shuffler and a shoe, each on its own pseudo-terminal (not started yet); their paths in
        ``directory`` (``shuffler``, ``shoe``) when given, else each in a private temp dir."""
        return cls(
            PtyEndpoint(SimulatedShuffler(shuffle_time_s=shuffle_time_s, faults=shuffler_faults, **device_kwargs),
                        directory=directory),
            PtyEndpoint(SimulatedShoe(pace_s=pace_s, faults=shoe_faults, **device_kwargs), directory=directory),
        )

    def start(self) -> "SimulatedTable":
        self.shuffler.start()
        try:
            self.shoe.start()
        except BaseException:
            self.shuffler.stop()
            raise
        return self

    def stop(self) -> None:
        self.shoe.stop()
        self.shuffler.stop()

    def __enter__(self) -> "SimulatedTable":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def hand_off(self, penetration: float = DEFAULT_PENETRATION, cut_at: int | None = None) -> int:
        """Move the shuffled stack from the shuffler into the shoe, with the cut card after
        card ``cut_at`` (default: ``penetration`` of the stack). Returns the number of cards."""
        stack = self.shuffler.call(self.shuffler.device.unload)
        if not stack:
            raise RuntimeError("the shuffler holds no shuffled stack: shuffle first")
        return self.load_shoe(stack, penetration, cut_at)

    def load_shoe(self, stack: Sequence[StackCard], penetration: float = DEFAULT_PENETRATION, cut_at: int | None = None) -> int:
        """``stack`` into the shoe, the cut card after card ``cut_at`` (default: ``penetration`` of
        the stack): the shuffler's (:meth:`hand_off`) or a dealer's hand shuffle. Returns the number of cards."""
        self.shoe.call(self.shoe.device.load, stack, cut_card_at(len(stack), penetration, cut_at))
        return len(stack)

    def state(self) -> dict[str, Any]:
        return {"shuffler": self.shuffler.state(), "shoe": self.shoe.state()}

    def reset(self) -> None:
        self.shuffler.reset()
        self.shoe.reset()
