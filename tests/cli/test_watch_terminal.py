"""``cardctl watch`` in a real terminal (tmux): what a person sees as the table moves — the
boxes with their totals, an alarm appearing and then clearing."""
from __future__ import annotations

import subprocess

from cardd.api.client import ApiClient
from tests.cli.cli_rig import CARDCTL
from tests.daemon.daemon_rig import shuffle_and_load, simulate
from tests.support.terminal import Tmux

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
