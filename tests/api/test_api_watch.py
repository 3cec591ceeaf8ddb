"""WATCH: live events, and a replay from a sequence number with no gap and nothing twice."""
from __future__ import annotations

import asyncio
import json
import socket
import tempfile
from typing import Any

from cardd.api.server import ApiServer, Limits

from tests.api.api_rig import FakeDaemon, LineClient, serving
from tests.support.poll import until


async def journal_and_publish(daemon: FakeDaemon, server: ApiServer, count: int) -> None:
    """The daemon's order: journal, then (a loop turn later) publish, one event at a time."""
    for _ in range(count):
        event = daemon.journal_event()
        await asyncio.sleep(0)
        server.publish(event)


async def read_events(client: LineClient, last_seq: int) -> tuple[list[int], list[int]]:
    """(event seqs, index in that list where the ACK came) until event ``last_seq`` arrived."""
    seqs: list[int] = []
    acks: list[int] = []
    while not seqs or seqs[-1] < last_seq:
        message = await client.recv()
        if message["class"] == "ACK":
            acks.append(len(seqs))
        else:
            assert message["class"] == "EVENT", message
            seqs.append(int(message["seq"]))
    return seqs, acks


def test_watch_gets_live_events_in_order_and_unwatch_stops_them(sock_dir):
    daemon = FakeDaemon()

    async def scenario() -> tuple[dict[str, Any], list[int], dict[str, Any], dict[str, Any]]:
        async with serving(daemon, sock_dir) as server:
            server.publish(daemon.journal_event())
            client = await LineClient.connect(server.path)
            ack = await client.ask({"class": "WATCH", "id": "w"})
            await journal_and_publish(daemon, server, 50)
            seqs, _ = await read_events(client, 51)
            unwatch = await client.ask({"class": "WATCH", "id": "u", "enable": False})
            await journal_and_publish(daemon, server, 5)
            state = await client.ask({"class": "STATE", "id": "s"})  # the next line: no EVENT between
            await client.close()
            return ack, seqs, unwatch, state

    ack, seqs, unwatch, state = asyncio.run(scenario())
    assert ack == {"class": "ACK", "id": "w", "seq": 1}
    assert seqs == list(range(2, 52))
    assert unwatch == {"class": "ACK", "id": "u", "seq": 51}
    assert state["class"] == "STATE"


def test_watch_since_seq_replays_the_journal_then_goes_live_with_no_gap_and_no_duplicate(sock_dir):
    """Events are journaled and published while the replay reads the journal in small chunks:
    some are in both the replay and the live stream, and each arrives once, in order."""
    daemon = FakeDaemon()
    for _ in range(1000):
        daemon.journal_event()

    async def scenario() -> tuple[list[int], list[int], int]:
        async with serving(daemon, sock_dir, Limits(backlog_chunk=16)) as server:
            client = await LineClient.connect(server.path)
            await client.send({"class": "WATCH", "id": "w", "since_seq": 200})
            publisher = asyncio.create_task(journal_and_publish(daemon, server, 2000))
            seqs, acks = await read_events(client, 3000)
            await publisher
            await client.close()
            return seqs, acks, daemon.replay_reads

    seqs, acks, reads = asyncio.run(scenario())
    assert seqs == list(range(201, 3001))
    assert len(acks) == 1 and 800 <= acks[0] < 2800  # the replay ends after the journal's first 1000
    assert reads > 800 // 16


def test_a_client_that_reconnects_from_its_last_seq_misses_nothing_and_gets_nothing_twice(sock_dir):
    daemon = FakeDaemon()

    async def scenario() -> list[int]:
        async with serving(daemon, sock_dir) as server:
            first = await LineClient.connect(server.path)
            await first.ask({"class": "WATCH", "id": "w"})
            await journal_and_publish(daemon, server, 30)
            got, _ = await read_events(first, 30)
            await first.close()
            await journal_and_publish(daemon, server, 40)  # while it is away
            again = await LineClient.connect(server.path)
            await again.send({"class": "WATCH", "id": "w", "since_seq": got[-1]})
            publisher = asyncio.create_task(journal_and_publish(daemon, server, 30))
            rest, _ = await read_events(again, 100)
            await publisher
            await again.close()
            return got + rest

    assert asyncio.run(scenario()) == list(range(1, 101))


def test_since_seq_at_the_end_of_the_journal_replays_nothing(sock_dir):
    daemon = FakeDaemon()
    for _ in range(3):
        daemon.journal_event()

    async def scenario() -> dict[str, Any]:
        async with serving(daemon, sock_dir) as server:
            client = await LineClient.connect(server.path)
            ack = await client.ask({"class": "WATCH", "id": "w", "since_seq": 3})
            await client.close()
            await until(lambda: server.client_count == 0)
            return ack

    assert asyncio.run(scenario()) == {"class": "ACK", "id": "w", "seq": None}


