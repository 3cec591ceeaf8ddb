"""The floor's HTTP API (cardd/floor/api.py) on a real uvicorn server, a real PostgreSQL archive
and httpx as the client: tokens and roles, every endpoint, the reports in JSON and CSV, the
event stream's resume, and a client that goes away."""
from __future__ import annotations

import asyncio
import csv
import datetime as dt
import io
import json
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import msgspec
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Route

from cardd.floor.api import ENDPOINTS, PREFIX, build_app
from cardd.floor.archive import Archive
from cardd.floor.auth import Auth
from cardd.floor.contract import (CHAIN_START, DeviceHealth, DeviceUrl, Event, ExportSummary, OpenAlarm, Rounds,
                                  RulesId, ShoeSummary, State, Status, event_hash)
from cardd.floor.reports import CSV_COLUMNS, alarms_cell
from cardd.floor.stream import Hub
from cardd.floor.views import (AlarmsView, AlarmView, AuditView, BrokerView, Error, FloorView, RecordsView, ReportView,
                               SnapshotView, TableDetail)
from tests.support.postgres import PostgresServer

T = TypeVar("T")
SITE = "floor1"
#: the API's clock in these tests: the archive's records are of this morning
NOW = dt.datetime(2026, 12, 2, 4, 30, tzinfo=dt.timezone.utc)
TOKENS = {"pit": "pit-token-0123456789abcdef", "surveillance": "eye-token-0123456789abcdef",
          "admin": "adm-token-0123456789abcdef"}
NAMES = {"pit": "pit-boss-1", "surveillance": "desk-2", "admin": "floor-admin"}
#: the floor's link to the broker as these tests' API tells it
LINK = BrokerView(connected=True, broker="mqtt://127.0.0.1:1883", since="2026-12-02T04:02:10.000Z", problem=None)


def stamp(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class Chain:
    """One table's exported records, each chained to the one before (contract.event_hash)."""

    def __init__(self, table: str, site: str = SITE) -> None:
        self.site, self.table = site, table
        self.events: list[Event] = []

    def record(self, at: dt.datetime, reason: str, data: dict[str, Any] | None = None, *, severity: str = "info",
               message: str = "", source: str = "round") -> Event:
        event = Event(schema="cardd.floor/1", site=self.site, table=self.table, seq=len(self.events) + 1,
                      time=stamp(at), kind="event", source=source, reason=reason, severity=severity,  # type: ignore[arg-type]
                      who=None, round=None, message=message, data=data or {},
                      prev=self.events[-1].hash if self.events else CHAIN_START, hash="0" * 64, replay=False)
        event = msgspec.structs.replace(event, hash=event_hash(event))
        self.events.append(event)
        return event


class ApiServer:
    """build_app on a real uvicorn server in a thread of its own, on a free loopback port, with
    its archive opened on that thread's loop; :meth:`call` runs a coroutine there (to fill the
    archive through its own interface)."""

    def __init__(self, dsn: str, tokens: Path, build: Callable[[Archive, Hub, Auth], Starlette] | None = None) -> None:
        self.dsn, self.tokens = dsn, tokens
        self.build = build or (lambda archive, hub, auth: build_app(archive, hub, auth, clock=lambda: NOW,
                                                                    broker_link=lambda: LINK))
        self.hub = Hub()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.server: uvicorn.Server | None = None
        self.archive: Archive | None = None
        self.app: Starlette | None = None
        self.failed: BaseException | None = None
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._run, name="cardfloor-api", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            self.archive = await Archive.open(self.dsn)
            try:
                self.app = self.build(self.archive, self.hub, Auth.load(self.tokens))
                self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="off"))
                await self.server.serve(sockets=[self.sock])
            finally:
                await self.archive.close()
        try:
            asyncio.run(main())
        except BaseException as exc:  # shown by start() or stop()
            self.failed = exc

    def start(self) -> ApiServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not (self.server is not None and self.server.started):
            assert self.failed is None, f"the API server failed: {self.failed!r}"
            assert time.monotonic() < deadline, "the API server did not start within 30 s"
            time.sleep(0.01)
        return self

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def tasks(self) -> list[str]:
        """What runs on the server's loop but the request asking, by coroutine."""
        async def names() -> list[str]:
            return sorted(t.get_coro().__qualname__ for t in asyncio.all_tasks()  # type: ignore[union-attr]
                          if t is not asyncio.current_task())
        return self.call(names())

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()
        assert not self.thread.is_alive(), "the API server did not stop within 30 s"
        assert self.failed is None, f"the API server failed: {self.failed!r}"


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text("# the floor's tokens\n" + "".join(f"{TOKENS[r]} {r} {NAMES[r]}\n" for r in TOKENS))
    os.chmod(path, 0o600)
    return path


