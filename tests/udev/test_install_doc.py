"""docs/install.md as a reader follows it, step by step: the local udev rules of its RS-232 section work
as written (checked by the real udevadm on emulated devices), its commands use the checkout's
.venv, and it names the system package a real USB shoe needs."""
import re
from pathlib import Path

import pytest

from tests.udev.udev_sandbox import TEST_GID, UdevSandbox, properties

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "docs" / "install.md"
LOCAL_RULES = "/etc/udev/rules.d/98-cardd-local.rules"
TTYS0 = "/sys/devices/platform/serial8250/tty/ttyS0"
TTYUSB0 = "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-2/1-2:1.0/tty/ttyUSB0"


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```", text, re.M | re.S)


def local_rules() -> list[str]:
    """The rule lines of every block install.md labels as the local rules file."""
    blocks = [b for b in code_blocks(INSTALL.read_text()) if b.startswith(f"# {LOCAL_RULES}\n")]
    return [line for b in blocks for line in b.splitlines() if line and not line.startswith("#")]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    rules = local_rules()
    assert len(rules) == 2, rules  # one for a built-in port, one for a generic adapter
    return UdevSandbox(tmp_path_factory.mktemp("udev-local"), {"98-cardd-local.rules": "\n".join(rules) + "\n"})


def assert_given_to_cardd(output: str, link: str) -> None:
    assert properties(output)["CARDD_ROLE"] == "shuffler"
    assert f"/dev/{link}" in properties(output)["DEVLINKS"].split()
    assert re.search(r"98-cardd-local\.rules:\d+ MODE 0660", output)
    assert re.search(rf"98-cardd-local\.rules:\d+ GROUP {TEST_GID}\b", output)


@pytest.mark.udev
@pytest.mark.timeout(120)
def test_the_built_in_port_rule_gives_ttyS0_to_cardd(sandbox):
    assert_given_to_cardd(sandbox.test(ROOT / "udev" / "ttyS0.umockdev", TTYS0), "cardd/shuffler-rs232")


@pytest.mark.udev
@pytest.mark.timeout(120)
def test_the_adapter_rule_takes_that_adapter_and_no_other_of_its_kind(sandbox, tmp_path):
    assert_given_to_cardd(sandbox.test(ROOT / "udev" / "ftdi.umockdev", TTYUSB0), "cardd/shuffler-FT1234AB")
    other = tmp_path / "other-ftdi.umockdev"  # the same adapter model, another serial number
    other.write_text((ROOT / "udev" / "ftdi.umockdev").read_text().replace("serial=FT1234AB", "serial=FT9999ZZ"))
    output = sandbox.test(other, TTYUSB0)
    assert properties(output)["ID_VENDOR_ID"] == "0403"  # really processed
    assert "CARDD_ROLE" not in properties(output) and "/dev/cardd/" not in properties(output).get("DEVLINKS", "")
    assert not re.search(r"98-cardd-local\.rules:\d+ (MODE|GROUP|LINK)", output)


def test_commands_use_the_checkouts_venv():
    text = INSTALL.read_text()
    bare = [line for block in code_blocks(text) for line in block.splitlines()
            if re.search(r"(^|[\s`])python3? -m ", line)]
    bare += re.findall(r"`python3? -m [^`]*`", text)
    assert bare == [], f"use .venv/bin/python -m ... (as the rest of install.md): {bare}"
    assert text.count(".venv/bin/python -m drivers.") >= 3


def test_a_table_computer_installs_libusb_and_the_makefile_need_not():
    blocks = code_blocks(INSTALL.read_text())
    assert any(re.search(r"apt-get install[^\n]*\blibusb-1\.0-0\b", b) for b in blocks)
    assert "libusb" not in (ROOT / "Makefile").read_text()  # tests use the simulator backend
    assert "the tests and the demo never need it" in INSTALL.read_text()


#: "section 9", "sections 7-11", "sections 1 and 8", "§13", "step 2", "steps 1–2"
REFERENCE = re.compile(r"(?:\b(?:sections?|steps?) |§)(\d+)(?:\s*(?:[-–]|and)\s*(\d+))?")
#: a file outside install.md that points into it: "docs/install.md, section 9", "docs/install.md §4"
INSTALL_REFERENCE = re.compile(r"docs/install\.md,? (?:sections?|§) ?(\d+)(?:\s*(?:[-–]|and)\s*(\d+))?")


