"""The table's device connections, and the technician's requests to them.

Each configured device gets one :class:`~firmware_bridge.connection.DeviceConnection`, started
in the background (it retries forever with backoff: a missing device is never a reason to
exit; the tracker sees it offline) and wired to the tracker through the feed. The API names
devices as the configuration does: ``shoe`` and ``shuffler``.

End-to-end delivery (protocol 1.1, docs/protocol.md §3.2): each numbered event becomes the same
:class:`~devices.tracker.inputs.DeviceMessage` input as a plain message, with its event index;
at a handshake the connection asks the service for the highest index journaled for the unit
that answers (:attr:`TableService.event_marks`, kept per unit: a unit back on its port after
another resumes from its own mark; a unit never journaled starts from nothing), and after
each commit the service's ``on_journaled`` confirms the new marks, so a device forgets an event
only once it is in the journal. Each record carries the unit the connection had shaken hands
with when the event came in, so the mark moves for the unit that numbered it. A lost event
(EVENT_GAP, EVENTS_DROPPED, a device's EventsDropped) is journaled as an alarm record
(:data:`CONNECTION_ALARMS`) and, at alarm severity, opened in the table's alarms, which a supervisor
sees in STATE and clears like any other (``clear_alarm``). Events a unit says a host confirmed
(EventsDropped CONFIRMED) are lost to this journal whoever confirmed them: the connection reports
them (EVENTS_LOST, an alarm), a unit this journal has no mark of (resumed from 0) included, since
the journal cannot tell another table's host from a tool that let them go. A device FLAPPING
(DEVICE_FLAPPING) asks for a handshake again and again (a new boot id at every one), which the
connection shakes hands with ever more slowly; one alarm until it has stayed up
``devices.reconnect_stable_s``. A device FLOODING (DEVICE_FLOODING) sends more status messages than
its budget (``SessionConfig.status_budget`` a second): those past it are left out, never journaled;
one alarm until it has stayed within budget ``devices.reconnect_stable_s``.

Protocol 2.0 (``devices.shoe_protocol = "2.0"``, docs/protocol.md §8.1): the connection proves
the device's identity key against the one enrolled for its role (:mod:`cardd.daemon.enrolment`).
A refusal (NOT_TRUSTED) is one DEVICE_NOT_TRUSTED alarm naming what failed and the fingerprint of
the key the device proved (when it proved one); the device is offline to the table (a live round
held as for any device gone), nothing it says is handed on, and the alarm stands until a
technician enrols the device (``enroll``: the alarm cleared, the connection asked to shake
hands again) or retries it once mended (``retry_trust``: a failed proof, a downgrade or forged
frames leave no key to enrol); a supervisor's ``clear_alarm`` does not close it
(:data:`devices.tracker.alarms.TECHNICIAN_ALARMS`). A 1.1 device is accepted as configured, with
a standing warning (:meth:`trust_state`).
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from cardd.api.errors import CommandFailed
from cardd.api.protocol import FIRMWARE_IMAGE_MAX, ErrorCode, FirmwareUpdateArgs
from cardd.config import CarddConfig
from core.errors import CarddError
from core.schema_errors import schema_problem
from cardd.daemon.enrolment import Enrolment, EnrolmentError, EnrolmentStore
from cardd.daemon.event_marks import EventMarks, unit_of
from cardd.daemon.tracker_service import TableService
from cardd.journal import Entry
from devices.events import Event, Reason, Severity
from devices.errors import TableError
from devices.models.names import MODEL_NAMES
from devices.tracker.inputs import DeviceMessage
from drivers.reconnect import Backoff
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.errors import EventIndexError, FirmwareDowngradeRefused, FirmwareSameVersion
from firmware_bridge.firmware import (MAX_IMAGE_FILE_BYTES, SignedImage, check_update, read_image_file,
                                      read_public_key_file, update_firmware)
from firmware_bridge.messages import (ClearFault, Counters, CountersRequest, DropReason, EventsDropped, Fault,
                                      FaultCleared, FaultCode, Message, SelfTest, SelfTestResult, ShuffleComplete,
                                      ShuffleProgress, StartShuffle)
from firmware_bridge.handshake2 import fingerprint
from firmware_bridge.host_trust import HostTrust
from firmware_bridge.session import SessionConfig, SessionEvent, SessionEventKind

#: what a shuffler reports once a shuffle has started (counting, done at once, or stopped on a fault)
SHUFFLE_STARTED = (ShuffleProgress, ShuffleComplete, Fault)
#: how long a shuffler may take to say a shuffle started, or refuse it
SHUFFLE_START_TIMEOUT_S = 10.0
#: the reason codes of the connection's events that are alarms: lost events, a flapping or flooding device
#: (docs/deal-tracking.md)
CONNECTION_ALARMS = {SessionEventKind.EVENT_GAP: Reason.EVENT_GAP, SessionEventKind.EVENTS_DROPPED: Reason.EVENTS_LOST,
                     SessionEventKind.FLAPPING: Reason.DEVICE_FLAPPING,
                     SessionEventKind.FLOODING: Reason.DEVICE_FLOODING}


# the API's bound on an image is the bridge's bound on an image file (kept apart: cardctl's start-up)
assert FIRMWARE_IMAGE_MAX == MAX_IMAGE_FILE_BYTES


class Devices:
    def __init__(self, config: CarddConfig, service: TableService, release: str,
                 host_key: Ed25519PrivateKey | None = None, enrolment: EnrolmentStore | None = None) -> None:
        """``host_key`` and ``enrolment``: the host's identity and its trust store, needed by a
        device configured for protocol 2.0."""
        self.config = config
        self.service = service
        self.enrolment = enrolment
        host_name = f"cardd {release}"[:32]
        self.backoff = Backoff(stable=config.devices.reconnect_stable_s)
        urls = {"shoe": config.devices.shoe, "shuffler": config.devices.shuffler}
        self.protocols = {"shoe": config.devices.shoe_protocol, "shuffler": config.devices.shuffler_protocol}
        self.connections: dict[str, DeviceConnection] = {}
        #: protocol 2.0: each refused device's NOT_TRUSTED event (its DEVICE_NOT_TRUSTED alarm open)
        self.refusals: dict[str, SessionEvent] = {}
        for name, url in urls.items():
            if url is None:
                continue
            session = SessionConfig(host_name=host_name)
            if self.protocols[name] == "2.0":
                assert host_key is not None and enrolment is not None, "a 2.0 device needs the host key and store"
                store = enrolment

                def enrolled_key(unit: tuple[str, str, str], role: str = name) -> bytes | None:
                    return store.key(role)  # by the port's role: any other unit on it is refused

                session = SessionConfig(host_name=host_name, trust=HostTrust(host_key, enrolled_key))
            self.connections[name] = self._connection(name, url, session)
        service.on_journaled = self._confirm

    def trust_state(self) -> dict[str, Any]:
        """STATE's ``device_trust``: per configured device its protocol, the fingerprint of the key
        enrolled for it (2.0), why it is refused now, and the standing warning of a 1.1 device."""
        out: dict[str, Any] = {}
        for name in self.connections:
            protocol = self.protocols[name]
            enrolled = None if self.enrolment is None else self.enrolment.get(name)
            refusal = self.refusals.get(name)
            out[name] = {
                "protocol": protocol, "authenticated": protocol == "2.0",
                "enrolled": None if protocol != "2.0" or enrolled is None else
                fingerprint(bytes.fromhex(enrolled.key)),
                "refused": None if refusal is None else refusal.detail,
                "warning": f"{name}: protocol 1.1, not authenticated" if protocol == "1.1" else None}
        return out

    def _not_trusted(self, name: str, device: str, session_event: SessionEvent) -> None:
        """One DEVICE_NOT_TRUSTED alarm per refusal, naming what failed and the proven key."""
        failure = session_event.failure.value if session_event.failure is not None else "not trusted"
        proven = session_event.proven_key
        key_text = (f"; the device proved key {fingerprint(proven)}: compare it with the device's display or "
                    f"label, then `cardctl device enroll {name}`" if proven is not None else
                    "; a technician looks at the device")
        ident = session_event.ident
        data: dict[str, Any] = {"role": name, "failure": failure, "detail": session_event.detail,
                                "fingerprint": None if proven is None else fingerprint(proven)}
        if ident is not None:
            data.update(model=ident.model, serial=ident.serial)
        message = f"{name} not trusted: {failure}{key_text}"
        self._close_trust_alarms(device)  # the latest refusal is the one that stands
        self.refusals[name] = session_event
        self._alarm(device, Reason.DEVICE_NOT_TRUSTED, Severity.ALARM, message, **data)

    def _close_trust_alarms(self, device: str) -> None:
        """Close ``device``'s DEVICE_NOT_TRUSTED alarms (one restored from before a restart included)."""
        alarms = self.service.table.alarms
        for alarm in alarms.of(Reason.DEVICE_NOT_TRUSTED):
            if alarm.source == device:
                del alarms.open[alarm.id]

    def enrol(self, name: str, who: str, confirm: str | None) -> dict[str, Any]:
        """Enrol the key the refused device ``name`` proved: stored, its alarm cleared, the
        connection asked to shake hands again. ``confirm``: the fingerprint the technician was
        shown (None: only show it); another refusal since is refused, naming the new one."""
        self._two_point_oh("enroll", name)
        assert self.enrolment is not None
        refusal = self.refusals.get(name)
        proven = None if refusal is None else refusal.proven_key
        if refusal is None or proven is None:
            why = ("it is not refused" if refusal is None else
                   f"it proved no key it holds ({refusal.detail})")
            raise CommandFailed(f"enroll: {name}: nothing to enrol: {why}")
        shown = fingerprint(proven)
        ident = refusal.ident
        facts: dict[str, Any] = {"device": name, "fingerprint": shown,
                                 "model": "" if ident is None else ident.model,
                                 "serial": "" if ident is None else ident.serial}
        if confirm is None:
            return {"stage": "shown", **facts}
        if confirm != shown:
            raise CommandFailed(f"enroll: {name} now proves key {shown}, not {confirm}: compare it again")
        try:
            previous = self.enrolment.enrol(name, Enrolment(proven.hex(), facts["model"], facts["serial"], who,
                                                            time.time_ns()))
        except EnrolmentError as exc:
            raise CommandFailed(f"enroll: {exc}") from None
        facts["replaced"] = None if previous is None else {
            "fingerprint": fingerprint(bytes.fromhex(previous.key)), "model": previous.model,
            "serial": previous.serial, "enrolled_by": previous.enrolled_by}
        del self.refusals[name]
        self._close_trust_alarms(MODEL_NAMES[name])
        self.connections[name].retry_trust()
        return {"stage": "re-enrolled" if previous is not None else "enrolled", **facts}

    def retry(self, name: str) -> dict[str, Any]:
        """A technician mended the refused device ``name`` (a failed proof, a downgrade offered,
        forged frames: nothing to enrol) or looked into an alarm standing from before a restart:
        its DEVICE_NOT_TRUSTED alarm closed and the connection asked to shake hands again. The
        same proofs are asked of it: a device still failing them is refused again, a new alarm."""
        self._two_point_oh("retry_trust", name)
        device = MODEL_NAMES[name]
        standing = [a for a in self.service.table.alarms.of(Reason.DEVICE_NOT_TRUSTED) if a.source == device]
        refusal = self.refusals.pop(name, None)
        if refusal is None and not standing:
            raise CommandFailed(f"retry_trust: {name}: nothing to retry: it is not refused")
        self._close_trust_alarms(device)
        self.connections[name].retry_trust()
        return {"device": name, "alarms_closed": [a.id for a in standing],
                "was_refused": None if refusal is None else refusal.detail}

    def _two_point_oh(self, command: str, name: str) -> None:
        """Refuse ``command`` on ``name`` unless it is a device here configured for protocol 2.0."""
        if name not in self.connections:
            raise CommandFailed(f"{command}: no device {name!r} at this table (devices: {', '.join(self.connections)})",
                                code=ErrorCode.BAD_ARGS)
        if self.protocols[name] != "2.0" or self.enrolment is None:
            raise CommandFailed(f"{command}: {name} is configured for protocol {self.protocols[name]}: only a 2.0 "
                                f"device proves its identity (devices.{name}_protocol = \"2.0\")",
                                code=ErrorCode.BAD_ARGS)

    def _connection(self, name: str, url: str, session: SessionConfig) -> DeviceConnection:
        device = MODEL_NAMES[name]
        feed = self.service.feed
        on_message, on_event = feed.callbacks(device)
        connection: DeviceConnection

        def message(msg: Message) -> None:
            if isinstance(msg, EventsDropped):
                self._dropped(device, msg, connection.resumed_from)
                return
            on_message(msg)

        def event(session_event: SessionEvent) -> None:
            reason = CONNECTION_ALARMS.get(session_event.kind)
            if session_event.kind is SessionEventKind.NOT_TRUSTED:
                self._not_trusted(name, device, session_event)
            elif reason is not None:
                self._alarm(device, reason, Severity.ALARM, f"{device}: {session_event.detail}")
            on_event(session_event)

        def indexed(index: int, msg: Message) -> None:
            # the unit as the connection knows it now, when the event comes in (not when it is applied)
            feed.apply(DeviceMessage(device, msg, index, unit_of(connection.ident)))

        def journaled_index() -> int:
            return self.service.event_marks.get(device, {}).get(unit_of(connection.ident), 0)

        connection = DeviceConnection(url, message, event, session, journaled_index=journaled_index,
                                      on_indexed=indexed, backoff=self.backoff)
        return connection

    def _dropped(self, device: str, msg: EventsDropped, resumed_from: int | None) -> None:
        """Journal a device's EventsDropped: an alarm for an overflow, a warning beside the
        connection's EVENTS_LOST alarm for events a host confirmed (CONFIRMED). A unit this journal
        keeps no mark of (resumed from 0) is no exception: the host that confirmed them may have
        been another table's, one that kept no journal (a tool that told it NO_JOURNAL), or this
        one before the unit's mark was let go (MARKS_PER_DEVICE), and only the supervisor can tell
        which, against the cards; the message says so."""
        last = msg.first_index + msg.count - 1
        detail = f"{device} no longer has events {msg.first_index}..{last}: {msg.reason.name.lower()}"
        if msg.reason is DropReason.OVERFLOW:
            severity = Severity.ALARM
        else:
            severity = Severity.WARNING
            if resumed_from == 0:
                detail += (" (this journal keeps no mark of this unit: confirmed by another table's host, by a "
                           "tool that kept no journal, or here before the unit's mark was let go)")
        self._alarm(device, Reason.DEVICE_DROPPED_EVENTS, severity, detail, first_index=msg.first_index,
                    count=msg.count, drop_reason=msg.reason.name.lower(), resumed_from=resumed_from)

    def _alarm(self, device: str, reason: Reason, severity: Severity, message: str, **data: Any) -> None:
        """Journal a connection's record (lost events, a flapping device); at alarm severity it is also
        one of the table's open alarms (in its snapshot, committed with this record: add() makes the
        commit carry one)."""
        event = Event(reason, device, message, severity, data)
        if severity is Severity.ALARM:
            self.service.table.alarms.raise_from(event)
        self.service.add(Entry.from_event(event, ts_ns=time.time_ns()))

    def _confirm(self, marks: EventMarks) -> None:
        """After a commit: the devices may forget what it journaled (only the unit that numbered it)."""
        for name, connection in self.connections.items():
            index = marks.get(MODEL_NAMES[name], {}).get(unit_of(connection.ident))
            if index is None:
                continue
            try:
                connection.confirm(index)
            except EventIndexError:  # journaled before a restart, not delivered by this connection: said at resume
                pass

    async def start(self) -> None:
        for connection in self.connections.values():
            await connection.start()

    async def close(self) -> None:
        for connection in self.connections.values():
            await connection.close()

    def links(self) -> dict[str, bool]:
        """Model name -> whether its session is up now."""
        return {MODEL_NAMES[name]: c.connected for name, c in self.connections.items()}

    def name_of(self, device: str) -> str:
        """A device as the API names it (``shoe``, ``shuffler``), or its URL as configured: its name."""
        for name, connection in self.connections.items():
            if device == connection.url:
                return name
        return device

    def connected(self, name: str) -> DeviceConnection:
        """The connection to ``name``; CommandFailed naming the device when it is unknown or offline."""
        connection = self.connections.get(name)
        if connection is None:
            raise CommandFailed(f"no device {name!r} at this table (devices: {', '.join(self.connections)})",
                                code=ErrorCode.BAD_ARGS)
        if not connection.connected:
            raise CommandFailed(f"device {name} ({connection.url}) is offline", code=ErrorCode.DEVICE_OFFLINE)
        return connection


