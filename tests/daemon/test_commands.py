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


@pytest.mark.parametrize(("name", "args", "field", "why"), [
    ("place_bet", {"box": 1, "player": "\x1b[31mX\r\nY", "amount": 500}, "place_bet.player",
     "U+001B is a control character"),
    ("insure", {"box": 1, "player": "p" * 65, "amount": 500}, "insure.player", "it is 65 characters long, at most 64"),
    ("take_seat", {"player": "tab\there"}, "take_seat.player", "U+0009 is a control character"),
    ("place_bet", {"box": 1, "player": "", "amount": 500}, "place_bet.player", "it is empty"),
    ("place_bet", {"box": 1, "player": " \u00a0\u3000 ", "amount": 500}, "place_bet.player", "it is empty"),
    ("act", {"box": 1, "action": "double", "player": "p1",
             "co_players": [{"player": "p2", "joins": True}, {"player": "bell\x07", "joins": False}]},
     "act.co_players[1].player", "U+0007 is a control character"),
    # C1 controls: U+009B is an 8-bit terminal's CSI, U+0085 a line end to Python and Unicode
    ("take_seat", {"player": "p\u009bx"}, "take_seat.player", "U+009B is a control character"),
    ("take_seat", {"player": "p\x9b31mX"}, "take_seat.player", "U+009B is a control character"),
    ("take_seat", {"player": "ab\u0085"}, "take_seat.player", "U+0085 is a control character"),
    # what makes a line read otherwise than it is stored: bidi controls, zero-width characters
    ("take_seat", {"player": "evil\u202ecod.exe"}, "take_seat.player", "U+202E is a format character"),
    ("take_seat", {"player": "\u2067x\u2069"}, "take_seat.player", "U+2067 is a format character"),
    ("take_seat", {"player": "a\u200fb"}, "take_seat.player", "U+200F is a format character"),
    ("take_seat", {"player": "a\u061cb"}, "take_seat.player", "U+061C is a format character"),
    ("take_seat", {"player": "al\u200bice"}, "take_seat.player", "U+200B is a format character"),
    ("take_seat", {"player": "al\u00adice"}, "take_seat.player", "U+00AD is a format character"),
    ("take_seat", {"player": "a\u2028b"}, "take_seat.player", "U+2028 is a line separator"),
    ("take_seat", {"player": "a\u2029b"}, "take_seat.player", "U+2029 is a paragraph separator"),
    ("take_seat", {"player": "a\ud800b"}, "take_seat.player", "U+D800 is a surrogate"),
    ("take_seat", {"player": "a\ue000b"}, "take_seat.player", "U+E000 is a private-use character"),
    ("take_seat", {"player": "a\ufdd0b"}, "take_seat.player", "U+FDD0 is not a character Unicode assigns"),
    ("take_seat", {"player": "a\u0378b"}, "take_seat.player", "U+0378 is not a character Unicode assigns"),
    ("take_seat", {"player": "a\ufe0f"}, "take_seat.player", "U+FE0F is an invisible character"),
    ("take_seat", {"player": "a\u3164b"}, "take_seat.player", "U+3164 is an invisible character"),
    ("take_seat", {"player": "\u0301bob"}, "take_seat.player", "U+0301 is a combining mark with no letter before it"),
    ("take_seat", {"player": "bob \u00b4"}, "take_seat.player", "U+0301 is a combining mark with no letter before it"),
])
def test_a_text_that_is_no_name_is_refused_as_a_bad_arg_saying_why(name, args, field, why):
    """A player's name becomes the ``who`` of his input's records and a line in every view: one
    that a view could not show as itself (core.names) is this command's bad-args, naming the field
    and the character by its code point, never a record (nor a group commit that fails on it)."""
    with pytest.raises(CommandFailed) as caught:
        build_record(command_table(False)[name], args, caller(Role.DEALER))
    assert caught.value.code == "bad-args"
    line = str(caught.value)
    assert line.startswith(f"{field}: ") and " is not a name: " in line and why in line, line
    assert line.isprintable(), line  # the refusal shows the text escaped (repr), never raw


def test_a_name_is_stored_in_one_spelling():
    """NFKC, spaces as one: a name typed two ways (a composed or a combining accent, full-width
    letters, a no-break space) is one player, in each field that takes a name."""
    table = command_table(False)
    for typed in ("Jos\u00e9", "Jose\u0301", "  Jos\u00e9 ", "\uff2a\uff4f\uff53\u00e9"):
        assert build_record(table["take_seat"], {"player": typed}, caller(Role.DEALER)) == \
            inputs.TakeSeat("Jos\u00e9", "dana"), typed
    assert build_record(table["take_seat"], {"player": "Ana\u00a0\u3000Lu\u00eds"}, caller(Role.DEALER)) == \
        inputs.TakeSeat("Ana Lu\u00eds", "dana")
    act = build_record(table["act"], {"box": 1, "action": "double", "player": "Ren\u00e9e",
                                      "co_players": [{"player": "Rene\u0301e", "joins": True}]}, caller(Role.DEALER))
    assert act.player == act.co_players[0].player == "Ren\u00e9e"
    # names of any script, markup-looking text and case are names, kept as typed
    for name in ("\u0928\u092e\u0938\u094d\u0924\u0947", "\u5f20\u4f1f", "\u05d3\u05d5\u05d3", "[red]MALLORY[/red]",
                 "O'Brien-Smith", "alice", "Alice", "p" * 64):
        assert build_record(table["take_seat"], {"player": name}, caller(Role.DEALER)).player == name


def test_a_refused_commands_args_nested_past_the_json_module_are_kept_as_a_note() -> None:
    """msgspec decodes deeper than the json module encodes: the refusal's record once overflowed."""
    from cardd.daemon.tracker_service import refused_args
    deep: list[object] = []
    for _ in range(5000):
        deep = [deep]
    assert refused_args({"x": deep}) == {"too_deep": "nested too deeply to keep"}


def test_the_name_policy_leaves_a_records_other_fields_as_decoded():
    """Only the names are respelled: a card (whose text is no init field), a target, a count per
    card come out of build_record as the records' decoder made them."""
    table = command_table(False)
    for name, args in (("placement_error", {"assignments": [["AS", ["dealer", None, None]], ["9S", ["box", 3, 0]]]}),
                       ("enter_card", {"card": "QH"}), ("shoe_remainder", {"returned": {"AS": 2, "7H": 1}})):
        spec = table[name]
        assert spec.record is not None
        record = build_record(spec, args, caller(Role.DEALER, Role.SUPERVISOR))
        assert record == inputs.from_json({**args, "v": inputs.FORMAT_VERSION, "type": spec.record.__name__,
                                           "who": "dana", **({"role": "supervisor"} if spec.role is Role.SUPERVISOR
                                                            else {})}), name
