"""What ``cardctl status`` shows a supervisor: a device in fault with its code and what ends it,
the unreadable card waiting for ``cardctl shoe enter-card`` with every card dealt counted out,
and every box's hands with their cards, totals, what each hand is (bust, blackjack, stood,
doubled, surrendered) and, once settled, each player's result. The real ``cardctl`` against a
real ``cardd``: ``--simulate`` (faults raised through its API), or the bench's rig for a stacked
shoe."""
from __future__ import annotations

from typing import Any

from cardd.bench.scenario import Deal, DeviceSetup, Devices, Load, Scenario, Shuffle
from tests.cli.cli_rig import cardctl
from tests.cli.test_cardctl_table_flows import ok, table
from tests.daemon.daemon_rig import Daemon, shuffle_and_load


def rows(out: str) -> dict[str, list[str]]:
    """The rows of the hands table in ``status``'s output: the first cell (``box 3``, ``dealer``)
    -> the cells after it."""
    found = {}
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if cells and (cells[0].startswith("box ") or cells[0] == "dealer"):
            found[cells[0]] = cells[1:]
    return found


def one_line(out: str, start: str) -> str:
    """The line of ``out`` that starts with ``start`` (exactly one)."""
    lines = [line for line in out.splitlines() if line.startswith(start)]
    assert len(lines) == 1, out
    return lines[0]


def test_status_shows_a_device_in_fault_with_its_code_and_what_ends_it(daemon: Daemon) -> None:
    sock = daemon.socket_path
    client = daemon.client()
    try:
        assert "in fault" not in cardctl(sock, "status").out
        client.ok("sim_fault", device="shuffler", code="jam")
        device = client.wait_state(lambda s: s["devices"]["shuffler"]["state"] == "fault")["devices"]["shuffler"]
        assert device["fault"] == "jam" and device["fault_ends"] == (
            "wait for the device to clear it, or a technician clears it with clear_fault shuffler jam once it is "
            "fixed"), device
        assert one_line(cardctl(sock, "status").out, "shuffler in fault") == (
            "shuffler in fault: jam: wait for the device to clear it, or a technician clears it with cardctl "
            "clear-fault shuffler jam once it is fixed")
        client.ok("clear_fault", device="shuffler", code="jam")
        client.wait_state(lambda s: s["devices"]["shuffler"]["state"] != "fault")
        assert "in fault" not in cardctl(sock, "status").out
        # a door: only closing it ends the fault, a technician's clear-fault is refused
        client.ok("sim_switches", device="shuffler", switches="door_open")
        client.wait_state(lambda s: s["devices"]["shuffler"]["fault"] == "door_open")
        assert one_line(cardctl(sock, "status").out, "shuffler in fault") == (
            "shuffler in fault: door_open: it ends when the door is closed (cardctl clear-fault is refused while it "
            "is open)")
        client.ok("sim_switches", device="shuffler", switches="door_open=0")
        client.wait_state(lambda s: s["devices"]["shuffler"]["state"] != "fault")
    finally:
        client.close()


def test_status_counts_every_card_dealt_and_names_the_unreadable_card_to_enter(daemon: Daemon) -> None:
    """The shoe could not read card #2: it and the two read after it wait for the dealer to name it,
    out of the shoe all the same (the count said "1 of 312 out" while 4 were)."""
    sock = daemon.socket_path
    client = daemon.client()
    try:
        shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), lambda n: client.ok("sim_deal", cards=n))
        client.ok("sim_switches", device="shoe", switches="unreadable_at=2")  # the burn card was #1
        client.ok("open_round")
        client.ok("place_bet", box=1, player="alice", amount=2500)
        client.ok("no_more_bets")
        client.ok("sim_deal", cards=3)
        state = client.wait_state(lambda s: s["shoe"]["cards_out"] == 4)
        assert state["awaiting_entry"] == 2 and state["reads_behind_entry"] == 2, state
        out = cardctl(sock, "status").out
        assert one_line(out, "shoe: in_play") == "shoe: in_play, 4 of 312 cards out (1% penetration)"
        assert one_line(out, "unreadable") == ("unreadable card #2 waits for the dealer: cardctl shoe enter-card CARD "
                                              "(2 cards read after it wait for it)")
        entered = cardctl(sock, "shoe", "enter-card", "9d")
        assert entered.code == 0, entered.err
        state = client.wait_state(lambda s: s["awaiting_entry"] is None)
        assert state["shoe"]["cards_out"] == 4 and state["reads_behind_entry"] == 0, state
        out = cardctl(sock, "status").out
        assert "unreadable" not in out and one_line(out, "shoe: in_play").startswith("shoe: in_play, 4 of 312 cards out")
    finally:
        client.close()


