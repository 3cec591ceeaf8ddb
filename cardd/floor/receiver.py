"""cardfloor's side of MQTT: one persistent session at the broker, read on a thread of its own.

The floor subscribes to every table's topics (contract.TOPIC_FILTER) at QoS 1 under a fixed client
id with a session the broker keeps (MQTT 5: clean_start false and a session that never expires;
3.1.1: clean_session false). Acknowledgement is manual: a message is acknowledged only once the
service has committed what it carried (:meth:`Receiver.ack`), so whatever ends cardfloor between
receipt and commit (a SIGKILL, PostgreSQL down, a power cut), the broker still holds the message
and sends it again on the next connection. The service acknowledges in the order it received, as
MQTT requires of PUBACKs; a broker lets only so many messages wait unacknowledged (MQTT 5's
Receive Maximum, mosquitto's max_inflight_messages for 3.1.1), which is the floor's backpressure.

A broker that is down, refuses the floor or stops answering is one log line (each new reason
once) and the next URL of the list after a backoff with jitter, never an end of cardfloor.
"""
from __future__ import annotations

import random
import select
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit

import paho.mqtt.client as mqtt
import structlog
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from cardd.floor.config import BrokerConfig
from cardd.floor.contract import MAX_PAYLOAD, TOPIC_FILTER

log = structlog.get_logger(__name__)

DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883}
KEEPALIVE_S = 10
#: seconds without a CONNACK before a broker is given up for the next
CONNECT_TIMEOUT_S = 10.0
#: MQTT 5: the session outlives any disconnection (0xFFFFFFFF: it never expires)
SESSION_EXPIRY = 0xFFFFFFFF
#: MQTT 5: messages the broker may send before the floor acknowledges one (the floor's window)
RECEIVE_MAXIMUM = 100
#: packets read from the socket in one turn of the loop at most (acknowledgements are sent between turns)
READ_AT_ONCE = 100
#: MQTT 5: the largest packet the floor takes: the contract's largest payload and room for the
#: fixed header, the topic (at most 152 bytes) and the packet id; the broker drops a larger one
MAX_PACKET = MAX_PAYLOAD + 512


@dataclass(frozen=True)
class Backoff:
    """Delays between broker attempts: ``initial`` doubling to ``cap``; a connection that stayed up
    ``stable`` s starts over. Each delay is drawn between half and the whole of the schedule's, so
    cardfloor instances (and the tables) that lost one broker do not come back in one instant."""
    initial: float = 0.5
    factor: float = 2.0
    cap: float = 5.0
    stable: float = 10.0

    def delay(self, attempt: int) -> float:
        full = min(self.cap, self.initial * self.factor ** max(0, attempt - 1))
        return random.uniform(full / 2, full)


BACKOFF = Backoff()


@dataclass(frozen=True, slots=True)
class Received:
    """One message as the broker delivered it, to acknowledge with :meth:`Receiver.ack` once its
    content is committed. ``connection`` numbers the connection it came on: a message of an older
    one is not acknowledged (its packet id means nothing now); the broker sends it again."""
    topic: str
    payload: bytes
    mid: int
    connection: int
    retained: bool
    duplicate: bool
    received_at: datetime


@dataclass(frozen=True, slots=True)
class ReceiverStatus:
    """The floor's link to the broker: up or not, the node it is at (or tried last), since when
    it has been up or down (the last flip; before the first connection, the receiver's start),
    the last reason a connection failed or ended, and how many connections it has made."""
    connected: bool = False
    broker: str | None = None
    problem: str | None = None
    connections: int = 0
    since: datetime | None = None


@dataclass(slots=True)
class _Attempt:
    url: str
    client: mqtt.Client
    number: int
    connected: threading.Event = field(default_factory=threading.Event)
    lost: threading.Event = field(default_factory=threading.Event)
    refused: str | None = None
    session_present: bool = False


