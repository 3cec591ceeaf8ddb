"""Devices: ``devices`` (what is plugged in, cardd's own flagged), ``probe URL`` (straight to
the device), and the technician's requests through the daemon (``selftest``, ``counters``,
``clear-fault``, ``shuffle``, ``device enroll``). A device the daemon holds cannot be opened beside it: the
exclusive-open error names the process that holds it. Each command's one-line help is in
cardd.cli.program."""
from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from cardd.cli.common import EXIT_FAILURE, EXIT_UNREACHABLE, EXIT_USAGE, CliError, DeviceName, json_option
from cardd.cli.console import emit
from cardd.cli.daemon_client import daemon, run_command
from cardd.cli.shown import cells, shown
from core.errors import CarddError
from devices.models.names import MODEL_NAMES
from drivers.discovery import discover
from drivers.errors import BadURL, DeviceBusy, DeviceNotFound, DriverError
from drivers.urls import DeviceURL, parse_url
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.errors import IncompatibleProtocol, RequestTimeout
from firmware_bridge.messages import FaultCode
from firmware_bridge.session import SessionConfig

DEVICE_NAMES = ("shoe", "shuffler")
def device_argument(fn: Any) -> Any:
    """The DEVICE argument of the technician's requests through the daemon."""
    return click.argument("device", metavar="DEVICE", type=DeviceName())(fn)


@click.command("devices")
@json_option
def devices_command(as_json: bool) -> None:
    """\b
    Example:
      cardctl devices
      cardctl devices --json | jq '.devices[] | select(.role)'
    """
    found = discover()
    document = {"devices": [dataclasses.asdict(c) for c in found.devices], "not_listed": found.not_listed}

    def render(out: Any) -> None:
        table = Table(title="devices", title_justify="left")
        for column in ("known", "kind", "where", "VID:PID", "serial", "description", "url"):
            table.add_column(column)
        for c in found.devices:
            vid_pid = f"{c.vid:04x}:{c.pid:04x}" if c.vid is not None and c.pid is not None else "-"
            where = c.path or f"bus {c.bus} address {c.address}"
            table.add_row(*cells(c.role or "", c.kind, where, vid_pid, c.serial_number or "-", c.description,
                                 c.url or ""))
        out.print(table)
        for kind, why in found.not_listed.items():
            out.print(shown(f"{kind}: {why}", style="yellow"))
    emit(document, as_json, render)


def holders(path: str) -> list[str]:
    """The processes that have ``path`` (after symlinks) open: "pid 123 (cardd)", from /proc/*/fd."""
    target = os.path.realpath(path)
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # gone, or not ours to look at
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    name = Path(f"/proc/{pid}/comm").read_text().strip()
                    found.append(f"pid {pid} ({name})")
                    break
            except OSError:
                continue
    return found


def parse_device_url(url: str) -> DeviceURL:
    """``url`` parsed (BadURL naming what is wrong and the accepted forms), a simulated device's
    (``sim://shoe``) too: the commands that open a device import the simulators here, which
    registers their scheme, so no other command loads them (a configuration loads them itself for
    the ``sim:`` URLs it names, cardd.config)."""
    import simulators  # noqa: F401 - importing it registers sim://
    return parse_url(url)


def device_error(url: str, exc: CarddError) -> CliError:
    """The one line for a device that would not open or talk, with what to do."""
    if isinstance(exc, DeviceBusy):
        who = holders(exc.device.removeprefix("serial://"))
        held = f"held by {', '.join(who)}" if who else "held by another process"
        return CliError(f"{url}: busy: {held} (if it is cardd, use `cardctl status` or stop the daemon)",
                        EXIT_UNREACHABLE)
    if isinstance(exc, DeviceNotFound):
        return CliError(f"{exc} — run `cardctl devices` to see what is plugged in", EXIT_UNREACHABLE)
    if isinstance(exc, BadURL):
        return CliError(str(exc), EXIT_USAGE)
    if isinstance(exc, IncompatibleProtocol):
        return CliError(f"{url}: incompatible firmware: {exc}", EXIT_FAILURE)
    if isinstance(exc, DriverError):
        return CliError(str(exc), EXIT_UNREACHABLE)
    text = str(exc) if str(exc).startswith(url) else f"{url}: {exc}"  # the session's errors name the URL already
    if isinstance(exc, RequestTimeout):
        text += " (not a cardd device, the wrong baud rate, or powered off?)"
    return CliError(text, EXIT_UNREACHABLE)


