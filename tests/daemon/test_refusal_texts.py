"""A refused command's one line (its ERROR, and its COMMAND_REFUSED record's ``refused``) speaks to
the dealer and the supervisor: it names the command as they send it, never a record's or an
error's Python class, says what is wrong in the table's words and, where there is one, the way
forward. Every command of the command table, through the daemon's backend on a real journal and
through the real daemon's socket."""
from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from cardd.api.errors import REASONS_MAX, CommandFailed
from cardd.api.peer import Caller
from cardd.daemon.backend import DaemonBackend
from cardd.daemon.commands import TABLE_COMMANDS, command_table, reasons_line
from cardd.daemon.tracker_service import TableService
from cardd.journal import Journal
from core.cards import Card, Orientation
from devices.events import Role
from devices.tracker import inputs
from devices.tracker.inputs import DeviceMessage, LinkDown
from firmware_bridge.messages import CardRead, ShoeLoaded, UnreadableCard
from tests.api.api_rig import LineClient, serving
from tests.daemon.daemon_rig import simulate
from tests.daemon.service_rig import RULES, linked_and_shuffled, start, turn
from tests.support.aio import run
from tests.support.recorders import FakeClock

CALLER = Caller(pid=1, uid=1001, gid=1001, user="dana", groups=frozenset(),
                roles=frozenset({Role.DEALER, Role.SUPERVISOR}))
#: the Python names a refusal must never show: every input record's class, and the errors'
CLASS_NAMES = sorted({*inputs.RECORDS, "TableError", "OverrideRefused", "RuleViolation", "RoundHeld", "RoundError",
                      "CardMismatch", "ShoeStateError", "RemainderError", "InputDecodeError", "Action", "Role"})
_CLASS_NAME = re.compile(r"\b(" + "|".join(CLASS_NAMES) + r")\b")
#: each command's args on a fresh table (no device linked, no shoe, no round): every one refused
#: there but the two the table always takes
FRESH_TABLE: dict[str, dict[str, Any]] = {
    "open_round": {}, "place_bet": {"box": 1, "player": "p1", "amount": 2500},
    "reduce_bet": {"box": 1, "player": "p1", "amount": 1000}, "pairs_bet": {"box": 1, "player": "p1", "amount": 500},
    "no_more_bets": {}, "insure": {"box": 1, "player": "p1", "amount": 500},
    "even_money": {"box": 1, "player": "p1"}, "close_insurance": {}, "act": {"box": 1, "action": "hit"},
    "enter_card": {"card": "AS"}, "leave_seat": {"player": "p9"}, "ask_for_box": {"player": "p9"},
    "drawn_in_error": {"exposed": True}, "hand_shuffled": {}, "shoe_remainder": {"returned": {"AS": 1}},
    "resume": {}, "redeal": {}, "placement_error": {}, "cards_to_box_without_wager": {}, "void_shoe": {},
    "clear_alarm": {"alarm_id": 7},
}
#: taken whatever the table's state: refused only for their args
ALWAYS_TAKEN = {"dealer_change", "shuffle_started"}
TAKE_SEAT = {"player": "p1"}


def check_line(name: str, line: str) -> str:
    """The line names the command first, no class, one line; returns what follows the name."""
    assert line.startswith((f"{name} refused: ", f"{name}:", f"{name}.", f"{name} takes ")), line
    assert not _CLASS_NAME.search(line), f"a Python class name in {line!r}"
    assert "\n" not in line
    return line.removeprefix(f"{name} refused: ")


async def refused(backend: DaemonBackend, journal: Journal, name: str, args: dict[str, Any]) -> str:
    """The command's ERROR line; its COMMAND_REFUSED record keeps the same line, naming the command once."""
    before = journal.last_seq
    with pytest.raises(CommandFailed) as caught:
        await backend.command(name, args, CALLER)
    line = str(caught.value)
    assert caught.value.code == "failed", (name, line)
    (record,) = [r for r in journal.query(seq_from=before + 1, limit=None) if r.reason == "COMMAND_REFUSED"]
    assert record.data["command"] == name and record.data["refused"] == line
    assert record.data["message"] == f"{name} refused for dana (uid 1001): {line.removeprefix(f'{name} refused: ')}"
    return line


