"""The simulated table driven from cardctl alone (``cardctl sim ...`` under ``cardd --simulate``):
the walkthrough in docs/cardctl.md played as written, through a whole shoe; every fault switch
turned on and off; a switch's and a fault's effect in status and in watch (a real terminal); and,
against a real table, one line saying these commands are for a simulated one."""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from cardd.journal import Journal
from firmware_bridge.messages import CardRead, decode
from simulators.faults import ONLY_FOR, Faults
from simulators.rig import SimulatedTable
from tests.cli.cli_rig import CARDCTL, Run, cardctl
from tests.daemon.daemon_rig import Client, Daemon, journaled_messages, wait_devices, write_config
from tests.support.terminal import Tmux

DOC = Path(__file__).resolve().parents[2] / "docs" / "cardctl.md"
WALKTHROUGH = "### Play a shoe on the simulated table"
#: the directory the walkthrough's table runs in, replaced by the test's own
DOC_STATE_DIR = "/tmp/table"
STEP = re.compile(r"# (\d+)\. (.*)")
DRAWN = re.compile(r"^sim deal: (?:\d+ cards? out: (.*?) \(journal seq|no card dealt)")


def walkthrough() -> dict[int, tuple[str, list[str]]]:
    """The walkthrough's shell block: each step's title (``# N. title``) and its lines."""
    block = DOC.read_text().split(WALKTHROUGH, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    steps: dict[int, tuple[str, list[str]]] = {}
    for line in block.splitlines():
        step = STEP.fullmatch(line)
        if step is not None:
            steps[int(step[1])] = (step[2], [])
        else:
            steps[max(steps)][1].append(line.replace(DOC_STATE_DIR, "{dir}"))
    return steps


def condition_holds(comment: str, state: dict[str, Any]) -> bool:
    """A line's ``# only when ...``, read as a person reads it, on the table's STATE."""
    r = state["round"]
    if comment.startswith("only when insurance is offered"):
        return r is not None and r["state"] == "insurance"
    decides = re.match(r"only when box (\d+) decides", comment)
    assert decides is not None, f"a condition the test cannot read: {comment!r}"
    return r is not None and r["turn"] is not None and r["turn"][1] == int(decides[1])


class Player:
    """Runs the walkthrough's cardctl lines as written: each must succeed; the cards each deal
    printed are kept, in order."""

    def __init__(self, directory: Path, socket: Path, client: Client) -> None:
        self.directory, self.socket, self.client = directory, socket, client
        self.drawn: list[str] = []
        self.last: Run | None = None

    def run(self, line: str) -> None:
        command, _, comment = line.partition("#")
        comment = comment.strip()
        if comment.startswith("only when") and not condition_holds(comment, self.client.state()):
            return
        words = shlex.split(command.format(dir=self.directory))
        assert words[0] == "cardctl", line
        run = cardctl(None, *words[1:], cwd=self.directory, prefix=("env", f"CARDD_SOCKET={self.socket}"))
        assert run.code == 0, (line, run.out, run.err)
        drawn = DRAWN.match(run.out)
        if words[1:3] == ["sim", "deal"]:
            assert drawn is not None, run.out
            self.drawn += drawn[1].split(", ") if drawn[1] else []
        self.last = run


@pytest.mark.timeout(600)  # some sixty cardctl runs, each its own Python: on a loaded machine seconds each
def test_the_walkthrough_plays_a_whole_shoe_with_cardctl_alone(directory: Path) -> None:
    steps = walkthrough()
    assert sorted(steps) == [1, 2, 3, 4, 5, 6]
    (start,) = [line for line in steps[1][1] if line]
    words = shlex.split(start.format(dir=directory))
    assert words[:2] == ["cardd", "--simulate"]
    (export,) = steps[2][1]
    assert export.startswith("export CARDD_SOCKET=")
    socket = Path(export.removeprefix("export CARDD_SOCKET=").format(dir=directory))
    repeat = re.fullmatch(r'repeat step 4 until that last deal says "(.+)" \(.*\)', steps[5][0])
    assert repeat is not None and not steps[5][1], steps[5]
    daemon = Daemon(words[1:], socket)
    try:
        client = daemon.client()
        wait_devices(client)  # a person reads cardd's lines before typing the next
        player = Player(directory, socket, client)
        for line in steps[3][1]:
            player.run(line)
        rounds = 0
        while True:
            rounds += 1
            assert rounds <= 30, "the shoe never ended"
            for line in steps[4][1]:
                player.run(line)
            assert player.last is not None and player.last.out.startswith("sim deal: ")  # the step's last deal
            if repeat[1] in player.last.out:
                break
        assert rounds >= 3, rounds
        assert client.state()["shoe"]["state"] == "complete"
        for line in steps[6][1]:
            player.run(line)
        assert player.last is not None and "reconciled" in player.last.out.lower(), player.last.out
        state = client.state()
        assert state["shoe"]["state"] == "reconciled" and state["alarms"] == [], state
        client.close()
    finally:
        daemon.stop()
    # each deal said which cards came out: the cards the table read, in order, the burn card first
    with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
        messages = [decode(bytes.fromhex(m["message"])) for m in journaled_messages(journal, "shoe-reader")]
    read = [str(m.card) for m in messages if isinstance(m, CardRead)]
    assert player.drawn == read and len(read) >= 30, (player.drawn, read)  # the cut card after card 30


# ---- the switches --------------------------------------------------------------------------

#: a value for every switch the simulators have (docs/simulators.md, "Fault switches"); a switch
#: without a value is on by its name alone. Far positions and small rates: each is only turned on,
#: looked at and turned off again
SAMPLE = {
    "jam": "2", "face_up_at": "300", "missing": "AS,7H", "extra": "KD", "foreign": "1", "duplicate": "QS",
    "unreadable_at": "300", "reboot_at": "300", "repeat_read_at": "300", "conflicting_read_at": "300",
    "skip_read_at": "300", "late_report_at": "300", "event_buffer": "100", "bit_flip_rate": "0.0001",
    "drop_rate": "0.0001", "ftdi_batching_ms": "1", "disconnect_for": "1", "disconnect_at": "300",
    "slow_ack_ms": "1", "seed": "7",
}


def honoured_by(device: str) -> list[str]:
    return [name for name in Faults.names() if ONLY_FOR.get(name, (device, ""))[0] == device]


def switches_on(socket: Path, device: str) -> dict[str, Any]:
    run = cardctl(socket, "sim", "switches", device, "--json")
    assert run.code == 0, run.err
    on: dict[str, Any] = run.json()[device]["on"]
    return on


def test_every_fault_switch_is_turned_on_and_off_and_listed(daemon: Daemon) -> None:
    sock = daemon.socket_path
    for device in ("shoe", "shuffler"):
        names = honoured_by(device)
        listed = cardctl(sock, "sim", "switches", device, "--json")
        assert listed.code == 0 and listed.json()[device] == {"on": {}, "known": names}, listed.out
        tokens = [f"{name}={SAMPLE[name]}" if name in SAMPLE else name for name in names]
        turned = cardctl(sock, "sim", "switch", device, *tokens)
        assert turned.code == 0, turned.err
        assert re.fullmatch(rf"sim switch: {device}: .* \(journal seq \d+\); on now: .*\n", turned.out), turned.out
        assert sorted(switches_on(sock, device)) == sorted(names)
        shown = cardctl(sock, "sim", "switches")  # the table for a person: every switch, both devices
        rows = {line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:4]]
                for line in shown.out.splitlines() if line.startswith("│")}
        assert sorted(rows) == sorted(Faults.names())
        column = 0 if device == "shoe" else 1
        assert rows["face_up_at"][column] == "300" and rows["same_nonce"][column] == "on"
        off = cardctl(sock, "sim", "switch", device, *(arg for name in names for arg in ("--off", name)))
        assert off.code == 0 and off.out.endswith("; on now: none\n"), (off.out, off.err)
        assert switches_on(sock, device) == {}
    assert set(SAMPLE) <= set(Faults.names())


