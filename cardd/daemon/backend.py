"""The API's backend (cardd.api.backend.Backend) for the daemon: STATE, LOG, WATCH replays
and COMMANDs, each through the table service's one path."""
from __future__ import annotations

import asyncio
import difflib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from cardd.api.errors import CommandFailed, CommandKept
from cardd.api.peer import Caller, Role, roles_text
from cardd.api.protocol import ApiEvent, LogQuery
from cardd.api.protocol import ErrorCode
from cardd.daemon.commands import CommandSpec, build_record, command_table, refusal_line
from cardd.daemon.devices import journaled_args
from cardd.daemon.state import table_state
from cardd.daemon.tracker_service import (REASON_COMMAND_REFUSED, REASON_START, REASON_STOP, TableService,
                                          record_event)
from cardd.journal.errors import JournalWriteError
from cardd.journal.records import REASON_EXPORTED, REASON_PRUNED, SEVERITIES
from core.errors import CarddError
from devices.events import Reason

#: journals a command's record now, with its result, while the command is under way (see :class:`Runner`)
Given = Callable[[dict[str, Any]], None]
#: a device, journal or simulation command: (name, args, caller, given) -> what it did, for the
#: journal record. The record is journaled when the runner returns, after what the device
#: answered; a runner whose result is known before the device hears of it (start_shuffle: the
#: decks asked for) calls ``given(result)`` first, so the record comes before the device's reports
#: on it, in the order things happened (a failure after it is journaled as COMMAND_REFUSED, after it).
#: A runner that then returns another result than it gave (firmware_update: what the transfer will
#: do, then what the device said) has that journaled too, as a second record the ACK names
Runner = Callable[[str, dict[str, Any], Caller, Given], Awaitable[dict[str, Any]]]


def journal_reasons() -> frozenset[str]:
    """Every reason code the daemon journals: the devices' and the table's events, the journal's
    export and prune, the daemon's start, stop and refused commands, and each command that is no
    table input under its own name in capitals (a table input's record has no reason code).
    The simulation's commands are in, whether or not this daemon simulates: a journal keeps them."""
    commands = command_table(simulated=True).values()
    return frozenset({*(r.value for r in Reason), REASON_EXPORTED, REASON_PRUNED, REASON_START, REASON_STOP, REASON_COMMAND_REFUSED,
                      *(spec.name.upper() for spec in commands if spec.kind != "table")})


def check_reason(reason: str, known: frozenset[str]) -> None:
    """CommandFailed (bad-request) for a LOG query's reason code that found nothing and that this
    daemon never journals: a typo would otherwise answer with nothing, as if nothing had happened.
    Names the close ones."""
    if reason in known:
        return
    close = difflib.get_close_matches(reason, known, n=3)
    hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(sorted(known))}"
    raise CommandFailed(f"no such reason code {reason!r}: {hint}", code=ErrorCode.BAD_REQUEST)


