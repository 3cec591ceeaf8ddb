"""cardfloor's configuration: one TOML file, declared once here as a typed schema.

``/etc/cardfloor/cardfloor.toml`` (or ``cardfloor --config PATH``); packaging/cardfloor.toml shows
every key. Only ``[broker] urls`` and ``[archive] dsn`` are required::

    [broker]
    urls = ["mqtts://mqtt-1.floor:8883", "mqtts://mqtt-2.floor:8883"]

    [archive]
    dsn = "postgresql:///cardfloor?host=/run/postgresql"

:func:`load_config` returns a frozen :class:`FloorConfig` or raises one :class:`FloorConfigError`
whose text is a single line naming the file, the key (``alarms.offline_s``) and what is allowed.
The table's own configuration is cardd's; this one shares nothing with it but core's helpers
(core.schema_errors, core.parse_errors), which say a mistake in the project's words.
"""
from __future__ import annotations

import os
import re
import tomllib
import zoneinfo
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import msgspec
import msgspec.inspect as schema

from core.errors import CarddError
from core.parse_errors import toml_problem
from core.schema_errors import ProblemKind, SchemaProblem, schema_problem, toml_shown, value_at

DEFAULT_PATH = Path("/etc/cardfloor/cardfloor.toml")
#: the archive keeps at least what regulators ask a table's journal to keep (GLI-11 / AGCO: 90 days)
MIN_RETENTION_DAYS = 90
MqttVersion = Literal["5", "3.1.1"]
LogFormat = Literal["auto", "console", "json"]
LogLevel = Literal["debug", "info", "warning", "error"]
#: a client id any MQTT broker takes and no one mistakes for a table's (cardd-<site>-<table>)
_CLIENT_ID = r"^[A-Za-z0-9_-]{1,64}$"
_LISTEN = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(?P<port>\d{1,5})$")


class FloorConfigError(CarddError):
    """The configuration cannot be used. One line: ``FILE: KEY: VALUE: what is allowed``."""

    def __init__(self, source: str, message: str, key: str | None = None) -> None:
        super().__init__(f"{source}: {key}: {message}" if key else f"{source}: {message}")
        self.source, self.key = source, key


class _Section(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """A TOML table: unknown keys are errors (a typo must not silently fall back to a default)."""


class BrokerConfig(_Section, frozen=True):
    #: mqtt://HOST[:PORT] or mqtts://HOST[:PORT], tried in order: the next on failure (a cluster's nodes)
    urls: Annotated[list[str], msgspec.Meta(min_length=1, max_length=16)]
    username: Annotated[str, msgspec.Meta(max_length=256)] | None = None
    #: the password, in a file only cardfloor may read (mode 0600 or 0400)
    password_file: Path | None = None
    #: the CA that signed the brokers' certificates (mqtts://); left out, the system's
    ca_file: Path | None = None
    #: the persistent session's name at the broker: what was published while cardfloor was away
    #: waits under it, so it must stay the same from one start to the next
    client_id: Annotated[str, msgspec.Meta(pattern=_CLIENT_ID)] = "cardfloor"
    #: "5", or "3.1.1" for a broker that speaks only that (NATS)
    mqtt_version: MqttVersion = "5"


class ArchiveConfig(_Section, frozen=True):
    #: the PostgreSQL connection string (libpq's), e.g. "postgresql:///cardfloor?host=/run/postgresql"
    dsn: Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]
    #: days of records kept; never fewer than 90
    retention_days: Annotated[int, msgspec.Meta(ge=MIN_RETENTION_DAYS, le=36525)] = 400


