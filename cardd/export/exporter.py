"""The floor export: the journal published to an MQTT broker cluster, one way (docs/floor.md).

Beside the daemon's event loop, never on it. One thread of its own reads the journal through its
own read-only SQLite connection, hands each record to paho-mqtt and runs paho's input and output
itself (:meth:`Exporter._io`: no network thread to hand each message to); the daemon only calls :meth:`Exporter.notify` after each commit and
:meth:`Exporter.offer_state` with its summary, neither of which waits on anything. So a broker
that is down, slow, refusing or black-holed (SIGSTOP'ed) costs the card path nothing, and a long
backlog's reading and encoding never holds the loop (it shares only the GIL with it).

Store and forward from the journal, not from memory: the next record to send is always read
from the journal after the cursor ("delivered through seq N", in the journal file's ``delivery``
table) and the cursor moves only over records whose PUBACK came back, in seq order. Whatever
ends a connection (a broker's outage, a failover, a daemon killed mid-export) the export resumes
at the cursor: a record may be sent twice, never lost; consumers dedupe on (site, table, seq).
The export chain (docs/floor.md "The export chain") is computed in seq order as records are
encoded; its hash at the cursor is kept with the cursor, so a resend of a record, whatever ended
the connection, carries the same ``prev`` and ``hash`` as its first send.
Memory is bounded by :data:`WINDOW` records in flight and one read batch, whatever the backlog.

The table subscribes to nothing: no command reaches it from the floor.
"""
from __future__ import annotations

import math
import random
import select
import socket
import ssl
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

import paho.mqtt.client as mqtt
import structlog
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.reasoncodes import ReasonCode

from cardd.config import ExportConfig
from cardd.export import payloads
from cardd.export.topics import ANCHOR, EVENTS, STATE, STATUS, topic
from cardd.journal import Journal, JournalError, JournalWriteError, Record
from drivers.reconnect import Backoff

log = structlog.get_logger(__name__)

#: records published and not yet acknowledged, at most: what a round trip to the broker carries
WINDOW = 2_000
#: records read from the journal at a time
READ_BATCH = 500
#: the cursor is written at most this often while records flow (and whenever they stop)
CURSOR_EVERY_S = 0.5
#: the state topic at most this often when it changed, and at least this often when it did not
STATE_EVERY_S, STATE_REFRESH_S = 1.0, 60.0
#: MQTT keepalive: a broker that answers nothing is found within about twice this
KEEPALIVE_S = 5
#: between broker attempts, each drawn between half and the whole of the schedule's delay (so the
#: tables of a floor that lost its broker do not all come back in the same instant); a connection
#: that stayed up ``stable`` s starts the schedule over. A cap of 5 s: a restarted broker has its
#: tables back within seconds, and 5,000 tables retrying meet it at about 1,300 attempts a second
BACKOFF = Backoff(initial=0.5, factor=2.0, cap=5.0, stable=10.0)
#: a stop waits this long for what is in flight, then says the table is offline
STOP_FLUSH_S = 2.0
#: the records that end a shoe: an anchor follows each once delivered
SHOE_END_REASONS = frozenset({"RECONCILED", "RECONCILIATION_FAILED", "SHOE_VOID"})
DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883}
#: the status's problem while the cursor cannot be written (cleared once it is)
CURSOR_PROBLEM = "the export's cursor cannot be written"


@dataclass(frozen=True, slots=True)
class TableFacts:
    """What the status topic says of the table; fixed while the daemon runs."""
    release: str
    rules_name: str
    rules_sha256: str
    devices: tuple[tuple[str, str], ...]  # (role, URL)


@dataclass(frozen=True, slots=True)
class ExportStatus:
    """Where the export stands, for STATE and ``cardctl status``."""
    connected: bool
    broker: str | None
    session: int
    delivered_through: int
    backlog: int
    oldest_undelivered_s: float | None
    problem: str | None

    def to_json_dict(self) -> dict[str, Any]:
        return {"connected": self.connected, "broker": self.broker, "session": self.session,
                "delivered_through": self.delivered_through, "backlog": self.backlog,
                "oldest_undelivered_s": self.oldest_undelivered_s, "problem": self.problem}


