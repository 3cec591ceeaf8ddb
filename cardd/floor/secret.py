"""The key cardfloor signs the pit page's session cookies with (cardd/floor/web.py): 32 random
bytes in ``http.secret_file``, made mode 0600 when missing (by the service at its start, or by
``cardfloor user``), refused when others may read it."""
from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from core.errors import CarddError
from core.files import FileRefused, read_regular_file

SECRET_BYTES = 32


class SecretError(CarddError):
    """The session key's file cannot be read or made: one sentence naming it."""


def load_or_make_secret(path: Path) -> bytes:
    """The session signing key in ``path``; made (32 random bytes, mode 0600) when missing."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        pass
    except OSError as exc:
        raise SecretError(f"{path}: cannot make it: {exc.strerror or type(exc).__name__}") from None
    else:
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_bytes(SECRET_BYTES))
            out.flush()
            os.fsync(out.fileno())
    try:
        info = path.stat()
        if stat.S_ISREG(info.st_mode) and info.st_mode & 0o077:
            raise SecretError(f"{path}: others may read it (mode {info.st_mode & 0o777:04o}): only cardfloor may "
                              "(chown cardfloor, chmod 0600)")
        key = read_regular_file(path, 4096)
    except FileRefused as exc:
        raise SecretError(str(exc)) from None
    except OSError as exc:
        raise SecretError(f"{path}: cannot read it: {exc.strerror or type(exc).__name__}") from None
    if len(key) < SECRET_BYTES:
        raise SecretError(f"{path}: {len(key)} bytes: a session key is at least {SECRET_BYTES} (delete it: "
                          "cardfloor makes a new one, and every session ends)")
    return key
