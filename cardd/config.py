"""The daemon's configuration: one TOML file, declared once here as a typed schema.

``/etc/cardd/cardd.toml`` (or ``cardd --config PATH``); packaging/cardd.toml is a complete,
commented example that a test loads with this schema. Every section but ``[devices]`` and
``[table]`` may be left out::

    [devices]
    shoe = "usb://1209:c4d0?serial=SHOE0001"
    shuffler = "serial:///dev/cardd/shuffler-A1?baud=115200"   # optional: hand-shuffled table

    [table]
    rules = "/etc/cardd/rules.toml"

:func:`load_config` returns a frozen :class:`CarddConfig` or raises one :class:`ConfigError`
whose text is a single line naming the file, the key (``journal.retention_days``) and what is
allowed. :func:`simulated` is the built-in configuration of ``cardd --simulate`` (no file);
:func:`rules_file` finds a house-rules file by name (``casino-001``: ``cardd/rules/casino-001.toml``, the package's data) or
path, for ``cardd --simulate --rules`` and a bench scenario's ``rules =`` alike.
"""
from __future__ import annotations

import os
import re
import socket
import tempfile
import tomllib
from pathlib import Path
from typing import Annotated, Any, Callable, Literal
from urllib.parse import urlsplit

import msgspec
import msgspec.inspect as schema

from cardd.api.paths import DEFAULT_SOCKET
from cardd.package_data import package_folder
from core.errors import CarddError
from core.parse_errors import toml_problem
from core.schema_errors import ProblemKind, SchemaProblem, schema_problem, toml_shown, value_at
from drivers.errors import BadURL
from drivers.factory import make_transport
from drivers.reconnect import Backoff
from drivers.urls import parse_url

DEFAULT_PATH = Path("/etc/cardd/cardd.toml")
#: the seed casinos' house rules, by name (cardd/rules/casino-000.toml ...): the package's data
RULES_DIR = package_folder("cardd", "rules")
#: the rules ``cardd --simulate`` plays under unless ``--rules`` names others (``make demo``'s)
SIMULATED_RULES = RULES_DIR / "casino-000.toml"
LogFormat = Literal["auto", "console", "json"]
LogLevel = Literal["debug", "info", "warning", "error"]
#: the journal keeps at least what regulators ask for (GLI-11 / AGCO: 90 days)
MIN_RETENTION_DAYS = 90
#: sockaddr_un.sun_path holds 108 bytes, the terminating NUL included
MAX_SOCKET_PATH = 107
#: the group udev gives the card devices (udev/*.rules): never the API's
DEVICE_GROUP = "cardd"
_GROUP_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")  # what Debian's groupadd accepts by default
_MODE = re.compile(r"^0?[0-7]{3}$")


class ConfigError(CarddError):
    """The configuration cannot be used. One line: ``FILE: KEY = VALUE: what is allowed``."""

    def __init__(self, source: str, message: str, key: str | None = None) -> None:
        super().__init__(f"{source}: {key}: {message}" if key else f"{source}: {message}")
        self.source, self.key = source, key


