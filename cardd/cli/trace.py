"""Traces of what a device said: ``capture URL FILE`` records them, ``replay FILE`` serves
one on a pseudo-terminal so the daemon (or any client) reads it like the device, and
``monitor URL`` shows decoded frames and link events live.

A trace file is JSON lines. The first line is the header: the device (role, model, serial,
firmware, protocol), the link settings (the URL and its serial settings) and the time the
capture started. Each further line is one thing the device said (``t`` seconds after the
start, ``type``, and ``payload``: the message's exact bytes in hex) or one link event
(``event``, ``detail``). Replies to the capturing host's own requests are not recorded: the
replaying device answers requests itself.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import click

from cardd.cli.common import EXIT_USAGE, CliError, emit_json, json_option
from cardd.cli.device import device_error
from core.errors import CarddError
from drivers.factory import open_transport
from drivers.urls import parse_url
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.framing import FrameDecoder, FrameKind
from firmware_bridge.messages import (Counters, DeviceRole, FirmwareResult, Heartbeat, Hello, Ident, Message,
                                      MessageDecodeError, Refused, SelfTestResult, Status, decode, encode)
from firmware_bridge.session import SessionConfig, SessionEvent
from simulators.device import SimulatedDevice
from simulators.pty_endpoint import PtyEndpoint

TRACE_FORMAT = 1
#: answers to a host's own requests, and heartbeats: the replaying device makes its own
NOT_RECORDED = (Ident, Status, Counters, SelfTestResult, FirmwareResult, Refused, Heartbeat)


class TraceError(CarddError):
    """A trace file that cannot be read: names the file and line."""


@dataclasses.dataclass(frozen=True)
class Trace:
    header: dict[str, Any]
    #: (seconds after the start, message) in order
    messages: list[tuple[float, Message]]


def read_trace(path: Path) -> Trace:
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise TraceError(f"{path}: {exc.strerror}") from None
    try:
        header = json.loads(lines[0]) if lines else {}
    except json.JSONDecodeError:
        header = {}
    if header.get("cardd_trace") != TRACE_FORMAT:
        raise TraceError(f"{path}:1: not a cardd trace (its first line must be the header, cardd_trace {TRACE_FORMAT})")
    try:
        device = header["device"]
        DeviceRole[device["role"].upper()]
        str(device["model"]), str(device["serial"]), str(device["firmware"])
        [int(part) for part in str(device["protocol"]).split(".", 1)]
    except (KeyError, ValueError, AttributeError) as exc:
        raise TraceError(f"{path}:1: the header's device is incomplete or wrong: {exc}") from None
    messages = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            entry = json.loads(line)
            if "payload" in entry:
                messages.append((float(entry["t"]), decode(bytes.fromhex(entry["payload"]))))
        except (json.JSONDecodeError, KeyError, ValueError, MessageDecodeError) as exc:
            raise TraceError(f"{path}:{number}: {exc}") from None
    return Trace(header, messages)


def describe(msg: Message) -> dict[str, Any]:
    """A message as JSON-able fields (enums by name)."""
    fields = {}
    for name, _ in msg.FIELDS:
        value = getattr(msg, name)
        fields[name] = value.name if hasattr(value, "name") else (str(value) if not isinstance(
            value, (int, float, str, bool, type(None))) else value)
    return {"type": type(msg).__name__, **fields}


class TraceWriter:
    def __init__(self, path: Path, url: str, ident: Ident) -> None:
        try:
            self.file: IO[str] = open(path, "x")
        except FileExistsError:
            raise CliError(f"{path} exists: a capture never overwrites a file", EXIT_USAGE) from None
        except OSError as exc:
            raise CliError(f"{path}: {exc.strerror}") from None
        self.start = time.monotonic()
        self.count = 0
        parsed = parse_url(url)
        settings = dataclasses.asdict(parsed.serial_settings) if parsed.serial_settings is not None else None
        self.header = {
            "cardd_trace": TRACE_FORMAT, "started": datetime.now(timezone.utc).isoformat(),
            "device": {"url": url, "role": ident.role.name.lower(), "model": ident.model, "serial": ident.serial,
                       "firmware": ident.firmware_version,
                       "protocol": f"{ident.protocol_major}.{ident.protocol_minor}"},
            "link": {"url": url, "scheme": parsed.scheme, "serial_settings": settings}}
        self._line(self.header)

    def _line(self, entry: dict[str, Any]) -> None:
        self.file.write(json.dumps(entry, default=str) + "\n")
        self.file.flush()

    def message(self, msg: Message) -> dict[str, Any] | None:
        if isinstance(msg, NOT_RECORDED):
            return None
        entry = {"t": round(time.monotonic() - self.start, 6), "type": type(msg).__name__,
                 "payload": encode(msg).hex(), "fields": describe(msg)}
        self._line(entry)
        self.count += 1
        return entry

    def event(self, event: SessionEvent) -> dict[str, Any]:
        entry = {"t": round(time.monotonic() - self.start, 6), "event": str(event.kind), "detail": event.detail}
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
    try:
        parse_url(url)
        recorded = asyncio.run(_capture(url, path, count, duration, as_json))
    except CarddError as exc:
        if isinstance(exc, CliError):
            raise
        raise device_error(url, exc) from None
    if not as_json:
        click.echo(f"{recorded} messages written to {path}")


def trace_device(trace: Trace, speed: float | None) -> SimulatedDevice:
    """A simulated device that is the traced one: its identity, and once a host has said HELLO,
    the traced messages in order (at their recorded pace times ``speed``; None: as fast as
    the link acknowledges them)."""
    info = trace.header["device"]
    role = DeviceRole[info["role"].upper()]
    major, minor = (int(part) for part in str(info["protocol"]).split(".", 1))

    class TraceDevice(SimulatedDevice):
        ROLE = role
        MODEL = info["model"]
        DEFAULT_FIRMWARE = info["firmware"]

        playing = False

        def ident(self) -> Ident:  # as captured, protocol version included
            return Ident(self.ROLE, self.MODEL, self.serial, self.firmware_version, major, minor, self.boot_id)

        def handlers(self) -> dict[type[Message], Any]:
            return {**super().handlers(), Hello: self._hello}

        def _hello(self, msg: Message) -> list[Message]:
            if not self.playing:
                self.playing = True
                self.spawn(self._play())
            return [self.ident()]

        async def _play(self) -> None:
            await asyncio.sleep(0.05)  # the host's session is up once it has our IDENT
            last = 0.0
            for at, msg in trace.messages:
                if speed is not None and at > last:
                    await asyncio.sleep((at - last) / speed)
                last = at
                self.emit(msg)
                if self._flush is not None:
                    await self._flush(limit=0)

        def cards_held(self) -> int:
            return 0

    return TraceDevice(info["serial"], heartbeat_s=1.0)


@click.command("replay")
@click.argument("path", metavar="FILE", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--link", type=click.Path(path_type=Path), help="the path to serve on (a symlink to the pty)")
@click.option("--speed", type=float, default=None, help="play at the recorded pace times this (default: as fast "
              "as the host acknowledges)")
@json_option
def replay(path: Path, link: Path | None, speed: float | None, as_json: bool) -> None:
    """Serve trace FILE on a pseudo-terminal: the daemon (or any client) opens it like the device.

    Prints the URL to open, then plays the trace once a host has shaken hands; Ctrl-C stops.

    \b
    Example:
      cardctl replay shoe-friday.trace --link /tmp/shoe
      cardd --config replay.toml     # with [devices] shoe = "serial:///tmp/shoe"
    """
    try:
        trace = read_trace(path)
    except TraceError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    endpoint = PtyEndpoint(trace_device(trace, speed), link=str(link) if link else None)
    endpoint.start()
    try:
        document = {"url": endpoint.url, "tty": endpoint.tty, "messages": len(trace.messages),
                    "device": trace.header["device"]}
        if as_json:
            emit_json(document)
        else:
            click.echo(f"replaying {len(trace.messages)} messages of {trace.header['device']['model']} "
                       f"{trace.header['device']['serial']} on {endpoint.url} (Ctrl-C stops)", err=False)
        signal.signal(signal.SIGTERM, lambda signum, frame: signal.raise_signal(signal.SIGINT))
        try:
            while True:
                signal.pause()
        except KeyboardInterrupt:
            pass
    finally:
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
        await connection.start()
        try:
            await until_stopped(stop, duration)
        finally:
            await connection.close()
        return

    decoder = FrameDecoder(on_error=lambda exc: show({"frame_error": str(exc)}))

    class Listener:
        def bytes_received(self, data: bytes) -> None:
            for frame in decoder.feed(data):
                entry: dict[str, Any] = {"frame": frame.kind.name, "seq": frame.seq, "ack": frame.ack}
                if frame.kind is FrameKind.DATA:
                    try:
                        entry["message"] = describe(decode(frame.payload))
                    except MessageDecodeError as exc:
                        entry["bad_payload"] = str(exc)
                show(entry)

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
