"""The pit page's backend (cardd/floor/web.py, cardd/floor/api.py) on a real uvicorn server and a
real PostgreSQL archive, httpx as the browser: log-in and its limits, sessions and their end,
CSRF and Origin, the pits' scope of every answer and of the stream, the audit, the pages and
the headers every response carries."""
from __future__ import annotations

import datetime as dt
import os
import re
from contextlib import closing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from cardd.floor.api import PREFIX, build_app
from cardd.floor.users import User, Users, hash_password, save_users
from cardd.floor.web import CSP, Web
from tests.floor.test_api import NOW, SITE, TOKENS, ApiServer, Sse, fill, tokens  # noqa: F401 (a fixture)

PASSWORD = "correct horse battery"
#: bj-07 is in Pit 1, bj-08 in Pit 2
PITS = {(SITE, "bj-07"): "Pit 1", (SITE, "bj-08"): "Pit 2"}
BROWSER = {"X-Requested-With": "cardfloor"}


class Clock:
    """The web's clock. It starts at the real time: a session cookie's expiry is judged by the
    client's cookie jar against the real clock, so a session made on a fixed past clock would be
    thrown away by the client before the server ever saw it."""

    def __init__(self) -> None:
        self.start = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
        self.now = self.start

    def __call__(self) -> dt.datetime:
        return self.now


def expected_expiry(start: dt.datetime) -> str:
    """A session's expiry as the API writes it: twelve hours on, to the millisecond, in UTC."""
    return (start + dt.timedelta(hours=12)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


class Rig:
    def __init__(self, server: ApiServer, clock: Clock, users_file: Path, web: Web) -> None:
        self.server, self.clock, self.users_file, self.web = server, clock, users_file, web

    @property
    def url(self) -> str:
        return self.server.url

    def browser(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=20, follow_redirects=False)

    def login(self, user: str = "anna", password: str = PASSWORD, **headers: str) -> tuple[httpx.Client, Any]:
        http = self.browser()
        answer = http.post(f"{PREFIX}/login", json={"user": user, "password": password}, headers={**BROWSER, **headers})
        assert answer.status_code == 200, answer.text
        return http, answer.json()

    def audit(self) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.server.dsn) as conn:
            return conn.execute("SELECT action, outcome, who, address, alarm_id, detail FROM floor_audit "
                                "ORDER BY id").fetchall()


@pytest.fixture
def rig(floor_db: str, tokens: Path, tmp_path: Path) -> Iterator[Rig]:
    users_file = tmp_path / "users"
    save_users(users_file, {
        "anna": User("anna", "pit", ("Pit 1",), hash_password(PASSWORD)),
        "eye": User("eye", "surveillance", (), hash_password(PASSWORD)),
        "boss": User("boss", "admin", (), hash_password(PASSWORD))})
    clock = Clock()
    web = Web(Users(users_file), os.urandom(32), session_hours=12.0, time_zone="America/Las_Vegas",
              target_rounds_per_hour=55)
    server = ApiServer(floor_db, tokens, lambda archive, hub, auth: build_app(
        archive, hub, auth, clock=clock, web=web, pit_of=PITS, target_rounds_per_hour=55)).start()
    yield Rig(server, clock, users_file, web)
    server.stop()


def test_a_log_in_gives_a_session_cookie_and_is_recorded(rig: Rig):
    http, body = rig.login()
    with closing(http):
        assert body == {"user": "anna", "role": "pit", "pits": ["Pit 1"], "csrf": body["csrf"],
                        "expires": expected_expiry(rig.clock.start), "time_zone": "America/Las_Vegas",
                        "target_rounds_per_hour": 55}
        assert len(body["csrf"]) >= 32
        cookie = http.cookies.jar
        [set_cookie] = [c for c in cookie if c.name == "cardfloor_session"]
        assert set_cookie.path == "/" and not set_cookie.secure
        assert http.post(f"{PREFIX}/logout").status_code == 403, "a state-changing request needs the CSRF token"
        assert http.get(f"{PREFIX}/session").json() == body
        assert http.get(f"{PREFIX}/floor").status_code == 200
    assert rig.audit() == [("login", "ok", "anna", "127.0.0.1", None, "")]