async def until_replay_waits_or_drops(daemon: FakeDaemon, server: ApiServer, limits: Limits) -> None:
    """Until the replay stands still on a full queue (white-box), or the client was dropped
    (which the reading after it reports). Standing still: no journal read for 50 loop turns."""
    await until(lambda: daemon.replay_reads > 0)  # the WATCH is being served
    while server.watcher_count:
        if any(len(c.queue) > limits.queue - limits.backlog_chunk for c in server._clients):
            reads = daemon.replay_reads
            for _ in range(50):
                await asyncio.sleep(0)
            if daemon.replay_reads == reads:
                return
        await asyncio.sleep(0.005)


def test_a_replay_longer_than_the_queue_is_paced_by_the_client_not_dropped(sock_dir):
    """10,000 journaled events through a 1,024-message queue to a client that does not read
    until the queue is full: the replay waits for room instead of overflowing it."""
    daemon = FakeDaemon()
    for _ in range(10_000):
        daemon.journal_event()
    limits = Limits()

    async def scenario() -> tuple[list[int], list[int]]:
        async with serving(daemon, sock_dir, limits) as server:
            client = await LineClient.connect(server.path, buffer=1 << 16)  # it stops reading ahead
            await client.send({"class": "WATCH", "id": "w", "since_seq": 0})
            await until_replay_waits_or_drops(daemon, server, limits)
            seqs, acks = await read_events(client, 10_000)
            # the replay's end, naming the last event replayed (none of them was published here)
            assert await client.recv() == {"class": "ACK", "id": "w", "seq": 10_000}
            await client.close()
            return seqs, acks

    seqs, acks = asyncio.run(scenario())
    assert seqs == list(range(1, 10_001)) and acks == []


def test_the_ack_of_a_replay_names_the_last_event_sent_even_when_the_journal_is_ahead_of_publishing(sock_dir):
    """A group commit's records are in the journal before the loop publishes them: a replay that
    reads them sends them, and its ACK must not name an earlier seq (a client takes the ACK as the
    end of the replay); their publication later is not sent twice."""
    daemon = FakeDaemon()

    async def scenario() -> tuple[list[int], dict[str, Any], list[int]]:
        async with serving(daemon, sock_dir) as server:
            for _ in range(5):
                server.publish(daemon.journal_event())
            committed = [daemon.journal_event() for _ in range(3)]  # journaled, not published yet
            client = await LineClient.connect(server.path)
            await client.send({"class": "WATCH", "id": "w", "since_seq": 2})
            replayed, ack = [], None
            while ack is None:
                line = await client.recv()
                if line["class"] == "EVENT":
                    replayed.append(line["seq"])
                else:
                    ack = line
            for event in committed:
                server.publish(event)
            server.publish(daemon.journal_event())
            live = [(await client.recv())["seq"]]
            await client.close()
            return replayed, ack, live

    replayed, ack, live = asyncio.run(scenario())
    assert replayed == [3, 4, 5, 6, 7, 8]
    assert ack == {"class": "ACK", "id": "w", "seq": 8}
    assert live == [9]


def test_flush_writes_what_was_published_at_once_in_one_write_a_watcher(sock_dir):
    """The daemon calls flush() after a commit's records: they leave before anything else the
    commit does (the devices' confirms), not at the end of the loop turn."""
    daemon = FakeDaemon()

    async def scenario() -> tuple[bytes, bytes]:
        loop = asyncio.get_running_loop()
        async with serving(daemon, sock_dir) as server:
            raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            raw.setblocking(False)
            await loop.sock_connect(raw, str(server.path))
            received = b""
            raw_lines: list[dict[str, Any]] = []
            await loop.sock_sendall(raw, b'{"class": "WATCH", "id": "w"}\n')
            while not any(line.get("class") == "ACK" for line in raw_lines):
                received += await loop.sock_recv(raw, 65536)
                *complete, rest = received.split(b"\n")
                raw_lines += [json.loads(line) for line in complete]
                received = rest
            server.publish(daemon.journal_event())
            server.publish(daemon.journal_event())
            try:
                before = raw.recv(65536)  # nothing yet: publish queues for the end of the loop turn
            except BlockingIOError:
                before = b""
            server.flush()  # no await between: written now
            try:
                after = raw.recv(65536)
            except BlockingIOError:
                after = b""
            raw.close()
            return before, after

    before, after = asyncio.run(scenario())
    assert before == b""
    assert [json.loads(line)["seq"] for line in after.splitlines()] == [1, 2]


