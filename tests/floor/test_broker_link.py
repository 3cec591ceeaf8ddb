"""cardfloor's own link to the broker in its API: the real cardfloor, mosquitto and PostgreSQL;
mosquitto stopped and started again is `/floor`'s `broker` and a `broker` change on the event
stream each way, sent to a pit user too (it is about the whole floor, not a table)."""
from __future__ import annotations

import datetime as dt
import subprocess
from typing import Any

import httpx

from tests.floor.service_rig import CARDFLOOR, Floor, Table, floor_file, wait_until
from tests.floor.test_api import Sse
from tests.support.brokers import Mosquitto, free_port

PASSWORD = "anna's password"


def next_broker_change(sse: Sse) -> tuple[str, dict[str, Any]]:
    """The next `broker` event's id and data (the tables' own changes passed over)."""
    for _ in range(100):
        event, event_id, data = sse.next()
        if event == "broker":
            return event_id, data
    raise AssertionError("no broker change in 100 events")


def test_the_floor_says_when_its_link_to_the_broker_is_lost_and_back(tmp_path, mosquitto: Mosquitto, floor_db):
    port = free_port()
    users = tmp_path / "users"
    config = floor_file(tmp_path, mosquitto, floor_db)
    config.write_text(config.read_text() + f'[http]\nlisten = "127.0.0.1:{port}"\nusers_file = "{users}"\n'
                      '[[pit]]\nname = "Pit 1"\ntables = ["site-1/bj-1"]\n')
    added = subprocess.run([CARDFLOOR, "user", "--config", str(config), "add", "anna", "--role", "pit", "--pit",
                            "Pit 1", "--password-stdin"], input=PASSWORD + "\n", capture_output=True, text=True,
                           timeout=60)
    assert added.returncode == 0, added.stderr
    table = Table(mosquitto, "site-1", "bj-1")
    with Floor(config, floor_db, mosquitto) as floor, httpx.Client(base_url=f"http://127.0.0.1:{port}",
                                                                   timeout=30) as http:
        table.status()
        table.send(1)
        floor.wait_for_seqs("site-1", "bj-1", [1])

        def logged_in() -> bool:
            try:
                return http.post("/api/v1/login", json={"user": "anna", "password": PASSWORD},
                                 headers={"X-Requested-With": "cardfloor"}).status_code == 200
            except httpx.HTTPError:
                return False
        wait_until(logged_in, "anna logged in")
        link = http.get("/api/v1/floor").json()["broker"]
        assert (link["connected"], link["broker"], link["problem"]) == (True, mosquitto.url, None)
        up_since = dt.datetime.fromisoformat(link["since"].replace("Z", "+00:00"))

        with http.stream("GET", "/api/v1/stream") as answer:
            sse = Sse(answer)
            event, _, snapshot = sse.next()
            assert event == "snapshot" and snapshot["floor"]["broker"] == link
            before_stop = dt.datetime.now(dt.timezone.utc)
            assert mosquitto.stop() == 0
            lost_id, lost = next_broker_change(sse)
            assert lost["connected"] is False and lost["broker"] == mosquitto.url
            assert lost["problem"] == f"{mosquitto.url}: the connection was lost"
            lost_since = dt.datetime.fromisoformat(lost["since"].replace("Z", "+00:00"))
            # since: when it went down (the API's times are to the millisecond)
            assert up_since < before_stop - dt.timedelta(milliseconds=1) <= lost_since
            shown = http.get("/api/v1/floor").json()["broker"]
            assert (shown["connected"], shown["since"]) == (False, lost["since"])
            mosquitto.start()
            back_id, back = next_broker_change(sse)
            assert int(back_id) > int(lost_id)
            assert (back["connected"], back["broker"]) == (True, mosquitto.url)
            assert back["problem"] is None
            assert http.get("/api/v1/floor").json()["broker"] == back

        assert floor.stop() == 0
    table.close()
