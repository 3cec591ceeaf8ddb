"""A client of the local API: what cardctl, the bench and a dealer console use to talk to cardd.
Blocking and small on purpose; every request gets one reply, and the errors a person meets first
are typed, one line each (docs/architecture.md, "The API client and messages")."""
from __future__ import annotations

import errno
import itertools
import os
import select
import socket
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec

from cardd.api.errors import ApiError
from cardd.api.paths import DEFAULT_SOCKET
from cardd.api.protocol import (
    PROTOCOL_VERSION, Ack, Command, Disconnect, Error, ApiEvent, LogQuery, LogReply, StateQuery, StateReply, Version,
    Watch, WhoAmI, WhoAmIReply, encode_line, reply_decoder,
)
from core.parse_errors import json_line_problem
from core.schema_errors import schema_problem


#: the longest line a client accepts from the daemon (a LOG page of 10,000 records fits)
MAX_REPLY_LINE = 64 * 1024 * 1024
#: how long a client without a timeout of its own (a verify, a watch, a follow) waits for the
#: VERSION line the daemon sends on accepting: a socket that is not cardd's may never say anything
GREETING_TIMEOUT_S = 10.0


class ClientError(ApiError):
    """The daemon could not be reached or answered something a client cannot use."""


class DaemonNotRunning(ClientError):
    """Nobody listens on the socket."""


class SocketPermissionDenied(ClientError):
    """The socket exists but this user may not open it."""


class ConnectionClosed(ClientError):
    """The daemon closed the connection (stopped, or dropped a watcher that fell behind)."""


class TextNotUtf8(ClientError):
    """A text of the request holds bytes that are not UTF-8 (an argument typed on a terminal in another
    encoding reaches Python as surrogates): nothing is sent."""


class StateTimeout(ClientError):
    """:meth:`ApiClient.wait_state` gave up; ``state`` is the last STATE it read."""

    def __init__(self, message: str, state: dict[str, Any]) -> None:
        super().__init__(message)
        self.state = state


