"""``cardctl watch`` in a real terminal (tmux): what a person sees as the table moves — the
boxes with their totals, an alarm appearing and then clearing, seven boxes under the alarms at
80x24 and the frame redrawn when the terminal grows to 160x48, cardd restarted under the view."""
from __future__ import annotations

import json
import re
import subprocess
from typing import Any

from cardd.api.client import ApiClient
from tests.cli.cli_rig import CARDCTL
from tests.daemon.daemon_rig import Client, Daemon, shuffle_and_load, simulate, wait_until
from tests.support.terminal import Tmux, kept_open, line_width

SESSION_PREFIX = "cardctl-watch-test"


def above_the_events(screen: str) -> str:
    """The screen down to the events list, whose messages may name ROUND_HELD or ALARM_CLEARED."""
    return screen.split("\nlast events", 1)[0]


def trouble(screen: str) -> str:
    """The view's lines of trouble (alarms, holds, faults, ...: under its heading, above the
    devices), as one text with the lines a long one wraps over joined."""
    lines = screen.splitlines()[1:]
    end = next((i for i, line in enumerate(lines) if line.startswith(("shuffler ", "shoe-reader "))), len(lines))
    return " ".join(" ".join(lines[:end]).split())


def test_watch_shows_the_boxes_totals_and_an_alarm_appearing_and_clearing(directory):
    with simulate(directory) as daemon:
        client = daemon.client()
        client.wait_state(lambda s: all(d["link"] == "up" for d in s["devices"].values()))
        tmux = Tmux(f"{SESSION_PREFIX}-{directory.name}", [str(CARDCTL), "--socket", str(daemon.socket_path), "watch"])
        try:
            tmux.wait_for(lambda s: "SHOE0001" in s and "no round open" in s)
            shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), lambda n: client.ok("sim_deal", cards=n))
            client.ok("open_round")
            client.ok("place_bet", box=2, player="alice", amount=2500)
            client.ok("place_bet", box=5, player="bob", amount=1000)
            client.ok("no_more_bets")
            for _ in range(3):
                client.ok("sim_deal", cards=1)
            state = client.wait_state(lambda s: len(s["round"]["boxes"]["5"][0]["cards"]) == 1
                                      and len(s["round"]["dealer"]["cards"]) == 1)
            box2 = state["round"]["boxes"]["2"][0]

            def box_2(screen: str) -> str:
                return next((row for row in screen.splitlines() if "box 2" in row), "")

            # the view follows the events: wait for the card, not only the bets, to be drawn
            screen = tmux.wait_for(lambda s: "alice 25.00" in s and "bob 10.00" in s and box2["cards"][0] in box_2(s))
            assert str(box2["total"]) in box_2(screen)
            # its first hand is hand 1, as the journal's message about the card says
            assert box_2(screen).split()[:3] == ["box", "2", "1"], box_2(screen)
            with ApiClient(daemon.socket_path) as reader:
                assigned = [r.message for r in reader.log(reason="CARD_ASSIGNED", limit=100).records]
            assert any("box 2 hand 1" in message for message in assigned), assigned
            assert "ALARM" not in screen
            with ApiClient(daemon.socket_path) as other:
                other.command("sim_fault", device="shuffler", code="jam")
            screen = tmux.wait_for(lambda s: "ALARM" in s and "SHUFFLER_MALFUNCTION" in s)
            assert "HELD" in screen
            client.ok("clear_fault", device="shuffler", code="jam")
            for alarm in client.wait_state(lambda s: s["devices"]["shuffler"]["state"] != "fault")["alarms"]:
                client.ok("clear_alarm", alarm_id=alarm["id"])
            client.ok("resume")
            # the trouble table empties; the events below it may still name ALARM_CLEARED
            screen = tmux.wait_for(lambda s: "ALARM" not in trouble(s) and "HELD" not in above_the_events(s))
            assert trouble(screen) == "holds and alarms: none", screen
            assert "alice 25.00" in screen
        finally:
            tmux.close()
            client.close()


def test_watch_shows_a_card_drawn_in_error_until_the_dealer_settles_it(directory):
    """A card drawn between rounds waits for the dealer's word (exposed or not) and no round opens
    meanwhile: the view names the card and the command, as ``cardctl status`` does."""
    with simulate(directory) as daemon:
        client = daemon.client()
        client.wait_state(lambda s: all(d["link"] == "up" for d in s["devices"].values()))
        tmux = Tmux(f"{SESSION_PREFIX}-{directory.name}", [str(CARDCTL), "--socket", str(daemon.socket_path), "watch"])
        try:
            shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), lambda n: client.ok("sim_deal", cards=n))
            screen = tmux.wait_for(lambda s: "in_play" in s)
            assert "DRAWN IN ERROR" not in screen
            client.ok("sim_deal", cards=1)  # no round open
            card, = client.wait_state(lambda s: bool(s["piles"]["drawn_in_error"]))["piles"]["drawn_in_error"]
            screen = tmux.wait_for(lambda s: "DRAWN IN ERROR" in s)
            assert f"DRAWN IN ERROR {card}: waiting for the dealer (cardctl round drawn-in-error exposed|unexposed)" \
                in trouble(screen), screen
            client.ok("drawn_in_error", exposed=True)
            screen = tmux.wait_for(lambda s: "DRAWN IN ERROR" not in s)
            assert trouble(screen) == "holds and alarms: none", screen
        finally:
            tmux.close()
            client.close()


