"""A run's temporary directory that a killed run does not leave behind for ever:
:func:`make_run_directory` (its name and marker carry the owner's pid and start time, and it
removes what owners that are gone left), :func:`keep` and :func:`adopt`. docs/install.md,
"Temporary directories of a killed run"."""
from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

#: the marker file in a run directory: "<pid> <start time>\n" of the process that made it
MARKER = ".cardd-run"
#: a run directory's name: a cardd or cardbench prefix, the owner's pid and start time, mkdtemp's random part
_NAME = re.compile(r"(?:cardd|cardbench)(?:-[a-z]+)*-(\d+)-(\d+)-[A-Za-z0-9_]+")


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, /proc/PID/stat field 22), or None when
    there is no such process or it is a zombie (it has ended: nothing of it runs)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            fields = stat_file.read().rpartition(b")")[2].split()
    except OSError:
        return None
    # after the command's ")": state is field 3, starttime field 22 (1-based, from the pid)
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


def owner_gone(pid: int, start: int) -> bool:
    """Whether the process that made a run directory (``pid`` started at ``start``) has ended.
    False when that cannot be known (no /proc): a directory is then never taken for left behind."""
    if not os.path.isdir("/proc/self"):
        return False
    return process_start(pid) != start


def make_run_directory(prefix: str, parent: str | os.PathLike[str] | None = None) -> Path:
    """A new private directory ``<parent>/<prefix><pid>-<start>-XXXXXXXX`` with its marker, after
    removing the run directories in ``parent`` (default: the temporary directory) whose owner is
    gone. ``prefix`` starts with ``cardd`` or ``cardbench`` and ends with ``-``."""
    assert _NAME.fullmatch(f"{prefix}1-1-x"), prefix
    base = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    remove_left_behind(base)
    pid = os.getpid()
    start = process_start(pid)
    directory = Path(tempfile.mkdtemp(prefix=f"{prefix}{pid}-{start or 0}-", dir=base))
    (directory / MARKER).write_text(f"{pid} {start or 0}\n")
    return directory


def keep(directory: Path) -> None:
    """``directory`` is kept for a person: no later run removes it (its marker goes)."""
    try:
        (directory / MARKER).unlink()
    except FileNotFoundError:
        pass


def adopt(directory: Path) -> None:
    """``directory`` given to a process that goes on using it (``cardd --simulate --state-dir``): if
    the run that made it has ended (a killed ``cardd --simulate``'s own directory, given back to
    resume its table), its marker goes and no later run takes it for one left behind; a live
    owner's (the demo or cardbench that started this cardd in its directory) stays, so the
    directory still goes once that owner is killed."""
    owner = _marker_owner(str(directory))
    if owner is None:
        return  # no marker (a directory of the user's): nothing to adopt
    try:
        pid, start = int(owner[0]), int(owner[1])
    except (ValueError, IndexError):
        return  # not one this module wrote
    if owner_gone(pid, start):
        keep(directory)


def _marker_owner(directory: str) -> list[bytes] | None:
    """What the run directory's marker says (its owner's pid and start time, as written), or None
    when it has none that can be read."""
    try:
        with open(os.path.join(directory, MARKER), "rb") as marker:
            return marker.read(64).split()
    except OSError:
        return None


def remove_left_behind(parent: Path) -> list[Path]:
    """Remove the run directories in ``parent`` whose owner is gone (see the module's text); the
    ones removed. A directory that cannot be read or removed is left as it is."""
    removed: list[Path] = []
    uid = os.getuid()
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        named = _NAME.fullmatch(entry.name)
        if named is None:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
            continue
        owner = _marker_owner(entry.path)
        if owner is None:
            continue  # no marker: not made by make_run_directory (or kept)
        pid, start = int(named[1]), int(named[2])
        if owner != [str(pid).encode(), str(start).encode()] or not owner_gone(pid, start):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed
