"""cardd/daemon/commands.py: the command table and how a command's args become an input record."""
from __future__ import annotations

import dataclasses

import pytest

from cardd.api.errors import CommandFailed
from cardd.api.peer import Caller, Role
from cardd.daemon.commands import TABLE_COMMANDS, build_record, command_table
from devices.game.round_types import Action
from devices.tracker import inputs


def caller(*roles: Role) -> Caller:
    return Caller(pid=1, uid=1001, gid=1001, user="dana", groups=frozenset({1001}), roles=frozenset(roles))


def test_every_table_command_is_an_input_record_and_every_override_needs_a_supervisor():
    for spec in TABLE_COMMANDS:
        assert spec.record is not None and spec.record in inputs.TABLE_INPUTS, spec
        if "role" in {f.name for f in dataclasses.fields(spec.record)}:
            assert spec.role is Role.SUPERVISOR, spec
    # every input a person gives has its command; the devices' and the clock's have none
    by_devices = {inputs.DeviceMessage, inputs.LinkUp, inputs.LinkDown, inputs.Tick}
    assert {spec.record for spec in TABLE_COMMANDS} == set(inputs.TABLE_INPUTS) - by_devices
    assert "sim_deal" not in command_table(simulated=False) and "sim_deal" in command_table(simulated=True)
    assert {s.role for s in command_table(False).values() if s.kind == "device"} == {Role.TECHNICIAN}


def test_who_and_role_come_from_the_credentials():
    table = command_table(False)
    act = build_record(table["act"], {"box": 2, "action": "hit"}, caller(Role.DEALER))
    assert act == inputs.Act(2, Action.HIT, "dana")
    redeal = build_record(table["redeal"], {}, caller(Role.SUPERVISOR, Role.DEALER))
    assert redeal == inputs.Redeal("dana", Role.SUPERVISOR)
    for forged in ({"who": "boss"}, {"role": "supervisor"}):
        with pytest.raises(CommandFailed, match="from your credentials") as caught:
            build_record(table["redeal"], forged, caller(Role.SUPERVISOR))
        assert caught.value.code == "bad-args"


@pytest.mark.parametrize(("name", "args", "message"), [
    ("place_bet", {"box": 1, "player": "p1", "amount": "ten"}, "place_bet.amount: expected a whole number"),
    ("place_bet", {"box": 1, "player": "p1"}, "place_bet: field 'amount' is missing"),
    ("act", {"box": 1, "action": "fold"}, "act.action: 'fold' is not one of hit, stand, double, split, surrender"),
    ("enter_card", {"card": "ZZ"}, "enter_card.card: not a card"),
    ("clear_alarm", {"alarm_id": 1, "colour": "red"}, "clear_alarm: unknown field(s) colour"),
])
def test_a_wrong_arg_is_one_error_naming_the_field(name, args, message):
    """Named as the command and its args are sent, never as the input record's class."""
    with pytest.raises(CommandFailed) as caught:
        build_record(command_table(False)[name], args, caller(Role.DEALER, Role.SUPERVISOR))
    assert str(caught.value).startswith(message)
    assert caught.value.code == "bad-args"


@pytest.mark.parametrize(("name", "args", "field"), [
    ("place_bet", {"box": 1, "player": "\x1b[31mX\r\nY", "amount": 500}, "place_bet.player"),
    ("insure", {"box": 1, "player": "p" * 257, "amount": 500}, "insure.player"),
    ("take_seat", {"player": "tab\there"}, "take_seat.player"),
    ("place_bet", {"box": 1, "player": "", "amount": 500}, "place_bet.player"),
    ("act", {"box": 1, "action": "double", "player": "p1",
             "co_players": [{"player": "p2", "joins": True}, {"player": "bell\x07", "joins": False}]},
     "act.co_players[1].player"),
])
def test_a_name_the_journal_cannot_store_as_who_is_refused_as_a_bad_arg(name, args, field):
    """A player's name becomes the ``who`` of his input's records (a refused bet's too): one the
    journal refuses (a control character, more than 256 characters) must be this command's
    bad-args, not a record that fails every group commit after it."""
    with pytest.raises(CommandFailed) as caught:
        build_record(command_table(False)[name], args, caller(Role.DEALER))
    assert caught.value.code == "bad-args"
    assert str(caught.value).startswith(f"{field}: ") and "is not a name (1 to 256 characters, no control" \
        in str(caught.value)
    assert "\x1b" not in str(caught.value) and "\n" not in str(caught.value)
    # the longest name the journal takes still is one
    build_record(command_table(False)["take_seat"], {"player": "p" * 256}, caller(Role.DEALER))


def test_a_refused_commands_args_nested_past_the_json_module_are_kept_as_a_note() -> None:
    """msgspec decodes deeper than the json module encodes: the refusal's record once overflowed."""
    from cardd.daemon.tracker_service import refused_args
    deep: list[object] = []
    for _ in range(5000):
        deep = [deep]
    assert refused_args({"x": deep}) == {"too_deep": "nested too deeply to keep"}
