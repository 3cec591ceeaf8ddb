"""The round's state machine: its definition, the ``transitions`` Machine that declares it (drawn
from that Machine in docs/state-machines.md), and the transition table :data:`NEXT` every round
runs on (why a table: docs/architecture.md, "State machines as tables")."""
from __future__ import annotations

from typing import Any

from transitions import Machine

from devices.machine_table import TransitionTable, next_state as next_in, transition_table

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

# The declaration: no model, no callbacks, no conditions (the table below relies on that).
MACHINE = Machine(model=[], states=ROUND_STATES, transitions=ROUND_TRANSITIONS, initial="betting",
                  auto_transitions=False)
INITIAL: str = MACHINE.initial  # type: ignore[assignment]


NEXT: TransitionTable = transition_table(MACHINE)
_LIVE = frozenset(LIVE_STATES)


def next_state(state: str, trigger: str) -> str:
    """Where ``trigger`` takes a round in ``state``; MachineError (as the Machine raises it) if nowhere."""
    return next_in(NEXT, state, trigger)


def is_live(state: str) -> bool:
    return state in _LIVE


def triggers_from(state: str) -> list[str]:
    """The triggers a round in ``state`` may fire (the Machine's ``get_triggers``)."""
    return [trigger for trigger, sources in NEXT.items() if state in sources]
