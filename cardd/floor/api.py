"""cardfloor's HTTP JSON API and live stream (docs/floor-service.md, "HTTP API").

:func:`build_app` makes the Starlette application; it reads the archive and the hub only
(acknowledging a floor alarm is its one write; the audit of log-ins and acknowledgements the
other). Every request under /api/v1 but the log-in needs a bearer token (cardd/floor/auth.py)
or a session cookie (cardd/floor/web.py): :class:`_Guard` refuses, before any route is looked
at, a request with neither, and a state-changing one with a session but not its CSRF token, so
no route can be left open. Both give the same :class:`Principal`; a pit user's answers, the
event stream's included, hold only its pits' tables and their alarms (another pit's table is
404 to it, as one that does not exist). :data:`ENDPOINTS` is the one table of
routes: the app is built from it and docs/floor-openapi.json is written from it
(cardd/floor/openapi.py). Responses are msgspec Structs (cardd/floor/views.py) encoded to
JSON; every refusal is ``{"error": "one sentence"}`` in our words. What tables and people
sent (names, messages, reasons) is JSON data in a response, never markup or a header.
"""
from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NamedTuple, TypeVar

import msgspec
import structlog
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from cardd.floor import reports
from cardd.floor.archive import Archive, ArchiveUnavailable, FloorAlarm, TableRow, record_time, time_text
from cardd.floor.auth import ACKNOWLEDGERS, AUDITORS, CHALLENGE, Auth, Principal
from cardd.floor.contract import State, Status
from cardd.floor.stream import FLOOR_WIDE, KINDS, Hub
from cardd.floor.views import (MAX_DAYS, AckBody, AlarmsQuery, AlarmsView, AlarmView, AuditEntryView, AuditQuery,
                               AuditView, BrokerView, DailyQuery,
                               DeviceView, Error, FloorView, HourlyQuery, LoginBody, RecordsQuery, RecordsView,
                               RecordView, ReportView, SessionView, ShoeView, SnapshotView, StreamQuery, TableAlarmView,
                               TableDetail,
                               TablePath, TableView)
from cardd.floor.web import (STATE_CHANGING, SecurityHeaders, Session, Web, clear_session_cookie, csrf_ok,
                             page_routes, same_origin, session_key, set_session_cookie)
from core.schema_errors import ProblemKind, schema_problem

PREFIX = "/api/v1"
#: the largest request body taken (an acknowledgement's note is at most 500 characters)
MAX_BODY = 16 * 1024
#: how often the stream sends a comment when nothing changes, so proxies keep it open
PING_S = 15.0
#: the most changes the stream writes at once (a client resuming far back gets several writes)
STREAM_WRITE_MAX = 200
T = TypeVar("T")
#: a table's pit, by (site, table)
PitOf = dict[tuple[str, str], str]
log = structlog.get_logger(__name__)


class Endpoint(NamedTuple):
    """One route: the app and the OpenAPI document are both made from these."""
    method: str
    path: str                   # under PREFIX, with {parameters}
    name: str
    summary: str
    response: type[Any] | None  # the JSON body of a 200 (None: the event stream)
    query: type[Any] | None = None
    body: type[Any] | None = None
    roles: frozenset[str] | None = None  # who may (None: every role)
    csv: bool = False           # ?format=csv answers text/csv
    not_found: bool = False     # may answer 404 (a table or alarm not known)
    public: bool = False        # needs no token nor session (the log-in)


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("POST", "/login", "login", "Log in with a user's name and password: a session cookie",
             SessionView, body=LoginBody, public=True),
    Endpoint("POST", "/logout", "logout", "End the session (its cookie cleared)", None),
    Endpoint("GET", "/session", "session", "Who the session cookie is of, and its CSRF token", SessionView),
    Endpoint("GET", "/floor", "floor", "Every table: online, devices, shoe, rounds, alarms, backlog, clock",
             FloorView),
    Endpoint("GET", "/tables/{site}/{table}", "table", "One table, its gaps and its open floor alarms",
             TableDetail, not_found=True),
    Endpoint("GET", "/tables/{site}/{table}/records", "records", "A table's records as archived, newest first",
             RecordsView, query=RecordsQuery, not_found=True),
    Endpoint("GET", "/alarms", "alarms", "Floor alarms, the newest raised first", AlarmsView, query=AlarmsQuery),
    Endpoint("POST", "/alarms/{alarm_id}/ack", "ack", "Acknowledge a floor alarm (pit and admin)", AlarmView,
             body=AckBody, roles=ACKNOWLEDGERS, not_found=True),
    Endpoint("GET", "/reports/hourly", "hourly", "Per table per hour of a day (UTC)", ReportView,
             query=HourlyQuery, csv=True),
    Endpoint("GET", "/reports/daily", "daily", "Per table per day, from one day to another (UTC)", ReportView,
             query=DailyQuery, csv=True),
    Endpoint("GET", "/audit", "audit", "The audit: log-ins, log-outs and acknowledgements, the newest first (admin)",
             AuditView, query=AuditQuery, roles=AUDITORS, csv=True),
    Endpoint("GET", "/stream", "stream", "Server-sent events: each change, after a snapshot when needed", None,
             query=StreamQuery),
)

