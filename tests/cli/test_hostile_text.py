"""Hostile text from people, devices and the journal through every view: ``cardctl watch``,
``status``, ``log`` (on a terminal, off one, ``--follow``) and the exports.

The property: every view shows each text as text — what is journaled, its control, format and
separator characters (and surrogates, private-use and unassigned code points) made visible the one
documented way (core.text.printable, docs/cardctl.md "Text in the views") —, never crashes, never
styles by the text (each character of it has the style the view gives that place, as an empty
text there has), never lets it break a line (the view has as many lines as with empty texts) or
a column (each table's lines are as wide as each other), and writes no control code of its own
(what is left of the output once the view's own SGR colour codes are taken out is printable text
and line ends). The exports keep each text exactly as journaled, one record a line.

Two parts. VIEW_EXAMPLES (2,000 in CI, about a minute; CARDD_FULL=1: 20,000 fresh ones) render
the views in this process with rich's real Console writing to a terminal-like StringIO, over a
STATE, events and journal records with a drawn text in every place a person's, a device's or the
journal's text goes. TERMINAL_EXAMPLES (2 in CI, about 20 s; CARDD_FULL=1: 6) each draw a device
serial and ITEMS names with a fault detail each for the real programs: the real daemon (``cardd
--config`` on simulated devices behind real ptys: the drawn serial is their Ident's, each detail a
fault the shoe raises), a real ``cardctl watch`` in tmux (its screen checked with the terminal's
own character widths), the real ``cardctl log`` and ``status`` on a terminal and off one, and the
archive export. These draw only characters rich and the terminal give the same width (``agrees``).
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
import tempfile
import unicodedata
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from rich.cells import cell_len, get_character_cell_size
from rich.console import Console

from cardd.api.protocol import LOG_LIMIT_MAX
from cardd.cli.common import in_cardctl_words, money
from cardd.cli.console import ProgramConsole
from cardd.cli.journal import Exporter, print_events, render_event
from cardd.cli.shown import visible
from cardd.cli.table import render_status
from cardd.cli.watch import LAST_EVENTS, shown_in_view, view
from core.text import UNSAFE_CATEGORIES
from firmware_bridge.messages import Fault, FaultCode, encode
from simulators.rig import SimulatedTable
from tests.cli.cli_rig import CARDCTL, cardctl
from tests.daemon.daemon_rig import Daemon, remove, shuffle_and_load, state_dir, write_config
from tests.support.terminal import Tmux, kept_open, line_width, terminal_width

FULL = os.environ.get("CARDD_FULL") == "1"
VIEW_EXAMPLES = 20_000 if FULL else 600
#: the width of the in-process terminal: every drawn text fits a line of each view, so a line
#: that wraps is one the text broke
WIDTH = 800
RELEASE = "cardd 0.1.0"

#: what a hostile text is made of: rich's markup and emoji codes, escape sequences (colour, OSC 8
#: hyperlinks, a screen clear), line ends, C0 and C1 controls, bidi controls, zero-width and
#: invisible characters, separators, combining marks, wide, private-use, unassigned characters and
#: a surrogate, what a highlighter colours (numbers, URLs, paths), format strings; and any
#: character at all
PIECES = ("[", "]", "[/]", "[red]", "[/red]", "[bold red on white]", "[link=https://x.example]", "[@click=quit]",
          ":joy:", ":smile:", "\\", "\x1b[31m", "\x1b]8;;http://x\x1b\\", "\x1b[2J", "\x1b[5C", "\r", "\n", "\r\n",
          "\t", "\x00", "\x07", "\x08", "\x7f", "\x85", "\x9b", "\x9b31m", "\u202e", "\u202a", "\u2066", "\u2069",
          "\u200e", "\u200f", "\u061c", "\u200b", "\u200d", "\ufeff", "\u00ad", "\u2028", "\u2029", "\u0301",
          "\ufe0f", "\u3164", "\U0001f600", "\u5f20", "\ue000", "\U0010ffff", "\U000e0041", "\ud800", "\ufdd0",
          "\u0378", "%s", "{0}", "12.50", "https://example.com", "/etc/passwd", "True", " ", "\u00a0", "\u3000")
#: the markers around each drawn text, never drawn themselves
OPEN, CLOSE = "\u27e6", "\u27e7"
#: what a view writes of its own: SGR codes (colours, attributes)
SGR = re.compile(r"\x1b\[[0-9;]*m")
#: where a table's line starts: its border (watch, status) or, borderless (log), its first cell
BORDERS = frozenset("┏┃┡│└╭╰┌├┗┣┠┝")


def hostile(pieces: int = 8) -> st.SearchStrategy[str]:
    return st.lists(st.one_of(st.sampled_from(PIECES), st.characters(blacklist_characters=OPEN + CLOSE)),
                    max_size=pieces).map("".join)


def utf8(text: str) -> str:
    """``text`` with each surrogate (no character UTF-8 carries) a question mark."""
    return text.encode("utf-8", "replace").decode("utf-8")


# ---- the places a text goes --------------------------------------------------------------------

@dataclass
class Places:
    """Hands out the drawn texts, one to each place, between markers naming the place
    (``⟦A|text|A⟧``); with no texts, every place an empty one (the baseline)."""

    texts: list[str]
    #: place key -> (group, the text placed there)
    placed: dict[str, tuple[str, str]] = field(default_factory=dict)

    def __call__(self, group: str, limit: int | None = None, device: bool = False) -> str:
        """The next text, for a place of ``group``; at most ``limit`` characters once visible; a
        ``device``'s in UTF-8 (a surrogate is no character it can send)."""
        key = _key(len(self.placed))
        drawn = self.texts[len(self.placed) % len(self.texts)] if self.texts else ""
        if device:
            drawn = utf8(drawn)
        text = f"{OPEN}{key}|{drawn}|{key}{CLOSE}"
        while limit is not None and len(visible(text)) > limit:  # a field the view shortens: drawn shorter
            drawn = drawn[:-1]
            text = f"{OPEN}{key}|{drawn}|{key}{CLOSE}"
        self.placed[key] = (group, text)
        return text


