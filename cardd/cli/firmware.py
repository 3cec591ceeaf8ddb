"""``cardctl firmware``: signed images for the table's devices. ``flash DEVICE IMAGE`` goes through
the running daemon (its own link to the device; journaled before and after, with who and who
allowed a downgrade), or, with cardd stopped, straight to the device's URL (then nothing is
journaled, and it says so). The signature is checked with the configured public key before
anything is sent: an unsigned or re-signed image exits 5. The image's model and version are
checked against the device's IDENT before the progress bar (bytes and rate) is drawn: a refused
image is one line. ``keygen`` makes a signing key pair, ``sign`` a signed image with its private key."""
from __future__ import annotations

import asyncio
import base64
import os
from pathlib import Path
from typing import Any

import click
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from cardd.api.client import ApiClient, DaemonNotRunning
from cardd.cli.common import EXIT_FAILURE, EXIT_INTEGRITY, EXIT_UNREACHABLE, EXIT_USAGE, CliError, json_option, options
from cardd.cli.console import ProgramConsole, emit
from cardd.cli.daemon_client import api_errors, run_command
from cardd.cli.device import DEVICE_NAMES, device_error, parse_device_url
from cardd.cli.shown import shown, visible
from cardd.config import DEFAULT_PATH, ConfigError, load_config
from core.errors import CarddError
from core.files import FileRefused, read_problem, read_regular_file
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.errors import (FirmwareDowngradeRefused, FirmwareError, FirmwareFormatError, FirmwareSameVersion,
                                    FirmwareSignatureError)
from firmware_bridge.firmware import (MAX_IMAGE_FILE_BYTES, MAX_IMAGE_SIZE, SignedImage, check_update,
                                      downgrade_reason, generate_dev_keypair, private_key_pem, public_key_pem,
                                      read_image_file, read_private_key_file, read_public_key_file, sign_image,
                                      update_firmware, verify_image)
from firmware_bridge.session import SessionConfig


@click.group("firmware")
def firmware_group() -> None:
    """\b
    Example:
      cardctl firmware flash shoe os1-1.1.0.fw
      cardctl firmware keygen vendor.key vendor.pub
      cardctl firmware sign --key vendor.key --model "OS-1 sim" --version 1.1.0 os1.bin os1-1.1.0.fw
    """


def public_key(key_path: Path | None, config_path: Path) -> Ed25519PublicKey:
    """The key from --key, else the configuration's [firmware] public_key; CliError naming the
    file and key, and --key as the other way to give one."""
    if key_path is None:
        try:
            configured = load_config(config_path).firmware.public_key
        except ConfigError as exc:
            raise CliError(f"no firmware key: give --key FILE, or set [firmware] public_key in the configuration: "
                           f"{exc}", EXIT_USAGE) from None
        if configured is None:
            raise CliError(f"no firmware key: give --key FILE, or set [firmware] public_key in {config_path} "
                           "(firmware.public_key: not set: firmware is refused without a key)", EXIT_USAGE)
        key_path, named_by = configured, f"{config_path}: firmware.public_key:"
    else:
        named_by = "--key"
    try:
        return read_public_key_file(key_path)
    except OSError as exc:
        raise CliError(f"{named_by} {read_problem(key_path, exc)}", EXIT_USAGE) from None
    except FileRefused as exc:  # its text names the file
        raise CliError(f"{named_by} {exc}", EXIT_USAGE) from None
    except CarddError as exc:
        raise CliError(f"{named_by} {key_path}: {exc}", EXIT_USAGE) from None


def signed_image(path: Path, key: Ed25519PublicKey) -> SignedImage:
    """The image, read and its signature verified; exit 5 (integrity) if it is not signed by ``key``."""
    try:
        signed = read_image_file(path)
        verify_image(signed, key)
    except OSError as exc:
        raise CliError(f"IMAGE {read_problem(path, exc)}", EXIT_USAGE) from None
    except FileRefused as exc:  # a device, a FIFO, a file too large for an image: nothing read, nothing sent
        raise CliError(f"IMAGE {exc}", EXIT_USAGE) from None
    except (FirmwareSignatureError, FirmwareFormatError) as exc:
        raise CliError(f"{path}: not flashed, nothing sent: {exc}", EXIT_INTEGRITY) from None
    return signed


async def _flash(url: str, signed: SignedImage, key: Ed25519PublicKey, allow_downgrade_by: str | None,
                 force: bool, progress: Progress | None) -> dict[str, Any]:
    """Open the device, check the image against its IDENT (model, version) and only then show the
    bar and send: an image the device would refuse is one error line, not an empty bar above it."""
    connection = DeviceConnection(url, config=SessionConfig(host_name="cardctl firmware"))
    task = None

    def advance(sent: int, total: int) -> None:
        if progress is not None and task is not None:
            progress.update(task, completed=sent)

    try:
        await connection.open()
        check_update(connection.ident, signed, key, allow_downgrade_by=allow_downgrade_by, reflash=force)
        if progress is not None:
            progress.start()
            task = progress.add_task("flashing", total=signed.header.size)
        done = await update_firmware(connection, signed, key,  # type: ignore[arg-type]
                                     progress=advance, allow_downgrade_by=allow_downgrade_by, reflash=force)
    finally:
        if progress is not None and task is not None:  # stopping a bar never started prints an empty line
            progress.stop()
        await connection.close()
    return {"url": url, "model": done.model, "from_version": done.from_version, "to_version": done.to_version,
            "ok": done.result.ok, "detail": done.result.detail, "downgrade_allowed_by": done.downgrade_allowed_by,
            "journaled": False}


