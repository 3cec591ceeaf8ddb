"""Refused commands per user: each refusal is a journal record kept 90 days, so a user (all its
connections together, each with its own request rate) has only so many journaled one by one; then
its commands are held back until the window ends and journaled as one count. Real clients under
other uids and gids on the real socket."""
from __future__ import annotations

import asyncio
from typing import Any

from cardd.api.errors import CommandKept
from cardd.api.server import Limits

from tests.api.api_rig import DEALER_GID, SOCKET_GID, FakeDaemon, LineClient, serving
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


class _Backend(FakeDaemon):
    """The daemon's own ways of failing a command, at the backend boundary."""

    async def command(self, name: str, args: dict[str, Any], caller: Any) -> int:
        if name == "selftest":  # args msgspec took, deeper than the json module goes (a refusal's record)
            raise RecursionError("maximum recursion depth exceeded while encoding a JSON object")
        if name == "resume":
            raise CommandKept("not journaled yet: the journal cannot be written (disk full); the command is kept")
        return await super().command(name, args, caller)


def test_what_counts_as_a_refusal_and_where_its_window_starts(sock_dir) -> None:
    daemon = _Backend()
    limits = Limits(refused_per_window=2, refusal_window_s=1.0)

    async def scenario() -> list[dict[str, Any]]:
        async with serving(daemon, sock_dir, limits=limits) as server:
            client = await LineClient.connect(server.path)
            replies = [await client.ask(command("open_round", 0))]  # accepted: no window yet
            await asyncio.sleep(0.7)
            replies += [await client.ask(command("resume", n)) for n in range(1, 4)]  # applied, kept: no refusals
            replies += [await client.ask(command(name, n)) for n, name in enumerate(("selftest", "no_such", "x"), 4)]
            await client.close()
            return replies

    replies = asyncio.run(scenario())
    assert [r.get("code", r["class"]) for r in replies] == [
        "ACK", "failed", "failed", "failed", "bad-request", "unknown-command", "too-many-refused"]
    assert replies[4]["message"] == "not a valid request: arrays or objects nested too deeply"
    # the window started at the first refusal (0.7 s in), not at the first command
    assert "none is taken for 1 s more" in replies[6]["message"], replies[6]
