"""``cardctl watch``: the live view of the table a supervisor leaves open — devices and their
link, the shoe, the round with every box, hand and total, holds, alarms, cards exposed in error
(the next cards the hands take) and cards drawn in error waiting for the dealer's word, the last events.
Built from one STATE and the WATCH stream (the state is asked again after each event)."""
from __future__ import annotations

import contextlib
import itertools
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import click
from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from cardd.api.client import ApiClient, ClientError, ConnectionClosed, DaemonNotRunning
from cardd.cli.common import emit_json, in_cardctl_words, json_option, money, options
from core.ctrl_c import end_like_ctrl_c
from cardd.cli.console import console
from cardd.cli.daemon_client import api_errors, daemon, to_builtins
from cardd.cli.shown import cells, shown
from cardd.cli.table import (SETTLE_DRAWN_IN_ERROR, entry_line, fault_line, floor_export_line, hands_table,
                             next_shoe_line, results_line, retention_line)

#: how many of the latest events the view keeps
LAST_EVENTS = 8
LINK_STYLE = {"up": "green", "down": "red"}


def view(release: str, state: dict[str, Any], events: deque[dict[str, Any]], fill: bool = True,
         notice: str | None = None, screen: Console | None = None) -> RenderableType:
    """One frame of the view from a STATE and the latest events; its tables as wide as the terminal
    with ``fill``, else as their content. What needs a person comes first (alarms, holds, faults,
    the card to enter), so a small terminal, which crops the frame's foot, never hides it; then the
    devices, the shoe, the round, and as many of the last events as fit. On a ``screen`` too small
    for the whole frame, each line of trouble takes one line (cut short: ``cardctl status`` and
    ``cardctl alarm`` give them whole), the export line goes while nothing is past the horizon, and
    the round's table loses its rule. ``notice``: the link to cardd, when it is down or came back.
    Every text of the daemon's, a device's or a person's is shown as text (cardd.cli.shown), in
    the view's styles alone."""
    frame = _frame(release, state, events, fill, notice, compact=False)
    if screen is not None and _height(screen, frame) > screen.size.height:
        frame = _frame(release, state, events, fill, notice, compact=True)
    return frame


def _height(screen: Console, frame: RenderableType) -> int:
    return len(screen.render_lines(frame, screen.options.update(height=None), pad=False))


def _frame(release: str, state: dict[str, Any], events: deque[dict[str, Any]], fill: bool, notice: str | None,
           compact: bool) -> RenderableType:
    header = shown(f"cardd table — {release} — rules {state['rules']} — journal seq {state['seq']} — "
                   f"{datetime.now():%H:%M:%S}", style="bold")
    parts: list[RenderableType] = [header]
    if notice is not None:
        parts.append(shown(notice, style="bold yellow"))
    for line in trouble_lines(state):
        if compact:
            line.no_wrap, line.overflow = True, "ellipsis"
        parts.append(line)
    devices = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
    for _ in range(6):
        devices.add_column()
    for name, d in state["devices"].items():
        ident = d.get("ident") or {}
        devices.add_row(*cells(name, shown(d["link"], style=LINK_STYLE.get(d["link"], "yellow")), d["state"],
                               ident.get("model", "-"), ident.get("serial", "-"), ident.get("firmware", "-")))
    parts.append(devices)
    shoe = state["shoe"]
    parts.append(shown(f"shoe {shoe['state']}: {shoe['cards_out']} of {shoe['cards_in_shoe']} out, "
                       f"penetration {shoe['penetration']:.0%}, rounds {state['rounds_started']}"
                       + (", LAST ROUND" if shoe.get("last_round") else "")))
    if not shoe.get("next_shoe_held"):  # a held one is trouble, above
        next_shoe = next_shoe_line(shoe)
        if next_shoe is not None:
            parts.append(shown(next_shoe))
    retention = state.get("retention")
    if "retention" in state and not (compact and not (retention or {}).get("unexported_past_horizon")):
        parts.append(retention_line(retention))  # the export: what waits for one
    floor = floor_export_line(state.get("export"))
    if floor is not None and not (compact and (state.get("export") or {}).get("connected")):
        parts.append(floor)  # a compact view shows it only when the floor does not get the journal
    parts.extend(round_view(state.get("round"), fill, compact))
    last = Table(title="last events", title_justify="left", show_header=False, box=None, padding=(0, 1, 0, 0))
    for e in events:
        last.add_row(*cells(e["seq"], datetime.fromtimestamp(e["time"]).strftime("%H:%M:%S"),
                            shown(e["severity"], style="red" if e["severity"] == "alarm" else ""), e["reason"],
                            in_cardctl_words(e["message"])))
    parts.append(last)
    return Group(*parts)


