"""The table through the daemon: ``status``, and the dealer's and supervisor's commands
(``round ...``, ``alarm clear``, ``shoe ...``, ``seat ...``, ``dealer-change``). A refused command says which
role it needs: the daemon checks every role, cardctl only relays. The tracker's and the journal's
modules are imported by the commands that check an input with them, so ``status`` loads neither;
each command's one-line help is in cardd.cli.program."""
from __future__ import annotations

import json
import re
from collections import Counter
from decimal import Decimal
from typing import IO, Any, TypeVar

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cardd.api.client import ApiClient
from cardd.cli.common import EXIT_FAILURE, CliError, cardctl_words, in_cardctl_words, json_option, money
from cardd.cli.console import emit
from cardd.cli.daemon_client import api_errors, daemon, run_command, to_builtins
from cardd.cli.shown import cells, shown
from core.cards import Card
from core.errors import CarddError
from core.parse_errors import json_text_problem

F = TypeVar("F", bound=Any)


@click.command()
@json_option
def status(as_json: bool) -> None:
    """\b
    Example:
      cardctl status
      cardctl status --json | jq .shoe
    """
    with daemon() as client:
        state = client.state()
        version = client.version
    document = {"release": version.release, "protocol": version.protocol, "state": state}
    emit(document, as_json, lambda out: render_status(out, version.release, state))


def render_status(out: Console, release: str, state: dict[str, Any]) -> None:
    """Every text of the daemon's, a device's or a person's shown as text (cardd.cli.shown)."""
    out.print(Text.assemble(shown(release, style="bold"),
                            shown(f" — rules {state['rules']}, journal seq {state['seq']}")))
    devices = Table(title="devices", title_justify="left")
    for column in ("device", "link", "state", "model", "serial", "firmware"):
        devices.add_column(column)
    for name, d in state["devices"].items():
        ident = d.get("ident") or {}
        devices.add_row(*cells(name, d["link"], d["state"], ident.get("model", "-"), ident.get("serial", "-"),
                               ident.get("firmware", "-")))
    out.print(devices)
    for name, d in state["devices"].items():
        fault = fault_line(name, d)
        if fault is not None:
            out.print(shown(fault, style="red"))
    shoe = state["shoe"]
    out.print(shown(f"shoe: {shoe['state']}, {shoe['cards_out']} of {shoe['cards_in_shoe']} cards out "
                    f"({shoe['penetration']:.0%} penetration)"))
    entry = entry_line(state)
    if entry is not None:
        out.print(shown(entry, style="yellow"))
    next_shoe = next_shoe_line(shoe)
    if next_shoe is not None:
        out.print(shown(next_shoe, style="yellow" if shoe.get("next_shoe_held") else ""))
    r = state["round"]
    out.print(shown("round: none" if r is None else
                    f"round {r['id']}: {r['state']}" + (f" HELD ({in_cardctl_words(r['held'])})" if r["held"] else "")
                    + (f", house {money(r['house_result'])}" if r["house_result"] is not None else "")))
    if r is not None and (r["boxes"] or r["wagers"]):
        out.print(hands_table(r))
        results = results_line(r)
        if results is not None:
            out.print(shown(results))
    for hold, why in state["holds"].items():
        out.print(shown(f"hold {hold}: {in_cardctl_words(why)}", style="yellow"))
    exposed = state["piles"]["pending"]  # seen already: each the next card a hand takes (deal-tracking.md step 9)
    if exposed:
        out.print(shown(f"exposed in error, used as the next cards in this order: {', '.join(exposed)}",
                        style="yellow"))
    waiting = state["piles"]["drawn_in_error"]
    if waiting:
        out.print(shown(f"drawn in error, waiting for the dealer: {', '.join(waiting)} ({SETTLE_DRAWN_IN_ERROR})",
                        style="yellow"))
    print_alarms(out, state["alarms"])
    out.print(retention_line(state.get("retention")))
    host_key = state.get("host_key")
    if host_key:  # compared with what a device shows of the host it was enrolled with
        out.print(f"host key: {host_key['fingerprint']}")
    for trust in (state.get("device_trust") or {}).values():  # a 1.1 device: taken unauthenticated
        if trust.get("warning"):
            out.print(shown(trust["warning"], style="yellow"))
    floor = floor_export_line(state.get("export"))
    if floor is not None:
        out.print(floor)


def fault_line(name: str, device: dict[str, Any], between: str = " in fault: ") -> str | None:
    """A device in fault (STATE's ``devices``): its code, where, the device's words, and what ends
    it in cardctl's words; None when it is not in fault."""
    if device["state"] != "fault":
        return None
    code = device.get("fault") or "unknown"
    line = f"{name}{between}{code}"
    if device.get("fault_position"):
        line += f" at position {device['fault_position']}"
    detail = device.get("fault_detail")
    if detail and detail.lower().replace(" ", "_") != code:  # a detail that adds to the code
        line += f" ({device['fault_detail']})"
    ends = device.get("fault_ends")
    return line + (f": {in_cardctl_words(ends)}" if ends else "")


