"""Refused commands per user: each refusal is a journal record kept 90 days, so a user (all its
connections together, each with its own request rate) has only so many journaled one by one; then
its commands are held back until the window ends and journaled as one count. Real clients under
other uids and gids on the real socket."""
from __future__ import annotations

import asyncio
from typing import Any

from cardd.api.server import Limits

from tests.api.api_rig import DEALER_GID, SOCKET_GID, FakeDaemon, serving
from tests.support.clients import run_client_async

NO_ROLE_UID, DEALER_UID = 64320, 64321
LIMITS = Limits(refused_per_window=5, refusal_window_s=1.5)


def command(name: str, n: int) -> dict[str, Any]:
    return {"class": "COMMAND", "id": f"c{n}", "name": name, "args": {}}


def codes(replies: list[dict[str, Any]]) -> list[str]:
    return [r.get("code", r["class"]) for r in replies[1:]]  # after VERSION


def test_a_user_past_its_refusals_is_held_back_on_every_connection_and_journaled_as_one_count(sock_dir) -> None:
    daemon = FakeDaemon()
    sock = sock_dir / "cardd.sock"

    async def scenario() -> tuple[list[str], ...]:
        async with serving(daemon, sock_dir, limits=LIMITS):
            first = await run_client_async(sock, NO_ROLE_UID, [SOCKET_GID],
                                           [command("void_shoe", n) for n in range(7)] + [command("no_such_command", 7)])
            again = await run_client_async(sock, NO_ROLE_UID, [SOCKET_GID], [command("resume", 8)])
            dealer = await run_client_async(sock, DEALER_UID, [SOCKET_GID, DEALER_GID], [command("open_round", 9)])
            assert daemon.held_back == []  # the window has not ended
            await asyncio.sleep(LIMITS.refusal_window_s + 0.3)
            later = await run_client_async(sock, NO_ROLE_UID, [SOCKET_GID], [command("void_shoe", 10)])
            return codes(first), codes(again), codes(dealer), codes(later)

    first, again, dealer, later = asyncio.run(scenario())
    assert first == ["refused"] * 5 + ["too-many-refused"] * 3
    assert again == ["too-many-refused"]  # another connection, the same user
    assert dealer == ["ACK"]  # another user's budget
    assert later == ["refused"]  # a new window
    assert [(name, caller.uid) for name, caller, _ in daemon.refused] == [("void_shoe", NO_ROLE_UID)] * 6
    # the held-back commands by name; a name the daemon does not know is never kept as the client sent it
    assert daemon.held_back == [(str(NO_ROLE_UID), NO_ROLE_UID, {"void_shoe": 2, "(unknown)": 1, "resume": 1},
                                 LIMITS.refusal_window_s)]


def test_what_is_held_back_when_the_daemon_stops_is_journaled_then(sock_dir) -> None:
    daemon = FakeDaemon()

    async def scenario() -> None:
        async with serving(daemon, sock_dir, limits=Limits(refused_per_window=2, refusal_window_s=3600)):
            await run_client_async(sock_dir / "cardd.sock", NO_ROLE_UID, [SOCKET_GID],
                                   [command("void_shoe", n) for n in range(4)])
            assert daemon.held_back == []

    asyncio.run(scenario())
    assert daemon.held_back == [(str(NO_ROLE_UID), NO_ROLE_UID, {"void_shoe": 2}, 3600)]


def test_failed_commands_count_as_refusals_too(sock_dir) -> None:
    daemon = FakeDaemon()

    async def scenario() -> list[str]:
        async with serving(daemon, sock_dir, limits=LIMITS):
            return codes(await run_client_async(sock_dir / "cardd.sock", DEALER_UID, [SOCKET_GID, DEALER_GID],
                                                [command("no_such_command", n) for n in range(6)]
                                                + [command("open_round", 6)]))

    assert asyncio.run(scenario()) == ["unknown-command"] * 5 + ["too-many-refused"] * 2
    assert daemon.accepted == []
