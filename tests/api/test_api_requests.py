"""Requests and replies: one reply each, carrying the client's id; bad lines answered, not fatal."""
from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

import pytest

from cardd.api.errors import ApiError, PeerCredentialsError, SocketInUse
from cardd.api.peer import ALL_ROLES, Caller
from cardd.api.protocol import ERROR_CODES, ApiEvent, LogQuery
from cardd.api.server import ApiServer, Limits
from cardd.daemon.backend import journal_reasons
from cardd.daemon.commands import command_table
from cardd.journal.records import KIND_COMMAND, KIND_EVENT, KIND_INPUT

from tests.api.api_rig import ROLE_GROUPS, FakeDaemon, LineClient, serving


def test_the_rig_journals_a_reason_and_kind_the_daemon_journals() -> None:
    """A LOG filter test against the rig means something only for a reason the daemon has."""
    event = FakeDaemon().journal_event()
    assert event.reason in journal_reasons() and event.kind == KIND_EVENT


def test_the_rig_has_the_daemons_commands_and_journals_them_as_the_daemon_does() -> None:
    """Its commands are the daemon's (names and roles); an accepted one is journaled as the daemon
    journals it: a table input's record without a reason code, any other under a reason the daemon
    journals. Its errors carry the API's own codes."""
    daemon = FakeDaemon()
    assert daemon.command_roles == {spec.name: spec.roles for spec in command_table(simulated=False).values()}
    root = Caller(pid=1, uid=0, gid=0, user="root", groups=frozenset({0}), roles=ALL_ROLES)

    async def commands() -> list[ApiEvent]:
        for name in ("open_round", "selftest", "export_journal"):
            await daemon.command(name, {}, root)
        return daemon.journal

    table, device, journal = asyncio.run(commands())
    assert (table.kind, table.reason, table.source, table.data) == (KIND_INPUT, "", "api", {"type": "OpenRound"})
    for event in (device, journal):
        assert event.kind == KIND_COMMAND and event.reason in journal_reasons(), event
    assert {code for _, _, code, _ in BAD_LINES} <= ERROR_CODES


def test_a_client_gets_version_then_one_reply_per_request_with_its_id(sock_dir):
    daemon = FakeDaemon()
    for _ in range(5):
        daemon.journal_event()

    async def scenario() -> list[dict[str, Any]]:
        async with serving(daemon, sock_dir) as server:
            client = await LineClient.connect(server.path, read_version=False)
            replies = [await client.recv()]
            replies.append(await client.ask({"class": "STATE", "id": "s1"}))
            replies.append(await client.ask({"class": "LOG", "id": "l1", "from_seq": 2, "to_seq": 4}))
            replies.append(await client.ask({"class": "LOG", "id": "l2", "limit": 2}))
            await client.ask({"class": "LOG", "id": "l3", "since": 1_700_000_000.5, "until": 1_700_000_100,
                              "severity": "alarm", "round": 7})
            replies.append(await client.ask({"class": "COMMAND", "id": "c1", "name": "void_shoe", "args": {}}))
            await client.close()
            return replies

    version, state, log, limited, ack = asyncio.run(scenario())
    assert version == {"class": "VERSION", "release": "cardd-test", "protocol": "1.1"}
    assert state["class"] == "STATE" and state["id"] == "s1" and state["state"]["shoe"] == {"cards_left": 411}
    assert log["class"] == "LOG" and log["id"] == "l1" and log["more"] is False
    assert [r["seq"] for r in log["records"]] == [2, 3, 4]
    assert log["records"][0] == {"class": "EVENT", "seq": 2, "time": 1_700_000_001.0, "kind": "event",
                                 "source": "shoe-1", "reason": "CARD_ASSIGNED", "severity": "info", "who": None,
                                 "message": "card_assigned", "data": {}}
    assert [r["seq"] for r in limited["records"]] == [1, 2] and limited["more"] is True
    assert ack == {"class": "ACK", "id": "c1", "seq": 6}
    assert daemon.queries[2] == LogQuery(id="l3", since=1_700_000_000.5, until=1_700_000_100.0, severity="alarm",
                                         round=7)  # the filters reach the daemon as typed