def entry_line(state: dict[str, Any]) -> str | None:
    """The unreadable card the dealer must name (STATE's ``awaiting_entry``), and the reads that wait
    behind it; None when none waits."""
    index = state.get("awaiting_entry")
    if index is None:
        return None
    line = f"unreadable card #{index} waits for the dealer: cardctl shoe enter-card CARD"
    behind = state.get("reads_behind_entry") or 0
    if behind:
        line += f" ({behind} card{'s' if behind != 1 else ''} read after it wait{'s' if behind == 1 else ''} for it)"
    return line


def hand_notes(hand: dict[str, Any], turn: bool = False) -> list[str]:
    """What a hand is now (bust, blackjack, stood, doubled, surrendered, to act) and, once settled,
    each player's result on it: a note each."""
    notes = [name for name, on in (("bust", hand.get("bust")), ("blackjack", hand.get("blackjack")),
                                   ("surrendered", hand["surrendered"]), ("doubled", bool(hand["doubled"])))
             if on]
    if hand["stood"] and not (hand.get("bust") or hand.get("blackjack") or hand["surrendered"]):
        notes.insert(0, "stood")  # a bust, blackjack or surrendered hand is closed: "stood" says nothing more
    if turn:
        notes.append("<- to act")
    for result in hand.get("results", []):
        kind = "" if result["kind"] in ("main", result["outcome"]) else f" {result['kind'].replace('_', ' ')}"
        notes.append(f"{result['player']}{kind} {result['outcome']} {signed(result['net'])}")
    return notes


def signed(cents: int | str) -> str:
    """A result as a person reads one: ``+25.00``, ``-10.00``, ``0.00``."""
    text = money(cents)
    return text if text.startswith("-") or text == money(0) else f"+{text}"


def hands_table(r: dict[str, Any], fill: bool = False) -> Table:
    """STATE's round: every box's bets, hands with cards, totals and what each hand is, the dealer's."""
    table = Table(expand=fill)
    for column in ("box", "hand", "cards", "total", "stakes", "notes"):
        table.add_column(column)
    turn = r.get("turn")
    for box, wagers in r["wagers"].items():
        if box not in r["boxes"]:  # bets placed, no card yet
            stakes = ", ".join(f"{p} {money(a)}" for p, a in wagers.items())
            table.add_row(*cells(f"box {box}", "", "", "", stakes, ""))
    for box, hands in r["boxes"].items():
        for hand in hands:
            total = ("soft " if hand["soft"] else "") + str(hand["total"])
            to_act = turn is not None and str(turn[1]) == box and turn[2] == hand["hand"]
            stakes = ", ".join(f"{p} {money(a)}" for p, a in hand["stakes"].items())
            # STATE numbers a box's hands from 0; people (and the journal's messages) from 1
            table.add_row(*cells(f"box {box}", hand["hand"] + 1, " ".join(hand["cards"]), total, stakes,
                                 ", ".join(hand_notes(hand, to_act))))
    dealer = r["dealer"]
    notes = [name for name in ("bust", "blackjack") if dealer.get(name)]
    table.add_row(*cells("dealer", "", " ".join(dealer["cards"]),
                         ("soft " if dealer["soft"] else "") + str(dealer["total"]), "", ", ".join(notes)))
    return table


def results_line(r: dict[str, Any]) -> str | None:
    """A settled round's result per player (and the bets of a box, not a hand: insurance, pairs);
    None before it is settled."""
    players = r.get("player_results")
    if players is None:
        return None
    line = "results: " + (", ".join(f"{p} {signed(net)}" for p, net in players.items()) or "no bets")
    side = [f"{b['player']} {b['kind'].replace('_', ' ')} {b['outcome']} {signed(b['net'])}"
            for b in r.get("box_results", [])]
    return line + (f" (of which {', '.join(side)})" if side else "")


def next_shoe_line(shoe: dict[str, Any]) -> str | None:
    """What waits for the next shoe (STATE's ``shoe.next_shoe_*``), in cardctl's words; None when nothing."""
    held, waiting = shoe.get("next_shoe_held"), shoe.get("next_shoe_waiting") or 0
    reports = f"{waiting} device report{'s' if waiting != 1 else ''} of it wait" if waiting else "nothing waits yet"
    if held:
        return f"next shoe held ({reports}): {in_cardctl_words(held)}"
    if waiting:
        return f"next shoe: {reports} for this shoe's end"
    return None


def retention_line(retention: dict[str, Any] | None) -> Text:
    """STATE's ``retention`` in one line (docs/api.md, "STATE"); None until the daemon's first prune."""
    if retention is None:
        return shown("retention: not checked yet (the daemon's first prune runs just after start)")
    line = (f"retention ({retention['horizon_days']}-day horizon): pruned through seq {retention['pruned_through']}, "
            f"exported through seq "
            f"{retention['exported_through']}, {retention['unexported']} record(s) not exported")
    if retention["oldest_unexported"] is not None:
        line += f" (oldest {retention['oldest_unexported']})"
    if retention["unexported_past_horizon"]:
        return shown(f"{line}: past the horizon, export them (cardctl log --export FILE)", style="yellow")
    return shown(line)