@pytest.fixture
def api(floor_db: str, tokens: Path) -> Iterator[ApiServer]:
    server = ApiServer(floor_db, tokens).start()
    yield server
    server.stop()


def client(api: ApiServer, role: str | None = "pit") -> httpx.Client:
    headers = {} if role is None else {"Authorization": f"Bearer {TOKENS[role]}"}
    return httpx.Client(base_url=api.url, headers=headers, timeout=20)


def fill(api: ApiServer) -> dict[str, Any]:
    """Two tables: bj-07 online with a state, records of two hours and floor alarms; bj-08 gone
    offline at 04:10. Returns the alarms raised, by name."""
    assert api.archive is not None
    archive = api.archive
    bj07, bj08 = Chain("bj-07"), Chain("bj-08")
    at = dt.datetime(2026, 12, 2, 3, 40, tzinfo=dt.timezone.utc)
    minute = dt.timedelta(minutes=1)
    bj07.record(at, "SHOE_STATE", {"from": "verified", "to": "burning"}, source="shoe")
    for n in range(3):
        bj07.record(at + minute * (n + 1), "SETTLED", {"kind": "main", "box": 1, "round": n + 1})
        bj07.record(at + minute * (n + 1), "ROUND_STATE", {"round": n + 1, "state": "complete"})
    bj07.record(at + minute * 10, "FACE_UP_CARD", {"index": 12}, severity="alarm", message="a card face up")
    bj07.record(at + minute * 25, "ROUND_VOID", {"round": 4, "cause": "misdeal"})
    bj07.record(at + minute * 30, "DEVICE_FAULT", {"device": "shoe", "fault": "jam"}, severity="alarm",
                source="device")
    bj07.record(at + minute * 31, "ROUND_STATE", {"round": 5, "state": "complete"})
    bj07.record(at + minute * 32, "=cmd|' /C calc'!A0", {}, severity="alarm", message="<script>alert(1)</script>")
    bj08.record(at, "ROUND_STATE", {"round": 1, "state": "complete"})
    received = at + minute * 40
    for chain in (bj07, bj08):
        result = api.call(archive.store(SITE, chain.table, chain.events, received))
        assert not result.problems and len(result.stored) == len(chain.events)
    rules = RulesId(name="casino-001", sha256="4f" * 32)
    devices = [DeviceUrl(role="shoe", url="sim://shoe")]
    online = Status(schema="cardd.floor/1", site=SITE, table="bj-07", online=True, session=3, release="0.9.0",
                    rules=rules, devices=devices, time=stamp(at))
    api.call(archive.note_status(online, at))
    api.call(archive.note_status(msgspec.structs.replace(online, table="bj-08"), at))
    api.call(archive.note_status(Status(schema="cardd.floor/1", site=SITE, table="bj-08", online=False, session=3),
                                 dt.datetime(2026, 12, 2, 4, 10, tzinfo=dt.timezone.utc)))
    state = State(schema="cardd.floor/1", site=SITE, table="bj-07", time="2026-12-02T04:29:02.000Z",
                  devices=[DeviceHealth(role="shoe", state="dealing", connected=True)],
                  shoe=ShoeSummary(state="in_play", penetration="25-50%"), rounds=Rounds(this_shoe=4, this_hour=2),
                  alarms=[OpenAlarm(reason="FACE_UP_CARD", since="2026-12-02T04:20:02.000Z")],
                  export=ExportSummary(delivered_through=10, backlog=3, oldest_undelivered_s=1.5))
    # received a second after its time: the table's clock is 2 s ahead of the floor's
    api.call(archive.note_state(state, dt.datetime(2026, 12, 2, 4, 29, 0, tzinfo=dt.timezone.utc)))
    raised = {
        "offline": api.call(archive.raise_alarm(SITE, "bj-08", "table_offline", "", "bj-08 has been offline since "
                                                "04:10", dt.datetime(2026, 12, 2, 4, 12, tzinfo=dt.timezone.utc))),
        "face_up": api.call(archive.raise_alarm(SITE, "bj-07", "table_alarm_open", "FACE_UP_CARD",
                                                "FACE_UP_CARD open for 5 minutes",
                                                dt.datetime(2026, 12, 2, 4, 25, tzinfo=dt.timezone.utc))),
        "old": api.call(archive.raise_alarm(SITE, "bj-07", "backlog_old", "", "a backlog of 2 minutes",
                                            dt.datetime(2026, 12, 2, 3, 0, tzinfo=dt.timezone.utc))),
    }
    api.call(archive.clear_alarm(SITE, "bj-07", "backlog_old", "", dt.datetime(2026, 12, 2, 3, 5,
                                                                                  tzinfo=dt.timezone.utc)))
    return raised


