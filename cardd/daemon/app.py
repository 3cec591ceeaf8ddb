"""The daemon: one asyncio loop owning the table, its journal, its devices and the API.

    daemon = Daemon(config, "/etc/cardd/cardd.toml")
    await daemon.start()   # StartupError (one line) if it cannot deal safely
    await daemon.run()     # until SIGTERM / SIGINT, stop(), or the end of its stop_with_parent parent
    await daemon.stop()

Start-up order: the rules; the journal (created only where no file exists; a corrupt one
refuses the start); the table restored from the journal's latest snapshot (a live round
comes back held) and a ``start`` record; the API socket; the devices (in the background:
never a reason to exit); the SIGTERM and SIGINT handlers and, with ``stop_with_parent``
(``--stop-with-parent``), the watch that takes the same way out once the process that started
cardd has ended (cardd/daemon/parent.py); READY=1 once the journal is open and the API
listens; the watchdog and STATUS=. Stop: STOPPING=1, the API closed (socket removed), the
devices closed, the last batch flushed with a ``stop`` record, the journal closed; under
``--simulate`` the simulated devices stopped and their temporary directories removed.
"""
from __future__ import annotations

import asyncio
import grp
import hashlib
import signal
import time
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from cardd.api.errors import ApiError, CommandFailed
from cardd.api.peer import Caller, Role, groupadd_commands, login_roles, missing_groups
from cardd.api.protocol import ApiEvent, ErrorCode
from cardd.api.server import ApiServer, Limits
from cardd.config import CarddConfig
from cardd.daemon.alarm_hook import AlarmHook, AlarmNotices, log_notice
from cardd.daemon.backend import DaemonBackend, Given, Runner
from cardd.daemon.commands import command_table
from cardd.daemon.devices import Devices, run_device_command
from cardd.daemon.parent import ParentWatch
from cardd.daemon.retention import Retention
from cardd.daemon.enrolment import EnrolmentError, EnrolmentStore, enrolment_path
from cardd.daemon.host_key import HostKeyError, host_fingerprint, host_key_path, load_or_create_host_key
from cardd.daemon.tracker_service import REASON_START, REASON_STOP, TableService
from cardd.journal import KIND_START, KIND_STOP, Entry, Journal, JournalError
from cardd.notify import Notifier, Watchdog
from core.errors import CarddError
from devices.game.rules import HouseRules, RulesError, load_rules
from devices.errors import TableError
from devices.tracker.inputs import ShuffleStarted
from drivers.aio import cancel_and_wait

if TYPE_CHECKING:  # --simulate only: a table's daemon never loads the simulators
    from cardd.daemon.export_service import ExportService  # [export] only: the MQTT client with it
    from cardd.daemon.simulation import Simulation

log = structlog.get_logger(__name__)

#: how often STATUS= is brought up to date
STATUS_INTERVAL_S = 1.0
#: the stop's last commit is tried this many times, this far apart, before what it holds goes to the log
STOP_COMMIT_TRIES, STOP_COMMIT_RETRY_S = 3, 0.5
#: the most unjournaled records the stop logs, one line each (a burst of card reads may be thousands)
STOP_LOGGED_RECORDS = 1000
#: the journal's WAL is checkpointed this often after new records, on a worker thread, so that
#: SQLite's own checkpoint never lands inside a card's commit (Journal.checkpoint)
CHECKPOINT_INTERVAL_S = 1.0


def release() -> str:
    try:
        return f"cardd {metadata.version('cardd')}"
    except metadata.PackageNotFoundError:
        return "cardd (not installed)"


class StartupError(CarddError):
    """The daemon cannot start dealing safely; the text is one line naming what and where."""


