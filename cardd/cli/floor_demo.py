"""``make floor-demo``: the pit page on a floor of its own, ``python -m cardd.cli.floor_demo``.

It starts, each in one temporary folder: a private mosquitto (a password and an ACL for the
floor and for each table), a private PostgreSQL (initdb), cardfloor serving the pages, and four
simulated tables dealing at a real table's pace with faults (``cardbench floor``'s tables: a
journal each and cardd's own Exporter over it, cardd/bench/floor.py), in two pits; it makes a
demo user, prints the page's address and the log-in, and runs until Ctrl-C, which stops every
part (the tables first, as their daemons would) and removes the folder."""
from __future__ import annotations

import argparse
import ctypes
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cardd.bench.floor import FloorOptions, run
from core.ctrl_c import end_like_ctrl_c

SITE = "floor1"
#: the tables cardbench floor names with the prefix "bj-" (four digits)
TABLES = [f"bj-{n:04d}" for n in range(1, 5)]
PITS = {"Pit 1": TABLES[:2], "Pit 2": TABLES[2:]}
FLOOR_USER = "cardfloor"
DEMO_USER = "demo"
_PR_SET_PDEATHSIG = 1


class DemoError(Exception):
    """What stops the demo before it runs, in one line."""


def _die_with_parent() -> None:
    """In a child before exec: SIGKILL when the demo ends, however it ends."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _program(name: str, *folders: str) -> str:
    found = shutil.which(name, path=":".join([os.environ.get("PATH", ""), *folders]))
    if found is None:
        raise DemoError(f"no {name} on this machine (make sysdeps installs it)")
    return found


def _postgres_program(name: str) -> str:
    versions = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), key=lambda p: int(p.parts[4]))
    return str(versions[-1]) if versions else _program(name)


def _wait(check: Callable[[], bool], what: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if process.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise DemoError(f"{what} did not start:\n{tail}")
        time.sleep(0.1)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _secret_file(path: Path, text: str) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text + "\n")
    return path


class Demo:
    def __init__(self, folder: Path, http_port: int) -> None:
        self.folder, self.http_port = folder, http_port
        self.processes: list[subprocess.Popen[bytes]] = []

    def _start(self, command: list[str], log: Path, **extra: object) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       preexec_fn=_die_with_parent, **extra)  # type: ignore[call-overload]
        self.processes.append(process)
        return process

    def mosquitto(self) -> str:
        folder = self.folder / "mosquitto"
        (folder / "persistence").mkdir(parents=True)
        passwd, passwords = _program("mosquitto_passwd"), folder / "passwords"
        users = {FLOOR_USER: secrets.token_urlsafe(16)} | {f"{SITE}.{t}": secrets.token_urlsafe(16) for t in TABLES}
        for n, (user, password) in enumerate(users.items()):
            subprocess.run([passwd, *(["-c"] if n == 0 else []), "-b", str(passwords), user, password], check=True,
                           capture_output=True, timeout=30)
        _secret_file(self.folder / "floor.password", users[FLOOR_USER])
        (self.folder / "tables").mkdir()
        for table in TABLES:
            _secret_file(self.folder / "tables" / f"{table}.password", users[f"{SITE}.{table}"])
        acl = [f"user {FLOOR_USER}", "topic read cardd/v1/#", ""]
        acl += [line for t in TABLES for line in (f"user {SITE}.{t}", f"topic write cardd/v1/{SITE}/{t}/#", "")]
        (folder / "acl").write_text("\n".join(acl))
        port = _free_port()
        (folder / "mosquitto.conf").write_text("\n".join([
            f"user {pwd.getpwuid(os.geteuid()).pw_name}", "allow_anonymous false", f"password_file {passwords}",
            f"acl_file {folder / 'acl'}", "persistence true", f"persistence_location {folder / 'persistence'}/",
            f"log_dest file {folder / 'mosquitto.log'}", f"listener {port} 127.0.0.1", ""]))
        os.chmod(passwords, 0o600)
        os.chmod(folder / "acl", 0o600)
        process = self._start([_program("mosquitto", "/usr/sbin", "/sbin"), "-c", str(folder / "mosquitto.conf")],
                              folder / "mosquitto.out")
        _wait(lambda: _accepts(port), "mosquitto", process, folder / "mosquitto.out")
        return f"mqtt://127.0.0.1:{port}"

    def postgres(self) -> str:
        folder = self.folder / "postgres"
        folder.mkdir()
        owner: dict[str, object] = {}
        if os.geteuid() == 0:  # initdb refuses root: the cluster is the postgres user's
            entry = pwd.getpwnam("postgres")
            owner = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
            os.chown(folder, entry.pw_uid, entry.pw_gid)
        log = folder / "postgres.out"
        done = subprocess.run([_postgres_program("initdb"), "-D", str(folder / "data"), "-U", "postgres",
                               "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-instructions"],
                              capture_output=True, timeout=120, **owner)  # type: ignore[call-overload]
        if done.returncode != 0:
            raise DemoError(f"initdb failed: {done.stderr.decode(errors='replace').strip()}")
        port = _free_port()
        process = self._start([_postgres_program("postgres"), "-D", str(folder / "data"), "-p", str(port),
                               "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={folder}"],
                              log, **owner)
        _wait(lambda: _accepts(port), "PostgreSQL", process, log)
        time.sleep(0.5)  # the port opens a moment before the first connection is taken
        return f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def cardfloor(self, broker: str, dsn: str, time_zone: str) -> tuple[str, str]:
        config = self.folder / "cardfloor.toml"
        pits = "".join(f'[[pit]]\nname = "{name}"\ntables = [{", ".join(repr(f"{SITE}/{t}") for t in tables)}]\n'
                       for name, tables in PITS.items()).replace("'", '"')
        config.write_text(
            f'[broker]\nurls = ["{broker}"]\nusername = "{FLOOR_USER}"\npassword_file = "{self.folder / "floor.password"}"\n'
            f'[archive]\ndsn = "{dsn}"\n'
            f'[http]\nlisten = "127.0.0.1:{self.http_port}"\nusers_file = "{self.folder / "users"}"\n'
            f'secret_file = "{self.folder / "secret"}"\n'
            f'[floor]\ntime_zone = "{time_zone}"\ntarget_rounds_per_hour = 60\n'
            f'[alarms]\noffline_s = 20.0\ntable_alarm_min = 0.5\nbacklog_min = 2.0\n{pits}')
        cardfloor = str(Path(sys.executable).with_name("cardfloor"))
        password = secrets.token_urlsafe(9)
        done = subprocess.run([cardfloor, "user", "--config", str(config), "add", DEMO_USER, "--role", "admin",
                               "--password-stdin"], input=password + "\n", capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise DemoError(f"cardfloor user add failed: {(done.stderr or done.stdout).strip()}")
        log = self.folder / "cardfloor.log"
        process = self._start([cardfloor, "--config", str(config)], log)
        _wait(lambda: _accepts(self.http_port), "cardfloor", process, log)
        return f"http://127.0.0.1:{self.http_port}/", password

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="floor-demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8480, help="the page's port on 127.0.0.1 (default 8480)")
    parser.add_argument("--time-zone", default=os.environ.get("TZ") or "UTC", help="the floor's time zone (IANA)")
    parser.add_argument("--fault-rate", type=float, default=0.25, help="the share of rounds with a fault (0.25)")
    args = parser.parse_args(argv)
    if _accepts(args.port):
        print(f"floor-demo: port {args.port} is taken: --port another (make floor-demo DEMO_ARGS='--port 8481')",
              file=sys.stderr)
        return 2
    end_like_ctrl_c()  # SIGTERM and SIGHUP too: every part stopped, the folder removed
    folder = Path(tempfile.mkdtemp(prefix="cardfloor-demo-"))
    demo = Demo(folder, args.port)
    try:
        say = lambda line: print(line, flush=True)  # noqa: E731
        broker = demo.mosquitto()
        dsn = demo.postgres()
        url, password = demo.cardfloor(broker, dsn, args.time_zone)
        say(f"the floor: {url}  log in as {DEMO_USER} / {password}  (Ctrl-C stops it all)")
        say(f"mosquitto {broker}, PostgreSQL {dsn}, everything in {folder}")
        _tables(broker, folder, args.fault_rate, say)
    except DemoError as exc:
        print(f"floor-demo: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("floor-demo: stopped", flush=True)
    finally:
        demo.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


def _tables(broker: str, folder: Path, fault_rate: float, say: Callable[[str], None]) -> None:
    """The four tables dealing until Ctrl-C (cardbench floor's tables; their names are TABLES)."""
    options = FloorOptions(tables=len(TABLES), brokers=[broker], site=SITE, username="{site}.{table}",
                           password_file=str(folder / "tables" / "{table}.password"), fault_rate=fault_rate,
                           journals=folder / "journals", every_s=60.0, prefix="bj-", timeout_s=5.0)
    run(options, say)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