def test_a_line_the_socket_takes_only_in_part_arrives_whole_and_before_the_next(sock_dir):
    """A published line goes straight to a watcher's socket when nothing waits before it; what
    the socket does not take at once (a line longer than its buffer) goes through the transport,
    and the lines after it wait behind it: the watcher reads every line whole, in order."""
    daemon = FakeDaemon()

    async def scenario() -> tuple[list[dict[str, Any]], int]:
        loop = asyncio.get_running_loop()
        async with serving(daemon, sock_dir) as server:
            raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            raw.setblocking(False)
            await loop.sock_connect(raw, str(server.path))
            await loop.sock_sendall(raw, b'{"class": "WATCH", "id": "w"}\n')
            received = b""
            while b'"ACK"' not in received:
                received += await loop.sock_recv(raw, 65536)
            (client,) = server._watchers
            room = client.writer.transport.get_extra_info("socket").getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
            server.publish(daemon.journal_event(blob="x" * (4 * room)))  # far more than the socket holds
            server.flush()
            buffered = client.writer.transport.get_write_buffer_size()
            for _ in range(3):
                server.publish(daemon.journal_event())
                server.flush()
            received = received[received.index(b"\n", received.index(b'"ACK"')) + 1:]
            while received.count(b"\n") < 4:
                received += await loop.sock_recv(raw, 1 << 20)
            raw.close()
            return [json.loads(line) for line in received.splitlines()], buffered

    events, buffered = asyncio.run(scenario())
    assert buffered > 0  # the socket took part of the long line: the rest waited in the transport
    assert [e["seq"] for e in events] == [1, 2, 3, 4]
    assert len(events[0]["data"]["blob"]) == events[0]["data"]["blob"].count("x") > 0


def test_a_watcher_gone_when_its_line_is_written_is_dropped_quietly(sock_dir):
    """The straight write meets the closed peer; the transport then closes the connection as
    for any write error: the server forgets the watcher and the others get their lines."""
    daemon = FakeDaemon()

    async def scenario() -> tuple[int, list[int]]:
        async with serving(daemon, sock_dir) as server:
            gone = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            gone.connect(str(server.path))
            gone.sendall(b'{"class": "WATCH", "id": "gone"}\n')
            stays = await LineClient.connect(server.path)
            await stays.ask({"class": "WATCH", "id": "w"})
            await until(lambda: server.watcher_count == 2)
            gone.shutdown(socket.SHUT_RDWR)
            gone.close()
            for _ in range(3):
                server.publish(daemon.journal_event())
                server.flush()
            seqs, _ = await read_events(stays, 3)
            await until(lambda: server.watcher_count == 1)
            left = server.watcher_count
            await stays.close()
            return left, seqs

    left, seqs = asyncio.run(scenario())
    assert (left, seqs) == (1, [1, 2, 3])


def test_a_line_for_a_watcher_whose_socket_was_just_closed_never_reaches_the_file_given_its_number(sock_dir):
    """After a write error the transport closes the socket a loop turn before the client hears
    of it: a line published in that turn must not be written to the descriptor's number, which
    the next file opened (a journal page, another client's socket) may hold by then."""
    daemon = FakeDaemon()

    async def scenario() -> tuple[bool, bytes]:
        loop = asyncio.get_running_loop()
        async with serving(daemon, sock_dir) as server:
            gone = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            gone.connect(str(server.path))
            gone.sendall(b'{"class": "WATCH", "id": "gone"}\n')
            await until(lambda: server.watcher_count == 1)
            (client,) = server._watchers
            number = client.writer.get_extra_info("socket").fileno()
            gone.shutdown(socket.SHUT_RDWR)
            gone.close()
            server.publish(daemon.journal_event())  # meets the closed peer: the transport closes
            server.flush()
            outcome: asyncio.Future[tuple[bool, bytes]] = loop.create_future()

            def next_card() -> None:  # the socket is closed now; the client does not know yet
                opened = [tempfile.TemporaryFile()]
                while opened[-1].fileno() != number and len(opened) < 20:
                    opened.append(tempfile.TemporaryFile())
                took_number = opened[-1].fileno() == number
                server.publish(daemon.journal_event())
                server.flush()
                opened[-1].seek(0)
                outcome.set_result((took_number, opened[-1].read()))
                for file in opened:
                    file.close()

            loop.call_soon(next_card)
            return await outcome

    took_number, written = asyncio.run(scenario())
    assert took_number and written == b""
