"""A client the daemon's greeting turns away (another protocol, an ERROR, a line no API's) closes
its connection there and then: the socket and the stream read from it, which holds the descriptor
open as long as it lives (the client once closed only the socket)."""
from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from cardd.api.client import ApiClient, ClientError
from cardd.api.protocol import Error, ErrorCode, Version, encode_line


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _refused_by(sock_dir: Path, greeting: bytes) -> tuple[str, set[str]]:
    """What ApiClient says of a server whose first line is ``greeting``, and the descriptors it
    left open while its error is still held (with the client in its traceback)."""
    path = sock_dir / "api.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def greet() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.sendall(greeting)
            conn.recv(1)  # until the client closes its end

    server = threading.Thread(target=greet, name="fake-cardd")
    server.start()
    try:
        before = _open_fds()
        with pytest.raises(ClientError) as refused:
            ApiClient(path, timeout=10)
    finally:
        server.join(10)  # it closes its end once the client has closed its own
        listener.close()
    assert not server.is_alive(), "the client never closed its connection"
    left_open = _open_fds() - before  # refused (its traceback, the client) is alive still
    return str(refused.value), left_open


def test_another_protocol_version_closes_the_connection(sock_dir: Path) -> None:
    said, left_open = _refused_by(sock_dir, encode_line(Version(release="9.9.9", protocol="99.0")))
    assert "the daemon speaks API 99.0" in said
    assert not left_open, f"descriptors left open: {left_open}"


@pytest.mark.parametrize("greeting", [
    encode_line(Error(id=None, code=ErrorCode.BUSY, message="the daemon serves 4 connections already")),
    b"HTTP/1.1 400 Bad Request\r\n",
], ids=["error", "not-an-api"])
def test_a_greeting_that_is_no_version_closes_the_connection(sock_dir: Path, greeting: bytes) -> None:
    _, left_open = _refused_by(sock_dir, greeting)
    assert not left_open, f"descriptors left open: {left_open}"
