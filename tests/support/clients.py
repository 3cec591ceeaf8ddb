"""An API client run as another user: tests/api/api_client.py under ``uid`` and groups, so the
daemon reads real peer credentials (SO_PEERCRED) from a real process. One copy for the API's,
the daemon's roles and the retention tests."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CLIENT_SCRIPT = Path(__file__).resolve().parents[1] / "api" / "api_client.py"
#: the client is stdlib only; other uids cannot run a Python under root's home (pyenv)
CLIENT_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def _command(sock: Path, extra_args: Sequence[str]) -> list[str]:
    return [CLIENT_PYTHON, "-I", str(CLIENT_SCRIPT), str(sock), *extra_args]


def _input(requests: Sequence[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in requests)


def run_client(sock: Path, uid: int, gids: Sequence[int], requests: Sequence[dict[str, Any]] = (),
               extra_args: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Run the client as ``uid`` with primary group ``gids[0]`` and the others as supplementary
    groups; every line it received, decoded."""
    proc = subprocess.run(_command(sock, extra_args), user=uid, group=gids[0], extra_groups=list(gids[1:]),
                          cwd="/", capture_output=True, timeout=30, input=_input(requests))
    assert proc.returncode == 0, proc.stderr.decode()
    return [json.loads(line) for line in proc.stdout.splitlines()]


async def run_client_async(sock: Path, uid: int, gids: Sequence[int], requests: Sequence[dict[str, Any]] = (),
                           extra_args: Sequence[str] = ()) -> list[dict[str, Any]]:
    """:func:`run_client` for a test whose daemon side runs on this process's event loop."""
    proc = await asyncio.create_subprocess_exec(
        *_command(sock, extra_args), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, user=uid, group=gids[0], extra_groups=list(gids[1:]), cwd="/")
    out, err = await proc.communicate(_input(requests))
    assert proc.returncode == 0, err.decode()
    return [json.loads(line) for line in out.splitlines()]
