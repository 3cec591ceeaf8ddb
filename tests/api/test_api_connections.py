"""Who may hold the API's connections: real clients under other uids holding theirs open on the
real socket. A user without a role once held all 64 and locked everyone out, root's cardctl too."""
from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest

from cardd.api.client import ApiClient, ClientError
from cardd.api.server import Limits

from tests.api.api_rig import DEALER_GID, SOCKET_GID, FakeDaemon, LineClient, serving
from tests.support.clients import CLIENT_PYTHON, CLIENT_SCRIPT, run_client_async

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


def test_a_client_that_asks_and_never_reads_stops_being_read_instead_of_growing_the_daemon(sock_dir) -> None:
    """100 LOG requests of a 2,000-record journal (about 0.4 MB an answer), none of the answers read:
    the daemon answers no faster than the client reads (queuing every answer would let such a client
    grow it without bound), and every answer arrives once it does."""
    daemon = FakeDaemon()
    for n in range(2000):
        daemon.journal_event(card=f"card {n}", round=n // 10)
    requests = 100

    async def scenario() -> tuple[int, int, list[dict[str, Any]]]:
        loop = asyncio.get_running_loop()
        async with serving(daemon, sock_dir) as server:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            await loop.sock_connect(sock, str(server.path))
            await loop.sock_sendall(sock, b"".join(
                json.dumps({"class": "LOG", "id": f"l{n}", "limit": 10000}).encode() + b"\n" for n in range(requests)))
            await asyncio.sleep(1.0)  # the daemon answers what it will
            held = server.unsent_bytes
            received = bytearray()
            while received.count(b"\n") < requests + 1:  # VERSION and every answer
                received += await loop.sock_recv(sock, 1 << 20)
            sock.close()
            one = len(received) // (requests + 1)
            return held, one, [json.loads(line) for line in bytes(received).splitlines()]

    held, one_answer, lines = asyncio.run(scenario())
    assert one_answer > 300_000
    assert held < 3 * one_answer, (held, one_answer)  # not 100 answers' worth
    assert [line.get("id") for line in lines[1:]] == [f"l{n}" for n in range(requests)]
    assert all(line["class"] == "LOG" and len(line["records"]) == 2000 for line in lines[1:])


async def answer_begun(sock: socket.socket) -> None:
    """Until the first bytes after the VERSION line have reached ``sock`` (peeked, left unread)."""
    while True:
        try:
            seen = sock.recv(1 << 16, socket.MSG_PEEK)
        except BlockingIOError:
            seen = b"\n"  # nothing yet
        if not seen or seen.find(b"\n") not in (-1, len(seen) - 1):  # closed (the reads say so), or begun
            return
        await asyncio.sleep(0.01)


def test_one_user_cannot_hold_answers_unread_on_many_connections(sock_dir) -> None:
    """Each connection waits for its own reader, but one user with 16 connections could hold 16 LOG
    answers of several MB each: past ``unread_per_user`` bytes unread over all of them, its next LOG
    is ERROR busy (saying why), and another user's LOG is answered as ever."""
    daemon = FakeDaemon()
    for n in range(2000):
        daemon.journal_event(card=f"card {n}", round=n // 10)
    limits = Limits(unread_per_user=1_000_000)
    connections = 8

    async def scenario() -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
        loop = asyncio.get_running_loop()
        async with serving(daemon, sock_dir, limits=limits) as server:
            socks = []
            for n in range(connections):  # root's, none of them read
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.setblocking(False)
                await loop.sock_connect(sock, str(server.path))
                await loop.sock_sendall(sock, json.dumps({"class": "LOG", "id": f"l{n}", "limit": 10000}).encode() + b"\n")
                await answer_begun(sock)  # answered (or refused) before the next asks: no sleep to guess it
                socks.append(sock)
            held = server.unsent_bytes
            other = await run_client_async(server.path, OTHER_UID, [SOCKET_GID, DEALER_GID],
                                           [{"class": "LOG", "id": "other", "limit": 10000}])
            answers = []
            for sock in socks:
                received = bytearray()
                while received.count(b"\n") < 2:  # VERSION and the answer
                    received += await loop.sock_recv(sock, 1 << 20)
                sock.close()
                answers.append(json.loads(bytes(received).splitlines()[1]))
            return held, answers, other

    held, answers, other = asyncio.run(scenario())
    one_answer = len(json.dumps(answers[0]))
    assert answers[0]["class"] == "LOG" and len(answers[0]["records"]) == 2000
    busy = [a for a in answers if a["class"] == "ERROR"]
    assert busy, "every LOG answered: one user held them all unread"
    assert all(a["code"] == "busy" and "bytes of answers unread on its connections (at most 1,000,000): read them, "
               "then ask again" in a["message"] for a in busy), busy
    assert held < limits.unread_per_user + one_answer, (held, one_answer)
    assert [line["class"] for line in other] == ["VERSION", "LOG"] and len(other[1]["records"]) == 2000
