"""Record and replay: a scenario run recorded as a trace (``record``), a trace replayed into a fresh
daemon (``replay_trace``) and its journal, normalised, compared with the golden file beside it
(``check``). docs/bench.md, "Record and replay"."""
from __future__ import annotations

import getpass
import json
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, cast

import msgspec

from cardd.api.client import ApiClient, ClientError, CommandRefused
from cardd.api.protocol import ApiEvent
from cardd.bench.runner import REQUEST_INTERVAL_S, BenchRig, ScenarioResult, StepFailed, run_scenario
from cardd.bench.scenario import Scenario, Step, Wait, load_scenario
from cardd.config import RULES_DIR
from cardd.trace.device import ANSWERED_BY_REPLAY, TAKE_TIMEOUT_S, TraceDevice
from cardd.trace.format import (NOT_RECORDED, TRACE_FORMAT, Answered, Commanded, Handled, Said, Trace, TraceEntry,
                                TraceError, Waited, device_info, link_switches, message_line, read_trace, switches)
from devices.models.names import MODEL_NAMES
from cardd.journal import INPUT_KEY, KIND_EVENT
from core.errors import CarddError
from core.rundirs import make_run_directory
from core.schema_errors import schema_problem
from devices.game.rules import load_rules
from firmware_bridge.messages import Message, encode
from simulators.device import SimulatedDevice
from simulators.endpoint import Endpoint, Streaming
from simulators.faults import WIRE_SWITCHES
from simulators.pty_endpoint import PtyEndpoint
from simulators.rig import SimulatedTable
from simulators.shuffler import SimulatedShuffler

TRACE_SUFFIX = ".trace"
GOLDEN_SUFFIX = ".golden"
#: journal record kinds compared: the table's events, device commands, and the API's inputs
#: (a device's inputs carry its clock and boot id, which no replay can repeat)
COMPARED_KINDS = ("event", "command")
#: data keys that hold times, boot ids, nonces or the peer's uid: a replay happens later, on another boot
#: (today only ``uid`` occurs in the compared records; the others guard what a new event may carry)
VOLATILE = frozenset({"time", "ts_ns", "at_ns", "boot_id", "uptime_ms", "device_time_ms", "elapsed_s", "uid", "nonce"})
#: a journal that has not grown for this long after the last entry is complete
SETTLE_S = 0.3


#: the simulators' fault switches (simulators/faults.py) in the classes tests/traces/ covers, each
#: with at least one trace (docs/bench.md); ``seed`` only seeds the others
FAULT_CLASSES: dict[str, frozenset[str]] = {
    "link": frozenset(WIRE_SWITCHES),
    "device": frozenset({"jam", "jam_needs_clear", "door_open", "face_up_at", "riffle_once", "missing", "extra",
                         "foreign", "duplicate", "unreadable_at", "repeat_read_at", "conflicting_read_at",
                         "skip_read_at", "late_report_at"}),
    "disconnect-reboot": frozenset({"disconnect_for", "disconnect_at", "reboot_at", "same_nonce", "no_heartbeat",
                                    "wrong_role", "flapping_ident", "status_flood"}),
    "protocol-1.0": frozenset({"legacy_1_0"}),
    "event-buffer": frozenset({"event_buffer"}),
}
#: switches no trace can hold yet: they act only on a device speaking protocol 2.0, and the
#: daemon (so a recording or a replay) speaks 1.1 (docs/protocol.md §7)
UNTRACED_CLASSES: dict[str, frozenset[str]] = {
    "protocol-2.0": frozenset({"unknown_key", "cloned_serial", "forged_tag", "replayed_capture", "downgrade_offer",
                               "rogue_host", "accept_any_proof"}),
    # a device breaking its side of the protocol where the daemon would see nothing to journal:
    # the conformance suite catches it (tests/bench/test_conformance_faults_1_1.py)
    "conformance": frozenset({"silent_overflow"}),
}


class ReplayError(CarddError):
    """A replay that could not be done as recorded: names the trace and its line."""


# ---- recording -------------------------------------------------------------------------------

