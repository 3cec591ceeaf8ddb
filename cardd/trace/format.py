"""The trace format: what devices said, as ``cardctl capture`` captures one device and
``cardbench record`` records a scenario, read back by ``cardctl replay`` and ``cardbench replay``
(the device a replay serves: :mod:`cardd.trace.device`). Below both programs, so neither imports
the other for it. Every line of the format (JSON lines, format 2; format 1 still read):
docs/bench.md, "Record and replay"."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from cardd.message_text import describe
from core.errors import CarddError
from core.parse_errors import json_text_problem
from firmware_bridge.messages import (Counters, DeviceRole, EventsDropped, FirmwareResult, Heartbeat, Ident, Message,
                                      MessageDecodeError, Refused, SelfTestResult, Status, decode, encode)
from simulators.faults import WIRE_SWITCHES, Faults, FaultSpecError

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


#: fault switches that act on the link, not on what the device says: a replay puts them back
#: (the device faults are in the recorded messages already)
LINK_SWITCHES = (*WIRE_SWITCHES, "seed", "event_buffer", "same_nonce")


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
