"""What stopped a program reading a file a person named, in words (never the OS's "[Errno 2] ..."):
one text for every layer (cardctl, cardd's configuration, the simulators' options), which the caller
prefixes with the option or key that named the file."""
from __future__ import annotations

from pathlib import Path


def read_problem(path: Path, exc: OSError) -> str:
    """``exc`` (raised opening or reading ``path``) as ``"<path>: <why>"``: a missing directory
    is named, as a missing file is told apart from it."""
    if isinstance(exc, FileNotFoundError):
        directory = path.absolute().parent
        if not directory.is_dir():
            return f"{path}: the directory {directory} does not exist"
        return f"{path}: no such file"
    if isinstance(exc, IsADirectoryError):
        return f"{path}: is a directory, not a file"
    if isinstance(exc, PermissionError):
        return f"{path}: permission denied: you cannot read it"
    return f"{path}: cannot be read: {exc.strerror or exc}"
