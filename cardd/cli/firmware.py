"""``cardctl firmware flash URL IMAGE``: a signed image straight to a device. The signature is
checked with the configured public key before the device is even opened: an unsigned or
re-signed image exits 5 with nothing sent. The image's model and version are checked against the
device's IDENT before the progress bar (bytes and rate) is drawn: a refused image is one line."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import click
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from cardd.cli.common import EXIT_FAILURE, EXIT_INTEGRITY, EXIT_USAGE, CliError, json_option
from cardd.cli.console import ProgramConsole, emit
from cardd.cli.device import device_error, parse_device_url
from cardd.cli.shown import shown
from cardd.config import DEFAULT_PATH, ConfigError, load_config
from core.errors import CarddError
from core.files import FileRefused, read_problem
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.errors import (FirmwareDowngradeRefused, FirmwareError, FirmwareFormatError,
                                    FirmwareSignatureError)
from firmware_bridge.firmware import (SignedImage, check_update, read_image_file, read_public_key_file,
                                      update_firmware, verify_image)
from firmware_bridge.session import SessionConfig


@click.group("firmware")
def firmware_group() -> None:
    """\b
    Example:
      cardctl firmware flash serial:///dev/cardd/shoe-SHOE0001 os1-1.1.0.fw
    """


def public_key(key_path: Path | None, config_path: Path) -> Ed25519PublicKey:
    """The key from --key, else the configuration's [firmware] public_key; CliError naming the file and key."""
    if key_path is None:
        try:
            configured = load_config(config_path).firmware.public_key
        except ConfigError as exc:
            raise CliError(f"bad config: {exc}", EXIT_USAGE) from None
        if configured is None:
            raise CliError(f"{config_path}: firmware.public_key: not set: firmware is refused without a key "
                           "(or give --key)", EXIT_USAGE)
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
                 progress: Progress | None) -> dict[str, Any]:
    """Open the device, check the image against its IDENT (model, version) and only then show the
    bar and send: an image the device would refuse is one error line, not an empty bar above it."""
    connection = DeviceConnection(url, config=SessionConfig(host_name="cardctl firmware"))
    task = None

    def advance(sent: int, total: int) -> None:
        if progress is not None and task is not None:
            progress.update(task, completed=sent)

    try:
        await connection.open()
        check_update(connection.ident, signed, key, allow_downgrade_by=allow_downgrade_by)
        if progress is not None:
            progress.start()
            task = progress.add_task("flashing", total=signed.header.size)
        done = await update_firmware(connection, signed, key,  # type: ignore[arg-type]
                                     progress=advance, allow_downgrade_by=allow_downgrade_by)
    finally:
        if progress is not None and task is not None:  # stopping a bar never started prints an empty line
            progress.stop()
        await connection.close()
    return {"url": url, "model": done.model, "from_version": done.from_version, "to_version": done.to_version,
            "ok": done.result.ok, "detail": done.result.detail, "downgrade_allowed_by": done.downgrade_allowed_by}


@firmware_group.command("flash")
@click.argument("url")
@click.argument("image", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--key", "key_path", type=click.Path(path_type=Path, dir_okay=False),
              help="the Ed25519 public key (default: the configuration's [firmware] public_key)")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=DEFAULT_PATH, show_default=True,
              help="where the key is configured")
@click.option("--allow-downgrade-by", metavar="NAME", help="allow an older version; your name is journaled")
@json_option
def flash(url: str, image: Path, key_path: Path | None, config_path: Path, allow_downgrade_by: str | None,
          as_json: bool) -> None:
    """Flash the signed IMAGE into the device at URL (the daemon must not hold it).

    The signature is verified before a byte is sent; an unsigned or wrongly signed image
    exits 5.

    \b
    Example:
      cardctl firmware flash --key /etc/cardd/firmware.pub serial:///dev/cardd/shoe-SHOE0001 os1-1.1.0.fw
    """
    key = public_key(key_path, config_path)
    signed = signed_image(image, key)
    try:
        parse_device_url(url)
        if as_json:
            result = asyncio.run(_flash(url, signed, key, allow_downgrade_by, None))
        else:
            columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
            # started by _flash once the device would take the image
            progress = Progress(*columns, console=ProgramConsole())
            result = asyncio.run(_flash(url, signed, key, allow_downgrade_by, progress))
    except FirmwareDowngradeRefused as exc:  # the library's words, then how to allow it here
        raise CliError(f"{url}: firmware not flashed: {exc}: --allow-downgrade-by NAME allows it", EXIT_FAILURE) from None
    except FirmwareError as exc:
        raise CliError(f"{url}: firmware not flashed: {exc}", EXIT_FAILURE) from None
    except CarddError as exc:
        raise device_error(url, exc) from None
    if not result["ok"]:
        raise CliError(f"{url}: the device refused the image: {result['detail']}", EXIT_FAILURE)
    emit(result, as_json, lambda out: out.print(shown(f"{result['model']}: {result['from_version']} -> "
                                                      f"{result['to_version']}: {result['detail']}")))


COMMANDS = (firmware_group,)
