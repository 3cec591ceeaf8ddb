"""cardd/config.py: the schema, the example file, and one line for every kind of mistake."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from cardd.config import (
    ApiConfig,
    CarddConfig,
    ConfigError,
    DevicesConfig,
    ExportConfig,
    JournalConfig,
    LogConfig,
    RolesConfig,
    TableConfig,
    load_config,
    parse_config,
    simulated,
)
from core.errors import CarddError
from devices.game.rules import load_rules

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = '[devices]\nshoe = "usb://1209:c4d0?serial=SHOE0001"\n\n[table]\nrules = "/etc/cardd/rules.toml"\n'


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cardd.toml"
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str) -> ConfigError:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith(f"{path}: ")
    return caught.value


def test_a_minimal_file_takes_the_defaults(tmp_path):
    config = load_config(write(tmp_path, MINIMAL))
    assert config == CarddConfig(
        devices=DevicesConfig(shoe="usb://1209:c4d0?serial=SHOE0001", shuffler=None),
        table=TableConfig(rules=Path("/etc/cardd/rules.toml")),
    )
    assert config.journal == JournalConfig(path=Path("/var/lib/cardd/journal.sqlite3"), retention_days=90,
                                           export_dir=None, prune_every_s=3600)
    assert config.journal.exports == Path("/var/lib/cardd/exports")
    assert config.api.socket == Path("/run/cardd/cardd.sock")
    assert config.api.mode_bits == 0o660
    assert config.api.group == "cardd-api"
    assert (config.api.rate, config.api.burst) == (50.0, 200)  # cardd/api/server.py's Limits
    assert config.firmware.public_key is None
    assert config.roles == RolesConfig(dealer="cardd-dealer", supervisor="cardd-supervisor", technician="cardd-tech")
    assert config.log == LogConfig(format="auto", level="info")
    assert config.export is None  # left out, nothing leaves the table


def test_the_example_file_is_valid_and_sets_every_key():
    config = load_config(ROOT / "packaging" / "cardd.toml")
    assert config.devices.shuffler == "serial:///dev/cardd/shuffler-A1?baud=115200&parity=N&stopbits=1&bytesize=8"
    assert config.firmware.public_key == Path("/etc/cardd/firmware-signing.pub")
    text = (ROOT / "packaging" / "cardd.toml").read_text()
    for section in ("devices", "table", "journal", "api", "firmware", "roles", "log"):
        keys = type(getattr(config, section)).__struct_fields__
        for key in keys:
            assert f"\n{key} = " in text, f"packaging/cardd.toml does not show {section}.{key}"


def test_simulated_needs_no_file_and_keeps_everything_under_one_directory(tmp_path):
    config = simulated(tmp_path)
    assert (config.devices.shoe, config.devices.shuffler) == ("sim://shoe", "sim://shuffler")
    assert config.journal.path.parent == tmp_path and config.api.socket.parent == tmp_path
    load_rules(config.table.rules)  # the built-in rules file exists and is valid
    fresh = simulated()
    try:
        assert fresh.journal.path.parent.is_dir() and fresh.journal.path.parent != tmp_path
        assert fresh.journal.path.parent.stat().st_mode & 0o077 == 0  # private
    finally:
        fresh.journal.path.parent.rmdir()


def test_the_api_limits_may_be_raised_and_a_whole_number_rate_is_read(tmp_path):
    config = load_config(write(tmp_path, MINIMAL + "[api]\nrate = 1000\nburst = 1000\n"))
    assert (config.api.rate, config.api.burst) == (1000.0, 1000)


def test_the_reconnect_schedule_starts_over_after_5_s_open_unless_configured(tmp_path):
    assert load_config(write(tmp_path, MINIMAL)).devices.reconnect_stable_s == 5.0  # drivers' Backoff.stable
    config = load_config(write(tmp_path, MINIMAL.replace("\n\n", "\nreconnect_stable_s = 0\n\n")))
    assert config.devices.reconnect_stable_s == 0.0  # a whole number is read as seconds too


def test_config_error_is_a_cardd_error(tmp_path):
    assert isinstance(error_of(tmp_path, ""), CarddError)


def test_the_example_export_section_uncommented_is_valid_and_sets_every_key(tmp_path):
    text = (ROOT / "packaging" / "cardd.toml").read_text()
    section = text[text.index("# [export]"):]
    uncommented = "\n".join(line[2:] for line in section.splitlines()
                            if line.startswith("# [") or (line.startswith("# ") and " = " in line))
    password = Path("/etc/cardd/mqtt-password")
    config = parse_config(text.replace(section, uncommented.replace(str(password), str(write_secret(tmp_path)))))
    assert config.export is not None and config.export.brokers[1] == "mqtts://mqtt-2.floor:8883"
    for key in ExportConfig.__struct_fields__:
        assert f"\n{key} = " in uncommented, f"packaging/cardd.toml does not show export.{key}"


def write_secret(tmp_path: Path) -> Path:
    secret = tmp_path / "mqtt-password"
    secret.write_text("s3cret\n")
    secret.chmod(0o600)
    return secret


EXPORT = '\n[export]\nbrokers = ["mqtt://127.0.0.1:1883"]\nsite = "floor-1"\ntable = "BJ-07"\n'


def test_an_export_section_takes_its_defaults(tmp_path):
    config = load_config(write(tmp_path, MINIMAL + EXPORT))
    assert config.export == ExportConfig(brokers=["mqtt://127.0.0.1:1883"], site="floor-1", table="BJ-07")
    assert (config.export.mqtt_version, config.export.card_data, config.export.backlog_alarm_s) == ("5", "none", 300.0)


EXPORT_MISTAKES = [
    (EXPORT.replace('"floor-1"', '"floor/1"'), "export.site",
     '"floor/1" is not allowed; expected 1 to 64 letters, digits, _ or - (a topic level: no /, + or #)'),
    (EXPORT.replace('"BJ-07"', '"#"'), "export.table", '"#" is not allowed; expected 1 to 64 letters, digits, _ or - (a topic level: '
     'no /, + or #)'),
    (EXPORT.replace("mqtt://127.0.0.1:1883", "http://broker"), "export.brokers.0",
     '"http://broker": expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT]'),
    (EXPORT.replace("mqtt://127.0.0.1:1883", "mqtt://bob:pw@broker"), "export.brokers.0",
     '"mqtt://bob:pw@broker": expected only mqtt[s]://HOST[:PORT]: the user is export.username, the password '
     'export.password_file'),
    (EXPORT.replace("mqtt://127.0.0.1:1883", "mqtt://broker:99999"), "export.brokers.0",
     '"mqtt://broker:99999": not a broker URL (Port out of range 0-65535)'),
    (EXPORT.replace('brokers = ["mqtt://127.0.0.1:1883"]', "brokers = []"), "export.brokers",
     "an array is not allowed; expected a list of 1 to 16 strings"),
    (EXPORT + 'card_data = "all"\n', "export.card_data", '"all" is not allowed; expected one of "after_round", "none"'),
    (EXPORT + 'mqtt_version = "3"\n', "export.mqtt_version", '"3" is not allowed; expected one of "3.1.1", "5"'),
    (EXPORT + 'password_file = "/nonexistent"\n', "export.password_file",
     '"/nonexistent": goes with export.username (the broker\'s user for this table)'),
    (EXPORT + 'username = "t"\npassword_file = "/nonexistent"\n', "export.password_file", '"/nonexistent": no such file'),
    (EXPORT + 'ca_file = "/etc/ca.pem"\n', "export.ca_file", '"/etc/ca.pem": needs an mqtts:// broker (TLS)'),
    (EXPORT.replace("mqtt:", "mqtts:") + 'cert_file = "/etc/c.pem"\n', "export.cert_file",
     '"/etc/c.pem": needs export.key_file, the client certificate\'s key'),
    (EXPORT + 'retain = true\n', "export.retain", "unknown key (allowed in [export]: anchor_every_s, backlog_alarm_s, "
     "brokers, ca_file, card_data, cert_file, key_file, mqtt_version, password_file, site, table, timeout_s, username)"),
]


@pytest.mark.parametrize(("text", "key", "message"), EXPORT_MISTAKES)
def test_an_export_mistake_is_one_line_naming_the_key(tmp_path, text, key, message):
    error = error_of(tmp_path, MINIMAL + text)
    assert error.key == key
    assert str(error) == f"{tmp_path / 'cardd.toml'}: {key}: {message}"


def test_a_password_file_others_may_read_is_refused(tmp_path):
    secret = write_secret(tmp_path)
    secret.chmod(0o644)
    error = error_of(tmp_path, MINIMAL + EXPORT + f'username = "t"\npassword_file = "{secret}"\n')
    assert error.key == "export.password_file"
    assert str(error).endswith("others may read it (mode 0644): only cardd may (chown cardd, chmod 0600)")
    secret.chmod(0o600)
    export = load_config(tmp_path / "cardd.toml").export
    assert export is not None and export.password_file == secret


UNKNOWN_OR_MISSING = [
    (MINIMAL + "[journal]\nretension_days = 120\n", "journal.retension_days",
     "unknown key (allowed in [journal]: export_dir, path, prune_every_s, retention_days)"),
    (MINIMAL + "[jornal]\n", "jornal", "unknown key (allowed: api, devices, export, firmware, journal, log, notify, roles, table)"),
    (MINIMAL + '[log]\n"level\\nERROR: forged" = 1\n', 'log."level\\nERROR: forged"',
     "unknown key (allowed in [log]: format, level)"),
    ('[devices]\nshoe = "sim://shoe"\n', "table", "missing; expected a table with the keys rules"),
    ("[table]\nrules = '/r.toml'\n[devices]\nshuffler = 'sim://shuffler'\n", "devices.shoe",
     "missing; expected a string"),
    (MINIMAL + "log = \"json\"\n", "table.log", "unknown key (allowed in [table]: rules)"),  # TOML: under [table]
]
WRONG_TYPES = [
    (MINIMAL + '[journal]\nretention_days = "ninety"\n', "journal.retention_days",
     '"ninety" is not allowed; expected a whole number from 90 to 36525'),
    (MINIMAL + "[journal]\nretention_days = 90.0\n", "journal.retention_days",
     "90.0 is not allowed; expected a whole number from 90 to 36525"),
    (MINIMAL + "[api]\nsocket = 5\n", "api.socket", "5 is not allowed; expected an absolute path (a string)"),
    (MINIMAL + '[api]\nrate = "fast"\n', "api.rate", '"fast" is not allowed; expected a number from 1 to 10000'),
    (MINIMAL + "[firmware]\npublic_key = true\n", "firmware.public_key",
     "true is not allowed; expected an absolute path (a string)"),
    ('log = "json"\n' + MINIMAL, "log", '"json" is not allowed; expected a table with the keys format, level'),
]
OUT_OF_RANGE = [
    (MINIMAL + "[journal]\nretention_days = 30\n", "journal.retention_days",
     "30 is not allowed; expected a whole number from 90 to 36525"),
    (MINIMAL + "[journal]\nprune_every_s = 0\n", "journal.prune_every_s",
     "0 is not allowed; expected a whole number from 1 to 86400"),
    (MINIMAL + '[journal]\nexport_dir = "/srv/exports"\n', "journal.export_dir",
     '"/srv/exports": expected a directory inside the journal\'s directory /var/lib/cardd (the only place the '
     'service may write), like "/var/lib/cardd/exports"'),
    (MINIMAL + '[journal]\nexport_dir = "/var/lib/cardd/../exports"\n', "journal.export_dir",
     '"/var/lib/cardd/../exports": expected a directory inside the journal\'s directory /var/lib/cardd (the only '
     'place the service may write), like "/var/lib/cardd/exports"'),
    (MINIMAL + '[journal]\nexport_dir = "exports"\n', "journal.export_dir", '"exports": expected an absolute path'),
    (MINIMAL + '[log]\nformat = "xml"\n', "log.format", '"xml" is not allowed; expected one of "auto", "console", "json"'),
    (MINIMAL + '[log]\nlevel = "trace"\n', "log.level",
     '"trace" is not allowed; expected one of "debug", "error", "info", "warning"'),
    (MINIMAL + '[journal]\npath = "journal.sqlite3"\n', "journal.path", '"journal.sqlite3": expected an absolute path'),
    ('[devices]\nshoe = "sim://shoe"\n[table]\nrules = "rules.toml"\n', "table.rules",
     '"rules.toml": expected an absolute path'),
    (MINIMAL + '[api]\nsocket = "/run/' + "x" * 120 + '"\n', "api.socket",
     '"/run/' + "x" * 120 + '": too long for a Unix socket (at most 107 bytes)'),
    (MINIMAL + '[api]\nmode = "0666"\n', "api.mode",
     '"0666": expected octal permissions without any for others, like "0660" or "0600"'),
    (MINIMAL + '[api]\nmode = "rw-rw----"\n', "api.mode",
     '"rw-rw----": expected octal permissions without any for others, like "0660" or "0600"'),
    (MINIMAL + '[api]\ngroup = "cardd"\n', "api.group",
     '"cardd": \'cardd\' is the devices\' group (udev): the API needs its own, like "cardd-api"'),
    (MINIMAL + '[api]\ngroup = "API users"\n', "api.group",
     '"API users": expected a Unix group name (lower-case letters, digits, _ and -)'),
    (MINIMAL + "[api]\nrate = 0\n", "api.rate", "0 is not allowed; expected a number from 1 to 10000"),
    (MINIMAL + "[api]\nrate = 2e4\n", "api.rate", "20000.0 is not allowed; expected a number from 1 to 10000"),
    (MINIMAL + "[api]\nrate = nan\n", "api.rate", "nan is not allowed; expected a number from 1 to 10000"),
    (MINIMAL + "[api]\nburst = 0\n", "api.burst", "0 is not allowed; expected a whole number from 1 to 100000"),
    (MINIMAL + "[api]\nburst = 1.5\n", "api.burst", "1.5 is not allowed; expected a whole number from 1 to 100000"),
    (MINIMAL.replace("\n\n", "\nreconnect_stable_s = -1\n\n"), "devices.reconnect_stable_s",
     "-1 is not allowed; expected a number from 0 to 3600"),
    (MINIMAL.replace("\n\n", '\nshoe_protocol = "2"\n\n'), "devices.shoe_protocol",
     '"2" is not allowed; expected one of "1.1", "2.0"'),
    (MINIMAL.replace("\n\n", '\nshuffler_protocol = 2.0\n\n'), "devices.shuffler_protocol",
     '2.0 is not allowed; expected one of "1.1", "2.0"'),  # the number, not the text
    (MINIMAL + '[roles]\ndealer = "Dealers!"\n', "roles.dealer",
     '"Dealers!": expected a Unix group name (lower-case letters, digits, _ and -)'),
    (MINIMAL + '[roles]\ntechnician = "cardd-supervisor"\n', "roles.technician",
     '"cardd-supervisor": already the supervisor group; each role needs its own '
     "(an override must come from a supervisor)"),
]


@pytest.mark.parametrize(("text", "key", "message"), UNKNOWN_OR_MISSING + WRONG_TYPES + OUT_OF_RANGE)
def test_a_mistake_is_one_line_naming_the_key(tmp_path, text, key, message):
    error = error_of(tmp_path, text)
    assert error.key == key
    assert str(error) == f"{tmp_path / 'cardd.toml'}: {key}: {message}"


FORMS = "serial:///dev/PATH[?baud=115200&parity=N&stopbits=1&bytesize=8] | usb://VID:PID[?serial=SN] | sim://shuffler|shoe"


@pytest.mark.parametrize(("shoe", "message"), [
    ("tcp://10.0.0.5:4000", f"unknown scheme 'tcp'; accepted forms: {FORMS}"),
    ("/dev/ttyACM0", f"not a device URL (no scheme://); accepted forms: {FORMS}"),
    ("usb://1209?serial=X", f"'1209' is not a hex VID:PID like 1209:c4d0; accepted forms: {FORMS}"),
    ("serial:///dev/ttyS0?baud=12", f"baud='12' is not a whole number from 50 to 4000000; accepted forms: {FORMS}"),
    ("sim://shoe?pace_s=soon", "pace_s=soon: expected a number of seconds, 0 or more"),
    ("sim://croupier", "no simulated device 'croupier'; simulated devices: shuffler, shoe"),
])
def test_a_bad_device_url_names_the_key(tmp_path, shoe, message):
    error = error_of(tmp_path, MINIMAL.replace("usb://1209:c4d0?serial=SHOE0001", shoe))
    assert str(error) == f'{tmp_path / "cardd.toml"}: devices.shoe: "{shoe}": {message}'


def test_a_bad_shuffler_url_names_its_key(tmp_path):
    error = error_of(tmp_path, MINIMAL.replace("[table]", 'shuffler = "serial://ttyS0"\n[table]'))
    assert str(error) == (f'{tmp_path / "cardd.toml"}: devices.shuffler: "serial://ttyS0": serial URLs need an '
                          f"absolute device path after serial://; accepted forms: {FORMS}")


@pytest.mark.parametrize(("shoe", "shuffler"), [
    ("serial:///dev/ttyACM0", "serial:///dev/ttyACM0?baud=9600"),  # the options do not make another port
    ("usb://1209:c4d0?serial=SHOE0001", "usb://1209:C4D0?serial=SHOE0001"),
    ("serial:///dev/ttyACM0", "serial:///dev/../dev/ttyACM0"),
])
def test_one_device_for_both_roles_is_refused_naming_both_keys(tmp_path, shoe, shuffler):
    """Once taken, the daemon retried the shuffler's port for ever as busy, 'another process' (itself)."""
    text = MINIMAL.replace("usb://1209:c4d0?serial=SHOE0001", shoe).replace(
        "[table]", f'shuffler = "{shuffler}"\n[table]')
    assert str(error_of(tmp_path, text)) == (
        f'{tmp_path / "cardd.toml"}: devices.shuffler: "{shuffler}": the same device as devices.shoe ("{shoe}"): '
        "the shuffler and the shoe each need their own")