def log_ins(api: ApiServer) -> None:
    """Two log-ins in the audit: floor-admin's at 04:14, then anna's refused at 04:15."""
    assert api.archive is not None
    for minute, outcome, who, address in ((14, "ok", "floor-admin", "10.1.2.9"), (15, "refused", "anna", "10.1.2.3")):
        api.call(api.archive.audit("login", outcome, who, dt.datetime(2026, 12, 2, 4, minute, tzinfo=dt.timezone.utc),
                                   address=address))


def concrete(path: str) -> str:
    return PREFIX + path.format(site=SITE, table="bj-07", alarm_id=1)


# ---- tokens and roles -----------------------------------------------------------------------

def test_the_route_table_is_every_route_the_app_serves(api: ApiServer):
    assert api.app is not None
    served = sorted((r.path, sorted(r.methods or ())) for r in api.app.routes if isinstance(r, Route))
    assert len(served) == len(api.app.routes)
    assert served == sorted((PREFIX + e.path, sorted({e.method} | ({"HEAD"} if e.method == "GET" else set())))
                            for e in ENDPOINTS)


@pytest.mark.parametrize("endpoint", [e for e in ENDPOINTS if not e.public], ids=lambda e: f"{e.method} {e.path}")
@pytest.mark.parametrize("header", [None, "Bearer not-a-token-0123456789", f"Basic {TOKENS['admin']}"],
                         ids=["no token", "wrong token", "not bearer"])
def test_every_endpoint_refuses_a_request_without_a_known_token(api: ApiServer, endpoint: Any, header: str | None):
    fill(api)
    headers = {} if header is None else {"Authorization": header}
    with httpx.Client(base_url=api.url, timeout=20) as http:
        answer = http.request(endpoint.method, concrete(endpoint.path), headers=headers, json={"note": "x"}
                              if endpoint.method == "POST" else None)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith('Bearer realm="cardfloor"')
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {"error": "this API needs a token: send `Authorization: Bearer <token>`"
                             if header is None else "the token is not known (or not a bearer token)"}
    assert api.call(api.archive.alarms(state="acknowledged")) == [], "nothing was acknowledged"  # type: ignore[union-attr]


def test_surveillance_may_not_acknowledge_an_alarm(api: ApiServer):
    raised = fill(api)
    with client(api, "surveillance") as http:
        answer = http.post(f"{PREFIX}/alarms/{raised['offline'].id}/ack", json={"note": "seen"})
        assert answer.status_code == 403
        assert answer.json() == {"error": "the surveillance role may not acknowledge an alarm: only admin and pit may"}
        assert http.get(f"{PREFIX}/alarms").status_code == 200, "surveillance reads"
    assert [a.id for a in api.call(api.archive.alarms(state="open"))] == [  # type: ignore[union-attr]
        raised["face_up"].id, raised["offline"].id]


def test_pit_acknowledges_as_the_token_s_name(api: ApiServer):
    raised = fill(api)
    with client(api, "pit") as http:
        answer = http.post(f"{PREFIX}/alarms/{raised['offline'].id}/ack", json={"note": "technician called"})
        assert answer.status_code == 200
        alarm = msgspec.json.decode(answer.content, type=AlarmView)
        assert (alarm.state, alarm.acknowledged_by, alarm.note, alarm.acknowledged_at) == (
            "acknowledged", "pit-boss-1", "technician called", "2026-12-02T04:30:00.000Z")
        assert [a.id for a in msgspec.json.decode(http.get(f"{PREFIX}/alarms?state=acknowledged").content,
                                                  type=AlarmsView).alarms] == [raised["offline"].id]
        assert http.post(f"{PREFIX}/alarms/999999/ack", json={}).json() == {"error": "no floor alarm 999999"}
    changes = api.hub.since(api.hub.last_id - 1)
    assert changes is not None and [(c.kind, c.data["id"], c.data["acknowledged_by"]) for c in changes] == [
        ("alarm", raised["offline"].id, "pit-boss-1")]


