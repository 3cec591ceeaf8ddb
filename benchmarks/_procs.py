"""Helper processes of the link benchmark: start, read the first line, stop (no strays left)."""
from __future__ import annotations

import select
import signal
import subprocess

STOP_TIMEOUT = 5.0


def first_line(proc: subprocess.Popen, what: str, timeout: float = 10.0) -> str:
    """The first line ``proc`` prints on stdout (it must be started with ``stdout=PIPE, text=True``)."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if ready:
        line = proc.stdout.readline()
        if line:
            return line.strip()
    stop_process(proc)
    raise RuntimeError(f"{what} printed nothing on stdout within {timeout}s (exit code {proc.returncode})")


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after STOP_TIMEOUT; closes its pipes."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
