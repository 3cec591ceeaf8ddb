"""A ``transitions`` Machine's transitions as a table (trigger -> source -> destination), and models
that run on it: each machine is declared once as a Machine and run on the table read from it
(why: docs/architecture.md, "State machines as tables")."""
from __future__ import annotations

import functools
from typing import Any

from transitions import Machine, MachineError

#: trigger -> source state -> destination state
TransitionTable = dict[str, dict[str, str]]


def transition_table(machine: Machine) -> TransitionTable:
    """The table of ``machine``'s transitions; asserts it has nothing a table cannot hold."""
    for state in machine.states.values():
        assert not (state.on_enter or state.on_exit), f"state {state.name} has callbacks"
    table: TransitionTable = {}
    for name, event in machine.events.items():
        for source, transitions in event.transitions.items():
            (only,) = transitions  # one unconditional transition per trigger and source
            assert only.dest is not None and not (only.conditions or only.prepare or only.before or only.after)
            table.setdefault(name, {})[source] = only.dest
    return table


def next_state(table: TransitionTable, state: str, trigger: str) -> str:
    """Where ``trigger`` takes ``state``; MachineError (as the Machine raises it) if nowhere."""
    sources = table.get(trigger)
    if sources is None:
        raise AttributeError(f"Do not know event named '{trigger}'.")
    dest = sources.get(state)
    if dest is None:
        raise MachineError(f"Can't trigger event {trigger} from state {state}!")
    return dest


class TableDriven:
    """A model whose ``trigger(name)`` and trigger methods (``model.load()``...) run on its Machine's
    table. Like the Machines it replaces (``queued=True``), a trigger fired while a change is being
    reported waits until that change is done; each change calls :meth:`_changed`.

    A subclass builds its Machine (``model=self``: the declaration) and then calls :meth:`_run_on_table`.
    """

    state: str
    _TABLES: dict[type, TransitionTable] = {}  # one table per model class, read from its first Machine

    def _run_on_table(self, machine: Machine) -> None:
        table = TableDriven._TABLES.get(type(self))
        if table is None:
            table = TableDriven._TABLES[type(self)] = transition_table(machine)
        self._table = table
        self._changing = False
        self._queued: list[str] = []
        setattr(self, "trigger", self._fire_trigger)  # replaces what the Machine bound on the model
        for name in table:
            setattr(self, name, functools.partial(self._fire_trigger, name))

    def _fire_trigger(self, trigger: str) -> bool:
        if self._changing:
            self._queued.append(trigger)
            return True
        self._changing = True
        try:
            self._change(trigger)
            while self._queued:
                self._change(self._queued.pop(0))
        finally:
            self._changing = False
            self._queued.clear()
        return True

    def _change(self, trigger: str) -> None:
        src = self.state
        self.state = dst = next_state(self._table, src, trigger)
        self._changed(src, dst, trigger)

    def may(self, trigger: str) -> bool:
        """Whether ``trigger`` is allowed in the current state."""
        return self.state in self._table.get(trigger, ())

    def _changed(self, src: str, dst: str, trigger: str) -> None:
        """After every change (the Machines' ``after_state_change``)."""
        raise NotImplementedError

    def _after_change(self, event: Any) -> None:
        """The Machine's ``after_state_change`` (only if someone fires through ``machine`` itself)."""
        assert event.transition is not None
        self._changed(event.transition.source, self.state, event.event.name)
