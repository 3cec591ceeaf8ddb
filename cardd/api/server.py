"""The local API server: a Unix socket speaking JSON lines (docs/api.md); ``publish`` never waits on
a client, each watcher has a bounded queue (a full one is told DISCONNECT). How the fan-out
writes: docs/architecture.md, "The API server's fan-out"."""
from __future__ import annotations

import asyncio
import errno
import os
import re
import socket
import stat
from collections import deque
from collections.abc import Callable, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import structlog

from cardd.api.backend import Backend
from cardd.api.errors import (REASONS_MAX, ApiError, CommandFailed, CommandKept, PeerCredentialsError, SocketInUse,
                              one_line)
from cardd.api.peer import (Caller, Role, RoleGroups, default_admin_uids, group_name, identify, resolve_role_groups,
                            roles_text)
from cardd.api.protocol import (CLIENT_CLASSES, TECHNICIAN_LINE_MAX, Ack, ApiEvent, Command, Disconnect, Error,
                                ErrorCode, LogQuery, LogReply, PeerGroup, StateQuery, StateReply, Version, Watch,
                                WhoAmI, WhoAmIReply, class_name, encode_line, request_decoder)
from core.errors import CarddError
from core.parse_errors import json_line_problem
from core.schema_errors import ProblemKind, schema_problem
from drivers.aio import BudgetWindow, WindowedBudget

log = structlog.get_logger(__name__)

#: the most bytes of a Unix socket's path (sun_path's 108, its NUL included)
UNIX_PATH_MAX = 107


@dataclass(frozen=True)
class Limits:
    """What one client may cost the daemon."""
    max_line: int = 64 * 1024      # bytes in one request line, newline included
    queue: int = 1024              # messages waiting for one client before it is dropped
    clients: int = 64              # connections at once; one more gets ERROR busy (root's are apart)
    clients_per_user: int = 16     # of them, one user's (uid) at once
    rate: float = 50.0             # requests per second, sustained, per connection
    burst: int = 200               # requests at once before the rate applies
    backlog_chunk: int = 256       # events read from the journal at a time for WATCH since_seq
    linger: float = 5.0            # seconds a closed connection's last bytes may wait for the peer
    refused_per_window: int = 120  # refused commands of one user (uid) journaled one by one a window
    refusal_window_s: float = 60.0
    #: bytes one user's (uid's) connections together may leave unread before its next LOG is
    #: ERROR busy: each connection waits for its own reader (caught_up), but a user with 16 of them
    #: could otherwise hold 16 LOG answers of several MB each in the daemon
    unread_per_user: int = 8 * 1024 * 1024

    def __post_init__(self) -> None:
        if (min(self.max_line, self.queue, self.clients, self.clients_per_user, self.burst, self.backlog_chunk,
                self.refused_per_window, self.unread_per_user) < 1
                or self.rate <= 0 or self.refusal_window_s <= 0):
            raise ApiError(f"API limits must be positive: {self}")
        if self.backlog_chunk * 2 > self.queue:
            raise ApiError(f"API limits: backlog_chunk ({self.backlog_chunk}) must be at most half of queue ({self.queue})")


#: what an ERROR about a request's class tells the client it may be
REQUEST_CLASSES = "a request is WATCH, STATE, LOG, COMMAND or WHOAMI"
_REQUEST_TYPES = {class_name(request_type): request_type for request_type in CLIENT_CLASSES}


def explain_invalid(exc: Exception, line: bytes) -> tuple[str, str]:
    """(code, message) for a ``line`` the request decoder refused, in the daemon's words only (a
    client, or a person at socat, reads them; msgspec's change between releases): for a line that
    is no JSON the reason is worked out from its bytes, for JSON that is no request from the shape
    of msgspec's refusal (core.schema_errors), never its text."""
    if not isinstance(exc, msgspec.ValidationError):  # DecodeError; UnicodeDecodeError before msgspec 0.23
        syntax = json_line_problem(line)
        at = f" (byte {syntax.byte})" if syntax.byte is not None else ""
        return ErrorCode.BAD_JSON, one_line(f"not a JSON line: {syntax.what}{at}" if syntax.what else "not a JSON line")
    problem = schema_problem(exc)
    raw = _raw_object(line)
    sent_class = raw.get("class") if raw is not None else None
    if problem.path == ("class",):
        if problem.kind is ProblemKind.NOT_ALLOWED and isinstance(sent_class, str):
            return ErrorCode.BAD_REQUEST, one_line(f"unknown class {sent_class!r} ({REQUEST_CLASSES})")
        return ErrorCode.BAD_REQUEST, one_line(f"{problem.sentence()} ({REQUEST_CLASSES})")
    if problem.path == () and problem.kind is ProblemKind.MISSING_FIELD and problem.field == "class":
        return ErrorCode.BAD_REQUEST, f"{problem.sentence()} ({REQUEST_CLASSES})"
    request_type = _REQUEST_TYPES.get(sent_class) if isinstance(sent_class, str) else None
    if problem.path == () and problem.kind is ProblemKind.UNKNOWN_FIELD and request_type is not None:
        fields = ", ".join(sorted(field.name for field in msgspec.structs.fields(request_type)))
        return ErrorCode.BAD_REQUEST, one_line(f"{problem.sentence()} (a {sent_class} has {fields})")
    return ErrorCode.BAD_REQUEST, one_line(problem.sentence())


