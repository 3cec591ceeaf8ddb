"""The pit page's side of cardfloor's HTTP server: log-in, sessions, CSRF, the pages, the headers.

A user logs in (``POST /api/v1/login``) with a name and password of the users file
(cardd/floor/users.py) and gets a session: a cookie signed with the floor's secret key
(itsdangerous), holding who, a CSRF token, when it ends (``http.session_hours``) and a
fingerprint of the user's password hash, so a new password or a removed user ends every session
made before. A session logged out is refused from then on until it would have ended, whatever
restarts between: the archive keeps it (a digest of its token, migration 0003), and cardfloor
reads them back at its start, with the log-in failures of the last :data:`WINDOW_S` seconds
(from the audit) for the limits. The cookie is HttpOnly and SameSite=Strict; a state-changing request that comes
with it must also send the session's CSRF token as ``X-CSRF-Token`` and, when the browser says
where it comes from (``Origin``), come from this server. Log-ins are rate-limited: after
:data:`USER_FAILURES` failures for one user or :data:`ADDRESS_FAILURES` from one address within
:data:`WINDOW_S` seconds, the next try is refused with 429 and ``Retry-After`` without its
password being looked at.

The pages are static files of cardd/floor/web/ (no inline script or style, so the
Content-Security-Policy allows only this server's own files); a page asked for without a
session is a 303 to ``/login?next=<path>``. Every response carries :data:`SECURITY_HEADERS`.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import importlib.resources
import math
import secrets
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote

import msgspec
from itsdangerous import BadSignature, URLSafeSerializer
from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection, Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cardd.floor.auth import Principal
from cardd.floor.users import User, Users

COOKIE = "cardfloor_session"
CSRF_HEADER = "x-csrf-token"
#: log-in failures within WINDOW_S after which log-in is refused for a while
USER_FAILURES, ADDRESS_FAILURES, WINDOW_S = 5, 20, 300.0
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = {"content-security-policy": CSP, "x-content-type-options": "nosniff",
                    "referrer-policy": "no-referrer", "x-frame-options": "DENY"}
#: the pages: path, file of cardd/floor/web/, whether it needs a session
PAGES = (("/", "floor.html", True), ("/login", "login.html", False), ("/tables/{site}/{table}", "table.html", True),
         ("/alarms", "alarms.html", True), ("/reports", "reports.html", True))
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def web_files() -> Path:
    """cardd/floor/web/, where the package is installed."""
    return Path(str(importlib.resources.files("cardd.floor") / "web"))


class Session(NamedTuple):
    user: User
    csrf: str
    expires: dt.datetime

    def principal(self) -> Principal:
        return self.user.principal()


class _Cookie(msgspec.Struct, array_like=True):
    user: str
    generation: str
    csrf: str
    expires: float  # seconds since the epoch


class Limiter:
    """Log-in failures in the last WINDOW_S seconds, by user and by address."""

    def __init__(self) -> None:
        self._failures: dict[str, deque[float]] = {}

    def _recent(self, key: str, now: float) -> deque[float]:
        found = self._failures.setdefault(key, deque())
        while found and found[0] <= now - WINDOW_S:
            found.popleft()
        return found

    def retry_after(self, user: str, address: str, now: float) -> int | None:
        """Seconds until a log-in may be tried again, or None when it may now."""
        waits = [found[0] + WINDOW_S - now for key, limit in ((f"user:{user}", USER_FAILURES),
                                                               (f"address:{address}", ADDRESS_FAILURES))
                 if len(found := self._recent(key, now)) >= limit]
        if len(self._failures) > 100_000:  # many names tried: forget the keys with no recent failure
            self._failures = {k: v for k, v in self._failures.items() if v and v[-1] > now - WINDOW_S}
        return max(1, math.ceil(max(waits))) if waits else None

    def failed(self, user: str, address: str, now: float) -> None:
        for key in (f"user:{user}", f"address:{address}"):
            self._recent(key, now).append(now)

    def succeeded(self, user: str) -> None:
        self._failures.pop(f"user:{user}", None)

    def replay(self, log_ins: list[tuple[str, str, str | None, dt.datetime]]) -> None:
        """The log-ins the audit holds, (outcome, who, address, at) oldest first, counted again
        (a restart forgets no failure); a log-in refused by the limit was no try."""
        for outcome, who, address, at in log_ins:
            if outcome == "refused":
                self.failed(who, address or "unknown", at.timestamp())
            elif outcome == "ok":
                self.succeeded(who)


class Web:
    """The users, the session key and what the page is told of the floor."""

    def __init__(self, users: Users, secret: bytes, *, session_hours: float = 12.0, time_zone: str = "UTC",
                 target_rounds_per_hour: int = 60) -> None:
        self.users = users
        self._serializer = URLSafeSerializer(secret, salt="cardfloor-session")
        self.session_life = dt.timedelta(hours=session_hours)
        self.time_zone, self.target_rounds_per_hour = time_zone, target_rounds_per_hour
        self.limiter = Limiter()
        #: the sessions logged out before they ended (session_key), until they end
        self._ended: dict[bytes, dt.datetime] = {}

    def new_session(self, user: User, now: dt.datetime) -> tuple[str, Session]:
        """A session for ``user`` from ``now``: the cookie's value and the session."""
        session = Session(user, secrets.token_urlsafe(24), now + self.session_life)
        cookie = _Cookie(user.name, user.generation, session.csrf, session.expires.timestamp())
        return self._serializer.dumps(msgspec.to_builtins(cookie)), session

    def end(self, session: Session, now: dt.datetime) -> None:
        """Log ``session`` out: its cookie is refused from now on (the archive keeps it for the
        next run: Archive.end_session with its session_key)."""
        self._ended = {key: until for key, until in self._ended.items() if until > now}
        self._ended[session_key(session.csrf)] = session.expires

    def restore(self, ended: dict[bytes, dt.datetime], log_ins: list[tuple[str, str, str | None, dt.datetime]]) -> None:
        """What an earlier run left in the archive: the sessions logged out, the recent log-ins."""
        self._ended.update(ended)
        self.limiter.replay(log_ins)

    def session(self, cookie: str | None, now: dt.datetime) -> Session | None:
        """The session a cookie's value holds; None when there is none, it is not signed by this
        floor's key, it has ended, or its user is gone or has a new password."""
        if not cookie or len(cookie) > 4096:
            return None
        try:
            found = msgspec.convert(self._serializer.loads(cookie), _Cookie)
        except (BadSignature, msgspec.ValidationError):
            return None
        expires = dt.datetime.fromtimestamp(found.expires, dt.timezone.utc)
        if expires <= now or session_key(found.csrf) in self._ended:
            return None
        user = self.users.get(found.user)
        if user is None or not hmac.compare_digest(user.generation, found.generation):
            return None
        return Session(user, found.csrf, expires)

    def session_of(self, connection: HTTPConnection, now: dt.datetime) -> Session | None:
        return self.session(connection.cookies.get(COOKIE), now)


