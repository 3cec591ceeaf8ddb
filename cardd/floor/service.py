"""The floor service: every table's messages from the broker into the archive, the floor's alarms,
the live feed (docs/floor-service.md).

One worker on the event loop takes the receiver's messages in the order the broker delivered them,
as many as have arrived (the broker's Receive Maximum bounds them), decodes each
(contract.decode), commits what they carried in the archive (the records of consecutive events
messages, of every table, in one transaction), and only then acknowledges them
(:meth:`Receiver.ack`). Nothing is acknowledged that is not committed: while
PostgreSQL is down the worker keeps the message in hand and tries again after a backoff (one log
line for the outage, one for its end), the messages after it wait at the broker, unacknowledged,
in the floor's persistent session; and a cardfloor killed at any moment finds them there again at
its next start. A message delivered again (after a reconnection or a restart) is stored once: the
archive drops a record it has with the same hash.

What does not fit the contract is never archived: a message refused by contract.decode on a
table's topic is a ``bad_message`` floor alarm for that table (acknowledged and dropped: the
broker must not send it again and again); a topic outside the contract is logged once and dropped.

A 1 s timer evaluates the condition alarms (cardd/floor/state.py) and the gaps: a gap in a
table's records is an alarm only once its states have said its backlog is empty for ``gap_s``.
"""
from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import importlib
import os
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import msgspec
import structlog

from cardd.floor.archive import Archive, ArchiveError, ArchiveUnavailable, ChainProblem, FloorAlarm, time_text
from cardd.floor.chain import gap_problem
from cardd.floor.config import FloorConfig
from cardd.floor.contract import Anchor, ContractError, Events, Payload, State, Status, Topic, decode, parse_topic
from cardd.floor.receiver import Backoff, Received, Receiver, ReceiverStatus
from cardd.floor.reports import completes_round
from cardd.floor.state import BAD_MESSAGE, CHAIN, AlarmKey, TableWatch, conditions, decided, gap_due
from cardd.floor.stream import Hub
from cardd.floor.views import BrokerView
from core.errors import CarddError

log = structlog.get_logger(__name__)

T = TypeVar("T")
#: between attempts at an archive that does not answer
ARCHIVE_BACKOFF = Backoff(initial=0.5, factor=2.0, cap=5.0)
#: how often the floor alarms are evaluated
EVALUATE_EVERY_S = 1.0
#: a table's gaps are read at once when its records came out of order, else at most this often
#: while they may be an alarm
GAP_CHECK_EVERY_S = 5.0
#: messages taken from the receiver at most for one batch (one archive transaction for their records)
BATCH_MESSAGES = 500
#: and payload bytes at most (a backlog's messages hold 500 records each: a few of them make a
#: batch, so what one transaction holds decoded stays some tens of MB)
BATCH_BYTES = 2 << 20
#: topics outside the contract said in the log, at most (then silently dropped)
STRANGE_TOPICS_SAID = 1000
#: how long a stop waits for the HTTP connections still open (event streams never end by themselves)
STREAM_DRAIN_S = 2
Table = tuple[str, str]


def _gap_key(first: int) -> str:
    return f"gap:{first}"


def broker_view(status: ReceiverStatus) -> BrokerView:
    return BrokerView(connected=status.connected, broker=status.broker,
                      since=None if status.since is None else time_text(status.since), problem=status.problem)


def _alarm_data(alarm: FloorAlarm) -> dict[str, Any]:
    data: dict[str, Any] = msgspec.to_builtins(alarm._asdict())
    data["state"] = alarm.state
    return data


