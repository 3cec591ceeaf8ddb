"""Roles from the peer's credentials: real clients under other uids and gids, the real socket."""
from __future__ import annotations

import asyncio
import os
import pwd
import socket
from typing import Any

import pytest

from cardd.api.errors import PeerCredentialsError
from cardd.api.peer import (ALL_ROLES, Role, decode_gids, peer_groups, proc_groups,
                            resolve_role_groups)

from tests.support.clients import run_client_async
from tests.api.api_rig import (DEALER_GID, SOCKET_GID, SUPERVISOR_GID, TECH_GID, FakeDaemon, LineClient,
                     serving)

ROLE_GID = {Role.DEALER: DEALER_GID, Role.SUPERVISOR: SUPERVISOR_GID, Role.TECHNICIAN: TECH_GID}
COMMANDS = sorted(FakeDaemon.command_roles)


def command(name: str) -> dict[str, Any]:
    return {"class": "COMMAND", "id": f"c-{name}", "name": name, "args": {"box": 1}}


@pytest.mark.parametrize("role", list(Role))
def test_every_command_is_accepted_in_its_group_and_refused_outside(sock_dir, role):
    uid = 64300 + list(Role).index(role)
    daemon = FakeDaemon()

    async def scenario() -> list[dict[str, Any]]:
        async with serving(daemon, sock_dir):
            return await run_client_async(sock_dir / "cardd.sock", uid, [SOCKET_GID, ROLE_GID[role]],
                                    [command(name) for name in COMMANDS])

    version, *replies = asyncio.run(scenario())
    assert version == {"class": "VERSION", "release": "cardd-test", "protocol": "1.1"}
    assert len(replies) == len(COMMANDS)
    for name, reply in zip(COMMANDS, replies):
        needs = FakeDaemon.command_roles[name]
        assert reply["id"] == f"c-{name}"
        if role in needs:
            assert reply["class"] == "ACK" and isinstance(reply["seq"], int), reply
        else:
            assert reply["class"] == "ERROR" and reply["code"] == "refused", reply
            wanted = "supervisor or technician" if len(needs) == 2 else next(iter(needs)).value
            assert f"needs the {wanted} role" in str(reply["message"])
            assert f"uid {uid}" in str(reply["message"]) and role.value in str(reply["message"])
    accepted = [name for name, _, _ in daemon.accepted]
    assert accepted == [n for n in COMMANDS if role in FakeDaemon.command_roles[n]]
    for _, args, caller in daemon.accepted:  # who, for the journal
        assert (caller.uid, caller.user, caller.roles) == (uid, str(uid), frozenset({role}))
        assert args == {"box": 1}
    assert [(name, caller.uid, needs) for name, caller, needs in daemon.refused] == [
        (n, uid, FakeDaemon.command_roles[n]) for n in COMMANDS if role not in FakeDaemon.command_roles[n]]


def test_a_caller_without_a_role_may_connect_but_not_query_watch_or_command(sock_dir):
    """docs/api.md: a caller who holds no role is refused everything, a command by a name the daemon
    does not know included: it is told what it lacks, never the list of every command."""
    daemon = FakeDaemon()
    requests = [{"class": "STATE", "id": "s"}, {"class": "LOG", "id": "l"}, {"class": "WATCH", "id": "w"},
                command("open_round"), command("no_such_command")]

    async def scenario() -> list[dict[str, Any]]:
        async with serving(daemon, sock_dir):
            return await run_client_async(sock_dir / "cardd.sock", 64310, [SOCKET_GID], requests)

    version, *replies = asyncio.run(scenario())
    assert version["class"] == "VERSION"
    assert [(r["class"], r["code"], r["id"]) for r in replies] == [
        ("ERROR", "refused", "s"), ("ERROR", "refused", "l"), ("ERROR", "refused", "w"),
        ("ERROR", "refused", "c-open_round"), ("ERROR", "refused", "c-no_such_command")]
    assert "STATE needs one of the roles dealer, supervisor, technician" in str(replies[0]["message"])
    assert "holds no role" in str(replies[3]["message"])
    assert replies[4]["message"].startswith("COMMAND needs one of the roles dealer, supervisor, technician; 64310 "
                                            "(uid 64310, pid ") and replies[4]["message"].endswith(") holds none")
    assert not any(name in str(replies[4]["message"]) for name in COMMANDS)
    assert [(n, c.uid) for n, c, _ in daemon.refused] == [("open_round", 64310)]