#: a request msgspec (or, for a command's args, a later step) cannot take for its depth
NESTED_TOO_DEEPLY = "not a valid request: arrays or objects nested too deeply"


def _raw_object(line: bytes) -> dict[str, Any] | None:
    """A line that is not a valid request as the JSON object it may still be; None if it is not one."""
    try:
        raw = msgspec.json.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):  # the last: nested thousands deep
        return None
    return raw if isinstance(raw, dict) else None


def request_id(line: bytes) -> str | None:
    """The ``id`` of a line that is not a valid request, when it has a usable one."""
    raw = _raw_object(line)
    found = raw.get("id") if raw is not None else None
    return found if isinstance(found, str) and len(found) <= 128 else None


class _Client:
    """One connection: who, what it waits to receive, and whether it watches."""

    def __init__(self, writer: asyncio.StreamWriter, caller: Caller, limits: Limits,
                 on_closing: Callable[[_Client], None]) -> None:
        self.writer = writer
        self.on_closing = on_closing
        self.caller = caller
        self.limits = limits
        self.loop = asyncio.get_running_loop()
        self.queue: deque[bytes] = deque()
        self.wake = asyncio.Event()
        self._flush_handle: asyncio.Handle | None = None
        self._offered = False  # events queued that the server's flush writes out (offer_event)
        self._draining = False  # the writer task waits for the peer to take what was written
        self._high_water = writer.transport.get_write_buffer_limits()[1]
        self._fd: int = writer.get_extra_info("socket").fileno()  # for a write straight to the socket (_flush)
        self.room = asyncio.Event()
        self.closing = False
        self.watching = False
        #: while a WATCH since_seq replays the journal, live events wait here as (seq, line)
        self.pending: list[tuple[int, bytes]] | None = None
        self.last_seq = -1
        self.tokens = float(limits.burst)
        self.token_time = self.loop.time()
        self.writer_task = self.loop.create_task(self._write_loop())

    # -- outgoing ------------------------------------------------------------------------------
    def send(self, line: bytes) -> bool:
        """Queue a line without waiting; False (and the client dropped) when the queue is full."""
        if self.closing:
            return False
        if len(self.queue) >= self.limits.queue:
            self.drop_lagging()
            return False
        self.queue.append(line)
        if self._flush_handle is None:
            self._flush_handle = self.loop.call_soon(self._flush)
        return True

    def _flush(self) -> None:
        """What this loop turn queued, in one write (module docstring); the writer task's job
        instead while it waits for the peer or the socket's buffer is full. With nothing buffered
        before it (a live watcher: the card path) the write goes straight to the socket: with 50
        watchers the transport's write and the queue's join were most of a card's fan-out; what
        the socket does not take goes to the transport after it, which also meets any error the
        socket has."""
        self._flush_handle = None
        queue = self.queue
        if not queue or self.closing:
            return
        transport = self.writer.transport
        buffered = transport.get_write_buffer_size()
        if self._draining or buffered >= self._high_water:
            self.wake.set()
            return
        data = queue.pop() if len(queue) == 1 else b"".join(queue)
        queue.clear()
        self.room.set()
        # is_closing: the transport closes the socket a loop turn after an error or an abort, a
        # turn before this client hears of it; its number may then be another file's
        if buffered or transport.is_closing():
            transport.write(data)
            return
        try:
            written = os.write(self._fd, data)
        except OSError:  # full (the transport waits for room) or gone (the transport closes)
            written = 0
        if written < len(data):
            transport.write(data[written:])

    def offer_event(self, seq: int, line: bytes) -> bool:
        """A published event: queued once, in sequence order, never twice. True when the caller
        is to write the queue out (:meth:`flush_offered`, once for all its events): the hot path
        schedules no flush of its own (a handle made and cancelled per watcher and commit was a
        fifth of a lone card's fan-out to 50 watchers)."""
        if (self.pending is None and seq > self.last_seq and not self.closing
                and len(self.queue) < self.limits.queue):
            # the hot path (every record, every watcher): deliver() and send() in one step
            self.last_seq = seq
            self.queue.append(line)
            if self._offered:
                return False
            self._offered = True
            return True
        if self.pending is not None:
            if len(self.pending) >= self.limits.queue:
                self.drop_lagging()
            else:
                self.pending.append((seq, line))
        else:
            self.deliver(seq, line)
        return False

    def flush_offered(self) -> None:
        """Write out what :meth:`offer_event` queued (and anything else queued) now."""
        self._offered = False
        if self._flush_handle is not None:
            self._flush_handle.cancel()
        self._flush()

    def deliver(self, seq: int, line: bytes) -> None:
        """An event to the client unless it had that one already (replay and live overlap)."""
        if seq > self.last_seq:
            self.last_seq = seq
            self.send(line)

    def unsent(self) -> int:
        """Bytes queued or buffered for this client that its socket has not taken yet."""
        return sum(map(len, self.queue)) + self.writer.transport.get_write_buffer_size()

    async def caught_up(self) -> None:
        """Until this client has taken what it was sent, but for the transport's high-water mark:
        its requests are answered no faster than it reads the answers. A client that sends requests
        and never reads (a LOG of 10,000 records is megabytes) then stops being read, its requests
        waiting in its own socket, instead of growing the daemon by an answer a request."""
        transport = self.writer.transport
        while not self.closing and (self._draining or self.unsent() > self._high_water):
            if self._draining or transport.get_write_buffer_size() > self._high_water:
                try:
                    await self.writer.drain()  # until the peer has taken most of it
                except (ConnectionError, OSError):
                    return  # gone: the reader ends the connection
            await asyncio.sleep(0)  # the queue goes out at the end of the turn; drain may not yield

    async def wait_room(self, lines: int) -> None:
        """Until ``lines`` more fit in the queue (flow control for a journal replay)."""
        while len(self.queue) + lines > self.limits.queue and not self.closing:
            self.room.clear()
            await self.room.wait()

    async def _write_loop(self) -> None:
        try:
            while True:
                await self.wake.wait()
                self.wake.clear()
                if self.queue:
                    data = b"".join(self.queue)
                    self.queue.clear()
                    self.room.set()
                    self.writer.write(data)
                    self._draining = True
                    try:
                        await self.writer.drain()
                    finally:
                        self._draining = False
                    if self.queue:  # queued while waiting: the flush left it here
                        self.wake.set()
                if self.closing and not self.queue:
                    break
        except (ConnectionError, OSError):
            pass
        finally:
            self._stop_taking()  # the peer may be gone: nothing more is queued for it
            self._close_transport()

    def _close_transport(self) -> None:
        transport = self.writer.transport
        transport.close()  # sends what is buffered, then closes
        self.loop.call_later(self.limits.linger, transport.abort)  # ... unless the peer never reads it

    # -- closing -------------------------------------------------------------------------------
    def _stop_taking(self) -> None:
        """From now on nothing more is queued or read (once; the server forgets the watcher)."""
        if self.closing:
            return
        self.closing = True
        self.pending = None
        self.room.set()
        self.on_closing(self)

    def close_after(self, line: bytes | None = None) -> None:
        """No more requests or events: send what is queued (and `line`), then close."""
        if self.closing:
            return
        self._stop_taking()
        if line is not None:
            self.queue.append(line)
        self.wake.set()

    def drop_lagging(self) -> None:
        """The client does not read fast enough: forget its queue, tell it, close."""
        if self.closing:
            return
        self._stop_taking()
        self.queue.clear()
        self.writer_task.cancel()
        if not self.writer.transport.is_closing():
            # straight into the transport's buffer: written if the peer ever reads again
            self.writer.transport.write(encode_line(Disconnect(
                code=ErrorCode.LAGGING,
                message=f"more than {self.limits.queue} messages waited for this client: "
                        "reconnect and WATCH with since_seq")))
        # the reader ends on its own: after the request it may be doing (never cut short), or
        # when the transport is lost (flushed, or aborted after the linger)
        log.warning("API client dropped: it fell behind", user=self.caller.user, uid=self.caller.uid,
                    pid=self.caller.pid)

    def abort(self) -> None:
        """Close now, whatever is queued (the daemon stops)."""
        self._stop_taking()
        self.writer_task.cancel()
        self.writer.transport.abort()

    # -- incoming ------------------------------------------------------------------------------
    def take_token(self) -> bool:
        """The rate limit: a token bucket of ``burst`` refilled at ``rate`` per second."""
        now = self.loop.time()
        self.tokens = min(float(self.limits.burst), self.tokens + (now - self.token_time) * self.limits.rate)
        self.token_time = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


