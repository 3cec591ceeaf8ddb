"""The host's protocol 2.0 identity key: made at the daemon's first start, then only read.

It is an Ed25519 private key (PKCS#8 PEM) in ``host_key.pem`` beside the journal: the daemon's
state directory, the only place the service may write (packaging/cardd.service), owned by the
cardd user and readable by it alone (0600). A file others may read, one owned by another user,
or one that is not such a key stops the start with one line naming it: a key anyone else read
lets them pass as this host to its devices, and a new key would make every enrolled device
refuse the host's firmware and technician commands until it is enrolled again (docs/install.md).
The technician compares its fingerprint (``cardctl status``) with what a device shows.
"""
from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (Encoding, NoEncryption, PrivateFormat,
                                                          load_pem_private_key)

from core.errors import CarddError
from firmware_bridge.handshake2 import fingerprint, raw_public_key

HOST_KEY_FILE = "host_key.pem"
#: a PEM Ed25519 private key is about 120 bytes: anything far larger is not one
_MAX_BYTES = 4096


class HostKeyError(CarddError):
    """The host key file cannot be used; one line naming the file and what to do."""


def host_key_path(journal_path: Path) -> Path:
    return journal_path.parent / HOST_KEY_FILE


def host_fingerprint(key: Ed25519PrivateKey) -> str:
    return fingerprint(raw_public_key(key.public_key()))


def load_or_create_host_key(path: Path) -> tuple[Ed25519PrivateKey, bool]:
    """The host's identity key, and whether it was made now (none there yet)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return load_host_key(path), False
    except OSError as exc:
        raise HostKeyError(f"{path}: cannot create the host key: {exc.strerror}") from None
    key = Ed25519PrivateKey.generate()
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
            out.flush()
            os.fsync(out.fileno())
    except OSError as exc:
        path.unlink(missing_ok=True)  # half a key is a damaged one at the next start
        raise HostKeyError(f"{path}: cannot write the host key: {exc.strerror}") from None
    return key, True


def load_host_key(path: Path) -> Ed25519PrivateKey:
    """Read the key; HostKeyError (one line) when others may read it, another user owns it, or it is damaged."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise HostKeyError(f"{path}: cannot read the host key: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as source:
        status = os.fstat(source.fileno())
        if status.st_mode & 0o077:
            raise HostKeyError(f"{path}: the host key may be read by others (mode {status.st_mode & 0o777:04o}): "
                               "only the cardd user may (chmod 0600; if others did read it, see docs/install.md, "
                               "\"A new host key\")")
        if status.st_uid != os.geteuid():
            raise HostKeyError(f"{path}: the host key belongs to uid {status.st_uid}, not to the user running cardd "
                               f"(uid {os.geteuid()}): chown it to cardd")
        data = source.read(_MAX_BYTES + 1)
    try:
        key = load_pem_private_key(data, password=None) if len(data) <= _MAX_BYTES else None
    except (ValueError, TypeError):
        key = None
    if not isinstance(key, Ed25519PrivateKey):
        raise HostKeyError(f"{path}: damaged: not an Ed25519 private key in PEM (restore it from the backup; a new "
                           "key means every device enrolled again: docs/install.md, \"A new host key\")")
    return key