#: every command the rig (the daemon's table) knows, as an unknown command's ERROR lists them
KNOWN_COMMANDS = ", ".join(sorted(FakeDaemon.command_roles))

#: (line, the ERROR's id, code, message): every message exactly, the daemon's own words whatever
#: msgspec's release says (0.22 and 0.23 word a bad UTF-8 string differently: the client reads neither)
BAD_LINES = [
    (b"{nope\n", None, "bad-json", "not a JSON line: object keys must be strings (byte 1)"),
    (b"\xff\xfe\n", None, "bad-json", "not a JSON line: not UTF-8 text (byte 0)"),
    # well-formed JSON but a string that is not UTF-8 (a console sending Latin-1 "José"): it once
    # ended the connection with no reply, and a traceback in the daemon's log
    (b'{"class": "STATE", "id": "Jos\xe9"}\n', None, "bad-json", "not a JSON line: a string is not UTF-8 (byte 29)"),
    (b'{"class": "COMMAND", "id": "c", "name": "place_bet", "args": {"player": "\xff"}}\n', None, "bad-json",
     "not a JSON line: a string is not UTF-8 (byte 73)"),
    (b'{"class": "STATE", "id": "s"} {}\n', None, "bad-json",
     "not a JSON line: trailing characters after the JSON value (byte 30)"),
    (b'{"class": "STATE", "id": \n', None, "bad-json", "not a JSON line: the line ends before its JSON value does "
                                                      "(byte 24)"),
    (b'{"class": "STATE", "id": "s",}\n', None, "bad-json", "not a JSON line: a comma before the end of an object "
                                                          "(byte 29)"),
    (b'{"class": "LOG", "id": "n", "since": NaN}\n', None, "bad-json", "not a JSON line: NaN is not a JSON number"),
    (b'{"class": "STATE", "id": "\\ud800"}\n', None, "bad-json",
     "not a JSON line: a string holds a \\u escape of a lone surrogate, which is no character"),
    (b'{"class": "HELLO", "id": "h"}\n', "h", "bad-request",
     "unknown class 'HELLO' (a request is WATCH, STATE, LOG, COMMAND or WHOAMI)"),
    (b'{"class": 7, "id": "h"}\n', "h", "bad-request",
     "class: expected a string (a request is WATCH, STATE, LOG, COMMAND or WHOAMI)"),
    (b'{"id": "x"}\n', "x", "bad-request", "field 'class' is missing (a request is WATCH, STATE, LOG, COMMAND or WHOAMI)"),
    (b'[1, 2]\n', None, "bad-request", "expected an object, got an array"),
    (b'{"class": "LOG", "id": "l", "limit": 0}\n', "l", "bad-request", "limit: expected a whole number of at least 1"),
    (b'{"class": "LOG", "id": "l", "colour": "red"}\n', "l", "bad-request",
     "unknown field 'colour' (a LOG has from_seq, id, limit, newest, reason, round, severity, since, to_seq, until, "
     "who)"),
    (b'{"class": "WATCH", "since_seq": "3"}\n', None, "bad-request",
     "since_seq: expected a whole number or null, got a string"),
    (b'{"class": "COMMAND", "id": "e", "name": ""}\n', "e", "bad-request", "name: expected a string of at least 1 "
                                                                          "character"),
    # beyond the journal's 64-bit integers (nanoseconds, seqs): refused here, not an overflow in the
    # daemon's journal query answered "internal" (cardctl log --since 99999999999999)
    (b'{"class": "LOG", "id": "t", "since": 99999999999999}\n', "t", "bad-request",
     "since: expected a number of at most 9223372036"),
    (b'{"class": "LOG", "id": "t", "since": 1e400}\n', None, "bad-request", "since: a number out of range"),
    (b'{"class": "LOG", "id": "f", "from_seq": 99999999999999999999}\n', "f", "bad-request",
     "from_seq: expected a whole number of at most 9223372036854775807"),
    (b'{"class": "WATCH", "id": "w", "since_seq": 9223372036854775808}\n', "w", "bad-request",
     "since_seq: expected a whole number of at most 9223372036854775807"),
    (b'{"class": "COMMAND", "name": "void_shoe"}\n', None, "bad-request", "field 'id' is missing"),
    (b'{"class": "COMMAND", "id": "q", "name": "fly"}\n', "q", "unknown-command",
     f"unknown command 'fly' (known: {KNOWN_COMMANDS})"),
    (b'{"class": "COMMAND", "id": "q", "name": "void_shoe", "args": {"fail": 1}}\n', "q", "failed",
     "cannot void_shoe now: the round is held"),
    (b'{"class": "LOG", "id": "bug", "reason": "BUG"}\n', "bug", "internal",
     "the daemon failed on this request (see its log)"),
    (b'{"class": "WATCH", "id": "w"}\n{"class": "WATCH", "id": "w2"}\n', "w2", "bad-request",
     "already watching: send WATCH with enable false first"),
    # nested thousands deep (msgspec raises RecursionError): the connection once closed with no reply
    # and a traceback in the daemon's log, a line of it per request
    (b'{"class": "STATE", "id": "d", "x": ' + b"[" * 30_000 + b"]" * 30_000 + b"}\n", None, "bad-request",
     "unknown field 'x'"),
    (b'{"class": "COMMAND", "id": "n", "name": "void_shoe", "args": {"a": ' + b"[" * 30_000 + b"]" * 30_000
     + b"}}\n", None, "bad-request", "not a valid request: arrays or objects nested too deeply"),
]