class Receiver:
    """The floor's subscription: :meth:`start` runs it on its own thread; each message goes to
    ``deliver`` (called on that thread, in the order received: hand it to the event loop), and each
    flip of the link, up or down, to ``flipped`` (on that thread too)."""

    def __init__(self, config: BrokerConfig, deliver: Callable[[Received], None], *,
                 backoff: Backoff = BACKOFF, flipped: Callable[[ReceiverStatus], None] | None = None) -> None:
        self.config, self._deliver, self._backoff, self._flipped = config, deliver, backoff, flipped
        self._thread = threading.Thread(target=self._run, name="cardfloor-mqtt", daemon=True)
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # the status, read from the event loop's thread
        self._status = ReceiverStatus(since=datetime.now(timezone.utc))
        self._said: str | None = None
        self._acks: deque[Received] = deque()
        #: a byte written here wakes the thread from its select (an ack to send, the stop)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self._wake_w.send(b"\0")
        if self._thread.is_alive():
            self._thread.join(timeout)

    def status(self) -> ReceiverStatus:
        with self._lock:
            return self._status

    def ack(self, message: Received) -> None:
        """Acknowledge ``message`` (any thread; in the order received). The receiver's thread sends
        the PUBACK, on the connection the message came on only: after a reconnection the broker
        sends it again instead, and the archive drops it as a duplicate."""
        self._acks.append(message)
        try:
            self._wake_w.send(b"\0")
        except OSError:  # full (a wake is pending anyway) or closed (stopped)
            pass

    # ---- the thread ------------------------------------------------------------------------

    def _run(self) -> None:
        attempt, index, number = 0, 0, 0
        while not self._stopping.is_set():
            url = self.config.urls[index % len(self.config.urls)]
            number += 1
            began = time.monotonic()
            try:
                connected = self._connection(url, number)
            except Exception as exc:  # a fault of paho's or ours: said once, and tried again
                log.exception("floor_receiver_fault", broker=url, error=str(exc))
                connected = False
            index += 1  # whatever ended it, the next node: failover across a cluster
            attempt = 1 if connected and time.monotonic() - began >= self._backoff.stable else attempt + 1
            if not self._stopping.is_set():
                self._stopping.wait(self._backoff.delay(attempt) if attempt > 1 or not connected else 0.0)

    def _connection(self, url: str, number: int) -> bool:
        """One broker connection, from CONNECT to its end; whether it was ever up."""
        try:
            client = self._client(url)
        except (OSError, ValueError, ssl.SSLError) as exc:
            self._failed(url, f"cannot set up the connection: {_reason(exc)}")
            return False
        conn = _Attempt(url, client, number)
        client.on_connect = lambda _c, _u, flags, code, _p: self._on_connect(conn, flags, code)
        client.on_disconnect = lambda _c, _u, _f, _code, _p: conn.lost.set()
        client.on_subscribe = lambda _c, _u, _mid, codes, _p: self._on_subscribe(conn, codes)
        client.on_message = lambda _c, _u, message: self._on_message(conn, message)
        found = urlsplit(url)
        host, port = found.hostname or "", found.port or DEFAULT_PORTS[found.scheme]
        v5 = self.config.mqtt_version == "5"
        properties = None
        if v5:
            properties = Properties(PacketTypes.CONNECT)
            properties.SessionExpiryInterval = SESSION_EXPIRY
            properties.ReceiveMaximum = RECEIVE_MAXIMUM
            properties.MaximumPacketSize = MAX_PACKET
        try:
            client.connect(host, port, keepalive=KEEPALIVE_S, properties=properties,
                           clean_start=False if v5 else mqtt.MQTT_CLEAN_START_FIRST_ONLY)
        except (OSError, ValueError, ssl.SSLError) as exc:
            self._failed(url, f"cannot connect: {_reason(exc)}")
            return False
        try:
            deadline = time.monotonic() + CONNECT_TIMEOUT_S
            while not conn.connected.is_set():
                if conn.refused is not None or conn.lost.is_set():
                    self._failed(url, conn.refused or "the connection closed before the broker answered")
                    return False
                if self._stopping.is_set():
                    return False
                if time.monotonic() >= deadline:
                    self._failed(url, f"no answer to CONNECT within {CONNECT_TIMEOUT_S:g} s")
                    return False
                self._loop(conn, 0.05)
            self._up(conn)
            while not self._stopping.is_set() and not conn.lost.is_set() and conn.refused is None:
                self._loop(conn, 0.2)
            if conn.refused is not None:
                self._failed(url, conn.refused)
            elif conn.lost.is_set():
                self._failed(url, "the connection was lost")
            return True
        finally:
            self._set(False, url, self._status.problem)  # this thread alone writes the status
            try:
                client.disconnect()
            except Exception:  # a socket already gone: nothing left to close
                pass

    def _client(self, url: str) -> mqtt.Client:
        config = self.config
        v5 = config.mqtt_version == "5"
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=config.client_id,
                             protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311, clean_session=None if v5 else False,
                             reconnect_on_failure=False, manual_ack=True)
        client.connect_timeout = CONNECT_TIMEOUT_S
        if config.username is not None:
            password = None
            if config.password_file is not None:
                password = Path(config.password_file).read_text(encoding="utf-8").rstrip("\r\n")
            client.username_pw_set(config.username, password)
        if urlsplit(url).scheme == "mqtts":
            client.tls_set_context(ssl.create_default_context(
                cafile=None if config.ca_file is None else str(config.ca_file)))
        return client

    def _loop(self, conn: _Attempt, timeout: float) -> None:
        """Send the acks queued, wait up to ``timeout`` for the broker's socket or a wake, then let
        paho read, write and keep the connection alive: paho's loop for an outside event loop run
        on this thread alone, so no other thread ever writes to the socket."""
        client = conn.client
        while self._acks:
            message = self._acks.popleft()
            if message.connection == conn.number and conn.connected.is_set():
                client.ack(message.mid, 1)
        sock = client.socket()
        if sock is None:
            conn.lost.set()
            return
        pending = getattr(sock, "pending", None)  # TLS: bytes decrypted already, which select cannot see
        ready = pending is not None and pending() > 0
        try:
            readable, writable, _ = select.select([sock, self._wake_r], [sock] if client.want_write() else [], [],
                                                  0.0 if ready else timeout)
        except (OSError, ValueError):  # the socket closed under it
            conn.lost.set()
            return
        if self._wake_r in readable:
            try:
                while self._wake_r.recv(4096):
                    pass
            except BlockingIOError:
                pass
        for step, due in ((lambda: self._read_all(client), ready or sock in readable), (client.loop_write, sock in writable),
                          (client.loop_misc, True)):
            if due and step() not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_AGAIN):
                conn.lost.set()
                return

    @staticmethod
    def _read_all(client: mqtt.Client) -> MQTTErrorCode:
        """paho's loop_read reads one packet a call (its max_packets is not used): read on while
        the socket has more, up to READ_AT_ONCE, so a busy floor costs a wait a burst, not one a
        message."""
        for _ in range(READ_AT_ONCE):
            code = client.loop_read()
            if code != mqtt.MQTT_ERR_SUCCESS:
                return code
            sock = client.socket()
            pending = getattr(sock, "pending", None)
            if sock is None or not ((pending is not None and pending() > 0)
                                    or select.select([sock], [], [], 0.0)[0]):
                break
        return mqtt.MQTT_ERR_SUCCESS

    def _set(self, connected: bool, url: str, problem: str | None) -> None:
        """The link's status now; a flip, up or down, is told to ``flipped``."""
        with self._lock:
            before = self._status
            flip = before.connected != connected
            self._status = status = ReceiverStatus(
                connected, url, problem,
                before.connections + (1 if connected and flip else 0),
                datetime.now(timezone.utc) if flip else before.since)
        if flip and self._flipped is not None and not self._stopping.is_set():  # a stop is no lost link
            self._flipped(status)

    def _up(self, conn: _Attempt) -> None:
        self._set(True, conn.url, None)
        self._said = None
        log.info("floor_broker_connected", broker=conn.url, session_present=conn.session_present)
        if not conn.session_present:  # a new session (or one the broker lost): subscribe it
            conn.client.subscribe(TOPIC_FILTER, qos=1)

    def _failed(self, url: str, why: str) -> None:
        text = f"{url}: {why}"
        self._set(False, url, text)
        if text != self._said:  # each reason once, however often the broker is tried
            self._said = text
            log.warning("floor_broker_failed", broker=url, why=why)

    # ---- paho's callbacks (inside loop(), on this thread) ------------------------------------

    def _on_connect(self, conn: _Attempt, flags: mqtt.ConnectFlags, code: ReasonCode) -> None:
        if code.is_failure:
            conn.refused = f"the broker refused the connection: {code}"
        else:
            conn.session_present = bool(flags.session_present)
            conn.connected.set()

    def _on_subscribe(self, conn: _Attempt, codes: list[ReasonCode]) -> None:
        refused = [str(code) for code in codes if code.is_failure]
        if refused:  # the floor's user may not read the topics: nothing will come, say so
            conn.refused = f"the broker refused the subscription to {TOPIC_FILTER}: {', '.join(refused)}"

    def _on_message(self, conn: _Attempt, message: mqtt.MQTTMessage) -> None:
        try:
            topic = message.topic
        except UnicodeDecodeError:  # not UTF-8 (a broker should refuse it): kept as bytes' repr
            topic = repr(message._topic)
        self._deliver(Received(topic, bytes(message.payload), message.mid, conn.number, bool(message.retain),
                               bool(message.dup), datetime.now(timezone.utc)))


def _reason(exc: BaseException) -> str:
    """An OS or TLS error in a sentence of its own, not the library's repr."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (f"TLS: the broker's certificate did not pass the check ({exc.verify_message or exc.reason}); "
                "is broker.ca_file the CA that signed it?")
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or exc.strerror or type(exc).__name__}"
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc) or type(exc).__name__
