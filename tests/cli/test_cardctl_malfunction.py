"""A shuffler malfunction during a round through the real daemon (``cardd --simulate``) and cardctl:
what the supervisor reads before and after he continues the round."""
from __future__ import annotations

import pytest

from cardd.api.client import ApiClient
from tests.cli.cli_rig import cardctl, start_round
from tests.daemon.daemon_rig import Daemon


@pytest.mark.timeout(120)
def test_after_the_round_is_continued_the_malfunction_alarm_says_what_it_still_waits_for(daemon: Daemon) -> None:
    start_round(daemon)
    sock = daemon.socket_path
    with ApiClient(sock) as client:
        client.command("sim_fault", device="shuffler", code="jam")
    watcher = daemon.client()
    watcher.wait_state(lambda s: s["round"]["held"] is not None and "SHUFFLER_MALFUNCTION" in
                       [a["reason"] for a in s["alarms"]])
    assert cardctl(sock, "clear-fault", "shuffler", "jam").code == 0
    watcher.wait_state(lambda s: s["devices"]["shuffler"]["state"] != "fault")
    watcher.close()
    assert cardctl(sock, "round", "continue").code == 0
    alarms = cardctl(sock, "alarm")
    assert alarms.code == 0
    [line] = [line for line in alarms.out.splitlines() if "SHUFFLER_MALFUNCTION" in line]
    # the daemon's alarm names the API's commands (resume, redeal, clear_alarm); cardctl shows its own
    assert line.endswith("SHUFFLER_MALFUNCTION shuffler malfunction (jam) during round 1: round held; a supervisor "
                         "re-deals it (cardctl round redeal) or continues it (cardctl round continue), and clears this "
                         "alarm with cardctl alarm clear once the shuffler is checked (the round's decision leaves it "
                         "open)"), alarms.out
    assert "ROUND_HELD" not in alarms.out  # the round's hold: answered by the continue
