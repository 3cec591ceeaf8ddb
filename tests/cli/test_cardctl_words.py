"""A refusal in cardctl's words: the daemon words its refusals for the API (``open_round refused:
...: open one with open_round first``); cardctl shows the command the user typed and the cardctl
command to type next, from one table (cardd.cli.common.CARDCTL_COMMANDS)."""
from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from cardd.cli.common import CARDCTL_COMMANDS, Options, in_cardctl_words
from cardd.cli.program import cli
from cardd.cli.table import table_command
from cardd.daemon.commands import TABLE_COMMANDS, command_table
from tests.cli.cli_rig import cardctl
from tests.daemon.daemon_rig import Daemon, shuffle_and_load, simulate


def _command_paths(group: click.Group, prefix: str = "") -> set[str]:
    paths = set()
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        paths.add(path)
        if isinstance(command, click.Group):
            paths |= _command_paths(command, f"{path} ")
    return paths


def test_the_one_table_maps_api_commands_to_cardctl_commands_that_exist() -> None:
    api = command_table(simulated=True)  # cardd --simulate's commands have theirs too (cardctl sim)
    paths = _command_paths(cli)
    for name, words in CARDCTL_COMMANDS.items():
        assert name in api, name
        assert words.removesuffix(" --export") in paths, words


def test_every_table_command_the_daemon_accepts_has_cardctl_words() -> None:
    """A table command added to the daemon without its cardctl command fails here, not in the field."""
    table = {spec.name for spec in TABLE_COMMANDS}
    assert len(table) > 20
    assert sorted(table - CARDCTL_COMMANDS.keys()) == []


def test_a_command_applied_is_reported_even_without_cardctl_words(daemon: Daemon, capsys, monkeypatch) -> None:
    """table_command's line names the command in cardctl's words where it has them, the API's name
    otherwise: the daemon applied it, so nothing may fail after (a KeyError did, for a name not in
    the table)."""
    monkeypatch.delitem(CARDCTL_COMMANDS, "sim_switches")  # a command the daemon applies, without its words
    with click.Context(cli, obj=Options(socket=daemon.socket_path)):
        table_command("sim_switches", False, device="shoe", switches="")
    assert re.fullmatch(r"sim_switches: ok \(journal seq \d+\)\n", capsys.readouterr().out)


def test_a_refusal_names_the_cardctl_command_typed_and_the_one_to_type_next() -> None:
    assert in_cardctl_words("place_bet refused: no round is open: open one with open_round first") == \
        "round bet refused: no round is open: open one with cardctl round open first"
    assert in_cardctl_words("open_round refused: a card drawn in error waits for the dealer's word: give it with "
                            "drawn_in_error (exposed or not) first") == \
        ("round open refused: a card drawn in error waits for the dealer's word: give it with "
         "cardctl round drawn-in-error (exposed or not) first")
    assert in_cardctl_words("resume refused: shoe-reader is offline: continue once every device is back, or void "
                            "the round with redeal") == \
        ("round continue refused: shoe-reader is offline: continue once every device is back, or void the round "
         "with cardctl round redeal")
    assert in_cardctl_words("command 'void_shoe' needs the supervisor role; jdoe holds dealer") == \
        "command 'shoe void' needs the supervisor role; jdoe holds dealer"
    assert in_cardctl_words("clear_fault: the shuffler has no jam fault") == "clear-fault: the shuffler has no jam fault"
    assert in_cardctl_words("sim_deal: the simulated shoe holds no cards to deal (the table's shoe is idle): load "
                            "one with sim_load_shoe first") == \
        ("sim deal: the simulated shoe holds no cards to deal (the table's shoe is idle): load one with cardctl sim "
         "load-shoe first")
    # a way forward with an argument: cardctl's option for it (CARDCTL_ARGUMENTS)
    assert in_cardctl_words("void_shoe refused: the shoe voided last is void already; ...; to void it too, say so: "
                            "void_shoe next_shoe=true") == \
        ("shoe void refused: the shoe voided last is void already; ...; to void it too, say so: "
         "cardctl shoe void --next-shoe")


