"""The conformance suite's requirements: each check by its id, the section of docs/protocol.md
it holds the device to, the protocols it applies to, and what it asks, in words
(docs/bench.md, "The conformance list", is this table; a test keeps the two the same)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable

if TYPE_CHECKING:
    from cardd.bench.conformance_session import DeviceUnderTest

BOTH = ("1.1", "2.0")
ONLY_1_1 = ("1.1",)
ONLY_2_0 = ("2.0",)

#: a check: raises Failed (with the bytes that show it) or Blocked, or returns a note for the report
Check = Callable[["DeviceUnderTest"], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Requirement:
    id: str
    section: str  # of docs/protocol.md
    title: str
    protocols: tuple[str, ...]
    run: Check


#: every requirement, in the order the suite runs them (the order cardd.bench.conformance imports
#: the modules that define them in)
REQUIREMENTS: dict[str, Requirement] = {}


def requirement(id: str, section: str, title: str, protocols: tuple[str, ...] = BOTH) -> Callable[[Check], Check]:
    def register(run: Check) -> Check:
        if id in REQUIREMENTS:
            raise RuntimeError(f"conformance requirement {id} defined twice")
        REQUIREMENTS[id] = Requirement(id, section, title, protocols, run)
        return run
    return register