def link_value(value: int | float) -> str:
    """A link statistic for a person: counts as they are, times (the floats: seconds) in ms."""
    return f"{value * 1000:.2f} ms" if isinstance(value, float) else str(value)


async def _probe(url: str, timeout: float) -> dict[str, Any]:
    connection = DeviceConnection(url, config=SessionConfig(host_name="cardctl probe",
                                                            handshake_timeout=timeout))
    try:
        ident = await connection.open()
        session = connection.session
        stats = dataclasses.asdict(session.stats) if session is not None else {}
        return {"url": url, "role": ident.role.name.lower(), "model": ident.model, "serial": ident.serial,
                "firmware": ident.firmware_version, "protocol": f"{ident.protocol_major}.{ident.protocol_minor}",
                "boot_id": ident.boot_id, "stats": stats}
    finally:
        await connection.close()


@click.command("probe")
@click.argument("url")
@click.option("--timeout", type=float, default=2.0, show_default=True, help="seconds to wait for the handshake")
@json_option
def probe(url: str, timeout: float, as_json: bool) -> None:
    """The daemon must not hold the device (an exclusive open): stop it, or ask it with
    `cardctl status`.

    \b
    Example:
      cardctl probe serial:///dev/cardd/shoe-SHOE0001
    """
    try:
        parse_device_url(url)
        found = asyncio.run(_probe(url, timeout))
    except CarddError as exc:
        raise device_error(url, exc) from None

    def render(out: Any) -> None:
        out.print(Text.assemble(shown(found["model"], style="bold"),
                                shown(f" serial {found['serial']} ({found['role']}) at {url}")))
        out.print(shown(f"firmware {found['firmware']}, protocol {found['protocol']}, boot id {found['boot_id']:#x}"))
        link = found["stats"].get("link") or {}
        out.print(shown("link: " + ", ".join(f"{k.replace('_', ' ')} {link_value(v)}" for k, v in link.items()
                                             if isinstance(v, (int, float)) and v)))
    emit(found, as_json, render)


# ---- the technician's requests, through the daemon ------------------------------------------

def device_request(name: str, as_json: bool, **args: Any) -> dict[str, Any]:
    with daemon(timeout=30.0) as client:
        record = run_command(client, name, **args)
    return record


@click.command("selftest")
@device_argument
@json_option
def selftest(device: str, as_json: bool) -> None:
    """\b
    Example:
      cardctl selftest shoe
    """
    result = device_request("selftest", as_json, device=device)["data"]["result"]
    name = MODEL_NAMES[device]  # as status shows it
    emit(result, as_json, lambda out: out.print(shown(f"{name}: {'passed' if result['passed'] else 'FAILED'}: "
                                                      f"{result['detail']}")))
    if not result["passed"]:
        raise CliError(f"{name}: self-test failed: {result['detail']}", EXIT_FAILURE)


@click.command("counters")
@device_argument
@json_option
def counters(device: str, as_json: bool) -> None:
    """\b
    Example:
      cardctl counters shuffler --json
    """
    result = device_request("counters", as_json, device=device)["data"]["result"]
    emit(result, as_json, lambda out: out.print(shown(f"{MODEL_NAMES[device]}: " +
                                                      ", ".join(f"{k} {v}" for k, v in result.items()))))