def test_the_cookie_is_http_only_and_same_site_strict(rig: Rig):
    with rig.browser() as http:
        answer = http.post(f"{PREFIX}/login", json={"user": "anna", "password": PASSWORD}, headers=BROWSER)
    text = answer.headers["set-cookie"]
    assert text.startswith("cardfloor_session=")
    attributes = {part.strip().split("=")[0].lower() for part in text.split(";")[1:]}
    assert {"httponly", "samesite", "path", "expires"} <= attributes and "samesite=strict" in text.lower()


@pytest.mark.parametrize("user, password", [("anna", "wrong password"), ("nobody", PASSWORD), ("anna", "")])
def test_a_wrong_password_or_an_unknown_user_is_the_same_answer(rig: Rig, user: str, password: str):
    with rig.browser() as http:
        answer = http.post(f"{PREFIX}/login", json={"user": user, "password": password}, headers=BROWSER)
        assert (answer.status_code, answer.json()) == (401, {"error": "wrong user or password"})
        assert "set-cookie" not in answer.headers
        assert http.get(f"{PREFIX}/floor").status_code == 401
    assert rig.audit() == [("login", "refused", user, "127.0.0.1", None, "")]


def test_a_log_in_needs_the_page_s_header_and_origin(rig: Rig):
    with rig.browser() as http:
        bare = http.post(f"{PREFIX}/login", json={"user": "anna", "password": PASSWORD})
        assert bare.status_code == 403 and "X-Requested-With: cardfloor" in bare.json()["error"]
        elsewhere = http.post(f"{PREFIX}/login", json={"user": "anna", "password": PASSWORD},
                              headers={**BROWSER, "Origin": "https://evil.example"})
        assert elsewhere.status_code == 403 and "another site" in elsewhere.json()["error"]
    rig.login(Origin=rig.url)[0].close()


def test_failed_log_ins_are_limited_by_user(rig: Rig):
    with rig.browser() as http:
        for _ in range(5):
            assert http.post(f"{PREFIX}/login", json={"user": "anna", "password": "wrong password"},
                             headers=BROWSER).status_code == 401
        limited = http.post(f"{PREFIX}/login", json={"user": "anna", "password": PASSWORD}, headers=BROWSER)
        assert limited.status_code == 429 and limited.json()["error"].startswith("too many failed log-ins")
        assert 1 <= int(limited.headers["retry-after"]) <= 300
        assert "set-cookie" not in limited.headers, "even the right password waits"
        rig.login("eye")[0].close()  # another user is not limited
        rig.clock.now = rig.clock.start + dt.timedelta(seconds=301)
        rig.login("anna")[0].close()
    assert [(a, o, w) for a, o, w, *_ in rig.audit()][-3:] == [
        ("login", "limited", "anna"), ("login", "ok", "eye"), ("login", "ok", "anna")]


def test_failed_log_ins_are_limited_by_address(rig: Rig):
    with rig.browser() as http:
        for n in range(20):
            assert http.post(f"{PREFIX}/login", json={"user": f"guess{n}", "password": "x" * 8},
                             headers=BROWSER).status_code == 401
        limited = http.post(f"{PREFIX}/login", json={"user": "boss", "password": PASSWORD}, headers=BROWSER)
        assert limited.status_code == 429 and "retry-after" in limited.headers


def test_an_expired_session_is_refused(rig: Rig):
    http, _ = rig.login()
    with closing(http):
        rig.clock.now = rig.clock.start + dt.timedelta(hours=12)
        answer = http.get(f"{PREFIX}/floor")
        assert (answer.status_code, answer.json()) == (401, {"error": "the session has ended or is not valid: "
                                                                      "log in again"})
        assert http.get(f"{PREFIX}/session").status_code == 401
        page = http.get("/")
        assert page.status_code == 303 and page.headers["location"] == "/login?next=%2F"