@pytest.mark.parametrize("line, request_id, code, message", BAD_LINES, ids=[b[3][:30] for b in BAD_LINES])
def test_a_bad_request_gets_one_error_line_and_the_connection_stays(sock_dir, line, request_id, code, message):
    async def scenario() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        async with serving(FakeDaemon(), sock_dir) as server:
            client = await LineClient.connect(server.path)
            await client.send(line)
            replies = [await client.recv() for _ in range(line.count(b"\n"))]
            after = await client.ask({"class": "STATE", "id": "after"})
            await client.close()
            return replies, after

    replies, after = asyncio.run(scenario())
    error = replies[-1]
    assert error["class"] == "ERROR" and error["id"] == request_id and error["code"] == code, error
    assert error["message"] == message, error
    assert after["class"] == "STATE" and after["id"] == "after"


def test_an_unknown_command_error_lists_every_command_in_full(sock_dir):
    """The daemon's command table is longer than an ERROR's usual cut: the list is the help, never cut."""
    daemon = FakeDaemon()  # the daemon's own command table

    async def scenario() -> dict[str, Any]:
        async with serving(daemon, sock_dir) as server:
            client = await LineClient.connect(server.path)
            reply = await client.ask({"class": "COMMAND", "id": "q", "name": "open_rnd"})
            await client.close()
            return reply

    error = asyncio.run(scenario())
    known = ", ".join(sorted(daemon.command_roles))
    assert error["code"] == "unknown-command" and error["message"] == f"unknown command 'open_rnd' (known: {known})"


def test_blank_lines_are_ignored(sock_dir):
    async def scenario() -> dict[str, Any]:
        async with serving(FakeDaemon(), sock_dir) as server:
            client = await LineClient.connect(server.path)
            reply = await client.ask(b"\n  \n" + b'{"class": "STATE", "id": "s"}\n')
            await client.close()
            return reply

    assert asyncio.run(scenario())["id"] == "s"