def floor_export_line(export: dict[str, Any] | None) -> Text | None:
    """STATE's ``export`` (the journal to the floor's brokers) in one line; None when export is off."""
    if export is None:
        return None
    where = f"{export['site']}/{export['table']}"
    backlog = f"delivered through seq {export['delivered_through']}, {export['backlog']} waiting"
    if export["oldest_undelivered_s"] is not None and export["backlog"]:
        backlog += f" (oldest {export['oldest_undelivered_s']:.1f} s)"
    if export["connected"]:
        return shown(f"floor export {where}: connected to {export['broker']}, {backlog}")
    problem = export["problem"] or "connecting"
    return shown(f"floor export {where}: NOT CONNECTED ({problem}), {backlog}", style="yellow")


def table_command(name: str, as_json: bool, outcomes: tuple[str, ...] = (), failures: tuple[str, ...] = (),
                  **args: Any) -> dict[str, Any] | None:
    """Send table command ``name``; print the journal record it made (or the one-line refusal).
    With ``outcomes``, also what it led to (where the card went, whether the shoe reconciled):
    the first record after its own with one of these reasons, the record's ``outcome`` with
    --json; returned (None without ``outcomes``). An outcome whose reason is one of ``failures``
    is not printed for a person (no 'ok' line above a failure): the caller says what failed."""
    words = cardctl_words(name)  # before sending: nothing after the daemon applied it may fail for cardctl's own table
    with daemon() as client:
        record = run_command(client, name, **args)
        outcome = outcome_of(client, record["seq"], outcomes) if outcomes else None
        if outcome is not None and outcome["reason"] in failures and not as_json:
            return outcome
    lines = [f"{words}: ok (journal seq {record['seq']})"] + ([in_cardctl_words(outcome["message"])] if outcome else [])
    emit(record if outcome is None else {**record, "outcome": outcome}, as_json,
         lambda out: print_lines(out, lines))
    return outcome


def print_lines(out: Console, lines: list[str]) -> None:
    """Lines holding a journal's message (a name, a device's text), each shown as text."""
    for line in lines:
        out.print(shown(line))


def outcome_of(client: ApiClient, seq: int, reasons: tuple[str, ...]) -> dict[str, Any]:
    """The first record after ``seq`` with one of ``reasons``: the table applies a command and
    journals what it caused in the same commit, before the ACK, so it is already there."""
    with api_errors():
        after = client.log(from_seq=seq + 1, limit=OUTCOME_WINDOW).records
    for record in after:
        if record.reason in reasons:
            return dict(to_builtins(record))
    raise CliError(f"journal seq {seq}: no {' or '.join(reasons)} record follows the command (see cardctl log)")


#: how many records after a command's own are searched for what it caused (the same commit's,
#: with at most a few device reads that came in between)
OUTCOME_WINDOW = 50


def caused_by(client: ApiClient, seq: int) -> list[dict[str, Any]]:
    """The events the command journaled at ``seq`` caused: the table journals them right behind
    its input, in the same commit (before the ACK), up to the next input: a record that is no
    event, or a card read's event (which carries its read)."""
    from cardd.journal import INPUT_KEY, KIND_EVENT  # the journal's, only where a command's outcome is read
    with api_errors():
        after = client.log(from_seq=seq + 1, limit=OUTCOME_WINDOW).records
    caused = []
    for record in after:
        if record.kind != KIND_EVENT or INPUT_KEY in record.data:
            break
        caused.append(dict(to_builtins(record)))
    return caused


# ---- round ---------------------------------------------------------------------------------

@click.group("round")
def round_group() -> None:
    """\b
    Example:
      cardctl round open && cardctl round bet 1 p1 25.00 && cardctl round no-more-bets
    """


#: the largest amount in cents the API carries (a 64-bit integer)
MAX_CENTS = 2**63 - 1


#: an amount as a person types it: units, with at most 2 decimals (``1e3``, ``1_0``, ``+5``, ``.5``
#: and ``１０`` are none, though Decimal takes them)
AMOUNT = re.compile(r"[0-9]+(\.[0-9]{1,2})?")
#: a negative number where an amount is expected (``-5``, ``-2.50``): click would read it as an option
NEGATIVE = re.compile(r"-([0-9]+(\.[0-9]*)?|\.[0-9]+)")
#: what an amount is, said with each refusal of one
AMOUNT_FORM = "units with at most 2 decimals, e.g. 25 or 25.50"