@pytest.mark.parametrize("path, body, status, error", [
    ("/alarms/x1/ack", {"note": ""}, 400, "an alarm's id is a whole number"),
    ("/alarms/1/ack", {"note": 5}, 400, "field note: expected a string, got a whole number"),
    ("/alarms/1/ack", {"note": "n" * 501}, 400, "field note: expected a string of at most 500 characters"),
    ("/alarms/1/ack", {"who": "me"}, 400, "unknown field 'who'"),
    ("/alarms/1/ack", b"{note", 400, 'the body is not JSON: send {"note": "..."}'),
    ("/alarms/1/ack", b"x" * 20000, 413, "a request body is at most 16384 bytes"),
])
def test_a_bad_acknowledgement_is_one_sentence(api: ApiServer, path: str, body: Any, status: int, error: str):
    fill(api)
    with client(api, "admin") as http:
        answer = http.post(PREFIX + path, **({"content": body} if isinstance(body, bytes) else {"json": body}))
    assert (answer.status_code, answer.json()) == (status, {"error": error})


# ---- reading ------------------------------------------------------------------------------

def test_a_path_or_method_not_served_is_one_sentence(api: ApiServer):
    with client(api, "admin") as http:
        missing = http.get(f"{PREFIX}/tables")
        wrong = http.delete(f"{PREFIX}/floor")
    assert (missing.status_code, missing.json()) == (404, {"error": "no such endpoint (see docs/floor-openapi.json)"})
    assert (wrong.status_code, wrong.json()) == (405, {"error": "this endpoint does not take that method"})
    assert sorted(wrong.headers["allow"].split(", ")) == ["GET", "HEAD"]


def test_the_floor_shows_every_table(api: ApiServer):
    fill(api)
    with client(api, "surveillance") as http:
        answer = http.get(f"{PREFIX}/floor")
    assert answer.status_code == 200
    floor = msgspec.json.decode(answer.content, type=FloorView)
    assert (floor.time, floor.open_floor_alarms) == ("2026-12-02T04:30:00.000Z", 2)
    bj07, bj08 = floor.tables
    assert (bj07.table, bj07.online, bj07.session, bj07.rounds_this_hour, bj07.rounds_today) == ("bj-07", True, 3, 1, 4)
    assert [(d.role, d.state, d.connected) for d in bj07.devices] == [("shoe", "dealing", True)]
    assert bj07.shoe is not None and (bj07.shoe.state, bj07.shoe.penetration) == ("in_play", "25-50%")
    # the table's clock is 2 s ahead: its alarm since 04:20:02 (its time) is 10 minutes old at 04:30
    assert [(a.reason, a.age_s) for a in bj07.alarms] == [("FACE_UP_CARD", 600.0)]
    assert (bj07.backlog, bj07.backlog_age_s, bj07.clock_offset_s) == (3, 61.5, 2.0)
    assert (bj07.head_seq, bj07.open_floor_alarms) == (12, 1)
    assert (bj08.online, bj08.devices, bj08.shoe, bj08.backlog, bj08.rounds_today, bj08.open_floor_alarms) == (
        False, [], None, None, 1, 1)


def test_one_table_and_its_records(api: ApiServer):
    raised = fill(api)
    with client(api) as http:
        detail = msgspec.json.decode(http.get(f"{PREFIX}/tables/{SITE}/bj-07").content, type=TableDetail)
        assert (detail.release, detail.rules and detail.rules.name, detail.gaps) == ("0.9.0", "casino-001", [])
        assert [a.id for a in detail.alarms] == [raised["face_up"].id], "the cleared alarm is not open"
        first = msgspec.json.decode(http.get(f"{PREFIX}/tables/{SITE}/bj-07/records?limit=4").content, type=RecordsView)
        assert [r.seq for r in first.records] == [12, 11, 10, 9] and first.next_before_seq == 9
        rest = msgspec.json.decode(http.get(f"{PREFIX}/tables/{SITE}/bj-07/records",
                                            params={"before_seq": 9, "limit": 100}).content, type=RecordsView)
        assert [r.seq for r in rest.records] == list(range(8, 0, -1)) and rest.next_before_seq is None
        hostile = first.records[0]
        assert (hostile.reason, hostile.message) == ("=cmd|' /C calc'!A0", "<script>alert(1)</script>")
        assert http.get(f"{PREFIX}/tables/{SITE}/bj-99").json() == {
            "error": "no table floor1/bj-99 is known to the floor"}
        assert http.get(f"{PREFIX}/tables/{SITE}/bj-99/records").status_code == 404
        bad = http.get(f"{PREFIX}/tables/{SITE}/bj%3Cb%3E07")
        assert (bad.status_code, bad.json()) == (400, {
            "error": "path parameter table: expected a string matching the pattern ^[A-Za-z0-9_-]{1,64}$"})