def trouble_lines(state: dict[str, Any]) -> list[Text]:
    """Alarms, holds, devices in fault, the unreadable card to enter, cards exposed or drawn in error,
    a held next shoe: a line each (wrapped on a narrow terminal), or one "none"."""
    lines = [shown(f"ALARM {alarm.get('id')} {alarm.get('reason', '')}: {in_cardctl_words(alarm.get('message', ''))}",
                   style="bold red") for alarm in state["alarms"]]
    lines += [shown(f"HOLD {hold}: {in_cardctl_words(why)}", style="yellow") for hold, why in state["holds"].items()]
    for name, d in state["devices"].items():
        fault = fault_line(name, d, between=" ")
        if fault is not None:
            lines.append(shown(f"FAULT {fault}", style="bold red"))
    entry = entry_line(state)
    if entry is not None:
        lines.append(shown(f"ENTER CARD {entry}", style="yellow"))
    exposed = state["piles"]["pending"]
    if exposed:  # seen already: which cards the next hands take
        lines.append(shown(f"EXPOSED IN ERROR {', '.join(exposed)}: used as the next cards, in this order",
                           style="yellow"))
    if state["shoe"].get("next_shoe_held"):  # the shuffler's next shoe waits for a supervisor
        lines.append(shown(f"NEXT SHOE HELD {in_cardctl_words(state['shoe']['next_shoe_held'])}", style="yellow"))
    waiting = state["piles"]["drawn_in_error"]
    if waiting:  # no round opens until the dealer says whether each was seen
        lines.append(shown(f"DRAWN IN ERROR {', '.join(waiting)}: waiting for the dealer ({SETTLE_DRAWN_IN_ERROR})",
                           style="yellow"))
    return lines or [shown("holds and alarms: none", style="green")]


def round_view(r: dict[str, Any] | None, fill: bool = True, compact: bool = False) -> list[RenderableType]:
    if r is None:
        return [shown("no round open")]
    title = f"round {r['id']} — {r['state']}" + (f" — HELD: {in_cardctl_words(r['held'])}" if r["held"] else "")
    if r["house_result"] is not None:
        title += f" — house {money(r['house_result'])}"
    table = hands_table(r, fill)
    table.box, table.show_edge, table.padding = None if compact else box.SIMPLE_HEAD, False, (0, 1, 0, 0)
    parts: list[RenderableType] = [shown(title, style="bold"), table]
    results = results_line(r)
    if results is not None:
        parts.append(shown(results))
    return parts


def shown_in_view(kind: str, reason: str) -> bool:
    """The raw input records and the simulation's own moves stay out of the view: the events
    they caused say what happened."""
    return kind != "input" and not reason.startswith("SIM_")


def stdout_fd() -> int | None:
    try:
        return sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a stream without one (io.UnsupportedOperation)
        return None


#: the waits between two attempts to reach cardd again: the first, doubling up to the last
RECONNECT_FIRST_S, RECONNECT_MAX_S = 0.1, 2.0
#: the reason of the journal's record of a daemon's start (cardd.daemon.tracker_service.REASON_START)
DAEMON_START = "DAEMON_START"


class Watching:
    """The watch's two connections to cardd, one asking STATE, one watching; after a loss (cardd
    stopped or restarted, or dropped a watcher that fell behind) both are opened again."""

    def __init__(self, socket: Path, client: ApiClient) -> None:
        self.socket, self.client = socket, client
        self.watcher = ApiClient(socket, timeout=None)

    def close(self) -> None:
        self.client.close()
        self.watcher.close()

    def reconnect(self, waiting: Callable[[int, str], None]) -> None:
        """Open both connections again, ``waiting(attempt, why)`` told before each wait; until cardd
        answers (a Ctrl-C ends it)."""
        self.close()
        delay, why = RECONNECT_FIRST_S, "cardd closed the connection"
        for attempt in itertools.count(1):
            waiting(attempt, why)
            time.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_S)
            try:
                client = ApiClient(self.socket, timeout=None)
            except DaemonNotRunning:
                why = "not listening yet"
                continue
            except ClientError as exc:  # not answering yet, or refusing (busy)
                why = str(exc)
                continue
            try:
                watcher = ApiClient(self.socket, timeout=None)
            except ClientError as exc:
                client.close()
                why = "not listening yet" if isinstance(exc, DaemonNotRunning) else str(exc)
                continue
            self.client, self.watcher = client, watcher
            return