class Cents(click.ParamType):
    """An amount in units (25 or 25.50), as the API's cents: read strictly (:data:`AMOUNT`), so it
    is exact, and refused rather than rounded when it is not a whole number of cents."""
    name = "amount"

    def __init__(self, zero: bool = False) -> None:
        #: 0 is an amount too (a new stake of 0 withdraws the bet)
        self.zero = zero

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value)
        positive = "0 or more" if self.zero else "positive (more than 0)"
        if NEGATIVE.fullmatch(text):
            self.fail(f"{text}: an amount must be {positive}", param, ctx)
        if AMOUNT.fullmatch(text) is None:
            whole, point, places = text.partition(".")
            if point and AMOUNT.fullmatch(whole) and places.isascii() and places.isdigit():
                self.fail(f"{text}: at most 2 decimals (cents)", param, ctx)
            self.fail(f"{text!r} is not an amount ({AMOUNT_FORM})", param, ctx)
        cents = int(Decimal(text) * 100)  # exact: at most 2 places
        if cents == 0 and not self.zero:
            self.fail(f"{text}: an amount must be {positive}", param, ctx)
        if cents > MAX_CENTS:  # the table's limits are the daemon's to check; this is what the API carries
            self.fail(f"{text}: too large for an amount", param, ctx)
        return cents


class AmountCommand(click.Command):
    """A command that takes an amount as an argument: a negative number there (``round bet 1
    alice -5``) reaches the amount's type, which says it must be positive, where click would take it
    for an option and say "No such option '-5'". Only when the command line holds one: otherwise an
    unknown option is click's usage error as everywhere."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        before_end = args[:args.index("--")] if "--" in args else args
        if any(NEGATIVE.fullmatch(arg) for arg in before_end):
            ctx.ignore_unknown_options = True  # click's parser then passes "-5" on as an argument
        return super().parse_args(ctx, args)


def stake_arguments(fn: F) -> F:
    """BOX PLAYER AMOUNT, the arguments of a bet and of insurance."""
    for decorator in reversed((click.argument("box", type=int), click.argument("player"),
                               click.argument("amount", type=Cents()))):
        fn = decorator(fn)
    return fn


@round_group.command("open")
@json_option
def round_open(as_json: bool) -> None:
    """Open a round for bets (dealer). Refused while a card drawn in error waits for the
    dealer: ``cardctl round drawn-in-error`` settles it first.

    \b
    Example:
      cardctl round open
    """
    try:
        table_command("open_round", as_json)
    except CliError as exc:
        waiting = drawn_in_error_waiting()  # named from the table's state, not from the refusal's wording
        if not waiting:
            raise
        # the daemon's line (in cardctl's words: run_command) names the command; the cards are added
        raise CliError(f"{exc} (waiting: {', '.join(waiting)})", exc.exit_code) from None


def drawn_in_error_waiting() -> list[str]:
    """The cards drawn in error that wait for the dealer's word (STATE's pile), oldest first; none
    if the daemon cannot say."""
    try:
        with daemon() as client, api_errors():
            pile = client.state().get("piles", {}).get("drawn_in_error", [])
    except CliError:
        return []
    return [str(card) for card in pile]


#: the command that settles a card drawn in error (named where one waits)
SETTLE_DRAWN_IN_ERROR = "cardctl round drawn-in-error exposed|unexposed"
#: the dealer's two answers about a card drawn in error -> the API's ``exposed``
DRAWN_IN_ERROR_CHOICES = {"exposed": True, "unexposed": False}


@round_group.command("drawn-in-error")
@click.argument("seen", metavar="exposed|unexposed", type=click.Choice(tuple(DRAWN_IN_ERROR_CHOICES)))
@json_option
def round_drawn_in_error(seen: str, as_json: bool) -> None:
    """The dealer's word on a card drawn in error (dealer): a card drawn after the dealer's
    finished hand, or between rounds. exposed: the players saw it, it is discarded; unexposed:
    nobody saw it, it is kept face down as the next round's burn card (the house rules' procedure,
    docs/deal-tracking.md). No round opens while one waits; several wait in the order they were
    drawn, and each answer settles the oldest. Prints where the card went.

    \b
    Example:
      cardctl round drawn-in-error exposed
      cardctl round drawn-in-error unexposed --json
    """
    table_command("drawn_in_error", as_json, ("CARD_DRAWN_IN_ERROR",), exposed=DRAWN_IN_ERROR_CHOICES[seen])


def stake_command(name: str, command: str, doc: str) -> click.Command:
    """``round NAME BOX PLAYER AMOUNT``: the table command ``command`` with a player's stake."""
    @round_group.command(name, help=doc, cls=AmountCommand)
    @stake_arguments
    @json_option
    def run(box: int, player: str, amount: int, as_json: bool) -> None:
        table_command(command, as_json, box=box, player=player, amount=amount)
    return run


round_bet = stake_command("bet", "place_bet", """Place PLAYER's bet of AMOUNT (in units, e.g. 25.50) on BOX (dealer).

    \b
    Example:
      cardctl round bet 3 alice 25
    """)
round_insure = stake_command("insure", "insure", """PLAYER on BOX takes insurance of AMOUNT (dealer).

    \b
    Example:
      cardctl round insure 1 alice 12.50
    """)


round_pairs = stake_command("pairs", "pairs_bet", """PLAYER bets AMOUNT on Blackjack Pairs at BOX, where he has a
    wager, while bets are open (dealer), where the house rules offer it ([side_bets.blackjack_pairs]);
    a second bet adds to it.

    \b
    Example:
      cardctl round pairs 1 alice 5
    """)