def test_any_role_may_query_and_watch(sock_dir):
    async def scenario() -> list[dict[str, Any]]:
        async with serving(FakeDaemon(), sock_dir):
            return await run_client_async(sock_dir / "cardd.sock", 64311, [SOCKET_GID, TECH_GID],
                                    [{"class": "STATE", "id": "s"}, {"class": "WATCH", "id": "w"}])

    _, state, watch = asyncio.run(scenario())
    assert state == {"class": "STATE", "id": "s", "state": {"shoe": {"cards_left": 416}, "round": None, "holds": []}}
    assert watch == {"class": "ACK", "id": "w", "seq": None}


def test_several_role_groups_give_several_roles_and_the_primary_group_counts(sock_dir):
    daemon = FakeDaemon()

    async def scenario() -> list[dict[str, Any]]:
        async with serving(daemon, sock_dir):
            return await run_client_async(sock_dir / "cardd.sock", 64312, [DEALER_GID, SOCKET_GID, SUPERVISOR_GID],
                                    [command(name) for name in COMMANDS])

    _, *replies = asyncio.run(scenario())
    assert [r["class"] for r in replies] == [
        "ERROR" if FakeDaemon.command_roles[n] == {Role.TECHNICIAN} else "ACK" for n in COMMANDS]
    assert daemon.accepted[0][2].roles == {Role.DEALER, Role.SUPERVISOR}


def test_a_user_outside_the_socket_group_cannot_connect(sock_dir):
    async def scenario() -> list[dict[str, Any]]:
        async with serving(FakeDaemon(), sock_dir) as server:
            assert oct(os.stat(server.path).st_mode & 0o777) == "0o660"
            assert os.stat(server.path).st_gid == SOCKET_GID
            return await run_client_async(sock_dir / "cardd.sock", 64313, [DEALER_GID], [command("open_round")])

    assert asyncio.run(scenario()) == [{"connect": "EACCES"}]


def test_root_holds_every_role_and_a_named_user_is_named(sock_dir):
    daemon = FakeDaemon()
    nobody = pwd.getpwnam("nobody")

    async def scenario() -> list[dict[str, Any]]:
        async with serving(daemon, sock_dir) as server:
            client = await LineClient.connect(server.path)
            root_replies = [await client.ask(command(name)) for name in COMMANDS]
            await client.close()
            await run_client_async(server.path, nobody.pw_uid, [SOCKET_GID], [command("void_shoe")])
            return root_replies

    assert {r["class"] for r in asyncio.run(scenario())} == {"ACK"}
    assert {c.roles for _, _, c in daemon.accepted} == {ALL_ROLES}
    assert [(c.user, c.uid) for _, c, _ in daemon.refused] == [("nobody", nobody.pw_uid)]


def test_a_caller_with_more_groups_than_so_peergroups_returns_is_read_from_proc(sock_dir):
    """300 supplementary groups do not fit Python's 1024-byte getsockopt() buffer (ERANGE):
    the groups come from /proc/PID/status of the connected client instead."""
    many = [SOCKET_GID, *range(65000, 65299), SUPERVISOR_GID]
    daemon = FakeDaemon()

    async def scenario() -> list[dict[str, Any]]:
        async with serving(daemon, sock_dir):
            return await run_client_async(sock_dir / "cardd.sock", 64314, many, [command("void_shoe")])

    _, reply = asyncio.run(scenario())
    assert reply["class"] == "ACK"
    caller = daemon.accepted[0][2]
    assert caller.roles == {Role.SUPERVISOR} and set(many) <= caller.groups


def test_so_peergroups_decodes_the_kernel_array_and_matches_proc():
    left, right = socket.socketpair()
    with left, right:
        from_socket = peer_groups(left, os.getpid())
    assert sorted(from_socket) == sorted(proc_groups(os.getpid())) == sorted(os.getgroups())
    assert decode_gids((5).to_bytes(4, "little") + (70000).to_bytes(4, "little")) == [5, 70000]
    with pytest.raises(PeerCredentialsError, match="not a whole number of gids"):
        decode_gids(b"\x01\x00\x00")


def test_proc_fallback_names_the_file_it_could_not_read(tmp_path):
    with pytest.raises(PeerCredentialsError, match=f"{tmp_path}/123/status"):
        proc_groups(123, tmp_path)
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "status").write_text("Name:\tx\nGroups:\t4 x\n")
    with pytest.raises(PeerCredentialsError, match="Groups: line that is not gids"):
        proc_groups(7, tmp_path)


def test_role_groups_by_name_or_gid_and_a_missing_group_gives_the_role_to_nobody():
    root_group = pwd.getpwuid(0).pw_gid
    resolved = resolve_role_groups({Role.DEALER: "root", Role.SUPERVISOR: 64202, Role.TECHNICIAN: "no-such-group-here"})
    assert resolved == {root_group: Role.DEALER, 64202: Role.SUPERVISOR}