@click.command("clear-fault")
@device_argument
@click.argument("code")
@json_option
def clear_fault(device: str, code: str, as_json: bool) -> None:
    """\b
    Example:
      cardctl clear-fault shuffler jam
    """
    with daemon() as client:  # a fault that is not there would only time out at the device
        model = client.state()["devices"].get(MODEL_NAMES[device])
    known = code.upper() in FaultCode.__members__  # an unknown code: the daemon's refusal lists the known ones
    if known and model is not None and model["link"] == "up" and model.get("fault") != code.lower():
        now = f"state {model['state']}" + (f", fault {model['fault']}" if model.get("fault") else "")
        raise CliError(f"the {MODEL_NAMES[device]} has no {code} fault ({now})", EXIT_FAILURE)
    result = device_request("clear_fault", as_json, device=device, code=code)["data"]["result"]
    emit(result, as_json, lambda out: out.print(shown(f"{MODEL_NAMES[device]}: {result['cleared']} cleared")))


@click.command("shuffle")
@json_option
def shuffle(as_json: bool) -> None:
    """\b
    Example:
      cardctl shuffle
    """
    result = device_request("start_shuffle", as_json)["data"]["result"]
    emit(result, as_json, lambda out: out.print(shown(f"shuffler: shuffling {result['decks']} decks")))


@click.group("device")
def device_group() -> None:
    """\b
    Example:
      cardctl device enroll shoe
      cardctl device retry shoe
    """


@device_group.command("enroll")
@device_argument
@click.option("--yes", is_flag=True, help="Enrol the key shown without asking (for scripts).")
@json_option
def enroll(device: str, yes: bool, as_json: bool) -> None:
    """Shows the fingerprint of the key the refused device proved it holds (its
    DEVICE_NOT_TRUSTED alarm); compare it with the device's display or label, then confirm.
    The daemon stores the key, journals who enrolled what (ENROLL), clears the alarm and shakes
    hands with the device again. A replaced device is enrolled the same way (a re-enrolment).

    \b
    Example:
      cardctl device enroll shoe
      cardctl device enroll --yes shuffler
    """
    with daemon(timeout=30.0) as client:
        offered = run_command(client, "enroll", device=device)["data"]["result"]
        key = offered["fingerprint"]
        unit = " ".join(part for part in (offered["model"], offered["serial"]) if part)
        if not yes:  # asked on stderr: --json's document alone goes to stdout
            click.echo(f"{device} {unit} proves key {key}", err=True)
            if not click.confirm("Is this the key the device shows (display or label)? Enrol it", err=True):
                raise CliError(f"{device}: not enrolled", EXIT_FAILURE)
        record = run_command(client, "enroll", device=device, fingerprint=key)
    result = {**record["data"]["result"], "seq": record["seq"]}
    replaced = result.get("replaced")
    again = f" (replacing {replaced['serial'] or 'a unit'} key {replaced['fingerprint']})" if replaced else ""
    emit(result, as_json, lambda out: out.print(shown(
        f"{device}: {result['stage']} {unit} key {key}{again} (journal seq {result['seq']})")))


@device_group.command("retry")
@device_argument
@json_option
def retry(device: str, as_json: bool) -> None:
    """Tries a refused device again once it is mended: a failed identity proof, a downgrade
    offered or forged frames leave no key to enrol. The daemon journals who (RETRY_TRUST),
    closes its DEVICE_NOT_TRUSTED alarm and shakes hands with it again, asking the same proofs:
    a device that still fails them is refused again, with a new alarm.

    \b
    Example:
      cardctl device retry shoe
    """
    with daemon() as client:
        record = run_command(client, "retry_trust", device=device)
    result = {**record["data"]["result"], "seq": record["seq"]}
    closed = result["alarms_closed"]
    emit(result, as_json, lambda out: out.print(shown(
        f"{device}: shaking hands again; alarm {', '.join(map(str, closed)) or 'none'} closed "
        f"(journal seq {result['seq']})")))


COMMANDS = (devices_command, probe, selftest, counters, clear_fault, shuffle, device_group)