_ENCODER = msgspec.json.Encoder()


class Refused(Exception):
    """A request refused: its status and one sentence."""

    def __init__(self, status: int, sentence: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(sentence)
        self.status, self.sentence, self.headers = status, sentence, headers


def json_response(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(_ENCODER.encode(value), status_code=status, media_type="application/json", headers=headers)


def error_response(status: int, sentence: str, headers: dict[str, str] | None = None) -> Response:
    return json_response(Error(sentence), status, headers)


class _Guard:
    """Every request under /api/v1 (but the log-in) needs a known bearer token or a session
    cookie, and with the cookie a state-changing one needs the session's CSRF token and, when it
    says where it comes from, this server's Origin. The Principal (and the session) go in the
    request's state. The pages and /static are the page routes' (cardd/floor/web.py)."""

    def __init__(self, app: ASGIApp, auth: Auth, web: Web | None, clock: Callable[[], dt.datetime]) -> None:
        self.app, self.auth, self.web, self.clock = app, auth, web, clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (self.web is not None and not scope["path"].startswith(PREFIX + "/")
                                       and scope["path"] != PREFIX) or scope["path"] == PREFIX + "/login":
            await self.app(scope, receive, send)
            return
        header = Headers(scope=scope).get("authorization")
        who = self.auth.check(header)
        session: Session | None = None
        if who is None and header is None and self.web is not None:
            connection = Request(scope)
            session = self.web.session_of(connection, self.clock())
            if session is not None:
                if scope["method"] in STATE_CHANGING and not same_origin(connection):
                    await error_response(403, "this request comes from another site (its Origin is not this "
                                              "server)")(scope, receive, send)
                    return
                if scope["method"] in STATE_CHANGING and not csrf_ok(connection, session):
                    await error_response(403, "this request needs the session's X-CSRF-Token header (from "
                                              f"GET {PREFIX}/session)")(scope, receive, send)
                    return
                who = session.principal()
            elif "cardfloor_session" in connection.cookies:
                await error_response(401, "the session has ended or is not valid: log in again",
                                     {"WWW-Authenticate": CHALLENGE})(scope, receive, send)
                return
        if who is None:
            if header is None:
                response = error_response(401, "this API needs a token: send `Authorization: Bearer <token>`",
                                          {"WWW-Authenticate": CHALLENGE})
            else:
                response = error_response(401, "the token is not known (or not a bearer token)",
                                          {"WWW-Authenticate": f'{CHALLENGE}, error="invalid_token"'})
            await response(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state["principal"], state["session"] = who, session
        await self.app(scope, receive, send)


def principal(request: Request) -> Principal:
    who: Principal = request.state.principal
    return who


def parse_query(request: Request, kind: type[T]) -> T:
    """The query string as ``kind``, or a 400 saying what is wrong in our words."""
    given: dict[str, str] = {}
    for key, value in request.query_params.multi_items():
        if key in given:
            raise Refused(400, f"the query parameter {key[:64]!r} is given twice")
        given[key] = value
    return _convert(given, kind, "query parameter")


def _convert(given: Any, kind: type[T], what: str) -> T:
    try:
        return msgspec.convert(given, kind, strict=False)
    except msgspec.ValidationError as exc:
        problem = schema_problem(exc, schema=kind, data=given)
        if problem.kind is ProblemKind.UNKNOWN_FIELD and problem.field is not None:
            raise Refused(400, f"unknown {what} {problem.field[:64]!r}") from None
        if problem.kind is ProblemKind.MISSING_FIELD and problem.field is not None:
            raise Refused(400, f"the {what} {problem.field!r} is missing") from None
        raise Refused(400, f"{what} {problem.sentence()}") from None


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _age(moment: dt.datetime, now: dt.datetime) -> float:
    return round(max(0.0, (now - moment).total_seconds()), 3)


def visible(who: Principal, pit_of: PitOf, site: Any, table: Any) -> bool:
    """Whether ``who`` may see the table (site, table): every one, or one in their pits."""
    return who.pits is None or pit_of.get((site, table)) in who.pits


def stream_kinds(given: str | None) -> frozenset[str]:
    """The kinds of change a stream sends: those ``given`` (comma-separated), every kind when
    none is; the floor-wide ones always."""
    if given is None:
        return frozenset(KINDS)
    names = [name.strip() for name in given.split(",") if name.strip()]
    strange = [name for name in names if name not in KINDS]
    if strange:
        raise Refused(400, f"query parameter kinds: {strange[0][:64]!r} is not a kind of change: the kinds are "
                           f"{', '.join(KINDS)}")
    return frozenset(names) | FLOOR_WIDE


def client_address(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def table_view(row: TableRow, rounds: tuple[int, int], open_alarms: int, now: dt.datetime,
               pit: str | None = None) -> TableView:
    """A table's summary from its row in the archive. The table's times (an alarm's since, the
    state's time) are on its own clock: its clock offset is taken off before ages are told."""
    state = None if row.state is None else msgspec.convert(row.state, State)
    offset = dt.timedelta(seconds=row.clock_offset_s or 0.0)
    alarms: list[TableAlarmView] = []
    backlog = backlog_age = None
    if state is not None:
        alarms = [TableAlarmView(a.reason, a.since, None if a.since is None else _age(record_time(a.since) - offset, now))
                  for a in state.alarms]
        backlog = state.export.backlog
        if state.export.backlog and state.export.oldest_undelivered_s is not None:
            backlog_age = round(state.export.oldest_undelivered_s + _age(record_time(state.time) - offset, now), 3)
    return TableView(
        site=row.site, table=row.table, online=bool(row.online), session=row.session or 0,
        last_seen=None if row.last_seen is None else time_text(row.last_seen),
        devices=[] if state is None else [DeviceView(d.role, d.state, d.connected) for d in state.devices],
        shoe=None if state is None or state.shoe is None else ShoeView(state.shoe.state, state.shoe.penetration),
        rounds_this_hour=rounds[0], rounds_today=rounds[1], alarms=alarms, backlog=backlog,
        backlog_age_s=backlog_age, clock_offset_s=row.clock_offset_s, head_seq=row.head_seq or None,
        open_floor_alarms=open_alarms, pit=pit)


def alarm_view(alarm: FloorAlarm, now: dt.datetime) -> AlarmView:
    return AlarmView(
        id=alarm.id, site=alarm.site, table=alarm.table, kind=alarm.kind, key=alarm.key, detail=alarm.detail,
        state=alarm.state,  # type: ignore[arg-type]  # the archive's states are AlarmState's
        raised_at=time_text(alarm.raised_at), age_s=_age(alarm.raised_at, now),
        cleared_at=None if alarm.cleared_at is None else time_text(alarm.cleared_at),
        acknowledged_at=None if alarm.acked_at is None else time_text(alarm.acked_at),
        acknowledged_by=alarm.acked_by, note=alarm.note)


async def floor_view(archive: Archive, now: dt.datetime, who: Principal, pit_of: PitOf | None = None,
                     target_rounds_per_hour: int = 60, broker: BrokerView | None = None) -> FloorView:
    """The tables ``who`` may see, and the floor's link to the broker."""
    pits = pit_of or {}
    rows = [row for row in await archive.tables() if visible(who, pits, row.site, row.table)]
    rounds, open_alarms = await reports.floor_counts(archive, now)
    tables = [table_view(row, rounds.get((row.site, row.table), (0, 0)), open_alarms.get((row.site, row.table), 0),
                         now, pits.get((row.site, row.table))) for row in rows]
    return FloorView(time=time_text(now), tables=tables,
                     open_floor_alarms=sum(n for key, n in open_alarms.items() if visible(who, pits, *key)),
                     target_rounds_per_hour=target_rounds_per_hour, broker=broker)


def build_app(archive: Archive, hub: Hub, auth: Auth, *, clock: Callable[[], dt.datetime] = _utc_now,
              ping_s: float = PING_S, web: Web | None = None, pit_of: PitOf | None = None,
              target_rounds_per_hour: int = 60, broker_link: Callable[[], BrokerView] | None = None) -> Starlette:
    """The API on ``archive`` and ``hub``, each request checked by ``auth`` or, with ``web``
    (users), a session; the pages too with ``web``. ``pit_of``: each table's pit;
    ``broker_link``: the floor's link to the broker now (the service's receiver)."""
    pits: PitOf = dict(pit_of or {})

    async def the_floor(who: Principal) -> FloorView:
        return await floor_view(archive, clock(), who, pits, target_rounds_per_hour,
                                None if broker_link is None else broker_link())

    def among(who: Principal) -> list[tuple[str, str]] | None:
        """The tables a pit user may see (None: every table)."""
        return None if who.pits is None else [key for key, pit in pits.items() if pit in who.pits]

    async def floor(request: Request) -> Response:
        return json_response(await the_floor(principal(request)))

    def session_view(session: Session) -> SessionView:
        user = session.user
        return SessionView(user=user.name, role=user.role, pits=list(user.pits), csrf=session.csrf,
                           expires=time_text(session.expires), time_zone=web.time_zone if web else "UTC",
                           target_rounds_per_hour=target_rounds_per_hour)

    async def login(request: Request) -> Response:
        if web is None:
            raise Refused(404, "log-in is off: the configuration has no http.users_file")
        if request.headers.get("x-requested-with") != "cardfloor":
            raise Refused(403, "a log-in needs the header X-Requested-With: cardfloor (the pit page sends it)")
        if not same_origin(request):
            raise Refused(403, "this request comes from another site (its Origin is not this server)")
        body = await _body(request)
        try:
            given = msgspec.json.decode(body)
        except msgspec.DecodeError:
            raise Refused(400, 'the body is not JSON: send {"user": "...", "password": "..."}') from None
        form = _convert(given, LoginBody, "field")
        now, address = clock(), client_address(request)
        wait = web.limiter.retry_after(form.user, address, now.timestamp())
        if wait is not None:
            await _audit("login", "limited", form.user, now, address)
            raise Refused(429, f"too many failed log-ins: try again in {wait} s", {"Retry-After": str(wait)})
        user = await asyncio.to_thread(web.users.check, form.user, form.password)
        if user is None:
            web.limiter.failed(form.user, address, now.timestamp())
            await _audit("login", "refused", form.user, now, address)
            raise Refused(401, "wrong user or password")
        web.limiter.succeeded(form.user)
        await _audit("login", "ok", user.name, now, address)
        cookie, session = web.new_session(user, now)
        response = json_response(session_view(session))
        set_session_cookie(response, request, cookie, session)
        return response

    async def logout(request: Request) -> Response:
        session: Session | None = request.state.session
        response = Response(status_code=204)
        if session is not None:
            now = clock()
            if web is not None:  # kept first: a logout the archive did not take is a 503, tried again
                await archive.end_session(session_key(session.csrf), session.expires, now)
                web.end(session, now)
            await _audit("logout", "ok", session.user.name, now, client_address(request))
            clear_session_cookie(response, request)
        return response

    async def session(request: Request) -> Response:
        found: Session | None = request.state.session
        if found is None:
            raise Refused(401, "no session: log in (a token has none)")
        return json_response(session_view(found))

    async def _audit(action: str, outcome: str, who: str, at: dt.datetime, address: str | None,
                     alarm_id: int | None = None, detail: str = "") -> None:
        log.info(f"floor_{action}", outcome=outcome, user=who[:256], address=address, alarm=alarm_id)
        await archive.audit(action, outcome, who, at, address=address, alarm_id=alarm_id, detail=detail)

    async def _table_row(request: Request) -> TableRow:
        where = _convert(dict(request.path_params), TablePath, "path parameter")
        row = await archive.table(where.site, where.table)
        if row is None or not visible(principal(request), pits, row.site, row.table):
            raise Refused(404, f"no table {where.site}/{where.table} is known to the floor")
        return row

    async def table(request: Request) -> Response:
        row = await _table_row(request)
        now = clock()
        rounds, open_alarms = await reports.floor_counts(archive, now)
        key = (row.site, row.table)
        status = None if row.status is None else msgspec.convert(row.status, Status)
        alarms = [a for state in ("open", "acknowledged")
                  for a in await archive.alarms(state=state, site=row.site, table=row.table)]
        return json_response(TableDetail(
            table=table_view(row, rounds.get(key, (0, 0)), open_alarms.get(key, 0), now, pits.get(key)),
            release=None if status is None else status.release, rules=None if status is None else status.rules,
            device_urls=[] if status is None or status.devices is None else status.devices,
            gaps=await archive.gaps(row.site, row.table),
            alarms=sorted((alarm_view(a, now) for a in alarms), key=lambda a: -a.id)))

    async def records(request: Request) -> Response:
        query = parse_query(request, RecordsQuery)
        row = await _table_row(request)
        found = await archive.recent_records(row.site, row.table, limit=query.limit + 1, before_seq=query.before_seq)
        shown = found[:query.limit]
        return json_response(RecordsView(
            site=row.site, table=row.table,
            records=[RecordView(seq=r.seq, time=r.time, kind=r.kind, source=r.source, reason=r.reason,
                                severity=r.severity, who=r.who, round=r.round, message=r.message, data=r.data,
                                prev=r.prev, hash=r.hash, replay=r.replay, received_at=time_text(r.received_at))
                     for r in shown],
            next_before_seq=shown[-1].seq if len(found) > query.limit else None))

    async def alarms(request: Request) -> Response:
        query = parse_query(request, AlarmsQuery)
        found = await archive.alarms(state=query.state, site=query.site, table=query.table, kind=query.kind,
                                     limit=query.limit, among=among(principal(request)))
        now = clock()
        return json_response(AlarmsView([alarm_view(a, now) for a in found]))

    async def ack(request: Request) -> Response:
        who = principal(request)
        if who.role not in ACKNOWLEDGERS:
            raise Refused(403, f"the {who.role} role may not acknowledge an alarm: "
                               f"only {' and '.join(sorted(ACKNOWLEDGERS))} may")
        text = request.path_params["alarm_id"]
        if not text.isdigit() or len(text) > 18:
            raise Refused(400, "an alarm's id is a whole number")
        body = await _body(request)
        try:
            given = msgspec.json.decode(body) if body else {}
        except msgspec.DecodeError:
            raise Refused(400, "the body is not JSON: send {\"note\": \"...\"}") from None
        note = _convert(given, AckBody, "field").note
        now = clock()
        known = await archive.alarm(int(text))
        if known is None or not visible(who, pits, known.site, known.table):
            raise Refused(404, f"no floor alarm {int(text)}")
        alarm = await archive.acknowledge(int(text), who.name, note, now)
        if alarm is None:
            raise Refused(404, f"no floor alarm {int(text)}")
        await _audit("acknowledge", "ok", who.name, now, client_address(request), alarm.id, note)
        view = alarm_view(alarm, now)
        hub.publish("alarm", msgspec.to_builtins(view))
        return json_response(view)

    async def hourly(request: Request) -> Response:
        query = parse_query(request, HourlyQuery)
        return await _report(principal(request), query.format, "hour", query.day, query.day, query.site, query.table)

    async def daily(request: Request) -> Response:
        query = parse_query(request, DailyQuery)
        if query.first > query.last:
            raise Refused(400, f"from ({query.first}) is after to ({query.last})")
        if (query.last - query.first).days >= MAX_DAYS:
            raise Refused(400, f"a daily report covers at most {MAX_DAYS} days")
        return await _report(principal(request), query.format, "day", query.first, query.last, query.site,
                             query.table)

    async def _report(who: Principal, form: str, period: reports.Period, first: dt.date, last: dt.date,
                      site: str | None, table: str | None) -> Response:
        rows = [row for row in await reports.report(archive, period, first, last, now=clock(), site=site, table=table)
                if visible(who, pits, row.site, row.table)]
        if form == "csv":
            return Response(reports.to_csv(rows), media_type="text/csv; charset=utf-8")
        return json_response(ReportView(period=period, first=first, last=last, rows=rows))

    async def audit(request: Request) -> Response:
        who = principal(request)
        if who.role not in AUDITORS:
            raise Refused(403, f"the {who.role} role may not read the audit: only {' and '.join(sorted(AUDITORS))} may")
        query = parse_query(request, AuditQuery)
        found = await archive.audit_entries(who=query.who, action=query.action, before_id=query.before_id,
                                            limit=query.limit + 1)
        entries = [AuditEntryView(id=e.id, at=time_text(e.at), action=e.action,  # type: ignore[arg-type]
                                  outcome=e.outcome, who=e.who, address=e.address,  # type: ignore[arg-type]
                                  alarm_id=e.alarm_id, detail=e.detail) for e in found[:query.limit]]
        if query.format == "csv":
            return Response(reports.audit_csv(entries), media_type="text/csv; charset=utf-8")
        return json_response(AuditView(entries, entries[-1].id if len(found) > query.limit else None))

    async def stream(request: Request) -> Response:
        given = request.headers.get("last-event-id", "")
        last_id = int(given) if given.isdigit() and len(given) <= 18 else None
        found: Session | None = request.state.session
        wanted = stream_kinds(parse_query(request, StreamQuery).kinds)
        return EventSourceResponse(_events(principal(request), last_id, None if found is None else found.expires,
                                           wanted), ping=ping_s)

    async def _events(who: Principal, last_id: int | None, until: dt.datetime | None,
                      wanted: frozenset[str]) -> AsyncIterator[ServerSentEvent | bytes]:
        """The stream's events of the kinds ``wanted``; a session's stream ends when the session
        does (the page logs in again)."""
        last = last_id
        while until is None or clock() < until:
            changes = hub.since(last)
            if changes is None:
                # the snapshot is read after its id is taken: a change meanwhile is sent after it too
                mark = hub.last_id
                now = clock()
                open_alarms = [a for state in ("open", "acknowledged")
                               for a in await archive.alarms(state=state, among=among(who))]
                snapshot = SnapshotView(await the_floor(who), [alarm_view(a, now) for a in open_alarms])
                yield ServerSentEvent(_ENCODER.encode(snapshot).decode(), event="snapshot", id=str(mark))
                last = mark
                continue
            if not changes:
                assert last is not None  # since() gives a list for a known id only
                changes = await hub.wait(last, ping_s)
            # the changes since the last wake-up in one write (a few at a time): with a thousand
            # tables a client gets hundreds a second, and each write costs the same small or large
            for start in range(0, len(changes), STREAM_WRITE_MAX):
                batch = changes[start:start + STREAM_WRITE_MAX]
                sent = b"".join(change.event for change in batch if change.kind in wanted and (
                    change.kind in FLOOR_WIDE or visible(who, pits, change.data.get("site"), change.data.get("table"))))
                last = batch[-1].id
                if sent:
                    yield sent

    handlers: dict[str, Callable[[Request], Awaitable[Response]]] = {
        "login": login, "logout": logout, "session": session, "floor": floor, "table": table, "records": records, "alarms": alarms, "ack": ack, "hourly": hourly,
        "daily": daily, "audit": audit, "stream": stream}
    routes: list[BaseRoute] = [Route(PREFIX + e.path, _refusing(handlers[e.name]), methods=[e.method], name=e.name)
                               for e in ENDPOINTS]
    app = Starlette(routes=routes + page_routes(web, clock),
                    exception_handlers={HTTPException: _http_error, Exception: _failed})
    app.add_middleware(_Guard, auth=auth, web=web, clock=clock)
    app.add_middleware(SecurityHeaders)
    return app


def _refusing(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    async def answer(request: Request) -> Response:
        try:
            return await handler(request)
        except Refused as refused:
            return error_response(refused.status, refused.sentence, refused.headers)
        except ArchiveUnavailable as exc:
            return error_response(503, str(exc))
    return answer


async def _body(request: Request) -> bytes:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise Refused(413, f"a request body is at most {MAX_BODY} bytes")
    return body


_HTTP_WORDS = {404: "no such endpoint (see docs/floor-openapi.json)", 405: "this endpoint does not take that method"}


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    headers = {"Allow": exc.headers["Allow"]} if exc.headers and "Allow" in exc.headers else None
    return error_response(exc.status_code, _HTTP_WORDS.get(exc.status_code, "the request was refused"), headers)


async def _failed(request: Request, exc: Exception) -> Response:
    return error_response(500, "the floor service failed to answer this request: see its log")