@round_group.command("even-money")
@click.argument("box", type=int)
@click.argument("player")
@json_option
def round_even_money(box: int, player: str, as_json: bool) -> None:
    """PLAYER's blackjack on BOX takes even money against the dealer's ace, while insurance is
    offered (dealer; where insurance.blackjack_insured_as = "even_money" an insured blackjack is
    paid so).

    \b
    Example:
      cardctl round even-money 2 carol
    """
    table_command("even_money", as_json, box=box, player=player)


@round_group.command("reduce", cls=AmountCommand)
@click.argument("box", type=int)
@click.argument("player")
@click.argument("new_stake", type=Cents(zero=True))
@json_option
def round_reduce(box: int, player: str, new_stake: int, as_json: bool) -> None:
    """PLAYER lowers his bet on BOX to NEW_STAKE, the whole bet he keeps there, not the cut; 0
    withdraws it (dealer, while bets are open). Where the box owner has priority
    (table.owner_priority_at_maximum), a
    raise that takes his box over its maximum is announced, and no more bets refused, naming each
    co-player's cut and the stake to reduce to ("bob by 600.00, to 1400.00": round reduce 1 bob 1400).

    \b
    Example:
      cardctl round reduce 1 bob 1400
      cardctl round reduce 1 bob 0
    """
    table_command("reduce_bet", as_json, box=box, player=player, amount=new_stake)


@round_group.command("no-more-bets")
@json_option
def round_no_more_bets(as_json: bool) -> None:
    """Close the bets: the deal may start (dealer).

    \b
    Example:
      cardctl round no-more-bets
    """
    table_command("no_more_bets", as_json)


@round_group.command("close-insurance")
@json_option
def round_close_insurance(as_json: bool) -> None:
    """No more insurance: the dealer peeks (dealer).

    \b
    Example:
      cardctl round close-insurance
    """
    table_command("close_insurance", as_json)


class CoPlayerAnswer(click.ParamType):
    """``bob=joins``, ``bob=joins:12.50``, ``bob=declines``, ``bob=declines:2`` -> the API's
    co_players item (``{"player", "joins", "amount", "stays_on"}``); the daemon checks it against
    the hand and the rules."""
    name = "co-player"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> dict[str, Any]:
        if isinstance(value, dict):
            return value
        player, equals, answer = str(value).partition("=")
        choice, colon, detail = answer.partition(":")
        if not player or not equals or choice not in ("joins", "declines") or (colon and not detail):
            self.fail(f"{value!r}: NAME=joins[:AMOUNT] or NAME=declines[:HAND], e.g. bob=joins", param, ctx)
        item: dict[str, Any] = {"player": player, "joins": choice == "joins"}
        if detail and choice == "joins":
            item["amount"] = Cents().convert(detail, param, ctx)
        elif detail:
            if detail not in ("1", "2"):
                self.fail(f"{value!r}: the hand his bet stays on is 1 or 2", param, ctx)
            item["stays_on"] = int(detail)
        return item


@round_group.command("act")
@click.argument("box", type=int)
@click.argument("action", type=click.Choice(["hit", "stand", "double", "split", "surrender"]))
@click.option("--player", help="the box owner (required by the rules when the box has co-players)")
@click.option("--amount", type=Cents(),
              help="the owner's double for less, where the house rules allow it (play.double_for_less: from the "
                   "table minimum up to his stake); a split is always for the stake")
@click.option("--co-player", "co_players", type=CoPlayerAnswer(), multiple=True,
              metavar="NAME=joins[:AMOUNT]|NAME=declines[:HAND]",
              help="a co-player's answer to the owner's double or split, once for each co-player on the hand: "
                   "joins (his stake again; :AMOUNT a double for less, where allowed) or declines (a declined "
                   "split: :1 or :2, the hand his bet stays on, where the rules let him choose)")
@json_option
def round_act(box: int, action: str, player: str | None, amount: int | None,
              co_players: tuple[dict[str, Any], ...], as_json: bool) -> None:
    """The player on BOX acts: hit, stand, double, split or surrender (dealer). On a box with
    co-players the owner decides (--player), and each co-player joins or declines his double or
    split (--co-player).

    \b
    Example:
      cardctl round act 3 hit --player alice
      cardctl round act 1 double --player alice --co-player bob=joins --co-player carol=declines
    """
    args: dict[str, Any] = {"box": box, "action": action}
    if player is not None:
        args["player"] = player
    if amount is not None:
        args["amount"] = amount
    if co_players:
        args["co_players"] = list(co_players)
    table_command("act", as_json, **args)


@round_group.command("continue")
@json_option
def round_continue(as_json: bool) -> None:
    """Release a held round and carry on (supervisor).

    \b
    Example:
      cardctl round continue
    """
    table_command("resume", as_json)