def session_key(csrf: str) -> bytes:
    """What the archive keeps of a session logged out: its random token's SHA-256, not the token."""
    return hashlib.sha256(csrf.encode()).digest()


def set_session_cookie(response: Response, request: Request, value: str, session: Session) -> None:
    response.set_cookie(COOKIE, value, expires=session.expires, path="/", httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")


def clear_session_cookie(response: Response, request: Request) -> None:
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict", secure=request.url.scheme == "https")


def same_origin(connection: HTTPConnection) -> bool:
    """Whether the request's Origin, when it has one, is this server (scheme and host as asked)."""
    origin = connection.headers.get("origin")
    if origin is None:
        return True
    return origin == f"{connection.url.scheme}://{connection.headers.get('host', '')}"


def csrf_ok(connection: HTTPConnection, session: Session) -> bool:
    given = connection.headers.get(CSRF_HEADER, "")
    return hmac.compare_digest(given.encode("utf-8", "replace"), session.csrf.encode())


def page_routes(web: Web | None, clock: Callable[[], dt.datetime]) -> list[BaseRoute]:
    """The pages and /static; without users (no http.users_file) there are none."""
    if web is None:
        return []
    folder = web_files()

    def page(name: str, needs_session: bool) -> Callable[[Request], Response]:
        def answer(request: Request) -> Response:
            if needs_session and web.session_of(request, clock()) is None:
                path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(f"/login?next={quote(path, safe='')}", status_code=303)
            return FileResponse(folder / name, media_type="text/html; charset=utf-8",
                                headers={"Cache-Control": "no-store"})
        return answer

    routes: list[BaseRoute] = [Route(path, page(name, needed), methods=["GET"], name=f"page:{name}")
                               for path, name, needed in PAGES]
    routes.append(Mount("/static", StaticFiles(directory=folder, follow_symlink=False), name="static"))
    return routes


class SecurityHeaders:
    """Every response: the Content-Security-Policy and its fellows; no caching but of /static."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cached = scope["path"].startswith("/static/")

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
                if not cached:
                    headers["cache-control"] = "no-store"
            await send(message)

        await self.app(scope, receive, sending)