@pytest.mark.parametrize("query, error", [
    ("limit=0", "query parameter limit: expected a whole number of at least 1"),
    ("limit=many", "query parameter limit: expected a whole number, got a string"),
    ("before_seq=-3", "query parameter before_seq: expected a whole number of at least 1"),
    ("limit=2&limit=3", "the query parameter 'limit' is given twice"),
    ("since=3", "unknown query parameter 'since'"),
])
def test_a_bad_records_query_is_one_sentence(api: ApiServer, query: str, error: str):
    fill(api)
    with client(api) as http:
        answer = http.get(f"{PREFIX}/tables/{SITE}/bj-07/records?{query}")
    assert (answer.status_code, answer.json()) == (400, {"error": error})


def test_alarms_by_state_and_filters(api: ApiServer):
    raised = fill(api)

    def ids(http: httpx.Client, **params: str) -> list[int]:
        answer = http.get(f"{PREFIX}/alarms", params=params)
        assert answer.status_code == 200, answer.text
        return [a.id for a in msgspec.json.decode(answer.content, type=AlarmsView).alarms]

    with client(api) as http:
        assert ids(http) == [raised["face_up"].id, raised["offline"].id], "open by default, newest first"
        assert ids(http, state="cleared") == [raised["old"].id]
        assert ids(http, state="all", table="bj-07") == [raised["face_up"].id, raised["old"].id]
        assert ids(http, state="all", kind="table_offline") == [raised["offline"].id]
        assert ids(http, site="floor2") == []
        answer = http.get(f"{PREFIX}/alarms?state=closed")
        assert (answer.status_code, answer.json()) == (400, {"error": "query parameter state: 'closed': expected one of "
                                                                       "acknowledged, all, cleared, open"})


# ---- reports ------------------------------------------------------------------------------

def test_the_hourly_report_and_its_csv_agree(api: ApiServer):
    fill(api)
    with client(api) as http:
        answer = http.get(f"{PREFIX}/reports/hourly?day=2026-12-02")
        as_csv = http.get(f"{PREFIX}/reports/hourly?day=2026-12-02&format=csv")
    report = msgspec.json.decode(answer.content, type=ReportView)
    assert (report.period, report.first, report.last, len(report.rows)) == ("hour", dt.date(2026, 12, 2),
                                                                             dt.date(2026, 12, 2), 48)
    three = next(r for r in report.rows if r.table == "bj-07" and r.start == "2026-12-02T03:00:00.000Z")
    four = next(r for r in report.rows if r.table == "bj-07" and r.start == "2026-12-02T04:00:00.000Z")
    assert (three.rounds, three.hands, three.shoes, three.voids, three.device_faults) == (3, 3, 1, 0, 0)
    assert three.alarms == {"FACE_UP_CARD": 1}
    assert (four.rounds, four.voids, four.device_faults, four.alarms) == (1, 1, 1, {
        "=cmd|' /C calc'!A0": 1, "DEVICE_FAULT": 1})
    offline = {r.start[11:13]: r.minutes_offline for r in report.rows if r.table == "bj-08" and r.minutes_offline}
    assert offline == {"04": 20.0}, "offline from 04:10 to the API's now, 04:30"

    assert as_csv.headers["content-type"] == "text/csv; charset=utf-8"
    rows = list(csv.reader(io.StringIO(as_csv.text)))
    assert rows[0] == list(CSV_COLUMNS)
    expected = [[r.site, r.table, r.start, str(r.rounds), str(r.hands), str(r.shoes), str(r.voids),
                 str(r.device_faults), str(r.minutes_offline), alarms_cell(r.alarms)] for r in report.rows]
    inert = [row[:-1] + [row[-1][1:] if row[-1].startswith("'=") else row[-1]] for row in rows[1:]]
    assert inert == expected
    assert any(row[-1].startswith("'=") for row in rows[1:]), "a formula-like cell is made inert"


def test_the_daily_report_and_its_checks(api: ApiServer):
    fill(api)
    with client(api) as http:
        report = msgspec.json.decode(http.get(f"{PREFIX}/reports/daily",
                                              params={"from": "2026-12-01", "to": "2026-12-02", "table": "bj-07"}).content,
                                     type=ReportView)
        assert [(r.start, r.rounds, r.hands) for r in report.rows] == [
            ("2026-12-01T00:00:00.000Z", 0, 0), ("2026-12-02T00:00:00.000Z", 4, 3)]
        as_csv = list(csv.reader(io.StringIO(http.get(f"{PREFIX}/reports/daily?from=2026-12-01&to=2026-12-02"
                                                      "&table=bj-07&format=csv").text)))
        assert [row[2:5] for row in as_csv[1:]] == [[r.start, str(r.rounds), str(r.hands)] for r in report.rows]
        for query, error in [
            ("from=2026-12-03&to=2026-12-02", "from (2026-12-03) is after to (2026-12-02)"),
            ("from=2025-01-01&to=2026-12-02", "a daily report covers at most 366 days"),
            ("from=2026-13-01&to=2026-12-02", "query parameter from: not a date (RFC 3339)"),
            ("to=2026-12-02", "the query parameter 'from' is missing"),
            ("from=2026-12-01&to=2026-12-02&format=xlsx", "query parameter format: 'xlsx': expected one of csv, json"),
        ]:
            answer = http.get(f"{PREFIX}/reports/daily?{query}")
            assert (answer.status_code, answer.json()) == (400, {"error": error}), query


