"""cardd/notify.py against a real AF_UNIX datagram socket standing in for systemd's."""
from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cardd.notify import MAX_STATUS, Notifier, Watchdog


@pytest.fixture(autouse=True)
def _no_leaks(no_leaks):
    yield


@pytest.fixture
def systemd(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    """(NOTIFY_SOCKET, the receiving socket) for a path socket, as systemd creates it."""
    path = str(tmp_path / "notify")
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(path)
    receiver.setblocking(False)
    yield path, receiver
    receiver.close()


def received(receiver: socket.socket) -> list[bytes]:
    """Every datagram waiting, without blocking."""
    found = []
    while True:
        try:
            found.append(receiver.recv(4096))
        except BlockingIOError:
            return found


async def next_datagram(receiver: socket.socket) -> bytes:
    return await asyncio.wait_for(asyncio.get_running_loop().sock_recv(receiver, 4096), 10)


def test_each_message_is_one_datagram(systemd):
    address, receiver = systemd
    notifier = Notifier(address)
    try:
        assert notifier.enabled
        assert notifier.ready("dealing") and notifier.watchdog() and notifier.status("round 4 open")
        assert notifier.stopping()
        assert received(receiver) == [b"READY=1\nSTATUS=dealing", b"WATCHDOG=1", b"STATUS=round 4 open",
                                      b"STOPPING=1"]
    finally:
        notifier.close()


def test_the_abstract_namespace():
    name = f"cardd-test-{os.getpid()}"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind("\0" + name)
    receiver.setblocking(False)
    notifier = Notifier("@" + name)
    try:
        assert notifier.ready()
        assert received(receiver) == [b"READY=1"]
    finally:
        notifier.close()
        receiver.close()


def test_without_notify_socket_nothing_is_sent():
    notifier = Notifier.from_environment({"WATCHDOG_USEC": "10000000"})
    assert not notifier.enabled
    assert not notifier.ready("x") and not notifier.watchdog() and not notifier.stopping()
    assert notifier._socket is None  # not even a socket was made


def test_from_the_environment(systemd):
    address, _ = systemd
    assert Notifier.from_environment({"NOTIFY_SOCKET": address}).address == address
    assert Notifier.from_environment({"NOTIFY_SOCKET": address}).watchdog_interval is None
    assert Notifier.from_environment({"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "10000000"}).watchdog_interval == 5.0
    mine = {"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "4000000", "WATCHDOG_PID": str(os.getpid())}
    assert Notifier.from_environment(mine).watchdog_interval == 2.0
    # the watchdog of another process (a parent that exec'd us without clearing the variables)
    assert Notifier.from_environment({**mine, "WATCHDOG_PID": "1"}).watchdog_interval is None
    for bad in ("", "0", "-5", "ten"):
        assert Notifier.from_environment({"NOTIFY_SOCKET": address, "WATCHDOG_USEC": bad}).watchdog_interval is None
    assert Notifier.from_environment({"NOTIFY_SOCKET": ""}).address is None


def test_status_text_stays_one_printable_line(systemd):
    address, receiver = systemd
    notifier = Notifier(address)
    try:
        notifier.status("shoe SHOE\n0001\nREADY=1\x1b[2J")
        notifier.status("x" * 1000)
        assert received(receiver) == [b"STATUS=shoe SHOE 0001 READY=1 [2J", b"STATUS=" + b"x" * MAX_STATUS]
    finally:
        notifier.close()


def test_a_refused_send_is_false_and_logged_once(tmp_path, mocker):
    notifier = Notifier(str(tmp_path / "gone"))  # systemd went away: ENOENT on every send
    warning = mocker.patch("cardd.notify.log.warning")
    try:
        assert not notifier.watchdog() and not notifier.watchdog()
        warning.assert_called_once_with("sd_notify_failed", socket=str(tmp_path / "gone"),
                                        reason="No such file or directory")
    finally:
        notifier.close()


def test_the_watchdog_pings_only_while_the_loop_turns(systemd):
    address, receiver = systemd

    async def scenario() -> None:
        notifier = Notifier(address, watchdog_usec=20_000)
        watchdog = Watchdog(notifier)
        assert watchdog.interval == 0.01
        watchdog.start()
        try:
            assert await next_datagram(receiver) == b"WATCHDOG=1"
            received(receiver)
            time.sleep(0.2)  # the loop is blocked for 20 intervals: no task can run, so no ping
            assert received(receiver) == []
            assert await next_datagram(receiver) == b"WATCHDOG=1"  # turning again: pinging again
        finally:
            await watchdog.stop()
            notifier.close()
        received(receiver)
        await asyncio.sleep(0.05)
        assert received(receiver) == []  # stopped means stopped

    asyncio.run(scenario())


def test_the_watchdog_sends_a_status_only_when_it_changes(systemd):
    address, receiver = systemd

    async def scenario() -> None:
        notifier = Notifier(address)  # no WATCHDOG_USEC: no pings, status still works
        watchdog = Watchdog(notifier)
        watchdog.start()
        assert watchdog._task is None
        for text in ("idle", "idle", "round 1 open", "round 1 open", "idle"):
            watchdog.status(text)
        await watchdog.stop()
        notifier.close()

    asyncio.run(scenario())
    assert received(receiver) == [b"STATUS=idle", b"STATUS=round 1 open", b"STATUS=idle"]