#: the line a flash straight to the device ends with: no journal has it
NOT_JOURNALED = "nothing is journaled: cardd is not running, so no journal records this flash"


@firmware_group.command("flash")
@click.argument("device", metavar="DEVICE")
@click.argument("image", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--key", "key_path", type=click.Path(path_type=Path, dir_okay=False),
              help="the Ed25519 public key (default: the configuration's [firmware] public_key)")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=DEFAULT_PATH, show_default=True,
              help="where the key is configured")
@click.option("--allow-downgrade-by", metavar="NAME",
              help="allow an older version: the login name of the supervisor who allows it (journaled by the "
                   "daemon; cardd stopped, nothing is journaled)")
@click.option("--force", is_flag=True, help="flash the version the device runs already")
@json_option
def flash(device: str, image: Path, key_path: Path | None, config_path: Path, allow_downgrade_by: str | None,
          force: bool, as_json: bool) -> None:
    """Flash the signed IMAGE into DEVICE: shoe or shuffler (or its URL) through the running
    daemon, journaled; with cardd stopped, straight to the device's URL, and nothing is journaled.

    The signature is verified before a byte is sent; an unsigned or wrongly signed image
    exits 5. While cardd runs, a URL it does not hold is refused (exit 2).

    \b
    Example:
      cardctl firmware flash shoe os1-1.1.0.fw
      cardctl firmware flash --allow-downgrade-by alice shoe os1-1.0.2.fw
      cardctl firmware flash --key fw.pub serial:///dev/cardd/shoe-SHOE0001 os1-1.1.0.fw   # cardd stopped
    """
    key = public_key(key_path, config_path)
    signed = signed_image(image, key)
    is_url = "://" in device
    if not is_url and device not in DEVICE_NAMES:
        raise CliError(f"DEVICE {device!r}: one of {', '.join(DEVICE_NAMES)}, or a device's URL "
                       "(serial:///dev/cardd/shoe-SHOE0001)", EXIT_USAGE)
    with api_errors():
        try:
            # a transfer takes what it takes: the daemon times each of its steps
            client = ApiClient(options().socket, timeout=None)
        except DaemonNotRunning as exc:
            if not is_url:
                raise CliError(f"{exc}: give the device's URL to flash it directly (nothing is journaled then)",
                               EXIT_UNREACHABLE) from None
            client = None
    if client is None:
        _flash_directly(device, signed, key, allow_downgrade_by, force, as_json)
        return
    try:
        args: dict[str, Any] = {"device": device, "image_base64": base64.b64encode(signed.to_bytes()).decode("ascii")}
        if allow_downgrade_by is not None:
            args["allow_downgrade_by"] = allow_downgrade_by
        if force:
            args["force"] = True
        record = run_command(client, "firmware_update", **args)
    finally:
        client.close()
    result = {**record["data"]["result"], "journaled": True, "seq": record["seq"], "who": record.get("who")}
    allowed = result["downgrade_allowed_by"]
    emit(result, as_json, lambda out: out.print(shown(
        f"{result['model']}: {result['from_version']} -> {result['to_version']}: {result['detail']}"
        f"{f' (downgrade allowed by {allowed})' if allowed else ''} (journal seq {result['seq']})")))


def _flash_directly(url: str, signed: SignedImage, key: Ed25519PublicKey, allow_downgrade_by: str | None,
                    force: bool, as_json: bool) -> None:
    """The flash with cardd stopped: cardctl opens the device itself, with a progress bar."""
    try:
        parse_device_url(url)
        if as_json:
            result = asyncio.run(_flash(url, signed, key, allow_downgrade_by, force, None))
        else:
            columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
            # started by _flash once the device would take the image
            progress = Progress(*columns, console=ProgramConsole())
            result = asyncio.run(_flash(url, signed, key, allow_downgrade_by, force, progress))
    except FirmwareDowngradeRefused as exc:  # the library's words, then how to allow it here
        raise CliError(f"{url}: firmware not flashed: {exc}: --allow-downgrade-by NAME allows it", EXIT_FAILURE) from None
    except FirmwareSameVersion as exc:
        raise CliError(f"{url}: firmware not flashed: {exc}: --force flashes it again", EXIT_FAILURE) from None
    except FirmwareError as exc:
        raise CliError(f"{url}: firmware not flashed: {exc}", EXIT_FAILURE) from None
    except CarddError as exc:
        raise device_error(url, exc) from None
    if not result["ok"]:
        raise CliError(f"{url}: the device refused the image: {result['detail']}", EXIT_FAILURE)

    def render(out: Any) -> None:
        out.print(shown(f"{result['model']}: {result['from_version']} -> {result['to_version']}: {result['detail']}"))
        out.print(NOT_JOURNALED)
    emit(result, as_json, render)


