"""packaging/cardfloor.service: the settings it must hold (cardd.service's hardening), the real
`systemd-analyze verify`, and its configuration directory holding the example's files."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.daemon.test_unit import directives, systemd_analyze

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "packaging" / "cardfloor.service"
EXEC_START = "ExecStart=/opt/cardd/venv/bin/cardfloor --config /etc/cardfloor/cardfloor.toml"
#: cardd.service's hardening that a network service keeps as it is
SAME_AS_CARDD = ("ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateIPC", "PrivateMounts", "NoNewPrivileges",
                 "CapabilityBoundingSet", "AmbientCapabilities", "RestrictSUIDSGID", "RemoveIPC", "KeyringMode",
                 "DevicePolicy", "ProtectClock", "ProtectHostname", "ProtectKernelLogs", "ProtectKernelModules",
                 "ProtectKernelTunables", "ProtectControlGroups", "ProtectProc", "ProcSubset", "RestrictNamespaces",
                 "RestrictRealtime", "LockPersonality", "MemoryDenyWriteExecute", "SystemCallArchitectures",
                 "SystemCallFilter", "SystemCallErrorNumber", "UMask", "Type", "NotifyAccess", "Restart")


@pytest.fixture
def checkable_unit(tmp_path: Path) -> Path:
    """The unit with ExecStart pointed at a binary that exists here (verify refuses a missing one)."""
    text = UNIT.read_text()
    assert EXEC_START in text.splitlines()
    copy = tmp_path / "cardfloor.service"
    copy.write_text(text.replace("ExecStart=/opt/cardd/venv/bin/cardfloor ", "ExecStart=/bin/true "))
    return copy


def test_the_unit_has_cardd_s_hardening():
    floor = directives(UNIT.read_text())
    cardd = directives((ROOT / "packaging" / "cardd.service").read_text())
    for key in SAME_AS_CARDD:
        assert floor.get(key) == cardd[key], key
    assert floor["User"] == ["cardfloor"] and floor["ConfigurationDirectory"] == ["cardfloor"]
    assert floor["PrivateDevices"] == ["yes"]  # no devices at all: cardd needs its two, the floor none
    assert "ReadWritePaths" not in floor and "StateDirectory" not in floor  # it writes nothing on disk


def test_the_example_config_is_where_the_unit_reads_it():
    from cardd.floor.config import DEFAULT_PATH, load_config

    assert EXEC_START.endswith(f"--config {DEFAULT_PATH}")
    assert DEFAULT_PATH.parent == Path("/etc") / directives(UNIT.read_text())["ConfigurationDirectory"][0]
    load_config(ROOT / "packaging" / "cardfloor.toml")


def test_systemd_analyze_verify_passes(checkable_unit):
    result = systemd_analyze("verify", str(checkable_unit))
    # verify exits 0 on an unknown key and only warns: any output at all is a failure here
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def cardfloor(*args: str) -> subprocess.CompletedProcess[str]:
    import sys
    return subprocess.run([str(Path(sys.executable).with_name("cardfloor")), *args], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def test_check_config_says_ok_or_one_line_and_exits_2(tmp_path):
    example = ROOT / "packaging" / "cardfloor.toml"
    done = cardfloor("--check-config", "--config", str(example))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (f"{example}: ok (brokers mqtts://mqtt-1.floor:8883, mqtts://mqtt-2.floor:8883, "
                           "client id cardfloor, no HTTP (no http.tokens_file nor http.users_file))\n")
    wrong = tmp_path / "cardfloor.toml"
    wrong.write_text(example.read_text().replace("retention_days = 400", "retention_days = 30"))
    for args in (("--check-config", "--config", str(wrong)), ("--config", str(wrong))):
        done = cardfloor(*args)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == (f"cardfloor: {wrong}: archive.retention_days: 30 is not allowed; expected a whole "
                               "number from 90 to 36525\n")
    done = cardfloor("--config", str(tmp_path / "none.toml"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no such file" in done.stderr


def test_version():
    done = cardfloor("--version")
    assert done.returncode == 0 and done.stdout.startswith("cardfloor ")