class _Section(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """A TOML table: unknown keys are errors (a typo must not silently fall back to a default).
    Subclasses repeat ``frozen=True``: mypy does not inherit it through dataclass_transform."""


class DevicesConfig(_Section, frozen=True):
    #: the card-reading shoe's device URL (see drivers/urls.py for the forms)
    shoe: str
    #: the shuffler's URL; left out at a hand-shuffled table
    shuffler: str | None = None
    #: seconds a device's port must stay open for its reopen schedule (0.1 s doubling to 5 s) to
    #: start over; a port that dropped sooner is taken for a flapping device and the next reopen
    #: waits one step longer (drivers/reconnect.py); so does a handshake asked for again sooner after
    #: the last (firmware_bridge/connection.py: DEVICE_FLAPPING)
    reconnect_stable_s: Annotated[float, msgspec.Meta(ge=0.0, le=3600.0)] = Backoff().stable
    #: the protocol each device speaks (docs/protocol.md): "2.0" proves the device's identity key
    #: against the one enrolled (``cardctl device enroll``); "1.1" is accepted unauthenticated, with
    #: a standing warning in STATE. 1.1 stays the default until every device is enrolled
    shoe_protocol: Literal["1.1", "2.0"] = "1.1"
    shuffler_protocol: Literal["1.1", "2.0"] = "1.1"


class TableConfig(_Section, frozen=True):
    #: the house rules file (cardd/rules/*.toml are examples)
    rules: Path


class JournalConfig(_Section, frozen=True):
    path: Path = Path("/var/lib/cardd/journal.sqlite3")
    #: records older than this are pruned, and only once exported; never fewer than 90 days
    retention_days: Annotated[int, msgspec.Meta(ge=MIN_RETENTION_DAYS, le=36525)] = MIN_RETENTION_DAYS
    #: where the daemon writes exports (`cardctl log --export`); inside the journal's directory,
    #: the only place the service may write. Left out: ``exports`` beside the journal
    export_dir: Path | None = None
    #: seconds between the daemon's prunes (it prunes at start too)
    prune_every_s: Annotated[int, msgspec.Meta(ge=1, le=86_400)] = 3600

    @property
    def exports(self) -> Path:
        """The export directory: ``export_dir``, or ``exports`` beside the journal file."""
        return self.export_dir if self.export_dir is not None else self.path.parent / "exports"


class ApiConfig(_Section, frozen=True):
    socket: Path = DEFAULT_SOCKET
    #: the socket file's permissions, octal digits; never any for others
    mode: str = "0660"
    #: the socket file's group: API clients join it (and one role group). Not the udev device
    #: group "cardd": being allowed at the devices must not let anyone talk to the daemon
    group: str = "cardd-api"
    #: requests per second one connection may send, sustained; one more gets ERROR flood and is closed
    rate: Annotated[float, msgspec.Meta(ge=1.0, le=10_000.0)] = 50.0
    #: requests one connection may send at once before the rate applies
    burst: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 200
    #: refused commands one user (uid, all its connections) may have journaled one by one in a
    #: minute; the rest of that minute its commands get ERROR too-many-refused, journaled as one count
    refused_per_minute: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 120

    @property
    def mode_bits(self) -> int:
        return int(self.mode, 8)


class FirmwareConfig(_Section, frozen=True):
    #: Ed25519 public key (PEM or 32 raw bytes) that firmware images must be signed with;
    #: without one, firmware updates are refused
    public_key: Path | None = None


class RolesConfig(_Section, frozen=True):
    """The Unix groups whose members may act in each role (read from the API peer's credentials)."""

    dealer: str = "cardd-dealer"
    supervisor: str = "cardd-supervisor"
    technician: str = "cardd-tech"


class LogConfig(_Section, frozen=True):
    #: auto: human-readable on a terminal, JSON lines otherwise (under systemd); --log-format wins
    format: LogFormat = "auto"
    level: LogLevel = "info"


class NotifyConfig(_Section, frozen=True):
    #: run for each table alarm raised and cleared, the facts in CARDD_* environment variables
    #: (docs/install.md, "Alarms to a pager"); an absolute path to an executable file, no shell
    command: Path | None = None
    #: CARDD_TABLE: which table the page is about; left out, this computer's host name
    table: Annotated[str, msgspec.Meta(max_length=64)] = ""
    #: seconds a run may take before it is killed (with all it started)
    timeout_s: Annotated[float, msgspec.Meta(ge=0.1, le=600.0)] = 10.0
    #: runs that may start in any minute; the alarms beyond are counted, and said in the next run
    max_per_minute: Annotated[int, msgspec.Meta(ge=1, le=600)] = 10

    @property
    def table_name(self) -> str:
        return self.table or socket.gethostname()


#: a site's or a table's id in the floor's topics (cardd/v1/<site>/<table>/...): no MQTT wildcard
#: (+ #), separator (/) or space, so a topic names exactly one table (docs/floor.md)
_TOPIC_ID = r"^[A-Za-z0-9_-]{1,64}$"
CardData = Literal["none", "after_round"]
MqttVersion = Literal["5", "3.1.1"]


class ExportConfig(_Section, frozen=True):
    """``[export]``: the journal published to an MQTT broker cluster, one way (docs/floor.md).
    Absent, nothing leaves the table."""
    #: mqtt://HOST[:PORT] or mqtts://HOST[:PORT], tried in order: the next on failure (a cluster's nodes)
    brokers: Annotated[list[str], msgspec.Meta(min_length=1, max_length=16)]
    site: Annotated[str, msgspec.Meta(pattern=_TOPIC_ID)]
    table: Annotated[str, msgspec.Meta(pattern=_TOPIC_ID)]
    #: "5", or "3.1.1" for a broker that speaks only that (NATS)
    mqtt_version: MqttVersion = "5"
    username: Annotated[str, msgspec.Meta(max_length=256)] | None = None
    #: the password, in a file only cardd may read (mode 0600 or 0400)
    password_file: Path | None = None
    #: the CA that signed the brokers' certificates (mqtts://); left out, the system's
    ca_file: Path | None = None
    #: a TLS client certificate and its key, instead of (or beside) a password
    cert_file: Path | None = None
    key_file: Path | None = None
    #: "none": no card identity, hand or shoe composition is sent; "after_round": a round's cards once
    #: it is settled (only where the jurisdiction allows it, on a private network)
    card_data: CardData = "none"
    #: a backlog whose oldest record is older than this is an alarm, cleared when it drains
    backlog_alarm_s: Annotated[float, msgspec.Meta(ge=10.0, le=7 * 86_400.0)] = 300.0
    #: the chain head is published at least this often while records flow (and at every shoe's end)
    anchor_every_s: Annotated[float, msgspec.Meta(ge=1.0, le=3600.0)] = 60.0
    #: seconds without an answer from a broker before it is given up for the next
    timeout_s: Annotated[float, msgspec.Meta(ge=1.0, le=120.0)] = 10.0


class CarddConfig(_Section, frozen=True):
    devices: DevicesConfig
    table: TableConfig
    journal: JournalConfig = msgspec.field(default_factory=JournalConfig)
    api: ApiConfig = msgspec.field(default_factory=ApiConfig)
    firmware: FirmwareConfig = msgspec.field(default_factory=FirmwareConfig)
    roles: RolesConfig = msgspec.field(default_factory=RolesConfig)
    log: LogConfig = msgspec.field(default_factory=LogConfig)
    notify: NotifyConfig = msgspec.field(default_factory=NotifyConfig)
    export: ExportConfig | None = None


def load_config(path: str | os.PathLike[str] = DEFAULT_PATH) -> CarddConfig:
    """Read and validate the configuration file; :class:`ConfigError` (one line) if it cannot be used."""
    text = _read_text(path, "no such file (copy packaging/cardd.toml there, or pass --config PATH)")
    return parse_config(text, str(path))


def _read_text(path: str | os.PathLike[str], missing: str) -> str:
    """A configuration file's text; :class:`ConfigError` (one line, ``missing`` when there is none)."""
    source = str(path)
    try:
        return Path(path).read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(source, missing) from None
    except PermissionError:
        raise ConfigError(source, f"permission denied: the user running cardd (uid {os.getuid()}) cannot read it "
                          "(install it root:cardd, mode 0640)") from None
    except IsADirectoryError:
        raise ConfigError(source, "is a directory, not a configuration file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(source, f"not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(source, f"cannot read it: {exc.strerror or type(exc).__name__}") from None


def parse_config(text: str, source: str = "<config>") -> CarddConfig:
    """Validate TOML text; ``source`` names it in errors."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, toml_problem(exc, text).sentence("TOML")) from None
    try:
        config = msgspec.convert(raw, CarddConfig, dec_hook=_decode_path)
    except msgspec.ValidationError as exc:
        key, message = _explain(schema_problem(exc, toml=True), raw)
        raise ConfigError(source, message, key) from None
    _check(config, raw, source)
    return config


class _ExportFile(_Section, frozen=True):
    export: ExportConfig


def load_export_section(path: str | os.PathLike[str]) -> ExportConfig:
    """``cardd --simulate --export FILE``: a TOML file holding only an ``[export]`` section, checked
    as a configuration's is; :class:`ConfigError` (one line) if it cannot be used."""
    source = str(path)
    text = _read_text(path, "no such file (an [export] section for cardd --simulate --export)")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, toml_problem(exc, text).sentence("TOML")) from None
    try:
        export = msgspec.convert(raw, _ExportFile, dec_hook=_decode_path).export
    except msgspec.ValidationError as exc:
        key, message = _explain(schema_problem(exc, toml=True), raw)
        raise ConfigError(source, message, key) from None

    def fail(key: str, what: str) -> ConfigError:
        return ConfigError(source, f"{toml_shown(value_at(raw, key.split('.')))}: {what}", key)

    for name in ("password_file", "ca_file", "cert_file", "key_file"):
        value = getattr(export, name)
        if value is not None and not value.is_absolute():
            raise fail(f"export.{name}", "expected an absolute path")
    _check_export(export, fail)
    return export


def rules_file(name: str, relative_to: Path) -> Path:
    """The house-rules file ``name`` means: ``cardd/rules/<name>.toml`` when there is one, or when
    ``name`` does not look like a path (no ``/``, no ``.toml``: a misspelt name is reported as a seed
    casino's);
    otherwise the path ``name``, relative to ``relative_to``. Not checked for existence here."""
    named = RULES_DIR / f"{name}.toml"
    if named.exists() or not ("/" in name or name.endswith(".toml")):
        return named
    return relative_to / name  # "rules.toml" beside a scenario (or in the current directory) is a path too


def named_rules(name: str) -> Path:
    """A ``--rules NAME|PATH`` (cardd --simulate, cardbench simulate): the seed casino's file or the
    path (relative to the current directory, :func:`rules_file`), absolute; ConfigError naming the
    option and the seed casinos when there is no such file."""
    path = rules_file(name, Path.cwd()).absolute()
    if not path.is_file():
        raise ConfigError(f"--rules {name}", f"no such rules file {path}: expected a seed casino's name "
                          f"({', '.join(rule_names())}) or the path of a house-rules file")
    return path


def rule_names() -> list[str]:
    """The seed casinos' rules by name (casino-000 ...), for an error that says what exists."""
    return sorted(path.stem for path in RULES_DIR.glob("*.toml"))


def simulated(directory: str | os.PathLike[str] | None = None, rules: Path = SIMULATED_RULES) -> CarddConfig:
    """``cardd --simulate``: simulated devices on ptys, the journal and socket under ``directory``
    (a fresh private temporary directory when None), house rules ``rules`` (``--rules``; by default
    the repository's first casino's)."""
    base = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="cardd-sim-"))
    return CarddConfig(
        devices=DevicesConfig(shoe="sim://shoe", shuffler="sim://shuffler"),
        table=TableConfig(rules=rules),
        journal=JournalConfig(path=base / "journal.sqlite3"),
        api=ApiConfig(socket=base / "cardd.sock"),
    )


