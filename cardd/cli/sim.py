"""The simulated table's hands, under ``cardd --simulate`` only: ``sim load-shoe``, ``sim deal``,
``sim unload-shoe`` (the dealer's hands on the simulated cards), ``sim fault``, ``sim switch`` and
``sim switches`` (the simulators' faults and fault switches, docs/simulators.md), over the
daemon's simulation commands (cardd.daemon.simulation). A real table has none of them: its cards
move by hand and its faults are real, so against one each command says, in one line, that it is
for a simulated table only. Each command's one-line help is in cardd.cli.program."""
from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from cardd.api.client import ApiClient, CommandRefused, StateTimeout
from cardd.api.protocol import ErrorCode
from cardd.cli.common import (EXIT_FAILURE, EXIT_USAGE, CliError, DeviceName, check_output_directory, in_cardctl_words,
                              json_option, options)
from cardd.cli.console import emit
from cardd.cli.daemon_client import command_record, daemon
from cardd.cli.shown import cells, shown
from core.cards import Card

#: the devices the simulation commands name (cardd.daemon.simulation)
SIM_DEVICES = ("shoe", "shuffler")
#: how long a dealt card may take to reach the table (the shoe reads it, the daemon journals it)
READ_WAIT_S = 10.0
#: how long a shuffle under way may take before the shoe is loaded from it
SHUFFLE_WAIT_S = 60.0
#: the simulators' refusal of a switch that does not exist (simulators.faults.unknown_switch)
UNKNOWN_SWITCH = re.compile(r"no fault switch (.+?); switches: ")
#: the table's shoe states while the shuffler counts and the table checks the count
SHUFFLE_UNDER_WAY = ("shuffling", "verifying")


@click.group("sim")
def sim_group() -> None:
    """Against a real table each of these says so in one line and does nothing: its cards move by
    hand and its faults are real. The walkthrough that plays a whole shoe with them: docs/cardctl.md,
    "Play a shoe on the simulated table".

    \b
    Example:
      cardctl sim load-shoe && cardctl sim deal --needed
    """


@contextmanager
def simulation(command: str) -> Iterator[tuple[ApiClient, dict[str, Any]]]:
    """A connection for ``cardctl sim`` subcommand ``command``, and the table's STATE; a daemon
    that does not simulate (a real table's, STATE's ``simulated`` false) is one line saying what
    these commands are for, before any command is sent to it."""
    with daemon() as client:
        state = client.state()
        if not state.get("simulated"):
            raise CliError(f"{command}: for a simulated table only (cardd --simulate): the daemon on "
                           f"{options().socket} runs a real table, whose cards move by hand", EXIT_USAGE)
        yield client, state


def journal_line(record: dict[str, Any]) -> str:
    return f"journal seq {record['seq']}"


# ---- the shoe ------------------------------------------------------------------------------

@sim_group.command("load-shoe")
@click.option("--cut-at", type=click.IntRange(min=1), metavar="N",
              help="the cut card after card N (default: two thirds in; outside the house rules' window the "
                   "table warns CUT_CARD_MISPLACED, and plays on: a short shoe to try things)")
@json_option
def sim_load_shoe(cut_at: int | None, as_json: bool) -> None:
    """The dealer moves the shuffled stack from the simulated shuffler into the simulated shoe
    (on a table whose rules shuffle by hand, the dealer's own shuffle), with the cut card. A shuffle
    still under way is waited for.

    \b
    Example:
      cardctl shuffle && cardctl sim load-shoe
      cardctl sim load-shoe --cut-at 40
    """
    with simulation("sim load-shoe") as (client, state):
        if state["shoe"]["state"] in SHUFFLE_UNDER_WAY:
            try:
                state = client.wait_state(lambda s: s["shoe"]["state"] not in SHUFFLE_UNDER_WAY, SHUFFLE_WAIT_S, 0.05)
            except StateTimeout:
                raise CliError(f"sim load-shoe: the shuffle is still under way after {SHUFFLE_WAIT_S:g} s: see "
                               "cardctl status", EXIT_FAILURE) from None
        before = state["shoe"]["state"]
        record = command_record(client, "sim_load_shoe", **({} if cut_at is None else {"cut_at": cut_at}))
        try:  # the next command (a deal) finds the shoe loaded
            client.wait_state(lambda s: s["shoe"]["state"] != before, READ_WAIT_S, 0.02)
            seen = ""
        except StateTimeout:
            seen = f"; the table has not seen the load within {READ_WAIT_S:g} s: see cardctl status"
    result = record["data"]["result"]
    line = (f"sim load-shoe: {result['cards']} cards into the shoe, the cut card after card {result['cut_at']} "
            f"({journal_line(record)}){seen}")
    emit(record, as_json, lambda out: out.print(shown(line)))