def test_a_switch_that_does_not_exist_or_a_bad_value_is_one_line(daemon: Daemon) -> None:
    sock = daemon.socket_path
    unknown = cardctl(sock, "sim", "switch", "shoe", "face_down_at=3")
    assert unknown.code == 2
    assert unknown.one_line_error() == (f"cardctl: sim switch: no fault switch 'face_down_at' on the shoe; its "
                                        f"switches: {', '.join(honoured_by('shoe'))} (docs/simulators.md, "
                                        f"\"Fault switches\")")
    off = cardctl(sock, "sim", "switch", "shuffler", "--off", "door")
    assert off.code == 2 and "no fault switch 'door' on the shuffler; its switches: jam, " in off.one_line_error()
    bad = cardctl(sock, "sim", "switch", "shoe", "face_up_at=ten")
    assert bad.code == 2
    assert bad.one_line_error() == "cardctl: sim switch: fault switch face_up_at=ten: expected a card position, 1 or more"
    other = cardctl(sock, "sim", "switch", "shoe", "door_open")
    assert other.code == 2
    assert other.one_line_error() == "cardctl: sim switch: fault switch door_open is for the shuffler only: a shoe has no door"
    fault = cardctl(sock, "sim", "fault", "shuffler", "smoke")
    assert fault.code == 2 and fault.one_line_error().startswith("cardctl: sim fault: code 'smoke' is not a fault: jam, ")
    assert switches_on(sock, "shoe") == {} and switches_on(sock, "shuffler") == {}


