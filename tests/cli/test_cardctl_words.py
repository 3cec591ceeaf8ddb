"""A refusal in cardctl's words: the daemon words its refusals for the API (``open_round refused:
...: open one with open_round first``); cardctl shows the command the user typed and the cardctl
command to type next, from one table (cardd.cli.common.CARDCTL_COMMANDS)."""
from __future__ import annotations

import re
from pathlib import Path

import click

from cardd.cli.common import CARDCTL_COMMANDS, Options, in_cardctl_words
from cardd.cli.program import cli
from cardd.cli.table import table_command
from cardd.daemon.commands import TABLE_COMMANDS, command_table
from tests.cli.cli_rig import cardctl
from tests.daemon.daemon_rig import Daemon, shuffle_and_load


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
    # a way forward with an argument: cardctl's option for it (CARDCTL_OPTIONS)
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
    assert in_cardctl_words("place_bet.amount: expected a whole number, got 'ten'") == \
        "place_bet.amount: expected a whole number, got 'ten'"
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
