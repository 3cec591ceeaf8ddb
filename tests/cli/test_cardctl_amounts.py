"""An amount a person types is read strictly, through the real cardctl against the real daemon: units
with at most 2 decimals (``[0-9]+(\\.[0-9]{1,2})?``); what Decimal would also take (``1e3``, ``1_0``)
is refused, never bet as 1000.00 or 10.00, and a negative amount says it must be positive, not
click's "No such option"."""
from __future__ import annotations

import pytest

from tests.cli.cli_rig import cardctl
from tests.daemon.daemon_rig import Daemon, shuffle_and_load


def open_for_bets(daemon: Daemon) -> None:
    client = daemon.client()
    shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), lambda n: client.ok("sim_deal", cards=n))
    client.close()
    assert cardctl(daemon.socket_path, "round", "open").code == 0


@pytest.mark.timeout(120)
def test_an_amount_is_digits_with_at_most_two_decimals_and_nothing_else_is_bet(daemon: Daemon) -> None:
    open_for_bets(daemon)
    sock = daemon.socket_path
    for typed, said in (("1e3", "'1e3' is not an amount (units with at most 2 decimals, e.g. 25 or 25.50)"),
                        ("1_0", "'1_0' is not an amount (units with at most 2 decimals, e.g. 25 or 25.50)"),
                        ("+5", "'+5' is not an amount (units with at most 2 decimals, e.g. 25 or 25.50)"),
                        ("1.005", "1.005: at most 2 decimals (cents)"),
                        ("-5", "-5: an amount must be positive (more than 0)"),
                        ("-2.50", "-2.50: an amount must be positive (more than 0)")):
        run = cardctl(sock, "round", "bet", "1", "alice", typed)
        assert run.code == 2, (typed, run.out, run.err)
        assert run.err.splitlines()[-1] == f"Error: Invalid value for 'AMOUNT': {said}", (typed, run.err)
        assert "No such option" not in run.err
    state = daemon.client().state()
    assert state["round"]["wagers"] == {}, state["round"]  # nothing typed above was bet
    insured = cardctl(sock, "round", "insure", "1", "alice", "-5")
    assert insured.code == 2 and "-5: an amount must be positive (more than 0)" in insured.err, insured.err
    reduced = cardctl(sock, "round", "reduce", "1", "alice", "-1")
    assert reduced.code == 2 and "-1: an amount must be 0 or more" in reduced.err, reduced.err
    # an amount as it should be is bet, to the cent; an unknown option is still click's usage error
    assert cardctl(sock, "round", "bet", "1", "alice", "25.5").code == 0
    assert daemon.client().state()["round"]["wagers"] == {"1": {"alice": 2550}}
    unknown = cardctl(sock, "round", "bet", "1", "alice", "5", "--jsno")
    assert unknown.code == 2 and "No such option '--jsno'" in unknown.err, unknown.err