@pytest.mark.parametrize(("shoe", "shuffler", "key", "other_key"), [
    ("usb://1209:c4d0?serial=SHOE0001", "usb://1209:C4D0", "devices.shuffler", "devices.shoe"),
    ("usb://1209:c4d0", "usb://1209:c4d0?serial=SHUF0001", "devices.shoe", "devices.shuffler"),
])
def test_a_usb_device_without_its_serial_may_be_the_other_roles_and_is_refused_naming_both_keys(
        tmp_path, shoe, shuffler, key, other_key):
    """usb://VID:PID opens the first device with that VID:PID, which may be the one the other role names by serial."""
    text = MINIMAL.replace("usb://1209:c4d0?serial=SHOE0001", shoe).replace(
        "[table]", f'shuffler = "{shuffler}"\n[table]')
    unnamed, other = (shuffler, shoe) if key == "devices.shuffler" else (shoe, shuffler)
    assert str(error_of(tmp_path, text)) == (
        f'{tmp_path / "cardd.toml"}: {key}: "{unnamed}": possibly the same device as {other_key} ("{other}"): '
        "without ?serial= it opens the first USB device 1209:c4d0, which may be that one: give each its serial "
        "number (cardctl devices lists them)")


def test_a_usb_device_without_a_serial_beside_another_model_is_two_devices(tmp_path):
    text = MINIMAL.replace("[table]", 'shuffler = "usb://1209:c4d1"\n[table]')
    assert load_config(write(tmp_path, text)).devices.shuffler == "usb://1209:c4d1"