class AlarmsConfig(_Section, frozen=True):
    #: seconds a table's status may say offline before it is a floor alarm
    offline_s: Annotated[float, msgspec.Meta(ge=1.0, le=7 * 86_400.0)] = 60.0
    #: minutes a table's own alarm may stay open before it is a floor alarm
    table_alarm_min: Annotated[float, msgspec.Meta(ge=0.1, le=10_080.0)] = 10.0
    #: minutes a table's oldest undelivered record may wait before it is a floor alarm
    backlog_min: Annotated[float, msgspec.Meta(ge=0.1, le=10_080.0)] = 10.0
    #: seconds a table's clock may differ from the floor's before it is a floor alarm
    clock_offset_s: Annotated[float, msgspec.Meta(ge=0.1, le=86_400.0)] = 5.0
    #: seconds a gap in a table's records may stay unfilled once its state says its backlog is empty
    gap_s: Annotated[float, msgspec.Meta(ge=1.0, le=86_400.0)] = 60.0


class HttpConfig(_Section, frozen=True):
    #: HOST:PORT the HTTP API listens on ([::1]:8480 for IPv6)
    listen: str = "127.0.0.1:8480"
    #: lines "TOKEN ROLE NAME", mode 0600; left out, the HTTP API is not served
    tokens_file: Path | None = None
    #: the users of the pit page, managed by ``cardfloor user``, mode 0600; left out, no log-in, no pages
    users_file: Path | None = None
    #: hours a log-in lasts
    session_hours: Annotated[float, msgspec.Meta(ge=0.01, le=720.0)] = 12.0
    #: the key the session cookies are signed with, made (0600, 32 random bytes) at the first start
    #: when missing; left out, the users file's path with ``.secret`` added
    secret_file: Path | None = None

    @property
    def session_secret_file(self) -> Path | None:
        """Where the cookie signing key is: ``secret_file``, or beside the users file."""
        if self.secret_file is not None or self.users_file is None:
            return self.secret_file
        return self.users_file.with_name(self.users_file.name + ".secret")

    @property
    def host(self) -> str:
        found = _LISTEN.match(self.listen)
        assert found is not None, "checked at load"
        return found["host"].strip("[]")

    @property
    def port(self) -> int:
        found = _LISTEN.match(self.listen)
        assert found is not None, "checked at load"
        return int(found["port"])


class FloorSection(_Section, frozen=True):
    #: the floor's time zone (IANA), for the reports' hours and days
    time_zone: str = "UTC"
    #: rounds an hour a table is expected to deal (its pace on the pit page)
    target_rounds_per_hour: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 60


class PitConfig(_Section, frozen=True):
    """A pit: its name and its tables (site/table); a pit user sees only its pits' tables."""
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    tables: Annotated[list[str], msgspec.Meta(max_length=1000)] = msgspec.field(default_factory=list)


class LogConfig(_Section, frozen=True):
    #: auto: human-readable on a terminal, JSON lines otherwise (under systemd)
    format: LogFormat = "auto"
    level: LogLevel = "info"


class FloorConfig(_Section, frozen=True):
    broker: BrokerConfig
    archive: ArchiveConfig
    alarms: AlarmsConfig = msgspec.field(default_factory=AlarmsConfig)
    http: HttpConfig = msgspec.field(default_factory=HttpConfig)
    floor: FloorSection = msgspec.field(default_factory=FloorSection)
    log: LogConfig = msgspec.field(default_factory=LogConfig)
    pit: Annotated[list[PitConfig], msgspec.Meta(max_length=1000)] = msgspec.field(default_factory=list)

    def pit_of(self) -> dict[tuple[str, str], str]:
        """Each table in a pit, and its pit's name."""
        return {(t.partition("/")[0], t.partition("/")[2]): pit.name for pit in self.pit for t in pit.tables}


