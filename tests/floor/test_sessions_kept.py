"""What the pit page's log-in keeps across a restart of the real cardfloor (real mosquitto and
PostgreSQL): a session logged out stays refused until it would have ended, and the log-in
failures of the last minutes still count against the limit."""
from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.floor.service_rig import CARDFLOOR, Floor, floor_file, wait_until
from tests.support.brokers import Mosquitto, free_port

PASSWORD = "anna's password"
BROWSER = {"X-Requested-With": "cardfloor"}


class LoginFloor:
    def __init__(self, floor: Floor, port: int) -> None:
        self.floor, self.base = floor, f"http://127.0.0.1:{port}"

    def client(self, cookie: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=30, follow_redirects=False,
                            cookies=None if cookie is None else {"cardfloor_session": cookie})

    def serving(self) -> None:
        def answers() -> bool:
            try:
                return httpx.get(self.base + "/login", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False
        wait_until(answers, "the pages served", 60)

    def restart(self) -> None:
        assert self.floor.stop() == 0
        self.floor.start()
        self.serving()


@pytest.fixture
def floor(tmp_path: Path, mosquitto: Mosquitto, floor_db: str) -> Iterator[LoginFloor]:
    port = free_port()
    config = floor_file(tmp_path, mosquitto, floor_db)
    config.write_text(config.read_text() + f'[http]\nlisten = "127.0.0.1:{port}"\nusers_file = "{tmp_path / "users"}"\n')
    added = subprocess.run([CARDFLOOR, "user", "--config", str(config), "add", "anna", "--role", "admin",
                            "--password-stdin"], input=PASSWORD + "\n", capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr
    with Floor(config, floor_db, mosquitto) as running:
        rig = LoginFloor(running, port)
        rig.serving()
        yield rig


def log_in(floor: LoginFloor) -> tuple[str, str]:
    """A new session: its cookie's value and its CSRF token."""
    with floor.client() as http:
        answer = http.post("/api/v1/login", json={"user": "anna", "password": PASSWORD}, headers=BROWSER)
        assert answer.status_code == 200, answer.text
        return answer.cookies["cardfloor_session"], answer.json()["csrf"]


def test_a_cookie_logged_out_is_refused_after_a_restart(floor: LoginFloor):
    ended, csrf = log_in(floor)
    kept, _ = log_in(floor)
    with floor.client(ended) as http:
        assert http.get("/api/v1/session").status_code == 200
        assert http.post("/api/v1/logout", headers={**BROWSER, "X-CSRF-Token": csrf}).status_code == 204
    assert floor.floor.query("SELECT session FROM ended_sessions") == [(hashlib.sha256(csrf.encode()).digest(),)], \
        "the archive keeps a digest of the session's token, never the token"
    floor.restart()
    with floor.client(ended) as http:
        refused = http.get("/api/v1/session")
        assert (refused.status_code, refused.json()) == (401, {
            "error": "the session has ended or is not valid: log in again"})
        assert http.get("/").status_code == 303, "the floor page sends it to the log-in"
    with floor.client(kept) as http:
        assert http.get("/api/v1/session").status_code == 200, "a session not logged out goes on"
        assert http.get("/").status_code == 200


def test_failed_log_ins_still_count_after_a_restart(floor: LoginFloor):
    with floor.client() as http:
        for attempt in range(5):
            answer = http.post("/api/v1/login", json={"user": "anna", "password": f"wrong {attempt}"}, headers=BROWSER)
            assert answer.status_code == 401
    floor.restart()
    with floor.client() as http:
        answer = http.post("/api/v1/login", json={"user": "anna", "password": PASSWORD}, headers=BROWSER)
        assert answer.status_code == 429, answer.text
        assert answer.json()["error"].startswith("too many failed log-ins: try again in ")
        assert int(answer.headers["retry-after"]) > 200
