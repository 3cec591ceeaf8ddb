"""The API tests' rig: a fake daemon behind the real server on a real socket, and clients
in this process (root) or in subprocesses under other uids and gids (real credentials)."""
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from cardd.api.errors import CommandFailed
from cardd.api.peer import Caller, Role, RoleGroups
from cardd.api.protocol import ErrorCode, ApiEvent, LogQuery
from cardd.api.server import ApiServer, Limits
from cardd.daemon.commands import command_table
from cardd.journal.records import KIND_COMMAND, KIND_EVENT, KIND_INPUT
from devices.events import Reason

#: the socket file's group: every foreign client below is in it unless a test says otherwise
SOCKET_GID = 64100
DEALER_GID, SUPERVISOR_GID, TECH_GID = 64201, 64202, 64203
ROLE_GROUPS: RoleGroups = {Role.DEALER: DEALER_GID, Role.SUPERVISOR: SUPERVISOR_GID, Role.TECHNICIAN: TECH_GID}


#: the daemon's own command table (not simulating): the rig cannot drift from the product
COMMANDS = command_table(simulated=False)


class FakeDaemon:
    """The backend boundary: a list for a journal and the daemon's table of commands, no devices."""

    command_roles: dict[str, frozenset[Role]] = {name: spec.roles for name, spec in COMMANDS.items()}

    def __init__(self) -> None:
        self.journal: list[ApiEvent] = []
        self.accepted: list[tuple[str, dict[str, Any], Caller]] = []
        self.refused: list[tuple[str, Caller, frozenset[Role]]] = []
        self.held_back: list[tuple[str, int, dict[str, int], float]] = []
        self.replay_reads = 0
        self.queries: list[LogQuery] = []

    def journal_event(self, reason: str = Reason.CARD_ASSIGNED.value, *, kind: str = KIND_EVENT,
                      source: str = "shoe-1", who: str | None = None, **data: Any) -> ApiEvent:
        """A record as the daemon journals one: by default the event of a card read and assigned."""
        event = ApiEvent(seq=len(self.journal) + 1, time=1_700_000_000.0 + len(self.journal), kind=kind,
                      source=source, reason=reason, severity="info", who=who, message=reason.lower(), data=data)
        self.journal.append(event)
        return event

    async def state(self, caller: Caller) -> dict[str, Any]:
        return {"shoe": {"cards_left": 416 - len(self.journal)}, "round": None, "holds": []}

    async def log(self, query: LogQuery, caller: Caller) -> tuple[Sequence[ApiEvent], bool]:
        self.queries.append(query)
        if query.reason == "BUG":
            raise RuntimeError("a fault in the daemon")
        found = [e for e in self.journal
                 if (query.from_seq is None or e.seq >= query.from_seq)
                 and (query.to_seq is None or e.seq <= query.to_seq)
                 and (query.reason is None or e.reason == query.reason)]
        return found[:query.limit], len(found) > query.limit

    def journal_head(self) -> int:
        return len(self.journal)

    async def events_since(self, seq: int, limit: int) -> Sequence[ApiEvent]:
        self.replay_reads += 1
        # a journal read in another thread: events are journaled and published before it
        # starts and after it read, so some arrive both ways and some only live
        await asyncio.sleep(0)
        found = self.journal[seq:seq + limit]
        for _ in range(3):
            await asyncio.sleep(0)
        return found

    async def command(self, name: str, args: dict[str, Any], caller: Caller) -> int:
        if args.get("fail"):  # as the table refuses a command (a TableError: the daemon's ERROR failed)
            raise CommandFailed(f"cannot {name} now: the round is held", code=ErrorCode.FAILED)
        self.accepted.append((name, args, caller))
        spec = COMMANDS[name]
        if spec.kind == "table":  # the daemon journals a table command as its input record: no reason code
            assert spec.record is not None
            return self.journal_event("", kind=KIND_INPUT, source="api", who=caller.user,
                                      type=spec.record.__name__, **args).seq
        # any other under its name in capitals (TableService.journal_command)
        return self.journal_event(name.upper(), kind=KIND_COMMAND, source=spec.kind, who=caller.user,
                                  command=name, uid=caller.uid, args=args).seq

    async def command_refused(self, name: str, args: dict[str, Any], caller: Caller, needs: frozenset[Role]) -> None:
        self.refused.append((name, caller, needs))

    def commands_held_back(self, user: str, uid: int, commands: Mapping[str, int], window_s: float) -> None:
        self.held_back.append((user, uid, dict(commands), window_s))


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