#: casino-000 (burn 1, no hole card, surrender before any hand draws): burn 2C; the initial deal box 1
#: TC, box 2 AS, box 3 TS, box 4 5S, box 5 TD, dealer 6H, then 6D KH 5H 6C 8S; box 1 surrenders, box 3
#: hits KD (25), box 4 doubles on 9C (20), box 5 stands on 18; the dealer draws TH 3H: 19
STACK = ["2C", "TC", "AS", "TS", "5S", "TD", "6H", "6D", "KH", "5H", "6C", "8S", "KD", "9C", "TH", "3H"]


def hands(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {box: hands[0] for box, hands in state["round"]["boxes"].items()}


def test_status_shows_every_hand_what_it_is_and_each_players_result() -> None:
    scenario = Scenario(description="five hands", rules="casino-000", step=[],
                        devices=Devices(shuffler=DeviceSetup(stack=STACK)))
    with table(scenario) as rig:
        rig.do(Shuffle())
        rig.do(Load())
        ok(rig, "round", "open")
        for box in range(1, 6):
            ok(rig, "round", "bet", str(box), f"p{box}", "25")
        ok(rig, "round", "no-more-bets")
        rig.do(Deal(cards=11))
        ok(rig, "round", "act", "1", "surrender")
        ok(rig, "round", "act", "3", "hit")
        rig.do(Deal(cards=1))
        ok(rig, "round", "act", "4", "double")
        rig.do(Deal(cards=1))
        live = rows(ok(rig, "status"))  # before the dealer's hand: what each hand is, no result yet
        assert live["box 1"] == ["1", "TC 6D", "16", "p1 25.00", "surrendered"], live
        assert live["box 2"] == ["1", "AS KH", "soft 21", "p2 25.00", "blackjack"], live
        assert live["box 3"] == ["1", "TS 5H KD", "25", "p3 25.00", "bust"], live
        assert live["box 4"] == ["1", "5S 6C 9C", "20", "p4 25.00", "stood, doubled"], live
        assert live["box 5"] == ["1", "TD 8S", "18", "p5 25.00", "<- to act"], live
        ok(rig, "round", "act", "5", "stand")
        rig.do(Deal(cards=2))
        state = rig.state()
        assert state["round"]["state"] == "complete", state["round"]
        assert [(h["bust"], h["blackjack"]) for h in hands(state).values()] == [
            (False, False), (False, True), (True, False), (False, False), (False, False)]
        assert hands(state)["4"]["results"] == [
            {"player": "p4", "kind": "main", "outcome": "win", "stake": 5000, "net": 5000}], hands(state)["4"]
        assert state["round"]["player_results"] == {"p1": -1250, "p2": 3750, "p3": -2500, "p4": 5000, "p5": -2500}
        out = ok(rig, "status")
        settled = rows(out)
        assert settled["box 1"][-1] == "surrendered, p1 surrender -12.50", settled
        assert settled["box 2"][-1] == "blackjack, p2 blackjack +37.50", settled
        assert settled["box 3"][-1] == "bust, p3 bust -25.00", settled
        assert settled["box 4"][-1] == "stood, doubled, p4 win +50.00", settled
        assert settled["box 5"][-1] == "stood, p5 lose -25.00", settled
        assert settled["dealer"][:3] == ["", "6H TH 3H", "19"], settled
        assert one_line(out, "results:") == "results: p1 -12.50, p2 +37.50, p3 -25.00, p4 +50.00, p5 -25.00"
        assert one_line(out, "round 1:") == "round 1: complete, house -25.00"
