"""API abuse against the real daemon (``cardd --simulate`` in a subprocess) while it deals a
shoe: a WATCH client that never reads, a client sending 100 MB without a newline, 1,000
connections opened and dropped, random bytes. Meanwhile every card the simulated shoe dealt
is journaled once and in order, and the daemon's memory stays bounded."""
from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path


from cardd.journal import Journal
from tests.daemon.daemon_rig import Client, Daemon, journaled_reads, shuffle_and_load, simulate

FLOOD_BYTES = 100 * 1024 * 1024
CONNECTIONS = 1000
#: what the abuse may add to the daemon's resident memory (its queues and buffers are bounded)
RSS_GROWTH_BOUND_MB = 25.0



def rss_mb(daemon: Daemon) -> float:
    for line in Path(f"/proc/{daemon.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS for the daemon")


def connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(20.0)
    sock.connect(str(path))
    return sock


def never_reads(path: Path, done: threading.Event) -> None:
    """WATCH, then not one byte read until the dealing is over."""
    sock = connect(path)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(b'{"class":"WATCH","id":"w"}\n')
    done.wait(120)
    sock.close()


def flood_without_newline(path: Path, outcome: list[str]) -> None:
    """100 MB of one line: the daemon must refuse it (ERROR too-long, then close) long before."""
    sock = connect(path)
    chunk = b"x" * (1 << 20)
    sent = 0
    try:
        while sent < FLOOD_BYTES:
            sock.sendall(chunk)
            sent += len(chunk)
        outcome.append(f"all {sent} bytes taken")
    except (BrokenPipeError, ConnectionResetError):
        outcome.append("closed")
    finally:
        sock.close()


def open_and_drop(path: Path, rng: random.Random) -> None:
    for n in range(CONNECTIONS):
        try:
            sock = connect(path)
        except OSError:
            continue  # the listen backlog was full for a moment: the daemon is not at fault
        if rng.random() < 0.5:
            sock.recv(100)  # some read the VERSION line first
        if rng.random() < 0.3:
            sock.sendall(b'{"class":"STATE","id":"')  # some leave half a request behind
        sock.close()


def random_bytes(path: Path, rng: random.Random, replies: list[bytes]) -> None:
    for _ in range(100):
        sock = connect(path)
        try:
            sock.recv(4096)  # VERSION
            sock.sendall(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 2000))) + b"\n")
            replies.append(sock.recv(4096))
        except OSError:
            pass  # the daemon may close a connection whose garbage tripped a limit
        finally:
            sock.close()


def test_abusive_clients_never_stop_the_deal_nor_grow_the_daemon(directory: Path) -> None:
    rng = random.Random(20261123)
    with simulate(directory) as daemon:
        dealer = daemon.client()
        deal: Callable[[int], object] = lambda n: dealer.ok("sim_deal", cards=n)
        shuffle_and_load(dealer, lambda: dealer.ok("sim_load_shoe"), deal)
        shoe = dealer.state()["shoe"]
        start, left = shoe["cards_out"], shoe["cards_in_shoe"] - shoe["cards_out"]
        before = rss_mb(daemon)

        done = threading.Event()
        flood: list[str] = []
        replies: list[bytes] = []
        abusers = [threading.Thread(target=never_reads, args=(daemon.socket_path, done)),
                   threading.Thread(target=flood_without_newline, args=(daemon.socket_path, flood)),
                   threading.Thread(target=open_and_drop, args=(daemon.socket_path, random.Random(rng.random()))),
                   threading.Thread(target=random_bytes, args=(daemon.socket_path, random.Random(rng.random()),
                                                                replies))]
        for thread in abusers:
            thread.start()
        dealt = 0
        while dealt < left and (any(t.is_alive() for t in abusers[1:]) or dealt < 150):  # the abuse lasts
            n = min(rng.randint(1, 4), left - dealt)
            deal(n)
            dealt += n
            time.sleep(0.05)  # spread the shoe over the abuse
        done.set()
        for thread in abusers:
            thread.join(60)
        state = dealer.wait_state(lambda s: s["shoe"]["cards_out"] == start + dealt)
        after = rss_mb(daemon)
        assert state["shoe"]["cards_out"] == start + dealt
        dealer.close()
        Client(daemon.socket_path).close()  # still answering
        code, err = daemon.stop()
        assert code == 0, err[-2000:]

    assert flood == ["closed"], flood  # refused long before 100 MB
    assert replies and all(reply.startswith(b'{"class":"ERROR"') for reply in replies if reply), replies[:3]
    assert after - before < RSS_GROWTH_BOUND_MB, (before, after)
    with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
        assert journal.verify().ok
        assert journaled_reads(journal) == list(range(1, start + dealt + 1))  # every card once, in order