class FloorService:
    """The service: :meth:`run` until ``stop`` is set. ``receiver`` is made from the configuration
    when not given (tests give one of their own)."""

    def __init__(self, config: FloorConfig, archive: Archive, hub: Hub) -> None:
        self.config, self.archive, self.hub = config, archive, hub
        self.watches: dict[Table, TableWatch] = {}
        #: the floor alarms raised and not cleared, as the archive holds them
        self.raised: dict[Table, set[AlarmKey]] = {}
        self._queue: asyncio.Queue[Received] = asyncio.Queue()
        self._receiver: Receiver | None = None
        self._archive_down: str | None = None
        self._strange: set[str] = set()
        self._gap_checked: dict[Table, float] = {}
        self._today: dt.date | None = None
        #: messages handled (committed and acknowledged), for the logs and the tests
        self.handled = 0

    # ---- running -------------------------------------------------------------------------

    def receiver_status(self) -> ReceiverStatus:
        return self._receiver.status() if self._receiver is not None else ReceiverStatus()

    def broker_link(self) -> BrokerView:
        """The floor's link to the broker, for the API's floor document."""
        return broker_view(self.receiver_status())

    def _link_flipped(self, status: ReceiverStatus) -> None:  # on the receiver's thread: the hub takes any
        self.hub.publish("broker", msgspec.to_builtins(broker_view(status)))

    async def run(self, stop: asyncio.Event) -> None:
        """Load what the archive knows (tables, open alarms), start receiving, and handle messages
        and the alarm timer until ``stop`` is set."""
        await self._retrying(self._load, stop)
        loop = asyncio.get_running_loop()

        arrived: list[Received] = []
        arrived_lock = threading.Lock()

        def take_arrived() -> None:  # on the loop: what arrived meanwhile, in order
            with arrived_lock:
                taken = arrived[:]
                arrived.clear()
            for message in taken:
                self._queue.put_nowait(message)

        def deliver(message: Received) -> None:  # on the receiver's thread, in the order received
            # one wake-up of the loop for a burst of messages, not one a message
            with arrived_lock:
                arrived.append(message)
                first = len(arrived) == 1
            if first:
                loop.call_soon_threadsafe(take_arrived)

        receiver = self._receiver = Receiver(self.config.broker, deliver, flipped=self._link_flipped)
        receiver.start()
        worker = asyncio.create_task(self._work(stop))
        timer = asyncio.create_task(self._timer(stop))
        try:
            await stop.wait()
        finally:
            for task in (worker, timer):
                task.cancel()
            await asyncio.gather(worker, timer, return_exceptions=True)
            await asyncio.to_thread(receiver.stop)

    async def _load(self) -> None:
        now = dt.datetime.now(dt.timezone.utc)
        for row in await self.archive.tables():
            watch = self._watch(row.site, row.table)
            watch.online, watch.session, watch.head = row.online, row.session, row.head_seq
            if row.online is False:
                watch.offline_since = row.last_seen or now
            elif row.online:
                watch.online_since = now
            if row.state is not None:  # its clock offset is measured again from the next state
                try:
                    watch.state = msgspec.convert(row.state, State)
                except msgspec.ValidationError:  # kept by an older release: the next state replaces it
                    continue
                watch.state_at = now
                watch.drained_since = now if watch.state.export.backlog == 0 else None
        for state in ("open", "acknowledged"):
            for alarm in await self.archive.alarms(state=state, limit=1_000_000):
                self.raised.setdefault((alarm.site, alarm.table), set()).add(AlarmKey(alarm.kind, alarm.key))

    def _watch(self, site: str, table: str) -> TableWatch:
        watch = self.watches.get((site, table))
        if watch is None:
            watch = self.watches[(site, table)] = TableWatch(site, table)
        return watch

    async def _retrying(self, call: Callable[[], Awaitable[T]], stop: asyncio.Event) -> T:
        """``call()`` until the archive answers (one log line when it stops, one when it is back)."""
        attempt = 0
        while True:
            try:
                result = await call()
            except ArchiveUnavailable as exc:
                attempt += 1
                if self._archive_down is None:
                    self._archive_down = str(exc)
                    log.warning("floor_archive_unavailable", why=str(exc))
                try:
                    await asyncio.wait_for(stop.wait(), ARCHIVE_BACKOFF.delay(attempt))
                except TimeoutError:
                    continue
                raise asyncio.CancelledError from None  # stopping: what is in hand stays unacknowledged
            if self._archive_down is not None:
                self._archive_down = None
                log.info("floor_archive_back")
            return result

    # ---- messages ------------------------------------------------------------------------

    async def _work(self, stop: asyncio.Event) -> None:
        while True:
            batch = [await self._queue.get()]
            size = len(batch[0].payload)
            while len(batch) < BATCH_MESSAGES and size < BATCH_BYTES and not self._queue.empty():
                batch.append(self._queue.get_nowait())
                size += len(batch[-1].payload)
            await self._retrying(lambda: self.handle_many(batch), stop)
            assert self._receiver is not None
            for message in batch:
                self._receiver.ack(message)
            self.handled += len(batch)

    async def handle(self, message: Received) -> None:
        """Commit what ``message`` carried (raise ArchiveUnavailable when that cannot be done now:
        calling again is safe)."""
        await self.handle_many([message])

    async def handle_many(self, messages: list[Received]) -> None:
        """:meth:`handle` each of ``messages``: the records of consecutive events messages (of any
        tables) in one archive transaction, a status in its place among them; the states after
        them in one transaction (a table's last kept), then the anchors, whose records are stored
        by then. One commit for what a thousand tables sent meanwhile, not one a message. Calling
        again after ArchiveUnavailable is safe: what was stored already is a duplicate the archive
        drops, and a state or status kept again changes nothing."""
        records: list[tuple[Topic, Events, dt.datetime]] = []
        states: list[tuple[State, dt.datetime]] = []
        anchors: list[tuple[Anchor, dt.datetime]] = []
        for message in messages:
            decoded = await self._decoded(message)
            if decoded is None:
                continue
            topic, payload = decoded
            at = message.received_at
            if isinstance(payload, Events):
                records.append((topic, payload, at))
            elif isinstance(payload, State):
                states.append((payload, at))
            elif isinstance(payload, Anchor):
                anchors.append((payload, at))
            elif isinstance(payload, Status):
                await self._store_records(records)
                records = []
                watch = self._watch(topic.site, topic.table)
                await self._problems(await self.archive.note_status(payload, at), at)
                watch.note_status(payload, at)
                self._publish_table(watch)
        await self._store_records(records)
        if states:
            await self.archive.note_states(states)
            changed: dict[Table, TableWatch] = {}
            for state, at in states:
                watch = changed[(state.site, state.table)] = self._watch(state.site, state.table)
                watch.note_state(state, at)
            for watch in changed.values():
                self._publish_table(watch)
        for anchor, at in anchors:
            await self._problems(await self.archive.check_anchor(anchor, at), at)

    async def _decoded(self, message: Received) -> tuple[Topic, Payload] | None:
        """The message's topic and payload; None for one that does not fit the contract (logged,
        and on a table's topic a ``bad_message`` floor alarm)."""
        try:
            topic = parse_topic(message.topic)
        except ContractError as exc:
            if message.topic not in self._strange and len(self._strange) < STRANGE_TOPICS_SAID:
                self._strange.add(message.topic)
                log.warning("floor_topic_dropped", topic=message.topic[:200], why=str(exc))
            return None
        try:
            return topic, decode(topic, message.payload)
        except ContractError as exc:
            log.warning("floor_message_refused", topic=message.topic, why=str(exc))
            at = message.received_at
            await self._raise(topic.site, topic.table, BAD_MESSAGE, topic.leaf, f"{message.topic}: {exc}", at)
            return None

    async def _store_records(self, records: list[tuple[Topic, Events, dt.datetime]]) -> None:
        """Store the events messages ``records`` in one transaction, each record's receipt time
        the last message's (a few milliseconds late for the first at most, never early)."""
        if not records:
            return
        at = max(r[2] for r in records)
        results = list(zip(records, await self.archive.store_many([(t.site, t.table, p.events)
                                                                     for t, p, _ in records], at)))
        for (topic, payload, at), result in results:
            await self._problems(result.problems, at)
            self._watch(topic.site, topic.table).note_stored(result.stored)
            if result.stored:
                self.hub.publish("records", {"site": topic.site, "table": topic.table, "seqs": result.stored})
                stored = set(result.stored)
                rounds = sum(1 for event in payload.events
                             if event.seq in stored and completes_round(event.reason, event.data))
                if rounds:  # the floor page counts them without reading the archive again
                    self.hub.publish("rounds", {"site": topic.site, "table": topic.table, "rounds": rounds})

    def _publish_table(self, watch: TableWatch) -> None:
        self.hub.publish("table", {"site": watch.site, "table": watch.table, "online": watch.online,
                                   "session": watch.session, "clock_offset_s": watch.clock_offset_s,
                                   "state": None if watch.state is None else msgspec.to_builtins(watch.state)})

    async def _problems(self, problems: list[ChainProblem], at: dt.datetime) -> None:
        for problem in problems:
            log.warning("floor_chain_problem", site=problem.site, table=problem.table, kind=problem.kind,
                        seq=problem.seq, detail=problem.detail)
            await self._raise(problem.site, problem.table, CHAIN, f"{problem.kind}:{problem.seq}", problem.detail, at)

    async def _raise(self, site: str, table: str, kind: str, key: str, detail: str, at: dt.datetime) -> None:
        alarm = await self.archive.raise_alarm(site, table, kind, key, detail, at)
        self.raised.setdefault((site, table), set()).add(AlarmKey(kind, key))
        if alarm is not None:
            log.warning("floor_alarm_raised", site=site, table=table, kind=kind, key=key, detail=detail)
            self.hub.publish("alarm", _alarm_data(alarm))

    async def _clear(self, site: str, table: str, kind: str, key: str, at: dt.datetime) -> None:
        alarm = await self.archive.clear_alarm(site, table, kind, key, at)
        self.raised.get((site, table), set()).discard(AlarmKey(kind, key))
        if alarm is not None:
            log.info("floor_alarm_cleared", site=site, table=table, kind=kind, key=key)
            self.hub.publish("alarm", _alarm_data(alarm))

    # ---- the alarm timer -----------------------------------------------------------------

    async def _timer(self, stop: asyncio.Event) -> None:
        while True:
            try:
                await self.evaluate()
            except ArchiveUnavailable as exc:  # said once by the worker's retries or here; next tick
                if self._archive_down is None:
                    self._archive_down = str(exc)
                    log.warning("floor_archive_unavailable", why=str(exc))
            except Exception as exc:  # a fault in an evaluation must not end the alarms: said, next tick
                log.exception("floor_alarms_failed", error=str(exc))
            await asyncio.sleep(EVALUATE_EVERY_S)

    async def evaluate(self, now: dt.datetime | None = None) -> None:
        """Raise the floor alarms that now hold and clear those that do not; drop the
        archive's expired days once a day."""
        now = now or dt.datetime.now(dt.timezone.utc)
        if self._today != now.date():
            dropped = await self.archive.drop_expired(now.date())
            self._today = now.date()
            if dropped:
                log.info("floor_archive_expired", partitions=dropped)
        for (site, table), watch in list(self.watches.items()):
            held = conditions(watch, now, self.config.alarms)
            raised = self.raised.get((site, table), set())
            for key, detail in held.items():
                if key not in raised:
                    await self._raise(site, table, key.kind, key.key, detail, now)
            kinds = decided(watch)
            for key in [k for k in raised if k.kind in kinds and k not in held]:
                await self._clear(site, table, key.kind, key.key, now)
            await self._gaps(watch, now)

    async def _gaps(self, watch: TableWatch, now: dt.datetime) -> None:
        """A gap is an alarm once the table's backlog has been empty for gap_s; it clears once filled."""
        table = (watch.site, watch.table)
        raised = {k for k in self.raised.get(table, set()) if k.kind == CHAIN and k.key.startswith("gap:")}
        due = gap_due(watch, now, self.config.alarms)
        if (not due and not raised) or (watch.gaps_maybe is False and not raised):
            return  # nothing to raise or clear; a table whose records came in order has no gap to read
        checked = self._gap_checked.get(table)
        if not watch.gaps_changed and checked is not None and time.monotonic() - checked < GAP_CHECK_EVERY_S:
            return
        self._gap_checked[table] = time.monotonic()
        gaps = await self.archive.gaps(watch.site, watch.table)
        watch.gaps_maybe, watch.gaps_changed = bool(gaps), False
        missing = {AlarmKey(CHAIN, _gap_key(first)): (first, last) for first, last in gaps}
        for key in raised - missing.keys():
            await self._clear(watch.site, watch.table, key.kind, key.key, now)
        if due:
            for key, (first, last) in missing.items():
                if key not in raised:
                    problem = gap_problem(watch.site, watch.table, first, last)
                    await self._raise(watch.site, watch.table, CHAIN, key.key, problem.detail, now)


