"""Unix groups a test needs (role and socket groups), made for the test and removed after.

Each test process has groups of its own: a name carries the process's pid and groupadd picks a
free gid, so tests running side by side (pytest-xdist workers) never take, or remove, the groups
another is using."""
from __future__ import annotations

import grp
import os
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager


def this_process(names: Mapping[str, str]) -> dict[str, str]:
    """key -> group name made this process's own (the name, a dash, the pid)."""
    return {key: f"{name}-{os.getpid()}" for key, name in names.items()}


@contextmanager
def unix_groups(wanted: Mapping[str, str]) -> Iterator[dict[str, int]]:
    """``wanted``: key -> group name (from :func:`this_process`), created when missing with a
    gid groupadd picks. Yields key -> gid; removes only the groups it created."""
    made = []
    try:
        for name in wanted.values():
            try:
                grp.getgrnam(name)
            except KeyError:
                subprocess.run(["groupadd", name], check=True)
                made.append(name)
        yield {key: grp.getgrnam(name).gr_gid for key, name in wanted.items()}
    finally:
        for name in made:
            subprocess.run(["groupdel", name], check=True)