def _check_export(export: ExportConfig, fail: Callable[[str, str], ConfigError]) -> None:
    for index, url in enumerate(export.brokers):
        problem = broker_url_problem(url)
        if problem is not None:
            raise fail(f"export.brokers.{index}", problem)
    if export.password_file is not None and export.username is None:
        raise fail("export.password_file", "goes with export.username (the broker's user for this table)")
    if export.password_file is not None:
        try:
            mode = export.password_file.stat().st_mode
        except OSError as exc:
            raise fail("export.password_file", "no such file" if isinstance(exc, FileNotFoundError)
                       else f"cannot be read: {exc.strerror}") from None
        if mode & 0o077:
            raise fail("export.password_file", f"others may read it (mode {mode & 0o777:04o}): only cardd may "
                       "(chown cardd, chmod 0600)")
    if export.cert_file is not None and export.key_file is None:
        raise fail("export.cert_file", "needs export.key_file, the client certificate's key")
    if export.key_file is not None and export.cert_file is None:
        raise fail("export.key_file", "needs export.cert_file, the client certificate it is the key of")
    tls = any(url.startswith("mqtts://") for url in export.brokers)
    for key in ("ca_file", "cert_file"):
        if getattr(export, key) is not None and not tls:
            raise fail(f"export.{key}", "needs an mqtts:// broker (TLS)")