# ---- the program: the service, the archive, the HTTP API, signals ----------------------------

class StartupError(CarddError):
    """cardfloor cannot start: one line saying why (exit 1)."""


def sd_notify(text: str) -> None:
    """Tell systemd (Type=notify) ``text`` (READY=1, WATCHDOG=1, STOPPING=1); nothing outside it."""
    path = os.environ.get("NOTIFY_SOCKET")
    if not path:
        return
    address = "\0" + path[1:] if path.startswith("@") else path
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto(text.encode(), address)
    except OSError as exc:  # systemd gone: nothing to tell
        log.debug("sd_notify_failed", error=str(exc))


async def _http(config: FloorConfig, archive: Archive, hub: Hub,
                broker_link: Callable[[], BrokerView]) -> tuple[Any, socket.socket] | None:
    """The HTTP API's server and its bound socket, when the configuration has tokens or users
    and this release has the API; StartupError when its address is taken or its tokens, users
    or session key cannot be read."""
    if config.http.tokens_file is None and config.http.users_file is None:
        log.info("floor_http_off", why="no http.tokens_file nor http.users_file in the configuration")
        return None
    try:
        api = importlib.import_module("cardd.floor.api")
        auth_module = importlib.import_module("cardd.floor.auth")
    except ImportError:
        log.warning("floor_http_off", why="this release has no HTTP API")
        return None
    import uvicorn

    try:
        auth = auth_module.Auth({}) if config.http.tokens_file is None else auth_module.Auth.load(config.http.tokens_file)
    except CarddError as exc:
        raise StartupError(f"http.tokens_file: {exc}") from None
    web = None
    if config.http.users_file is not None:
        from cardd.floor.users import Users
        from cardd.floor.secret import load_or_make_secret
        from cardd.floor.web import WINDOW_S as LOGIN_WINDOW_S, Web
        users = Users(config.http.users_file)
        secret_file = config.http.session_secret_file
        assert secret_file is not None, "beside the users file when not given"
        try:
            users.current()
        except CarddError as exc:
            raise StartupError(f"http.users_file: {exc}") from None
        try:
            secret = load_or_make_secret(secret_file)
        except CarddError as exc:
            raise StartupError(f"http.secret_file: {exc}") from None
        web = Web(users, secret, session_hours=config.http.session_hours, time_zone=config.floor.time_zone,
                  target_rounds_per_hour=config.floor.target_rounds_per_hour)
        now = dt.datetime.now(dt.timezone.utc)
        try:  # a session logged out stays refused, a failed log-in counted, across restarts
            web.restore(await archive.ended_sessions(now),
                        await archive.log_ins_since(now - dt.timedelta(seconds=LOGIN_WINDOW_S)))
        except ArchiveUnavailable as exc:
            raise StartupError(f"the sessions logged out cannot be read: {exc}") from None
    host, port = config.http.host, config.http.port
    try:
        sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    except OSError as exc:
        raise StartupError(f"http.listen {config.http.listen}: cannot listen there: "
                           f"{exc.strerror or type(exc).__name__}") from None

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:  # cardfloor's own handlers stop it (serve)
            yield

    app = api.build_app(archive, hub, auth, web=web, pit_of=config.pit_of(), broker_link=broker_link,
                        target_rounds_per_hour=config.floor.target_rounds_per_hour)
    # an open event stream (a pit page) never ends by itself: stopping waits for it this long only
    server = Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off",
                                   timeout_graceful_shutdown=STREAM_DRAIN_S))
    return server, sock


