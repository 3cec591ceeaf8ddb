"""A table as the floor sees it, for cardfloor's tests: a plain paho client with the table's own
broker user publishing the contract's payloads (events chained with contract.event_hash), and
the floor's configuration for a test broker."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import msgspec
import paho.mqtt.client as mqtt
import psycopg
from paho.mqtt.enums import CallbackAPIVersion

from cardd.floor.config import FloorConfig, parse_config
from cardd.floor.contract import CHAIN_START, Event, event_hash
from tests.support.brokers import Mosquitto, _die_with_parent, read_password, write_password_file

#: the console script of this checkout's venv
CARDFLOOR = str(Path(sys.executable).with_name("cardfloor"))
SCHEMA: Literal["cardd.floor/1"] = "cardd.floor/1"


def stamp(at: datetime | None = None) -> str:
    at = at or datetime.now(timezone.utc)
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def floor_config(tmp_path: Path, broker: Mosquitto, *, dsn: str = "postgresql:///none", urls: list[str] | None = None,
                 version: str = "5", client_id: str = "cardfloor-test", extra: str = "") -> FloorConfig:
    password = write_password_file(tmp_path / "floor.password", broker.floor.password)
    text = (f"[broker]\nurls = {json.dumps(urls or [broker.url])}\nusername = {json.dumps(broker.floor.user)}\n"
            f'password_file = "{password}"\nclient_id = "{client_id}"\nmqtt_version = "{version}"\n'
            f"[archive]\ndsn = {json.dumps(dsn)}\n{extra}")
    (tmp_path / "cardfloor.toml").write_text(text)
    return parse_config(text, str(tmp_path / "cardfloor.toml"))


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


class Table:
    """A table's publisher: its broker user, its chain, its seq. ``event()`` makes the next record
    (chained), ``publish`` sends any payload on any of its topics at QoS 1 and waits for the PUBACK."""

    def __init__(self, broker: Mosquitto, site: str, table: str, *,
                 version: mqtt.MQTTProtocolVersion = mqtt.MQTTv5) -> None:
        self.site, self.table = site, table
        user, password_file = broker.add_table(site, table)
        found = urlsplit(broker.url)
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"cardd-{site}-{table}", protocol=version)
        self.client.username_pw_set(user, read_password(password_file))
        self.client.connect(found.hostname or "127.0.0.1", found.port or 1883, keepalive=10)
        self.client.loop_start()
        self.seq, self.prev, self.session = 0, CHAIN_START, 1
        self.sent: list[Event] = []

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def topic(self, leaf: str) -> str:
        return f"cardd/v1/{self.site}/{self.table}/{leaf}"

    def event(self, *, at: datetime | None = None, reason: str = "CARD_DRAWN", replay: bool = False,
              source: str = "tracker", severity: Literal["info", "warning", "alarm"] = "info",
              message: str | None = None, data: dict[str, Any] | None = None, who: str | None = None) -> Event:
        """The next record, chained to the last made (``at``: its time)."""
        self.seq += 1
        unhashed = Event(schema=SCHEMA, site=self.site, table=self.table, seq=self.seq, time=stamp(at), kind="event",
                         source=source, reason=reason, severity=severity, who=who, round=None,
                         message=f"record {self.seq}" if message is None else message,
                         data={"n": self.seq} if data is None else data, prev=self.prev, hash="0" * 64,
                         replay=replay)
        event = msgspec.structs.replace(unhashed, hash=event_hash(unhashed))
        self.prev = event.hash
        self.sent.append(event)
        return event

    def events_payload(self, events: list[Event]) -> bytes:
        return msgspec.json.encode({"schema": SCHEMA, "site": self.site, "table": self.table, "events": events})

    def publish(self, leaf: str, payload: bytes | dict[str, Any], *, retain: bool = False, wait: bool = True) -> None:
        """``wait`` False: handed to paho only, which keeps it while the broker is away and sends it
        when it is back (a table's changes held at the table)."""
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        info = self.client.publish(self.topic(leaf), data, qos=1, retain=retain)
        if not wait:
            return
        info.wait_for_publish(30)
        assert info.is_published(), f"the broker did not take the publish to {self.topic(leaf)}"

    def send_at_once(self, count: int) -> list[Event]:
        """``count`` new records, one a message, all handed to the broker before any PUBACK is waited for."""
        made = [self.event() for _ in range(count)]
        infos = [self.client.publish(self.topic("events"), self.events_payload([e]), qos=1) for e in made]
        for info in infos:
            info.wait_for_publish(30)
        return made

    def send(self, count: int = 1, *, per_message: int = 1, at: datetime | None = None) -> list[Event]:
        """``count`` new records, ``per_message`` a message."""
        made = [self.event(at=at) for _ in range(count)]
        for first in range(0, count, per_message):
            self.publish("events", self.events_payload(made[first:first + per_message]))
        return made

    def status(self, online: bool = True, session: int | None = None) -> None:
        payload: dict[str, Any] = {"schema": SCHEMA, "site": self.site, "table": self.table, "online": online,
                                   "session": self.session if session is None else session}
        if online:
            payload |= {"release": "0.9.0", "rules": {"name": "casino-000", "sha256": "a" * 64},
                        "devices": [{"role": "shoe", "url": "sim://shoe"}], "time": stamp()}
        self.publish("status", payload, retain=True)

    def state(self, *, backlog: int = 0, oldest_s: float | None = None, at: datetime | None = None,
              alarms: list[dict[str, Any]] | None = None, devices: list[dict[str, Any]] | None = None,
              shoe: dict[str, Any] | None = None, wait: bool = True) -> None:
        self.publish("state", {
            "schema": SCHEMA, "site": self.site, "table": self.table, "time": stamp(at),
            "devices": devices or [{"role": "shoe", "state": "idle", "connected": True}],
            "shoe": shoe or {"state": "in_play", "penetration": "0-25%"}, "rounds": {"this_shoe": 1, "this_hour": 1},
            "alarms": alarms or [], "export": {"delivered_through": self.seq, "backlog": backlog,
                                               "oldest_undelivered_s": oldest_s}}, retain=True, wait=wait)

    def anchor(self, event: Event | None = None, *, export_hash: str | None = None) -> None:
        last = event or self.sent[-1]
        self.publish("anchor", {"schema": SCHEMA, "site": self.site, "table": self.table, "seq": last.seq,
                                "hash": "b" * 64, "export_hash": export_hash or last.hash, "time": last.time},
                     retain=True)


def ago(seconds: float) -> datetime:
    return datetime.now(timezone.utc) - timedelta(seconds=seconds)


class Collected:
    """What a Receiver delivered, kept (thread-safe) for a test to read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.messages: list[Any] = []

    def __call__(self, message: Any) -> None:
        with self._lock:
            self.messages.append(message)

    def topics(self) -> list[str]:
        with self._lock:
            return [m.topic for m in self.messages]

    def of(self, leaf: str) -> list[Any]:
        with self._lock:
            return [m for m in self.messages if m.topic.endswith(f"/{leaf}")]


class Floor:
    """The real ``cardfloor`` process on ``config_file``, its stderr (the log, JSON lines) in a file,
    and what it archived read straight from PostgreSQL."""

    def __init__(self, config_file: Path, dsn: str, broker: Mosquitto, *, env: dict[str, str] | None = None) -> None:
        self.config_file, self.dsn, self.broker, self.env = config_file, dsn, broker, env or {}
        self.log_file = config_file.with_suffix(".log")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Floor:
        """Start it and return once its subscription stands at the broker (a new session's
        SUBACK, or the session the broker kept)."""
        connected = len(self.events("floor_broker_connected"))
        with self.log_file.open("ab") as out:
            self.proc = subprocess.Popen([CARDFLOOR, "--config", str(self.config_file), "--log-format", "json"],
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         preexec_fn=_die_with_parent, env={**os.environ, **self.env})
        wait_until(lambda: "cardfloor_running" in self.log() or self.proc is None or self.proc.poll() is not None,
                   "cardfloor running")
        assert self.proc.poll() is None, f"cardfloor exited with {self.proc.returncode}:\n{self.log()}"
        wait_until(lambda: len(self.events("floor_broker_connected")) > connected, "cardfloor connected")
        if not self.events("floor_broker_connected")[-1]["session_present"]:
            wait_until(lambda: "Sending SUBACK to cardfloor-test" in self.broker.log(), "cardfloor subscribed")
        return self

    def log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def events(self, name: str) -> list[dict[str, Any]]:
        found = []
        for line in self.log().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("event") == name:
                found.append(entry)
        return found

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)

    def __enter__(self) -> Floor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn, connect_timeout=5) as conn:
            return conn.execute(sql, args).fetchall()

    def seqs(self, site: str, table: str) -> list[int]:
        """Every archived seq of the table, in order, each as often as it is stored."""
        return [int(seq) for (seq,) in self.query(
            "SELECT r.seq FROM records r JOIN floor_tables t ON t.id = r.tid WHERE t.site = %s AND t.table_name = %s "
            "ORDER BY r.seq", site, table)]

    def alarms(self, kind: str | None = None) -> list[dict[str, Any]]:
        rows = self.query("SELECT site, table_name, kind, key, detail, raised_at, cleared_at FROM floor_alarms "
                          "WHERE %s::text IS NULL OR kind = %s ORDER BY id", kind, kind)
        return [dict(zip(("site", "table", "kind", "key", "detail", "raised_at", "cleared_at"), row)) for row in rows]

    def wait_for_seqs(self, site: str, table: str, seqs: list[int], timeout: float = 60.0) -> None:
        def done() -> bool:
            try:
                return self.seqs(site, table) == seqs
            except psycopg.OperationalError:  # the tables not made yet, or the server restarting
                return False
        def missing() -> str:
            try:
                held = set(self.seqs(site, table))
            except psycopg.OperationalError:
                return "the archive not readable"
            lost = [seq for seq in seqs if seq not in held]
            return f"{len(lost)} missing, the first {lost[:10]}, the last {lost[-3:]}"
        try:
            wait_until(done, f"{site}/{table}'s records {seqs[0]}..{seqs[-1]} archived", timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {missing()}") from None

    def wait_for_alarm(self, kind: str, key: str | None = None, *, cleared: bool = False,
                       timeout: float = 60.0) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            for alarm in self.alarms(kind):
                if (key is None or alarm["key"] == key) and (alarm["cleared_at"] is not None) == cleared:
                    return alarm
            return None
        wait_until(lambda: found() is not None, f"a {'cleared ' if cleared else ''}{kind} alarm {key or ''}", timeout)
        alarm = found()
        assert alarm is not None
        return alarm


def floor_file(tmp_path: Path, broker: Mosquitto, dsn: str, *, alarms: str = "", version: str = "5") -> Path:
    """cardfloor's configuration for ``broker`` and ``dsn`` (no HTTP API), written; its path."""
    floor_config(tmp_path, broker, dsn=dsn, version=version, extra=f"[alarms]\n{alarms}\n" if alarms else "")
    return tmp_path / "cardfloor.toml"
