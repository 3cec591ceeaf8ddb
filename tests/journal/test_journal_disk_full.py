"""A journal on a disk so full that SQLite cannot even make its -shm is not called corrupt: opening
it says the disk is full, how much is free where, and that the journal is not damaged; once there
is room it opens and verifies as it was. A real full disk: a 2 MiB tmpfs in a mount namespace of
its own (tests/support/full_disk.py), filled with a filler file."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from cardd.journal.disk_full import FULL_DISK_BYTES
from tests.support.full_disk import PrivateTmpfs

CHILD = Path(__file__).with_name("full_disk_child.py")


def journal_child(disk: PrivateTmpfs, *args: str) -> dict[str, Any]:
    """What full_disk_child.py says, run where ``disk`` is mounted."""
    proc = subprocess.run([*disk.enter, sys.executable, str(CHILD), *args], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    said: dict[str, Any] = json.loads(proc.stdout)
    return said


def test_opening_a_journal_on_a_full_disk_says_the_disk_is_full_not_that_the_journal_is_corrupt(tmp_path: Path) -> None:
    directory = tmp_path / "disk"
    directory.mkdir()
    path = directory / "journal.sqlite3"
    with PrivateTmpfs(directory) as disk:
        assert journal_child(disk, "create", str(path), "20") == {"records": 20, "verified": True}
        assert disk.fill() > 0 and disk.free_bytes() < FULL_DISK_BYTES
        refused = journal_child(disk, "open", str(path))
        assert refused["error"] == "JournalWriteError", refused  # not JournalCorrupt
        match = re.fullmatch(rf"journal {re.escape(str(path))}: the disk holding it is full \((\d+) bytes free in "
                             rf"{re.escape(str(directory))}; SQLite SQLITE_(IOERR\w*|FULL): [^;()]+\): free space "
                             r"there; the journal is not damaged", refused["message"])
        assert match, refused["message"]
        assert int(match[1]) < FULL_DISK_BYTES
        # nor is a new journal made on it: the same words, and nothing left behind
        new = directory / "new.sqlite3"
        created = journal_child(disk, "create", str(new))
        assert created["error"] == "JournalWriteError", created
        assert re.fullmatch(rf"journal {re.escape(str(new))} cannot be created: the disk holding it is full \(\d+ "
                            rf"bytes free in {re.escape(str(directory))}; [^()]+\): free space there",
                            created["message"]), created["message"]
        assert not [p.name for p in disk.outside.iterdir() if p.name.startswith("new.sqlite3")]
        disk.free()
        assert journal_child(disk, "open", str(path)) == {"records": 20, "verified": True}  # as it was