@sim_group.command("deal")
@click.argument("cards", type=click.IntRange(min=1), required=False, metavar="[N]")
@click.option("--needed", is_flag=True,
              help="deal the cards the table waits for, one by one as it reads them: the burn, the deal, a "
                   "hit, the dealer's hand, until a player decides, the round is over or held")
@json_option
def sim_deal(cards: int | None, needed: bool, as_json: bool) -> None:
    """The dealer draws N cards (default 1) from the simulated shoe, or with --needed the cards the
    table waits for; prints the cards that came out, in order (a foreign card, of another back, has
    no face the shoe knows). What the table read of them: cardctl status. A card the table does not
    wait for is a card exposed in error during a round (the next card a hand takes), drawn in error
    between rounds (it waits for the dealer's word: cardctl round drawn-in-error).

    \b
    Example:
      cardctl sim deal
      cardctl sim deal 3
      cardctl sim deal --needed
    """
    if needed and cards is not None:
        raise click.UsageError("give N cards or --needed, not both")
    with simulation("sim deal") as (client, state):
        records, waits = deal_needed(client, state) if needed else deal(client, state, cards or 1)
    drawn = [card for record in records for card in record["data"]["result"]["drawn"]]
    line = f"sim deal: {len(drawn)} card{'s' if len(drawn) != 1 else ''} out: {cards_text(drawn)}" if drawn else \
        "sim deal: no card dealt"
    if records:
        seqs = [record["seq"] for record in records]
        line += f" ({journal_line(records[0])}" + (f" to {seqs[-1]})" if len(seqs) > 1 else ")")
        asked = records[-1]["data"]["result"].get("asked")
        if asked is not None:
            line += f"; the shoe held {len(drawn)}, not {asked}"
    if waits is not None:
        line += f"; now {waits}"
    document: Any = {"drawn": drawn, "records": records, "waits": waits} if needed else records[0]
    emit(document, as_json, lambda out: out.print(shown(line)))


def cards_text(drawn: list[str | None]) -> str:
    return ", ".join("a foreign card" if card is None else card for card in drawn)


def deal(client: ApiClient, state: dict[str, Any], cards: int) -> tuple[list[dict[str, Any]], str | None]:
    """``cards`` dealt from the table at ``state``, waited for until the table has read them: the
    record, and None (or, when the table has not read them all in time, what to look at)."""
    record = command_record(client, "sim_deal", cards=cards)
    return [record], read(client, state, len(record["data"]["result"]["drawn"]))


