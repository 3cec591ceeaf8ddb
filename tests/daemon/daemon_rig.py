"""The daemon tests' rig: the real ``cardd`` console script in a subprocess, its real Unix
socket, and a line client. ``cardd --simulate`` brings its own simulated devices; with a
configuration file the test runs the simulated devices itself (so it knows the stack)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cardd.config import RULES_DIR
from cardd.daemon.enrolment import Enrolment, EnrolmentStore, enrolment_path
from cardd.journal import Journal, input_of
from firmware_bridge.handshake2 import raw_public_key
from firmware_bridge.messages import CardRead, Message, decode
from simulators.shoe import SimulatedShoe

CARDD = Path(sys.executable).with_name("cardd")
RULES = RULES_DIR / "casino-000.toml"
#: how long the daemon and its simulated devices may take to come up on a loaded machine
START_TIMEOUT = 30.0


def state_dir() -> Path:
    """A directory every test uid can reach (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="cardd-daemon-", dir="/tmp"))
    os.chmod(path, 0o755)
    return path


class Client:
    """One connection: requests get their one reply; EVENT lines are kept aside in ``events``."""

    def __init__(self, path: Path, timeout: float = 20.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.stream = self.sock.makefile("rwb")
        self.version = self.read()
        self.events: list[dict[str, Any]] = []
        self._n = 0

    def read(self) -> dict[str, Any]:
        line = self.stream.readline()
        if not line:
            raise ConnectionError("the daemon closed the connection")
        message: dict[str, Any] = json.loads(line)
        return message

    def send(self, message: dict[str, Any]) -> None:
        self.stream.write(json.dumps(message).encode() + b"\n")
        self.stream.flush()

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        self._n += 1
        rid = f"r{self._n}"
        self.send({**message, "id": rid})
        while True:
            reply = self.read()
            if reply["class"] == "EVENT":
                self.events.append(reply)
            elif reply.get("id") == rid:
                return reply

    def command(self, name: str, **args: Any) -> dict[str, Any]:
        return self.request({"class": "COMMAND", "name": name, "args": args})

    def ok(self, name: str, **args: Any) -> int:
        reply = self.command(name, **args)
        assert reply["class"] == "ACK", (name, args, reply)
        seq: int = reply["seq"]
        return seq

    def state(self) -> dict[str, Any]:
        reply = self.request({"class": "STATE"})
        assert reply["class"] == "STATE", reply
        state: dict[str, Any] = reply["state"]
        return state

    def wait_state(self, check: Callable[[dict[str, Any]], bool], timeout: float = 20.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            state = self.state()
            if check(state):
                return state
            assert time.monotonic() < deadline, f"the table never got there: {json.dumps(state)[:2000]}"
            time.sleep(0.02)

    def close(self) -> None:
        self.stream.close()
        self.sock.close()


#: every Daemon started, in order: tests/conftest.py kills the ones a test left running
STARTED: list[Daemon] = []


class Daemon:
    """``cardd`` running in a subprocess until :meth:`stop` or :meth:`kill`.

    Its stdout and stderr go to files in the state directory (the socket's), as the bench's rig
    gives cardd its log file (cardd/bench/runner.py): a pipe nobody reads fills at 64 KiB and the
    daemon's next log line then blocks its whole loop. Each start in a directory has its own pair,
    ``cardd-N.out`` and ``cardd-N.log`` (a restart in the same directory takes the next N).
    ``prefix`` runs cardd through another command that execs it (the same pid), e.g. into a mount
    namespace (tests/support/full_disk.py).

    cardd gets ``--stop-with-parent`` with this test process's pid, as cardbench and the demo
    give it theirs: a pytest killed outright (a CI timeout's SIGKILL) leaves no daemon behind
    holding ptys and sockets (tests/conftest.py stops those a finished test left)."""

    def __init__(self, args: list[str], socket_path: Path, env: dict[str, str] | None = None,
                 prefix: list[str] | None = None, cwd: Path | None = None) -> None:
        self.socket_path = socket_path
        self.stdout_path, self.stderr_path = _output_files(socket_path.parent)
        with self.stdout_path.open("x") as out, self.stderr_path.open("x") as err:
            self.proc = subprocess.Popen([*(prefix or []), str(CARDD), "--log-format", "json",
                                          "--stop-with-parent", str(os.getpid()), *args], stdout=out,
                                         stderr=err, cwd=cwd,
                                         env=None if env is None else {**os.environ, **env})
        STARTED.append(self)
        wait_listening(socket_path, self._ended, START_TIMEOUT)

    def _ended(self) -> str | None:
        """Why cardd is not running (its exit code and last words), or None while it runs."""
        if self.proc.poll() is None:
            return None
        return f"cardd exited with {self.proc.returncode}: {self.stderr()[-3000:]}"

    def client(self) -> Client:
        return Client(self.socket_path)

    def stdout(self) -> str:
        """What cardd printed so far (``--simulate``: its first line names the devices)."""
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        """cardd's log so far (JSON lines) and any last words."""
        return self.stderr_path.read_text(errors="replace")

    def log_lines(self, event: str) -> list[dict[str, Any]]:
        """The lines of cardd's log so far whose ``event`` is ``event``, as JSON objects (its
        last words, not JSON, left out)."""
        lines = []
        for line in self.stderr().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("event") == event:
                lines.append(record)
        return lines

    def stop(self) -> tuple[int, str]:
        """SIGTERM: a graceful stop; returns (exit code, stderr)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        return self.proc.returncode, self.stderr()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


def _output_files(directory: Path) -> tuple[Path, Path]:
    """The next free ``cardd-N.out``, ``cardd-N.log`` pair in ``directory``."""
    n = 1
    while (directory / f"cardd-{n}.log").exists() or (directory / f"cardd-{n}.out").exists():
        n += 1
    return directory / f"cardd-{n}.out", directory / f"cardd-{n}.log"


@contextmanager
def simulate(directory: Path) -> Iterator[Daemon]:
    daemon = Daemon(["--simulate", "--state-dir", str(directory)], directory / "cardd.sock")
    try:
        yield daemon
    finally:
        if daemon.proc.poll() is None:
            daemon.stop()


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll ``check`` (a simulated device's state, a file) until it holds; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.02)


def wait_listening(socket_path: Path, ended: Callable[[], str | None], timeout: float = 30.0) -> None:
    """Until cardd's socket takes a connection; ``ended()`` says why not (cardd gone: its last words)
    or None while it runs."""
    deadline = time.monotonic() + timeout
    while True:
        why = ended()
        assert why is None, why
        try:
            Client(socket_path, timeout=2.0).close()
            return
        except OSError:
            assert time.monotonic() < deadline, "cardd never listened"
            time.sleep(0.05)


def cardd_running(pid: int) -> bool:
    """``pid`` is a live cardd: not ended (a zombie's command line is empty, as is that of a pid
    nobody has) and not a pid reused by another program."""
    try:
        return b"cardd" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # (ProcessLookupError: it ended as we read)
        return False


def assert_stopped_cleanly(directory: Path) -> None:
    """What cardd's stop (SIGTERM's path) leaves in ``directory``: the socket ``cardd.sock`` removed,
    and the journal ``journal.sqlite3``'s last record its stop record."""
    assert not (directory / "cardd.sock").exists(), "the socket is left"
    with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
        last = journal.query(newest_first=True, limit=1)[0]
    assert (last.kind, last.reason, last.source) == ("stop", "DAEMON_STOP", "cardd"), last


def run_cardd(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CARDD), *args], capture_output=True, text=True, timeout=timeout)