async def _open_archive(config: FloorConfig, stop: asyncio.Event) -> Archive | None:
    """The archive, once PostgreSQL answers (one log line while it does not); None when stopped first."""
    attempt, said = 0, False
    while not stop.is_set():
        try:
            return await Archive.open(config.archive.dsn, retention_days=config.archive.retention_days)
        except ArchiveUnavailable as exc:
            attempt += 1
            if not said:
                said = True
                log.warning("floor_archive_unavailable", why=str(exc))
        except ArchiveError as exc:
            raise StartupError(str(exc)) from None
        try:
            await asyncio.wait_for(stop.wait(), ARCHIVE_BACKOFF.delay(attempt))
        except TimeoutError:
            pass
    return None


async def serve(config: FloorConfig, config_path: str) -> None:
    """Run cardfloor until SIGTERM or SIGINT (a clean stop)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    log.info("cardfloor_starting", config=config_path, brokers=config.broker.urls, client_id=config.broker.client_id)
    archive = await _open_archive(config, stop)
    if archive is None:
        return
    hub = Hub()
    tasks: list[asyncio.Task[Any]] = []
    server = None
    try:
        service = FloorService(config, archive, hub)
        http = await _http(config, archive, hub, service.broker_link)
        tasks.append(asyncio.create_task(service.run(stop)))
        if http is not None:
            server, sock = http
            tasks.append(asyncio.create_task(server.serve(sockets=[sock])))
            log.info("floor_http_listening", listen=config.http.listen)
        sd_notify("READY=1")
        log.info("cardfloor_running")
        while not stop.is_set():
            sd_notify("WATCHDOG=1")
            done = [t for t in tasks if t.done()]
            if done:  # the service or the server ended by itself: a fault, said by main
                for task in done:
                    task.result()
                raise StartupError("a part of cardfloor ended by itself")
            try:
                await asyncio.wait_for(stop.wait(), 5.0)
            except TimeoutError:
                pass
        sd_notify("STOPPING=1")
        log.info("cardfloor_stopping")
    finally:
        stop.set()
        if server is not None:
            server.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)
        await archive.close()
    log.info("cardfloor_stopped")