def deal_needed(client: ApiClient, state: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """One card at a time while the table (at ``state``) waits for one, each waited for until the
    table has read it: the records, and what the table waits for then."""
    records: list[dict[str, Any]] = []
    while (waits := what_the_table_waits_for(state)) is None:
        records.append(command_record(client, "sim_deal", cards=1))
        late = read(client, state, 1)
        if late is not None:
            return records, late
        state = client.state()
    return records, waits


def read(client: ApiClient, before: dict[str, Any], cards: int) -> str | None:
    """Wait until the table has read ``cards`` more than at ``before`` (or an alarm, a hold, an
    unreadable card ended the deal): None, or what to look at when it has not within READ_WAIT_S
    (a read a fault switch hid, a shoe off its link)."""
    out, alarms = before["shoe"]["cards_out"], len(before["alarms"])

    def done(s: dict[str, Any]) -> bool:
        return s["shoe"]["cards_out"] >= out + cards or len(s["alarms"]) != alarms or s["awaiting_entry"] is not None \
            or (s["round"] is not None and s["round"]["held"] is not None)
    try:
        client.wait_state(done, READ_WAIT_S, 0.02)
    except StateTimeout as exc:
        seen = exc.state["shoe"]["cards_out"] - out
        return f"the table has read {seen} of them within {READ_WAIT_S:g} s: see cardctl status"
    return None


#: what the table waits for when its shoe is not dealing (else: a new shoe)
SHOE_WAITS = {
    "complete": "the shoe is complete: count its remainder with cardctl sim unload-shoe and cardctl shoe remainder",
    "verified": "the shoe is verified: load it with cardctl sim load-shoe",
    "shuffling": "the shuffler shuffles: cardctl sim load-shoe waits for it",
    "verifying": "the table checks the shuffler's count: cardctl sim load-shoe waits for it",
}


def what_the_table_waits_for(state: dict[str, Any]) -> str | None:
    """None while the table waits for a card from the shoe; else what it waits for instead, in
    cardctl's words."""
    shoe, r = state["shoe"], state["round"]
    if state["awaiting_entry"] is not None:
        return "the dealer names the card the shoe could not read: cardctl shoe enter-card CARD"
    if shoe["state"] in ("burning", "in_play", "last_round") and shoe["burn_remaining"]:
        return None
    if shoe["state"] not in ("in_play", "last_round"):
        return SHOE_WAITS.get(shoe["state"], f"the shoe is {shoe['state']}: shuffle a new one with cardctl shuffle")
    if r is None or r["state"] in ("complete", "void"):
        if state["piles"]["drawn_in_error"]:
            return "the dealer's word on the card drawn in error: cardctl round drawn-in-error exposed|unexposed"
        return "the next round: cardctl round open"
    if r["held"] is not None:
        return f"the round is held ({in_cardctl_words(r['held'])}): cardctl status"
    if r["next"] is not None:
        return None
    if r["turn"] is not None:
        box = r["turn"][1]
        return f"box {box} decides: cardctl round act {box} hit|stand|double|split|surrender"
    if r["state"] == "insurance":
        return ("insurance is offered: cardctl round insure BOX PLAYER AMOUNT for each who takes it, then "
                "cardctl round close-insurance")
    return f"the round is in {r['state'].replace('_', ' ')}: cardctl status"


@sim_group.command("unload-shoe")
@click.option("--file", "counts_file", metavar="FILE",
              help="write the count there, as cardctl shoe remainder --file reads it (- for stdout)")
@json_option
def sim_unload_shoe(counts_file: str | None, as_json: bool) -> None:
    """The dealer takes the undealt stub out of a complete shoe, back to the simulated shuffler,
    which counts it per card: the count for the reconciliation (cardctl shoe remainder).

    \b
    Example:
      cardctl sim unload-shoe
      cardctl sim unload-shoe --file stub.json && cardctl shoe remainder --file stub.json
    """
    if counts_file is not None and counts_file != "-":
        check_output_directory(Path(counts_file), "--file")
    with simulation("sim unload-shoe") as (client, _):
        record = command_record(client, "sim_unload_shoe")
    result = record["data"]["result"]
    returned = dict(sorted(result["returned"].items(), key=lambda item: card_order(item[0])))
    if counts_file == "-":
        json.dump(returned, sys.stdout)
        sys.stdout.write("\n")
        return
    if counts_file is not None:
        Path(counts_file).write_text(json.dumps(returned) + "\n")
    count = sum(returned.values())
    line = f"sim unload-shoe: {count} undealt card{'s' if count != 1 else ''} back to the shuffler"
    if result["unreadable"]:
        line += f" and {result['unreadable']} foreign"
    line += f" ({journal_line(record)}), counted: " + (
        f"in {counts_file}: cardctl shoe remainder --file {counts_file}" if counts_file is not None
        else " ".join(f"{card}={n}" for card, n in returned.items()))
    emit(record, as_json, lambda out: out.print(shown(line)))


def card_order(code: str) -> tuple[int, Any]:
    """A card code's place in a count shown to a person (the cards' order); a code that is no card
    after the cards."""
    try:
        return 0, Card.parse(code)
    except ValueError:
        return 1, code


# ---- faults --------------------------------------------------------------------------------

@sim_group.command("fault")
@click.argument("device", type=DeviceName())
@click.argument("code", default="jam")
@json_option
def sim_fault(device: str, code: str, as_json: bool) -> None:
    """DEVICE reports fault CODE now (default jam), as if it happened: the table sees it as a real
    one (status and watch show the device in fault). The technician clears it as a real one,
    cardctl clear-fault DEVICE CODE (a door_open clears when the door closes: cardctl sim switch
    shuffler --off door_open).

    \b
    Example:
      cardctl sim fault shuffler jam
      cardctl sim fault shoe sensor
    """
    with simulation("sim fault") as (client, _):
        record = command_record(client, "sim_fault", device=device, code=code)
    raised = record["data"]["result"]["code"]
    line = (f"sim fault: the {device} reports fault {raised} ({journal_line(record)}); once fixed: cardctl "
            f"clear-fault {device} {raised}")
    emit(record, as_json, lambda out: out.print(shown(line)))


@sim_group.command("switch")
@click.argument("device", type=DeviceName())
@click.argument("switches", nargs=-1, metavar="[NAME[=VALUE]]...")
@click.option("--off", "off", multiple=True, metavar="NAME",
              help="turn switch NAME off, back to its default (again for more)")
@json_option
def sim_switch(device: str, switches: tuple[str, ...], off: tuple[str, ...], as_json: bool) -> None:
    """Turn DEVICE's fault switches on (NAME, or NAME=VALUE) or off (--off NAME), at once: the
    simulators' switches, each with its effect, in docs/simulators.md, "Fault switches"
    (cardctl sim switches lists them, and which are on). A switch that does not exist is refused
    naming those that do; a bad value, saying what the switch takes.

    \b
    Example:
      cardctl sim switch shoe face_up_at=12
      cardctl sim switch shuffler door_open
      cardctl sim switch shuffler --off door_open
      cardctl sim switch shoe disconnect_for=2 disconnect_at=30
    """
    if not switches and not off:
        raise click.UsageError("give the switches to turn on (NAME or NAME=VALUE) or off (--off NAME); "
                               "cardctl sim switches lists them")
    with simulation("sim switch") as (client, _):
        try:
            record = command_record(client, "sim_switches", device=device, switches=" ".join(switches), off=list(off))
        except CommandRefused as exc:
            unknown = UNKNOWN_SWITCH.search(str(exc))
            if exc.code != ErrorCode.BAD_ARGS or unknown is None:
                raise
            # the daemon's line is cut to an ERROR's length before its list ends: the device's own, whole
            known = command_record(client, "sim_switches", device=device)["data"]["result"]["known"]
            raise CliError(f"sim switch: no fault switch {unknown[1]} on the {device}; its switches: "
                           f"{', '.join(known)} (docs/simulators.md, \"Fault switches\")", EXIT_USAGE) from None
    result = record["data"]["result"]
    changed = ", ".join(f"{name} off" if name in off else switch_text(name, value)
                        for name, value in result["switches"].items())
    line = f"sim switch: {device}: {changed} ({journal_line(record)}); on now: {on_text(result['on'])}"
    emit(record, as_json, lambda out: out.print(shown(line)))


@sim_group.command("switches")
@click.argument("device", type=DeviceName(), required=False)
@json_option
def sim_switches(device: str | None, as_json: bool) -> None:
    """Every fault switch of the simulated devices (or of DEVICE), and which are on, with their
    values ("-": a switch that device does not honour). Each device is asked with a sim_switches
    that changes nothing, journaled as every command is.

    \b
    Example:
      cardctl sim switches
      cardctl sim switches shoe --json
    """
    found: dict[str, dict[str, Any]] = {}
    with simulation("sim switches") as (client, _):
        for name in (device,) if device else SIM_DEVICES:
            found[name] = command_record(client, "sim_switches", device=name)["data"]["result"]
    document = {name: {"on": result["on"], "known": result["known"]} for name, result in found.items()}

    def render(out: Console) -> None:
        table = Table(title="fault switches (docs/simulators.md)", title_justify="left")
        table.add_column("switch")
        for name in found:
            table.add_column(name)
        for switch in merged([result["known"] for result in found.values()]):
            table.add_row(*cells(switch, *(value_text(result["on"][switch]) if switch in result["on"] else
                                           "off" if switch in result["known"] else "-" for result in found.values())))
        out.print(table)
    emit(document, as_json, render)


def merged(lists: list[list[str]]) -> list[str]:
    """The names of every list, each once, in the lists' own order: one device's switches among the
    other's where the simulators list them (a shoe-only switch after the switch before it)."""
    every: list[str] = []
    for names in lists:
        for i, name in enumerate(names):
            if name not in every:
                every.insert(every.index(names[i - 1]) + 1 if i else 0, name)
    return every


def value_text(value: Any) -> str:
    """A switch's value as its text form has it: on (a switch without a value), cards with commas."""
    if value is True:
        return "on"
    if value is False:
        return "off"
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def switch_text(name: str, value: Any) -> str:
    """``door_open``, ``door_open=off``, ``face_up_at=12``, ``face_up_at=off`` (back to its default)."""
    if value is True:
        return name
    if value is None or value is False:
        return f"{name}=off"
    return f"{name}={value_text(value)}"


def on_text(on: dict[str, Any]) -> str:
    return " ".join(switch_text(name, value) for name, value in on.items()) or "none"


COMMANDS = (sim_group,)