@round_group.command("redeal")
@json_option
def round_redeal(as_json: bool) -> None:
    """Void the live round, held or not, and redeal it (supervisor): a re-deal the supervisor declares.

    \b
    Example:
      cardctl round redeal
    """
    table_command("redeal", as_json)


@round_group.command("placement-error")
@click.argument("layout", nargs=-1, metavar="[CARD=BOX|CARD=dealer]...")
@json_option
def round_placement_error(layout: tuple[str, ...], as_json: bool) -> None:
    """A card placed on the wrong box in the initial deal (supervisor): the layout is reconstructed,
    and the deal goes on from it. Without a layout, the cards stay where the deal order put them;
    with one, the supervisor confirms where each card dealt so far lies: every one of them, once,
    in the order they were dealt, on a box with a wager (two at most) or the dealer (one). Checked
    before it is sent with the daemon's own decoding; prints the PLACEMENT_ERROR line.

    \b
    Example:
      cardctl round placement-error
      cardctl round placement-error 9S=3 KD=1 4C=dealer
    """
    args: dict[str, Any] = {} if not layout else {"assignments": parse_layout(layout)}
    table_command("placement_error", as_json, ("PLACEMENT_ERROR",), **args)


@round_group.command("cards-to-box-without-wager")
@json_option
def round_cards_to_box_without_wager(as_json: bool) -> None:
    """Cards were dealt to a box without a wager (supervisor): every card in play, those exposed in
    error too, goes back on top of the shoe and is dealt again in the same order, the bets as placed
    (the table re-reads them). Prints the CARDS_TO_BOX_WITHOUT_WAGER line.

    \b
    Example:
      cardctl round cards-to-box-without-wager
    """
    table_command("cards_to_box_without_wager", as_json, ("CARDS_TO_BOX_WITHOUT_WAGER",))


#: what placement-error's layout is, said with each refusal of one
LAYOUT_FORM = "each dealt card with where it lies, CARD=BOX or CARD=dealer, e.g. 9S=3 KD=1 4C=dealer"


def parse_layout(tokens: tuple[str, ...]) -> list[Any]:
    """``9S=3 4C=dealer`` -> placement_error's ``assignments`` in the API's JSON form (a card and its
    target, ``["box", 3, 0]`` or ``["dealer", None, None]``: in the initial deal a box has one hand),
    checked with the daemon's own decoding so that a layout it would refuse to read is a usage error
    here, and nothing is sent (or journaled). Which cards and boxes are right is the table's to say."""
    from devices.tracker.inputs import InputDecodeError, PlacementError, decode_field  # the tracker's, here alone
    assignments: list[Any] = []
    for token in tokens:
        card, equals, place = token.partition("=")
        if place.isascii() and place.isdigit() and int(place) > 0:
            target: list[Any] = ["box", int(place), 0]
        elif place == "dealer":
            target = ["dealer", None, None]
        else:
            raise click.BadParameter(f"{token!r}: {'no place given' if not equals else f'{place!r} is no box'} "
                                     f"({LAYOUT_FORM})", param_hint="CARD=BOX")
        if not card.strip():
            raise click.BadParameter(f"{token!r}: no card given ({LAYOUT_FORM})", param_hint="CARD=BOX")
        try:  # here, not by the decoder below, whose line would say 'not a card' twice
            parsed = Card.parse(card)
        except CarddError as exc:
            raise click.BadParameter(f"{token!r}: {exc} ({LAYOUT_FORM})", param_hint="CARD=BOX") from None
        assignments.append([str(parsed), target])
    try:
        decode_field(PlacementError, "assignments", assignments, "placement_error.assignments")
    except InputDecodeError as exc:
        raise click.BadParameter(f"{in_layout_words(str(exc), tokens)} ({LAYOUT_FORM})", param_hint="CARD=BOX") \
            from None
    return assignments


def in_layout_words(problem: str, tokens: tuple[str, ...]) -> str:
    """The decoder's ``placement_error.assignments[1][0]: not a card: 'XS' (...)`` as the token typed."""
    where = re.match(r"placement_error\.assignments\[(\d+)\](?:\[\d+\])*: ", problem)
    return problem if where is None else f"{tokens[int(where[1])]!r}: {problem[where.end():]}"


# ---- alarm, shoe ---------------------------------------------------------------------------

@click.group("alarm", invoke_without_command=True)
@json_option
@click.pass_context
def alarm_group(ctx: click.Context, as_json: bool) -> None:
    """\b
    Example:
      cardctl alarm
      cardctl alarm clear 3
    """
    if ctx.invoked_subcommand is not None:
        return
    with daemon() as client:
        alarms = client.state()["alarms"]
    emit({"alarms": alarms}, as_json, lambda out: print_alarms(out, alarms))


def print_alarms(out: Console, alarms: list[dict[str, Any]]) -> None:
    """STATE's open alarms, one line each (``status`` and ``alarm``)."""
    for alarm in alarms:
        out.print(shown(f"alarm {alarm.get('id')}: {alarm.get('reason')} {in_cardctl_words(alarm.get('message', ''))}",
                        style="red"))
    if not alarms:
        out.print("alarms: none")