class Recorder:
    """One stream of trace lines from the device threads and the bench's own, in the order they happen."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.devices: dict[str, dict[str, Any]] = {}
        self.journal: list[ApiEvent] = []
        self._lock = threading.Lock()
        self._start = time.monotonic()

    def add(self, entry: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            line = {"t": round(time.monotonic() - self._start, 4), **{k: v for k, v in entry.items() if k != "t"}}
            self.lines.append(line)
            return line

    def watch(self, role: str, device: SimulatedDevice) -> None:
        """Record what ``device`` says and what is done to it (wraps its methods on the instance)."""
        emit, handle, set_faults, reboot = device.emit, device.handle, device.set_faults, device.reboot
        answering: list[list[Message]] = []  # the messages sent while a request is handled

        def recorded_emit(msg: Message) -> None:
            if answering:
                answering[-1].append(msg)
            elif not isinstance(msg, NOT_RECORDED):
                self.add(message_line(0, role, msg))
            emit(msg)

        def recorded_handle(msg: Message) -> list[Message]:
            if isinstance(msg, ANSWERED_BY_REPLAY):
                return handle(msg)
            answering.append([])
            try:
                replies = handle(msg)
            finally:
                emitted = answering.pop()
            self.add({"device": role, "request": type(msg).__name__, "emitted": [encode(m).hex() for m in emitted],
                      "replies": [encode(m).hex() for m in replies]})
            return replies

        def recorded_set_faults(**changes: Any) -> None:
            set_faults(**changes)
            spec = link_switches(changes)
            if spec:
                self.add({"device": role, "hand": "faults", "set": spec})

        def recorded_reboot() -> None:
            self.add({"device": role, "hand": "reboot"})
            reboot()

        device.emit = recorded_emit  # type: ignore[method-assign]
        device.handle = recorded_handle  # type: ignore[method-assign]
        device.set_faults = recorded_set_faults  # type: ignore[method-assign]
        device.reboot = recorded_reboot  # type: ignore[method-assign]

    def watch_plug(self, role: str, device: SimulatedDevice) -> None:
        """Record the unplug and replug of ``device`` (its endpoint's disconnect, attached once started)."""
        disconnect = device._disconnect
        if disconnect is None:
            return

        async def recorded_disconnect(seconds: float) -> None:
            self.add({"device": role, "hand": "unplug", "seconds": seconds})
            await disconnect(seconds)
            self.add({"device": role, "hand": "replug"})

        device._disconnect = recorded_disconnect

    def watch_api(self, client: ApiClient) -> None:
        command = client.command

        def recorded_command(name: str, **args: Any) -> Any:
            line = self.add({"api": name, "args": args, "outcome": "ack"})  # before: what it causes comes after
            try:
                return command(name, **args)
            except CommandRefused as exc:
                line["outcome"] = f"refused:{exc.code}"
                raise

        client.command = recorded_command  # type: ignore[method-assign]

    def write(self, path: Path, header: dict[str, Any]) -> None:
        text = "".join(json.dumps(line, default=str) + "\n" for line in [header, *self.lines])
        path.write_text(text)


class RecordingRig(BenchRig):
    """The scenario's rig, recording into ``recorder``; the live journal is kept at the end."""

    def __init__(self, scenario: Scenario, path: Path, directory: Path, recorder: Recorder) -> None:
        super().__init__(scenario, path, directory)
        self.recorder = recorder
        self.roles: dict[str, Endpoint[Any]] = {"shoe": self.sim.shoe}
        if not self.by_hand:  # a hand-shuffled table's daemon has no shuffler
            self.roles["shuffler"] = self.sim.shuffler
        for role, endpoint in self.roles.items():
            recorder.watch(role, endpoint.device)

    def _start_daemon(self) -> None:
        devices = self.scenario.devices
        for role, endpoint in self.roles.items():
            self.recorder.watch_plug(role, endpoint.device)
            faults = switches(devices.shoe.faults if role == "shoe" else devices.shuffler.faults)
            self.recorder.devices[role] = device_info(endpoint.url, endpoint.call(endpoint.device.ident),
                                                      link_switches(faults))
        super()._start_daemon()
        self.recorder.watch_api(self.api())

    def do(self, step: Step) -> None:
        super().do(step)
        if isinstance(step, Wait):  # met: a replay waits there too (what came meanwhile is before it)
            self.recorder.add({"wait": {k: v for k, v in msgspec.to_builtins(step).items() if k != "do"}})

    def __exit__(self, *exc: object) -> None:
        if self.client is not None:
            self.recorder.journal = self.journal()
        super().__exit__(*exc)


@dataclass
class Recorded:
    scenario: Path
    trace: Path | None
    message: str = ""  # why it failed
    notes: list[str] = field(default_factory=list)


def record(scenario_path: Path, out: Path, name: str | None = None) -> Recorded:
    """Run the scenario, write ``out/NAME.trace``, replay it and write ``NAME.golden`` from the replay.
    A note when the replay's events differ from the live run's (beyond their order at start-up)."""
    recorder = Recorder()
    result = run_scenario(scenario_path, make_rig=lambda scenario, path, directory: RecordingRig(scenario, path,
                                                                                                 directory, recorder))
    if not result.passed:
        return Recorded(scenario_path, None, f"the scenario failed, nothing written: {result.message}")
    scenario = load_scenario(scenario_path)  # the file just ran: it loads
    rules = scenario.rules if (RULES_DIR / f"{scenario.rules}.toml").exists() else str(
        scenario.rules_path(scenario_path).resolve())
    header = {"cardd_trace": TRACE_FORMAT, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "devices": recorder.devices, "rules": rules, "scenario": scenario_path.as_posix(),
              "description": scenario.description}
    trace = out / f"{name or scenario_path.stem}{TRACE_SUFFIX}"
    recorder.write(trace, header)
    replayed = replay_trace(trace)
    golden_path(trace).write_text("".join(line + "\n" for line in replayed))
    live = normalise(recorder.journal)
    notes = []
    if sorted(live) != sorted(replayed):
        first = next((a, b) for a, b in zip(sorted(live) + [""] * len(replayed), sorted(replayed) + [""] * len(live))
                     if a != b)
        notes.append(f"{trace}: the replay's events differ from the live run's: live {first[0] or 'nothing'!r}, "
                     f"replay {first[1] or 'nothing'!r}")
    return Recorded(scenario_path, trace, "", notes)


# ---- replaying -------------------------------------------------------------------------------

def golden_path(trace: Path) -> Path:
    return trace.with_suffix(GOLDEN_SUFFIX)


def trace_files(paths: list[Path]) -> list[Path]:
    """Files, and the *.trace files under folders (sorted); ReplayError for a path that does not exist."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out.extend(sorted(path.rglob(f"*{TRACE_SUFFIX}")))
        elif path.exists():
            out.append(path)
        else:
            raise ReplayError(f"{path}: no such file or folder")
    return out


class _InFlight:
    """A recorded command sent on a thread of its own with its own client: ``got`` its outcome."""

    def __init__(self, entry: Commanded, client: ApiClient) -> None:
        self.entry = entry
        self.got = "no outcome"
        self.thread = threading.Thread(target=self._send, args=(client,), name=f"replay {entry.name}", daemon=True)

    def _send(self, client: ApiClient) -> None:
        try:
            with client:
                client.command(self.entry.name, **self.entry.args)
            self.got = "ack"
        except CommandRefused as exc:
            self.got = f"refused:{exc.code}"
        except ClientError as exc:  # the daemon went away: said as the outcome, checked as any
            self.got = f"error: {exc}"


class _Replay:
    """The traced devices behind ptys, a fresh daemon on them, and the stream played in order."""

    def __init__(self, trace: Trace, directory: Path) -> None:
        self.trace = trace
        rules = str(trace.header.get("rules", "casino-000"))
        self.scenario = Scenario(description=f"replay of {trace.path}", rules=rules, step=[])
        try:  # what can be refused, before any pty is made
            by_hand = load_rules(self.scenario.rules_path(trace.path)).shoe.shuffle == "hand"
        except CarddError as exc:
            raise ReplayError(f"{trace.path}:1: rules {rules!r}: {exc}") from None
        if "shoe" not in trace.devices:
            raise ReplayError(f"{trace.path}:1: the trace has no shoe (devices: {', '.join(trace.devices)})")
        if "shuffler" not in trace.devices and not by_hand:
            raise ReplayError(f"{trace.path}:1: the trace has no shuffler, and its rules {rules!r} need one")
        self.endpoints: dict[str, Endpoint[TraceDevice]] = {
            role: PtyEndpoint(TraceDevice.traced(trace, role)) for role in trace.devices}
        # a hand-shuffled table's daemon has no shuffler: the rig still wants one to hold
        shuffler: Endpoint[Any] = self.endpoints.get("shuffler") or PtyEndpoint(SimulatedShuffler())
        sim = SimulatedTable(cast(Any, shuffler), cast(Any, self.endpoints["shoe"]))
        self.rig = BenchRig(self.scenario, trace.path, directory, sim=sim)
        #: devices whose line is cut (unplugged, or every byte lost): what they say is not waited for
        self.cut_off: set[str] = set()
        #: the command sent last, its outcome not checked yet (see _command)
        self.in_flight: _InFlight | None = None
        self.at = 0  # the stream's entry being played

    def run(self) -> list[str]:
        with self.rig as rig:
            try:
                for at, entry in enumerate(self.trace.entries):
                    self.at = at
                    self.play(entry)
                self._outcome()
            finally:
                if self.in_flight is not None:  # a replay that failed meanwhile: the thread ends with the daemon
                    self.in_flight.thread.join(timeout=TAKE_TIMEOUT_S)
            unanswered = [answer for endpoint in self.endpoints.values()
                          for queue in endpoint.device.answers.values() for answer in queue]
            if unanswered:
                first = min(unanswered, key=lambda a: a.line)
                raise ReplayError(f"{self.trace.path}:{first.line}: the daemon never sent the {first.device} "
                                  f"{first.request} recorded here")
            return normalise(self._settled(rig))

    def where(self, line: int) -> str:
        return f"{self.trace.path}:{line}"

    def play(self, entry: TraceEntry) -> None:
        if isinstance(entry, Said):
            endpoint = self.endpoints[entry.device]
            waiting = entry.device not in self.cut_off
            if not endpoint.call(endpoint.device.say, entry.message, waiting, timeout=TAKE_TIMEOUT_S + 5):
                raise ReplayError(f"{self.where(entry.line)}: the daemon did not take the {entry.device}'s "
                                  f"{type(entry.message).__name__} within {TAKE_TIMEOUT_S:g} s")
        elif isinstance(entry, Handled):
            self._hand(entry)
        elif isinstance(entry, Commanded):
            self._outcome()  # the commands reach the daemon one after the other, in the recorded order
            self._command(entry)
        elif isinstance(entry, Waited):
            try:
                step = msgspec.convert({**entry.until, "do": "wait"}, Wait)
            except msgspec.ValidationError as exc:
                raise ReplayError(f"{self.where(entry.line)}: {schema_problem(exc).sentence('wait')}") from None
            try:
                self.rig.do(step)
            except StepFailed as exc:
                raise ReplayError(f"{self.where(entry.line)}: wait: {exc}") from None
        # an Answered entry is the device's, given when the daemon sends that request

    def _command(self, entry: Commanded) -> None:
        """Send the command and wait for its outcome, or, when the trace has the daemon ask a device
        for something right after it, until the device has been asked: the daemon is at work on the
        command then, and it may wait for a device's word on it that comes later in the stream
        (start_shuffle: the shuffler's first report), so the stream goes on. Its outcome is checked
        before the next command and at the end. Its own client: the rig's serves the waits meanwhile."""
        assert self.rig.client is not None
        in_flight = _InFlight(entry, ApiClient(self.rig.client.path, pace_s=REQUEST_INTERVAL_S))
        in_flight.thread.start()
        self.in_flight = in_flight
        asked = self._asked_after()
        deadline = time.monotonic() + TAKE_TIMEOUT_S + 5
        while in_flight.thread.is_alive() and not (asked is not None and self._answered(asked)):
            if time.monotonic() > deadline:
                raise ReplayError(f"{self.where(entry.line)}: {entry.name}: no outcome within {TAKE_TIMEOUT_S + 5:g} s")
            time.sleep(0.002)

    def _asked_after(self) -> Answered | None:
        """The request the trace has the daemon send a device right after the command being played."""
        following = self.trace.entries[self.at + 1:self.at + 2]
        return following[0] if following and isinstance(following[0], Answered) else None

    def _answered(self, asked: Answered) -> bool:
        """The daemon sent the device the request ``asked`` (the device has given its recorded answer)."""
        endpoint = self.endpoints[asked.device]
        return bool(endpoint.call(lambda: asked not in endpoint.device.answers.get(asked.request, ())))

    def _outcome(self) -> None:
        """The outcome of the command in flight, as recorded (ReplayError otherwise)."""
        in_flight, self.in_flight = self.in_flight, None
        if in_flight is None:
            return
        entry = in_flight.entry
        in_flight.thread.join(timeout=TAKE_TIMEOUT_S + 5)
        if in_flight.thread.is_alive():
            raise ReplayError(f"{self.where(entry.line)}: {entry.name}: no outcome within {TAKE_TIMEOUT_S + 5:g} s")
        if in_flight.got != entry.outcome:
            raise ReplayError(f"{self.where(entry.line)}: {entry.name}: recorded {entry.outcome}, "
                              f"the replay got {in_flight.got}")

    def _hand(self, entry: Handled) -> None:
        endpoint = self.endpoints[entry.device]
        name = MODEL_NAMES[entry.device]
        if entry.hand == "faults":
            changes = switches(entry.set)
            endpoint.set_faults(**changes)
            if "drop_rate" in changes:
                (self.cut_off.add if changes["drop_rate"] >= 1 else self.cut_off.discard)(entry.device)
        elif entry.hand == "unplug":
            # the endpoint's own unplug and replug (its disconnect does both around a sleep; a
            # replay needs them apart, at their places in the stream)
            def unplug() -> None:
                endpoint._unplug()
                endpoint._new_link()
            endpoint.call(unplug)
            self.cut_off.add(entry.device)
            self._wait(entry, lambda s: s["devices"][name]["link"] != "up", f"the {name} link down")
        elif entry.hand == "replug":
            endpoint.call(endpoint._replug)
            self.cut_off.discard(entry.device)
            self._wait(entry, lambda s: s["devices"][name]["link"] == "up", f"the {name} link up")
        elif entry.hand == "reboot":
            endpoint.call(endpoint.device.reboot)
            deadline = time.monotonic() + TAKE_TIMEOUT_S
            while endpoint.call(lambda: endpoint.streaming) is Streaming.HELD:  # until the daemon shook hands again
                if time.monotonic() > deadline:
                    raise ReplayError(f"{self.where(entry.line)}: the daemon did not reconnect to the rebooted "
                                      f"{entry.device} within {TAKE_TIMEOUT_S:g} s")
                time.sleep(0.01)

    def _wait(self, entry: Handled, check: Callable[[dict[str, Any]], bool], what: str) -> None:
        try:
            self.rig._wait(check, what, TAKE_TIMEOUT_S)
        except StepFailed as exc:
            raise ReplayError(f"{self.where(entry.line)}: {entry.hand}: {exc}") from None

    @staticmethod
    def _settled(rig: BenchRig) -> list[ApiEvent]:
        """The journal once it stopped growing (a 1.0 device's messages are not confirmed one by one)."""
        records = rig.journal()
        while True:
            time.sleep(SETTLE_S)
            again = rig.journal()
            if len(again) == len(records):
                return again
            records = again


def replay_trace(path: Path) -> list[str]:
    """Replay one trace into a fresh daemon: its normalised journal. TraceError for a trace that
    cannot be read, ReplayError for one the daemon did not follow as recorded."""
    trace = read_trace(path)
    directory = make_run_directory("cardbench-replay-", "/tmp")  # removed below; by the next run if this one is killed
    os.chmod(directory, 0o755)
    try:
        return _Replay(trace, directory).run()
    except (OSError, RuntimeError, ClientError, StepFailed) as exc:  # the daemon did not start, or went away
        raise ReplayError(f"{path}: {exc}") from None
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# ---- normalising and comparing ----------------------------------------------------------------

def _stable(value: Any, user: re.Pattern[str]) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v, user) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v, user) for v in value]
    if isinstance(value, str):
        return user.sub("<user>", value)
    return value


