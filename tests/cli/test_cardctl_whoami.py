"""``cardctl whoami`` through the real cardctl against the real daemon: who the daemon sees (from the
kernel's credentials of the connection), the roles that gives, and the commands each role allows in
cardctl's words, from the daemon's own command table; answered to a caller with no role too."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cardd.cli.common import CARDCTL_COMMANDS
from cardd.daemon.commands import command_table
from devices.events import Role
from tests.cli.cli_rig import cardctl
from tests.daemon.daemon_rig import Daemon, write_config
from tests.support.groups import this_process, unix_groups

GROUPS = this_process({"api": "cardd-w-api", "dealer": "cardd-w-dealer"})
UID = 64533


@pytest.fixture
def groups() -> Iterator[dict[str, int]]:
    with unix_groups(GROUPS) as gids:
        yield gids


def test_root_holds_every_role_and_each_role_lists_its_commands_in_cardctl_words(daemon: Daemon) -> None:
    run = cardctl(daemon.socket_path, "whoami")
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0].startswith("user root (uid 0, gid 0), pid ")
    assert "roles: dealer, supervisor, technician (uid 0 holds every role: root and the daemon's own user do)" in lines
    supervisor = lines[lines.index("supervisor may:") + 1:lines.index("technician may:")]
    assert "  round continue" in supervisor and "  round redeal" in supervisor and "  shoe void" in supervisor
    assert not any(line.strip() in ("resume", "redeal", "void_shoe") for line in lines)  # never the API's names
    document = cardctl(daemon.socket_path, "whoami", "--json").json()
    table = command_table(simulated=True)  # the daemon's own table, each role's commands
    for role in Role:
        assert document["commands"][role.value] == sorted(n for n, spec in table.items() if role in spec.roles)
    assert document["uid"] == 0 and document["every_role"] is True
    assert {"gid": 0, "name": "root", "role": None} in document["groups"]


@pytest.mark.timeout(120)
def test_a_dealer_sees_his_groups_role_and_commands_and_a_caller_with_no_role_is_answered(
        directory: Path, groups: dict[str, int]) -> None:
    from simulators.rig import SimulatedTable
    with SimulatedTable.over_ptys() as sim:
        config = write_config(directory, sim.shoe.url, sim.shuffler.url, roles={"dealer": GROUPS["dealer"]},
                              api_group=GROUPS["api"])
        running = Daemon(["--config", str(config)], directory / "cardd.sock")
        try:
            as_dealer = ("setpriv", f"--reuid={UID}", f"--regid={groups['api']}",
                         f"--groups={groups['api']},{groups['dealer']}")
            run = cardctl(running.socket_path, "whoami", prefix=as_dealer)
            assert run.code == 0, run.err
            lines = run.out.splitlines()
            assert lines[0].startswith(f"user {UID} (uid {UID}, gid {groups['api']}), pid ")
            shown = {groups["api"]: f"{GROUPS['api']} ({groups['api']})",
                     groups["dealer"]: f"{GROUPS['dealer']} ({groups['dealer']}: dealer)"}  # by gid
            assert lines[1] == f"groups: {', '.join(shown[gid] for gid in sorted(shown))}"
            assert "roles: dealer" in lines and "supervisor may:" not in lines
            dealer = lines[lines.index("dealer may:") + 1:]
            assert dealer == sorted(f"  {CARDCTL_COMMANDS[name]}" for name, spec in command_table(False).items()
                                    if Role.DEALER in spec.roles)
            # no role: every other request refused, whoami answered, with the group that gives one
            no_role = ("setpriv", f"--reuid={UID}", f"--regid={groups['api']}", f"--groups={groups['api']}")
            assert cardctl(running.socket_path, "status", prefix=no_role).code == 4
            run = cardctl(running.socket_path, "whoami", prefix=no_role)
            assert run.code == 0, run.err
            assert run.out.splitlines()[-1] == (
                "roles: none: the daemon refuses status, watch, alarm, log and every command; "
                f"{GROUPS['dealer']} gives dealer (an administrator adds you: usermod -aG GROUP $USER, "
                "then log in again)")
            document = cardctl(running.socket_path, "whoami", "--json", prefix=no_role).json()
            assert document["roles"] == [] and document["commands"] == {}
            assert document["role_groups"] == {"dealer": [GROUPS["dealer"]]}
        finally:
            running.stop()