class Daemon:
    def __init__(self, config: CarddConfig, config_path: str, *, simulation: Simulation | None = None,
                 notifier: Notifier | None = None, stop_with_parent: int | None = None) -> None:
        """``stop_with_parent``: the pid of the process that started cardd; its end stops the
        daemon as SIGTERM does (None: nothing watched, as under systemd)."""
        self.config, self.config_path, self.simulation = config, config_path, simulation
        self.stop_with_parent = stop_with_parent
        self.parent_watch: ParentWatch | None = None
        self.release = release()
        self.notifier = notifier or Notifier.from_environment()
        self.watchdog = Watchdog(self.notifier)
        self.journal: Journal | None = None
        self.service: TableService | None = None
        self.api: ApiServer | None = None
        self.devices: Devices | None = None
        self.retention: Retention | None = None
        #: the committed records that raise or clear an alarm, for the log and [notify] command
        self.alarm_notices: AlarmNotices | None = None
        self.alarm_hook: AlarmHook | None = None
        self.export: ExportService | None = None
        self.host_key: Ed25519PrivateKey | None = None  # the protocol 2.0 identity (cardd/daemon/host_key.py)
        self.host_fingerprint = ""
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()

    # ---- life -------------------------------------------------------------------------------

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        config = self.config
        rules, rules_hash = _rules(config.table.rules)
        path = config.journal.path
        try:
            held = None if self.simulation is None else self.simulation.take_writer_lock()
            self.journal = Journal.open(path, create=not path.exists(), retention_days=config.journal.retention_days,
                                        writer_lock=held)
        except JournalError as exc:
            raise StartupError(str(exc)) from None
        except OSError as exc:
            raise StartupError(f"journal {path}: {exc.strerror}") from None
        try:  # made at the first start (docs/install.md); its fingerprint is in STATE and `cardctl status`
            self.host_key, made = load_or_create_host_key(host_key_path(path))
        except HostKeyError as exc:
            raise StartupError(str(exc)) from None
        self.host_fingerprint = host_fingerprint(self.host_key)
        if made:
            log.warning("host_key_created", path=str(host_key_path(path)), fingerprint=self.host_fingerprint)
        try:  # the keys a technician enrolled (cardd/daemon/enrolment.py: why a file beside the host key)
            enrolment = EnrolmentStore(enrolment_path(path))
        except EnrolmentError as exc:
            raise StartupError(str(exc)) from None
        service = self.service = TableService(rules, self.journal, self._publish, on_published=self._published)
        self.alarm_notices = AlarmNotices(lambda: service.table.alarms.open)
        notify = config.notify
        if notify.command is not None:
            self.alarm_hook = AlarmHook(notify.command, notify.table_name, timeout_s=notify.timeout_s,
                                        max_per_minute=notify.max_per_minute)
            self.alarm_hook.start()
        start = Entry(kind=KIND_START, reason=REASON_START, source="cardd", data={
            "release": self.release, "config": self.config_path, "rules": rules.name, "rules_sha256": rules_hash,
            "simulated": self.simulation is not None, "message": f"{self.release} started"})
        try:
            service.restore(start)
        except CarddError as exc:
            raise StartupError(f"journal {path}: cannot restore the table: {exc}") from None
        _say_missing_groups(config)
        api_gid = _api_gid(config.api.group)
        self.retention = Retention(service, self.journal, config.journal.exports, config.journal.prune_every_s,
                                   group=api_gid)
        devices = self.devices = Devices(config, service, self.release, self.host_key, enrolment)
        if config.export is not None:  # after the restore: its start record is the first the floor may need
            # imported here: a daemon with no [export] never loads the export nor paho (a start's CPU)
            from cardd.daemon.export_service import ExportService
            from cardd.export.exporter import TableFacts
            facts = TableFacts(self.release, rules.name, rules_hash,
                               tuple((role, url) for role, url in (("shoe", config.devices.shoe),
                                                                  ("shuffler", config.devices.shuffler)) if url))
            self.export = ExportService(config.export, service, self.journal, facts, devices.links)
            self.retention.delivered = self.export.exporter.delivered_through
            self.export.start()
        commands = command_table(simulated=self.simulation is not None)
        runners: dict[str, Runner] = {"device": self._device_command, "journal": self._journal_command}
        if self.simulation is not None:
            runners["simulation"] = self._simulation_command
        backend = DaemonBackend(service, commands, devices.links, runners, self.retention.status_json,
                                export=None if self.export is None else self.export.status_json,
                                host_key=self.host_fingerprint, device_trust=devices.trust_state)
        roles = {Role.DEALER: config.roles.dealer, Role.SUPERVISOR: config.roles.supervisor,
                 Role.TECHNICIAN: config.roles.technician}
        self.api = ApiServer(backend, config.api.socket, release=self.release, role_groups=roles,
                             limits=Limits(rate=config.api.rate, burst=config.api.burst,
                                           refused_per_window=config.api.refused_per_minute),
                             mode=config.api.mode_bits, group=api_gid)
        try:
            await self.api.start()
        except ApiError as exc:
            raise StartupError(str(exc)) from None
        await devices.start()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._stopped.set)
        if self.stop_with_parent is not None:  # the parent's end is one more way to the same stop
            self.parent_watch = ParentWatch(self.stop_with_parent, self.request_stop)
            self.parent_watch.start(loop)
        self._tasks = [loop.create_task(service.feed.run_ticks(), name="ticks"),
                       loop.create_task(self._keep_status(), name="status"),
                       loop.create_task(self.retention.run(), name="retention"),
                       loop.create_task(self._keep_checkpointed(), name="checkpoint")]
        if self.export is not None:
            self._tasks.append(loop.create_task(self.export.watch(), name="export"))
        self.notifier.ready(self.status_text())
        self.watchdog.start()
        log.info("cardd started", release=self.release, journal=str(path), socket=str(config.api.socket),
                 rules=rules.name, last_seq=self.journal.last_seq)

    async def run(self) -> None:
        await self._stopped.wait()

    def request_stop(self) -> None:
        self._stopped.set()

    async def stop(self) -> None:
        """Idempotent: whatever start() got to is undone, in reverse."""
        self.notifier.stopping("stopping")
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        if self.parent_watch is not None:
            self.parent_watch.close()
            self.parent_watch = None
        await self.watchdog.stop()
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks = []
        if self.api is not None:
            await self.api.stop()
            self.api = None
        if self.devices is not None:
            await self.devices.close()
            self.devices = None
        if self.service is not None:
            self.service.add(Entry(kind=KIND_STOP, reason=REASON_STOP, source="cardd", ts_ns=time.time_ns(), data={
                "release": self.release, "message": f"{self.release} stopped"}))
            await self._last_commit(self.service)
            self.service = None
        if self.export is not None:  # after the last commit: the stop record goes out too
            if self.journal is not None:
                self.export.committed(self.journal.last_seq)
            await self.export.stop()
            self.export = None
        if self.journal is not None:
            self.journal.close()
            self.journal = None
        if self.alarm_hook is not None:  # after the last commit: its alarms were told
            await self.alarm_hook.stop()
            self.alarm_hook = None
        if self.simulation is not None:
            self.simulation.stop()
        self.notifier.close()

    @staticmethod
    async def _last_commit(service: TableService) -> None:
        """The stop's commit of what is left, tried again a few times if the journal cannot be
        written (a full disk may have room a moment later). What still cannot be written goes to
        the log in full, each record as it would have been journaled: commands applied meanwhile
        were told their record is kept, and the log is then the only place left to find it (the
        devices resend the card reads: none was confirmed)."""
        for attempt in range(1, STOP_COMMIT_TRIES + 1):
            try:
                service.flush()
                return
            except JournalError as exc:
                error = str(exc)
            if attempt < STOP_COMMIT_TRIES:
                await asyncio.sleep(STOP_COMMIT_RETRY_S)
        lost = service.unjournaled()
        logged = lost[:STOP_LOGGED_RECORDS]
        log.error("records_not_journaled_at_stop", error=error, tries=STOP_COMMIT_TRIES, count=len(lost),
                  logged=len(logged), left_out=len(lost) - len(logged))
        # one line a record: journald splits a line past its LineMax (48 KiB), and 200 card reads in
        # one line would reach the journal as pieces no JSON reader takes
        for n, entry in enumerate(logged, 1):
            log.error("record_not_journaled_at_stop", n=n, of=len(logged),
                      record={**entry._asdict(), "data": dict(entry.data)})

    # ---- what goes on meanwhile -------------------------------------------------------------

    def _publish(self, event: ApiEvent) -> None:
        if self.api is not None:
            self.api.publish(event)
        if self.export is not None:
            self.export.published(event)
        notice = None if self.alarm_notices is None else self.alarm_notices.notice(event)
        if notice is not None:
            log_notice(notice)
            if self.alarm_hook is not None:
                self.alarm_hook.notify(notice)

    def _published(self) -> None:
        if self.api is not None:
            self.api.flush()
        if self.export is not None and self.journal is not None:
            self.export.committed(self.journal.last_seq)

    def status_text(self) -> str:
        """STATUS=: what the table is doing, in one line."""
        if self.service is None:
            return "starting"
        table = self.service.table
        r = table.round
        round_text = "no round" if r is None else f"round {r.round_id} {r.state}" + (" HELD" if r.held else "")
        devices = ", ".join(f"{m.NAME} {m.state}" for m in table.devices())
        failure = self.service.write_failure  # first: STATUS= is cut at its end
        return (("" if failure is None else f"JOURNAL CANNOT WRITE ({failure}); ") +
                f"shoe {table.shoe.state} ({table.shoe.cards_out} out); {round_text}; "
                f"{len(table.alarms.open)} alarm(s); {devices}")

    async def _keep_status(self) -> None:
        while True:
            self.watchdog.status(self.status_text())
            if self.parent_watch is not None:  # (its getppid fallback; a pidfd needs no tick)
                self.parent_watch.check()
            await asyncio.sleep(STATUS_INTERVAL_S)

    async def _keep_checkpointed(self) -> None:
        """Checkpoint the journal's WAL each CHECKPOINT_INTERVAL_S after new records. A failure is
        logged once (and again when it changes), never raised: the commits go on, and SQLite's
        own checkpoint keeps the WAL bounded."""
        journal, checkpointed_seq, failure = self.journal, -1, ""
        assert journal is not None
        while True:
            await asyncio.sleep(CHECKPOINT_INTERVAL_S)
            seq = journal.last_seq
            if seq == checkpointed_seq:
                continue
            try:
                await asyncio.to_thread(journal.checkpoint)
                checkpointed_seq, failure = seq, ""
            except JournalError as exc:
                if str(exc) != failure:
                    failure = str(exc)
                    log.warning("journal checkpoint failed", error=failure)

    async def _device_command(self, name: str, args: dict[str, Any], caller: Caller, given: Given) -> dict[str, Any]:
        assert self.devices is not None and self.service is not None
        service = self.service

        def journal_now(result: dict[str, Any]) -> None:
            if name == "start_shuffle":  # who loaded the shuffler: the verification names him
                service.apply(ShuffleStarted(caller.user), caller.user)
            given(result)  # START_SHUFFLE before the shuffler's reports on it; a firmware update before its transfer

        if name == "start_shuffle":  # before the shuffler hears of it: a hand-shuffle table's rules forbid it
            refused = service.table.machine_shuffle_refused()
            if refused is not None:
                raise TableError(refused)

        return await run_device_command(name, args, self.devices, service.rules.decks,
                                        self.config.firmware.public_key, journal_now, caller.user, self._supervisor)

    def _supervisor(self, login: str) -> bool:
        """Whether the user ``login`` holds the supervisor role on this machine, as a connection of
        theirs would (their groups, or root and the daemon's own user): who may allow a downgrade."""
        return Role.SUPERVISOR in login_roles(login, {Role.SUPERVISOR: self.config.roles.supervisor})

    async def _journal_command(self, name: str, args: dict[str, Any], caller: Caller, given: Given) -> dict[str, Any]:
        """verify_journal: the whole chain walked (off the loop: it reads the file through its own
        connection); export_journal: retention's."""
        assert self.journal is not None and self.retention is not None
        if name == "export_journal":
            return await self.retention.export(args, caller)
        if args:
            raise CommandFailed(f"{name} takes no args", code=ErrorCode.BAD_ARGS)
        result = await asyncio.to_thread(self.journal.verify)
        return {"journal": str(self.journal.path), "ok": result.ok, "checked": result.checked,
                "first_bad_seq": result.first_bad_seq, "problem": result.problem}

    async def _simulation_command(self, name: str, args: dict[str, Any], caller: Caller, given: Given) -> dict[str, Any]:
        assert self.simulation is not None and self.service is not None
        table = self.service.table
        waits = table.next_shoe_waits() if name == "sim_load_shoe" else None
        if waits is not None:  # the dealer's hands wait as the table does (a load would only be deferred)
            raise TableError(waits)
        return await self.simulation.command(name, args, table.shoe.state)