def broker_url_problem(url: str) -> str | None:
    """Why ``url`` is not an MQTT broker's address cardd can use, or None."""
    try:
        found = urlsplit(url)
        port = found.port
    except ValueError as exc:
        return f"not a broker URL ({exc})"
    if found.scheme not in ("mqtt", "mqtts"):
        return "expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT]"
    if not found.hostname:
        return "expected a host name, like mqtt://broker.floor:1883"
    if found.path not in ("", "/") or found.query or found.fragment or found.username or found.password:
        return ("expected only mqtt[s]://HOST[:PORT]: the user is export.username, the password "
                "export.password_file")
    del port
    return None


def _decode_path(kind: type, value: Any) -> Any:
    if kind is Path and isinstance(value, str):
        return Path(value)
    raise TypeError("expected a path (a string)")


# ---- one line out of a msgspec.ValidationError ----------------------------------------------------

def _explain(problem: SchemaProblem, raw: dict[str, Any]) -> tuple[str | None, str]:
    """(dotted key, what is wrong and what is allowed), from the schema itself wherever the
    problem's path can be read (core.schema_errors); the problem's own sentence otherwise."""
    where = [step for step in problem.path or () if isinstance(step, str)]
    kind = _type_at(where) if problem.path is not None and len(where) == len(problem.path) else None
    if kind is None or problem.in_key:  # no key of a configuration is anything but a name
        return None, problem.sentence()
    if problem.kind is ProblemKind.UNKNOWN_FIELD and problem.field is not None:
        allowed = ", ".join(_fields(kind))
        return ".".join([*where, _key(problem.field)]), f"unknown key (allowed{_in_section(where)}: {allowed})"
    if problem.kind is ProblemKind.MISSING_FIELD and problem.field is not None:
        key = [*where, problem.field]
        missing = _type_at(key)
        return ".".join(key), f"missing; expected {_describe(missing)}" if missing else "missing"
    value = value_at(raw, where)
    return ".".join(where) or None, f"{toml_shown(value)} is not allowed; expected {_describe(kind)}"