class _RefusalBudget:
    """Refused commands per user (uid, all its connections): each is a journal record kept 90 days,
    and a user opening connection after connection, each with its own rate, could otherwise fill the
    journal's disk with them. A window starts at a user's first refusal; past ``refused_per_window``
    in it, that user's commands are held back until it ends, then ``window_ended(user, uid,
    held_back by name, window_s)`` journals them as one count (drivers.aio.WindowedBudget)."""

    def __init__(self, limits: Limits, window_ended: Callable[[str, int, dict[str, int], float], None]) -> None:
        self.window_ended = window_ended
        # the budget ends its windows with loop timers set as delays on its own clock (time.monotonic)
        self._budget: WindowedBudget[int] = WindowedBudget(limits.refusal_window_s, limits.refused_per_window,
                                                           self._ended)

    def holding_back(self, uid: int) -> BudgetWindow | None:
        """The user's window while its commands are held back, else None."""
        return self._budget.over(uid)

    def refused(self, caller: Caller) -> None:
        """One more refusal of ``caller``'s; its window starts at its first."""
        self._budget.use(caller.uid, caller.user)

    def hold_back(self, caller: Caller, window: BudgetWindow, name: str) -> float:
        """Count a command not taken (``name``: a known command's, never the client's text: a flood
        of distinct names would grow the count) in ``window`` (:meth:`holding_back`'s); the seconds
        until it ends."""
        if not window.held:
            log.warning("API commands held back", user=caller.user, uid=caller.uid, refused=window.used,
                        window_s=self._budget.interval_s)
        return self._budget.hold(caller.uid, name)

    def close(self) -> None:
        """At the stop: what is held back is journaled now."""
        self._budget.close()

    def _ended(self, uid: int, window: BudgetWindow) -> None:
        held = window.held_count
        log.warning("API commands taken again", user=window.label, uid=uid, held_back=held)
        try:
            self.window_ended(window.label, uid, dict(window.held), self._budget.interval_s)
        except Exception:  # the count is in the log line above; a timer or stop() must go on
            log.exception("API commands held back not journaled", uid=uid, held_back=held)