def _key(n: int) -> str:
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return letters[n] if n < len(letters) else letters[n // len(letters) - 1] + letters[n % len(letters)]


def table_state(place: Places) -> dict[str, Any]:
    """A STATE (docs/api.md) mid-round, a drawn text in each of its texts: the rules' name, the
    devices' Ident strings, the holds, the alarms, the round's hold and every player's name."""
    def device(state: str) -> dict[str, Any]:
        return {"state": state, "link": "up", "usable": True, "fault": None,
                "ident": {"model": place("state"), "serial": place("state"), "firmware": place("state")}}
    owner, co_player, third, waiting = (place("players") for _ in range(4))  # a box's bets are its hand's stakes
    return {
        "seq": 59, "rules": place("state"),
        "devices": {"shuffler": device("fault"), "shoe-reader": device("dealing")},
        "shoe": {"state": "in_play", "cards_out": 4, "cards_in_shoe": 312, "penetration": 0.0128, "burn_remaining": 0,
                 "last_round": None, "next_shoe_waiting": 0, "next_shoe_held": place("next shoe")},
        "round": {"id": 1, "state": "initial_deal", "held": place("state"),
                  "wagers": {"1": {owner: 2500, co_player: 1000}, "3": {third: 1000}, "5": {waiting: 500}},
                  "boxes": {"1": [{"hand": 0, "cards": ["TS"], "total": 10, "soft": False,
                                   "stakes": {owner: 2500, co_player: 1000}, "doubled": {}, "stood": False,
                                   "surrendered": False}],
                            "3": [{"hand": 0, "cards": ["QS"], "total": 10, "soft": False, "stakes": {third: 1000},
                                   "doubled": {}, "stood": False, "surrendered": False}]},
                  "dealer": {"cards": ["JS"], "total": 10, "soft": False}, "next": None, "turn": ["box", 1, 0],
                  "flags": [], "house_result": None},
        "rounds_started": 1,
        "piles": {"burn": 1, "discard": 0, "played": 0, "pending": [], "drawn_in_error": []},
        "awaiting_entry": None,
        "holds": {place("state"): place("state")},
        "alarms": [{"id": 1, "reason": place("state"), "source": "table", "message": place("state")}],
        "retention": {"pruned_through": 0, "exported_through": 0, "unexported": 59,
                      "oldest_unexported": "2026-12-01T18:49:27.119453288Z", "unexported_past_horizon": False,
                      "horizon_days": 90},
    }


def events(place: Places) -> list[dict[str, Any]]:
    """The last events of ``watch``: a drawn reason and message each."""
    return [{"class": "EVENT", "seq": 60 + n, "time": 1796150000.0 + n, "kind": "event", "source": "table",
             "reason": place("events"), "severity": severity, "who": None, "message": place("events"), "data": {}}
            for n, severity in enumerate(("info", "alarm"))]


def records(place: Places) -> list[dict[str, Any]]:
    """Journal records as LOG answers them: a drawn reason, message and who; a player's name in an
    input record (a seat, a co-player's answer); a device's fault detail in a device's message."""
    def record(seq: int, kind: str, reason: str, message: str, who: str | None, data: dict[str, Any]) -> dict[str, Any]:
        return {"seq": seq, "time": 1796150000.5 + seq, "kind": kind, "source": "table", "reason": reason,
                "severity": ("info", "warning", "alarm")[seq % 3], "who": who, "message": message, "data": data}
    fault = Fault(FaultCode.SENSOR, 3, place("records", limit=60, device=True))  # a field: 60 characters shown
    return [
        record(1, "event", place("records"), place("records"), place("records"), {}),
        record(2, "input", "", "", place("records"), {"type": "TakeSeat", "v": 2, "player": place("records", limit=60),
                                                      "who": "dana"}),
        record(3, "input", "", "", "dana", {"type": "Act", "v": 2, "box": 1, "action": "double", "who": "dana",
                                            "player": place("records", limit=60),
                                            "co_players": [{"player": place("records", limit=50), "joins": True}]}),
        record(4, "input", "", encode(fault).hex(), None,
               {"type": "DeviceMessage", "v": 2, "device": "shoe-reader", "message": encode(fault).hex()}),
        record(5, "command", "COMMAND_REFUSED", place("records"), place("records"),
               {"args": {"player": place("data")}, "refused": place("data")}),  # data: --json and the exports
    ]


# ---- rendering ---------------------------------------------------------------------------------

class TerminalFile(io.StringIO):
    """What rich writes to, taken for a terminal (as a tty is)."""

    def isatty(self) -> bool:
        return True


def on_a_terminal() -> Console:
    """The views' console on a terminal (cardd.cli.console.console), WIDTH cells wide, in colour."""
    return ProgramConsole(file=TerminalFile(), highlight=False, soft_wrap=True, width=WIDTH, height=200,
                          color_system="truecolor")


def off_a_terminal() -> Console:
    return ProgramConsole(file=io.StringIO(), highlight=False, soft_wrap=True)


def written(console: Console) -> str:
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


@dataclass(frozen=True)
class Rendered:
    """What a terminal shows of a view's output: its characters, and the SGR codes each is drawn with."""

    plain: str
    styles: list[str]


def rendered(raw: str) -> Rendered:
    """``raw`` as a terminal draws it: each character with the SGR codes in force (those since the
    last reset: rich writes each styled piece as a reset, its codes, its text)."""
    chars: list[str] = []
    styles: list[str] = []
    style = ""
    at = 0
    for code in SGR.finditer(raw):
        chars.append(raw[at:code.start()])
        styles.extend([style] * (code.start() - at))
        params = code.group()[2:-1]
        style = "" if params in ("", "0") else f"{style};{params}"
        at = code.end()
    chars.append(raw[at:])
    styles.extend([style] * (len(raw) - at))
    return Rendered("".join(chars), styles)


TERMINAL_VIEWS: dict[str, tuple[tuple[str, ...], Callable[[Places], str]]] = {}


def terminal_view(name: str, groups: tuple[str, ...]) -> Callable[[Callable[[Places], str]], Callable[[Places], str]]:
    def register(render: Callable[[Places], str]) -> Callable[[Places], str]:
        TERMINAL_VIEWS[name] = (groups, render)
        return render
    return register


@terminal_view("watch", ("state", "next shoe", "players", "events"))
def watch_frame(place: Places) -> str:
    console = on_a_terminal()
    state = table_state(place)
    console.print(view(RELEASE, state, deque(events(place)), fill=True))
    return written(console)


@terminal_view("status", ("state", "next shoe"))
def status_view(place: Places) -> str:
    console = on_a_terminal()
    render_status(console, RELEASE, table_state(place))
    return written(console)


@terminal_view("log", ("records",))
def log_table(place: Places) -> str:
    console = on_a_terminal()
    print_events(console, records(place), more=False)
    return written(console)


@lru_cache(maxsize=None)
def baseline(name: str) -> Rendered:
    """A view with an empty text in every place: where each place shows, in which style, and the lines."""
    return rendered(TERMINAL_VIEWS[name][1](Places([])))


# ---- the property ------------------------------------------------------------------------------

def unsafe_characters(text: str) -> list[str]:
    """The characters of ``text``, line ends aside, that could act on a terminal or break a line."""
    return sorted(c for c in set(text) - {"\n"} if unicodedata.category(c) in UNSAFE_CATEGORIES)


def occurrences(plain: str, key: str) -> Iterator[tuple[int, int]]:
    """The (start, end) of each place ``key``'s text in ``plain``."""
    start = plain.find(f"{OPEN}{key}|")
    while start >= 0:
        end = plain.find(CLOSE, start)
        assert end > 0 and plain[end - len(key) - 1:end] == f"|{key}", (key, plain[start:start + 200])
        yield start, end + 1
        start = plain.find(f"{OPEN}{key}|", end)


def expected(group: str, text: str) -> str:
    """The place's text as the view shows it: made visible; why the next shoe is held in cardctl's words."""
    return visible(in_cardctl_words(text) if group == "next shoe" else text)


def check_terminal_view(name: str, texts: list[str]) -> None:
    groups, render = TERMINAL_VIEWS[name]
    place = Places(texts)
    raw = render(place)  # never raises
    empty = baseline(name)
    got = rendered(raw)
    # no code of its own: the view's SGR codes aside, printable text and line ends
    assert unsafe_characters(SGR.sub("", raw)) == [], (name, unsafe_characters(SGR.sub("", raw)))
    lines, empty_lines = got.plain.split("\n"), empty.plain.split("\n")
    assert len(lines) == len(empty_lines), f"{name}: {len(lines)} lines, {len(empty_lines)} with empty texts"
    for key, (group, text) in place.placed.items():
        if group not in groups:
            continue
        where = list(occurrences(got.plain, key))
        empty_where = list(occurrences(empty.plain, key))
        assert empty_where, f"{name} shows no {group} text {key}"
        assert len(where) == len(empty_where), (name, key, text, got.plain)
        for (start, end), (empty_start, _) in zip(where, empty_where):
            assert got.plain[start:end] == expected(group, text), (name, key, text, got.plain[start:end])
            styles = set(got.styles[start:end])
            assert styles == {empty.styles[empty_start]}, (name, key, text, styles, empty.styles[empty_start])
    if name == "watch":  # on a terminal its tables and panels fill the width: each of their lines, exactly
        assert all(cell_len(line) == WIDTH for line in lines if line[:1] in BORDERS), (name, got.plain)
    for table in tables(lines):
        assert len({cell_len(line) for line in table}) == 1, (name, table)


def tables(lines: list[str]) -> Iterator[list[str]]:
    """Each run of a table's lines (a border first, or a borderless table's padded cells)."""
    run: list[str] = []
    for line in lines + [""]:
        if line[:1] in BORDERS or (line.startswith(" ") and run):
            run.append(line)
            continue
        if len(run) > 1:
            yield run
        run = [line] if line.startswith(" ") else []


def check_plain_log(texts: list[str]) -> None:
    """``log`` off a terminal: one line a record, six tab-separated fields, nothing raw."""
    place = Places(texts)
    journal = records(place)
    console = off_a_terminal()
    print_events(console, journal, more=False)
    out = written(console)
    assert unsafe_characters(out.replace("\t", "")) == [], unsafe_characters(out)  # the fields' tabs aside
    lines = out.split("\n")
    assert lines[-1] == "" and len(lines) - 1 == len(journal), out
    assert all(line.count("\t") == 5 for line in lines[:-1]), out
    for key, (group, text) in place.placed.items():
        assert group == "data" or visible(text) in out, (key, text)
    for record in journal:  # --follow: one line a record
        line = render_event(record)
        assert "\n" not in line and unsafe_characters(line) == [], line


def check_exports(texts: list[str], directory: Path) -> None:
    """cardctl's own export of a query: each record's texts exactly as journaled, one a line (JSON
    lines) or a row (CSV). The journal holds no surrogate (its API's JSON decoder refuses one)."""
    journal = records(Places([text.encode("utf-8", "replace").decode("utf-8") for text in texts]))
    for fmt in ("jsonl", "csv"):
        path = directory / f"export.{fmt}"
        path.unlink(missing_ok=True)
        exporter = Exporter(path, fmt)
        for record in journal:
            exporter.write(record)
        exporter.close()
        with open(path, newline="", encoding="utf-8") as file:
            if fmt == "jsonl":
                assert [json.loads(line) for line in file.read().split("\n")[:-1]] == journal
            else:
                rows = list(csv.reader(file))
                assert [[str(record[c]) if record[c] is not None else "" for c in
                         ("seq", "time", "kind", "source", "reason", "severity", "who", "message")] +
                        [json.dumps(record["data"])] for record in journal] == \
                    [row[:8] + row[8:] for row in rows[1:]]


@pytest.mark.soak
@pytest.mark.timeout(3600 if FULL else 300)
@settings(max_examples=VIEW_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(hostile(), min_size=1, max_size=12))
def test_every_view_shows_hostile_text_as_text(texts: list[str]) -> None:
    for name in TERMINAL_VIEWS:
        check_terminal_view(name, texts)
    check_plain_log(texts)
    with tempfile.TemporaryDirectory(prefix="cardd-hostile-exports-") as exports:  # its own, gone after
        check_exports(texts, Path(exports))


# ---- the real programs -------------------------------------------------------------------------

#: the first example Hypothesis draws is the simplest (empty names, a serial of one character): the
#: others are the drawn ones
TERMINAL_EXAMPLES = 6 if FULL else 2
#: names (each with a device's fault detail) in one example, through one daemon
ITEMS = 16
#: the tmux terminal: wide enough for every drawn text on one line of a view
TERMINAL_WIDTH, TERMINAL_HEIGHT = 600, 90
#: where a table's line ends: its right border
RIGHT_BORDERS = frozenset("┃┓┩│┐┤┘╮╯┛┨┫┥")


@lru_cache(maxsize=None)
def agrees(char: str) -> bool:
    """rich and the terminal give ``char`` the same width, or the views escape it. Where they differ
    (docs/cardctl.md, "Text in the views": spacing combining marks, the Hangul fillers, some symbols,
    emoji modifiers) rich lays a table out for widths the terminal does not draw: rich's limit, not
    one this property tests. U+FE0F makes rich draw the character before it two cells wide, the
    terminal does not."""
    if unicodedata.category(char) in UNSAFE_CATEGORIES:
        return True
    return char != "\ufe0f" and terminal_width(char) == get_character_cell_size(char) >= 0


AGREEING_PIECES = tuple(piece for piece in PIECES if all(map(agrees, piece)))
#: what a person might really type as a name, markup-looking ones too
NAMES = ("alice", "Zo\u00eb", "Jos\u00e9", "Jose\u0301", "\u5f20\u4f1f", "O'Brien", "[red]", "[/]", ":joy:", "[bold]x",
         "12.50", " ", "\u00a0", "\\", "[", "]", "\uff2a")


def on_the_terminal(pieces: int = 6, min_size: int = 0) -> st.SearchStrategy[str]:
    return st.lists(st.one_of(st.sampled_from(AGREEING_PIECES),
                              st.characters(blacklist_characters=OPEN + CLOSE).filter(agrees)),
                    min_size=min_size, max_size=pieces).map("".join)


def names() -> st.SearchStrategy[str]:
    """Names the daemon takes (normalised) and texts it refuses: both are shown. What JSON can carry
    (a lone surrogate is no JSON text the API decodes: it never reaches a command)."""
    typed = st.lists(st.sampled_from(NAMES), min_size=1, max_size=4).map("".join)
    return st.one_of(on_the_terminal(), typed).map(utf8).filter(
        lambda name: all(map(agrees, unicodedata.normalize("NFKC", name))))


def device_texts(min_size: int = 0) -> st.SearchStrategy[str]:
    """What a device can send: UTF-8 (a surrogate is no character it can), within a field's 255 bytes."""
    return on_the_terminal(min_size=min_size).map(utf8)


def watch_texts(state: dict[str, Any], shown_events: list[dict[str, Any]]) -> list[str]:
    """What ``watch`` must show of a STATE and the events it followed: each text as text, the
    daemon's words in cardctl's (``clear_fault of shoe`` as ``clear-fault of shoe``)."""
    def said(text: str) -> str:
        return visible(in_cardctl_words(text))

    texts = [visible(ident[key]) for device in state["devices"].values() if (ident := device.get("ident"))
             for key in ("model", "serial", "firmware")]
    r = state["round"]
    if r is not None:
        texts += [f"HELD: {said(r['held'])}"] if r["held"] else []
        texts += [f"{visible(player)} {money(amount)}" for wagers in r["wagers"].values()
                  for player, amount in wagers.items()]
    texts += [part for hold, why in state["holds"].items() for part in (f"HOLD {visible(hold)}", said(why))]
    texts += [part for alarm in state["alarms"]
              for part in (f"ALARM {alarm['id']} {visible(alarm['reason'])}", said(alarm["message"]))]
    texts += [visible(event["reason"]) for event in shown_events[-LAST_EVENTS:]]
    texts += [said(event["message"]) for event in shown_events[-LAST_EVENTS:]]
    return texts


def bad_table_lines(screen: str, fill: bool) -> list[str]:
    """The lines of a screen's tables the text broke, by the terminal's own widths: each line of a
    table ends in its border, as wide as the terminal (``fill``) or as the table's other lines."""
    lines = [line.rstrip() for line in screen.split("\n")]  # tmux's capture ends a line where its text does
    bad = [line for line in lines if line[:1] in BORDERS and line[-1:] not in RIGHT_BORDERS]
    if fill:
        return bad + [line for line in lines if line[:1] in BORDERS and line_width(line) != TERMINAL_WIDTH]
    for table in tables(lines):
        if table[0][:1] in BORDERS and len({line_width(line) for line in table}) > 1:
            bad += table
    return bad


class RealTable:
    """The real daemon on simulated devices behind real ptys (the test owns them: a fault with a
    drawn detail is raised on the shoe), in a round open for bets, and a real ``cardctl watch`` in
    tmux."""

    def __init__(self, directory: Path, sim: SimulatedTable) -> None:
        self.directory, self.sim = directory, sim
        config = write_config(directory, sim.shoe.url, sim.shuffler.url)
        self.daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
        self.client = self.daemon.client()
        shuffle_and_load(self.client, sim.hand_off, lambda n: sim.shoe.call(sim.shoe.device.deal, n))
        self.client.ok("open_round")
        self.watch = Tmux(f"hostile-text-{directory.name}",
                          kept_open(str(CARDCTL), "--socket", str(self.socket), "watch"),
                          width=TERMINAL_WIDTH, height=TERMINAL_HEIGHT)
        self.watch.wait_for(lambda s: "betting" in s or "ended with" in s)
        self.since = self.client.state()["seq"]  # what the watch follows: the events after its STATE

    @property
    def socket(self) -> Path:
        return self.daemon.socket_path

    def records(self, from_seq: int = 1) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = self.client.request({"class": "LOG", "from_seq": from_seq,
                                                             "limit": LOG_LIMIT_MAX})["records"]
        return records

    def check_watch(self) -> None:
        """Every text of the table's STATE and its last events on the watch's screen, as text, in
        the view's style (the text whole in the screen's colour codes: none inside it), and every
        table line whole by the terminal's widths."""
        state = self.client.state()
        shown = [event for event in self.records(self.since + 1)
                 if event["seq"] <= state["seq"] and shown_in_view(event["kind"], event["reason"])]
        texts = watch_texts(state, shown)

        def whole(screen: str) -> bool:
            return all(text in screen for text in texts) and f"journal seq {state['seq']} " in screen
        try:
            screen = self.watch.wait_for(lambda s: whole(s) or "ended with" in s, escapes=True)
        except AssertionError:
            screen = self.watch.screen(escapes=True)
        missing = [text for text in texts if text not in screen]
        assert not missing and "ended with" not in screen, (missing, screen)
        plain = self.watch.screen()
        assert bad_table_lines(plain, fill=True) == [], (bad_table_lines(plain, fill=True), plain)

    def item(self, name: str, detail: str) -> None:
        """A player sits (or is refused), bets, the shoe faults with ``detail``; the watch shows it
        all; the fault is cleared, the round continued, the player leaves; the watch shows that."""
        client = self.client
        seated = client.command("take_seat", player=name)
        player = None
        if seated["class"] == "ACK":
            player = self.records(seated["seq"])[0]["data"]["player"]  # as stored: the name in its one spelling
            client.ok("place_bet", box=1, player=player, amount=2500)
        else:
            assert seated["code"] == "bad-args" and " is not a name: " in seated["message"], seated
        self.sim.shoe.call(self.sim.shoe.device.raise_fault, FaultCode.SENSOR, 3, detail)
        client.wait_state(lambda s: s["devices"]["shoe-reader"]["state"] == "fault" and bool(s["alarms"]))
        self.check_watch()
        client.ok("clear_fault", device="shoe", code="sensor")
        for alarm in client.wait_state(lambda s: s["devices"]["shoe-reader"]["state"] != "fault")["alarms"]:
            client.ok("clear_alarm", alarm_id=alarm["id"])
        client.ok("resume")
        if player is not None:
            client.ok("reduce_bet", box=1, player=player, amount=0)
            client.ok("leave_seat", player=player)
        self.check_watch()

    def close(self) -> None:
        self.watch.close()
        self.client.close()
        code, err = self.daemon.stop()
        assert code == 0, err


def check_log_and_status(table: RealTable, export_dir: Path) -> None:
    """The real ``cardctl log`` and ``status``, on a terminal (tmux) and off one, and the archive
    export, over everything the example journaled."""
    journal = table.records()
    state = table.client.state()
    shown = {"reasons": [visible(r["reason"]) for r in journal if r["reason"]],
             "whos": [visible(r["who"]) for r in journal if r["who"]],
             "messages": [visible(r["message"]) for r in journal if r["kind"] != "input"]}
    # off a terminal: one line a record, six fields, each text made visible
    piped = cardctl(table.socket, "log", "--limit", str(LOG_LIMIT_MAX))
    assert piped.code == 0, piped.err
    lines = piped.out.split("\n")[:-1]
    assert len(lines) == len(journal), piped.out
    for line, record in zip(lines, journal):
        fields = line.split("\t")
        assert len(fields) == 6 and fields[0] == str(record["seq"]), line
        assert (fields[3], fields[5]) == (visible(record["reason"]), visible(record["who"] or "")), line
        assert record["kind"] == "input" or fields[4] == visible(record["message"]), line
    # on a terminal: every text whole, each column where the others are
    log = Tmux(f"hostile-log-{table.directory.name}",
               kept_open(str(CARDCTL), "--socket", str(table.socket), "log", "--limit", str(LOG_LIMIT_MAX)),
               width=TERMINAL_WIDTH, height=TERMINAL_HEIGHT)
    try:
        screen = log.wait_for(lambda s: "ended with" in s, escapes=True, history=True)
        plain = log.screen(history=True)
    finally:
        log.close()
    assert "ended with 0" in plain, plain
    missing = [text for texts in shown.values() for text in texts if text not in screen]
    assert missing == [], (missing, screen)
    assert columns_in_line(plain, journal) == [], columns_in_line(plain, journal)
    # status, off a terminal and on one: the devices' texts and the open alarms
    expected = [visible(ident[key]) for device in state["devices"].values() if (ident := device.get("ident"))
                for key in ("model", "serial", "firmware")] + \
        [visible(f"alarm {a['id']}: {a['reason']} {a['message']}") for a in state["alarms"]]
    status = cardctl(table.socket, "status")
    assert status.code == 0 and all(text in status.out for text in expected), (status.err, status.out)
    term = Tmux(f"hostile-status-{table.directory.name}",
                kept_open(str(CARDCTL), "--socket", str(table.socket), "status"),
                width=TERMINAL_WIDTH, height=TERMINAL_HEIGHT)
    try:
        screen = term.wait_for(lambda s: "ended with" in s, escapes=True)
        plain = term.screen()
    finally:
        term.close()
    assert "ended with 0" in plain, plain
    assert [text for text in expected if text not in screen] == [], screen
    assert bad_table_lines(plain, fill=False) == [], (bad_table_lines(plain, fill=False), plain)
    # the archive export: each record's texts exactly as journaled, one record a line or a row
    by_seq = {record["seq"]: record for record in journal}
    for fmt in ("jsonl", "csv"):
        path = export_dir / f"archive.{fmt}"
        done = cardctl(table.socket, "log", "--export", str(path))
        assert done.code == 0, done.err
        with open(path, newline="", encoding="utf-8") as file:
            exported = [json.loads(line) for line in file.read().split("\n")[:-1]] if fmt == "jsonl" else \
                [{**row, "data": json.loads(row["data"])} for row in csv.DictReader(file)]
        for record in exported:
            if int(record["seq"]) in by_seq:  # the journal's "" is LOG's null: no one
                kept = by_seq[int(record["seq"])]
                assert (record["reason"], record["who"] or None, record["data"]) == \
                    (kept["reason"], kept["who"], kept["data"]), (fmt, record, kept)
        assert {int(record["seq"]) for record in exported} >= set(by_seq)


def columns_in_line(screen: str, journal: list[dict[str, Any]]) -> list[str]:
    """``log``'s rows whose who column does not start where the others' does, by the terminal's widths."""
    starts: dict[int, list[str]] = {}
    for line in screen.split("\n"):
        for record in journal:
            who = visible(record["who"] or "")
            head = f" {record['seq']} "
            if who and line.startswith(head) and line.rstrip().endswith(" " + who):
                starts.setdefault(line_width(line.rstrip()) - line_width(who), []).append(line)
                break
    return [] if len(starts) <= 1 else [line for lines in starts.values() for line in lines]


@pytest.mark.soak
@pytest.mark.timeout(1800 if FULL else 300)
@settings(max_examples=TERMINAL_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(serial=device_texts(min_size=1),
       items=st.lists(st.tuples(names(), device_texts()), min_size=ITEMS, max_size=ITEMS))
def test_the_real_programs_show_hostile_names_and_device_text_as_text(serial: str,
                                                                      items: list[tuple[str, str]]) -> None:
    directory = state_dir()
    try:
        with SimulatedTable.over_ptys(serial=serial) as sim:
            table = RealTable(directory, sim)
            try:
                for name, detail in items:
                    table.item(name, detail)
                table.sim.shoe.call(table.sim.shoe.device.raise_fault, FaultCode.SENSOR, 3, items[-1][1])
                table.client.wait_state(lambda s: bool(s["alarms"]))
                check_log_and_status(table, directory)
            finally:
                table.close()
    finally:
        remove(directory)