def test_the_check_sees_a_class_name_and_a_missing_command_name() -> None:
    for bad in ("PlaceBet: no round is open (OpenRound first)", "place_bet refused: no round (OpenRound first)",
                "no unreadable card waits to be entered"):
        with pytest.raises(AssertionError):
            check_line("place_bet", bad)


def test_every_command_refused_names_itself_never_a_class_and_the_way_forward(tmp_path: Path) -> None:
    assert set(FRESH_TABLE) | ALWAYS_TAKEN | {"take_seat"} == {spec.name for spec in TABLE_COMMANDS}

    async def scenario() -> dict[str, str]:
        with Journal.open(tmp_path / "journal.sqlite3", create=True) as journal:
            service = TableService(RULES, journal, lambda event: None, clock=FakeClock())
            service.restore(start())
            backend = DaemonBackend(service, command_table(simulated=False), dict, {})
            lines = {name: await refused(backend, journal, name, args) for name, args in FRESH_TABLE.items()}
            await backend.command("take_seat", TAKE_SEAT, CALLER)
            lines["take_seat"] = await refused(backend, journal, "take_seat", TAKE_SEAT)
            for spec in TABLE_COMMANDS:  # an arg no command has: refused before the table sees it
                with pytest.raises(CommandFailed) as wrong:
                    await backend.command(spec.name, {"colour": "red"}, CALLER)
                assert wrong.value.code == "bad-args"
                check_line(spec.name, str(wrong.value))
            return lines

    lines = run(scenario())
    why = {name: check_line(name, line) for name, line in lines.items()}
    # the way forward names the command to send next, as people send it
    assert why["place_bet"] == "no round is open: open one with open_round first"
    assert why["open_round"].startswith("shuffler is offline (play waits for it); shoe-reader is offline (play waits for it)")
    assert why["open_round"].endswith("the shoe is idle: shuffle a shoe with start_shuffle and load it first")
    assert why["placement_error"] == "no round is open"  # a supervisor's: there is no round to open for it
    assert why["hand_shuffled"].startswith('this table\'s rules say [shoe] shuffle = "automatic"')
    assert why["shoe_remainder"].startswith("the shoe is idle: its remainder is counted once the shoe is complete")
    assert why["clear_alarm"] == "no open alarm 7 (open alarms: none)"
    assert why["take_seat"] == "p1 is already seated"
    assert why["ask_for_box"].endswith("(seat him with take_seat first)")


def test_a_round_refuses_in_the_tables_words_without_its_rule_codes(tmp_path: Path) -> None:
    """In a round taking bets: what is taken when, and where the round is now (no "round_state:",
    no state name alone); once held, what the supervisor does next."""
    async def scenario() -> dict[str, str]:
        with Journal.open(tmp_path / "journal.sqlite3", create=True) as journal:
            service = TableService(RULES, journal, lambda event: None, clock=FakeClock())
            service.restore(start())
            await linked_and_shuffled(service)
            await turn(service, DeviceMessage("shoe-reader", ShoeLoaded(0)),
                       DeviceMessage("shoe-reader", CardRead(1, Card.parse("2C"), Orientation.FACE_DOWN, 10)))
            backend = DaemonBackend(service, command_table(simulated=False), dict, {})
            await backend.command("open_round", {}, CALLER)
            lines = {name: await refused(backend, journal, name, args) for name, args in (
                ("open_round", {}), ("no_more_bets", {}), ("insure", {"box": 1, "player": "p1", "amount": 500}),
                ("act", {"box": 1, "action": "stand"}))}
            await backend.command("place_bet", {"box": 1, "player": "p1", "amount": 2500}, CALLER)
            await turn(service, LinkDown("shoe-reader"))  # the live round is held
            lines["place_bet"] = await refused(backend, journal, "place_bet", {"box": 2, "player": "p2", "amount": 2500})
            lines["resume"] = await refused(backend, journal, "resume", {})
            return lines

    why = {name: check_line(name, line) for name, line in run(scenario()).items()}
    assert why["open_round"] == "round 1 is still being played (betting): finish it first"
    assert why["no_more_bets"] == "no box has a wager yet: the bets come first"
    assert why["insure"] == "insurance is taken only while insurance is offered, and bets are still open"
    assert why["act"] == "stand at box 1 is taken only while the players act, and bets are still open"
    assert why["place_bet"].startswith("round 1 is held (") and why["place_bet"].endswith(
        "nothing is taken until a supervisor continues it or declares a re-deal")
    assert why["resume"] == ("shoe-reader is offline: continue once every device is back, or void the round "
                             "with redeal")
    for text in why.values():
        assert not re.match(r"[a-z]+(_[a-z]+)+: ", text), text  # a rule's code is the journal's, not the line's


