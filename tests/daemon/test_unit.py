"""packaging/cardd.service: the settings it must hold, the real `systemd-analyze verify`, and the
hardening score docs/install.md records."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "packaging" / "cardd.service"
EXEC_START = "ExecStart=/opt/cardd/venv/bin/cardd --config /etc/cardd/cardd.toml"


def directives(text: str) -> dict[str, list[str]]:
    """``Key`` -> its values in order (a unit may repeat a key: DeviceAllow=, SystemCallFilter=)."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key, []).append(value)
    return found


@pytest.fixture
def checkable_unit(tmp_path: Path) -> Path:
    """The unit with ExecStart pointed at a binary that exists here: verify refuses a missing
    one, and /opt/cardd is where the installation (docs/install.md) puts cardd, not this checkout."""
    text = UNIT.read_text()
    assert EXEC_START in text.splitlines()
    copy = tmp_path / "cardd.service"
    copy.write_text(text.replace("ExecStart=/opt/cardd/venv/bin/cardd ", "ExecStart=/bin/true "))
    return copy


def systemd_analyze(*args: str) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("systemd-analyze")
    assert tool, "systemd-analyze is missing: `make sysdeps` installs the systemd package"
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=60)


def test_the_unit_asks_what_the_issue_asks():
    unit = directives(UNIT.read_text())
    for key, value in {"Type": "notify", "NotifyAccess": "main", "Restart": "on-failure", "User": "cardd",
                       "Group": "cardd", "RuntimeDirectory": "cardd", "StateDirectory": "cardd",
                       "ConfigurationDirectory": "cardd", "ProtectSystem": "strict",
                       "ReadWritePaths": "/var/lib/cardd", "DevicePolicy": "closed", "NoNewPrivileges": "yes",
                       "PrivateTmp": "yes", "ProtectHome": "yes"}.items():
        assert unit.get(key) == [value], key
    assert re.fullmatch(r"\d+s", unit["WatchdogSec"][0])
    assert unit["DeviceAllow"] == ["char-usb_device rw", "char-ttyACM rw"]
    assert unit["RestrictAddressFamilies"] == ["AF_UNIX AF_NETLINK"]
    assert unit["SystemCallFilter"][0] == "@system-service"


def test_the_journal_directory_is_the_state_directory_of_the_example_config():
    from cardd.config import load_config

    config = load_config(ROOT / "packaging" / "cardd.toml")
    unit = directives(UNIT.read_text())
    assert config.journal.path.parent == Path("/var/lib") / unit["StateDirectory"][0]
    assert config.api.socket.parent == Path("/run") / unit["RuntimeDirectory"][0]
    assert EXEC_START.endswith("--config /etc/cardd/cardd.toml")


def test_systemd_analyze_verify_passes(checkable_unit):
    result = systemd_analyze("verify", str(checkable_unit))
    # verify exits 0 on an unknown key and only warns: any output at all is a failure here
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_verify_does_catch_a_mistake(checkable_unit):
    checkable_unit.write_text(checkable_unit.read_text().replace("ProtectSystem=strict", "ProtectSystm=strict"))
    result = systemd_analyze("verify", str(checkable_unit))
    assert "Unknown key" in result.stderr and "ProtectSystm" in result.stderr


def test_the_security_score_is_the_one_docs_install_records(checkable_unit):
    result = systemd_analyze("security", "--offline=true", "--no-pager", str(checkable_unit))
    measured = re.search(r"Overall exposure level for cardd\.service: (\d+\.\d+)", result.stdout)
    assert measured, result.stdout + result.stderr
    recorded = re.search(r"Overall exposure level for cardd\.service: (\d+\.\d+)", (ROOT / "docs" / "install.md").read_text())
    assert recorded, "docs/install.md does not record the unit's `systemd-analyze security` score"
    assert float(measured[1]) <= float(recorded[1]), (
        f"the unit's exposure rose to {measured[1]} (docs/install.md records {recorded[1]})")
