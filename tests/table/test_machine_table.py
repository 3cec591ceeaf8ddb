"""The models run on the transition table read from their transitions Machine: the same
transitions, the same refusals, and a trigger fired while a change is reported waits for it
(as the Machines' queued=True did)."""
from __future__ import annotations

import pytest
from transitions import MachineError

from devices.events import Event
from devices.game import round_machine
from devices.game.rules import HouseRules
from devices.machine_table import TransitionTable
from devices.models.device_model import DeviceModel
from devices.models.shoe_reader_model import ShoeReaderModel
from devices.models.shuffler_model import ShufflerModel
from devices.tracker.shoe import Shoe


def _models() -> list[DeviceModel | Shoe]:
    events: list[Event] = []
    return [ShufflerModel(events.append), ShoeReaderModel(events.append), Shoe(HouseRules.default(), events.append)]


@pytest.mark.parametrize("model", _models(), ids=lambda m: type(m).__name__)
def test_the_table_allows_in_each_state_exactly_what_the_machine_allows(model: DeviceModel | Shoe) -> None:
    table: TransitionTable = model._table
    for state in model.machine.states:
        model.state = state
        assert {t for t in table if model.may(t)} == set(model.machine.get_triggers(state)), state
        for trigger, sources in table.items():
            assert sources.get(state) == (model.machine.events[trigger].transitions[state][0].dest
                                          if state in model.machine.events[trigger].transitions else None)


def test_a_trigger_the_state_does_not_allow_is_refused_as_the_machine_refuses_it() -> None:
    shoe = Shoe(HouseRules.default(), lambda event: None)
    with pytest.raises(MachineError, match="Can't trigger event burnt from state idle!"):
        shoe.burnt()
    assert shoe.state == "idle"
    with pytest.raises(MachineError, match="Can't trigger event dealer_stands from state betting!"):
        round_machine.next_state("betting", "dealer_stands")


def test_each_change_is_one_event_naming_its_trigger() -> None:
    events: list[Event] = []
    reader = ShoeReaderModel(events.append)
    reader.connect()
    reader.trigger("identify")
    assert reader.state == "idle"
    assert [(e.data["from"], e.data["to"], e.data["trigger"]) for e in events] == [
        ("offline", "connecting", "connect"), ("connecting", "idle", "identify")]


def test_a_trigger_fired_while_a_change_is_reported_runs_after_it() -> None:
    seen: list[tuple[str, str]] = []

    def listener(model: DeviceModel, src: str, dst: str) -> None:
        seen.append((src, dst))
        if dst == "connecting":
            model.trigger("identify")  # queued: this change is reported completely first
            seen.append(("after identify fired", model.state))

    reader = ShoeReaderModel(lambda event: None, on_change=listener)
    reader.connect()
    assert seen == [("offline", "connecting"), ("after identify fired", "connecting"), ("connecting", "idle")]
    assert reader.state == "idle"