def normalise(records: list[ApiEvent]) -> list[str]:
    """The journal as lines a replay repeats: the table's events, device commands and the API's
    inputs, without sequence numbers, times, boot ids, nonces or the peer's uid; the name of the
    user who ran it is ``<user>``; the devices' start-up (their DEVICE_STATE records before
    anything else) sorted by device, as the two links come up in either order."""
    user = re.compile(rf"\b{re.escape(getpass.getuser())}\b")
    lines: list[tuple[str, str]] = []
    for r in records:
        if r.kind not in COMPARED_KINDS and not (r.kind == "input" and r.source == "api"):
            continue
        # an event carries the card read that caused it (INPUT_KEY): a device's input, not compared
        data = {k: v for k, v in r.data.items() if k != "message" and not (k == INPUT_KEY and r.kind == KIND_EVENT)}
        lines.append((r.source, json.dumps({"kind": r.kind, "source": r.source, "reason": r.reason,
                                            "severity": r.severity, "who": _stable(r.who, user),
                                            "message": _stable(r.message, user), "data": _stable(data, user)},
                                           sort_keys=True, ensure_ascii=False)))
    start = next((i for i, line in enumerate(lines) if '"reason": "DEVICE_STATE"' not in line[1]), len(lines))
    lines[:start] = sorted(lines[:start], key=lambda line: line[0])  # stable: each device's own order kept
    return [line for _, line in lines]


