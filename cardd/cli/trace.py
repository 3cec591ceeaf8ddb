"""Traces of what devices said (the format: :mod:`cardd.trace.format`): ``capture URL FILE``
records one device, ``replay FILE`` serves a trace's devices on pseudo-terminals so the daemon (or
any client) reads them like the devices (:mod:`cardd.trace.device`), and ``monitor URL`` shows
decoded frames and link events live. ``cardbench record`` writes the same format for a whole bench
scenario, ``cardbench replay`` plays it into a fresh daemon (cardd/bench/replay.py, docs/bench.md).
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import signal
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import click

from cardd.cli.common import EXIT_USAGE, CliError, check_output_directory, emit_json, json_option
from core.ctrl_c import end_like_ctrl_c
from cardd.cli.device import device_error, parse_device_url
from cardd.message_text import describe
from cardd.trace.device import TraceDevice, trace_device
from cardd.trace.format import NOT_RECORDED, TRACE_FORMAT, TraceError, device_info, message_line, read_trace
from core.errors import CarddError
from drivers.factory import open_transport
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.framing import Frame, FrameDecoder, FrameKind
from firmware_bridge.link_types import SEQ_MOD
from firmware_bridge.messages import Ident, Message, MessageDecodeError, decode
from firmware_bridge.session import SessionConfig, SessionEvent
from simulators.pty_endpoint import PtyEndpoint


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
        parsed = parse_device_url(url)
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
    """The header names the device, the link settings and the time; `cardctl replay FILE`
    plays it back. --json: each recorded line on stdout too.

    \b
    Example:
      cardctl capture serial:///dev/cardd/shoe-SHOE0001 shoe-friday.trace --duration 600
    """
    check_output_directory(path, "FILE")  # before the device is opened: a mistyped folder is a usage error
    if path.exists():
        raise CliError(capture_file_exists(path), EXIT_USAGE)
    try:
        parse_device_url(url)
        recorded = asyncio.run(_capture(url, path, count, duration, as_json))
    except CarddError as exc:
        if isinstance(exc, CliError):
            raise
        raise device_error(url, exc) from None
    if not as_json:
        click.echo(f"{recorded} messages written to {path}")


@click.command("replay")
@click.argument("path", metavar="FILE", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--link", type=click.Path(path_type=Path), help="the path to serve on (a symlink to the pty; "
              "a trace of one device)")
@click.option("--speed", type=float, default=None, help="play at the recorded pace times this (default: as fast "
              "as the host acknowledges)")
@json_option
def replay(path: Path, link: Path | None, speed: float | None, as_json: bool) -> None:
    """Prints the URL to open for each device, then plays its messages once a host has shaken hands;
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
    """Without --talk nothing is ever written to the device (it only listens). JSON lines with --json.

    \b
    Example:
      cardctl monitor serial:///dev/cardd/shuffler-A1
      cardctl monitor --talk --json sim://shoe
    """
    try:
        parse_device_url(url)
        asyncio.run(_monitor(url, talk, as_json, duration))
    except CarddError as exc:
        raise device_error(url, exc) from None


COMMANDS = (capture, replay, monitor)