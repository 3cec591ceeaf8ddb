"""Traces of what devices said: ``capture URL FILE`` records one device, ``replay FILE`` serves a
trace's devices on pseudo-terminals so the daemon (or any client) reads them like the devices,
and ``monitor URL`` shows decoded frames and link events live. ``cardbench record`` writes the
same format for a whole bench scenario, ``cardbench replay`` plays it into a fresh daemon
(cardd/bench/replay.py, docs/bench.md).

A trace file is JSON lines (format 2; format 1 files are still read). The first line is the
header: ``cardd_trace``, the time the capture started, ``devices`` (role -> the device: URL,
role, model, serial, firmware, protocol, and ``faults``: the link-level fault switches a replay
puts back on the wire), the ``link`` settings of a capture, and for a recorded scenario its
``rules`` and ``scenario``. Each further line is one of:

- ``{"t", "device", "type", "payload", "fields"}``: a message the device sent by itself (``t``
  seconds after the start; ``payload``: the message's exact bytes in hex; ``fields`` for people);
- ``{"t", "device", "request", "emitted", "replies"}``: what the device did when the host sent
  ``request`` (a type name): the messages it sent while handling it and its replies, in hex
  (a replaying device answers that request the same way, once);
- ``{"t", "device", "hand": "unplug" | "replug" | "reboot" | "faults", ...}``: what was done to
  the device (unplugged, plugged back, rebooted, ``set``: link fault switches changed);
- ``{"t", "api", "args", "outcome"}``: an API command a dealer or supervisor sent, at its place
  in the stream, and its outcome (``ack`` or ``refused:CODE``);
- ``{"t", "wait": {"path", "equals" | "matches", "timeout"}}``: the bench waited until the
  daemon's STATE at ``path`` was so (a scenario's wait step);
- ``{"t", "device", "event", "detail"}``: a link event of a capture (for people; not replayed).

Format 1 had one ``device`` in the header and lines without ``device``. Replies to the host's
identity, status, counters and self-test requests, the EventsDropped that answers its resume,
and heartbeats are not recorded: the replaying device makes its own.
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import re
import signal
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import click

from cardd.cli.common import EXIT_USAGE, CliError, check_output_directory, emit_json, json_option
from core.ctrl_c import end_like_ctrl_c
from cardd.cli.device import device_error
from cardd.cli.message_text import describe
from cardd.config import rules_file
from core.errors import CarddError
from core.parse_errors import json_text_problem
from devices.game.rules import load_rules
from drivers.factory import open_transport
from drivers.urls import parse_url
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.framing import Frame, FrameDecoder, FrameKind
from firmware_bridge.link_types import SEQ_MOD
from firmware_bridge.messages import (EVENT_MESSAGES, CardRead, Counters, CountersRequest, DeviceRole, EventsDropped,
                                      FirmwareResult, Heartbeat, Hello, Ident, Message, MessageDecodeError, Refused, SelfTest,
                                      SelfTestResult, ShoeLoaded, ShuffleComplete, Status, StatusRequest,
                                      UnreadableCard, decode, encode)
from firmware_bridge.session import SessionConfig, SessionEvent
from simulators.device import SimulatedDevice
from simulators.faults import WIRE_SWITCHES, Faults, FaultSpecError
from simulators.pty_endpoint import PtyEndpoint

TRACE_FORMAT = 2
#: format versions read_trace understands (1: one device, no commands)
TRACE_FORMATS_READ = (1, 2)
#: answers to a host's own requests (EventsDropped answers the capture's ResumeEvents), and
#: heartbeats: the replaying device makes its own
NOT_RECORDED = (Ident, Status, Counters, SelfTestResult, FirmwareResult, Refused, Heartbeat, EventsDropped)


class TraceError(CarddError):
    """A trace file that cannot be read: names the file and line."""


@dataclasses.dataclass(frozen=True)
class Said:
    """A message the device sent by itself."""
    line: int
    t: float
    device: str
    message: Message


@dataclasses.dataclass(frozen=True)
class Answered:
    """What the device did when the host sent ``request``: messages sent meanwhile, then replies."""
    line: int
    t: float
    device: str
    request: str
    emitted: tuple[Message, ...]
    replies: tuple[Message, ...]


@dataclasses.dataclass(frozen=True)
class Handled:
    """What was done to the device: ``unplug``, ``replug``, ``reboot`` or ``faults`` (``set``)."""
    line: int
    t: float
    device: str
    hand: str
    set: str = ""


@dataclasses.dataclass(frozen=True)
class Commanded:
    """An API command, at its place in the stream, and its outcome (``ack`` / ``refused:CODE``)."""
    line: int
    t: float
    name: str
    args: dict[str, Any]
    outcome: str


@dataclasses.dataclass(frozen=True)
class Waited:
    """The bench waited for the daemon's STATE: ``until`` is the scenario's wait step (path, equals
    or matches, timeout), so a replay waits there too (a silent line must last until the daemon
    notices)."""
    line: int
    t: float
    until: dict[str, Any]


TraceEntry = Said | Answered | Handled | Commanded | Waited
HANDS = ("unplug", "replug", "reboot", "faults")


@dataclasses.dataclass(frozen=True)
class Trace:
    path: Path
    header: dict[str, Any]
    #: role ("shoe", "shuffler") -> the device's identity as the header states it
    devices: dict[str, dict[str, Any]]
    entries: list[TraceEntry]

    @property
    def messages(self) -> list[tuple[float, Message]]:
        """(seconds after the start, message) of every device, in order."""
        return [(e.t, e.message) for e in self.entries if isinstance(e, Said)]


def _check_device(path: Path, role: str, device: Any) -> dict[str, Any]:
    wrong = _device_problem(role, device)
    if wrong is not None:
        raise TraceError(f"{path}:1: the header's device {role} is incomplete or wrong: {wrong}")
    return dict(device)


def _device_problem(role: str, device: Any) -> str | None:
    """What is wrong with a trace header's device ``role``, in the trace's terms; None if nothing."""
    if not isinstance(device, dict):
        return "expected an object"
    missing = [key for key in ("role", "model", "serial", "firmware", "protocol") if key not in device]
    if missing:
        return f"missing key(s) {', '.join(missing)}"
    roles = [known.name.lower() for known in DeviceRole]
    if str(device["role"]).lower() not in roles:
        return f"role {device['role']!r} is not one of {', '.join(roles)}"
    if str(device["role"]).lower() != role:
        return f"role {device['role']!r} listed as {role!r}"
    if not re.fullmatch(r"\d+(?:\.\d+)?", str(device["protocol"])):
        return f"protocol {device['protocol']!r}: expected MAJOR.MINOR"
    faults = device.get("faults", "")
    if not isinstance(faults, str):
        return "faults: expected a string of fault switches"
    try:
        Faults.parse(faults)
    except FaultSpecError as exc:
        return str(exc)
    return None


def _payload(text: Any) -> Message:
    """A message from its bytes in hex; ValueError or MessageDecodeError saying what is wrong."""
    try:
        data = bytes.fromhex(text)
    except (ValueError, TypeError):
        raise ValueError(f"payload {str(text)[:24]!r} is not the message's bytes in hex") from None
    return decode(data)


def _messages(values: Any) -> tuple[Message, ...]:
    if not isinstance(values, list):
        raise ValueError(f"expected a list of hex payloads, got {values!r}")
    return tuple(_payload(value) for value in values)


def _entry(number: int, entry: dict[str, Any], devices: dict[str, dict[str, Any]], single: str | None) -> TraceEntry | None:
    t = entry["t"]
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        raise ValueError(f"t {t!r:.24}: expected the seconds since the trace began (a number)")
    t = float(t)
    if "api" in entry:
        if not isinstance(entry.get("args", {}), dict):
            raise ValueError(f"args must be an object, got {entry['args']!r}")
        return Commanded(number, t, str(entry["api"]), entry.get("args", {}), str(entry.get("outcome", "ack")))
    if "wait" in entry:
        if not isinstance(entry["wait"], dict) or "path" not in entry["wait"]:
            raise ValueError(f"wait must be an object with a path, got {entry['wait']!r}")
        return Waited(number, t, entry["wait"])
    device = entry.get("device", single)
    if not isinstance(device, str) or device not in devices:
        raise ValueError(f"device {device!r} is not in the header (devices: {', '.join(devices)})")
    if "payload" in entry:
        return Said(number, t, device, _payload(entry["payload"]))
    if "request" in entry:
        return Answered(number, t, device, str(entry["request"]), _messages(entry.get("emitted", [])),
                        _messages(entry.get("replies", [])))
    if "hand" in entry:
        if not isinstance(entry["hand"], str) or entry["hand"] not in HANDS:
            raise ValueError(f"hand {entry['hand']!r}: expected one of {', '.join(HANDS)}")
        if entry["hand"] == "faults":
            if not isinstance(entry["set"], str):
                raise ValueError(f"set {entry['set']!r:.24}: expected a string of fault switches")
            Faults.parse(entry["set"])
        return Handled(number, t, device, entry["hand"], str(entry.get("set", "")))
    if "event" in entry:
        return None  # a capture's link event: for people
    raise ValueError("expected a device message (payload), an answer (request), a hand, an api command, a wait "
                     "or a link event")


def read_trace(path: Path) -> Trace:
    """The trace in ``path``; TraceError naming the file and line of the first thing wrong."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise TraceError(f"{path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        header = json.loads(lines[0]) if lines else {}
    except json.JSONDecodeError:
        header = {}
    if not isinstance(header, dict) or header.get("cardd_trace") not in TRACE_FORMATS_READ:
        raise TraceError(f"{path}:1: not a cardd trace (its first line must be the header, cardd_trace "
                         f"{' or '.join(map(str, TRACE_FORMATS_READ))})")
    single: str | None = None
    if header["cardd_trace"] == 1:  # one device, lines without "device"
        device = header.get("device")
        single = str(device.get("role", "?")) if isinstance(device, dict) else "?"
        raw_devices: Any = {single: device}
    else:
        raw_devices = header.get("devices")
        if not isinstance(raw_devices, dict) or not raw_devices:
            raise TraceError(f"{path}:1: the header names no devices")
    devices = {role: _check_device(path, role, device) for role, device in raw_devices.items()}
    entries: list[TraceEntry] = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            parsed = json.loads(line)
            if not isinstance(parsed, dict):
                raise ValueError(f"expected a JSON object, got {line[:40]!r}")
            entry = _entry(number, parsed, devices, single)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{path}:{number}: {json_text_problem(exc).in_a_line()}") from None
        except KeyError as exc:
            raise TraceError(f"{path}:{number}: missing key {exc}") from None
        except (ValueError, MessageDecodeError) as exc:  # the checks' own words (_entry, _payload, decode)
            raise TraceError(f"{path}:{number}: {exc}") from None
        if entry is not None:
            entries.append(entry)
    return Trace(path, header, devices, entries)


def device_info(url: str, ident: Ident, faults: str = "") -> dict[str, Any]:
    """A header's entry for one device."""
    return {"url": url, "role": ident.role.name.lower(), "model": ident.model, "serial": ident.serial,
            "firmware": ident.firmware_version, "protocol": f"{ident.protocol_major}.{ident.protocol_minor}",
            "faults": faults}


def message_line(t: float, device: str, msg: Message) -> dict[str, Any]:
    """A trace line for a message the device sent by itself."""
    return {"t": t, "device": device, "type": type(msg).__name__, "payload": encode(msg).hex(),
            "fields": describe(msg)}


class FrameView:
    """What the read-only monitor shows of each frame it overhears. A DATA frame whose seq came
    by among the recent ones is the device resending what nobody acknowledged (the monitor never
    does): it is marked ``retransmitted``, so one card read is not shown as several."""

    def __init__(self) -> None:
        # a retransmission is within the sender's window, which is under SEQ_MOD / 2 frames;
        # a seq older than that is new again once the numbers wrap
        self.recent: collections.deque[int] = collections.deque(maxlen=SEQ_MOD // 2)

    def entry(self, frame: Frame) -> dict[str, Any]:
        entry: dict[str, Any] = {"frame": frame.kind.name, "seq": frame.seq, "ack": frame.ack}
        if frame.kind in (FrameKind.RESET, FrameKind.RESET_ACK):
            self.recent.clear()  # a fresh link numbers its frames from 0 again
        elif frame.kind is FrameKind.DATA:
            if frame.seq in self.recent:
                entry["retransmitted"] = True
            else:
                self.recent.append(frame.seq)
            try:
                entry["message"] = describe(decode(frame.payload))
            except MessageDecodeError as exc:
                entry["bad_payload"] = str(exc)
        return entry


def capture_file_exists(path: Path) -> str:
    return f"FILE {path} exists: a capture never overwrites a file"


class TraceWriter:
    def __init__(self, path: Path, url: str, ident: Ident) -> None:
        try:
            self.file: IO[str] = open(path, "x")
        except FileExistsError:
            raise CliError(capture_file_exists(path), EXIT_USAGE) from None
        except OSError as exc:  # its directory was checked before the device was opened: this is the disk's
            raise CliError(f"FILE {path}: cannot be created: {exc.strerror}") from None
        self.start = time.monotonic()
        self.count = 0
        self.role = ident.role.name.lower()
        parsed = parse_url(url)
        settings = dataclasses.asdict(parsed.serial_settings) if parsed.serial_settings is not None else None
        self.header = {
            "cardd_trace": TRACE_FORMAT, "started": datetime.now(timezone.utc).isoformat(),
            "devices": {self.role: device_info(url, ident)},
            "link": {"url": url, "scheme": parsed.scheme, "serial_settings": settings}}
        self._line(self.header)

    def _line(self, entry: dict[str, Any]) -> None:
        self.file.write(json.dumps(entry, default=str) + "\n")
        self.file.flush()

    def message(self, msg: Message) -> dict[str, Any] | None:
        if isinstance(msg, NOT_RECORDED):
            return None
        entry = message_line(round(time.monotonic() - self.start, 6), self.role, msg)
        self._line(entry)
        self.count += 1
        return entry

    def event(self, event: SessionEvent) -> dict[str, Any]:
        entry = {"t": round(time.monotonic() - self.start, 6), "device": self.role, "event": str(event.kind),
                 "detail": event.detail}
        self._line(entry)
        return entry

    def close(self) -> None:
        self.file.close()


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)


async def until_stopped(stop: asyncio.Event, duration: float | None) -> None:
    """Until Ctrl-C or SIGTERM (``stop``), or ``duration`` seconds."""
    try:
        await asyncio.wait_for(stop.wait(), duration)
    except TimeoutError:
        pass


async def _capture(url: str, path: Path, count: int | None, duration: float | None, as_json: bool) -> int:
    stop = asyncio.Event()
    _stop_on_signals(stop)
    writer: TraceWriter | None = None
    early: list[Message] = []

    def on_message(msg: Message) -> None:
        if writer is None:
            early.append(msg)
            return
        entry = writer.message(msg)
        if entry is not None and as_json:
            emit_json(entry)
        if count is not None and writer.count >= count:
            stop.set()

    def on_event(event: SessionEvent) -> None:
        if writer is not None:
            entry = writer.event(event)
            if as_json:
                emit_json(entry)

    connection = DeviceConnection(url, on_message, on_event, SessionConfig(host_name="cardctl capture"))
    try:
        ident = await connection.open()
        writer = TraceWriter(path, url, ident)
        for msg in early:
            on_message(msg)
        if not as_json:
            click.echo(f"capturing {ident.model} {ident.serial} from {url} into {path} (Ctrl-C stops)", err=True)
        await until_stopped(stop, duration)
    finally:
        await connection.close()
        if writer is not None:
            writer.close()
    return writer.count


@click.command("capture")
@click.argument("url")
@click.argument("path", metavar="FILE", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--count", type=int, help="stop after this many messages")
@click.option("--duration", type=float, help="stop after this many seconds")
@json_option
def capture(url: str, path: Path, count: int | None, duration: float | None, as_json: bool) -> None:
    """Record what the device at URL says into a new trace FILE, until Ctrl-C.

    The header names the device, the link settings and the time; `cardctl replay FILE`
    plays it back. --json: each recorded line on stdout too.

    \b
    Example:
      cardctl capture serial:///dev/cardd/shoe-SHOE0001 shoe-friday.trace --duration 600
    """
    check_output_directory(path, "FILE")  # before the device is opened: a mistyped folder is a usage error
    if path.exists():
        raise CliError(capture_file_exists(path), EXIT_USAGE)
    try:
        parse_url(url)
        recorded = asyncio.run(_capture(url, path, count, duration, as_json))
    except CarddError as exc:
        if isinstance(exc, CliError):
            raise
        raise device_error(url, exc) from None
    if not as_json:
        click.echo(f"{recorded} messages written to {path}")


#: what a host asks that the replaying device answers itself (its identity, status, counters,
#: self-test, heartbeats): the answers to every other request are recorded
ANSWERED_BY_REPLAY = (Hello, StatusRequest, Heartbeat, CountersRequest, SelfTest)
#: fault switches that act on the link, not on what the device says: a replay puts them back
#: (the device faults are in the recorded messages already)
LINK_SWITCHES = (*WIRE_SWITCHES, "seed", "event_buffer", "same_nonce")
#: the longest a replay waits for the host to take one traced message
TAKE_TIMEOUT_S = 10.0


def link_switches(values: dict[str, Any]) -> str:
    """The link fault switches among ``values`` as a spec string (empty: none)."""
    def text(value: Any) -> str:
        return ("1" if value else "0") if isinstance(value, bool) else str(value)
    return " ".join(f"{name}={text(value)}" for name, value in values.items() if name in LINK_SWITCHES)


def switches(spec: str) -> dict[str, Any]:
    """The switches a spec string names, with their values (defaults included, unlike Faults.active)."""
    parsed = Faults.parse(spec)
    names = [entry.partition("=")[0].strip() for entry in re.split(r"[\s;]+", spec) if entry.strip()]
    return {name: getattr(parsed, name) for name in names}


class TraceDevice(SimulatedDevice):
    """A simulated device that is a traced one: its identity as captured (protocol version
    included), and the recorded answer to each request the host sends (once each, in order).

    ``play(speed)`` sends the traced messages by itself once a host has said HELLO (at the
    recorded pace times ``speed``; None: as fast as the link acknowledges them); without it
    the caller sends each one with ``say`` (cardbench replay, which interleaves the devices and
    the API commands)."""

    ROLE = DeviceRole.SHOE  # the traced device's, in the class ``traced`` makes
    MODEL = "trace"

    @classmethod
    def traced(cls, trace: Trace, role: str) -> TraceDevice:
        """The device ``role`` of ``trace`` (a class of its own: role, model and firmware are class-wide)."""
        info = trace.devices[role]
        kind = type(f"Traced{role.title()}", (cls,), {"ROLE": DeviceRole[info["role"].upper()],
                                                       "MODEL": str(info["model"]),
                                                       "DEFAULT_FIRMWARE": str(info["firmware"])})
        return kind(trace, role)

    def __init__(self, trace: Trace, role: str) -> None:
        info = trace.devices[role]
        self.major, self.minor = (int(part) for part in str(info["protocol"]).split(".", 1))
        self.said = [(e.t, e.message) for e in trace.entries if isinstance(e, Said) and e.device == role]
        self.answers: dict[str, collections.deque[Answered]] = {}
        for entry in trace.entries:
            if isinstance(entry, Answered) and entry.device == role:
                self.answers.setdefault(entry.request, collections.deque()).append(entry)
        self.speed: float | None = None
        self.playing = self.autoplay = False
        #: the cards each load of this shoe held (its Status counts them, as the traced shoe's did)
        self.loads = collections.deque(_load_sizes(trace, role))
        self.load_size: int | None = None
        self.out = 0  # the last card index said since the load
        faults = Faults(**switches(str(info.get("faults", "")))).replace(legacy_1_0=self.minor == 0)
        super().__init__(str(info["serial"]), faults=faults, heartbeat_s=1.0)

    def ident(self) -> Ident:
        return Ident(self.ROLE, self.MODEL, self.serial, self.firmware_version, self.major, self.minor, self.boot_id)

    def handle(self, msg: Message) -> list[Message]:
        queue = self.answers.get(type(msg).__name__)
        if queue and not isinstance(msg, ANSWERED_BY_REPLAY):
            answer = queue.popleft()
            for emitted in answer.emitted:
                self.emit(emitted)
            return list(answer.replies)
        if isinstance(msg, Hello) and self.autoplay and not self.playing:
            self.playing = True
            self.spawn(self._play())
        return super().handle(msg)

    def play(self, speed: float | None) -> None:
        self.autoplay, self.speed = True, speed

    async def _play(self) -> None:
        await asyncio.sleep(0.05)  # the host's session is up once it has our IDENT
        last = 0.0
        for at, msg in self.said:
            if self.speed is not None and at > last:
                await asyncio.sleep((at - last) / self.speed)
            last = at
            self.emit(msg)
            await self.flush()

    async def say(self, msg: Message, wait: bool = True) -> bool:
        """Send one traced message; with ``wait``, until the host has it (an event of protocol 1.1:
        until the host confirms it journaled). False when that took longer than TAKE_TIMEOUT_S."""
        self.emit(msg)
        if not wait:
            return True
        try:
            async with asyncio.timeout(TAKE_TIMEOUT_S):
                while True:  # polled: the endpoint's flush wakes on what the host sends, not on its ACKs
                    try:
                        await asyncio.wait_for(self.flush(), 0.005)
                        break
                    except TimeoutError:
                        continue
                if type(msg) in EVENT_MESSAGES and self.speaks_1_1:
                    index = self.events.last_index
                    while self.events.confirmed < index:
                        await asyncio.sleep(0.002)
        except TimeoutError:
            return False
        return True

    def emit(self, msg: Message) -> None:
        if isinstance(msg, ShoeLoaded):
            self.load_size, self.out = (self.loads.popleft() if self.loads else None), 0
        elif isinstance(msg, (CardRead, UnreadableCard)):
            self.out = max(self.out, msg.index)
        super().emit(msg)

    def cards_held(self) -> int:
        """What the traced shoe held as the replay stands: the load less the cards it said left it
        (the daemon asks every device's Status after each handshake and checks a shoe's count)."""
        return 0 if self.load_size is None else max(0, self.load_size - self.out)


def _load_sizes(trace: Trace, role: str) -> list[int | None]:
    """The cards of each ShoeLoaded ``role`` said in ``trace``: the stack the shuffler counted last
    (ShuffleComplete) before it; when none did, the full decks of the trace's rules if they have the
    dealer shuffle by hand (the shoe is loaded with them: docs/deal-tracking.md), else None (not known)."""
    counted: int | None = _hand_shuffled_cards(trace)
    sizes: list[int | None] = []
    for entry in trace.entries:
        if isinstance(entry, Said) and isinstance(entry.message, ShuffleComplete):
            counted = entry.message.card_count
        elif isinstance(entry, Said) and entry.device == role and isinstance(entry.message, ShoeLoaded):
            sizes.append(counted)
    return sizes


def _hand_shuffled_cards(trace: Trace) -> int | None:
    """The cards of a shoe shuffled by hand under the trace's rules (its ``rules``: a name in rules/ or
    a path beside the trace); None when they have a shuffler count the shoe, or are not known."""
    name = trace.header.get("rules")
    if not isinstance(name, str):
        return None
    try:
        rules = load_rules(rules_file(name, trace.path.parent))
    except CarddError:
        return None
    return 52 * rules.decks if rules.shoe.shuffle == "hand" else None


def trace_device(trace: Trace, speed: float | None, role: str | None = None) -> TraceDevice:
    """The traced device ``role`` (default: the trace's first) playing its messages by itself."""
    device = TraceDevice.traced(trace, role or next(iter(trace.devices)))
    device.play(speed)
    return device


@click.command("replay")
@click.argument("path", metavar="FILE", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--link", type=click.Path(path_type=Path), help="the path to serve on (a symlink to the pty; "
              "a trace of one device)")
@click.option("--speed", type=float, default=None, help="play at the recorded pace times this (default: as fast "
              "as the host acknowledges)")
@json_option
def replay(path: Path, link: Path | None, speed: float | None, as_json: bool) -> None:
    """Serve trace FILE's devices on pseudo-terminals: the daemon (or any client) opens them like the devices.

    Prints the URL to open for each device, then plays its messages once a host has shaken hands;
    Ctrl-C stops. The API commands of a recorded scenario are not sent (`cardbench replay` does).

    \b
    Example:
      cardctl replay shoe-friday.trace --link /tmp/shoe
      cardd --config replay.toml     # with [devices] shoe = "serial:///tmp/shoe"
    """
    try:
        trace = read_trace(path)
    except TraceError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    if link is not None and len(trace.devices) > 1:
        raise CliError(f"{path} holds {len(trace.devices)} devices ({', '.join(trace.devices)}): --link serves one",
                       EXIT_USAGE)
    endpoints: list[PtyEndpoint[TraceDevice]] = []
    try:
        for role in trace.devices:
            endpoint = PtyEndpoint(trace_device(trace, speed, role), link=str(link) if link else None)
            endpoints.append(endpoint.start())
            info = trace.devices[role]
            said = len(endpoint.device.said)
            if as_json:
                emit_json({"url": endpoint.url, "tty": endpoint.tty, "messages": said, "device": info})
            else:
                click.echo(f"replaying {said} messages of {info['model']} {info['serial']} on {endpoint.url} "
                           f"(Ctrl-C stops)")
        end_like_ctrl_c()
        try:
            while True:
                signal.pause()
        except KeyboardInterrupt:
            pass
    finally:
        for endpoint in endpoints:
            endpoint.stop()


async def _monitor(url: str, talk: bool, as_json: bool, duration: float | None) -> None:
    stop = asyncio.Event()
    _stop_on_signals(stop)
    start = time.monotonic()

    def show(entry: dict[str, Any]) -> None:
        entry = {"t": round(time.monotonic() - start, 3), **entry}
        if as_json:
            emit_json(entry)
        else:
            click.echo(" ".join(f"{k}={v}" for k, v in entry.items()))

    if talk:
        connection = DeviceConnection(url, lambda m: show({"message": describe(m)}),
                                      lambda e: show({"link": str(e.kind), "detail": e.detail}),
                                      SessionConfig(host_name="cardctl monitor"))
        try:
            await connection.open()  # a missing, busy or silent device is one line, not a quiet wait
            await until_stopped(stop, duration)
        finally:
            await connection.close()
        return

    decoder = FrameDecoder(on_error=lambda exc: show({"frame_error": str(exc)}))
    frames = FrameView()

    class Listener:
        def bytes_received(self, data: bytes) -> None:
            for frame in decoder.feed(data):
                show(frames.entry(frame))

        def connection_lost(self, exc: Exception | None) -> None:
            show({"link": "lost", "detail": str(exc or "closed")})
            stop.set()

    transport = await open_transport(url, Listener())  # read only: nothing is ever written
    show({"link": "open", "detail": url})
    try:
        await until_stopped(stop, duration)
    finally:
        transport.close()


@click.command("monitor")
@click.argument("url")
@click.option("--talk", is_flag=True, help="shake hands and keep a session (writes to the device)")
@click.option("--duration", type=float, help="stop after this many seconds")
@json_option
def monitor(url: str, talk: bool, duration: float | None, as_json: bool) -> None:
    """Show the frames the device at URL sends, decoded, and link events, live.

    Without --talk nothing is ever written to the device (it only listens). JSON lines with --json.

    \b
    Example:
      cardctl monitor serial:///dev/cardd/shuffler-A1
      cardctl monitor --talk --json sim://shoe
    """
    try:
        parse_url(url)
        asyncio.run(_monitor(url, talk, as_json, duration))
    except CarddError as exc:
        raise device_error(url, exc) from None


COMMANDS = (capture, replay, monitor)
