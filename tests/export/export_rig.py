"""The floor export's end-to-end rig: a real daemon (``cardd --config``) on simulated devices the
test owns (so they outlive a killed daemon, as hardware does), exporting to a real broker, and a
real subscriber on the floor's side that keeps everything it receives.

    with ExportTable(directory, mosquitto) as table, Subscriber(mosquitto.url, mosquitto.floor) as floor:
        table.deal_rounds(3)
        table.stop()
        floor.wait_for_seq(table.last_seq())
        assert floor.seqs(table.site, table.table) == list(range(1, table.last_seq() + 1))
        export_chain(floor, table.table)  # every hash recomputes, every resend the same, each linked
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from cardd.export.payloads import CARD_TOKEN
from cardd.floor import contract
from cardd.journal import Journal, Record
from simulators.rig import SimulatedTable
from tests.daemon.daemon_rig import Client, Daemon, open_and_bet, play_out, shuffle_and_load, write_config
from tests.support.brokers import Credentials

SITE = "floor-1"


@dataclass(frozen=True)
class Received:
    topic: str
    payload: dict[str, Any]
    retained: bool
    text: str  # the payload as it arrived


class Subscriber:
    """A floor consumer on ``url``: subscribes to ``cardd/v1/#`` at QoS 1 with a persistent session
    (MQTT 3.1.1 clean_session false, as NATS needs), so what is published while it is away waits for
    it; reconnects by itself (paho's loop) after a broker restart."""

    def __init__(self, url: str, credentials: Credentials, client_id: str = "floor-test") -> None:
        found = urlsplit(url)
        self.host, self.port = found.hostname or "127.0.0.1", found.port or 1883
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._subscribed = threading.Event()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False,
                                  protocol=mqtt.MQTTv311)
        self.client.username_pw_set(credentials.user, credentials.password)
        self.client.reconnect_delay_set(1, 1)  # whole seconds: paho's unit
        self.client.on_connect = self._connected
        self.client.on_subscribe = lambda *_: self._subscribed.set()
        self.client.on_message = self._message

    def __enter__(self) -> Subscriber:
        self.client.connect(self.host, self.port, keepalive=5)
        self.client.loop_start()
        assert self._subscribed.wait(20), f"the subscriber never subscribed at {self.host}:{self.port}"
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def _connected(self, client: mqtt.Client, _userdata: Any, _flags: Any, code: Any, _properties: Any) -> None:
        if not code.is_failure:
            client.subscribe("cardd/v1/#", qos=1)

    def _message(self, _client: mqtt.Client, _userdata: Any, message: mqtt.MQTTMessage) -> None:
        text = message.payload.decode()
        with self._lock:
            self.received.append(Received(message.topic, json.loads(text), bool(message.retain), text))

    def messages(self, leaf: str, table: str | None = None) -> list[Received]:
        with self._lock:
            return [m for m in self.received if m.topic.endswith(f"/{leaf}")
                    and (table is None or m.payload.get("table") == table)]

    def events(self, table: str) -> list[dict[str, Any]]:
        """Every record received of ``table``, in the order received (a message carries one or more)."""
        return [event for m in self.messages("events", table) for event in m.payload["events"]]

    def seqs(self, table: str) -> list[int]:
        """The events' seqs after dedupe on (site, table, seq), in the order each first arrived."""
        seen: dict[int, None] = {}
        for event in self.events(table):
            seen.setdefault(event["seq"], None)
        return list(seen)

    def wait_for(self, check: Callable[[], bool], what: str | Callable[[], str], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, f"the floor never got {what() if callable(what) else what}"
            time.sleep(0.05)

    def wait_for_seq(self, table: str, seq: int, timeout: float = 60.0) -> None:
        self.wait_for(lambda: seq in set(self.seqs(table)), f"record {seq} of {table}", timeout)


def export_chain(floor: Subscriber, table: str) -> dict[int, str]:
    """``table``'s export chain as the floor reads it (cardd.floor.contract, strictly): seq -> hash.
    Every event's hash recomputes, a seq sent again carries the prev and hash of its first send,
    each prev is the hash of seq - 1 and the first seq's is the chain's start."""
    chain: dict[int, tuple[str, str]] = {}
    for message in floor.messages("events", table):
        decoded = contract.decode(contract.parse_topic(message.topic), message.text.encode())
        assert isinstance(decoded, contract.Events)
        for event in decoded.events:
            assert contract.event_hash(event) == event.hash, f"seq {event.seq}: its hash does not recompute"
            first = chain.setdefault(event.seq, (event.prev, event.hash))
            assert first == (event.prev, event.hash), \
                f"seq {event.seq} sent again with another prev and hash: {first}, then {(event.prev, event.hash)}"
    seqs = sorted(chain)
    assert seqs and seqs == list(range(seqs[0], seqs[-1] + 1)), f"{table}: the chain has gaps"
    assert chain[seqs[0]][0] == contract.CHAIN_START, f"{table}: the chain starts at {chain[seqs[0]][0]}"
    broken = [seq for seq in seqs[1:] if chain[seq][0] != chain[seq - 1][1]]
    assert not broken, f"{table}: prev is not the hash of the record before at seq {broken[:10]}"
    return {seq: digest for seq, (_, digest) in chain.items()}


def names_a_card(received: list[Received]) -> list[str]:
    """Each payload text that names a card (rank and suit, as the tracker writes them)."""
    return [m.text for m in received if CARD_TOKEN.search(m.text)]


#: ``[api]`` for a table dealt by a test: its STATE polls (two requests a card, no pause when the
#: card is already counted) go past the default 50 requests a second, and the daemon closes a
#: connection that floods it
FLAT_OUT = {"rate": 2000.0}


class ExportTable:
    """A table exporting to ``brokers``: simulated devices on ptys, the daemon started from a
    configuration whose ``[export]`` holds ``export`` (site, table, brokers, user and password
    file are filled in)."""

    def __init__(self, directory: Path, brokers: list[str], table: str, *, user: str | None = None,
                 password_file: Path | None = None, journal_path: Path | None = None,
                 prefix: list[str] | None = None, api: dict[str, int | float] | None = None,
                 devices_directory: Path | None = None, **export: Any) -> None:
        """``journal_path`` elsewhere than the folder and ``prefix`` (a command that execs cardd:
        tests/support/full_disk.py) put the journal on a disk of the test's own; ``api``: more
        keys of ``[api]`` (by default :data:`FLAT_OUT`); ``devices_directory``: where the
        simulated devices' pty links are (their URLs in ``[devices]`` name it), else a temp dir."""
        self.directory, self.site, self.table = directory, SITE, table
        self.journal_path = journal_path or directory / "journal.sqlite3"
        self.prefix, self.api = prefix, FLAT_OUT if api is None else api
        self.sim = SimulatedTable.over_ptys(directory=devices_directory)
        self.export = {"brokers": brokers, "site": SITE, "table": table, "timeout_s": 2.0, **export}
        if user is not None:
            self.export["username"] = user
        if password_file is not None:
            self.export["password_file"] = str(password_file)
        self.daemon: Daemon | None = None
        self._client: Client | None = None

    def __enter__(self) -> ExportTable:
        self.sim.__enter__()
        self.config = write_config(self.directory, self.sim.shoe.url, self.sim.shuffler.url,
                                   journal={"path": str(self.journal_path)}, api=self.api)
        lines = ["", "[export]"] + [f"{key} = {json.dumps(value)}" for key, value in self.export.items()]
        with self.config.open("a") as file:
            file.write("\n".join(lines) + "\n")
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.daemon is not None:
            self.daemon.kill()
        self.sim.__exit__(exc_type, exc, tb)

    def start(self) -> None:
        self.daemon = Daemon(["--config", str(self.config)], self.directory / "cardd.sock", prefix=self.prefix)
        self._client = None

    @property
    def client(self) -> Client:
        assert self.daemon is not None
        if self._client is None:
            self._client = self.daemon.client()
        return self._client

    def deal(self, cards: int) -> None:
        self.sim.shoe.call(self.sim.shoe.device.deal, cards)

    def shuffle_and_load(self, client: Client | None = None) -> None:
        shuffle_and_load(client or self.client, lambda: self.sim.hand_off(0.8), self.deal)

    def play_round(self, client: Client | None = None) -> dict[str, Any]:
        """One round of two players, each standing: it ends settled. ``client``: another thread's
        own connection (one connection answers one thread)."""
        client = client or self.client
        open_and_bet(client)
        return play_out(client, self.deal, lambda _state: None)

    def deal_rounds(self, rounds: int, client: Client | None = None) -> None:
        client = client or self.client
        if client.state()["shoe"]["state"] not in ("in_play", "burning"):
            self.shuffle_and_load(client)
        for _ in range(rounds):
            self.play_round(client)

    def export_state(self) -> dict[str, Any]:
        export: dict[str, Any] = self.client.state()["export"]
        return export

    def wait_export(self, check: Callable[[dict[str, Any]], bool], what: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            export = self.export_state()
            if check(export):
                return export
            assert time.monotonic() < deadline, f"the export never got to {what}: {export}"
            time.sleep(0.1)

    def kill(self) -> None:
        assert self.daemon is not None
        if self._client is not None:
            self._client.close()
        self.daemon.kill()
        self.daemon = self._client = None

    def stop(self) -> None:
        assert self.daemon is not None
        if self._client is not None:
            self._client.close()
        code, err = self.daemon.stop()
        assert code == 0, err
        self.daemon = self._client = None

    def records(self) -> list[Record]:
        with Journal.open(self.journal_path, readonly=True) as journal:
            return journal.query(limit=None)

    def last_seq(self) -> int:
        with Journal.open(self.journal_path, readonly=True) as journal:
            return journal.last_seq