def test_words_that_are_not_commands_are_left_as_they_are() -> None:
    # "act" and "resume" are words here; a name no command has is left alone; an arg's name
    for line in ("act refused: stand at box 1 is taken only while the players act, and bets are still open",
                 "resume refused: no held round to resume: only a held round waits for a supervisor"):
        head, rest = line.split(" refused: ")
        assert in_cardctl_words(line) == f"{CARDCTL_COMMANDS[head]} refused: {rest}"
    assert in_cardctl_words("act refused: box 2 has an unreadable card: enter it with enter_card first") == \
        "round act refused: box 2 has an unreadable card: enter it with cardctl shoe enter-card first"
    # a path or a quoted name the line carries is no command (/var/tmp/open_round/x names no open_round)
    assert in_cardctl_words("export_journal refused: /var/tmp/open_round/x exists") == \
        "log --export refused: /var/tmp/open_round/x exists"
    assert in_cardctl_words('place_bet refused: player "start_shuffle" unknown') == \
        'round bet refused: player "start_shuffle" unknown'
    assert in_cardctl_words("no_such_command refused: x") == "no_such_command refused: x"


def test_cardctl_shows_a_table_refusal_in_its_own_words(daemon: Daemon) -> None:
    sock = daemon.socket_path
    refused = cardctl(sock, "round", "bet", "1", "alice", "25")
    assert refused.code == 1
    assert refused.one_line_error() == ("cardctl: round bet refused: no round is open: open one with cardctl round "
                                        "open first")
    client = daemon.client()
    shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), lambda n: client.ok("sim_deal", cards=n))
    client.close()
    refused = cardctl(sock, "round", "continue")
    assert refused.code == 1
    assert refused.one_line_error() == ("cardctl: round continue refused: no held round to resume: only a held "
                                        "round waits for a supervisor")
    opened = cardctl(sock, "round", "open")
    assert opened.code == 0 and opened.out.startswith("round open: ok (journal seq "), opened.err


def test_docs_cardctl_md_shows_the_same_table() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "cardctl.md").read_text()
    table = text.split("| API command | cardctl |")[1].split("\n\n")[0]
    shown: dict[str, str] = {}
    for row in table.splitlines()[2:]:
        api, words = (re.findall(r"`([^`]+)`", cell) for cell in row.strip("|").split("|"))
        assert len(api) == len(words), row
        shown.update(zip(api, words))
    assert shown == CARDCTL_COMMANDS


# ---- one vocabulary: the API's field names, plain command words, device names --------------------

def test_a_bad_args_line_names_cardctls_argument_not_the_apis_field() -> None:
    """The daemon's bad-args line names the API's command and field (``enter_card.card``); cardctl's
    the command typed and its argument or option (CARDCTL_ARGUMENTS)."""
    assert in_cardctl_words("enter_card.card: not a card: 'ZZ' ('ZZ' is not a card: ...)") == \
        "shoe enter-card CARD: not a card: 'ZZ' ('ZZ' is not a card: ...)"
    assert in_cardctl_words("shoe_remainder.returned key 'ZZ': not a card: 'ZZ' (...)") == \
        "shoe remainder CARD[=N]: not a card: 'ZZ' (...)"
    assert in_cardctl_words("place_bet.player: '' is not a name: it is empty") == \
        "round bet PLAYER: '' is not a name: it is empty"
    assert in_cardctl_words("reduce_bet.amount: expected a whole number, got 'ten'") == \
        "round reduce NEW_STAKE: expected a whole number, got 'ten'"
    assert in_cardctl_words("act.co_players[1].player: 'p\\x9bx' is not a name: U+009B is a control character") == \
        "round act --co-player: 'p\\x9bx' is not a name: U+009B is a control character"
    assert in_cardctl_words("firmware_update.image_base64: expected a string") == "firmware flash IMAGE: expected a string"
    assert in_cardctl_words("firmware_update.allow_downgrade_by: expected a string") == \
        "firmware flash --allow-downgrade-by: expected a string"


def test_every_field_of_a_table_command_is_an_argument_or_option_of_its_cardctl_command() -> None:
    """So a bad-args line never names a field cardctl has no argument for."""
    import dataclasses

    from cardd.cli.common import argument_words
    from cardd.daemon.commands import CREDENTIAL_FIELDS
    for spec in TABLE_COMMANDS:
        command: click.Command = cli
        for word in CARDCTL_COMMANDS[spec.name].split():
            assert isinstance(command, click.Group)
            command = command.commands[word]
        params = command.params
        for field in dataclasses.fields(spec.record):  # type: ignore[arg-type]
            if field.name in CREDENTIAL_FIELDS or not field.init or field.name in ("v", "type"):
                continue
            words = argument_words(spec.name, field.name)
            assert any(words in p.opts or words == (p.name or "").upper() or words in (p.metavar or "")
                       for p in params), (spec.name, field.name, words)