def test_watch_and_status_show_the_cards_exposed_in_error_that_the_next_hands_take(directory):
    """Cards that leave the shoe while the players decide are exposed in error and used as the next
    cards (seeds 002, 003): the dealer sees which, in order, in the view and in ``cardctl status``."""
    with simulate(directory) as daemon:
        client = daemon.client()
        client.wait_state(lambda s: all(d["link"] == "up" for d in s["devices"].values()))
        tmux = Tmux(f"{SESSION_PREFIX}-{directory.name}", [str(CARDCTL), "--socket", str(daemon.socket_path), "watch"])
        try:
            state = shuffle_and_load(client, lambda: client.ok("sim_load_shoe"),
                                     lambda n: client.ok("sim_deal", cards=n))
            client.ok("open_round")
            for box in (1, 2, 3):  # three boxes: not every one a blackjack, so the players decide
                client.ok("place_bet", box=box, player=f"p{box}", amount=2500)
            client.ok("no_more_bets")
            dealt = state["shoe"]["cards_out"] + 7
            client.ok("sim_deal", cards=7)  # the initial deal: two cards a box, one to the dealer
            state = client.wait_state(lambda s: s["shoe"]["cards_out"] == dealt)
            assert state["round"]["state"] in ("insurance", "players"), state["round"]  # no card expected
            client.ok("sim_deal", cards=3)
            exposed = client.wait_state(lambda s: len(s["piles"]["pending"]) == 3)["piles"]["pending"]
            status = subprocess.run([str(CARDCTL), "--socket", str(daemon.socket_path), "status"],
                                    capture_output=True, text=True, timeout=60)
            assert f"exposed in error, used as the next cards in this order: {', '.join(exposed)}" in \
                " ".join(status.stdout.split()), status.stdout
            screen = tmux.wait_for(lambda s: "in this order" in trouble(s))
            assert f"EXPOSED IN ERROR {', '.join(exposed)}: used as the next cards, in this order" in trouble(screen), \
                screen
            assert "none" not in trouble(screen), screen
        finally:
            tmux.close()
            client.close()


def seven_boxes_dealt(client: Client) -> dict[str, Any]:
    """A shoe in play, a bet on each of the seven boxes, the initial deal: two cards a box, the dealer's one."""
    shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), lambda n: client.ok("sim_deal", cards=n))
    client.ok("open_round")
    for box in range(1, 8):
        client.ok("place_bet", box=box, player=f"player{box}", amount=2500)
    client.ok("no_more_bets")
    client.ok("sim_deal", cards=15)
    return client.wait_state(lambda s: len(s["round"]["boxes"].get("7", [{"cards": []}])[0]["cards"]) == 2)


def test_watch_fits_seven_boxes_under_the_alarms_at_80x24_and_redraws_at_160x48_when_resized(directory):
    with simulate(directory) as daemon:
        client = daemon.client()
        client.wait_state(lambda s: all(d["link"] == "up" for d in s["devices"].values()))
        tmux = Tmux(f"{SESSION_PREFIX}-{directory.name}", [str(CARDCTL), "--socket", str(daemon.socket_path), "watch"],
                    width=80, height=24)
        try:
            tmux.wait_for(lambda s: "SHOE0001" in s)
            state = seven_boxes_dealt(client)
            client.ok("sim_fault", device="shuffler", code="jam")
            held = client.wait_state(lambda s: len(s["alarms"]) == 2 and s["round"]["held"] is not None)
            alarms = [f"ALARM {a['id']} {a['reason']}: " for a in held["alarms"]]
            hands = {box: " ".join(hands[0]["cards"]) for box, hands in state["round"]["boxes"].items()}

            def whole(screen: str) -> bool:
                return all(alarm in screen for alarm in alarms) and "FAULT shuffler jam" in screen \
                    and "dealer" in screen

            screen = tmux.wait_for(whole)
            lines = screen.splitlines()
            # first what needs a person: the alarms, the hold, the fault, a line each under the heading
            assert [line.split(":")[0] for line in lines[1:5]] == [alarm.split(":")[0] for alarm in alarms] + [
                "HOLD SHUFFLER_MALFUNCTION", "FAULT shuffler jam"], screen
            assert all(line_width(line) <= 80 for line in lines), screen
            for box, cards in hands.items():  # every box below them, with its cards
                assert any(line.split()[:2] == ["box", box] and cards in line for line in lines), (box, screen)
            assert any(line.split()[:1] == ["dealer"] for line in lines), screen
            assert "clears this alarm" not in screen  # the long message cut to its line
            tmux.resize(160, 48)
            # the same frame at the new size, no event needed: each line whole, the export line back
            screen = tmux.wait_for(lambda s: "clears this" in s and "retention" in s)
            assert any(line_width(line) > 80 for line in screen.splitlines()), screen
            assert "cardctl clear-fault shuffler jam once it is fixed" in screen
            assert screen.index("ALARM") < screen.index("shoe-reader") < screen.index("box 7")
        finally:
            tmux.close()
            client.close()


