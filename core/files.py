"""Files a person named, checked in words (never the OS's "[Errno 2] ..."): why one cannot be read
(:func:`read_problem`), why its directory cannot take a new one (:func:`output_directory_problem`).
One text for every layer (cardctl and cardbench's options, cardd's configuration, the simulators'
options), which the caller prefixes with the option or key that named the file."""
from __future__ import annotations

import os
from pathlib import Path


def output_directory_problem(path: Path, who: str = "you") -> str | None:
    """Why a file could not be made at ``path`` because of its directory (missing, or not writable
    by ``who``, this process's user), or None: checked before a command's work, so that work does
    not end in a traceback (cardctl, cardbench), or before a service starts (cardd --check-config,
    which names its user: it runs as the service's)."""
    directory = path.absolute().parent
    if not directory.is_dir():
        return _missing_directory(path, directory)
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"{path}: permission denied: {who} cannot write in the directory {directory}"
    return None


def _missing_directory(path: Path, directory: Path) -> str:
    return f"{path}: the directory {directory} does not exist"


def read_problem(path: Path, exc: OSError) -> str:
    """``exc`` (raised opening or reading ``path``) as ``"<path>: <why>"``: a missing directory
    is named, as a missing file is told apart from it."""
    if isinstance(exc, FileNotFoundError):
        directory = path.absolute().parent
        return _missing_directory(path, directory) if not directory.is_dir() else f"{path}: no such file"
    if isinstance(exc, IsADirectoryError):
        return f"{path}: is a directory, not a file"
    if isinstance(exc, PermissionError):
        return f"{path}: permission denied: you cannot read it"
    return f"{path}: cannot be read: {exc.strerror or type(exc).__name__}"