# ---- technician commands ---------------------------------------------------------------------

class _Args(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    pass


class DeviceArgs(_Args, frozen=True):
    device: str


class EnrollArgs(_Args, frozen=True):
    device: str
    #: the fingerprint the technician was shown and compared; left out: only show it
    fingerprint: str | None = None


class ClearFaultArgs(_Args, frozen=True):
    device: str
    code: str


def parse_args(name: str, args: dict[str, Any], kind: type[msgspec.Struct]) -> Any:
    try:
        return msgspec.convert(args, kind)
    except msgspec.ValidationError as exc:
        raise CommandFailed(schema_problem(exc).sentence(name), code=ErrorCode.BAD_ARGS) from None


async def run_device_command(name: str, args: dict[str, Any], devices: Devices, decks: int,
                             public_key: Path | None, given: Callable[[dict[str, Any]], None],
                             who: str, supervisor: Callable[[str], bool]) -> dict[str, Any]:
    """Do technician command ``name`` for ``who``; returns what the device said (for the journal
    record). ``given(result)`` journals the command's record before the device has done it:
    called as StartShuffle goes to the shuffler (the shuffle's operator and its command record are
    journaled before the shuffler reports on it), and before a firmware transfer starts (what it
    will do, its "done" record after it). ``supervisor(name)``: whether that login holds the
    supervisor role (a firmware downgrade's permission). A device's Refused of any of these ends it
    at once, its reason in the error."""
    try:
        if name == "selftest":
            conn = devices.connected(parse_args(name, args, DeviceArgs).device)
            result = await conn.request(SelfTest(), SelfTestResult, timeout=5.0)
            return {"passed": result.passed, "detail": result.detail}
        if name == "counters":
            conn = devices.connected(parse_args(name, args, DeviceArgs).device)
            counters = await conn.request(CountersRequest(), Counters)
            return {f: getattr(counters, f) for f in ("shuffles", "cards", "jams", "faults")}
        if name == "clear_fault":
            parsed = parse_args(name, args, ClearFaultArgs)
            try:
                code = FaultCode[parsed.code.upper()]
            except KeyError:
                raise CommandFailed(f"clear_fault: code {parsed.code!r} is not a fault "
                                    f"({', '.join(c.name.lower() for c in FaultCode)})", code=ErrorCode.BAD_ARGS) from None
            conn = devices.connected(parsed.device)
            cleared = await conn.send_expecting(ClearFault(code), FaultCleared, timeout=5.0)  # an event in 1.1
            return {"cleared": cleared.code.name.lower()}
        if name == "start_shuffle":
            parse_args(name, args, _Args)
            conn = devices.connected("shuffler")
            asked = {"decks": decks}
            given(asked)
            # its first report says it started (the shuffle may stop on a fault at once); a Refused says why not
            await conn.send_expecting(StartShuffle(decks), SHUFFLE_STARTED, timeout=SHUFFLE_START_TIMEOUT_S)
            return asked
        if name == "enroll":
            parsed = parse_args(name, args, EnrollArgs)
            return devices.enrol(parsed.device, who, parsed.fingerprint)
        if name == "retry_trust":
            return devices.retry(parse_args(name, args, DeviceArgs).device)
        if name == "firmware_update":
            return await _firmware(parse_args(name, args, FirmwareUpdateArgs), devices, public_key, given, supervisor)
    except (CommandFailed, TableError):  # the table's refusal (start_shuffle) reads as any refused command's
        raise
    except CarddError as exc:  # the device refused, timed out or went away: one line, named
        raise CommandFailed(f"{name}: {exc}") from None
    raise CommandFailed(f"{name} is not a device command", code=ErrorCode.UNKNOWN_COMMAND)


async def _firmware(args: FirmwareUpdateArgs, devices: Devices, public_key: Path | None,
                    given: Callable[[dict[str, Any]], None], supervisor: Callable[[str], bool]) -> dict[str, Any]:
    """Check the image against the key and the device (nothing sent before), journal what the
    transfer will do (``given``), then send it over the daemon's own link: the device's result
    is the "done" record, a failure the refusal record after it."""
    if public_key is None:
        raise CommandFailed("firmware_update: no [firmware] public_key is configured: firmware updates are refused")
    if (args.image is None) == (args.image_base64 is None):
        raise CommandFailed("firmware_update: give the image as image_base64 (its bytes) or image (a path), "
                            "one of them", code=ErrorCode.BAD_ARGS)
    if args.allow_downgrade_by is not None and not supervisor(args.allow_downgrade_by):
        raise CommandFailed(f"firmware_update: a downgrade allowed by {args.allow_downgrade_by!r}: no login of that "
                            "name holds the supervisor role here (a supervisor allows it, by login name)",
                            code=ErrorCode.BAD_ARGS)
    name = devices.name_of(args.device)
    conn = devices.connected(name)
    try:  # off the loop: a file on a slow disk must not stop the cards (nor a device or FIFO: refused unread)
        key, signed = await asyncio.to_thread(_read_firmware, public_key, args)
    except OSError as exc:
        raise CommandFailed(f"firmware_update: {exc.filename}: {exc.strerror}") from None
    try:  # the way forward, as the API takes it (cardctl shows its options: CARDCTL_ARGUMENTS)
        plan = check_update(conn.ident, signed, key, allow_downgrade_by=args.allow_downgrade_by, reflash=args.force)
    except FirmwareSameVersion as exc:
        raise CommandFailed(f"firmware_update: {exc}: flash it again with firmware_update force=true") from None
    except FirmwareDowngradeRefused as exc:
        raise CommandFailed(f"firmware_update: {exc}: a supervisor allows it with firmware_update "
                            "allow_downgrade_by=NAME") from None
    ident = conn.ident
    facts: dict[str, Any] = {
        "device": name, "model": plan.header.model, "serial": ident.serial if ident is not None else "",
        "from_version": plan.from_version, "to_version": plan.header.version, "downgrade": plan.downgrade,
        "downgrade_allowed_by": plan.allowed_by, "image_bytes": len(signed.to_bytes()),
        "image_sha256": hashlib.sha256(signed.to_bytes()).hexdigest()}
    given({"stage": "started", **facts})
    done = await update_firmware(conn, signed, key,  # type: ignore[arg-type]
                                 allow_downgrade_by=args.allow_downgrade_by, reflash=args.force)
    if not done.result.ok:
        raise CommandFailed(f"firmware_update: the device refused the image: {done.result.detail}")
    return {"stage": "done", **facts, "ok": done.result.ok, "detail": done.result.detail}


def journaled_args(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` as the journal keeps them: a firmware image's bytes left out (up to 22 MB of
    base64; the records name its size and SHA-256)."""
    if name != "firmware_update" or "image_base64" not in args:
        return args
    sent = args["image_base64"]
    left_out = f"({len(sent)} characters, left out of the journal)" if isinstance(sent, str) else "(left out)"
    return {**args, "image_base64": left_out}


def _read_firmware(public_key: Path, args: FirmwareUpdateArgs) -> tuple[Ed25519PublicKey, SignedImage]:
    """The configured key and the image sent (or the file named, read only as a bounded regular file)."""
    key = read_public_key_file(public_key)
    if args.image_base64 is not None:
        try:
            data = base64.b64decode(args.image_base64, validate=True)
        except binascii.Error:
            raise CommandFailed("firmware_update.image_base64: not base64", code=ErrorCode.BAD_ARGS) from None
        return key, SignedImage.from_bytes(data)
    assert args.image is not None
    path = Path(args.image)
    if not path.is_absolute():
        raise CommandFailed(f"firmware_update: image {args.image!r}: give an absolute path", code=ErrorCode.BAD_ARGS)
    return key, read_image_file(path)
