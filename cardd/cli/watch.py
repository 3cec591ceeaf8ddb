"""``cardctl watch``: the live view of the table a supervisor leaves open — devices and their
link, the shoe, the round with every box, hand and total, holds, alarms, cards exposed in error
(the next cards the hands take) and cards drawn in error waiting for the dealer's word, the last events.
Built from one STATE and the WATCH stream (the state is asked again after each event)."""
from __future__ import annotations

import sys
from collections import deque
from datetime import datetime
from typing import Any

import click
from rich.console import Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table

from cardd.api.client import ApiClient
from cardd.cli.common import emit_json, in_cardctl_words, json_option, money, options
from core.ctrl_c import end_like_ctrl_c
from cardd.cli.console import console
from cardd.cli.daemon_client import api_errors, daemon, to_builtins
from cardd.cli.shown import cells, shown
from cardd.cli.table import SETTLE_DRAWN_IN_ERROR

#: how many of the latest events the view keeps
LAST_EVENTS = 8
LINK_STYLE = {"up": "green", "down": "red"}


def view(release: str, state: dict[str, Any], events: deque[dict[str, Any]], fill: bool = True) -> RenderableType:
    """One frame of the view from a STATE and the latest events; its tables and panels as wide as
    the terminal with ``fill``, else as their content. Every text of the daemon's, a device's or a
    person's is shown as text (cardd.cli.shown), in the view's styles alone."""
    header = shown(f"cardd table — {release} — rules {state['rules']} — journal seq {state['seq']} — "
                   f"{datetime.now():%H:%M:%S}", style="bold")
    devices = Table(expand=fill, title="devices", title_justify="left")
    for column in ("device", "link", "state", "model", "serial", "firmware"):
        devices.add_column(column)
    for name, d in state["devices"].items():
        ident = d.get("ident") or {}
        devices.add_row(*cells(name, shown(d["link"], style=LINK_STYLE.get(d["link"], "yellow")), d["state"],
                               ident.get("model", "-"), ident.get("serial", "-"), ident.get("firmware", "-")))
    shoe = state["shoe"]
    shoe_line = shown(f"shoe {shoe['state']}: {shoe['cards_out']} of {shoe['cards_in_shoe']} out, "
                      f"penetration {shoe['penetration']:.0%}, rounds {state['rounds_started']}"
                      + (", LAST ROUND" if shoe.get("last_round") else ""))
    parts: list[RenderableType] = [header, devices, shoe_line, round_view(state.get("round"), fill)]
    trouble = Table(expand=fill, title="holds, alarms and cards exposed or drawn in error", title_justify="left")
    trouble.add_column("what")
    trouble.add_column("detail")
    for hold, why in state["holds"].items():
        trouble.add_row(*cells(shown(f"HOLD {hold}", style="yellow"), in_cardctl_words(why)))
    for alarm in state["alarms"]:
        trouble.add_row(*cells(shown(f"ALARM {alarm.get('id')} {alarm.get('reason', '')}", style="bold red"),
                               in_cardctl_words(alarm.get("message", ""))))
    exposed = state["piles"]["pending"]
    if exposed:  # seen already: which cards the next hands take
        trouble.add_row(*cells(shown("EXPOSED IN ERROR", style="yellow"),
                               f"{', '.join(exposed)}: used as the next cards, in this order"))
    if shoe.get("next_shoe_held"):  # the shuffler's next shoe waits for a supervisor
        trouble.add_row(*cells(shown("NEXT SHOE HELD", style="yellow"), in_cardctl_words(shoe["next_shoe_held"])))
    waiting = state["piles"]["drawn_in_error"]
    if waiting:  # no round opens until the dealer says whether each was seen
        trouble.add_row(*cells(shown("DRAWN IN ERROR", style="yellow"),
                               f"{', '.join(waiting)}: waiting for the dealer ({SETTLE_DRAWN_IN_ERROR})"))
    if trouble.row_count == 0:
        trouble.add_row(shown("none", style="green"), "")
    parts.append(trouble)
    last = Table(expand=fill, title="last events", title_justify="left", show_header=False)
    for e in events:
        last.add_row(*cells(e["seq"], datetime.fromtimestamp(e["time"]).strftime("%H:%M:%S"),
                            shown(e["severity"], style="red" if e["severity"] == "alarm" else ""), e["reason"],
                            in_cardctl_words(e["message"])))
    parts.append(last)
    return Group(*parts)