class ApiServer:
    """The API on a Unix socket. ``mode`` and ``group`` are set on the socket file;
    ``role_groups`` say which groups hold which role; ``admin_uids`` hold every role."""

    def __init__(self, backend: Backend, path: str | os.PathLike[str], *, release: str,
                 role_groups: RoleGroups, limits: Limits = Limits(), mode: int = 0o660,
                 group: int | None = None, admin_uids: Set[int] | None = None) -> None:
        self.backend = backend
        self.path = Path(path)
        self.release = release
        self.limits = limits
        self.mode = mode
        self.group = group
        self.role_gids = resolve_role_groups(role_groups)
        self.admin_uids = frozenset(default_admin_uids() if admin_uids is None else admin_uids)
        self._server: asyncio.Server | None = None
        self._socket_ino: int | None = None
        self._clients: set[_Client] = set()
        self._watchers: set[_Client] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_seq: int | None = None
        self._offered: list[_Client] = []  # watchers with published lines to write (flush)
        self._flush_handle: asyncio.Handle | None = None
        self._refusals = _RefusalBudget(limits, backend.commands_held_back)

    @property
    def client_count(self) -> int:
        """Connections open now (those still sending their last bytes included)."""
        return len(self._clients)

    @property
    def watcher_count(self) -> int:
        return len(self._watchers)

    @property
    def unsent_bytes(self) -> int:
        """What the clients have been sent and not taken yet, all together."""
        return sum(client.unsent() for client in self._clients)

    # -- life ----------------------------------------------------------------------------------
    async def start(self) -> None:
        """Listen. A stale socket file is removed; a live one (another daemon) is SocketInUse."""
        sock = self._bind()
        self._server = await asyncio.start_unix_server(self._serve, sock=sock, limit=self.limits.max_line)
        log.info("API listening", path=str(self.path))

    def _bind(self) -> socket.socket:
        self._clear_stale()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(self.path))
            # nobody can connect before listen(), so the umask's mode in between is harmless
            os.chmod(self.path, self.mode)
            if self.group is not None:
                os.chown(self.path, -1, self.group)
            self._socket_ino = os.stat(self.path).st_ino
            sock.listen(128)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            # a path past AF_UNIX's 107 bytes is an OSError without an errno (strerror None)
            size = len(os.fsencode(self.path))
            why = exc.strerror or (f"the path is {size} bytes, more than a Unix socket's {UNIX_PATH_MAX} (choose a "
                                   "shorter directory)" if size > UNIX_PATH_MAX else type(exc).__name__)
            raise ApiError(f"cannot listen on the API socket {self.path}: {why}") from exc
        return sock

    def _clear_stale(self) -> None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(st.st_mode):
            raise ApiError(f"{self.path} exists and is not a socket: remove it or configure another socket path")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.setblocking(False)
            err = probe.connect_ex(str(self.path))
        if err in (0, errno.EAGAIN):
            raise SocketInUse(f"another process listens on {self.path} (is cardd already running?)")
        if err != errno.ECONNREFUSED:
            raise ApiError(f"cannot tell whether {self.path} is in use: {os.strerror(err)}")
        os.unlink(self.path)  # left by a daemon that died

    async def stop(self) -> None:
        """Stop listening, close every connection (cancelling requests in progress), remove the
        socket file (if still ours)."""
        if self._server is not None:
            self._server.close()
        clients = list(self._clients)
        for client in clients:
            client.abort()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, *(c.writer_task for c in clients), return_exceptions=True)
        self._refusals.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        try:
            if self._socket_ino is not None and os.stat(self.path).st_ino == self._socket_ino:
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        self._socket_ino = None

    # -- events --------------------------------------------------------------------------------
    def publish(self, event: ApiEvent) -> None:
        """Send a journaled event to every watcher. Call it on the loop, after the event is
        durable in the journal and in sequence order; it never waits."""
        line = encode_line(event)
        seq = self._last_seq = event.seq
        offered = self._offered
        for client in tuple(self._watchers):
            if client.offer_event(seq, line):
                offered.append(client)
        if offered:
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        if self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Write what :meth:`publish` queued for each watcher now: at the end of the loop turn
        (one handle for all watchers), or sooner when the daemon calls it after a commit's
        records, so a card's line leaves before the rest of what the commit does (confirming the
        events to the devices). One write a watcher."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        offered, self._offered = self._offered, []
        for client in offered:
            client.flush_offered()

    # -- connections ---------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        client: _Client | None = None
        try:
            try:
                caller = identify(writer.get_extra_info("socket"), self.role_gids, self.admin_uids)
            except PeerCredentialsError as exc:
                log.warning("API connection refused", error=str(exc))
                writer.write(encode_line(Error(id=None, code=ErrorCode.REFUSED, message=one_line(str(exc)))))
                writer.close()
                return
            busy = self._no_room_for(caller)
            if busy:
                writer.write(encode_line(Error(id=None, code=ErrorCode.BUSY, message=busy)))
                writer.close()
                return
            client = _Client(writer, caller, self.limits, on_closing=self._watchers.discard)
            self._clients.add(client)
            # the connection counts until its last bytes are written (or given up)
            client.writer_task.add_done_callback(lambda _: self._clients.discard(client))
            client.send(encode_line(Version(release=self.release)))
            await self._read_requests(client, reader)
        except asyncio.CancelledError:
            # stop(); this task is the connection's own, and asyncio's streams would report a
            # cancelled connection task as an error
            pass
        except Exception:
            log.exception("API connection failed")
        finally:
            # nothing awaited here: a cancel must not cut the bookkeeping short
            if client is not None:
                client.close_after()
            elif not writer.is_closing():
                writer.close()
            self._tasks.discard(task)

    def _no_room_for(self, caller: Caller) -> str | None:
        """Why ``caller`` may not connect now, if it may not. One user holds at most
        ``clients_per_user`` connections, so no one user (a role or none: a connection without a
        role may stay open) can take them all; root's and the daemon's own uid's count apart, up to
        ``clients``, so the technician's cardctl gets in whatever the others hold."""
        admin = caller.uid in self.admin_uids
        mine = sum(1 for c in self._clients if c.caller.uid == caller.uid)
        pool = sum(1 for c in self._clients if (c.caller.uid in self.admin_uids) == admin)  # root's, or the rest
        if pool >= self.limits.clients:
            return f"the daemon serves {self.limits.clients} connections already"
        if not admin and mine >= self.limits.clients_per_user:
            return f"{caller.describe()} holds {mine} connections already, the most one user may"
        return None

    async def _read_requests(self, client: _Client, reader: asyncio.StreamReader) -> None:
        # a technician's firmware_update carries the image (image_base64): that line, and only
        # that one, may be longer than max_line, the stream's own limit, so every other line (a
        # flood without a newline) is cut off there as before
        technician = Role.TECHNICIAN in client.caller.roles
        longest = max(self.limits.max_line, TECHNICIAN_LINE_MAX) if technician else self.limits.max_line
        while not client.closing:
            try:
                line = await _read_line(reader, self.limits.max_line, longest)
            except asyncio.IncompleteReadError:
                return  # end of input (an unfinished last line is dropped)
            except _LongCommand as exc:
                if technician:  # longer than any image: too long for anyone
                    client.close_after(encode_line(Error(
                        id=None, code=ErrorCode.TOO_LONG,
                        message=f"a request line longer than {exc.consumed} bytes: closing")))
                    return
                # a firmware_update from someone who may not send one: refused (and journaled) for
                # want of the role, as a shorter one is, not as a line too long; the rest is not read
                reply = await self._command(client.caller, Command(id=exc.request_id, name="firmware_update"))
                client.close_after(encode_line(reply))
                return
            except asyncio.LimitOverrunError as exc:  # its consumed: the limit that applied
                client.close_after(encode_line(Error(
                    id=None, code=ErrorCode.TOO_LONG,
                    message=f"a request line longer than {exc.consumed} bytes: closing")))
                return
            except (ConnectionError, OSError):
                return
            if not client.take_token():
                client.close_after(encode_line(Error(
                    id=None, code=ErrorCode.FLOOD,
                    message=f"more than {self.limits.rate:g} requests per second: closing")))
                return
            if line.strip():
                await client.caught_up()
                await self._answer(client, line)

    async def _answer(self, client: _Client, line: bytes) -> None:
        """Exactly one reply to one line."""
        try:
            request = request_decoder.decode(line)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # the latter: msgspec before 0.23, bad UTF-8
            code, message = explain_invalid(exc, line)
            client.send(encode_line(Error(id=request_id(line), code=code, message=message)))
            return
        except RecursionError:  # msgspec's own, for arrays or objects nested thousands deep
            client.send(encode_line(Error(id=None, code=ErrorCode.BAD_REQUEST, message=NESTED_TOO_DEEPLY)))
            return
        try:
            reply: msgspec.Struct | None = await self._dispatch(client, request)
        except CommandFailed as exc:  # a refusal for several reasons is cut by the daemon already, at REASONS_MAX
            reply = Error(id=request.id, code=exc.code, message=one_line(str(exc), REASONS_MAX))
        except RecursionError:  # args nested deeper than a later step (the json module) goes
            reply = Error(id=request.id, code=ErrorCode.BAD_REQUEST, message=NESTED_TOO_DEEPLY)
        except CarddError as exc:
            reply = Error(id=request.id, code=ErrorCode.FAILED, message=one_line(str(exc)))
        except Exception:
            log.exception("API request failed", request=type(request).__name__, user=client.caller.user)
            reply = Error(id=request.id, code=ErrorCode.INTERNAL, message="the daemon failed on this request (see its log)")
        if reply is None:
            return  # sent already
        try:
            client.send(encode_line(reply))
        except (msgspec.EncodeError, TypeError, ValueError):
            log.exception("API reply not encodable", reply=type(reply).__name__)
            client.send(encode_line(Error(id=request.id, code=ErrorCode.INTERNAL,
                                          message="the daemon's reply could not be encoded (see its log)")))

    async def _dispatch(self, client: _Client,
                        request: Watch | StateQuery | LogQuery | Command | WhoAmI) -> msgspec.Struct | None:
        caller = client.caller
        if isinstance(request, Command):
            return await self._command(caller, request)
        if isinstance(request, WhoAmI):  # before the refusal of a caller with no role: it says why he has none
            return self._whoami(caller, request)
        if not caller.roles:
            return _no_role(caller, request)
        if isinstance(request, StateQuery):
            return StateReply(id=request.id, state=await self.backend.state(caller))
        if isinstance(request, LogQuery):
            unread = sum(c.unsent() for c in self._clients if c.caller.uid == caller.uid)
            if unread > self.limits.unread_per_user:
                return Error(id=request.id, code=ErrorCode.BUSY,
                             message=f"{caller.describe()} has {unread:,} bytes of answers unread on its connections "
                                     f"(at most {self.limits.unread_per_user:,}): read them, then ask again")
            records, more = await self.backend.log(request, caller)
            return LogReply(id=request.id, records=list(records), more=more)
        return await self._watch(client, request)

    def _whoami(self, caller: Caller, request: WhoAmI) -> WhoAmIReply:
        """The caller's credentials as read at connect time, the roles they give and the commands
        of each role held (the daemon's command table), like NUT's ``upscmd -l``."""
        held = [role for role in Role if role in caller.roles]
        commands = {role.value: sorted(name for name, needs in self.backend.command_roles.items() if role in needs)
                    for role in held}
        role_groups = {role.value: sorted(group_name(gid) or str(gid) for gid, gives in self.role_gids.items()
                                          if gives is role) for role in Role}
        groups = [PeerGroup(gid=gid, name=group_name(gid),
                            role=self.role_gids[gid].value if gid in self.role_gids else None)
                  for gid in sorted(caller.groups)]
        return WhoAmIReply(id=request.id, uid=caller.uid, user=caller.user, gid=caller.gid, pid=caller.pid,
                           groups=groups, roles=[role.value for role in held],
                           every_role=caller.uid in self.admin_uids, commands=commands,
                           role_groups={role: names for role, names in role_groups.items() if names})

    async def _command(self, caller: Caller, request: Command) -> msgspec.Struct:
        """A command, unless its user had too many refused this window (:class:`_RefusalBudget`).
        Every ERROR counts as a refusal."""
        refusals = self._refusals.holding_back(caller.uid)
        if refusals is not None:
            name = request.name if request.name in self.backend.command_roles else "(unknown)"
            left = self._refusals.hold_back(caller, refusals, name)
            return Error(id=request.id, code=ErrorCode.TOO_MANY_REFUSED,
                         message=f"{refusals.used} commands of {caller.describe()} refused within "
                                 f"{self.limits.refusal_window_s:g} s: none is taken for {left:.0f} s more "
                                 "(journaled as one count)")
        try:
            reply = await self._take_command(caller, request)
        except CommandKept:
            raise  # applied, its record waits for the journal: no refusal
        except Exception:
            self._refusals.refused(caller)
            raise
        if isinstance(reply, Error):
            self._refusals.refused(caller)
        return reply

    async def _take_command(self, caller: Caller, request: Command) -> msgspec.Struct:
        needs = self.backend.command_roles.get(request.name)
        if needs is None and not caller.roles:
            return _no_role(caller, request)  # refused everything: not even the names of the commands
        if needs is None:
            known = ", ".join(sorted(self.backend.command_roles))
            # the client's name is cut to a line; the list of known commands never is (it is the help)
            return Error(id=request.id, code=ErrorCode.UNKNOWN_COMMAND,
                         message=f"{one_line(f'unknown command {request.name!r}')} (known: {known})")
        if not needs & caller.roles:
            log.info("API command refused", command=request.name, needs=roles_text(needs), user=caller.user,
                     uid=caller.uid)
            await self.backend.command_refused(request.name, request.args, caller, needs)
            held = ", ".join(sorted(r.value for r in caller.roles)) or "no role"
            return Error(id=request.id, code=ErrorCode.REFUSED,
                         message=f"command {request.name!r} needs the {roles_text(needs)} role; "
                                 f"{caller.describe()} holds {held}")
        seq = await self.backend.command(request.name, request.args, caller)
        return Ack(id=request.id, seq=seq)

    async def _watch(self, client: _Client, request: Watch) -> msgspec.Struct | None:
        if not request.enable:
            client.watching = False
            client.pending = None
            self._watchers.discard(client)
            return Ack(id=request.id, seq=self._last_seq)
        if client.watching:
            return Error(id=request.id, code=ErrorCode.BAD_REQUEST,
                         message="already watching: send WATCH with enable false first")
        head = self.backend.journal_head()
        if request.since_seq is not None and request.since_seq > head:
            # the events between the head and since_seq would be skipped once journaled: no client
            # received a seq this journal has not written (another table's journal, or a typo)
            return Error(id=request.id, code=ErrorCode.BAD_REQUEST,
                         message=f"since_seq {request.since_seq} is ahead of the journal, whose last record is "
                                 f"seq {head}: give the seq of the last event received (or no since_seq, "
                                 "for live events only)")
        client.watching = True
        self._watchers.add(client)
        if request.since_seq is None:
            client.last_seq = -1
            return Ack(id=request.id, seq=self._last_seq)
        # Replay: live events wait in client.pending meanwhile; every event the journal had when
        # a read began is in the replay, every one published after WATCH is in pending, and
        # sequence numbers drop the overlap. The ACK marks the end of the replay.
        client.pending = []
        client.last_seq = request.since_seq
        try:
            replayed = await self._replay(client, request.since_seq)
        except BaseException:
            client.watching = False
            client.pending = None
            self._watchers.discard(client)
            raise
        pending, client.pending = client.pending or [], None
        # the replay reads the journal, which can be ahead of what was published (a commit whose
        # records are not published yet): the ACK names the last event the client got, not less
        through = self._last_seq if replayed is None or (self._last_seq or 0) >= replayed else replayed
        if not client.closing:
            client.send(encode_line(Ack(id=request.id, seq=through)))
        if any([client.offer_event(seq, line) for seq, line in pending]):  # a list: all offered
            self._offered.append(client)
            self._schedule_flush()
        return None

    async def _replay(self, client: _Client, since_seq: int) -> int | None:
        """Send the journal's events after ``since_seq``; the last seq read from it (None: none)."""
        chunk = self.limits.backlog_chunk
        after, last = since_seq, None
        while not client.closing:
            await client.wait_room(chunk)
            events = await self.backend.events_since(after, chunk)
            for event in events:
                client.deliver(event.seq, encode_line(event))
            if events:
                last = events[-1].seq
            if len(events) < chunk:
                return last
            after = events[-1].seq
        return last


