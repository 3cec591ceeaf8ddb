"""Who may hold the API's connections: real clients under other uids holding theirs open on the
real socket. A user without a role once held all 64 and locked everyone out, root's cardctl too."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from cardd.api.client import ApiClient, ClientError
from cardd.api.server import Limits

from tests.api.api_rig import SOCKET_GID, FakeDaemon, LineClient, serving
from tests.support.clients import CLIENT_PYTHON, CLIENT_SCRIPT

LIMITS = Limits(clients=4, clients_per_user=2)
HOG_UID, OTHER_UID, THIRD_UID = 64330, 64331, 64332


async def hold(sock: Any, uid: int) -> tuple[asyncio.subprocess.Process, dict[str, Any]]:
    """A client as ``uid`` holding its connection open (until its stdin closes); its first line."""
    proc = await asyncio.create_subprocess_exec(
        CLIENT_PYTHON, "-I", str(CLIENT_SCRIPT), str(sock), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, user=uid, group=SOCKET_GID, cwd="/")
    assert proc.stdout is not None
    return proc, json.loads(await proc.stdout.readline())


def test_one_user_cannot_take_every_connection_and_root_always_gets_in(sock_dir) -> None:
    async def scenario() -> list[str]:
        held: list[asyncio.subprocess.Process] = []
        seen: list[str] = []
        try:
            async with serving(FakeDaemon(), sock_dir, limits=LIMITS) as server:
                for uid in (HOG_UID, HOG_UID, HOG_UID, OTHER_UID, OTHER_UID, THIRD_UID):
                    proc, first = await hold(server.path, uid)
                    held.append(proc)
                    seen.append(first["class"] if first["class"] == "VERSION" else first["message"])
                root = await LineClient.connect(server.path)  # root: its connections count apart
                seen.append((await root.ask({"class": "STATE", "id": "s"}))["class"])
                await root.close()
        finally:
            for proc in held:
                assert proc.stdin is not None
                proc.stdin.close()
                await proc.wait()
        return seen

    seen = asyncio.run(scenario())
    assert seen[:2] == ["VERSION", "VERSION"]
    assert f"uid {HOG_UID}" in seen[2] and "holds 2 connections already, the most one user may" in seen[2]
    assert seen[3:5] == ["VERSION", "VERSION"]
    assert seen[5] == "the daemon serves 4 connections already"
    assert seen[6] == "STATE"


def test_a_client_turned_away_says_why_in_the_daemons_words(sock_dir) -> None:
    """cardctl once said "the daemon did not start with VERSION (got Error)"."""
    async def scenario() -> str:
        async with serving(FakeDaemon(), sock_dir, limits=LIMITS) as server:
            held = [await LineClient.connect(server.path) for _ in range(LIMITS.clients)]
            try:
                with pytest.raises(ClientError) as refused:
                    await asyncio.to_thread(ApiClient, server.path)
            finally:
                for client in held:
                    await client.close()
            return str(refused.value)

    assert asyncio.run(scenario()).endswith(
        "the daemon refused the connection (busy): the daemon serves 4 connections already")