def load_config(path: str | os.PathLike[str] = DEFAULT_PATH) -> FloorConfig:
    """Read and validate the configuration file; :class:`FloorConfigError` (one line) if it cannot be used."""
    source = str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise FloorConfigError(source, "no such file (copy packaging/cardfloor.toml there, or pass --config "
                               "PATH)") from None
    except PermissionError:
        raise FloorConfigError(source, f"permission denied: the user running cardfloor (uid {os.getuid()}) "
                               "cannot read it (install it root:cardfloor, mode 0640)") from None
    except IsADirectoryError:
        raise FloorConfigError(source, "is a directory, not a configuration file") from None
    except UnicodeDecodeError as exc:
        raise FloorConfigError(source, f"not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise FloorConfigError(source, f"cannot read it: {exc.strerror or type(exc).__name__}") from None
    return parse_config(text, source)


def parse_config(text: str, source: str = "<config>") -> FloorConfig:
    """Validate TOML text; ``source`` names it in errors."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FloorConfigError(source, toml_problem(exc, text).sentence("TOML")) from None
    try:
        config = msgspec.convert(raw, FloorConfig, dec_hook=_decode_path)
    except msgspec.ValidationError as exc:
        key, message = _explain(schema_problem(exc, toml=True), raw)
        raise FloorConfigError(source, message, key) from None
    _check(config, raw, source)
    return config


def _decode_path(kind: type, value: Any) -> Any:
    if kind is Path and isinstance(value, str):
        return Path(value)
    raise TypeError("expected a path (a string)")


# ---- what the schema's types cannot say ------------------------------------------------------------

def _check(config: FloorConfig, raw: dict[str, Any], source: str) -> None:
    def fail(key: str, what: str) -> FloorConfigError:
        return FloorConfigError(source, f"{toml_shown(value_at(raw, key.split('.')))}: {what}", key)

    broker = config.broker
    for index, url in enumerate(broker.urls):
        problem = _broker_url_problem(url)
        if problem is not None:
            raise fail(f"broker.urls.{index}", problem)
    for key, path in (("broker.password_file", broker.password_file), ("broker.ca_file", broker.ca_file),
                      ("http.tokens_file", config.http.tokens_file), ("http.users_file", config.http.users_file),
                      ("http.secret_file", config.http.secret_file)):
        if path is not None and not path.is_absolute():
            raise fail(key, "expected an absolute path")
    if broker.password_file is not None and broker.username is None:
        raise fail("broker.password_file", "goes with broker.username (the floor's user at the broker)")
    for key, path in (("broker.password_file", broker.password_file), ("http.tokens_file", config.http.tokens_file)):
        if path is not None:
            _check_secret(key, path, fail)
    # made by cardfloor when missing: refused only when it is there and others may read it
    for key, path in (("http.users_file", config.http.users_file), ("http.secret_file", config.http.secret_file)):
        if path is not None and path.exists():
            _check_secret(key, path, fail)
    _check_pits(config, fail)
    if broker.ca_file is not None:
        if not any(url.startswith("mqtts://") for url in broker.urls):
            raise fail("broker.ca_file", "needs an mqtts:// broker (TLS)")
        if not broker.ca_file.is_file():
            raise fail("broker.ca_file", "no such file")
    if not _LISTEN.match(config.http.listen) or not 1 <= int(config.http.listen.rsplit(":", 1)[1]) <= 65535:
        raise fail("http.listen", 'expected HOST:PORT, like "127.0.0.1:8480" or "[::1]:8480"')
    try:
        zoneinfo.ZoneInfo(config.floor.time_zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise fail("floor.time_zone", 'expected a time zone\'s IANA name, like "America/Las_Vegas" or "UTC"') from None


_PIT_TABLE = re.compile(r"^[A-Za-z0-9_-]{1,64}/[A-Za-z0-9_-]{1,64}$")


def _check_pits(config: FloorConfig, fail: Any) -> None:
    """Pit names once each; a table site/table, in one pit at most."""
    names: dict[str, int] = {}
    where: dict[str, str] = {}
    for index, pit in enumerate(config.pit):
        if pit.name.strip() != pit.name or not pit.name.isprintable():
            raise fail(f"pit.{index}.name", "expected a name without spaces around it or control characters")
        if pit.name in names:
            raise fail(f"pit.{index}.name", f"another pit (pit.{names[pit.name]}) has this name")
        names[pit.name] = index
        for number, table in enumerate(pit.tables):
            key = f"pit.{index}.tables.{number}"
            if not _PIT_TABLE.match(table):
                raise fail(key, 'expected SITE/TABLE, like "floor1/bj-01"')
            if table in where:
                raise fail(key, f"is in the pit {where[table]!r} already: a table is in one pit")
            where[table] = pit.name


def _check_secret(key: str, path: Path, fail: Any) -> None:
    """A file holding a secret: there, and readable by no one but its owner (0600 or 0400)."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise fail(key, "no such file" if isinstance(exc, FileNotFoundError)
                   else f"cannot be read: {exc.strerror}") from None
    if mode & 0o077:
        raise fail(key, f"others may read it (mode {mode & 0o777:04o}): only cardfloor may "
                   "(chown cardfloor, chmod 0600)")