class CommandRefused(ClientError):
    """The daemon answered ERROR: ``code`` is the stable code (docs/api.md), the text its one line."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class ApiClient:
    """One connection to cardd's API socket."""

    def __init__(self, path: str | Path = DEFAULT_SOCKET, timeout: float | None = 10.0, pace_s: float = 0.0) -> None:
        """``pace_s``: the least time between two requests, for a client that must stay under the
        daemon's per-connection rate limit (a scripted console or the bench)."""
        self.path = Path(path)
        self.pace_s, self._last_request = pace_s, 0.0
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(GREETING_TIMEOUT_S if timeout is None else timeout)
        try:
            self._sock.connect(str(self.path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            self._sock.close()
            if self.path.exists() and not stat.S_ISSOCK(self.path.stat().st_mode):  # a mistyped --socket
                raise ClientError(f"{self.path}: not a socket (cardd's API socket is {DEFAULT_SOCKET}; "
                                  "--socket or CARDD_SOCKET names another)") from exc
            if self.path == DEFAULT_SOCKET:  # the installed daemon's: systemd starts it
                raise DaemonNotRunning(f"{self.path}: cardd is not running (start it: sudo systemctl start cardd)") \
                    from exc
            # another socket (a cardd --simulate's, a test's): systemd's cardd would not listen there
            raise DaemonNotRunning(f"{self.path}: cardd is not running on this socket, the one tried (not the "
                                   f"installed daemon's {DEFAULT_SOCKET}; a cardd --simulate prints its socket as it "
                                   "starts)") from exc
        except PermissionError as exc:
            self._sock.close()
            raise SocketPermissionDenied(f"{self.path}: permission denied: join the API group and a role group "
                                         "(sudo usermod -aG cardd-api,cardd-dealer $USER), then log in again") from exc
        except OSError as exc:
            self._sock.close()
            raise ClientError(f"{self.path}: cannot connect: {errno.errorcode.get(exc.errno or 0, exc)}") from exc
        self._stream = self._sock.makefile("rb")
        self._ids = itertools.count(1)
        self.pending_events: list[ApiEvent] = []
        try:
            self.version = self._greeting(timeout)
        except BaseException:
            self.close()  # the stream and the socket: the descriptor stays open while either does
            raise

    def _greeting(self, timeout: float | None) -> Version:
        """The daemon's first line, its VERSION; a ClientError saying why not."""
        try:
            first = self._read()
        except ConnectionClosed:
            raise
        except ClientError as exc:  # silence or a line that is no API's: perhaps not cardd at all
            raise ClientError(f"{exc} (is {self.path} cardd's API socket?)") from exc
        self._sock.settimeout(timeout)
        if isinstance(first, Error):  # busy (every connection taken) or refused at the door: its own words
            raise ClientError(f"{self.path}: the daemon refused the connection ({first.code}): {first.message}")
        if not isinstance(first, Version):
            raise ClientError(f"{self.path}: the daemon did not start with VERSION (got {first.__struct_config__.tag}; "
                              f"is {self.path} cardd's API socket?)")
        if first.protocol.split(".")[0] != PROTOCOL_VERSION.split(".")[0]:
            raise ClientError(f"{self.path}: the daemon speaks API {first.protocol}, this client {PROTOCOL_VERSION}")
        return first

    # ---- lines ----------------------------------------------------------------------------

    def _read(self) -> Version | ApiEvent | StateReply | LogReply | Ack | Error | WhoAmIReply | Disconnect:
        try:
            line = self._stream.readline(MAX_REPLY_LINE)
        except TimeoutError as exc:
            raise ClientError(f"{self.path}: no answer from cardd within {self._sock.gettimeout()} s") from exc
        except OSError as exc:
            raise ConnectionClosed(f"{self.path}: connection lost: {exc}") from exc
        if not line:
            raise ConnectionClosed(f"{self.path}: cardd closed the connection")
        try:
            message = reply_decoder.decode(line)
        except msgspec.ValidationError as exc:  # JSON, but no reply of this protocol (a newer daemon's?)
            raise ClientError(f"{self.path}: cardd sent a line this client cannot read: "
                              f"{schema_problem(exc).sentence()}") from exc
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # the latter: msgspec before 0.23, bad UTF-8
            syntax = json_line_problem(line)
            why = f"{syntax.what} (byte {syntax.byte})" if syntax.what and syntax.byte is not None else \
                syntax.what or "not JSON"
            raise ClientError(f"{self.path}: cardd sent a line this client cannot read: {why}") from exc
        if isinstance(message, Disconnect):
            raise ConnectionClosed(f"{self.path}: cardd dropped this connection ({message.code}): {message.message}")
        return message

    def _send(self, message: msgspec.Struct) -> None:
        if self.pace_s:
            wait = self._last_request + self.pace_s - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self._last_request = time.monotonic()
        try:
            line = encode_line(message)
        except UnicodeEncodeError as exc:  # msgspec refuses a surrogate: the API carries UTF-8 text only
            raise TextNotUtf8(f"{exc.object!r} is not UTF-8 text (a terminal set to another encoding?): "
                              "not sent") from None
        try:
            self._sock.sendall(line)
        except OSError as exc:
            raise ConnectionClosed(f"{self.path}: connection lost: {exc}") from exc

    def _next_id(self) -> str:
        return f"c{next(self._ids)}"

    def _reply(self, request_id: str) -> (Version | ApiEvent | StateReply | LogReply | Ack | Error | WhoAmIReply
                                          | Disconnect):
        """The reply to ``request_id``; EVENT lines before it are kept in ``pending_events``."""
        while True:
            message = self._read()
            if isinstance(message, ApiEvent):
                self.pending_events.append(message)
            elif getattr(message, "id", None) == request_id or (isinstance(message, Error) and message.id is None):
                if isinstance(message, Error):
                    raise CommandRefused(message.code, message.message)
                return message

    # ---- requests -------------------------------------------------------------------------

    def command(self, name: str, **args: Any) -> Ack:
        """Run a command; its ACK (``seq``: the journal record it made), or :class:`CommandRefused`."""
        request_id = self._next_id()
        self._send(Command(id=request_id, name=name, args=args))
        reply = self._reply(request_id)
        if not isinstance(reply, Ack):
            raise ClientError(f"{self.path}: {name}: expected ACK, got {type(reply).__name__}")
        return reply

    def state(self) -> dict[str, Any]:
        request_id = self._next_id()
        self._send(StateQuery(id=request_id))
        reply = self._reply(request_id)
        if not isinstance(reply, StateReply):
            raise ClientError(f"{self.path}: STATE: got {type(reply).__name__}")
        return reply.state

    def whoami(self) -> WhoAmIReply:
        """Who the daemon sees on this connection, its roles and their commands (protocol 1.1)."""
        major, _, minor = self.version.protocol.partition(".")
        if major == PROTOCOL_VERSION.split(".")[0] and minor.isdigit() and int(minor) < 1:
            raise ClientError(f"{self.path}: the daemon speaks API {self.version.protocol}, which has no WHOAMI "
                              "(1.1 or later): upgrade cardd")
        request_id = self._next_id()
        self._send(WhoAmI(id=request_id))
        reply = self._reply(request_id)
        if not isinstance(reply, WhoAmIReply):
            raise ClientError(f"{self.path}: WHOAMI: got {type(reply).__name__}")
        return reply

    def wait_state(self, check: Callable[[dict[str, Any]], bool], timeout: float = 30.0,
                   poll_s: float = 0.0) -> dict[str, Any]:
        """Read STATE until ``check`` holds (the state then), or :class:`StateTimeout` after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.state()
            if check(state):
                return state
            if time.monotonic() > deadline:
                raise StateTimeout(f"{self.path}: the table never got there within {timeout:g} s", state)
            time.sleep(poll_s)

    def log(self, **filters: Any) -> LogReply:
        """One page of the journal; ``filters`` are LogQuery's fields (docs/api.md)."""
        request_id = self._next_id()
        try:
            query = msgspec.convert({"id": request_id, **filters}, LogQuery)
        except msgspec.ValidationError as exc:
            raise ClientError(f"log query: {schema_problem(exc).sentence()}") from exc
        self._send(query)
        reply = self._reply(request_id)
        if not isinstance(reply, LogReply):
            raise ClientError(f"{self.path}: LOG: got {type(reply).__name__}")
        return reply

    def watch(self, since_seq: int | None = None, hangup_fd: int | None = None) -> Iterator[ApiEvent]:
        """Every event from ``since_seq`` (exclusive) on, then live ones, until the connection ends.

        ``hangup_fd`` (the watcher's stdout): while waiting for the next event, also watch it, and
        raise BrokenPipeError when it reports a hang-up or error — a pipe whose reader went away,
        which a quiet table would otherwise reveal only at the next write, hours later."""
        for event in self.watch_waking(since_seq, hangup_fd):
            if event is not None:
                yield event

    def watch_waking(self, since_seq: int | None = None, hangup_fd: int | None = None,
                     wake_fd: int | None = None) -> Iterator[ApiEvent | None]:
        """:meth:`watch`, and None each time ``wake_fd`` (a signal's wakeup pipe, non-blocking) can
        be read while it waits for an event: a view redraws then (a terminal resized), with no
        event to wait for."""
        request_id = self._next_id()
        self._send(Watch(id=request_id, enable=True, since_seq=since_seq))
        self._reply(request_id)  # the replayed events come before the ACK
        while True:
            while self.pending_events:
                yield self.pending_events.pop(0)
            if (hangup_fd is not None or wake_fd is not None) and self._wait_for_line(hangup_fd, wake_fd):
                yield None
                continue
            message = self._read()
            if isinstance(message, ApiEvent):
                yield message

    def _wait_for_line(self, hangup_fd: int | None, wake_fd: int | None = None) -> bool:
        """Return once a line can be read (or the socket ends): False; True if ``wake_fd`` can be read
        first (what it holds is read); BrokenPipeError if ``hangup_fd`` hangs up first."""
        if self._buffered():
            return False
        poller = select.poll()
        poller.register(self._sock.fileno(), select.POLLIN)
        if hangup_fd is not None:
            poller.register(hangup_fd, 0)  # POLLERR, POLLHUP and POLLNVAL are always reported
        if wake_fd is not None:
            poller.register(wake_fd, select.POLLIN)
        timeout = self._sock.gettimeout()
        ready = dict(poller.poll(None if timeout is None else timeout * 1000))
        if hangup_fd is not None and hangup_fd in ready:
            raise BrokenPipeError(errno.EPIPE, f"descriptor {hangup_fd} hung up")
        if wake_fd is not None and wake_fd in ready:
            try:
                while os.read(wake_fd, 512):
                    pass
            except BlockingIOError:
                pass
            return True
        return False  # the socket has something (or the wait timed out): the read that follows takes it

    def _buffered(self) -> bool:
        """Whether the stream holds bytes already, or the socket has some: a peek with the socket
        non-blocking for a moment, so it never waits."""
        timeout = self._sock.gettimeout()
        self._sock.settimeout(0.0)
        try:
            return bool(self._stream.peek(1))
        except OSError:
            return True  # the read that follows reports it
        finally:
            self._sock.settimeout(timeout)

    def close(self) -> None:
        self._stream.close()
        self._sock.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
