"""cardfloor's configuration (cardd/floor/config.py): the example holds every key and loads; each
mistake is one line naming the file and the key."""
from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from cardd.floor.config import FloorConfig, FloorConfigError, load_config, parse_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "packaging" / "cardfloor.toml"
MINIMAL = '[broker]\nurls = ["mqtt://127.0.0.1:1883"]\n[archive]\ndsn = "postgresql:///cardfloor"\n'


def secret(path: Path, mode: int = 0o600) -> Path:
    path.write_text("s3cret\n")
    path.chmod(mode)
    return path


def uncommented(tmp_path: Path) -> str:
    """The example with every commented-out ``key = value`` line in force, its files made here."""
    text = re.sub(r"(?m)^# (\w+ = .*|\[\[\w+\]\])$", r"\1", EXAMPLE.read_text())
    for name in ("broker.password", "tokens", "users", "session.secret"):
        text = text.replace(f'"/etc/cardfloor/{name}"', f'"{secret(tmp_path / name)}"')
    (tmp_path / "ca.pem").write_text("a CA\n")
    return text.replace('"/etc/cardfloor/broker-ca.pem"', f'"{tmp_path / "ca.pem"}"')


def every_key(kind: type, prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for field in msgspec.structs.fields(kind):
        inner = field.type
        if isinstance(inner, type) and issubclass(inner, msgspec.Struct):
            keys |= every_key(inner, f"{prefix}{field.name}.")
        else:
            keys.add(f"{prefix}{field.name}")
    return keys


def keys_of(raw: dict[str, object], prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for name, value in raw.items():
        keys |= keys_of(value, f"{prefix}{name}.") if isinstance(value, dict) else {f"{prefix}{name}"}
    return keys


def test_the_example_loads_as_it_is():
    config = load_config(EXAMPLE)
    assert config.broker.client_id == "cardfloor" and config.archive.retention_days == 400
    assert (config.http.host, config.http.port) == ("127.0.0.1", 8480)


def test_the_example_uncommented_sets_every_key(tmp_path):
    import tomllib

    text = uncommented(tmp_path)
    config = parse_config(text, "cardfloor.toml")
    assert keys_of(tomllib.loads(text)) == every_key(FloorConfig)
    assert config.broker.username == "floor" and config.broker.password_file == tmp_path / "broker.password"
    assert config.http.tokens_file == tmp_path / "tokens"
    assert config.http.users_file == tmp_path / "users" and config.http.session_hours == 12.0
    assert config.pit_of() == {("floor1", "bj-01"): "Pit 1", ("floor1", "bj-02"): "Pit 1"}


def test_the_defaults():
    config = parse_config(MINIMAL)
    alarms = config.alarms
    assert (alarms.offline_s, alarms.table_alarm_min, alarms.backlog_min, alarms.clock_offset_s, alarms.gap_s) == \
        (60.0, 10.0, 10.0, 5.0, 60.0)
    assert (config.broker.mqtt_version, config.broker.client_id, config.http.listen, config.floor.time_zone) == \
        ("5", "cardfloor", "127.0.0.1:8480", "UTC")
    assert config.http.tokens_file is None
    assert (config.http.users_file, config.http.session_secret_file, config.pit) == (None, None, [])
    assert config.floor.target_rounds_per_hour == 60


def refusal(text: str) -> str:
    with pytest.raises(FloorConfigError) as caught:
        parse_config(text, "cardfloor.toml")
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message and "Expected" not in message, message
    return message


@pytest.mark.parametrize("text, said", [
    ("[broker]\nurls = []\n[archive]\ndsn = 'x'\n",
     "cardfloor.toml: broker.urls: an array is not allowed; expected a list of 1 to 16 strings"),
    ('[broker]\nurls = ["http://b:1"]\n[archive]\ndsn = "x"\n',
     'cardfloor.toml: broker.urls.0: "http://b:1": expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT]'),
    ('[broker]\nurls = ["mqtt://b:1", 5]\n[archive]\ndsn = "x"\n',
     "cardfloor.toml: broker.urls.1: 5 is not allowed; expected a string"),
    ('[broker]\nurls = ["mqtt://u:p@b:1"]\n[archive]\ndsn = "x"\n',
     'cardfloor.toml: broker.urls.0: "mqtt://u:p@b:1": expected only mqtt[s]://HOST[:PORT]: the user is '
     "broker.username, the password broker.password_file"),
    (MINIMAL.replace("[archive]", 'mqtt_version = "4"\n[archive]'),
     'cardfloor.toml: broker.mqtt_version: "4" is not allowed; expected one of "3.1.1", "5"'),
    (MINIMAL.replace("[archive]", 'client_id = "floor/1"\n[archive]'),
     'cardfloor.toml: broker.client_id: "floor/1" is not allowed; expected 1 to 64 letters, digits, _ or -'),
    (MINIMAL.replace("[archive]", 'clientid = "x"\n[archive]'),
     "cardfloor.toml: broker.clientid: unknown key (allowed in [broker]: ca_file, client_id, mqtt_version, "
     "password_file, urls, username)"),
    (MINIMAL + "retention_days = 30\n",
     "cardfloor.toml: archive.retention_days: 30 is not allowed; expected a whole number from 90 to 36525"),
    ('[broker]\nurls = ["mqtt://b"]\n',
     "cardfloor.toml: archive: missing; expected a table with the keys dsn, retention_days"),
    ('[broker]\nurls = ["mqtt://b"]\n[archive]\n',
     "cardfloor.toml: archive.dsn: missing; expected a string of 1 to 4096 characters"),
    (MINIMAL + "[alarms]\noffline_s = 0\n",
     "cardfloor.toml: alarms.offline_s: 0 is not allowed; expected a number from 1 to 604800"),
    (MINIMAL + "[alarms]\ngap_s = 'soon'\n",
     'cardfloor.toml: alarms.gap_s: "soon" is not allowed; expected a number from 1 to 86400'),
    (MINIMAL + "[alarms]\nclock_offset = 5\n",
     "cardfloor.toml: alarms.clock_offset: unknown key (allowed in [alarms]: backlog_min, clock_offset_s, "
     "gap_s, offline_s, table_alarm_min)"),
    (MINIMAL + "[http]\nlisten = '8480'\n",
     'cardfloor.toml: http.listen: "8480": expected HOST:PORT, like "127.0.0.1:8480" or "[::1]:8480"'),
    (MINIMAL + "[http]\nlisten = '127.0.0.1:99999'\n",
     'cardfloor.toml: http.listen: "127.0.0.1:99999": expected HOST:PORT, like "127.0.0.1:8480" or "[::1]:8480"'),
    (MINIMAL + "[http]\ntokens_file = 'tokens'\n",
     'cardfloor.toml: http.tokens_file: "tokens": expected an absolute path'),
    (MINIMAL + "[floor]\ntime_zone = 'Mars/Olympus'\n",
     'cardfloor.toml: floor.time_zone: "Mars/Olympus": expected a time zone\'s IANA name, like '
     '"America/Las_Vegas" or "UTC"'),
    (MINIMAL + "[pits]\n", "cardfloor.toml: pits: unknown key (allowed: alarms, archive, broker, floor, http, log, pit)"),
    (MINIMAL + "[pit]\n", "cardfloor.toml: pit: a table is not allowed; expected a list of"),
    (MINIMAL + "[[pit]]\ntables = []\n", "cardfloor.toml: pit.0.name: missing; expected a string of 1 to 64"),
    (MINIMAL + "[[pit]]\nname = 'Pit 1'\ntables = ['bj-01']\n",
     'cardfloor.toml: pit.0.tables.0: "bj-01": expected SITE/TABLE, like "floor1/bj-01"'),
    (MINIMAL + "[[pit]]\nname = 'A'\ntables = ['f/t1']\n[[pit]]\nname = 'B'\ntables = ['f/t1']\n",
     "cardfloor.toml: pit.1.tables.0: \"f/t1\": is in the pit 'A' already: a table is in one pit"),
    (MINIMAL + "[[pit]]\nname = 'A'\n[[pit]]\nname = 'A'\n",
     'cardfloor.toml: pit.1.name: "A": another pit (pit.0) has this name'),
    (MINIMAL + "[floor]\ntarget_rounds_per_hour = 0\n",
     "cardfloor.toml: floor.target_rounds_per_hour: 0 is not allowed; expected a whole number from 1 to 1000"),
    (MINIMAL + "[http]\nsession_hours = 0\n",
     "cardfloor.toml: http.session_hours: 0 is not allowed; expected a number from 0.01 to 720"),
    (MINIMAL + "[http]\nusers_file = 'users'\n", 'cardfloor.toml: http.users_file: "users": expected an absolute path'),
    ("[broker\n", "cardfloor.toml: line 1, column 8: not valid TOML"),
])
def test_each_mistake_is_one_line_naming_the_key(text, said):
    assert refusal(text).startswith(said)


def test_a_password_file_others_may_read_is_refused(tmp_path):
    shared = secret(tmp_path / "password", 0o644)
    text = MINIMAL.replace("[archive]", f'username = "floor"\npassword_file = "{shared}"\n[archive]')
    assert refusal(text) == (f'cardfloor.toml: broker.password_file: "{shared}": others may read it (mode 0644): '
                             "only cardfloor may (chown cardfloor, chmod 0600)")
    shared.chmod(0o600)
    assert parse_config(text).broker.password_file == shared
    assert refusal(text.replace('username = "floor"\n', "")).startswith(
        f'cardfloor.toml: broker.password_file: "{shared}": goes with broker.username')
    assert refusal(text.replace(str(shared), str(tmp_path / "none"))).endswith(": no such file")


def test_a_tokens_file_others_may_read_is_refused(tmp_path):
    tokens = secret(tmp_path / "tokens", 0o640)
    assert refusal(MINIMAL + f"[http]\ntokens_file = '{tokens}'\n").startswith(
        f'cardfloor.toml: http.tokens_file: "{tokens}": others may read it (mode 0640)')


def test_a_users_file_may_be_missing_but_not_readable_by_others(tmp_path):
    users = tmp_path / "users"
    text = MINIMAL + f"[http]\nusers_file = '{users}'\n"
    assert parse_config(text).http.session_secret_file == tmp_path / "users.secret"
    secret(users, 0o644)
    assert refusal(text).startswith(f'cardfloor.toml: http.users_file: "{users}": others may read it (mode 0644)')


def test_a_ca_file_needs_tls(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("a CA\n")
    assert refusal(MINIMAL.replace("[archive]", f'ca_file = "{ca}"\n[archive]')) == \
        f'cardfloor.toml: broker.ca_file: "{ca}": needs an mqtts:// broker (TLS)'


def test_a_file_that_cannot_be_read(tmp_path):
    with pytest.raises(FloorConfigError, match=r"no such file \(copy packaging/cardfloor.toml there"):
        load_config(tmp_path / "none.toml")
    (tmp_path / "bad.toml").write_bytes(b"\xff")
    with pytest.raises(FloorConfigError, match=r"bad.toml: not UTF-8 text \(byte 0\)"):
        load_config(tmp_path / "bad.toml")
