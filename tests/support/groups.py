"""Unix groups a test needs (role and socket groups), made for the test and removed after."""
from __future__ import annotations

import grp
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager


@contextmanager
def unix_groups(wanted: Mapping[str, tuple[str, int]]) -> Iterator[dict[str, int]]:
    """``wanted``: key -> (group name, gid to create it with when missing). Yields key -> gid;
    removes only the groups it created."""
    made = []
    try:
        for name, gid in wanted.values():
            try:
                grp.getgrnam(name)
            except KeyError:
                subprocess.run(["groupadd", "--gid", str(gid), name], check=True)
                made.append(name)
        yield {key: grp.getgrnam(name).gr_gid for key, (name, _) in wanted.items()}
    finally:
        for name in made:
            subprocess.run(["groupdel", name], check=True)
