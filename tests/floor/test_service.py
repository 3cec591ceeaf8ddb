"""The real ``cardfloor`` between a real mosquitto and a real PostgreSQL: what tables publish is
archived once, whatever is killed or restarted mid-stream, and the floor alarms come and go."""
from __future__ import annotations

import os
import signal
import socket
import time

import httpx

from tests.floor.service_rig import Floor, Table, ago, floor_file, wait_until
from tests.support.brokers import free_port
from tests.support.postgres import PostgresServer

QUICK = "offline_s = 1.0\ngap_s = 1.0\nbacklog_min = 0.1\ntable_alarm_min = 0.1\nclock_offset_s = 2.0\n"


def test_what_a_table_publishes_is_archived_and_its_state_kept(tmp_path, mosquitto, floor_db):
    table = Table(mosquitto, "site-1", "bj-1")
    with Floor(floor_file(tmp_path, mosquitto, floor_db), floor_db, mosquitto) as floor:
        table.status()
        table.send(5, per_message=2)
        table.state()
        table.anchor()
        floor.wait_for_seqs("site-1", "bj-1", [1, 2, 3, 4, 5])
        wait_until(lambda: floor.query("SELECT count(*) FROM anchors")[0][0] == 1, "the anchor kept")
        wait_until(lambda: floor.query("SELECT state IS NOT NULL, online, session FROM floor_tables")
                   == [(True, True, 1)], "the table's state and status kept")
        assert floor.query("SELECT verdict FROM anchors") == [("matched",)]
        assert floor.alarms() == []
        assert floor.stop() == 0
    assert floor.events("cardfloor_stopped")
    table.close()


def test_a_table_offline_for_a_shoe_then_back_fills_its_gap_without_an_alarm(tmp_path, mosquitto, floor_db):
    """Offline (its Will) for a whole shoe: the offline alarm, cleared on its return. Back, its
    backlog (an hour old) drains while a live record has come first: the gap below it is no alarm,
    nor is the backlog's age, and once drained every record is archived once."""
    table = Table(mosquitto, "site-1", "bj-1")
    with Floor(floor_file(tmp_path, mosquitto, floor_db, alarms=QUICK), floor_db, mosquitto) as floor:
        table.status()
        table.send(10)
        table.state()
        floor.wait_for_seqs("site-1", "bj-1", list(range(1, 11)))
        table.status(online=False)  # the Will
        offline = floor.wait_for_alarm("table_offline")
        assert offline["detail"].startswith("the table has been offline since ")
        shoe = [table.event(at=ago(3600)) for _ in range(190)]  # dealt while away: records 11..200
        table.session = 2
        table.status()
        live = table.send(1)  # record 201 at once, the backlog behind it
        table.state(backlog=190, oldest_s=3600.0)
        floor.wait_for_alarm("table_offline", cleared=True)
        wait_until(lambda: floor.query("SELECT count(*) FROM gaps")[0][0] == 1, "the gap below record 201")
        time.sleep(1.5)  # longer than gap_s: still no alarm while the backlog waits at the table
        for first in range(0, 190, 50):
            table.publish("events", table.events_payload(shoe[first:first + 50]))
        table.state(backlog=0)
        floor.wait_for_seqs("site-1", "bj-1", list(range(1, 202)))
        assert live[0].seq == 201 and floor.query("SELECT count(*) FROM gaps") == [(0,)]
        time.sleep(2.5)  # gap_s and two timer ticks more after the backlog drained
        assert [(a["kind"], a["cleared_at"] is not None) for a in floor.alarms()] == [("table_offline", True)]
    table.close()


def test_a_gap_left_once_the_backlog_drained_is_an_alarm_that_clears_when_filled(tmp_path, mosquitto, floor_db):
    table = Table(mosquitto, "site-1", "bj-1")
    with Floor(floor_file(tmp_path, mosquitto, floor_db, alarms=QUICK), floor_db, mosquitto) as floor:
        table.status()
        records = [table.event() for _ in range(6)]
        table.publish("events", table.events_payload(records[:2]))
        table.publish("events", table.events_payload(records[4:]))  # 3 and 4 never come
        table.state(backlog=0)
        gap = floor.wait_for_alarm("chain", "gap:3")
        assert gap["detail"] == "records 3..4 are missing from the archive"
        table.publish("events", table.events_payload(records[2:4]))
        floor.wait_for_alarm("chain", "gap:3", cleared=True)
        floor.wait_for_seqs("site-1", "bj-1", [1, 2, 3, 4, 5, 6])
    table.close()


