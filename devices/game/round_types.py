"""The round's public value types (re-exported by devices.game.round); its errors are in devices.errors."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Action(enum.StrEnum):
    HIT = "hit"
    STAND = "stand"
    DOUBLE = "double"
    SPLIT = "split"
    SURRENDER = "surrender"


@dataclass(frozen=True, slots=True)
class Target:
    """Where a card goes: ``kind`` is "box" (with box number and hand position) or "dealer"."""

    kind: str
    box: int | None = None
    hand: int | None = None
    # what str() gives, built once: every card assigned names its target in an event
    text: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind == "dealer":
            text = "dealer"
        else:
            assert self.hand is not None  # a box target always names its hand
            text = f"box {self.box} hand {self.hand + 1}"
        object.__setattr__(self, "text", text)

    def __str__(self) -> str:
        return self.text


DEALER = Target("dealer")
