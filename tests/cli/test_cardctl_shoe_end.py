"""cardctl's dealer commands between rounds and at the shoe's end, through the real daemon and
its simulated devices: the dealer's word on a card drawn in error (``round drawn-in-error``, named
where a round cannot open because of one) and the reconciliation (``shoe remainder``)."""
from __future__ import annotations

import json
from typing import Any

import pytest

from cardd.api.client import ApiClient
from tests.cli.cli_rig import cardctl
from tests.daemon.daemon_rig import Client, Daemon, open_and_bet, play_out, shuffle_and_load, sim_deal

SETTLE = "cardctl round drawn-in-error exposed|unexposed"
#: the daemon closes a connection over 50 requests a second (docs/api.md): a long run of decisions stays under it
PACE_S = 1 / 45


def load_shoe(client: Client) -> dict[str, Any]:
    """Shuffled, verified, loaded and burnt: the shoe in play, no round open."""
    return shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), sim_deal(client))


def draw_with_no_round(client: Client, cards: int) -> dict[str, Any]:
    """``cards`` drawn while no round is open: each one is a card drawn in error."""
    before = client.state()["shoe"]["cards_out"]
    client.ok("sim_deal", cards=cards)
    return client.wait_state(lambda s: s["shoe"]["cards_out"] == before + cards)


# ---- a card drawn in error -------------------------------------------------------------------

def test_a_card_drawn_in_error_waits_for_the_dealers_word_which_cardctl_names_and_gives(daemon: Daemon):
    client = daemon.client()
    load_shoe(client)
    before = draw_with_no_round(client, 2)
    first, second = before["piles"]["drawn_in_error"]
    client.close()
    sock = daemon.socket_path

    refused = cardctl(sock, "round", "open")
    assert refused.code == 1
    assert refused.one_line_error() == ("cardctl: round open refused: a card drawn in error waits for the dealer's "
                                        "word: give it with cardctl round drawn-in-error (exposed or not) first "
                                        f"(waiting: {first}, {second})")
    status = cardctl(sock, "status")
    assert f"drawn in error, waiting for the dealer: {first}, {second} ({SETTLE})" in status.out

    exposed = cardctl(sock, "round", "drawn-in-error", "exposed", "--json")
    assert exposed.code == 0, exposed.err
    document = exposed.json()
    assert document["kind"] == "input" and document["data"]["exposed"] is True
    assert document["outcome"]["reason"] == "CARD_DRAWN_IN_ERROR" and document["outcome"]["seq"] > document["seq"]
    assert document["outcome"]["message"] == f"card drawn in error ({first}) discarded (exposed)"
    piles = cardctl(sock, "status", "--json").json()["state"]["piles"]
    assert (piles["discard"], piles["burn"], piles["drawn_in_error"]) == \
        (before["piles"]["discard"] + 1, before["piles"]["burn"], [second])

    unexposed = cardctl(sock, "round", "drawn-in-error", "unexposed")
    assert unexposed.code == 0, unexposed.err
    seq = unexposed.out.split("journal seq ")[1].split(")")[0]
    assert unexposed.out == (f"round drawn-in-error: ok (journal seq {seq})\n"
                             f"card drawn in error ({second}) kept face down as the next round's burn card\n")
    piles = cardctl(sock, "status", "--json").json()["state"]["piles"]
    assert (piles["discard"], piles["burn"], piles["drawn_in_error"]) == \
        (before["piles"]["discard"] + 1, before["piles"]["burn"] + 1, [])
    assert "drawn in error" not in cardctl(sock, "status").out

    nothing = cardctl(sock, "round", "drawn-in-error", "exposed")
    assert nothing.code == 1
    assert nothing.one_line_error() == "cardctl: round drawn-in-error refused: no card drawn in error waits for a decision"
    assert cardctl(sock, "round", "drawn-in-error", "maybe").code == 2
    assert cardctl(sock, "round", "open", "--json").code == 0  # settled: the round opens


def test_a_round_refused_for_another_reason_names_no_drawn_in_error_command(daemon: Daemon):
    refused = cardctl(daemon.socket_path, "round", "open")  # nothing shuffled yet
    assert refused.code == 1
    assert refused.one_line_error() == ("cardctl: round open refused: the shoe is idle: shuffle a shoe with cardctl "
                                        "shuffle and load it first")


# ---- the remainder at the shoe's end ---------------------------------------------------------