# ---- keys and images --------------------------------------------------------------------------

def _new_file(path: Path, data: bytes, mode: int, named_by: str) -> None:
    """``data`` in a new file at ``path`` with ``mode``; never over an existing file (a signing key
    lost to an overwrite cannot be had back)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    except FileExistsError:
        raise CliError(f"{named_by} {path}: exists already: not overwritten (choose another name, or remove it "
                       "first)", EXIT_USAGE) from None
    except OSError as exc:
        raise CliError(f"{named_by} {path}: cannot be created: {exc.strerror}", EXIT_USAGE) from None
    try:
        os.fchmod(fd, mode)  # the umask leaves the mode asked for, or less; a key's is exact
        os.write(fd, data)
    finally:
        os.close(fd)


@firmware_group.command("keygen")
@click.argument("private_key", metavar="PRIVATE_KEY", type=click.Path(path_type=Path, dir_okay=False))
@click.argument("public_key_path", metavar="PUBLIC_KEY", type=click.Path(path_type=Path, dir_okay=False))
def keygen(private_key: Path, public_key_path: Path) -> None:
    """Make an Ed25519 key pair for signing firmware: PRIVATE_KEY (PEM, mode 0600: keep it off the
    table computer) and PUBLIC_KEY (PEM: what [firmware] public_key, --key and the simulators'
    --firmware-key take). Neither file is overwritten.

    \b
    Example:
      cardctl firmware keygen vendor.key vendor.pub
    """
    for path, named_by in ((private_key, "PRIVATE_KEY"), (public_key_path, "PUBLIC_KEY")):
        if os.path.lexists(path):
            raise CliError(f"{named_by} {path}: exists already: not overwritten (choose another name, or remove "
                           "it first)", EXIT_USAGE)
    private, public = generate_dev_keypair()
    _new_file(private_key, private_key_pem(private), 0o600, "PRIVATE_KEY")
    _new_file(public_key_path, public_key_pem(public), 0o644, "PUBLIC_KEY")
    click.echo(visible(f"{private_key}: private key (mode 0600); {public_key_path}: public key"))


def _private_key(path: Path) -> Ed25519PrivateKey:
    try:
        return read_private_key_file(path)
    except OSError as exc:
        raise CliError(f"--key {read_problem(path, exc)}", EXIT_USAGE) from None
    except FileRefused as exc:
        raise CliError(f"--key {exc}", EXIT_USAGE) from None
    except CarddError as exc:
        raise CliError(f"--key {path}: {exc}", EXIT_USAGE) from None


@firmware_group.command("sign")
@click.argument("body", metavar="FIRMWARE", type=click.Path(path_type=Path, dir_okay=False))
@click.argument("out", metavar="IMAGE", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--key", "key_path", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="the Ed25519 private key (cardctl firmware keygen's PRIVATE_KEY)")
@click.option("--model", required=True, help="the device model the image is for, as its IDENT says it")
@click.option("--version", "version", required=True, help="the image's version, dotted numbers (1.1.0)")
def sign(body: Path, out: Path, key_path: Path, model: str, version: str) -> None:
    """Sign the device's FIRMWARE (the raw binary) for MODEL at VERSION into a new IMAGE file, the
    signed image firmware flash takes. IMAGE is not overwritten.

    \b
    Example:
      cardctl firmware sign --key vendor.key --model "OS-1 sim" --version 1.1.0 os1.bin os1-1.1.0.fw
    """
    if downgrade_reason(version, version) is not None:  # a version no device can compare: always a downgrade
        raise CliError(f"--version {version!r}: expected dotted numbers, like 1.1.0", EXIT_USAGE)
    private = _private_key(key_path)
    try:
        data = read_regular_file(body, min(MAX_IMAGE_SIZE, MAX_IMAGE_FILE_BYTES - 1024))
    except OSError as exc:
        raise CliError(f"FIRMWARE {read_problem(body, exc)}", EXIT_USAGE) from None
    except FileRefused as exc:
        raise CliError(f"FIRMWARE {exc}", EXIT_USAGE) from None
    try:
        signed = sign_image(model, version, data, private)
    except FirmwareFormatError as exc:  # a model or version too long for the header
        raise CliError(f"not signed: {exc}", EXIT_USAGE) from None
    _new_file(out, signed.to_bytes(), 0o644, "IMAGE")
    click.echo(visible(f"{out}: {model} {version}, {len(data):,} bytes, signed"))


COMMANDS = (firmware_group,)