def device_row(screen: str, device: str) -> list[str]:
    """The cells of ``device``'s row in a view's devices table: status draws its borders, watch
    lays its columns out two spaces apart."""
    for line in screen.splitlines():
        if line.startswith("│") and f" {device} " in line:
            return [cell.strip() for cell in line.split("│")[1:-1]]
        if line.startswith(f"{device} "):
            return re.split(r" {2,}", line.strip())
    return []


def test_a_fault_raised_and_cleared_shows_in_status_and_watch(daemon: Daemon) -> None:
    sock = daemon.socket_path
    tmux = Tmux(f"cardctl-sim-test-{sock.parent.name}", [str(CARDCTL), "--socket", str(sock), "watch"])
    try:
        tmux.wait_for(lambda s: device_row(s, "shuffler")[1:3] == ["up", "idle"])
        opened = cardctl(sock, "sim", "switch", "shuffler", "door_open")
        assert opened.code == 0 and opened.out.endswith("; on now: door_open\n"), opened.out
        status = cardctl(sock, "status", "--json").json()["state"]["devices"]["shuffler"]
        assert (status["state"], status["fault"]) == ("fault", "door_open")
        assert device_row(cardctl(sock, "status").out, "shuffler")[2] == "fault"
        tmux.wait_for(lambda s: device_row(s, "shuffler")[2] == "fault")
        refused = cardctl(sock, "shuffle")
        assert refused.code == 1 and "door" in refused.one_line_error()
        closed = cardctl(sock, "sim", "switch", "shuffler", "--off", "door_open")
        assert closed.code == 0 and closed.out.endswith("; on now: none\n"), closed.out
        tmux.wait_for(lambda s: device_row(s, "shuffler")[2] == "idle")
        assert device_row(cardctl(sock, "status").out, "shuffler")[2] == "idle"
        # a fault now, cleared as a real one by the technician
        jam = cardctl(sock, "sim", "fault", "shoe", "sensor")
        assert jam.code == 0 and jam.out.startswith("sim fault: the shoe reports fault sensor (journal seq "), jam.out
        assert jam.out.rstrip().endswith("once fixed: cardctl clear-fault shoe sensor")
        tmux.wait_for(lambda s: device_row(s, "shoe-reader")[2] == "fault")
        assert device_row(cardctl(sock, "status").out, "shoe-reader")[2] == "fault"
        assert cardctl(sock, "clear-fault", "shoe", "sensor").code == 0
        tmux.wait_for(lambda s: device_row(s, "shoe-reader")[2] != "fault")
    finally:
        tmux.close()