@pytest.mark.parametrize("change", ["flip", "cut", "other key"])
def test_a_tampered_cookie_is_refused(rig: Rig, change: str):
    http, _ = rig.login()
    with closing(http):
        value = http.cookies["cardfloor_session"]
        if change == "flip":
            forged = value[:-2] + ("A" if value[-2] != "A" else "B") + value[-1]
        elif change == "cut":
            forged = value[: len(value) // 2]
        else:  # the same content signed with another floor's key
            other = Web(rig.web.users, os.urandom(32))
            forged, _ = other.new_session(rig.web.users.current()["boss"], rig.clock.now)
        http.cookies.clear()
        http.cookies.set("cardfloor_session", forged)
        answer = http.get(f"{PREFIX}/floor")
        assert answer.status_code == 401


def test_a_new_password_or_a_log_out_ends_the_session(rig: Rig):
    http, body = rig.login()
    other, _ = rig.login()
    with closing(http), closing(other):
        assert http.post(f"{PREFIX}/logout", headers={"X-CSRF-Token": body["csrf"]}).status_code == 204
        assert http.cookies.get("cardfloor_session") is None
        users = Users(rig.users_file).current()
        save_users(rig.users_file, {**users, "anna": users["anna"]._replace(password=hash_password("new password"))})
        assert other.get(f"{PREFIX}/floor").status_code == 401
    assert [a for a, *_ in rig.audit()] == ["login", "login", "logout"]


def test_a_logged_out_cookie_replayed_is_refused(rig: Rig):
    http, body = rig.login()
    with closing(http):
        value = http.cookies["cardfloor_session"]
        assert http.post(f"{PREFIX}/logout", headers={"X-CSRF-Token": body["csrf"]}).status_code == 204
        http.cookies.set("cardfloor_session", value)
        assert http.get(f"{PREFIX}/floor").status_code == 401


@pytest.mark.parametrize("headers", [{}, {"X-CSRF-Token": "not-the-token"}, {"X-CSRF-Token": ""}],
                         ids=["missing", "wrong", "empty"])
def test_a_state_changing_request_without_the_csrf_token_is_refused(rig: Rig, headers: dict[str, str]):
    raised = fill(rig.server)
    http, _ = rig.login("boss")
    with closing(http):
        answer = http.post(f"{PREFIX}/alarms/{raised['offline'].id}/ack", json={"note": "x"}, headers=headers)
        assert answer.status_code == 403 and "X-CSRF-Token" in answer.json()["error"]
        assert http.post(f"{PREFIX}/logout", headers=headers).status_code == 403
        assert http.get(f"{PREFIX}/session").status_code == 200, "still logged in"
    assert rig.server.call(rig.server.archive.alarms(state="acknowledged")) == []  # type: ignore[union-attr]


def test_a_state_changing_request_from_another_origin_is_refused(rig: Rig):
    raised = fill(rig.server)
    http, body = rig.login("boss")
    with closing(http):
        answer = http.post(f"{PREFIX}/alarms/{raised['offline'].id}/ack", json={"note": "x"},
                           headers={"X-CSRF-Token": body["csrf"], "Origin": "http://127.0.0.1:1"})
        assert answer.status_code == 403 and "another site" in answer.json()["error"]


def test_a_pit_user_sees_only_its_pits(rig: Rig):
    raised = fill(rig.server)
    http, body = rig.login("anna")
    with closing(http):
        floor = http.get(f"{PREFIX}/floor").json()
        assert [(t["table"], t["pit"]) for t in floor["tables"]] == [("bj-07", "Pit 1")]
        assert floor["open_floor_alarms"] == 1 and floor["target_rounds_per_hour"] == 55
        assert http.get(f"{PREFIX}/tables/{SITE}/bj-07").status_code == 200
        hidden = http.get(f"{PREFIX}/tables/{SITE}/bj-08")
        assert (hidden.status_code, hidden.json()) == (404, {"error": f"no table {SITE}/bj-08 is known to the floor"})
        assert http.get(f"{PREFIX}/tables/{SITE}/bj-08/records").status_code == 404
        assert {a["table"] for a in http.get(f"{PREFIX}/alarms").json()["alarms"]} == {"bj-07"}
        assert {a["table"] for a in http.get(f"{PREFIX}/alarms?table=bj-08").json()["alarms"]} == set()
        rows = http.get(f"{PREFIX}/reports/daily?from=2026-12-02&to=2026-12-02").json()["rows"]
        assert {r["table"] for r in rows} == {"bj-07"}
        csv_text = http.get(f"{PREFIX}/reports/daily?from=2026-12-02&to=2026-12-02&format=csv").text
        assert "bj-07" in csv_text and "bj-08" not in csv_text
        other = http.post(f"{PREFIX}/alarms/{raised['offline'].id}/ack", json={"note": "x"},
                          headers={"X-CSRF-Token": body["csrf"]})
        assert (other.status_code, other.json()) == (404, {"error": f"no floor alarm {raised['offline'].id}"})
        own = http.post(f"{PREFIX}/alarms/{raised['face_up'].id}/ack", json={"note": "dealer called the pit"},
                        headers={"X-CSRF-Token": body["csrf"]})
        assert own.status_code == 200 and own.json()["acknowledged_by"] == "anna"
    assert rig.audit()[-1] == ("acknowledge", "ok", "anna", "127.0.0.1", raised["face_up"].id,
                               "dealer called the pit")
    with closing(rig.login("eye")[0]) as eye:
        assert {(t["table"], t["pit"]) for t in eye.get(f"{PREFIX}/floor").json()["tables"]} == {
            ("bj-07", "Pit 1"), ("bj-08", "Pit 2")}


def test_a_pit_user_s_stream_holds_only_its_pits(rig: Rig):
    fill(rig.server)
    http, _ = rig.login("anna")
    with closing(http), http.stream("GET", f"{PREFIX}/stream") as answer:
        sse = Sse(answer)
        event, _, data = sse.next()
        assert event == "snapshot"
        assert [t["table"] for t in data["floor"]["tables"]] == ["bj-07"]
        assert {a["table"] for a in data["alarms"]} == {"bj-07"}
        rig.server.hub.publish("table", {"site": SITE, "table": "bj-08", "online": False})
        rig.server.hub.publish("table", {"site": SITE, "table": "bj-07", "online": True})
        event, _, data = sse.next()
        assert (event, data["table"]) == ("table", "bj-07")


def test_surveillance_may_not_acknowledge(rig: Rig):
    raised = fill(rig.server)
    http, body = rig.login("eye")
    with closing(http):
        answer = http.post(f"{PREFIX}/alarms/{raised['face_up'].id}/ack", json={"note": "x"},
                           headers={"X-CSRF-Token": body["csrf"]})
        assert (answer.status_code, answer.json()) == (
            403, {"error": "the surveillance role may not acknowledge an alarm: only admin and pit may"})
    assert [a for a, *_ in rig.audit()] == ["login"]


def test_a_token_still_works_beside_the_sessions(rig: Rig):
    raised = fill(rig.server)
    with httpx.Client(base_url=rig.url, headers={"Authorization": f"Bearer {TOKENS['pit']}"}, timeout=20) as http:
        assert {t["table"] for t in http.get(f"{PREFIX}/floor").json()["tables"]} == {"bj-07", "bj-08"}
        assert http.post(f"{PREFIX}/alarms/{raised['offline'].id}/ack", json={}).status_code == 200, "no CSRF"
        assert http.get(f"{PREFIX}/session").status_code == 401
    assert rig.audit()[-1][:3] == ("acknowledge", "ok", "pit-boss-1")


def test_pages_need_a_session(rig: Rig):
    with rig.browser() as http:
        for path, shown in (("/", "%2F"), ("/alarms", "%2Falarms"), ("/reports?day=2026-12-02", "%2Freports%3Fday%3D2026-12-02"),
                            (f"/tables/{SITE}/bj-07", f"%2Ftables%2F{SITE}%2Fbj-07")):
            answer = http.get(path)
            assert (answer.status_code, answer.headers["location"]) == (303, f"/login?next={shown}")
        login = http.get("/login")
        assert login.status_code == 200 and login.headers["content-type"] == "text/html; charset=utf-8"
        assert login.text.startswith("<!doctype html>") and re.search(r"<script [^>]*src=\"/static/", login.text)
        script = http.get("/static/app.js")
        assert script.status_code == 200 and "javascript" in script.headers["content-type"]
        assert http.get("/static/../users.py").status_code == 404
    http, _ = rig.login()
    with closing(http):
        for path in ("/", "/alarms", "/reports", f"/tables/{SITE}/bj-07"):
            answer = http.get(path)
            assert answer.status_code == 200 and answer.text.startswith("<!doctype html>"), path


def test_every_response_carries_the_security_headers(rig: Rig):
    with rig.browser() as http:
        answers = {"page": http.get("/login"), "redirect": http.get("/"), "static": http.get("/static/app.js"),
                   "refused": http.get(f"{PREFIX}/floor"), "unknown": http.get("/nope"),
                   "login": http.post(f"{PREFIX}/login", json={"user": "anna", "password": "wrong password"},
                                      headers=BROWSER)}
        http.post(f"{PREFIX}/login", json={"user": "anna", "password": PASSWORD}, headers=BROWSER)
        answers["api"] = http.get(f"{PREFIX}/floor")
    assert CSP == ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                   "connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
    for what, answer in answers.items():
        assert answer.headers["content-security-policy"] == CSP, what
        assert answer.headers["x-content-type-options"] == "nosniff", what
        assert answer.headers["referrer-policy"] == "no-referrer", what
        assert (answer.headers.get("cache-control") == "no-store") == (what != "static"), what


def test_a_name_with_markup_stays_json_data(rig: Rig):
    fill(rig.server)  # bj-07's last record's message is <script>alert(1)</script>
    name = "<script>alert(1)</script>"
    with rig.browser() as http:
        answer = http.post(f"{PREFIX}/login", json={"user": name, "password": "wrong password"}, headers=BROWSER)
        assert answer.status_code == 401 and answer.headers["content-type"] == "application/json"
        assert name not in answer.text
    assert rig.audit()[-1][:3] == ("login", "refused", name), "kept as the text it was"
    http, _ = rig.login("boss")
    with closing(http):
        records = http.get(f"{PREFIX}/tables/{SITE}/bj-07/records")
        assert records.headers["content-type"] == "application/json"
        assert records.json()["records"][0]["message"] == "<script>alert(1)</script>"


def test_a_session_s_stream_ends_with_the_session(rig: Rig):
    fill(rig.server)
    http, _ = rig.login("boss")
    with closing(http), http.stream("GET", f"{PREFIX}/stream") as answer:
        sse = Sse(answer)
        assert sse.next()[0] == "snapshot"
        rig.clock.now = rig.clock.start + dt.timedelta(hours=12)
        rig.server.hub.publish("table", {"site": SITE, "table": "bj-07", "online": True})
        seen = []
        with pytest.raises(AssertionError, match="the stream ended"):
            for _ in range(3):
                seen.append(sse.next())
        assert len(seen) <= 1


def test_the_cookie_is_secure_behind_a_tls_proxy(rig: Rig):
    with rig.browser() as http:  # uvicorn takes X-Forwarded-Proto from a proxy on this machine
        answer = http.post(f"{PREFIX}/login", json={"user": "anna", "password": PASSWORD},
                           headers={**BROWSER, "X-Forwarded-Proto": "https"})
    assert answer.status_code == 200 and "secure" in answer.headers["set-cookie"].lower().split("; ")
