"""cardctl's seat commands (take_seat, leave_seat, ask_for_box) and the supervisor's reconstructions
(placement_error with or without a layout, cards_to_box_without_wager): the real ``cardctl``
against a real ``cardd --simulate``; a refusal that names one names the cardctl command."""
from __future__ import annotations

from typing import Any

import click
import pytest

from cardd.cli.table import parse_layout
from tests.cli.cli_rig import cardctl
from tests.daemon.daemon_rig import Daemon, open_and_bet, shuffle_and_load, sim_deal


def ok(daemon: Daemon, *args: str) -> list[str]:
    run = cardctl(daemon.socket_path, *args)
    assert run.code == 0, (args, run.err)
    return run.out.splitlines()


def test_seats_a_player_asks_for_a_box_and_leaves(daemon: Daemon) -> None:
    sock = daemon.socket_path
    refused = cardctl(sock, "seat", "ask-for-box", "dave")
    assert refused.code == 1
    assert refused.one_line_error() == ("cardctl: seat ask-for-box refused: dave is not seated: only a seated player "
                                        "asks for a box (seat him with cardctl seat take first)")
    taken = ok(daemon, "seat", "take", "dave")
    assert taken[0].startswith("seat take: ok (journal seq ") and taken[1:] == ["dave takes a seat"], taken
    asked = ok(daemon, "seat", "ask-for-box", "dave")
    assert asked[1:] == ["dave asks for a box (boxes are given up on request)"], asked  # casino-000: give_up_boxes
    again = cardctl(sock, "seat", "take", "dave")
    assert again.code == 1 and again.one_line_error() == "cardctl: seat take refused: dave is already seated"
    assert ok(daemon, "seat", "leave", "dave")[1:] == ["dave leaves the table"]
    record = cardctl(sock, "seat", "take", "erin", "--json").json()
    assert record["outcome"]["data"]["action"] == "take_seat" and record["outcome"]["data"]["player"] == "erin"


def _initial_deal(daemon: Daemon, cards: int) -> tuple[Any, Any]:
    """A round with bets on box 1 and box 3, through the API, in its initial deal, ``cards`` dealt:
    the two boxes' cards."""
    client = daemon.client()
    shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), sim_deal(client))
    open_and_bet(client)
    client.ok("sim_deal", cards=cards)
    state = client.wait_state(lambda s: len(s["round"]["boxes"]["1"][0]["cards"])
                              + len(s["round"]["boxes"]["3"][0]["cards"]) == cards)
    client.close()
    assert state["round"]["state"] == "initial_deal", state["round"]
    return state["round"]["boxes"]["1"][0]["cards"], state["round"]["boxes"]["3"][0]["cards"]


def test_a_placement_error_reconstructs_the_layout_the_supervisor_gives(daemon: Daemon) -> None:
    sock = daemon.socket_path
    (first,), (second,) = _initial_deal(daemon, 2)  # one card each on boxes 1 and 3
    # checked before it is sent: no COMMAND_REFUSED for a layout the daemon could not even read
    for wrong, says in ((f"{first}=7x", "'7x' is no box"), ("ZZ=1", "'ZZ=1': 'ZZ' is not a card: expected rank")):
        run = cardctl(sock, "round", "placement-error", wrong, f"{second}=1")
        assert run.code == 2 and says in run.err and "CARD=BOX or CARD=dealer" in run.err, (wrong, run.err)
    client = daemon.client()
    assert client.request({"class": "LOG", "reason": "COMMAND_REFUSED"})["records"] == []
    # the daemon's own check: every dealt card, once
    short = cardctl(sock, "round", "placement-error", f"{first}=3")
    assert short.code == 1 and short.one_line_error().startswith(
        "cardctl: round placement-error refused: the reconstructed layout must hold exactly the cards dealt so far"), \
        short.err
    # the two cards the other way round: the supervisor's layout is the round's
    done = ok(daemon, "round", "placement-error", f"{second}=1", f"{first}=3")
    assert done[0].startswith("round placement-error: ok (journal seq ") and done[1] == "round 1: initial deal reconstructed"
    boxes = client.state()["round"]["boxes"]
    assert (boxes["1"][0]["cards"], boxes["3"][0]["cards"]) == ([second], [first])
    (record,) = client.request({"class": "LOG", "reason": "PLACEMENT_ERROR"})["records"]
    assert record["data"]["layout"] == [[second, "box 1 hand 1"], [first, "box 3 hand 1"]]
    client.close()


def test_a_placement_error_without_a_layout_and_cards_to_a_box_without_a_wager(daemon: Daemon) -> None:
    sock = daemon.socket_path
    refused = cardctl(sock, "round", "placement-error")
    assert refused.code == 1 and refused.one_line_error().startswith("cardctl: round placement-error refused: "), \
        refused.err
    one, three = _initial_deal(daemon, 2)
    assert ok(daemon, "round", "placement-error")[1] == "round 1: initial deal reconstructed"
    redealt = ok(daemon, "round", "cards-to-box-without-wager")
    assert redealt[0].startswith("round cards-to-box-without-wager: ok (journal seq ")
    assert redealt[1] == "round 1: 2 cards in play reconstructed, to be re-dealt in the same order", redealt
    client = daemon.client()
    (record,) = client.request({"class": "LOG", "reason": "CARDS_TO_BOX_WITHOUT_WAGER"})["records"]
    assert record["data"]["cards"] == one + three
    client.close()


def test_a_layout_is_read_as_the_api_takes_it_or_refused_naming_the_token() -> None:
    assert parse_layout(("9s=3", "10H=1", "4C=dealer")) == [
        ["9S", ["box", 3, 0]], ["TH", ["box", 1, 0]], ["4C", ["dealer", None, None]]]
    for wrong, says in (("AS", "'AS': no place given"), ("AS=0", "'0' is no box"), ("AS=-1", "'-1' is no box"),
                        ("AS=²", "'²' is no box"), ("AS=Dealer", "'Dealer' is no box"), ("=1", "'=1': no card given"),
                        ("ZZ=1", "'ZZ=1': 'ZZ' is not a card: expected rank A,2-9,T(10),J,Q,K then suit C,D,H,S, "
                                 "e.g. 'AS' (each dealt card")):
        with pytest.raises(click.BadParameter, match="CARD=BOX or CARD=dealer") as refused:
            parse_layout(("KD=1", wrong))
        assert says in str(refused.value), (wrong, str(refused.value))
        assert str(refused.value).count("not a card") <= 1, str(refused.value)  # one statement, not the decoder's two