class DaemonBackend:
    def __init__(self, service: TableService, commands: Mapping[str, CommandSpec],
                 links: Callable[[], dict[str, bool]], runners: Mapping[str, Runner],
                 retention: Callable[[], dict[str, Any] | None] = lambda: None, *,
                 export: Callable[[], dict[str, Any]] | None = None, host_key: str | None = None,
                 device_trust: Callable[[], dict[str, Any]] = dict) -> None:
        self.service = service
        self._device_trust = device_trust  # STATE's "device_trust": each device's protocol, key and warning
        self._host_key = host_key  # STATE's "host_key": the identity key's fingerprint (None: none loaded)
        self._retention = retention  # STATE's "retention": where export and prune stood last
        self._export = export  # STATE's "export": the floor export's broker and backlog (None: off)
        self.commands = commands
        self._links = links
        self._runners = runners  # by CommandSpec.kind, for commands that are not table inputs
        self._roles = {name: spec.roles for name, spec in commands.items()}
        self._reasons = journal_reasons()

    @property
    def command_roles(self) -> Mapping[str, frozenset[Role]]:
        return self._roles

    async def state(self, caller: Caller) -> dict[str, Any]:
        return {**table_state(self.service.table, self._links(), self.service.journal.last_seq),
                "retention": self._retention(),
                "export": None if self._export is None else self._export(),
                "host_key": None if self._host_key is None else {"fingerprint": self._host_key},
                "device_trust": self._device_trust(),
                # cardd --simulate: its simulation commands are in (cardctl sim says so before any)
                "simulated": any(spec.kind == "simulation" for spec in self.commands.values())}

    async def log(self, query: LogQuery, caller: Caller) -> tuple[Sequence[ApiEvent], bool]:
        if query.severity is not None and query.severity not in SEVERITIES:  # a wrong field: not "failed"
            raise CommandFailed(f"severity {query.severity!r}: one of {', '.join(SEVERITIES)}",
                                code=ErrorCode.BAD_REQUEST)
        records = self.service.journal.query(
            seq_from=query.from_seq, seq_to=query.to_seq,
            since=None if query.since is None else int(query.since * 1e9),
            until=None if query.until is None else int(query.until * 1e9),
            reason=query.reason, min_severity=query.severity, round_id=query.round, who=query.who,
            limit=query.limit + 1, newest_first=query.newest)
        if query.reason is not None and not records:  # an older release's code still finds its records
            check_reason(query.reason, self._reasons)
        more = len(records) > query.limit
        records = records[:query.limit]
        if query.newest:  # the last ones matching, in the order they were written
            records.reverse()
        return [record_event(r) for r in records], more

    def journal_head(self) -> int:
        return self.service.journal.last_seq

    async def events_since(self, seq: int, limit: int) -> Sequence[ApiEvent]:
        return [record_event(r) for r in self.service.journal.query(seq_from=seq + 1, limit=limit)]

    async def command(self, name: str, args: dict[str, Any], caller: Caller) -> int:
        try:
            return await self._command(name, args, caller)
        except JournalWriteError as exc:  # applied; its record waits for the journal (not a refusal)
            raise CommandKept(str(exc)) from None

    async def _command(self, name: str, args: dict[str, Any], caller: Caller) -> int:
        spec = self.commands[name]
        if spec.kind == "table":
            record = build_record(spec, args, caller)
            return await self.service.command(record, caller.user, caller.uid, name)
        journaled: list[asyncio.Future[int]] = []  # the record's commit, once given
        gave: list[dict[str, Any]] = []
        kept_args = journaled_args(name, args)

        def given(result: dict[str, Any]) -> None:
            if journaled:
                raise RuntimeError(f"{name}: its record is journaled once")
            index = self.service.journal_command(name, {"args": kept_args, "result": result}, caller.user,
                                                 caller.uid, source=spec.kind)
            journaled.append(self.service.commit_of(index))
            gave.append(result)

        try:
            result = await self._runners[spec.kind](name, args, caller, given)
        except CarddError as exc:
            code = exc.code if isinstance(exc, CommandFailed) else "failed"
            # the client's line as the client got it (cut, one line): the text may quote what it sent
            line = refusal_line(name, exc)
            index = self.service.journal_command(name, kept_args, caller.user, caller.uid,
                                                 refused=line, source=spec.kind)
            await self.service.refusal_journaled(index)
            if journaled:  # its outcome retrieved: kept like any record while the journal cannot write
                await asyncio.gather(journaled[0], return_exceptions=True)
            raise CommandFailed(line, code=code) from None
        if journaled:
            seq = await journaled[0]
            if result is gave[0]:
                return seq
        index = self.service.journal_command(name, {"args": kept_args, "result": result}, caller.user, caller.uid,
                                             source=spec.kind)
        return await self.service.commit_of(index)

    async def command_refused(self, name: str, args: dict[str, Any], caller: Caller, needs: frozenset[Role]) -> None:
        index = self.service.journal_command(name, journaled_args(name, args), caller.user, caller.uid,
                                             refused=f"needs the {roles_text(needs)} role")
        await self.service.refusal_journaled(index)

    def commands_held_back(self, user: str, uid: int, commands: Mapping[str, int], window_s: float) -> None:
        count = sum(commands.values())
        self.service.journal_command(",".join(sorted(commands)), {"held_back": dict(commands)}, user, uid,
                                     refused=f"{count} command(s) not taken: too many refused within {window_s:g} s")