def _rules(path: Path) -> tuple[HouseRules, str]:
    try:
        data = path.read_bytes()
        return load_rules(path), hashlib.sha256(data).hexdigest()
    except RulesError as exc:
        raise StartupError(str(exc)) from None
    except OSError as exc:
        raise StartupError(f"rules {path}: {exc.strerror}") from None


def _api_gid(group: str) -> int | None:
    """The socket's group; a group that does not exist leaves the daemon's own (_say_missing_groups says so)."""
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        return None


def _say_missing_groups(config: CarddConfig) -> None:
    """One warning for every missing group at once, the API's and the roles' ([api] group, [roles]),
    with what that leaves and the commands that create them: said at the start, never per
    connection (a client refused for want of a role is told so in its refusal)."""
    roles = config.roles
    missing = missing_groups([config.api.group, roles.dealer, roles.supervisor, roles.technician])
    if not missing:
        return
    effects = []
    if config.api.group in missing:
        effects.append(f"the socket keeps the daemon's group ({config.api.group} is the API's)")
    lost = [role for role, group in (("dealer", roles.dealer), ("supervisor", roles.supervisor),
                                     ("technician", roles.technician)) if group in missing]
    if lost:
        named = lost[0] if len(lost) == 1 else f"{', '.join(lost[:-1])} and {lost[-1]} roles"
        effects.append(f"only root and the daemon's own user hold the {named}{' role' if len(lost) == 1 else ''}")
    log.warning("groups_missing", groups=missing, effect="; ".join(effects),
                create=f"as root: {groupadd_commands(missing)}")