def resize_wakeup() -> contextlib.AbstractContextManager[int | None]:
    """A descriptor that can be read once the terminal was resized (SIGWINCH), for the watch to
    wait on beside its socket; the process's signal state as it was afterwards."""
    @contextlib.contextmanager
    def wakeup() -> Iterator[int | None]:
        read_end, write_end = os.pipe()
        os.set_blocking(read_end, False)
        os.set_blocking(write_end, False)
        previous = signal.signal(signal.SIGWINCH, lambda signum, frame: None)  # a handler: the wakeup fd is written
        previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
        try:
            yield read_end
        finally:
            signal.set_wakeup_fd(previous_fd)
            signal.signal(signal.SIGWINCH, previous)
            os.close(read_end)
            os.close(write_end)
    return wakeup()


def run_view(watching: Watching, as_json: bool, frames: int | None) -> None:
    """Show the view (or JSON lines) until Ctrl-C or ``frames`` frames; a lost connection is opened
    again and the watch goes on after the last event received, so none is missed."""
    state = watching.client.state()
    last_seq: int = state["seq"]
    if as_json:
        emit_json({"class": "STATE", "state": state})
        while True:
            try:
                # a reader that goes away (`cardctl watch --json | head -1`) ends the watch now, not at
                # the next event's write: the closed-stdout exit of every cardctl command (cli.common)
                for record in watching.watcher.watch(since_seq=last_seq, hangup_fd=stdout_fd()):
                    emit_json(to_builtins(record))
                    last_seq = record.seq
            except ConnectionClosed as exc:
                click.echo(f"cardctl: {exc}; reconnecting", err=True)
                watching.reconnect(lambda attempt, why: None)
                click.echo(f"cardctl: reconnected; the events after seq {last_seq} follow", err=True)
    events: deque[dict[str, Any]] = deque(maxlen=LAST_EVENTS)
    out = console()
    fill = out.is_terminal  # off one (a file) the console has no width to fill: the frame is as wide as its content
    if fill:  # a long line (an alarm's message) wraps to the terminal's width rather than being cut off
        out.soft_wrap = False
    notice: str | None = None
    shown, resumed = 1, last_seq
    with resize_wakeup() if out.is_terminal else contextlib.nullcontext(None) as wake_fd, \
            Live(view(watching.client.version.release, state, events, fill, None, out if fill else None), console=out,
                 screen=out.is_terminal,
                 auto_refresh=False, transient=False) as live:
        def draw() -> None:
            live.update(view(watching.client.version.release, state, events, fill, notice, out if fill else None),
                        refresh=True)

        while True:
            try:
                stream = watching.watcher.watch_waking(since_seq=last_seq, hangup_fd=stdout_fd(), wake_fd=wake_fd)
                for event in stream:
                    if event is None:  # the terminal was resized: the same frame at its new size
                        draw()
                        continue
                    last_seq = event.seq
                    if event.reason == DAEMON_START and notice is not None:  # replayed: the restart is journaled
                        notice = (f"cardd restarted at {datetime.fromtimestamp(event.time):%H:%M:%S}: reconnected, "
                                  f"no event missed (those after seq {resumed} replayed)")
                    if shown_in_view(event.kind, event.reason):
                        events.append(to_builtins(event))
                    if watching.watcher.pending_events:  # more are waiting: draw once they are read
                        continue
                    state = watching.client.state()
                    draw()
                    shown += 1
                    if frames is not None and shown >= frames:
                        return
            except ConnectionClosed:
                lost = datetime.now()

                def waiting(attempt: int, why: str) -> None:
                    nonlocal notice
                    notice = (f"cardd closed the connection at {lost:%H:%M:%S} (stopped or restarting): "
                              f"reconnecting, attempt {attempt} ({why}); below, the table as it was")
                    draw()
                watching.reconnect(waiting)
                resumed = last_seq
                notice = f"reconnected to cardd at {datetime.now():%H:%M:%S}; the events after seq {last_seq} follow"
                state = watching.client.state()
                draw()


@click.command("watch")
@click.option("--frames", type=int, default=None, help="stop after this many frames (scripts, tests)")
@json_option
def watch(frames: int | None, as_json: bool) -> None:
    """Ctrl-C leaves (a kill or a closed terminal too, as Ctrl-C does: redirected to a file, the
    last frame is written). When cardd stops or restarts, the view says so, connects again as
    soon as it can and goes on from the last event it showed. With --json: a STATE line, then
    one JSON line per event (a restart: a line on stderr, the events go on).

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
            watching = Watching(options().socket, client)
            try:
                run_view(watching, as_json, frames)
            finally:
                watching.close()
    except KeyboardInterrupt:
        pass


COMMANDS = (watch,)
