"""The one place the journal makes a directory entry durable."""
from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """fsync a directory, so a file created or renamed in it survives a power cut."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
