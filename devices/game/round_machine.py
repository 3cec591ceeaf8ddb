"""The round's state machine: its definition and the one shared ``transitions`` Machine every
round runs in (drawn from that Machine in docs/state-machines.md).

Building a Machine per round cost ~80 us and adding a model ~25 us, more than a round's own
work at the table's target of 50,000 cards/s; so each round borrows a pooled :class:`Phase`
(a model already in the machine) and gives it back when it completes, is voided, or is dropped.
Not thread-safe: all rounds run on the table's single event loop.
"""
from __future__ import annotations

from typing import Any

from transitions import Machine

# Holding is orthogonal to these states: a held round keeps its state and resumes where it was.
ROUND_STATES = ["betting", "initial_deal", "insurance", "players", "dealer", "complete", "void"]
LIVE_STATES = ["betting", "initial_deal", "insurance", "players", "dealer"]
ROUND_TRANSITIONS: list[dict[str, Any]] = [
    {"trigger": "bets_closed", "source": "betting", "dest": "initial_deal"},
    {"trigger": "ace_up", "source": "initial_deal", "dest": "insurance"},
    {"trigger": "players_turn", "source": ["initial_deal", "insurance"], "dest": "players"},
    {"trigger": "dealers_turn", "source": ["initial_deal", "insurance", "players"], "dest": "dealer"},
    {"trigger": "dealer_stands", "source": "dealer", "dest": "complete"},
    {"trigger": "redeal", "source": ["initial_deal", "insurance", "players", "dealer"], "dest": "initial_deal"},
    {"trigger": "voided", "source": LIVE_STATES, "dest": "void"},
]


class Phase:
    """A round's place in the shared machine (the machine's model); pooled and reused."""

    state: str  # set by transitions


# No callbacks: nothing runs inside the machine, so the queued machine executes each trigger at
# once and the round journals the new state itself after the trigger returns.
MACHINE = Machine(model=[], states=ROUND_STATES, transitions=ROUND_TRANSITIONS, initial="betting",
                  auto_transitions=False, queued=True)
_POOL: list[Phase] = []


def take_phase() -> Phase:
    if _POOL:
        phase = _POOL.pop()
        MACHINE.set_state("betting", model=phase)
    else:
        phase = Phase()
        MACHINE.add_model(phase)
    return phase


def return_phase(phase: Phase) -> None:
    """Back to the pool: on completion or void, or when a round dropped while live is collected."""
    _POOL.append(phase)