def round_view(r: dict[str, Any] | None, fill: bool = True) -> RenderableType:
    if r is None:
        return Panel("no round open", title="round", expand=fill)
    title = f"round {r['id']} — {r['state']}" + (f" — HELD: {in_cardctl_words(r['held'])}" if r["held"] else "")
    if r["house_result"] is not None:
        title += f" — house {money(r['house_result'])}"
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
            notes = [n for n, on in (("stood", hand["stood"]), ("surrendered", hand["surrendered"]),
                                     ("doubled", bool(hand["doubled"]))) if on]
            if turn is not None and str(turn[1]) == box and turn[2] == hand["hand"]:
                notes.append("<- to act")
            stakes = ", ".join(f"{p} {money(a)}" for p, a in hand["stakes"].items())
            # STATE numbers a box's hands from 0; people (and the journal's messages) from 1
            table.add_row(*cells(f"box {box}", hand["hand"] + 1, " ".join(hand["cards"]), total, stakes,
                                 " ".join(notes)))
    dealer = r["dealer"]
    table.add_row(*cells("dealer", "", " ".join(dealer["cards"]),
                         ("soft " if dealer["soft"] else "") + str(dealer["total"]), "", ""))
    return Panel(table, title=shown(title), title_align="left", expand=fill)


def shown_in_view(kind: str, reason: str) -> bool:
    """The raw input records and the simulation's own moves stay out of the view: the events
    they caused say what happened."""
    return kind != "input" and not reason.startswith("SIM_")


def stdout_fd() -> int | None:
    try:
        return sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a stream without one (io.UnsupportedOperation)
        return None


def run_view(client: ApiClient, watcher: ApiClient, as_json: bool, frames: int | None) -> None:
    """Show the view (or JSON lines) until the connection ends, Ctrl-C, or ``frames`` frames."""
    state = client.state()
    events: deque[dict[str, Any]] = deque(maxlen=LAST_EVENTS)
    if as_json:
        emit_json({"class": "STATE", "state": state})
    # a reader that goes away (`cardctl watch --json | head -1`) ends the watch now, not at the
    # next event's write: the closed-stdout exit of every cardctl command (cli.common)
    stream = watcher.watch(since_seq=state["seq"], hangup_fd=stdout_fd())
    shown = 1
    if as_json:
        for event in stream:
            emit_json(to_builtins(event))
        return
    out = console()
    fill = out.is_terminal  # off one (a file) the console has no width to fill: the frame is as wide as its content
    with Live(view(client.version.release, state, events, fill), console=out, screen=out.is_terminal,
              auto_refresh=False, transient=False) as live:
        for event in stream:
            if shown_in_view(event.kind, event.reason):
                events.append(to_builtins(event))
            if watcher.pending_events:  # more are waiting: draw once they are read
                continue
            state = client.state()
            live.update(view(client.version.release, state, events, fill), refresh=True)
            shown += 1
            if frames is not None and shown >= frames:
                return


@click.command("watch")
@click.option("--frames", type=int, default=None, help="stop after this many frames (scripts, tests)")
@json_option
def watch(frames: int | None, as_json: bool) -> None:
    """Ctrl-C leaves (a kill or a closed terminal too, as Ctrl-C does: redirected to a file, the
    last frame is written). With --json: a STATE line, then one JSON line per event.

    \b
    Example:
      cardctl watch
      cardctl watch --json | jq -c 'select(.severity == "alarm")'
    """
    # SIGTERM (`timeout 2 cardctl watch > f`, a kill) ended it at once, before a redirected view wrote
    # its one frame: an empty file. It leaves as Ctrl-C does instead.
    end_like_ctrl_c()
    try:
        with daemon(timeout=None) as client, api_errors():
            watcher = ApiClient(options().socket, timeout=None)
            try:
                run_view(client, watcher, as_json, frames)
            finally:
                watcher.close()
    except KeyboardInterrupt:
        pass


COMMANDS = (watch,)