@alarm_group.command("clear")
@click.argument("alarm_id", type=int)
@json_option
def alarm_clear(alarm_id: int, as_json: bool) -> None:
    """Clear alarm ALARM_ID once its cause is dealt with (supervisor).

    \b
    Example:
      cardctl alarm clear 3
    """
    table_command("clear_alarm", as_json, alarm_id=alarm_id)


@click.group("shoe")
def shoe_group() -> None:
    """\b
    Example:
      cardctl shoe void
      cardctl shoe remainder --file stub.json
    """


#: what a void of the shoe is seen to do, in the order the journal has it: the live round void, the
#: alarms it closed, the shoe void, and the next shoe that took its place
VOID_EFFECTS = ("ROUND_VOID", "ALARM_CLEARED", "SHOE_VOID", "NEXT_SHOE_TAKES_OVER")


@shoe_group.command("void")
@click.option("--next-shoe", is_flag=True,
              help="void the next shoe, the one that took the place of the shoe voided last (a void without "
                   "this is refused then: it may be the last void again)")
@json_option
def shoe_void(next_shoe: bool, as_json: bool) -> None:
    """Void the whole shoe (supervisor), and say what that did: the live round void, the shoe with
    its cards out, and the next shoe if one, shuffled while this one was in play, takes its place.

    \b
    Example:
      cardctl shoe void
      cardctl shoe void --next-shoe
    """
    words = cardctl_words("void_shoe")
    with daemon() as client:
        record = run_command(client, "void_shoe", **({"next_shoe": True} if next_shoe else {}))
        caused = caused_by(client, record["seq"])
    lines = [f"{words}: ok (journal seq {record['seq']})"]
    for effect in caused:
        if effect["reason"] in VOID_EFFECTS:  # the table's own words: its way forward as cardctl's
            lines.append(in_cardctl_words(effect["message"]))
    def show(out: Console) -> None:
        for line in lines:
            out.print(shown(line))  # a journal message is text, not markup

    emit({**record, "caused": caused}, as_json, show)


@shoe_group.command("hand-shuffled")
@json_option
def shoe_hand_shuffled(as_json: bool) -> None:
    """The dealer declares a new shoe shuffled by hand (dealer), on a table whose house rules
    shuffle by hand (shoe.shuffle = "hand"): the shoe is verified, to be loaded. Refused on a table
    with a
    shuffler (cardctl shuffle), and until the last shoe is complete and reconciled, or void.

    \b
    Example:
      cardctl shoe hand-shuffled
    """
    table_command("hand_shuffled", as_json)


@shoe_group.command("shuffle-started")
@json_option
def shoe_shuffle_started(as_json: bool) -> None:
    """The dealer who loaded the shuffler and started it (dealer): named as the operator on the
    next shoe's verification record ("not recorded" without it).

    \b
    Example:
      cardctl shoe shuffle-started
    """
    table_command("shuffle_started", as_json)


class CardName(click.ParamType):
    """A card as a person types it (``QH``, ``10h``), checked as the daemon reads one, before it is
    sent: one that is no card is a usage error in cardctl's words, nothing journaled."""
    name = "card"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            return str(Card.parse(str(value)))
        except (CarddError, ValueError) as exc:
            self.fail(str(exc), param, ctx)


@shoe_group.command("enter-card")
@click.argument("card", type=CardName())
@json_option
def shoe_enter_card(card: str, as_json: bool) -> None:
    """The dealer names CARD, the card the shoe could not read (dealer): it goes where the
    unreadable card was to go, and the round stays flagged (UNREADABLE_CARD). Prints where it went.

    \b
    Example:
      cardctl shoe enter-card QH
    """
    table_command("enter_card", as_json, ("CARD_ENTERED_BY_DEALER",), card=card)


@shoe_group.command("remainder")
@click.argument("cards", nargs=-1, metavar="[CARD[=N]]...")
@click.option("--file", "counts_file", type=click.File("r"), metavar="FILE",
              help='the count as a JSON object, card -> number ({"AS": 2, "7H": 1}); - reads stdin')
@json_option
def shoe_remainder(cards: tuple[str, ...], counts_file: IO[str] | None, as_json: bool) -> None:
    """Reconcile a complete shoe (dealer): the undealt cards behind the cut card, counted per
    card as they went back to the shuffler. Cards dealt plus these must be the verified shoe,
    card for card: RECONCILED, or RECONCILIATION_FAILED naming the missing and extra cards (an
    alarm a supervisor clears; exit 1). Give each card with its count (AS=2; a card alone is one,
    and repeats add up), or the whole count in a JSON file. Refused until the shoe is complete.

    \b
    Example:
      cardctl shoe remainder AS=2 7H KD=3
      cardctl shoe remainder --file stub.json
    """
    if bool(cards) == (counts_file is not None):
        raise click.UsageError("give the counted cards (CARD=N ...) or --file FILE, one of the two")
    returned = read_counts(counts_file) if counts_file is not None else parse_counts(cards)
    outcome = table_command("shoe_remainder", as_json, ("RECONCILED", "RECONCILIATION_FAILED"),
                            ("RECONCILIATION_FAILED",), returned=returned)
    if outcome is not None and outcome["reason"] == "RECONCILIATION_FAILED":
        raise CliError(f"{in_cardctl_words(outcome['message'])} (an alarm: a supervisor clears it, cardctl alarm)",
                       EXIT_FAILURE)