def test_two_devices_of_one_model_by_serial_number_are_two_devices(tmp_path):
    text = MINIMAL.replace("[table]", 'shuffler = "usb://1209:c4d0?serial=SHUF0001"\n[table]')
    assert load_config(write(tmp_path, text)).devices.shuffler == "usb://1209:c4d0?serial=SHUF0001"


@pytest.mark.parametrize(("text", "message"), [
    (MINIMAL + "[journal]\nretention_days = \n", "line 7, column 18: not valid TOML: expected a value (a string, "
     "a number, true or false, a date, an array or an inline table)"),
    ('[devices]\nshoe = "usb://1209:c4d0\n', "line 2, column 24: not valid TOML: a string is not closed before the "
     "end of its line"),
    (MINIMAL + "[devices]\n", "line 6, column 9: not valid TOML: the table [devices] is declared twice"),
    (MINIMAL + "[api", "end of file: not valid TOML: expected ']' at the end of a table declaration"),
    (MINIMAL + "[journal]\nretention_days = 1 2\n", "line 7, column 20: not valid TOML: expected the end of the "
     "line after a value (one key = value pair a line)"),
])
def test_bad_toml_names_the_line(tmp_path, text, message):
    assert str(error_of(tmp_path, text)) == f"{tmp_path / 'cardd.toml'}: {message}"


