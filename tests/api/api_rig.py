"""The API tests' rig: a fake daemon behind the real server on a real socket, and clients
in this process (root) or in subprocesses under other uids and gids (real credentials)."""
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from cardd.api.errors import CommandFailed
from cardd.api.peer import Caller, Role, RoleGroups
from cardd.api.protocol import Event, LogQuery
from cardd.api.server import ApiServer, Limits
from cardd.journal.records import KIND_EVENT
from devices.events import Reason

#: the socket file's group: every foreign client below is in it unless a test says otherwise
SOCKET_GID = 64100
DEALER_GID, SUPERVISOR_GID, TECH_GID = 64201, 64202, 64203
ROLE_GROUPS: RoleGroups = {Role.DEALER: DEALER_GID, Role.SUPERVISOR: SUPERVISOR_GID, Role.TECHNICIAN: TECH_GID}


class FakeDaemon:
    """The backend boundary: a list for a journal and a table of commands, no devices."""

    command_roles = {
        "open_betting": frozenset({Role.DEALER}),
        "player_decision": frozenset({Role.DEALER}),
        "continue_round": frozenset({Role.SUPERVISOR}),
        "void_shoe": frozenset({Role.SUPERVISOR}),
        "self_test": frozenset({Role.TECHNICIAN}),
        "clear_device_fault": frozenset({Role.TECHNICIAN}),
        "archive": frozenset({Role.SUPERVISOR, Role.TECHNICIAN}),
    }

    def __init__(self) -> None:
        self.journal: list[Event] = []
        self.accepted: list[tuple[str, dict[str, Any], Caller]] = []
        self.refused: list[tuple[str, Caller, frozenset[Role]]] = []
        self.replay_reads = 0
        self.queries: list[LogQuery] = []

    def journal_event(self, reason: str = Reason.CARD_ASSIGNED.value, **data: Any) -> Event:
        """A record as the daemon journals one: by default the event of a card read and assigned."""
        event = Event(seq=len(self.journal) + 1, time=1_700_000_000.0 + len(self.journal), kind=KIND_EVENT,
                      source="shoe-1", reason=reason, severity="info", message=reason.lower(), data=data)
        self.journal.append(event)
        return event

    async def state(self, caller: Caller) -> dict[str, Any]:
        return {"shoe": {"cards_left": 416 - len(self.journal)}, "round": None, "holds": []}

    async def log(self, query: LogQuery, caller: Caller) -> tuple[Sequence[Event], bool]:
        self.queries.append(query)
        if query.reason == "BUG":
            raise RuntimeError("a fault in the daemon")
        found = [e for e in self.journal
                 if (query.from_seq is None or e.seq >= query.from_seq)
                 and (query.to_seq is None or e.seq <= query.to_seq)
                 and (query.reason is None or e.reason == query.reason)]
        return found[:query.limit], len(found) > query.limit

    async def events_since(self, seq: int, limit: int) -> Sequence[Event]:
        self.replay_reads += 1
        # a journal read in another thread: events are journaled and published before it
        # starts and after it read, so some arrive both ways and some only live
        await asyncio.sleep(0)
        found = self.journal[seq:seq + limit]
        for _ in range(3):
            await asyncio.sleep(0)
        return found

    async def command(self, name: str, args: dict[str, Any], caller: Caller) -> int:
        if args.get("fail"):
            raise CommandFailed(f"cannot {name} now: the round is held", code="held")
        self.accepted.append((name, args, caller))
        return self.journal_event("COMMAND", name=name, who=caller.user).seq

    async def command_refused(self, name: str, args: dict[str, Any], caller: Caller, needs: frozenset[Role]) -> None:
        self.refused.append((name, caller, needs))


@asynccontextmanager
async def serving(daemon: FakeDaemon, sock_dir: Path, limits: Limits = Limits(), **kwargs: Any) -> AsyncIterator[ApiServer]:
    server = ApiServer(daemon, sock_dir / "cardd.sock", release="cardd-test", role_groups=ROLE_GROUPS,
                       limits=limits, group=SOCKET_GID, admin_uids={0}, **kwargs)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


class LineClient:
    """A root client in this process (root holds every role)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, path: Path, read_version: bool = True, buffer: int = 1 << 22) -> LineClient:
        """``buffer``: about half of what this side reads ahead of recv() (asyncio's limit)."""
        reader, writer = await asyncio.open_unix_connection(str(path), limit=buffer)
        client = cls(reader, writer)
        if read_version:
            assert (await client.recv())["class"] == "VERSION"
        return client

    async def send(self, message: dict[str, Any] | bytes) -> None:
        self.writer.write(message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n")
        await self.writer.drain()

    async def recv(self) -> dict[str, Any]:
        line = await self.reader.readline()
        if not line:
            raise EOFError("the server closed the connection")
        decoded: dict[str, Any] = json.loads(line)
        return decoded

    async def ask(self, message: dict[str, Any] | bytes) -> dict[str, Any]:
        await self.send(message)
        return await self.recv()

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass
