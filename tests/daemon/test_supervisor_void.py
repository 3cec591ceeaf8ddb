"""A void the supervisor orders (redeal, void_shoe) is his logged decision: ROUND_VOID and SHOE_VOID
are journaled as warnings naming him, and open no alarm for someone to clear (REQUIREMENTS §2:
every override logged with who made it; alarms are for what the table detects). A void the table
decides by a rule (a face-up card) stays an alarm. Through the real cardd --simulate and its journal."""
from __future__ import annotations

import getpass
from pathlib import Path

from cardd.journal import Journal
from tests.daemon.daemon_rig import open_and_bet, shuffle_and_load, sim_deal, simulate, wait_devices


def _records(directory: Path, reason: str) -> list[dict[str, object]]:
    with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
        return [{"severity": r.severity, "who": r.who, "message": r.data["message"]}
                for r in journal.query(reason=reason, limit=None)]


def test_a_supervisors_redeal_and_void_shoe_are_journaled_with_who_and_open_no_alarm(directory: Path) -> None:
    with simulate(directory) as daemon:
        client = daemon.client()
        wait_devices(client)
        shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), sim_deal(client))
        open_and_bet(client)
        sim_deal(client)(2)
        client.wait_state(lambda s: s["shoe"]["cards_out"] == 3)
        client.ok("redeal")
        open_and_bet(client)
        client.ok("void_shoe")
        state = client.state()
        assert state["shoe"]["state"] == "void" and state["round"]["state"] == "void"
        assert state["alarms"] == []  # nothing for the supervisor to clear after his own decision
        client.close()
    user = getpass.getuser()
    voids = _records(directory, "ROUND_VOID")
    assert [(v["severity"], v["who"]) for v in voids] == [("warning", user), ("warning", user)]
    assert [v["message"] for v in voids] == ["round 1: void (REDEAL); all bets returned",
                                             "round 2: void (SHOE_VOID); all bets returned"]
    [shoe] = _records(directory, "SHOE_VOID")
    assert (shoe["severity"], shoe["who"]) == ("warning", user)