@click.group("seat")
def seat_group() -> None:
    """\b
    Example:
      cardctl seat take dave && cardctl seat ask-for-box dave
    """


def seat_command(name: str, command: str, doc: str) -> click.Command:
    """``seat NAME PLAYER``: the table command ``command`` for a player; prints its ACTION line."""
    @seat_group.command(name, help=doc)
    @click.argument("player")
    @json_option
    def run(player: str, as_json: bool) -> None:
        table_command(command, as_json, ("ACTION",), player=player)
    return run


seat_take = seat_command("take", "take_seat", """PLAYER sits down at the table (dealer).

    \b
    Example:
      cardctl seat take dave
    """)
seat_leave = seat_command("leave", "leave_seat", """PLAYER leaves the table (dealer): his request for a box, if
    any, ends.

    \b
    Example:
      cardctl seat leave dave
    """)
seat_ask_for_box = seat_command("ask-for-box", "ask_for_box", """PLAYER, seated and owning no box, asks for one
    (dealer). Prints whether the house rules have others give a box up (table.give_up_boxes).

    \b
    Example:
      cardctl seat ask-for-box dave
    """)


@click.command("dealer-change")
@json_option
def dealer_change(as_json: bool) -> None:
    """\b
    Example:
      cardctl dealer-change
    """
    table_command("dealer_change", as_json, ("DEALER_CHANGE_BURN",))


def parse_counts(tokens: tuple[str, ...]) -> dict[str, int]:
    """``AS=2 7H 7H`` -> {"AS": 2, "7H": 2}; each card checked as the daemon reads one (one typed two
    ways, ``10H`` and ``TH``, adds up), the count against the shoe the daemon's to check."""
    counts: Counter[str] = Counter()
    for token in tokens:
        card, equals, number = token.partition("=")
        # ASCII digits only: str.isdigit() also takes "²" or "①", which int() refuses
        if not card or (equals and not (number.isascii() and number.isdigit())):
            raise click.BadParameter(f"{token!r}: a card with its count, e.g. AS=2 (or AS for one)",
                                     param_hint="CARD[=N]")
        try:  # checked here as the daemon reads a card: its refusal would name the API's field
            parsed = Card.parse(card)
        except (CarddError, ValueError) as exc:
            raise click.BadParameter(f"{token!r}: {exc}", param_hint="CARD[=N]") from None
        counts[str(parsed)] += int(number) if number else 1
    return dict(counts)


#: what --file holds, said with each refusal of one
COUNTS_FILE_FORM = 'a JSON object of card -> count, each a whole number 0 or more: {"AS": 2, "7H": 1}'


def read_counts(stream: IO[str]) -> dict[str, Any]:
    """The JSON object of --file, checked here with the daemon's own decoding of shoe_remainder's
    ``returned`` and the shoe's own count check: a bad file is refused before anything is sent (the
    daemon would journal the refused command), naming the file, the card and what is allowed."""
    from devices.tracker.inputs import InputDecodeError, ShoeRemainder, decode_field  # the tracker's, here alone
    from devices.tracker.shoe import remainder_problem
    try:
        counts = json.load(stream, object_pairs_hook=_refuse_repeated_keys)
    except RepeatedKey as exc:  # json keeps the last of a repeated key: one count would vanish
        raise click.BadParameter(f"{stream.name}: {exc}", param_hint="--file") from None
    except json.JSONDecodeError as exc:
        syntax = json_text_problem(exc)
        said = f"{syntax.what}, at {syntax.where()}" if syntax.what else syntax.where()
        raise click.BadParameter(f"{stream.name}: not JSON ({said})", param_hint="--file") from None
    except UnicodeDecodeError:
        raise click.BadParameter(f"{stream.name}: not a text file", param_hint="--file") from None
    try:
        problem = remainder_problem(decode_field(ShoeRemainder, "returned", counts, stream.name))
    except InputDecodeError as exc:
        problem = str(exc)
    else:
        problem = problem and f"{stream.name}: {problem}"
    if problem:
        raise click.BadParameter(f"{problem} (the file holds {COUNTS_FILE_FORM})", param_hint="--file")
    assert isinstance(counts, dict)
    return counts


class RepeatedKey(ValueError):
    """A JSON object of --file with one key twice."""


def _refuse_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    repeated = sorted(key for key, times in Counter(key for key, _ in pairs).items() if times > 1)
    if repeated:
        raise RepeatedKey(f"{', '.join(repeated)} given more than once: give each card once, with its whole count")
    return dict(pairs)


COMMANDS = (status, round_group, alarm_group, shoe_group, seat_group, dealer_change)