# ---- the audit ----------------------------------------------------------------------------

def test_the_audit_is_the_admin_s_paged_filtered_and_as_csv(api: ApiServer):
    raised = fill(api)
    log_ins(api)
    with client(api, "pit") as http:
        assert http.post(f"{PREFIX}/alarms/{raised['offline'].id}/ack", json={"note": "=HYPERLINK(\"x\")"}).status_code == 200
    for role in ("pit", "surveillance"):
        with client(api, role) as http:
            answer = http.get(f"{PREFIX}/audit")
        assert (answer.status_code, answer.json()) == (403, {
            "error": f"the {role} role may not read the audit: only admin may"})
    with client(api, "admin") as http:
        def ids(**params: Any) -> tuple[list[int], int | None]:
            answer = http.get(f"{PREFIX}/audit", params=params)
            assert answer.status_code == 200, answer.text
            audit = msgspec.json.decode(answer.content, type=AuditView)
            return [e.id for e in audit.entries], audit.next_before_id

        assert ids() == ([3, 2, 1], None), "the newest first"
        assert ids(limit=2) == ([3, 2], 2)
        assert ids(limit=2, before_id=2) == ([1], None)
        assert ids(who="anna") == ([2], None)
        assert ids(action="acknowledge") == ([3], None)
        assert ids(who="pit-boss-1", action="login") == ([], None)
        newest = msgspec.json.decode(http.get(f"{PREFIX}/audit?limit=1").content, type=AuditView).entries[0]
        assert (newest.action, newest.outcome, newest.who, newest.alarm_id, newest.detail, newest.at) == (
            "acknowledge", "ok", "pit-boss-1", raised["offline"].id, '=HYPERLINK("x")', "2026-12-02T04:30:00.000Z")
        as_csv = http.get(f"{PREFIX}/audit?format=csv")
        assert as_csv.headers["content-type"] == "text/csv; charset=utf-8"
        rows = list(csv.reader(io.StringIO(as_csv.text)))
        assert rows[0] == ["id", "at", "action", "outcome", "who", "address", "alarm_id", "detail"]
        assert rows[1] == ["3", "2026-12-02T04:30:00.000Z", "acknowledge", "ok", "pit-boss-1", "127.0.0.1",
                           str(raised["offline"].id), "'=HYPERLINK(\"x\")"], "a formula made inert"
        assert [row[0] for row in rows[1:]] == ["3", "2", "1"]
        for query, error in [
            ("action=delete", "query parameter action: 'delete': expected one of acknowledge, login, logout"),
            ("limit=501", "query parameter limit: expected a whole number of at most 500"),
            ("before_id=0", "query parameter before_id: expected a whole number of at least 1"),
            ("who=" + "w" * 257, "query parameter who: expected a string of at most 256 characters"),
        ]:
            answer = http.get(f"{PREFIX}/audit?{query}")
            assert (answer.status_code, answer.json()) == (400, {"error": error}), query


# ---- the stream ---------------------------------------------------------------------------

class Sse:
    """An event stream read line by line: each event as (event, id, data)."""

    def __init__(self, answer: httpx.Response) -> None:
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
        self.lines = answer.iter_lines()

    def next(self) -> tuple[str, str, Any]:
        fields: dict[str, str] = {}
        for line in self.lines:
            if not line:
                if "data" in fields:
                    return fields.get("event", "message"), fields.get("id", ""), msgspec.json.decode(fields["data"])
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value[1:] if value.startswith(" ") else value
        raise AssertionError("the stream ended")


def test_the_stream_starts_with_a_snapshot_then_each_change(api: ApiServer):
    fill(api)
    with client(api, "surveillance") as http, http.stream("GET", f"{PREFIX}/stream") as answer:
        sse = Sse(answer)
        event, first_id, data = sse.next()
        assert event == "snapshot" and int(first_id) == api.hub.last_id
        snapshot = msgspec.convert(data, SnapshotView)
        assert [t.table for t in snapshot.floor.tables] == ["bj-07", "bj-08"]
        assert len(snapshot.alarms) == 2
        published = api.hub.publish("table", {"site": SITE, "table": "bj-07", "online": False})
        assert sse.next() == ("table", str(published), {"site": SITE, "table": "bj-07", "online": False})