def test_the_condition_alarms_are_raised_and_cleared(tmp_path, mosquitto, floor_db):
    table = Table(mosquitto, "site-1", "bj-1")
    with Floor(floor_file(tmp_path, mosquitto, floor_db, alarms=QUICK), floor_db, mosquitto) as floor:
        table.status()
        table.state(at=ago(-30), alarms=[{"reason": "FACE_UP_CARD", "since": None}])  # its clock 30 s ahead
        clock = floor.wait_for_alarm("clock_offset", "clock")
        assert clock["detail"].startswith("the table's clock is 3") and clock["detail"].endswith(" s ahead of the floor's")
        opened = floor.wait_for_alarm("table_alarm_open", "FACE_UP_CARD")
        assert opened["detail"].startswith("the table's alarm FACE_UP_CARD has been open for ")
        table.state()  # its clock set, its alarm cleared
        floor.wait_for_alarm("table_alarm_open", "FACE_UP_CARD", cleared=True)
        # the offset is the largest of the last states' (a late message only makes a table look behind)
        assert not floor.alarms("clock_offset")[0]["cleared_at"]
        table.state(backlog=40, oldest_s=30.0)
        backlog = floor.wait_for_alarm("backlog_old", "export")
        assert backlog["detail"].startswith("40 records wait at the table, the oldest for ")
        table.status(online=False)  # offline: its last state is not current, only the offline alarm speaks
        floor.wait_for_alarm("table_offline")
        assert [a["cleared_at"] for a in floor.alarms("backlog_old")] == [None]
        table.status()
        table.state(backlog=0)
        floor.wait_for_alarm("backlog_old", "export", cleared=True)
        floor.wait_for_alarm("table_offline", cleared=True)
    table.close()


def test_cardfloor_killed_mid_stream_loses_nothing_and_stores_nothing_twice(tmp_path, mosquitto, floor_db):
    """SIGKILL while messages stream in: what was received and not committed was not acknowledged,
    so the broker (the floor's persistent session) sends it again; what was committed and its ack
    lost comes again too, and the archive drops it as a duplicate."""
    table = Table(mosquitto, "site-1", "bj-1")
    config = floor_file(tmp_path, mosquitto, floor_db)
    floor = Floor(config, floor_db, mosquitto).start()
    try:
        table.status()
        at_kill = []
        for _ in range(3):
            before = len(floor.seqs("site-1", "bj-1"))
            table.send_at_once(300)  # one record a message, as a table publishes live
            wait_until(lambda: len(floor.seqs("site-1", "bj-1")) > before + 20, "some of them archived")
            floor.kill()  # mid-stream: some committed and acknowledged, some received only, some not sent yet
            at_kill.append(len(floor.seqs("site-1", "bj-1")) - before)
            table.send(50)  # published while it is down: they wait in its session
            floor.start()
        table.send(10)
        floor.wait_for_seqs("site-1", "bj-1", list(range(1, 3 * 350 + 11)))
        assert any(count < 300 for count in at_kill), at_kill  # a kill came while messages were streaming
        assert floor.query("SELECT count(*) FROM refused_records") == [(0,)]
        assert floor.alarms() == []
    finally:
        floor.kill()
        table.close()


def test_postgresql_restarted_mid_stream_loses_nothing(tmp_path, mosquitto):
    """PostgreSQL killed while records stream in: the message in hand is not acknowledged and the
    ones after it wait at the broker; cardfloor says so once, tries again, and once the server is
    back stores every record, once."""
    with PostgresServer() as server:
        dsn = server.create_database()
        table = Table(mosquitto, "site-1", "bj-1")
        with Floor(floor_file(tmp_path, mosquitto, dsn), dsn, mosquitto) as floor:
            table.status()
            table.send(50)
            server.kill()
            table.send(100)
            wait_until(lambda: bool(floor.events("floor_archive_unavailable")), "cardfloor saying the archive is down")
            time.sleep(1.0)  # a few retries
            server.start()
            table.send(50)
            floor.wait_for_seqs("site-1", "bj-1", list(range(1, 201)))
            assert len(floor.events("floor_archive_unavailable")) == 1
            assert len(floor.events("floor_archive_back")) == 1
            assert floor.proc is not None and floor.proc.poll() is None
        table.close()