def _broker_url_problem(url: str) -> str | None:
    """Why ``url`` is not an MQTT broker's address cardfloor can use, or None."""
    try:
        found = urlsplit(url)
        found.port  # noqa: B018 -- a port out of range raises here
    except ValueError:
        return "not a broker URL (its port is not a number from 0 to 65535)"
    if found.scheme not in ("mqtt", "mqtts"):
        return "expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT]"
    if not found.hostname:
        return "expected a host name, like mqtt://broker.floor:1883"
    if found.path not in ("", "/") or found.query or found.fragment or found.username or found.password:
        return "expected only mqtt[s]://HOST[:PORT]: the user is broker.username, the password broker.password_file"
    return None


# ---- one line out of a msgspec.ValidationError ----------------------------------------------------

def _explain(problem: SchemaProblem, raw: dict[str, Any]) -> tuple[str | None, str]:
    """(dotted key, what is wrong and what is allowed), from the schema itself wherever the
    problem's path can be read; the problem's own sentence otherwise."""
    where = [str(step) for step in problem.path or ()]
    kind = _type_at(where) if problem.path is not None else None
    if kind is None or problem.in_key:
        return None, problem.sentence()
    if problem.kind is ProblemKind.UNKNOWN_FIELD and problem.field is not None:
        assert isinstance(kind, schema.StructType)
        allowed = ", ".join(sorted(field.name for field in kind.fields))
        section = f" in [{'.'.join(where)}]" if where else ""
        return ".".join([*where, problem.field]), f"unknown key (allowed{section}: {allowed})"
    if problem.kind is ProblemKind.MISSING_FIELD and problem.field is not None:
        key = [*where, problem.field]
        missing = _type_at(key)
        return ".".join(key), f"missing; expected {_describe(missing)}" if missing else "missing"
    return ".".join(where) or None, f"{toml_shown(value_at(raw, where))} is not allowed; expected {_describe(kind)}"


def _type_at(key: list[str]) -> schema.Type | None:
    """The schema's type of a dotted key (a list's item by its index); None when there is no such key."""
    kind: schema.Type = schema.type_info(FloorConfig)
    for name in key:
        if isinstance(kind, schema.UnionType):  # an optional value: the type beside None
            kind = next((t for t in kind.types if not isinstance(t, schema.NoneType)), kind)
        if isinstance(kind, schema.ListType) and name.isdigit():
            kind = kind.item_type
            continue
        if not isinstance(kind, schema.StructType):
            return None
        found = next((field.type for field in kind.fields if field.name == name), None)
        if found is None:
            return None
        kind = found
    return kind


def _describe(kind: schema.Type) -> str:
    if isinstance(kind, schema.UnionType):  # TOML has no null: an optional key is left out instead
        return " or ".join(_describe(t) for t in kind.types if not isinstance(t, schema.NoneType))
    if isinstance(kind, schema.StructType):
        return f"a table with the keys {', '.join(sorted(field.name for field in kind.fields))}"
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
    if isinstance(kind, schema.StrType) and kind.pattern == _CLIENT_ID:
        return "1 to 64 letters, digits, _ or -"
    if isinstance(kind, schema.StrType):
        return "a string" if kind.min_length is None else f"a string of {kind.min_length} to {kind.max_length} characters"
    if isinstance(kind, schema.ListType):
        if kind.min_length is not None and kind.max_length is not None:
            return f"a list of {kind.min_length} to {kind.max_length} {_describe(kind.item_type)[2:]}s"
        return f"a list of {_describe(kind.item_type)[2:]}s"
    return type(kind).__name__.removesuffix("Type").lower()


