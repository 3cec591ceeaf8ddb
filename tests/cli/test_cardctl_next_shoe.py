"""Between two shoes through the real daemon (``cardd --simulate``) and cardctl: a failed
reconciliation holds the next shoe until a supervisor clears its alarm; a void that lets the
next shoe in says so, and a second void must name the next shoe."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.cli_rig import cardctl
from tests.cli.test_cardctl_shoe_end import load_shoe, play_the_shoe_to_its_end
from tests.daemon.daemon_rig import Daemon


@pytest.mark.timeout(300)
def test_a_failed_reconciliation_refuses_the_next_shuffle_and_load_until_the_alarm_is_cleared(
        daemon: Daemon, directory: Path) -> None:
    stub = play_the_shoe_to_its_end(daemon)
    lost = sorted(stub)[0]
    counts = directory / "stub.json"
    counts.write_text(json.dumps({**stub, lost: stub[lost] - 1}))
    sock = daemon.socket_path
    assert cardctl(sock, "shoe", "remainder", "--file", str(counts)).code == 1
    alarm = cardctl(sock, "status", "--json").json()["state"]["alarms"][0]
    assert alarm["reason"] == "RECONCILIATION_FAILED"
    why = (f"the last shoe did not reconcile (missing: {lost} x1; alarm {alarm['id']}): a supervisor accounts for "
           f"the cards and clears the alarm with clear_alarm {alarm['id']} before the next shoe")
    client = daemon.client()
    for command in ("start_shuffle", "sim_load_shoe"):  # the daemon's line, in the API's words
        refused = client.command(command)
        assert refused["class"] == "ERROR" and refused["message"] == f"{command} refused: {why}", refused

    shuffle = cardctl(sock, "shuffle")  # the same line; cardctl may name its own commands in it
    assert shuffle.code == 1
    assert re.fullmatch(r"cardctl: (start_shuffle|shuffle) refused: " + re.escape(why).replace(
        "clear_alarm", "(clear_alarm|cardctl\\ alarm\\ clear)"), shuffle.one_line_error()), shuffle.err
    shoe = client.state()["shoe"]
    assert (shoe["state"], shoe["next_shoe_held"]) == ("unreconciled", why)
    [held] = [line for line in cardctl(sock, "status").out.splitlines() if line.startswith("next shoe")]
    assert re.fullmatch(r"next shoe held \((nothing waits yet|\d+ device reports? of it wait)\): "
                        + re.escape(why).replace("clear_alarm", "(clear_alarm|cardctl\\ alarm\\ clear)"), held), held

    assert cardctl(sock, "alarm", "clear", str(alarm["id"])).code == 0
    assert cardctl(sock, "shuffle").code == 0
    client.wait_state(lambda s: s["shoe"]["state"] == "verified")
    client.ok("sim_load_shoe")
    client.wait_state(lambda s: s["shoe"]["state"] == "burning")
    client.close()


@pytest.mark.timeout(300)
def test_the_next_shoe_reads_0_cards_out_once_shuffled(daemon: Daemon) -> None:
    stub = play_the_shoe_to_its_end(daemon)
    sock = daemon.socket_path
    assert cardctl(sock, "shoe", "remainder", *(f"{card}={n}" for card, n in stub.items())).code == 0
    assert cardctl(sock, "shuffle").code == 0
    client = daemon.client()
    client.wait_state(lambda s: s["shoe"]["state"] == "verified")
    client.close()
    status = cardctl(sock, "status")
    assert "shoe: verified, 0 of 312 cards out (0% penetration)" in status.out, status.out


@pytest.mark.timeout(300)
def test_a_void_right_after_a_shuffle_says_what_it_affects_and_a_second_one_must_name_the_next_shoe(
        daemon: Daemon) -> None:
    client = daemon.client()
    load_shoe(client)  # the shoe in play, its burn card out
    sock = daemon.socket_path
    assert cardctl(sock, "shuffle").code == 0  # the next shoe, shuffled while this one is in play: its reports wait
    client.wait_state(lambda s: s["shoe"]["next_shoe_waiting"] == 12)
    burnt = client.state()["shoe"]["cards_out"]

    void = cardctl(sock, "shoe", "void")
    assert void.code == 0, void.err
    ok, *effects = void.out.splitlines()
    assert re.fullmatch(r"shoe void: ok \(journal seq \d+\)", ok), void.out
    assert effects == [
        f"shoe: in_play -> void: cards out {burnt}",
        "the next shoe, shuffled while the voided one was in play, takes its place (verified, 312 cards counted, 0 "
        "out): it is verified, not loaded: load it and deal the burn card; to void it too, say so: cardctl shoe void "
        "--next-shoe"], void.out
    assert client.state()["shoe"]["state"] == "verified"

    again = cardctl(sock, "shoe", "void")  # the same words again: not taken for the next shoe
    assert again.code == 1
    assert again.one_line_error() == (
        "cardctl: shoe void refused: the shoe voided last is void already; the shoe now is the next one, shuffled "
        "while that one was in play (verified, 312 cards counted, 0 out): it is verified, not loaded: load it and "
        "deal the burn card; to void it too, say so: cardctl shoe void --next-shoe")
    assert client.state()["shoe"]["state"] == "verified"  # the good shoe kept

    meant = cardctl(sock, "shoe", "void", "--next-shoe", "--json")
    assert meant.code == 0, meant.err
    document = meant.json()
    assert document["data"]["next_shoe"] is True
    assert [(r["reason"], r["message"]) for r in document["caused"]] == [
        ("OVERRIDE", "void shoe by supervisor root"), ("SHOE_VOID", "shoe: verified -> void: cards out 0")]
    assert client.state()["shoe"]["state"] == "void"
    client.close()
