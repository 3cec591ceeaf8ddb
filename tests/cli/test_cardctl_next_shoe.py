"""Between two shoes through the real daemon (``cardd --simulate``) and cardctl: a failed
reconciliation holds the next shoe until a supervisor clears its alarm."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.cli_rig import cardctl
from tests.cli.test_cardctl_shoe_end import play_the_shoe_to_its_end
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