def test_a_flood_of_requests_gets_an_error_and_the_connection_closed(sock_dir):
    async def scenario() -> list[dict[str, Any]]:
        async with serving(FakeDaemon(), sock_dir, Limits(rate=1.0, burst=10)) as server:
            client = await LineClient.connect(server.path)
            await client.send(b'{"class": "STATE"}\n' * 100)
            received = []
            try:
                while True:
                    received.append(await client.recv())
            except EOFError:
                pass
            await client.close()
            return received

    received = asyncio.run(scenario())
    assert 10 <= len(received) - 1 < 100 and {r["class"] for r in received[:-1]} == {"STATE"}
    assert received[-1]["class"] == "ERROR" and received[-1]["code"] == "flood"


def test_connections_over_the_cap_are_told_busy_and_closed(sock_dir):
    async def scenario() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        async with serving(FakeDaemon(), sock_dir, Limits(clients=3)) as server:
            kept = [await LineClient.connect(server.path) for _ in range(3)]
            extra = await LineClient.connect(server.path, read_version=False)
            refused = [await extra.recv()]
            with pytest.raises(EOFError):
                refused.append(await extra.recv())
            await extra.close()
            await kept[0].close()
            while server.client_count > 2:
                await asyncio.sleep(0.005)
            again = await LineClient.connect(server.path)
            state = await again.ask({"class": "STATE"})
            for client in kept[1:] + [again]:
                await client.close()
            return refused, state

    refused, state = asyncio.run(scenario())
    assert refused == [{"class": "ERROR", "id": None, "code": "busy",
                        "message": "the daemon serves 3 connections already"}]
    assert state["class"] == "STATE"


def test_a_stale_socket_is_replaced_a_live_one_refused_and_stop_removes_ours(sock_dir):
    path = sock_dir / "cardd.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file of a daemon that died

    async def scenario() -> None:
        async with serving(FakeDaemon(), sock_dir) as server:
            second = ApiServer(FakeDaemon(), path, release="x", role_groups=ROLE_GROUPS)
            with pytest.raises(SocketInUse, match=f"another process listens on {path}"):
                await second.start()
            client = await LineClient.connect(server.path)
            await client.close()
        assert not path.exists()

    asyncio.run(scenario())


def test_a_path_that_is_not_a_socket_is_left_alone(sock_dir):
    path = sock_dir / "cardd.sock"
    path.write_text("not mine")

    async def scenario() -> None:
        with pytest.raises(ApiError, match="exists and is not a socket"):
            await ApiServer(FakeDaemon(), path, release="x", role_groups=ROLE_GROUPS).start()

    asyncio.run(scenario())
    assert path.read_text() == "not mine"


def test_limits_that_cannot_work_are_refused():
    with pytest.raises(ApiError, match="backlog_chunk"):
        Limits(queue=100, backlog_chunk=60)
    with pytest.raises(ApiError, match="must be positive"):
        Limits(rate=0)


def test_stop_closes_every_connection(sock_dir):
    async def scenario() -> int:
        async with serving(FakeDaemon(), sock_dir) as server:
            clients = [await LineClient.connect(server.path) for _ in range(5)]
        for client in clients:
            with pytest.raises((EOFError, ConnectionError)):
                await client.recv()
            await client.close()
        return len(os.listdir(sock_dir))

    assert asyncio.run(scenario()) == 0


def test_a_peer_whose_credentials_cannot_be_read_is_refused(sock_dir, mocker):
    """The kernel failing SO_PEERCRED is a boundary: simulated, the server's answer is real."""
    mocker.patch("cardd.api.server.identify", side_effect=PeerCredentialsError(
        "SO_PEERCRED on the API socket failed: Bad file descriptor"))

    async def scenario() -> list[dict[str, Any]]:
        async with serving(FakeDaemon(), sock_dir) as server:
            client = await LineClient.connect(server.path, read_version=False)
            received = [await client.recv()]
            with pytest.raises(EOFError):
                await client.recv()
            await client.close()
            return received

    assert asyncio.run(scenario()) == [{"class": "ERROR", "id": None, "code": "refused",
                                        "message": "SO_PEERCRED on the API socket failed: Bad file descriptor"}]