@dataclass(slots=True)
class _Sent:
    """One events message in flight: records ``first``..``seq``, the last of them ``record``."""
    first: int
    first_ts_ns: int  # the first record's time: the backlog's age while it waits
    seq: int
    record: Record
    chain: str  # the export chain's hash of ``record``
    at: float  # the clock when it was handed to paho
    ends_shoe: bool  # it carries a shoe's end record: an anchor follows its delivery


@dataclass(slots=True)
class _Connection:
    """One broker connection's bookkeeping; paho's network thread only appends to ``acks``."""
    url: str
    client: mqtt.Client
    replay_through: int  # records up to here were committed before this connection: replayed
    connected: threading.Event = field(default_factory=threading.Event)
    lost: threading.Event = field(default_factory=threading.Event)
    refused: str | None = None
    acks: deque[tuple[int, bool, str]] = field(default_factory=deque)  # (mid, ok, reason)
    mids: dict[int, int] = field(default_factory=dict)  # an events message's mid -> its last seq (0: another topic)
    leaves: dict[int, str] = field(default_factory=dict)  # the mid of a message of another topic -> the topic's leaf
    inflight: deque[_Sent] = field(default_factory=deque)
    acked: set[int] = field(default_factory=set)
    pending: deque[Record] = field(default_factory=deque)  # read, not yet sent
    since: float = 0.0