def last_events(screen: str) -> list[str]:
    """The rows of the view's last events, each starting with its seq (a long message's wrapped lines left out)."""
    return [line for line in screen.partition("\nlast events\n")[2].splitlines() if line[:1].isdigit()]


def shown_seq(screen: str) -> int:
    """The journal seq the view's heading names."""
    found = re.search(r"— journal seq (\d+) —", screen)
    assert found, screen
    return int(found.group(1))


def test_watch_says_when_cardd_restarts_and_goes_on_from_the_last_event_it_showed(directory):
    """cardd killed and started again on its state directory: the view says it lost cardd, tries
    again until cardd is back, says cardd restarted and replays every event after the last one it
    had (a JSON watch beside it gets each seq once, none missing); Ctrl-C still leaves it."""
    daemon = Daemon(["--simulate", "--state-dir", str(directory)], directory / "cardd.sock")
    client = daemon.client()
    watch = [str(CARDCTL), "--socket", str(daemon.socket_path), "watch"]
    # the shell that keeps the terminal open outlives the Ctrl-C typed into it (a trap, not an ignore,
    # which cardctl would inherit), and says how cardctl ended
    shell, script = kept_open(*watch)[:2], kept_open(*watch)[2]
    tmux = Tmux(f"{SESSION_PREFIX}-{directory.name}", [*shell, f"trap : INT; {script}"], width=160, height=48)
    lines, log = directory / "watch.jsonl", directory / "watch.err"
    with lines.open("w") as out, log.open("w") as err:
        as_json = subprocess.Popen([*watch, "--json"], stdout=out, stderr=err)

    def json_seq(seq: int) -> bool:
        return any(json.loads(line).get("seq") == seq for line in lines.read_text().splitlines())
    try:
        client.wait_state(lambda s: all(d["link"] == "up" for d in s["devices"].values()))
        tmux.wait_for(lambda s: "SHOE0001" in s)
        wait_until(lambda: lines.read_text().startswith('{"class": "STATE"'), "the JSON watch's STATE")
        client.ok("start_shuffle")  # both watches follow the table now: the shuffle reaches them as events
        client.wait_state(lambda s: s["shoe"]["state"] == "verified")
        (verified,) = client.request({"class": "LOG", "reason": "SHOE_VERIFIED"})["records"]  # the shuffle's last
        # the view has it: its last event, the heading's seq (a STATE can be ahead of the events read)
        tmux.wait_for(lambda s: f"{verified['seq']} " in last_events(s)[-1:][0] and shown_seq(s) == verified["seq"]
                      if last_events(s) else False)
        before = verified["seq"]
        wait_until(lambda: json_seq(before), "the JSON watch had the shuffle")  # it started: it watches
        client.close()
        daemon.kill()  # SIGKILL: no goodbye on the socket
        screen = tmux.wait_for(lambda s: "cardd closed the connection at" in s and "reconnecting, attempt" in s)
        assert "shoe verified" in screen and shown_seq(screen) == before  # the table as it was
        daemon = Daemon(["--simulate", "--state-dir", str(directory)], directory / "cardd.sock")
        client = daemon.client()
        client.wait_state(lambda s: all(d["link"] == "up" for d in s["devices"].values()))
        screen = tmux.wait_for(lambda s: f"no event missed (those after seq {before} replayed)" in s)
        assert "cardd restarted at " in screen, screen
        client.ok("sim_load_shoe")
        burning = client.wait_state(lambda s: s["shoe"]["state"] == "burning")
        screen = tmux.wait_for(lambda s: "shoe burning" in s and shown_seq(s) >= burning["seq"])
        # beside it, the JSON watch: every seq from its STATE's on, once each, none missing
        wait_until(lambda: json_seq(burning["seq"]), "the JSON watch had the load")
        records = [json.loads(line) for line in lines.read_text().splitlines()]
        seqs = [record["seq"] for record in records[1:]]
        assert seqs == list(range(records[0]["state"]["seq"] + 1, seqs[-1] + 1)), seqs
        assert any(record.get("reason") == "DAEMON_START" for record in records[1:]), records
        assert log.read_text().splitlines()[-1] == f"cardctl: reconnected; the events after seq {before} follow"
        # Ctrl-C leaves, while cardd is away too
        client.close()
        daemon.kill()
        tmux.wait_for(lambda s: "reconnecting, attempt" in s)
        tmux.send_keys("C-c")
        tmux.wait_for(lambda s: "ended with 0" in s)
    finally:
        tmux.close()
        client.close()
        as_json.terminate()
        as_json.wait(timeout=30)
        if daemon.proc.poll() is None:
            daemon.stop()