def sections() -> dict[int, str]:
    """install.md's numbered sections: number -> heading."""
    return {int(n): title for n, title in re.findall(r"^## (\d+)\. (.*)$", INSTALL.read_text(), re.M)}


def numbers(match: re.Match[str]) -> list[int]:
    first, last = int(match[1]), int(match[2] or match[1])
    return list(range(first, last + 1)) if "and" not in match[0] else [first, last]


def test_every_section_install_md_names_is_one_of_its_headings():
    known = sections()
    assert sorted(known) == list(range(14)), known
    dangling = [m[0] for m in REFERENCE.finditer(INSTALL.read_text()) if any(n not in known for n in numbers(m))]
    assert dangling == []


def test_files_that_point_into_install_md_name_existing_sections():
    known = sections()
    files = [*ROOT.glob("docs/*.md"), ROOT / "README.md", *(ROOT / "packaging").rglob("*"),
             *ROOT.glob("cardd/**/*.py"), *ROOT.glob("tests/**/*.py")]
    dangling = []
    for path in files:
        if path.is_file() and path != INSTALL and path.suffix not in {".png", ".whl", ".deb"}:
            for m in INSTALL_REFERENCE.finditer(path.read_text(errors="replace")):
                if any(n not in known for n in numbers(m)):
                    dangling.append(f"{path.relative_to(ROOT)}: {m[0]}")
    assert dangling == []


@pytest.mark.parametrize(("path", "line_says", "heading"), [
    ("packaging/cardd.toml", "the cardd daemon's configuration", "The configuration file"),
    ("packaging/cardd.toml", "RS-232", "A shuffler on RS-232"),
    ("packaging/cardd.toml", "readable by the API group", "Exports, retention and backups"),
    ("packaging/cardd.service", "as a service", "The systemd unit"),
    ("packaging/cardd.service", "generic USB-serial adapter", "A shuffler on RS-232"),
    ("packaging/cardd.service", "hardening", "The systemd unit"),
    ("packaging/deb/cardd.sysusers", "service user", "Group and service user"),
    ("packaging/deb/cardd.sysusers", "service user", "Users and role groups"),
])
def test_the_example_configuration_and_the_unit_point_to_the_sections_they_mean(path, line_says, heading):
    lines = [line for line in (ROOT / path).read_text().splitlines() if line_says in line]
    assert len(lines) == 1, lines
    found = INSTALL_REFERENCE.search(lines[0])
    assert found, lines[0]
    assert heading in [sections()[n] for n in numbers(found)], (lines[0], sections())


def test_install_md_is_typed_as_root_without_sudo():
    """A bare Debian 12 has no sudo: root types every command as given."""
    blocks = code_blocks(INSTALL.read_text())
    with_sudo = [line for block in blocks for line in block.splitlines() if re.search(r"\bsudo\b", line)]
    assert with_sudo == []
    assert any(line.startswith("runuser -u cardd -- ") and "--check-config" in line
               for block in blocks for line in block.splitlines())


def test_the_journals_directory_is_not_the_service_users_home():
    commands = " ".join(code_blocks(INSTALL.read_text())).replace("\\\n", " ")
    useradd = re.search(r"^useradd [^\n]*", commands, re.M)
    assert useradd and "--no-create-home" in useradd[0] and "/var/lib/cardd" not in useradd[0], useradd
    assert "--create-home" not in commands.replace("--no-create-home", "")
    assert "install -d -o cardd -g cardd -m 0711 /var/lib/cardd " in commands  # the unit's StateDirectoryMode
    unit = (ROOT / "packaging" / "cardd.service").read_text()
    assert "StateDirectory=cardd\n" in unit and "StateDirectoryMode=0711\n" in unit
    example = (ROOT / "packaging" / "cardd.toml").read_text()
    assert re.search(r'^path = "/var/lib/cardd/journal\.sqlite3"$', example, re.M)
    sysusers = (ROOT / "packaging" / "deb" / "cardd.sysusers").read_text()
    user = re.search(r"^u cardd - \"[^\"]*\" (\S+) ", sysusers, re.M)
    assert user and user[1] != "/var/lib/cardd", user


def test_the_firmware_key_the_example_names_is_installed_by_a_step():
    example = (ROOT / "packaging" / "cardd.toml").read_text()
    key = re.search(r'^public_key = "([^"]+)"$', example, re.M)
    assert key, "the example names no firmware key"
    installs = [line for block in code_blocks(INSTALL.read_text()) for line in block.splitlines()
                if line.startswith("install ") and f" {key[1]}" in line]
    assert len(installs) == 1, installs
