"""A program whose reader went away: its stdout a pipe with the read end already closed, so its
first write (or the flush at its end) meets EPIPE, as ``cardctl log | head`` does once head exits."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence


def run_into_closed_pipe(command: Sequence[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``command`` with stdout a pipe nobody reads any more; its exit code and stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(list(command), stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=timeout)
    finally:
        os.close(write_end)


def run_until_first_line_read(command: Sequence[str], timeout: float = 30) -> tuple[str, int | None, str]:
    """Run ``command`` with stdout a pipe whose reader takes the first line and then goes away,
    as ``| head -1`` does. Its first line, exit code (None: still running after ``timeout``
    seconds, then killed) and stderr."""
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(list(command), stdout=write_end, stderr=subprocess.PIPE, text=True)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        first = reader.readline().decode()
    try:
        code: int | None = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = None
    _, err = proc.communicate()
    return first, code, err