def test_a_command_named_alone_in_brackets_is_cardctls_command() -> None:
    """The daemon's holds and alarms name the plain-word commands in brackets ("continues it (resume)")."""
    assert in_cardctl_words("the daemon restarted mid-round: a supervisor continues the round (resume) once every "
                            "device is back, or voids it (redeal)") == \
        ("the daemon restarted mid-round: a supervisor continues the round (cardctl round continue) once every "
         "device is back, or voids it (cardctl round redeal)")
    assert in_cardctl_words("the shoe is idle (dealer) (exposed or not)") == "the shoe is idle (dealer) (exposed or not)"


def test_cardctl_says_its_own_words_where_the_daemon_says_the_apis(daemon: Daemon) -> None:
    sock = daemon.socket_path
    refused = cardctl(sock, "round", "open")  # the way forward names the command that shuffles
    assert refused.one_line_error() == ("cardctl: round open refused: the shoe is idle: shuffle a shoe with cardctl "
                                        "shuffle and load it first")
    # a device by the name status shows it too, and shown so
    assert "shoe-reader" in cardctl(sock, "status").out
    for typed in ("shoe-reader", "shoe"):
        tested = cardctl(sock, "selftest", typed)
        assert tested.code == 0 and tested.out.startswith("shoe-reader: passed: "), tested.err
    switches = cardctl(sock, "sim", "switches", "shoe-reader")  # the simulation's DEVICE too
    assert switches.code == 0, switches.err
    counted = cardctl(sock, "counters", "shoe-reader")
    assert counted.code == 0 and counted.out.startswith("shoe-reader: cards "), counted.err
    # a card that is no card: cardctl's argument, never the API's field, and nothing sent
    entered = cardctl(sock, "shoe", "enter-card", "ZZ")
    assert entered.code == 2 and entered.err.splitlines()[-1] == (
        "Error: Invalid value for 'CARD': 'ZZ' is not a card: expected rank A,2-9,T(10),J,Q,K then suit C,D,H,S, "
        "e.g. 'AS'"), entered.err
    counted_back = cardctl(sock, "shoe", "remainder", "AS=2", "ZZ=1")
    assert counted_back.code == 2 and "'ZZ=1': 'ZZ' is not a card" in counted_back.err, counted_back.err
    for run in (entered, counted_back):
        assert "enter_card" not in run.err and "shoe_remainder" not in run.err
    client = daemon.client()
    shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), lambda n: client.ok("sim_deal", cards=n))
    client.close()
    assert cardctl(sock, "round", "open").code == 0
    for args, words in ((("round", "bet", "1", "", "5"), "round bet PLAYER"), (("seat", "take", ""), "seat take PLAYER")):
        named = cardctl(sock, *args)
        assert named.code == 2 and named.one_line_error() == f"cardctl: {words}: '' is not a name: it is empty", \
            named.err


@pytest.mark.timeout(180)
def test_a_round_held_by_a_restart_is_shown_with_cardctls_commands(directory: Path) -> None:
    with simulate(directory) as running:
        client = running.client()
        shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), lambda n: client.ok("sim_deal", cards=n))
        for name, args in (("open_round", {}), ("place_bet", {"box": 1, "player": "alice", "amount": 1000}),
                           ("no_more_bets", {})):
            client.ok(name, **args)
        client.ok("sim_deal", cards=1)
        client.wait_state(lambda s: s["round"]["state"] == "initial_deal")
        client.close()
    with simulate(directory) as again:
        shown = cardctl(again.socket_path, "status")
        assert shown.code == 0, shown.err
        holds = [line for line in shown.out.splitlines() if line.startswith("hold ")]
        assert holds == ["hold DEVICE_OFFLINE: the daemon restarted mid-round: a supervisor continues the round "
                         "(cardctl round continue) once every device is back, or voids it (cardctl round redeal)"], \
            shown.out
        assert "(resume)" not in shown.out and "(redeal)" not in shown.out