def _key(name: str) -> str:
    """A key as TOML writes it: bare, or quoted and escaped (a quoted key may hold a newline)."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else toml_shown(name)


def _type_at(key: list[str]) -> schema.Type | None:
    """The schema's type of a dotted key; None when the schema has no such key."""
    kind: schema.Type = schema.type_info(CarddConfig)
    for name in key:
        if isinstance(kind, schema.UnionType):  # an optional section or value: the type beside None
            kind = next((t for t in kind.types if not isinstance(t, schema.NoneType)), kind)
        if not isinstance(kind, schema.StructType):
            return None
        found = next((field.type for field in kind.fields if field.name == name), None)
        if found is None:
            return None
        kind = found
    if isinstance(kind, schema.UnionType) and any(isinstance(t, schema.StructType) for t in kind.types):
        kind = next(t for t in kind.types if isinstance(t, schema.StructType))  # an optional section
    return kind


def _fields(kind: schema.Type) -> list[str]:
    assert isinstance(kind, schema.StructType)
    return sorted(field.name for field in kind.fields)


def _in_section(key: list[str]) -> str:
    return f" in [{'.'.join(key)}]" if key else ""


def _describe(kind: schema.Type) -> str:
    if isinstance(kind, schema.UnionType):  # TOML has no null: an optional key is left out instead
        return " or ".join(_describe(t) for t in kind.types if not isinstance(t, schema.NoneType))
    if isinstance(kind, schema.StructType):
        return f"a table with the keys {', '.join(_fields(kind))}"
    if isinstance(kind, schema.LiteralType):
        return f"one of {', '.join(toml_shown(v) for v in kind.values)}"
    if isinstance(kind, schema.IntType):
        if kind.ge is not None and kind.le is not None:
            return f"a whole number from {kind.ge} to {kind.le}"
        return "a whole number"
    if isinstance(kind, schema.FloatType) and kind.ge is not None and kind.le is not None:
        return f"a number from {kind.ge:g} to {kind.le:g}"
    if isinstance(kind, schema.CustomType) and kind.cls is Path:
        return "an absolute path (a string)"
    if isinstance(kind, schema.StrType) and kind.pattern == _TOPIC_ID:
        return "1 to 64 letters, digits, _ or - (a topic level: no /, + or #)"
    if isinstance(kind, schema.StrType):
        return "a string"
    if isinstance(kind, schema.ListType):
        item = _describe(kind.item_type)
        items = f"{item[2:]}s" if item.startswith("a ") and " " not in item[2:] else f"items, each {item}"
        if kind.min_length is not None and kind.max_length is not None:
            return f"a list of {kind.min_length} to {kind.max_length} {items}"
        return f"a list of {items}"
    return type(kind).__name__.removesuffix("Type").lower()




# ---- what the schema's types cannot say ------------------------------------------------------------

def _device_of(url: str) -> tuple[object, ...]:
    """What a device URL opens, whatever its options: a serial port by its real path (a udev link
    and its tty are one port), a USB device by VID, PID and serial number."""
    parsed = parse_url(url)
    if parsed.scheme == "serial" and parsed.path is not None:
        return ("serial", os.path.realpath(parsed.path))
    return (parsed.scheme, parsed.path, parsed.vid, parsed.pid, parsed.serial_number, parsed.name)


