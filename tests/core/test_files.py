"""core/files.py's read_regular_file, the one way a file someone named is read whole: only a
regular file of at most the size its reader takes, never an open that waits nor a read without end."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.files import FileRefused, read_regular_file


def test_a_regular_file_within_the_limit_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "image"
    data = os.urandom(3 << 20)  # more than one read takes
    path.write_bytes(data)
    assert read_regular_file(path, len(data)) == data


@pytest.mark.parametrize("kind", ["fifo", "char-device", "directory", "symlink-to-device"])
def test_anything_but_a_regular_file_is_refused_unopened(tmp_path: Path, kind: str) -> None:
    path, shown = {"fifo": (tmp_path / "pipe", "a FIFO (named pipe)"),
                   "char-device": (Path("/dev/zero"), "a character device"),
                   "directory": (tmp_path, "a directory"),
                   "symlink-to-device": (tmp_path / "image.fw", "a character device")}[kind]
    if kind == "fifo":
        os.mkfifo(path)  # no writer: an open that waited for one would hang this test
    elif kind == "symlink-to-device":
        path.symlink_to("/dev/zero")
    with pytest.raises(FileRefused) as refused:
        read_regular_file(path, 1 << 20)
    assert str(refused.value) == f"{path}: {shown}, not a regular file: not read"


def test_a_file_larger_than_the_limit_is_refused_from_its_size(tmp_path: Path) -> None:
    path = tmp_path / "huge"
    with path.open("wb") as out:
        out.truncate(1 << 40)  # sparse: a terabyte nobody writes
    with pytest.raises(FileRefused, match=r"1,099,511,627,776 bytes, more than the 1,024 taken: not read$"):
        read_regular_file(path, 1024)


def test_a_file_that_holds_more_than_its_size_says_is_read_no_further_than_the_limit() -> None:
    """A /proc file is regular and says 0 bytes; what it holds is read only up to the limit."""
    path = Path("/proc/self/maps")
    assert path.stat().st_size == 0
    with pytest.raises(FileRefused, match=r"grew past the 64 bytes taken while it was read: not read$"):
        read_regular_file(path, 64)


def test_a_missing_file_is_the_oserror_read_problem_words(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_regular_file(tmp_path / "none", 10)