def test_a_face_up_card_switched_on_voids_its_round_in_status(daemon: Daemon) -> None:
    sock = daemon.socket_path
    for args in (("shuffle",), ("sim", "load-shoe"), ("sim", "deal", "--needed"), ("round", "open"),
                 ("round", "bet", "2", "ann", "25"), ("round", "no-more-bets")):
        assert cardctl(sock, *args).code == 0, args
    out = cardctl(sock, "status", "--json").json()["state"]["shoe"]["cards_out"]
    assert cardctl(sock, "sim", "switch", "shoe", f"face_up_at={out + 2}").code == 0
    dealt = cardctl(sock, "sim", "deal", "--needed")
    assert dealt.code == 0 and dealt.out.startswith("sim deal: 2 cards out: "), dealt.out
    assert "now the next round: cardctl round open" in dealt.out
    status = cardctl(sock, "status").out
    assert re.search(r"^round 1: void", status, re.M) and "FACE_UP_CARD" in status, status


# ---- the shoe ------------------------------------------------------------------------------

def test_deal_says_which_cards_came_out_and_what_the_table_waits_for(daemon: Daemon) -> None:
    sock = daemon.socket_path
    assert cardctl(sock, "shuffle").code == 0
    loaded = cardctl(sock, "sim", "load-shoe", "--cut-at", "60")
    assert loaded.code == 0
    assert re.fullmatch(r"sim load-shoe: 312 cards into the shoe, the cut card after card 60 \(journal seq \d+\)\n",
                        loaded.out), loaded.out
    dealt = cardctl(sock, "sim", "deal", "3", "--json")
    assert dealt.code == 0
    drawn = dealt.json()["data"]["result"]["drawn"]
    assert len(drawn) == 3 and dealt.json()["data"]["result"]["cards"] == 3
    # the burn card, then two cards drawn in error (no round is open): what the table read, in order
    state = cardctl(sock, "status", "--json").json()["state"]
    assert state["shoe"]["cards_out"] == 3 and state["piles"]["drawn_in_error"] == drawn[1:], state["piles"]
    both = cardctl(sock, "sim", "deal", "2", "--needed")
    assert both.code == 2 and "give N cards or --needed, not both" in both.err
    nothing = cardctl(sock, "sim", "deal", "--needed")
    assert nothing.code == 0 and nothing.out == ("sim deal: no card dealt; now the dealer's word on the card drawn "
                                                 "in error: cardctl round drawn-in-error exposed|unexposed\n")
    for _ in drawn[1:]:
        assert cardctl(sock, "round", "drawn-in-error", "exposed").code == 0
    nothing = cardctl(sock, "sim", "deal", "--needed")
    assert nothing.out == "sim deal: no card dealt; now the next round: cardctl round open\n", nothing.out
    early = cardctl(sock, "sim", "unload-shoe")
    assert early.code == 1
    assert early.one_line_error() == ("cardctl: sim unload-shoe: the shoe is in_play: the stub comes out once it "
                                      "is complete")
    cut = cardctl(sock, "sim", "load-shoe", "--cut-at", "0")
    assert cut.code == 2 and "--cut-at" in cut.err


def test_sim_commands_against_a_real_table_say_they_are_for_a_simulated_one(directory: Path) -> None:
    with SimulatedTable.over_ptys() as sim:
        config = write_config(directory, sim.shoe.url, sim.shuffler.url)
        running = Daemon(["--config", str(config)], directory / "cardd.sock")
        try:
            for args in (("sim", "load-shoe"), ("sim", "deal"), ("sim", "deal", "--needed"), ("sim", "unload-shoe"),
                         ("sim", "fault", "shuffler"), ("sim", "switch", "shoe", "face_up_at=3"),
                         ("sim", "switches")):
                refused = cardctl(running.socket_path, *args)
                assert refused.code == 2, (args, refused.err)
                assert refused.one_line_error() == (
                    f"cardctl: {' '.join(args[:2])}: for a simulated table only (cardd --simulate): the daemon on "
                    f"{running.socket_path} runs a real table, whose cards move by hand"), refused.err
        finally:
            running.stop()