def _usb_without_serial_of(first: str, second: str) -> str | None:
    """Of two USB URLs with one VID:PID, the one without ``?serial=`` (the first if neither has it is
    left to the equality check); None when they cannot open the same device."""
    a, b = parse_url(first), parse_url(second)
    if a.scheme != "usb" or b.scheme != "usb" or (a.vid, a.pid) != (b.vid, b.pid):
        return None
    if a.serial_number is None:
        return first
    return second if b.serial_number is None else None


def _check(config: CarddConfig, raw: dict[str, Any], source: str) -> None:
    def fail(key: str, what: str) -> ConfigError:
        return ConfigError(source, f"{toml_shown(value_at(raw, key.split('.')))}: {what}", key)

    for key, url in (("devices.shoe", config.devices.shoe), ("devices.shuffler", config.devices.shuffler)):
        if url is not None:
            if url.startswith("sim:"):  # registers sim://, loaded only for it: a table's daemon never needs them
                import simulators  # noqa: F401
            try:
                make_transport(url)  # parses the URL and checks its scheme's options; opens nothing
            except BadURL as exc:
                raise fail(key, str(exc).removeprefix(f"{exc.device}: ")) from None
    shoe, shuffler = config.devices.shoe, config.devices.shuffler
    if shuffler is not None and _device_of(shuffler) == _device_of(shoe):
        # the second role's port would be refused as "busy" (cardd's own lock) at every retry
        raise fail("devices.shuffler", f"the same device as devices.shoe (\"{shoe}\"): the shuffler "
                   "and the shoe each need their own")
    if shuffler is not None:
        unnamed = _usb_without_serial_of(shoe, shuffler)
        if unnamed is not None:  # it opens the first device with its VID:PID, which may be the other role's
            key, other_key, other = (("devices.shoe", "devices.shuffler", shuffler) if unnamed == shoe else
                                     ("devices.shuffler", "devices.shoe", shoe))
            found = parse_url(unnamed)
            raise fail(key, f"possibly the same device as {other_key} (\"{other}\"): without ?serial= it opens the "
                       f"first USB device {found.vid:04x}:{found.pid:04x}, which may be that one: give each its "
                       "serial number (cardctl devices lists them)")
    paths = {"table.rules": config.table.rules, "journal.path": config.journal.path,
             "journal.export_dir": config.journal.export_dir, "api.socket": config.api.socket,
             "firmware.public_key": config.firmware.public_key, "notify.command": config.notify.command}
    if config.export is not None:
        paths |= {f"export.{name}": getattr(config.export, name)
                  for name in ("password_file", "ca_file", "cert_file", "key_file")}
    for key, path in paths.items():
        if path is not None and not path.is_absolute():
            raise fail(key, "expected an absolute path")
    command = config.notify.command
    if command is not None and not (command.is_file() and os.access(command, os.X_OK)):
        raise fail("notify.command", "expected an executable file (no shell: a script needs its #! line and "
                   "chmod +x)" if command.exists() else "no such file")
    if config.export is not None:
        _check_export(config.export, fail)
    journal_dir = config.journal.path.parent
    exports = config.journal.exports
    if exports == journal_dir or not exports.is_relative_to(journal_dir) or ".." in exports.parts:
        suggestion = journal_dir / "exports"
        raise fail("journal.export_dir", f"expected a directory inside the journal's directory {journal_dir} "
                   f"(the only place the service may write), like \"{suggestion}\"")
    if len(os.fsencode(config.api.socket)) > MAX_SOCKET_PATH:
        raise fail("api.socket", f"too long for a Unix socket (at most {MAX_SOCKET_PATH} bytes)")
    if not _MODE.match(config.api.mode) or int(config.api.mode, 8) & 0o007:
        raise fail("api.mode", 'expected octal permissions without any for others, like "0660" or "0600"')
    if not _GROUP_NAME.match(config.api.group):
        raise fail("api.group", "expected a Unix group name (lower-case letters, digits, _ and -)")
    if config.api.group == DEVICE_GROUP:
        raise fail("api.group", f"{DEVICE_GROUP!r} is the devices' group (udev): the API needs its own, like \"cardd-api\"")
    roles: dict[str, str] = {}  # group -> the role it was given to first
    for role, group in msgspec.structs.asdict(config.roles).items():
        if not _GROUP_NAME.match(group):
            raise fail(f"roles.{role}", "expected a Unix group name (lower-case letters, digits, _ and -)")
        if group in roles:
            raise fail(f"roles.{role}", f"already the {roles[group]} group; each role needs its own "
                       "(an override must come from a supervisor)")
        roles[group] = role