def compare(trace: Path, got: list[str]) -> str:
    """'' when the replay matches the golden file beside the trace, else the first difference:
    the trace, the golden's line, expected vs got."""
    golden = golden_path(trace)
    try:
        expected = golden.read_text().splitlines()
    except FileNotFoundError:
        return f"{trace}: no golden file {golden} (write it with --update-golden, after review)"
    except OSError as exc:
        return f"{trace}: {golden}: {exc.strerror}"
    pairs = list(zip(expected + [None] * (len(got) - len(expected)), got + [None] * (len(expected) - len(got))))
    differing = [number for number, (want, have) in enumerate(pairs, 1) if want != have]
    if not differing:
        return ""
    number = differing[0]
    want, have = pairs[number - 1]
    more = f" ({len(differing) - 1} more line(s) differ after it)" if len(differing) > 1 else ""
    fields = record_diff(want, have)
    if fields is None:  # a line that is not a record, or one side ended: the lines themselves
        return (f"{trace}: {golden.name} line {number}: expected {want if want is not None else 'the end'}, "
                f"got {have if have is not None else 'the end'}{more}")
    return "\n".join([f"{trace}: {golden.name} line {number}: the replay's record differs{more}:", *fields])


def record_diff(want: str | None, have: str | None) -> list[str] | None:
    """The fields in which two journal records (JSON lines) differ, one line each: ``  data.net:
    golden "10", replay "999"``; None when either is not a JSON object."""
    try:
        old, new = json.loads(want or ""), json.loads(have or "")
    except json.JSONDecodeError:
        return None
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return None
    flat_old, flat_new = _flat(old), _flat(new)
    missing = "(none)"
    return [f"  {key}: golden {flat_old.get(key, missing)}, replay {flat_new.get(key, missing)}"
            for key in sorted(flat_old.keys() | flat_new.keys()) if flat_old.get(key) != flat_new.get(key)]


def _flat(record: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """A record's fields by dotted name (``data.net``), each value as compact JSON."""
    out: dict[str, str] = {}
    for key, value in record.items():
        if isinstance(value, dict) and value:
            out |= _flat(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return out


def check(trace: Path, update_golden: bool = False) -> ScenarioResult:
    """Replay one trace and compare it with its golden file (``update_golden``: rewrite that file)."""
    start = time.monotonic()
    try:
        got = replay_trace(trace)
    except (TraceError, ReplayError) as exc:
        return ScenarioResult(trace, False, time.monotonic() - start, str(exc))
    if update_golden:
        golden_path(trace).write_text("".join(line + "\n" for line in got))
        return ScenarioResult(trace, True, time.monotonic() - start, "", len(got))
    message = compare(trace, got)
    return ScenarioResult(trace, not message, time.monotonic() - start, message, len(got))
