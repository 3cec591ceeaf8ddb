"""Clients that never read, never end a line, come and go by the thousand or send noise: the
publisher never waits, the other watchers get every event, the server's memory stays bounded."""
from __future__ import annotations

import asyncio
import json
import random
import socket
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

from cardd.api.server import ApiServer, Limits

from tests.support.clients import run_client_async
from tests.api.api_rig import SOCKET_GID, FakeDaemon, LineClient, serving
from tests.support.poll import until


class Watcher:
    """A well-behaved client that records every event it is sent."""

    def __init__(self, client: LineClient) -> None:
        self.client = client
        self.seqs: list[int] = []
        self.task = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, server: ApiServer) -> Watcher:
        client = await LineClient.connect(server.path)
        assert (await client.ask({"class": "WATCH", "id": "w"}))["class"] == "ACK"
        return cls(client)

    async def _read(self) -> None:
        while True:
            message = await self.client.recv()
            assert message["class"] == "EVENT", message
            self.seqs.append(int(message["seq"]))

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.client.close()


async def deal_while(daemon: FakeDaemon, server: ApiServer, watcher: Watcher,
                     abuse: Callable[[], Awaitable[object]]) -> object:
    """Publish events (the card path) while ``abuse`` runs; the watcher must get each of them."""
    done = asyncio.Event()

    async def dealer() -> None:
        while not done.is_set():
            server.publish(daemon.journal_event())
            await until(lambda: len(watcher.seqs) == len(daemon.journal))

    dealing = asyncio.create_task(dealer())
    try:
        return await abuse()
    finally:
        done.set()
        await dealing
        assert watcher.seqs == list(range(1, len(daemon.journal) + 1))


def test_a_client_that_never_reads_is_dropped_and_never_slows_the_publisher(sock_dir):
    daemon = FakeDaemon()

    async def scenario() -> tuple[bytes, int]:
        # a long linger: the stuck client's last bytes wait for it until the test reads them
        async with serving(daemon, sock_dir, Limits(linger=600.0)) as server:
            stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            stuck.connect(str(server.path))
            stuck.sendall(b'{"class": "WATCH", "id": "stuck"}\n')
            stuck.setblocking(False)
            watcher = await Watcher.start(server)
            await until(lambda: server.watcher_count == 2)
            for _ in range(100):
                for _ in range(100):
                    server.publish(daemon.journal_event())  # synchronous: it cannot wait for anyone
                await until(lambda: len(watcher.seqs) == len(daemon.journal))
            watchers_left = server.watcher_count
            received = b""
            while chunk := await asyncio.get_running_loop().sock_recv(stuck, 1 << 16):
                received += chunk
            stuck.close()
            assert watcher.seqs == list(range(1, 10_001))
            await watcher.stop()
            return received, watchers_left

    received, watchers_left = asyncio.run(scenario())
    assert watchers_left == 1
    version, ack, *events, last = [json.loads(line) for line in received.splitlines()]
    assert (version["class"], ack["class"]) == ("VERSION", "ACK")
    assert last["class"] == "DISCONNECT" and last["code"] == "lagging"
    assert "reconnect and WATCH with since_seq" in last["message"]
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) < 10_000  # what it got is whole and in order


def test_a_client_sending_100_mb_without_a_newline_is_cut_off_and_memory_stays_bounded(sock_dir):
    daemon = FakeDaemon()

    async def scenario() -> tuple[list[dict[str, Any]], int]:
        async with serving(daemon, sock_dir) as server:
            watcher = await Watcher.start(server)
            tracemalloc.start()
            try:
                base = tracemalloc.get_traced_memory()[0]
                lines = await deal_while(daemon, server, watcher, lambda: run_client_async(
                    server.path, 64320, [SOCKET_GID], extra_args=["--junk", str(100 << 20)]))
                peak = tracemalloc.get_traced_memory()[1] - base
            finally:
                tracemalloc.stop()
            await watcher.stop()
            assert isinstance(lines, list)
            return lines, peak

    (version, unsent, *replies), peak = asyncio.run(scenario())
    assert version["class"] == "VERSION"
    assert replies == [{"class": "ERROR", "id": None, "code": "too-long",
                        "message": "a request line longer than 65536 bytes: closing"}]
    assert int(unsent["unsent"]) > 0  # it was stopped, not read to the end
    assert peak < 4 << 20, f"the server held {peak} bytes for one line"


def test_a_thousand_connections_opened_and_dropped(sock_dir):
    daemon = FakeDaemon()

    async def visit(server: ApiServer, how: int) -> None:
        reader, writer = await asyncio.open_unix_connection(str(server.path))
        if how == 1:
            await reader.readline()
        elif how == 2:
            writer.write(b'{"class": "STA')  # half a request
        elif how == 3:
            writer.write(b'{"class": "WATCH", "since_seq": 0}\n')
            await reader.readline()
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass

    async def abuse(server: ApiServer) -> None:
        for batch in range(20):  # at most 50 at once: under the connection cap
            await asyncio.gather(*(visit(server, (batch + i) % 4) for i in range(50)))

    async def scenario() -> dict[str, Any]:
        async with serving(daemon, sock_dir) as server:
            watcher = await Watcher.start(server)
            await deal_while(daemon, server, watcher, lambda: abuse(server))
            await until(lambda: server.client_count == 1 and server.watcher_count == 1)
            fresh = await LineClient.connect(server.path)
            state = await fresh.ask({"class": "STATE", "id": "after"})
            await fresh.close()
            await watcher.stop()
            return state

    assert asyncio.run(scenario())["id"] == "after"


def test_random_bytes_get_errors_never_a_crash(sock_dir):
    daemon = FakeDaemon()
    noise = random.Random(20261123)

    async def spray(server: ApiServer, data: bytes) -> list[dict[str, Any]]:
        client = await LineClient.connect(server.path)
        await client.send(data + b'\n{"class": "STATE", "id": "end"}\n')
        received: list[dict[str, Any]] = []
        try:
            while not received or received[-1].get("id") != "end":
                received.append(await client.recv())
        except (EOFError, ConnectionError):
            pass
        await client.close()
        return received

    async def scenario() -> list[list[dict[str, Any]]]:
        async with serving(daemon, sock_dir) as server:
            watcher = await Watcher.start(server)
            sprays = [noise.randbytes(noise.choice([10, 1000, 30_000, 70_000])) for _ in range(40)]
            results = await deal_while(daemon, server, watcher, lambda: asyncio.gather(
                *(spray(server, data) for data in sprays)))
            await until(lambda: server.client_count == 1)
            assert isinstance(results, list)
            await watcher.stop()
            return results

    results = asyncio.run(scenario())
    for received in results:
        assert received, "every spray was answered"
        assert all(r["class"] == "ERROR" for r in received[:-1])
        assert received[-1]["id"] == "end" or received[-1]["code"] in ("too-long", "flood"), received[-1]
    assert any(r[-1]["id"] == "end" for r in results)  # short noise leaves the connection usable