class Exporter:
    def __init__(self, config: ExportConfig, journal: Journal, facts: TableFacts, *,
                 clock: Callable[[], float] = time.monotonic, wall_ns: Callable[[], int] = time.time_ns) -> None:
        self.config, self.journal, self.facts = config, journal, facts
        self._clock, self._wall_ns = clock, wall_ns
        self._topics = {leaf: topic(config.site, config.table, leaf) for leaf in (STATUS, EVENTS, STATE, ANCHOR)}
        self._thread = threading.Thread(target=self._run, name="cardd-export", daemon=True)
        #: a byte written here wakes the export's thread from its select (a commit, the state, the stop)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._stopping = threading.Event()
        self._status_lock = threading.Lock()
        self._head = journal.last_seq  # the last committed seq, as notify said (an int: set atomically)
        delivery = journal.delivery()
        self._delivered, self._session = delivery.delivered_through, delivery.session
        #: the export chain's hash of record ``_delivered``; a cursor of a release before the chain
        #: (or none delivered) has none: the chain starts at the next record sent
        self._chain = delivery.chain or payloads.CHAIN_START
        self._cursor_written, self._cursor_at = self._delivered, 0.0
        self._last_delivered: Record | None = None
        self._anchored, self._anchor_at, self._anchor_due = 0, clock(), False
        self._state_part: dict[str, Any] | None = None
        self._state_sent: bytes | None = None
        self._state_at = -STATE_REFRESH_S
        self._settled: set[str] = set()  # after_round: rounds found settled
        #: after_round: the seq of a settlement, and of a shoe's end, journaled after the records held
        self._settled_through = self._shoe_ended_through = 0
        self._status = ExportStatus(False, None, self._session, self._delivered, self._head - self._delivered,
                                    None, None)
        self._oldest_ts: tuple[int, int] | None = None  # (seq, ts_ns) of the first undelivered record read
        self._oldest_looked = -1.0
        self._reader: Journal | None = None  # the export's own read-only connection

    # ---- the daemon's side: none of these waits ---------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def notify(self, last_seq: int) -> None:
        """Records through ``last_seq`` are committed (any thread)."""
        if last_seq > self._head:
            self._head = last_seq
            self._poke()

    def offer_state(self, part: dict[str, Any]) -> None:
        """The table's side of the state topic, the latest wins: :func:`payloads.state_payload`'s
        arguments but the export's own (devices, shoe, rounds_this_shoe, rounds_this_hour, alarms,
        alarm_since_ns)."""
        self._state_part = part
        self._poke()

    def status(self) -> ExportStatus:
        with self._status_lock:
            return self._status

    def delivered_through(self) -> int:
        """What retention may prune through: every record after it waits for a broker."""
        return self._delivered

    def stop(self, timeout: float = STOP_FLUSH_S + 3.0) -> None:
        """Send what is in flight (``STOP_FLUSH_S``), say the table is offline, write the cursor."""
        self._stopping.set()
        self._poke()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _poke(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:  # full (a wake is pending anyway) or closed (stopped)
            pass

    # ---- the export's thread ----------------------------------------------------------------

    def _run(self) -> None:
        attempt, index = 0, 0
        try:
            while not self._stopping.is_set():
                reader = self._reader
                if reader is None:
                    try:
                        reader = self._reader = Journal.open(self.journal.path, readonly=True)
                    except JournalError as exc:
                        self._set_status(problem=f"the journal cannot be read for export: {exc}")
                        self._pause(BACKOFF.cap)
                        continue
                url = self.config.brokers[index % len(self.config.brokers)]
                began = self._clock()
                connected = self._connection(url, reader)
                index += 1  # whatever ended it, the next node: failover across a cluster
                attempt = 1 if connected and self._clock() - began >= BACKOFF.stable else attempt + 1
                if not self._stopping.is_set():
                    delay = BACKOFF.delay(attempt) if attempt > 1 or not connected else 0.0
                    self._pause(random.uniform(delay / 2, delay))
        except Exception as exc:  # the export must never take the daemon down: say it, and stay stopped
            log.exception("export_failed", error=str(exc))
            self._set_status(connected=False, problem=f"the export stopped: {type(exc).__name__}: {exc}")
        finally:
            self._write_cursor(force=True)
            if self._reader is not None:
                self._reader.close()

    def _pause(self, seconds: float) -> None:
        deadline = self._clock() + seconds
        while not self._stopping.is_set() and self._clock() < deadline:
            self._stopping.wait(min(0.5, max(0.0, deadline - self._clock())))
            self._refresh_oldest(None)

    def _connection(self, url: str, reader: Journal) -> bool:
        """One broker connection, from CONNECT to its end; whether it was ever up."""
        session = self._next_session()
        try:
            client = self._client(url, session)
        except (OSError, ValueError, ssl.SSLError) as exc:
            self._failed(url, f"cannot set up the connection: {_reason(exc)}")
            return False
        conn = _Connection(url, client, replay_through=self._head)
        client.on_connect = lambda _c, _u, _f, code, _p: self._on_connect(conn, code)
        client.on_disconnect = lambda _c, _u, _f, code, _p: self._on_disconnect(conn, code)
        client.on_publish = lambda _c, _u, mid, code, _p: self._on_publish(conn, mid, code)
        found = urlsplit(url)
        host, port = found.hostname or "", found.port or DEFAULT_PORTS[found.scheme]
        try:
            client.connect(host, port, keepalive=KEEPALIVE_S,  # clean_start is MQTT 5's; 3.1.1 has clean_session
                           clean_start=True if self.config.mqtt_version == "5" else mqtt.MQTT_CLEAN_START_FIRST_ONLY)
        except (OSError, ValueError, ssl.SSLError) as exc:
            self._failed(url, f"cannot connect: {_reason(exc)}")
            return False
        try:
            if not self._await_connack(conn):
                return False
            self._connected(conn, session)
            self._stream(conn, reader)
            return True
        finally:
            self._close(conn)

    def _client(self, url: str, session: int) -> mqtt.Client:
        config = self.config
        v5 = config.mqtt_version == "5"
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"cardd-{config.site}-{config.table}",
                             protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311, clean_session=None if v5 else True,
                             reconnect_on_failure=False)
        client.connect_timeout = config.timeout_s
        # no limit of paho's own: WINDOW bounds what is in flight, and paho walks every message it
        # holds after each PUBACK while it counts a limit (1,000 in flight: 200 us an acknowledgement)
        client.max_inflight_messages_set(0)
        client.max_queued_messages_set(0)
        if config.username is not None:
            password = None
            if config.password_file is not None:
                password = Path(config.password_file).read_text(encoding="utf-8").rstrip("\r\n")
            client.username_pw_set(config.username, password)
        if urlsplit(url).scheme == "mqtts":
            context = ssl.create_default_context(cafile=None if config.ca_file is None else str(config.ca_file))
            if config.cert_file is not None and config.key_file is not None:
                context.load_cert_chain(str(config.cert_file), str(config.key_file))
            client.tls_set_context(context)
        client.will_set(self._topics[STATUS], payloads.will_payload(site=config.site, table=config.table,
                                                                    session=session), qos=1, retain=True)
        return client

    def _await_connack(self, conn: _Connection) -> bool:
        deadline = self._clock() + self.config.timeout_s
        while not conn.connected.is_set():
            if conn.refused is not None or conn.lost.is_set():
                self._failed(conn.url, conn.refused or "the connection closed before the broker answered")
                return False
            if self._stopping.is_set():
                return False
            if self._clock() >= deadline:
                self._failed(conn.url, f"no answer to CONNECT within {self.config.timeout_s:g} s")
                return False
            self._io(conn, 0.05)
        return True

    def _connected(self, conn: _Connection, session: int) -> None:
        conn.since = self._clock()
        log.info("export_connected", broker=conn.url, session=session, delivered_through=self._delivered,
                 backlog=self._head - self._delivered)
        self._set_status(connected=True, broker=conn.url, problem=None)
        facts, config = self.facts, self.config
        self._publish(conn, STATUS, payloads.status_payload(
            site=config.site, table=config.table, session=session, release=facts.release,
            rules_name=facts.rules_name, rules_sha256=facts.rules_sha256, devices=dict(facts.devices),
            ts_ns=self._wall_ns()), retain=True)
        self._state_sent = None  # a new broker (or one that lost it) gets the state at once

    def _stream(self, conn: _Connection, reader: Journal) -> None:
        """Send, take acknowledgements, move the cursor, until the connection ends or the stop."""
        flush_until: float | None = None
        while True:
            self._take_acks(conn)
            if conn.refused is not None:
                self._failed(conn.url, conn.refused)
                return
            if conn.lost.is_set():
                self._failed(conn.url, "the broker closed the connection")
                return
            now = self._clock()
            if conn.inflight and now - conn.inflight[0].at > self.config.timeout_s:
                self._failed(conn.url, f"no PUBACK for seq {conn.inflight[0].seq} within {self.config.timeout_s:g} s")
                return
            self._write_cursor(force=not conn.inflight)
            self._maybe_anchor(conn, now)
            if self._stopping.is_set():  # the records to the last (the stop's own) go first, for a while
                if flush_until is None:
                    flush_until = now + STOP_FLUSH_S
                self._fill(conn, reader)
                if (not conn.inflight and self._delivered >= self._head) or now >= flush_until:
                    self._say_offline(conn)
                    return
            else:
                self._fill(conn, reader)
                self._maybe_state(conn, now)
            self._refresh_oldest(conn)
            self._io(conn, 0.25 if conn.inflight else 1.0)

    def _fill(self, conn: _Connection, reader: Journal) -> None:
        """Publish the next records, up to :data:`WINDOW` in flight: what the journal has ready, as
        many as an events message carries (payloads.EVENTS_MAX_RECORDS) a message."""
        config = self.config
        while True:
            sent_through = conn.inflight[-1].seq if conn.inflight else self._delivered
            prev = conn.inflight[-1].chain if conn.inflight else self._chain
            room = WINDOW - (sent_through - self._delivered)
            if room <= 0:
                return
            if not conn.pending:
                if sent_through >= self._head:
                    return
                conn.pending.extend(reader.query(seq_from=sent_through + 1, limit=READ_BATCH))
                if not conn.pending:
                    return
            events: list[bytes] = []
            size, ends_shoe, first_ts = 0, False, conn.pending[0].ts_ns
            while conn.pending and len(events) < min(room, payloads.EVENTS_MAX_RECORDS) \
                    and size < payloads.EVENTS_MAX_BYTES:
                record = conn.pending[0]
                if config.card_data == "after_round" and not self._may_send(record, reader):
                    break  # its round is not settled: the stream waits for it (docs/floor.md)
                event, digest = payloads.event_payload(record, site=config.site, table=config.table,
                                                       card_data=config.card_data, prev=prev,
                                                       replay=record.seq <= conn.replay_through)
                if events and size + len(event) > payloads.EVENTS_MAX_BYTES:
                    break  # encoded again, from the same prev, at the head of the next message
                conn.pending.popleft()
                events.append(event)
                prev = digest
                size += len(event) + 1
                last, ends_shoe = record, ends_shoe or record.reason in SHOE_END_REASONS
            if not events:
                return
            mid = self._publish(conn, EVENTS, payloads.events_payload(events, site=config.site, table=config.table))
            if mid is None:  # the connection is gone: these are read again after the cursor
                conn.pending.clear()
                return
            conn.mids[mid] = last.seq
            conn.inflight.append(_Sent(sent_through + 1, first_ts, last.seq, last, prev, self._clock(), ends_shoe))
            if conn.pending and config.card_data == "after_round" and not self._may_send(conn.pending[0], reader):
                return

    def _may_send(self, record: Record, reader: Journal) -> bool:
        """after_round: a record that names cards goes once its round is settled; one of no round
        (a burn card, the shoe's verification, a card drawn in error between rounds) once the next
        round after it is settled or its shoe has ended, whichever comes first."""
        round_id = record.round
        if (round_id is not None and round_id in self._settled) or not payloads.carries_cards(record):
            return True
        if round_id is not None:
            of_round = reader.query(round_id=round_id, seq_from=record.seq, limit=None)
            if any(payloads.settled_round(r) == round_id for r in of_round):
                self._settled.add(round_id)
                if len(self._settled) > 10_000:
                    self._settled.clear()  # rounds long past; a miss only costs one query
                return True
        if round_id is None and self._settled_through < record.seq:  # the next settlement of any round
            for state in reader.query(reason="ROUND_STATE", seq_from=record.seq + 1, limit=100):
                if payloads.settled_round(state) is not None:
                    self._settled_through = state.seq
                    break
        if self._shoe_ended_through < record.seq:
            for reason in SHOE_END_REASONS:
                for end in reader.query(reason=reason, seq_from=record.seq + 1, limit=1):
                    self._shoe_ended_through = max(self._shoe_ended_through, end.seq)
        return (self._shoe_ended_through >= record.seq or
                (round_id is None and self._settled_through >= record.seq))

    def _publish(self, conn: _Connection, leaf: str, payload: bytes, *, retain: bool = False) -> int | None:
        info = conn.client.publish(self._topics[leaf], payload, qos=1, retain=retain)
        if info.rc != mqtt.MQTT_ERR_SUCCESS:
            conn.lost.set()
            return None
        if leaf != EVENTS:
            conn.mids[info.mid] = 0
            conn.leaves[info.mid] = leaf
        return info.mid

    def _take_acks(self, conn: _Connection) -> None:
        while conn.acks:
            mid, ok, reason = conn.acks.popleft()
            seq = conn.mids.pop(mid, None)
            leaf = conn.leaves.pop(mid, EVENTS)
            if not ok:  # MQTT 5: the broker refused it (not authorized, quota...): it was not stored
                conn.refused = f"the broker refused a publish to {self._topics[leaf]}: {reason}"
                return
            if seq:
                conn.acked.add(seq)
        while conn.inflight and conn.inflight[0].seq in conn.acked:
            sent = conn.inflight.popleft()
            conn.acked.discard(sent.seq)
            self._delivered, self._chain = sent.seq, sent.chain
            self._last_delivered = sent.record
            self._anchor_due = self._anchor_due or sent.ends_shoe

    def _maybe_anchor(self, conn: _Connection, now: float) -> None:
        record = self._last_delivered
        if record is None or record.seq <= self._anchored:
            return
        if self._anchor_due or now - self._anchor_at >= self.config.anchor_every_s:
            self._publish(conn, ANCHOR, payloads.anchor_payload(site=self.config.site, table=self.config.table,
                                                                seq=record.seq, chain_hash=record.hash,
                                                                export_hash=self._chain, ts_ns=record.ts_ns),
                          retain=True)
            self._anchored, self._anchor_at, self._anchor_due = record.seq, now, False

    def _maybe_state(self, conn: _Connection, now: float) -> None:
        part = self._state_part
        if part is None or now - self._state_at < STATE_EVERY_S:
            return
        status = self.status()
        export = {"delivered_through": status.delivered_through, "backlog": status.backlog,
                  "oldest_undelivered_s": status.oldest_undelivered_s}
        # compared without its time, which differs every second: an unchanged table is sent again
        # only each STATE_REFRESH_S (the floor's clock offset and last heard of)
        timeless = payloads.state_payload(site=self.config.site, table=self.config.table, ts_ns=0,
                                          export=export, **part)
        if timeless == self._state_sent and now - self._state_at < STATE_REFRESH_S:
            return
        self._publish(conn, STATE, payloads.state_payload(site=self.config.site, table=self.config.table,
                                                          ts_ns=self._wall_ns(), export=export, **part), retain=True)
        self._state_sent, self._state_at = timeless, now

    def _say_offline(self, conn: _Connection) -> None:
        """A clean stop: the last delivered record anchored, then the retained status says offline
        (the Will is for a stop that was not)."""
        self._anchor_due = True
        self._maybe_anchor(conn, self._clock())
        self._publish(conn, STATUS, payloads.will_payload(site=self.config.site, table=self.config.table,
                                                          session=self._session), retain=True)
        deadline = self._clock() + 1.0
        while conn.mids and self._clock() < deadline and not conn.lost.is_set():
            self._io(conn, 0.05)
            self._take_acks(conn)

    def _close(self, conn: _Connection) -> None:
        try:
            conn.client.disconnect()  # DISCONNECT written at once (no network thread), the socket closed
        except Exception:  # a socket already gone: nothing left to close
            pass
        self._write_cursor(force=True)
        self._set_status(connected=False)

    # ---- the connection's input and output, on this thread -------------------------------------

    def _io(self, conn: _Connection, timeout: float) -> None:
        """Wait up to ``timeout`` for the broker's socket or a wake, then let paho read, write and
        keep the connection alive: paho's own loop for an outside event loop (socket, loop_read,
        loop_write, loop_misc), run here, so publishing takes no lock another thread holds and
        costs no wake-up of a network thread per message."""
        client = conn.client
        sock = client.socket()
        if sock is None:
            conn.lost.set()
            return
        pending = getattr(sock, "pending", None)  # TLS: bytes decrypted already, which poll cannot see
        ready = pending is not None and pending() > 0
        # poll(), not select(): select takes no descriptor above 1023, and a daemon with many
        # clients (or a process holding many tables) has them
        poller = select.poll()
        try:
            poller.register(sock, select.POLLIN | (select.POLLOUT if client.want_write() else 0))
            poller.register(self._wake_r, select.POLLIN)
            events = dict(poller.poll(0 if ready else math.ceil(timeout * 1000)))
        except (OSError, ValueError):  # the socket closed under it
            conn.lost.set()
            return
        mine = events.get(sock.fileno(), 0)
        if mine & select.POLLNVAL:
            conn.lost.set()
            return
        trouble = select.POLLERR | select.POLLHUP  # paho's read finds what went wrong
        readable, writable = mine & (select.POLLIN | trouble), mine & select.POLLOUT
        if events.get(self._wake_r.fileno(), 0):
            try:
                while self._wake_r.recv(4096):
                    pass
            except BlockingIOError:
                pass
        for step, due in ((client.loop_read, ready or bool(readable)), (client.loop_write, bool(writable)),
                          (client.loop_misc, True)):
            if due and step() not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_AGAIN):
                conn.lost.set()
                return

    # ---- paho's callbacks (inside loop_read, on this thread): note, nothing more -------------------

    def _on_connect(self, conn: _Connection, code: ReasonCode) -> None:
        if code.is_failure:
            conn.refused = f"the broker refused the connection: {code}"
        else:
            conn.connected.set()

    def _on_disconnect(self, conn: _Connection, code: ReasonCode) -> None:
        conn.lost.set()

    def _on_publish(self, conn: _Connection, mid: int, code: ReasonCode) -> None:
        conn.acks.append((mid, not code.is_failure, str(code)))

    # ---- the cursor, the session, the status --------------------------------------------------

    def _next_session(self) -> int:
        try:
            self._session = self.journal.next_export_session()
        except JournalError as exc:  # a full disk: counted on in memory, said in the status
            self._session += 1
            log.warning("export_session_not_written", error=str(exc))
        self._set_status()
        return self._session

    def _write_cursor(self, *, force: bool) -> None:
        delivered, chain = self._delivered, self._chain
        if delivered == self._cursor_written:
            return
        now = self._clock()
        if not force and now - self._cursor_at < CURSOR_EVERY_S:
            return
        self._cursor_at = now
        try:
            self.journal.note_delivered(delivered, chain)
        except JournalError as exc:  # kept in memory; a restart sends these again (consumers dedupe)
            cause = exc.cause if isinstance(exc, JournalWriteError) else str(exc)  # the cause alone: one line
            self._set_status(problem=f"{CURSOR_PROBLEM}: {cause}")
            return
        self._cursor_written = delivered
        problem = self.status().problem
        # written again (room on the disk): that problem is over; a broker's own stays
        self._set_status(**({"problem": None} if problem is not None and problem.startswith(CURSOR_PROBLEM) else {}))

    def _refresh_oldest(self, conn: _Connection | None) -> None:
        """The first undelivered record's time, for the backlog's age: from what is in hand, else a
        lookup in the journal at most once a second."""
        after = self._delivered
        if after >= self._head:
            self._oldest_ts = None
        elif conn is not None and conn.inflight:
            self._oldest_ts = (conn.inflight[0].first, conn.inflight[0].first_ts_ns)
        elif conn is not None and conn.pending:
            self._oldest_ts = (conn.pending[0].seq, conn.pending[0].ts_ns)
        elif self._reader is not None and (self._oldest_ts is None or self._oldest_ts[0] != after + 1):
            now = self._clock()
            if now - self._oldest_looked >= 1.0:
                self._oldest_looked = now
                try:
                    found = self._reader.query(seq_from=after + 1, limit=1)
                except JournalError:
                    found = []
                self._oldest_ts = (found[0].seq, found[0].ts_ns) if found else None
        self._set_status()

    def _set_status(self, **changes: Any) -> None:
        with self._status_lock:
            old = self._status
            oldest = self._oldest_ts
            age = None if oldest is None or self._delivered >= self._head else \
                max(0.0, round((self._wall_ns() - oldest[1]) / 1e9, 3))
            values = {"connected": old.connected, "broker": old.broker, "problem": old.problem, **changes}
            self._status = ExportStatus(values["connected"], values["broker"], self._session, self._delivered,
                                        max(0, self._head - self._delivered), age, values["problem"])

    def _failed(self, url: str, why: str) -> None:
        previous = self.status().problem
        text = f"{url}: {why}"
        if text != previous:
            log.warning("export_broker_failed", broker=url, why=why, delivered_through=self._delivered,
                        backlog=self._head - self._delivered)
        self._set_status(connected=False, problem=text)


def _reason(exc: BaseException) -> str:
    """An OS or TLS error in a sentence of its own, not the library's repr."""
    if isinstance(exc, ssl.SSLCertVerificationError):  # OpenSSL's code alone says too little
        return (f"TLS: the broker's certificate did not pass the check ({exc.verify_message or exc.reason}); "
                "is ca_file the CA that signed it?")
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or exc.strerror or type(exc).__name__}"
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc) or type(exc).__name__