def test_systemd_is_told_ready_and_a_ctrl_c_is_a_clean_stop(tmp_path, mosquitto, floor_db):
    """Type=notify: READY=1 once it runs, WATCHDOG=1 while it does, STOPPING=1 at a clean stop."""
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify"))
    notify.settimeout(30)
    floor = Floor(floor_file(tmp_path, mosquitto, floor_db), floor_db, mosquitto,
                  env={"NOTIFY_SOCKET": str(tmp_path / "notify")}).start()
    assert floor.proc is not None
    assert [notify.recv(100), notify.recv(100)] == [b"READY=1", b"WATCHDOG=1"]
    floor.proc.send_signal(signal.SIGINT)
    assert floor.proc.wait(30) == 0
    assert notify.recv(100) == b"STOPPING=1"
    notify.close()
    assert "Traceback" not in floor.log() and floor.events("cardfloor_stopped")


def test_the_real_cardfloor_serves_its_api_to_a_token_and_refuses_one_without(tmp_path, mosquitto, floor_db):
    """cardfloor with ``http.tokens_file`` serves the HTTP API beside the receiver: what a table
    published is on /api/v1/floor for a known token, and a request without one is a 401."""
    port = free_port()
    tokens = tmp_path / "tokens"
    tokens.write_text("s3cret-pit-token pit alice\n")
    os.chmod(tokens, 0o600)
    floor_file(tmp_path, mosquitto, floor_db)
    config = tmp_path / "cardfloor.toml"
    config.write_text(config.read_text() + f'[http]\nlisten = "127.0.0.1:{port}"\ntokens_file = "{tokens}"\n')
    table = Table(mosquitto, "site-1", "bj-1")
    with Floor(config, floor_db, mosquitto) as floor:
        table.status()
        table.send(3)
        floor.wait_for_seqs("site-1", "bj-1", [1, 2, 3])
        url = f"http://127.0.0.1:{port}/api/v1/floor"
        wait_until(lambda: _answers(url), "the API listening")
        refused = httpx.get(url, timeout=10)
        assert refused.status_code == 401 and "error" in refused.json()
        shown = httpx.get(url, headers={"Authorization": "Bearer s3cret-pit-token"}, timeout=10)
        assert shown.status_code == 200, shown.text
        assert "bj-1" in shown.text
        assert floor.stop() == 0
    table.close()


def _answers(url: str) -> bool:
    try:
        httpx.get(url, timeout=2)
    except httpx.HTTPError:
        return False
    return True


def test_the_real_cardfloor_logs_a_user_in_and_shows_only_their_pit(tmp_path, mosquitto, floor_db):
    """cardfloor with ``http.users_file`` (users added by the real ``cardfloor user``) and pits:
    it makes the session key (0600) at its first start, serves the pages behind a log-in, and a
    pit user's floor holds only its pit's tables."""
    import subprocess

    from tests.floor.service_rig import CARDFLOOR

    port = free_port()
    users = tmp_path / "users"
    floor_file(tmp_path, mosquitto, floor_db)
    config = tmp_path / "cardfloor.toml"
    config.write_text(config.read_text() + f'[http]\nlisten = "127.0.0.1:{port}"\nusers_file = "{users}"\n'
                      '[[pit]]\nname = "Pit 1"\ntables = ["site-1/bj-1"]\n'
                      '[[pit]]\nname = "Pit 2"\ntables = ["site-1/bj-2"]\n')
    added = subprocess.run([CARDFLOOR, "user", "--config", str(config), "add", "anna", "--role", "pit", "--pit",
                            "Pit 1", "--password-stdin"], input="anna's password\n", capture_output=True, text=True,
                           timeout=60)
    assert added.returncode == 0, added.stderr
    tables = [Table(mosquitto, "site-1", name) for name in ("bj-1", "bj-2")]
    with Floor(config, floor_db, mosquitto) as floor:
        for table in tables:
            table.status()
            table.send(1)
            floor.wait_for_seqs("site-1", table.table, [1])
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: _answers(base + "/login"), "the pages served")
        assert (tmp_path / "users.secret").stat().st_mode & 0o777 == 0o600
        with httpx.Client(base_url=base, timeout=10) as http:
            assert http.get("/").status_code == 303
            login = http.post("/api/v1/login", json={"user": "anna", "password": "anna's password"},
                              headers={"X-Requested-With": "cardfloor"})
            assert login.status_code == 200, login.text
            shown = http.get("/api/v1/floor").json()
            assert [(t["table"], t["pit"]) for t in shown["tables"]] == [("bj-1", "Pit 1")]
            assert http.get("/").status_code == 200
        assert floor.events("floor_login")[-1]["user"] == "anna"
        assert floor.stop() == 0
    for table in tables:
        table.close()