def test_a_missing_file(tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "nowhere.toml")
    assert str(caught.value) == (f"{tmp_path / 'nowhere.toml'}: no such file "
                                 "(copy packaging/cardd.toml there, or pass --config PATH)")


def test_an_unreadable_file(tmp_path, mocker):
    path = write(tmp_path, MINIMAL)
    path.chmod(0)
    if os.geteuid() == 0:  # root reads any file: the refusal is the open() syscall's, so fail that
        mocker.patch.object(Path, "read_bytes", side_effect=PermissionError(13, "Permission denied"))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (f"{path}: permission denied: the user running cardd (uid {os.getuid()}) "
                                 "cannot read it (install it root:cardd, mode 0640)")


def test_a_directory_and_a_binary_file(tmp_path):
    with pytest.raises(ConfigError, match=rf"^{tmp_path}: is a directory, not a configuration file$"):
        load_config(tmp_path)
    path = tmp_path / "cardd.toml"
    path.write_bytes(b"[devices]\nshoe = \"\xff\"\n")
    with pytest.raises(ConfigError, match=rf"^{path}: not UTF-8 text \(byte 18\)$"):
        load_config(path)


def test_a_string_is_parsed_with_its_source_named():
    with pytest.raises(ConfigError, match=r"^--simulate overrides: jornal: unknown key"):
        parse_config(MINIMAL + "[jornal]\n", "--simulate overrides")
    assert parse_config(MINIMAL).api == ApiConfig()
