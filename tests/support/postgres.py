"""A real PostgreSQL for cardfloor's tests: a private cluster in a temporary folder, on a free
127.0.0.1 port and a Unix socket in that folder, fsync on as in production.

initdb costs a second or two, so the ``postgres`` fixture makes one cluster per test process
(per xdist worker) and ``floor_db`` gives each test a fresh empty database of it (CREATE
DATABASE from template0 is quick): tests stay isolated without an initdb each. A test that
stops or kills the server makes its own :class:`PostgresServer`.

initdb refuses to run as root, so as root the cluster is the ``postgres`` user's (Debian's
package makes it): its folder is made under /tmp (pytest's tmp folders are root's alone, 0700)
and handed to that user. The postmaster gets SIGKILL from the kernel when the process that
started it ends (``PR_SET_PDEATHSIG``, as tests/support/brokers.py's brokers), and its backends
end when it does: a pytest killed outright leaves no server behind."""
from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support.brokers import _die_with_parent, free_port, tail

#: how long a server may take to come up (or to recover after a SIGKILL) on a loaded machine
START_TIMEOUT = 60.0
#: the superuser the rig connects as (trust authentication, loopback and its socket only)
SUPERUSER = "postgres"


def server_bin(program: str) -> str:
    """A PostgreSQL server program (Debian keeps them off PATH, in /usr/lib/postgresql/N/bin)."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{program}"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if found:
        return found[-1]
    on_path = shutil.which(program)
    if on_path is None:
        raise RuntimeError(f"no PostgreSQL {program} in /usr/lib/postgresql/*/bin or on PATH (make sysdeps installs it)")
    return on_path


def _owner() -> dict[str, Any]:
    """Popen arguments that run a program as the cluster's owner: ``postgres`` when we are root."""
    if os.geteuid() != 0:
        return {}
    entry = pwd.getpwnam(SUPERUSER)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _children(pid: int) -> list[int]:
    """The pids of ``pid``'s children now."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """``pid`` runs (a zombie has ended: only its parent's wait is missing)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class PostgresServer:
    """One cluster: :meth:`start`, :meth:`stop` (a fast shutdown), :meth:`kill` (SIGKILL of the
    postmaster, as a power cut would leave it, minus the disk cache) and :meth:`start` again on
    the same port and data. :meth:`create_database` makes an empty database; :attr:`dsn` and
    :meth:`dsn_for` name them."""

    _names = itertools.count(1)

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        """``settings``: more server settings (``-c name=value``), for benchmarks."""
        self.settings = dict(settings or {})
        self.directory = Path(tempfile.mkdtemp(prefix="cardd-postgres-"))
        self.data = self.directory / "data"
        self.socket_dir = self.directory / "socket"
        self.output = self.directory / "postgres.out"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.socket_dir.mkdir()
        owner = _owner()
        if owner:
            for path in (self.directory, self.socket_dir):
                os.chown(path, owner["user"], owner["group"])
        with self.output.open("ab") as out:
            # no-sync: initdb's own files need no fsync in a throwaway cluster; the server keeps fsync on
            done = subprocess.run([server_bin("initdb"), "-D", str(self.data), "-U", SUPERUSER, "--auth=trust",
                                   "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"],
                                  stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  timeout=120, **owner)
        if done.returncode != 0:
            raise RuntimeError(f"initdb exited with {done.returncode}:\n{tail(self.output)}")

    @property
    def dsn(self) -> str:
        """The ``postgres`` database (the rig's own: CREATE DATABASE, DROP DATABASE)."""
        return self.dsn_for("postgres")

    def dsn_for(self, database: str) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def start(self) -> PostgresServer:
        """Start the postmaster and return once it takes a connection; raise with its own last
        log lines if it ends or is not ready in time."""
        assert not self.running(), "PostgreSQL is already running"
        command = [server_bin("postgres"), "-D", str(self.data), "-p", str(self.port),
                   "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.socket_dir}",
                   "-c", "fsync=on", "-c", "max_connections=60", "-c", "shared_buffers=32MB",
                   "-c", "log_min_messages=warning", "-c", "logging_collector=off",
                   *[part for name, value in self.settings.items() for part in ("-c", f"{name}={value}")]]
        with self.output.open("ab") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         preexec_fn=_die_with_parent, **_owner())
        deadline = time.monotonic() + START_TIMEOUT
        while not self._takes_connections():
            if self.proc.poll() is not None:
                raise RuntimeError(f"PostgreSQL exited with {self.proc.returncode}:\n{tail(self.output)}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"PostgreSQL was not ready within {START_TIMEOUT} s:\n{tail(self.output)}")
            time.sleep(0.05)
        return self

    def _takes_connections(self) -> bool:
        try:
            with psycopg.connect(self.dsn, connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int:
        """A fast shutdown (SIGINT: open transactions rolled back, a checkpoint), waited for."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(2)
        return self.proc.wait(timeout=60)

    def kill(self) -> None:
        """SIGKILL the postmaster and wait for it and for its backends, which end on their own
        when they see it gone (until then a new postmaster refuses the data's shared memory);
        the next start recovers from the WAL."""
        if self.proc is None or self.proc.poll() is not None:
            return
        children = _children(self.proc.pid)
        self.proc.kill()
        self.proc.wait(timeout=30)
        deadline = time.monotonic() + START_TIMEOUT
        while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.02)

    def create_database(self) -> str:
        """An empty database of its own (from template0), its dsn."""
        name = f"floor_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return self.dsn_for(name)

    def drop_database(self, dsn: str) -> None:
        name = dsn.rsplit("/", 1)[1]
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self) -> None:
        """Kill the server and remove its folder."""
        self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def last_words(self) -> str:
        return tail(self.output)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One started PostgreSQL for the test process (each xdist worker has its own), killed and
    removed at its end. Tests share it through their own databases (``floor_db``): a test that
    stops or kills the server makes its own PostgresServer instead."""
    with PostgresServer() as server:
        yield server


@pytest.fixture
def floor_db(postgres: PostgresServer) -> Iterator[str]:
    """The dsn of a fresh, empty database on the process's PostgreSQL, dropped after the test."""
    dsn = postgres.create_database()
    yield dsn
    if postgres.running():
        postgres.drop_database(dsn)