def test_resuming_with_last_event_id_gives_exactly_the_changes_missed(api: ApiServer):
    fill(api)
    hub = api.hub
    with client(api) as http:
        with http.stream("GET", f"{PREFIX}/stream") as answer:
            sse = Sse(answer)
            assert sse.next()[0] == "snapshot"
            seen = [hub.publish("records", {"n": n}) for n in range(3)]
            assert [sse.next()[1] for _ in seen] == [str(i) for i in seen]
        missed = [hub.publish("alarm", {"n": n}) for n in range(3, 6)]
        with http.stream("GET", f"{PREFIX}/stream", headers={"Last-Event-ID": str(seen[-1])}) as answer:
            sse = Sse(answer)
            assert [sse.next() for _ in missed] == [("alarm", str(i), {"n": n}) for i, n in zip(missed, range(3, 6))]
            after = hub.publish("table", {"n": 6})
            assert sse.next() == ("table", str(after), {"n": 6}), "no snapshot, nothing twice: the next is new"


@pytest.mark.parametrize("last_event_id", ["1", "99999999999999999", "x"], ids=["too old", "unknown", "not an id"])
def test_an_id_the_hub_cannot_resume_from_gets_a_snapshot_first(api: ApiServer, last_event_id: str):
    fill(api)
    api.hub.publish("table", {"n": 0})
    with client(api) as http, http.stream("GET", f"{PREFIX}/stream", headers={"Last-Event-ID": last_event_id}) as answer:
        sse = Sse(answer)
        event, event_id, _ = sse.next()
        assert (event, event_id) == ("snapshot", str(api.hub.last_id))
        change = api.hub.publish("alarm", {"n": 1})
        assert sse.next() == ("alarm", str(change), {"n": 1})


def test_a_stream_of_some_kinds_sends_only_those_and_the_broker(api: ApiServer):
    fill(api)
    hub = api.hub
    with client(api) as http, http.stream("GET", f"{PREFIX}/stream?kinds=alarm,rounds") as answer:
        sse = Sse(answer)
        assert sse.next()[0] == "snapshot"
        hub.publish("table", {"site": SITE, "table": "bj-07", "online": False})
        hub.publish("records", {"site": SITE, "table": "bj-07", "seqs": [9]})
        rounds = hub.publish("rounds", {"site": SITE, "table": "bj-07", "rounds": 1})
        broker = hub.publish("broker", {"connected": False})
        alarm = hub.publish("alarm", {"site": SITE, "table": "bj-07", "id": 3})
        assert [sse.next()[:2] for _ in range(3)] == [("rounds", str(rounds)), ("broker", str(broker)),
                                                     ("alarm", str(alarm))]


@pytest.mark.parametrize("query", ["kinds=tables", "kinds=alarm,snapshot", "kind=alarm"])
def test_a_stream_asked_for_a_kind_not_known_is_refused_in_a_sentence(api: ApiServer, query: str):
    with client(api) as http:
        answer = http.get(f"{PREFIX}/stream?{query}")
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error.startswith(("query parameter kinds: ", "unknown query parameter")), error
    if query.startswith("kinds"):
        assert error.endswith("the kinds are table, alarm, records, rounds, broker"), error


def test_a_client_that_goes_away_leaves_nothing_behind(api: ApiServer):
    fill(api)
    before = api.tasks()
    for n in range(3):
        with client(api) as http, http.stream("GET", f"{PREFIX}/stream") as answer:
            sse = Sse(answer)  # kept: its line iterator's end would close the response
            assert sse.next()[0] == "snapshot"
            deadline = time.monotonic() + 10
            while api.hub.waiting != 1:
                assert time.monotonic() < deadline, "the stream never waited for a change"
                time.sleep(0.01)
        if n == 0:  # sse-starlette's watcher of the server's shutdown: one a loop, from its first stream
            before.append("_shutdown_watcher")
    deadline = time.monotonic() + 10
    while api.hub.waiting or api.tasks() != before:
        assert time.monotonic() < deadline, f"left behind: {api.hub.waiting} waiting, tasks {api.tasks()} (were {before})"
        time.sleep(0.01)


# ---- the examples of docs/floor-service.md --------------------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "floor-service.md"