#: how a COMMAND line that may be longer than max_line begins (its name before its args, as
#: msgspec and the API's client write a Command): a firmware_update's
_LONG_LINE_START = re.compile(rb'^\s*\{\s*"class"\s*:\s*"COMMAND"\s*,\s*"id"\s*:\s*"(?P<id>[^"\\]{0,128})"\s*,'
                              rb'\s*"name"\s*:\s*"firmware_update"\s*,')


class _LongCommand(asyncio.LimitOverrunError):
    """A line longer than ``consumed`` that begins as a firmware_update (:data:`_LONG_LINE_START`)."""

    def __init__(self, limit: int, request_id: str) -> None:
        super().__init__("a firmware_update line too long", limit)
        self.request_id = request_id


async def _read_line(reader: asyncio.StreamReader, usual: int, longest: int) -> bytes:
    """One line of at most ``usual`` bytes (the stream's own limit), newline included, or read on
    piece by piece up to ``longest`` when it begins as a firmware_update command does;
    LimitOverrunError whose ``consumed`` is the limit it passed (nothing more is read of it),
    :class:`_LongCommand` for such a firmware_update."""
    pieces: list[bytes] = []
    size, request_id = 0, ""
    while True:
        try:
            piece = await reader.readuntil(b"\n")
        except asyncio.LimitOverrunError as exc:
            if not pieces:
                piece = await reader.readexactly(exc.consumed)
                start = _LONG_LINE_START.match(piece)
                if start is None:
                    raise asyncio.LimitOverrunError("a request line too long", usual) from None
                request_id = start["id"].decode("utf-8", errors="replace")
                if len(piece) >= longest:
                    raise _LongCommand(longest, request_id) from None
            elif size + exc.consumed >= longest:
                raise _LongCommand(longest, request_id) from None
            else:
                piece = await reader.readexactly(exc.consumed)
            pieces.append(piece)
            size += len(piece)
            continue
        if size + len(piece) > longest:
            raise _LongCommand(longest, request_id)
        return b"".join([*pieces, piece]) if pieces else piece


def _tag(request: Any) -> str:
    return str(type(request).__struct_config__.tag)


def _no_role(caller: Caller, request: Watch | StateQuery | LogQuery | Command | WhoAmI) -> Error:
    """The refusal of anything a caller who holds no role asks, a command by any name included."""
    return Error(id=request.id, code=ErrorCode.REFUSED,
                 message=f"{_tag(request)} needs one of the roles dealer, supervisor, technician; "
                         f"{caller.describe()} holds none")