def test_every_command_of_the_simulated_daemon_refused_for_its_args_names_itself(directory: Path) -> None:
    """Through the real ``cardd --simulate`` and its socket: every command of its table (device,
    journal and simulation commands too), sent an arg none takes, and a table command refused."""
    with simulate(directory) as daemon:
        client = daemon.client()
        client.wait_state(lambda s: all(d["link"] == "up" for d in s["devices"].values()))
        for name in command_table(simulated=True):
            reply = client.command(name, colour="red")
            assert (reply["class"], reply["code"]) == ("ERROR", "bad-args"), reply
            why = check_line(name, reply["message"])
            assert "colour" in why or why.endswith("takes no args"), reply
        reply = client.command("place_bet", box=1, player="p1", amount=2500)
        assert (reply["class"], reply["code"]) == ("ERROR", "failed"), reply
        assert reply["message"] == "place_bet refused: no round is open: open one with open_round first"
        client.close()


def test_a_round_refused_for_five_reasons_names_each_with_its_way_forward(tmp_path: Path) -> None:
    """Both devices gone, a card drawn in error, an unreadable card and foreign cards: the line was
    cut at 300 characters ("foreign card ala...") and lost the last way forward."""
    async def scenario() -> str:
        with Journal.open(tmp_path / "journal.sqlite3", create=True) as journal:
            service = TableService(RULES, journal, lambda event: None, clock=FakeClock())
            service.restore(start())
            await linked_and_shuffled(service)
            aces = [DeviceMessage("shoe-reader", CardRead(i, Card.parse("AS"), Orientation.FACE_DOWN, 10))
                    for i in range(1, 10)]  # the burn, then 8 between rounds: 6 aces of spades exist, 3 are foreign
            await turn(service, DeviceMessage("shoe-reader", ShoeLoaded(0)), *aces,
                       DeviceMessage("shoe-reader", UnreadableCard(10, 10)))
            await turn(service, LinkDown("shuffler"), LinkDown("shoe-reader"))
            backend = DaemonBackend(service, command_table(simulated=False), dict, {})
            line = await refused(backend, journal, "open_round", {})
            sock_dir = Path(tempfile.mkdtemp(prefix="cardd-refusal-", dir="/tmp"))  # a socket path under 108 bytes
            try:  # the API server's ERROR on a real socket carries the line whole, not cut again
                async with serving(backend, sock_dir):  # type: ignore[arg-type]
                    client = await LineClient.connect(sock_dir / "cardd.sock")
                    reply = await client.ask({"class": "COMMAND", "id": "c1", "name": "open_round", "args": {}})
                    await client.close()
            finally:
                shutil.rmtree(sock_dir, ignore_errors=True)
            assert reply["class"] == "ERROR" and reply["message"] == line, reply
            return line

    line = run(scenario())
    assert line == ("open_round refused: shuffler is offline (play waits for it); shoe-reader is offline (play waits "
                    "for it); a card drawn in error waits for the dealer's word: give it with drawn_in_error (exposed "
                    "or not) first; unreadable card #10 waits to be entered: enter it with enter_card first; foreign "
                    "card alarms 1, 2, 3 are open: a supervisor looks at the shoe and clears them with clear_alarm "
                    "first")
    assert len(line) <= REASONS_MAX


def test_reasons_that_do_not_fit_are_left_out_whole_and_counted() -> None:
    reasons = [f"reason {i}: " + "x" * 150 + f" do {i} first" for i in range(1, 6)]
    line = reasons_line("open_round refused: ", reasons)
    assert len(line) <= REASONS_MAX
    assert line == ("open_round refused: " + "; ".join(reasons[:3])
                    + "; and 2 more reason(s), named once these are dealt with")
    assert reasons_line("x refused: ", ["a: b", "c: d"]) == "x refused: a: b; c: d"
    alone = reasons_line("x refused: ", ["y" * 700, "z"])  # one reason over the limit: cut as any line
    assert len(alone) == REASONS_MAX and alone.endswith("...")