def doc_examples() -> list[tuple[str, str, bytes | None, int | None, str, str]]:
    """Each example of the "HTTP API" section: method, path, body, status, answer's kind and text."""
    text = DOC.read_text()
    section = text[text.index("\n## HTTP API\n"):]
    if "\n## " in section[1:]:
        section = section[:section.index("\n## ", 1)]
    blocks = re.findall(r"(?:(\d{3}):\n\n)?```(\w+)\n(.*?)```", section, re.S)
    examples = []
    for (_, kind, request), (status, answer_kind, answer) in zip(blocks[::2], blocks[1::2]):
        assert kind == "http", f"an answer without its request: {request[:80]!r}"
        head, _, body = request.partition("\n\n")
        method, path = head.splitlines()[0].split(" ", 1)
        examples.append((method, path, body.strip().encode() or None, int(status) if status else None, answer_kind,
                         answer))
    return examples


def shown_in(example: Any, actual: Any, where: str = "$") -> None:
    """``example`` is ``actual`` but for lists shown in part (their items in order)."""
    if isinstance(example, dict):
        assert isinstance(actual, dict) and example.keys() == actual.keys(), f"{where}: {example} is not {actual}"
        for key in example:
            shown_in(example[key], actual[key], f"{where}.{key}")
    elif isinstance(example, list):
        assert isinstance(actual, list), f"{where}: {actual!r} is not a list"
        items = iter(actual)
        for n, item in enumerate(example):
            for candidate in items:
                try:
                    shown_in(item, candidate, f"{where}[{n}]")
                    break
                except AssertionError:
                    continue
            else:
                raise AssertionError(f"{where}[{n}]: {item!r} is not in {actual!r}")
    else:
        assert example == actual, f"{where}: the example says {example!r}, the API {actual!r}"


def test_every_endpoint_has_an_example():
    shown = {(method, path.split("?")[0]) for method, path, *_ in doc_examples()}
    for endpoint in ENDPOINTS:
        if endpoint.name in ("login", "logout", "session"):  # shown in "Users and the pit page"
            continue
        pattern = re.compile("^" + re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(PREFIX + endpoint.path)) + "$")
        assert any(m == endpoint.method and pattern.match(p) for m, p in shown), \
            f"docs/floor-service.md has no example of {endpoint.method} {endpoint.path}"


def test_the_documented_examples_are_what_the_api_answers(api: ApiServer):
    fill(api)
    log_ins(api)
    responses = {(e.method, e.path): e.response for e in ENDPOINTS}
    with client(api, "admin") as http:
        for method, path, body, status, kind, text in doc_examples():
            endpoint = next(e for e in ENDPOINTS if e.method == method and re.fullmatch(
                re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(PREFIX + e.path)), path.split("?")[0]))
            if kind == "text":  # the stream: its first event is the snapshot shown
                with http.stream(method, path) as answer:
                    sse = Sse(answer)
                    event, event_id, data = sse.next()
                events = re.findall(r"event: (\w+)\nid: (\d+)\ndata: (.*)\n", text)
                assert event == events[0][0] == "snapshot" and event_id.isdigit()
                msgspec.json.decode(events[0][2], type=SnapshotView)
                shown_in(json.loads(events[0][2]), data)
                for name, _, change in events[1:]:
                    assert name == "alarm", "the example's changes are the API's own"
                    msgspec.json.decode(change, type=AlarmView)
                continue
            answer = http.request(method, path, content=body,
                                  headers={"Content-Type": "application/json"} if body else None)
            if kind == "csv":
                assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/csv")
                shown_in(list(csv.reader(io.StringIO(text))), list(csv.reader(io.StringIO(answer.text))))
                continue
            assert kind == "json" and answer.status_code == status, f"{method} {path}: {answer.status_code}"
            shape = responses[(endpoint.method, endpoint.path)] if status == 200 else Error
            msgspec.json.decode(text.encode(), type=shape)
            msgspec.json.decode(answer.content, type=shape)
            shown_in(json.loads(text), answer.json(), f"{method} {path}")


def test_postgresql_down_is_a_503_in_one_sentence_and_back_when_it_is(tmp_path: Path, tokens: Path):
    """The archive not answering is the client's 503 naming it (no traceback, no library text
    beyond the server's address), and the next request after PostgreSQL is back is answered."""
    with PostgresServer() as server:
        api = ApiServer(server.create_database(), tokens).start()
        try:
            with client(api) as http:
                assert http.get("/api/v1/floor").status_code == 200
                server.kill()
                down = http.get("/api/v1/floor")
                assert down.status_code == 503
                error = down.json()["error"]
                assert error.startswith("the archive (PostgreSQL at 127.0.0.1:") and "\n" not in error, error
                assert "Traceback" not in down.text
                server.start()
                assert http.get("/api/v1/floor").status_code == 200
        finally:
            api.stop()