def write_config(directory: Path, shoe: str, shuffler: str | None, *, roles: dict[str, str] | None = None,
                 api_group: str = "cardd-api", journal: dict[str, int | str] | None = None,
                 api: dict[str, int | float] | None = None, firmware_key: Path | None = None,
                 devices: dict[str, str] | None = None) -> Path:
    """A configuration file for the daemon under ``directory``; ``journal``, ``api``: more keys of
    those sections (the journal's ``path`` is ``directory/journal.sqlite3`` unless given);
    ``firmware_key``: ``[firmware] public_key``; ``devices``: more keys of ``[devices]``."""
    journal = {"path": str(directory / "journal.sqlite3"), **(journal or {})}
    lines = ["[devices]", f'shoe = "{shoe}"'] + ([f'shuffler = "{shuffler}"'] if shuffler else [])
    lines += [f"{key} = {json.dumps(value)}" for key, value in (devices or {}).items()]
    lines += ["", "[table]", f'rules = "{RULES}"', "", "[journal]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in journal.items()]
    lines += ["", "[api]", f'socket = "{directory / "cardd.sock"}"', f'group = "{api_group}"']
    lines += [f"{key} = {json.dumps(value)}" for key, value in (api or {}).items()]
    if roles:
        lines += ["", "[roles]"] + [f'{role} = "{group}"' for role, group in roles.items()]
    if firmware_key is not None:
        lines += ["", "[firmware]", f'public_key = "{firmware_key}"']
    path = directory / "cardd.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def enrol_at_install(journal_path: Path, shoe: SimulatedShoe) -> None:
    """The shoe's identity key enrolled for the role ``shoe`` before the daemon starts (by a
    technician at install), beside the journal at ``journal_path``."""
    EnrolmentStore(enrolment_path(journal_path)).enrol(
        "shoe", Enrolment(raw_public_key(shoe.identity_key.public_key()).hex(), shoe.MODEL, shoe.serial, "tech",
                          time.time_ns()))


def journaled_messages(journal: Journal, device: str) -> list[dict[str, Any]]:
    """Every DeviceMessage input of ``device`` the journal holds, in seq order: input records and
    the card reads carried by the events they caused (journal INPUT_KEY)."""
    found = []
    for record in journal.query(limit=None):
        data = input_of(record.kind, record.data)
        if data is not None and data.get("type") == "DeviceMessage" and data.get("device") == device:
            found.append(data)
    return found


def journaled_reads(journal: Journal) -> list[int]:
    """The index of every CardRead the journal holds as an input, in seq order."""
    indices = []
    for data in journaled_messages(journal, "shoe-reader"):
        message = decode(bytes.fromhex(data["message"]))
        if isinstance(message, CardRead):
            indices.append(message.index)
    return indices


def journaled_events(journal: Journal, device: str) -> list[tuple[int, Message]]:
    """Every numbered event (protocol 1.1) of ``device`` the journal holds as an input: (event
    index, message), in seq order."""
    return [(data["event_index"], decode(bytes.fromhex(data["message"])))
            for data in journaled_messages(journal, device) if data.get("event_index") is not None]


def remove(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)


# ---- steps of a table, driven through the API (shared by the daemon, crash and role tests) ----

def wait_devices(client: Client) -> dict[str, Any]:
    """The daemon opens its devices after it listens: wait until both are connected and usable."""
    return client.wait_state(lambda s: all(d["link"] == "up" and d["usable"] for d in s["devices"].values()))


def shuffle_and_load(client: Client, load: Callable[[], object], deal: Callable[[int], object]) -> dict[str, Any]:
    """Start a shuffle (technician), wait for the verified shoe, load it, deal the burn card."""
    wait_devices(client)
    client.ok("start_shuffle")
    client.wait_state(lambda s: s["shoe"]["state"] == "verified")
    load()
    state = client.wait_state(lambda s: s["shoe"]["state"] == "burning")
    for _ in range(state["shoe"]["burn_remaining"]):
        deal_one(client, deal)
    return client.wait_state(lambda s: s["shoe"]["state"] == "in_play")


def deal_one(client: Client, deal: Callable[[int], object]) -> dict[str, Any]:
    before = client.state()["shoe"]["cards_out"]
    deal(1)
    return client.wait_state(lambda s: s["shoe"]["cards_out"] == before + 1)


def play_out(client: Client, deal: Callable[[int], object], check: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Deal and decide until the round is over; ``check`` sees the STATE after every step."""
    for _ in range(60):
        state = client.state()
        check(state)
        r = state["round"]
        if r["state"] in ("complete", "void"):
            return state
        if r["next"] is not None:
            deal_one(client, deal)
        elif r["state"] == "insurance":
            client.ok("close_insurance")
        elif r["turn"] is not None:
            client.ok("act", box=r["turn"][1], action="stand")
    raise AssertionError(f"the round never finished: {state}")


def sim_deal(client: Client) -> Callable[[int], object]:
    return lambda n: client.ok("sim_deal", cards=n)


def open_and_bet(client: Client) -> None:
    client.ok("open_round")
    client.ok("place_bet", box=1, player="p1", amount=1000)
    client.ok("place_bet", box=3, player="p3", amount=2000)
    client.ok("no_more_bets")


@pytest.fixture
def directory() -> Iterator[Path]:
    """A fresh state folder for one daemon's journal and socket, removed after the test (the
    daemon and cli packages' conftest.py make it their fixture)."""
    path = state_dir()
    yield path
    remove(path)