def play_the_shoe_to_its_end(daemon: Daemon) -> dict[str, int]:
    """The cheapest way to a complete shoe: past the cut card with no round open (every card one
    drawn in error, each discarded), then the last round; returns the stub's count per card, as
    the shuffler counts it when it goes back."""
    client = daemon.client()
    state = load_shoe(client)
    cut_at = state["shoe"]["cards_in_shoe"] * 2 // 3  # the simulated shoe's cut card (simulators.rig)
    state = draw_with_no_round(client, cut_at + 2 - state["shoe"]["cards_out"])
    assert state["shoe"]["state"] == "last_round"
    with ApiClient(daemon.socket_path, pace_s=PACE_S) as paced:
        for _ in state["piles"]["drawn_in_error"]:
            paced.command("drawn_in_error", exposed=True)
    refused = cardctl(daemon.socket_path, "shoe", "remainder", "AS=1")
    assert refused.code == 1
    assert refused.one_line_error() == ("cardctl: shoe remainder refused: the shoe is last_round: its remainder is "
                                        "counted once the shoe is complete (after the cut card's last round)")
    open_and_bet(client)
    play_out(client, sim_deal(client), lambda s: None)
    client.wait_state(lambda s: s["shoe"]["state"] == "complete")
    seq = client.ok("sim_unload_shoe")
    client.close()
    with ApiClient(daemon.socket_path) as reader:
        stub: dict[str, int] = reader.log(from_seq=seq, to_seq=seq).records[0].data["result"]["returned"]
    return stub


@pytest.mark.timeout(300)
def test_the_remainder_counted_card_by_card_reconciles_the_shoe(daemon: Daemon):
    stub = play_the_shoe_to_its_end(daemon)
    sock = daemon.socket_path
    assert cardctl(sock, "shoe", "remainder", "AS=two").code == 2  # refused before anything is sent
    unknown = cardctl(sock, "shoe", "remainder", "ZZ=1", "AS")
    # checked as the daemon reads a card, before it is sent: cardctl's argument, not the API's field
    assert unknown.code == 2 and "'ZZ=1': 'ZZ' is not a card" in unknown.err, unknown.err
    first, *others = sorted(stub)
    tokens = [first] * stub[first] + [f"{card}={n}" for card, n in ((c, stub[c]) for c in others)]
    done = cardctl(sock, "shoe", "remainder", *tokens)
    assert done.code == 0, done.err
    head, message = done.out.splitlines()
    assert head.startswith("shoe remainder: ok (journal seq ")
    state = cardctl(sock, "status", "--json").json()["state"]
    returned = sum(stub.values())
    assert state["shoe"]["cards_out"] + returned == 312  # six decks
    assert message == f"shoe: complete -> reconciled: cards out {state['shoe']['cards_out']}, returned {returned}"
    assert state["shoe"]["state"] == "reconciled" and state["alarms"] == []
    again = cardctl(sock, "shoe", "remainder", "AS=1")
    assert again.code == 1 and "the shoe is reconciled" in again.one_line_error()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("view", [(), ("--json",)])
def test_a_remainder_short_of_a_card_fails_the_reconciliation_naming_it(daemon: Daemon, directory, view):
    stub = play_the_shoe_to_its_end(daemon)
    lost = sorted(stub)[0]
    counts = directory / "stub.json"
    counts.write_text(json.dumps({**stub, lost: stub[lost] - 1}))
    failed = cardctl(daemon.socket_path, "shoe", "remainder", "--file", str(counts), *view)
    assert failed.code == 1
    assert f"missing: {lost}" in failed.one_line_error() and "cardctl alarm" in failed.one_line_error()
    if view:  # the record and what it led to, for a script
        document = failed.json()
        assert document["outcome"]["reason"] == "RECONCILIATION_FAILED"
    else:  # what happened, once: no "shoe_remainder: ok" above the failure
        assert failed.out == ""
    state = cardctl(daemon.socket_path, "status", "--json").json()["state"]
    assert state["shoe"]["state"] == "unreconciled"
    assert [a["reason"] for a in state["alarms"]] == ["RECONCILIATION_FAILED"]


def test_remainder_input_errors_are_usage_errors_naming_the_input(daemon: Daemon, directory):
    sock = daemon.socket_path
    neither = cardctl(sock, "shoe", "remainder")
    assert neither.code == 2 and "give the counted cards (CARD=N ...) or --file FILE, one of the two" in neither.err
    broken = directory / "broken.json"
    broken.write_text("{AS: 2")
    bad = cardctl(sock, "shoe", "remainder", "--file", str(broken))
    assert bad.code == 2 and "broken.json: not JSON" in bad.err
    broken.write_text("[1, 2]")
    listed = cardctl(sock, "shoe", "remainder", "--file", str(broken))
    assert listed.code == 2 and "broken.json: expected an object, got [1, 2] (the file holds a JSON object" in listed.err
    for token in ("=2", "AS=", "AS=-1"):
        assert cardctl(sock, "shoe", "remainder", token).code == 2, token