def test_unload_shoe_prints_the_stub_as_shoe_remainder_takes_it(daemon: Daemon) -> None:
    """A shoe whose cut card comes right after the burn card: one round, then the stub's count,
    printed as CARD=N words that cardctl shoe remainder reconciles as they stand."""
    sock = daemon.socket_path
    for args in (("shuffle",), ("sim", "load-shoe", "--cut-at", "1"), ("sim", "deal", "--needed"), ("round", "open"),
                 ("round", "bet", "1", "ann", "25"), ("round", "no-more-bets")):
        assert cardctl(sock, *args).code == 0, args
    client = daemon.client()
    for _ in range(8):  # insurance declined, the players stand until the round is over
        dealt = cardctl(sock, "sim", "deal", "--needed")
        assert dealt.code == 0, dealt.err
        if "now insurance is offered" in dealt.out:
            assert cardctl(sock, "round", "close-insurance").code == 0
            continue
        turn = client.state()["round"]["turn"]
        if turn is None:
            break
        assert cardctl(sock, "round", "act", str(turn[1]), "stand").code == 0
    client.close()
    assert "now the shoe is complete: count its remainder with cardctl sim unload-shoe" in dealt.out, dealt.out
    unloaded = cardctl(sock, "sim", "unload-shoe")
    assert unloaded.code == 0, unloaded.err
    head, counted = unloaded.out.rstrip("\n").split(", counted: ")
    assert re.fullmatch(r"sim unload-shoe: \d+ undealt cards back to the shuffler \(journal seq \d+\)", head), head
    words = counted.split()
    assert all(re.fullmatch(r"[2-9TJQKA][CDHS]=\d+", word) for word in words), words
    reconciled = cardctl(sock, "shoe", "remainder", *words)
    assert reconciled.code == 0, reconciled.err
    assert cardctl(sock, "status", "--json").json()["state"]["shoe"]["state"] == "reconciled"


def test_a_card_the_shoe_cannot_read_is_named_from_what_the_deal_printed(daemon: Daemon) -> None:
    """unreadable_at: the table waits for the dealer's word on the card; the deal printed it."""
    sock = daemon.socket_path
    for args in (("shuffle",), ("sim", "load-shoe"), ("sim", "deal", "--needed"), ("round", "open"),
                 ("round", "bet", "1", "ann", "25"), ("round", "no-more-bets")):
        assert cardctl(sock, *args).code == 0, args
    out = cardctl(sock, "status", "--json").json()["state"]["shoe"]["cards_out"]
    assert cardctl(sock, "sim", "switch", "shoe", f"unreadable_at={out + 2}").code == 0
    dealt = cardctl(sock, "sim", "deal", "--needed")
    drawn = DRAWN.match(dealt.out)
    assert dealt.code == 0 and drawn is not None, dealt.out
    assert dealt.out.rstrip().endswith("now the dealer names the card the shoe could not read: cardctl shoe "
                                       "enter-card CARD"), dealt.out
    unread = drawn[1].split(", ")[-1]
    assert cardctl(sock, "status", "--json").json()["state"]["awaiting_entry"] == out + 2
    entered = cardctl(sock, "shoe", "enter-card", unread)
    assert entered.code == 0 and f"entered by the dealer as {unread}" in entered.out, entered.out
    assert cardctl(sock, "sim", "switch", "shoe", "--off", "unreadable_at").out.endswith("on now: none\n")
    going_on = cardctl(sock, "sim", "deal", "--needed")  # the deal goes on: box 1's second card, and on
    assert going_on.code == 0 and re.match(r"sim deal: \d+ cards? out: ", going_on.out), going_on.out
    assert "could not read" not in going_on.out
