"""A table as the floor sees it, for cardfloor's tests: a plain paho client with the table's own
broker user publishing the contract's payloads (events chained with contract.event_hash), and
the floor's configuration for a test broker."""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import msgspec
import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from cardd.floor.config import FloorConfig, parse_config
from cardd.floor.contract import CHAIN_START, Event, event_hash
from tests.support.brokers import Mosquitto, read_password, write_password_file

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

    def event(self, *, at: datetime | None = None, reason: str = "CARD_DRAWN", replay: bool = False) -> Event:
        """The next record, chained to the last made (``at``: its time)."""
        self.seq += 1
        unhashed = Event(schema=SCHEMA, site=self.site, table=self.table, seq=self.seq, time=stamp(at), kind="event",
                         source="tracker", reason=reason, severity="info", who=None, round=None,
                         message=f"record {self.seq}", data={"n": self.seq}, prev=self.prev, hash="0" * 64,
                         replay=replay)
        event = msgspec.structs.replace(unhashed, hash=event_hash(unhashed))
        self.prev = event.hash
        self.sent.append(event)
        return event

    def events_payload(self, events: list[Event]) -> bytes:
        return msgspec.json.encode({"schema": SCHEMA, "site": self.site, "table": self.table, "events": events})

    def publish(self, leaf: str, payload: bytes | dict[str, Any], *, retain: bool = False) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        info = self.client.publish(self.topic(leaf), data, qos=1, retain=retain)
        info.wait_for_publish(30)
        assert info.is_published(), f"the broker did not take the publish to {self.topic(leaf)}"

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
              alarms: list[dict[str, Any]] | None = None) -> None:
        self.publish("state", {
            "schema": SCHEMA, "site": self.site, "table": self.table, "time": stamp(at),
            "devices": [{"role": "shoe", "state": "idle", "connected": True}],
            "shoe": {"state": "in_play", "penetration": "0-25%"}, "rounds": {"this_shoe": 1, "this_hour": 1},
            "alarms": alarms or [], "export": {"delivered_through": self.seq, "backlog": backlog,
                                               "oldest_undelivered_s": oldest_s}}, retain=True)

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
