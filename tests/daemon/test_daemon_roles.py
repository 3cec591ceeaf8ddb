"""Roles in the running daemon: real clients under other uids and gids (tests/api's stdlib
client in a subprocess with user=, group=, extra_groups=) against cardd's real socket, with
the Unix groups its configuration names."""
from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from cardd.journal import Journal
from tests.daemon.daemon_rig import Daemon, remove, state_dir, write_config
from tests.support.clients import run_client
from tests.support.groups import this_process, unix_groups
from simulators.rig import SimulatedTable
from tests.daemon.daemon_rig import deal_one, open_and_bet, shuffle_and_load

GROUPS = this_process({"api": "cardd-t-api", "dealer": "cardd-t-dealer", "supervisor": "cardd-t-super",
                       "technician": "cardd-t-tech"})
DEALER_UID, SUPERVISOR_UID, NOBODY_UID, OUTSIDER_UID = 64521, 64522, 64523, 64524


@pytest.fixture
def groups() -> Iterator[dict[str, int]]:
    """The configured groups, made for the test (names, since the configuration takes names)."""
    with unix_groups(GROUPS) as gids:
        yield gids


def command(name: str, **args: Any) -> dict[str, Any]:
    return {"class": "COMMAND", "id": name, "name": name, "args": args}


def test_dealer_and_supervisor_commands_follow_the_callers_groups(groups):
    directory = state_dir()
    try:
        with SimulatedTable.over_ptys() as sim:
            roles = {role: GROUPS[role] for role in ("dealer", "supervisor", "technician")}
            config = write_config(directory, sim.shoe.url, sim.shuffler.url, roles=roles,
                                  api_group=GROUPS["api"])
            daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
            try:
                sock = directory / "cardd.sock"
                assert os.stat(sock).st_gid == groups["api"] and os.stat(sock).st_mode & 0o777 == 0o660
                root = daemon.client()

                def deal(n: int) -> None:
                    sim.shoe.call(sim.shoe.device.deal, n)

                shuffle_and_load(root, sim.hand_off, deal)
                open_and_bet(root)
                deal_one(root, deal)

                # outside the API group: the socket itself refuses
                assert run_client(sock, OUTSIDER_UID, [groups["dealer"]], []) == [{"connect": "EACCES"}]
                # in the API group but no dealer group: a dealer command is refused
                _, refused = run_client(sock, NOBODY_UID, [groups["api"]], [command("dealer_change")])
                assert refused["class"] == "ERROR" and refused["code"] == "refused", refused
                assert "needs the dealer role" in refused["message"]
                # a dealer may change the dealer, not re-deal (an override)
                _, accepted, no_override = run_client(sock, DEALER_UID, [groups["api"], groups["dealer"]],
                                                      [command("dealer_change"), command("redeal")])
                assert accepted["class"] == "ACK", accepted
                assert no_override["class"] == "ERROR" and "needs the supervisor role" in no_override["message"]
                # the supervisor's re-deal, journaled with who
                _, redeal = run_client(sock, SUPERVISOR_UID, [groups["api"], groups["supervisor"]],
                                       [command("redeal")])
                assert redeal["class"] == "ACK", redeal
                log = root.request({"class": "LOG", "from_seq": accepted["seq"]})["records"]
                by_seq = {r["seq"]: r for r in log}
                assert by_seq[accepted["seq"]]["who"] == str(DEALER_UID)
                assert by_seq[redeal["seq"]]["who"] == str(SUPERVISOR_UID)
                assert by_seq[redeal["seq"]]["data"].items() >= {"type": "Redeal", "role": "supervisor"}.items()
                refusals = [r for r in root.request({"class": "LOG", "reason": "COMMAND_REFUSED"})["records"]]
                assert [(r["data"]["command"], r["data"]["uid"]) for r in refusals] == [
                    ("dealer_change", NOBODY_UID), ("redeal", DEALER_UID)]
                assert root.state()["round"]["state"] == "void"
                root.close()
            finally:
                code, err = daemon.stop()
        assert code == 0, err
    finally:
        remove(directory)


def test_a_user_refused_too_often_is_held_back_and_the_count_journaled(groups):
    """[api] refused_per_minute: the daemon journals that many refusals of one user one by one, then
    holds its commands back and journals them as one count (here at the stop, before the minute ends)."""
    directory = state_dir()
    try:
        with SimulatedTable.over_ptys() as sim:
            config = write_config(directory, sim.shoe.url, sim.shuffler.url, api_group=GROUPS["api"],
                                  roles={role: GROUPS[role] for role in ("dealer", "supervisor", "technician")},
                                  api={"refused_per_minute": 2})
            daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
            try:
                sock = directory / "cardd.sock"
                _, *replies = run_client(sock, NOBODY_UID, [groups["api"]], [command("dealer_change")] * 3)
                _, *more = run_client(sock, NOBODY_UID, [groups["api"]], [command("void_shoe")])
                assert [r["code"] for r in replies + more] == ["refused", "refused", "too-many-refused",
                                                               "too-many-refused"]
                assert "none is taken for" in more[0]["message"]
                _, accepted = run_client(sock, DEALER_UID, [groups["api"], groups["dealer"]], [command("dealer_change")])
                assert accepted["class"] == "ACK", accepted  # another user
            finally:
                code, err = daemon.stop()
            assert code == 0, err
        with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
            refusals = [r for r in journal.query(limit=None) if r.reason == "COMMAND_REFUSED"]
        assert [(r.data["command"], r.data["uid"], r.who) for r in refusals] == [
            ("dealer_change", NOBODY_UID, str(NOBODY_UID))] * 2 + [("dealer_change,void_shoe", NOBODY_UID,
                                                                    str(NOBODY_UID))]
        assert refusals[-1].data["args"] == {"held_back": {"dealer_change": 1, "void_shoe": 1}}
        assert "2 command(s) not taken: too many refused within 60 s" in refusals[-1].data["refused"]
    finally:
        remove(directory)
