"""The locks (requirements/*.txt) hold what pyproject.toml asks for, each release pinned and hashed.

`make` installs the application only from the locks (`pip install --require-hashes`), so a
range added or narrowed in pyproject.toml without `make lock` would install something else on
a new machine or nothing at all; these checks say which package, offline, before that happens.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "lock.txt"
RUNTIME_LOCK = ROOT / "requirements" / "runtime.txt"
TOOLS_LOCK = ROOT / "requirements" / "tools.txt"

_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;\\]+)\s*(?:;\s*(?P<marker>[^\\]+?))?\s*\\?$")


@dataclass(frozen=True)
class Pin:
    name: str
    version: Version
    marker: Marker | None
    hashes: int


def read_lock(path: Path) -> list[Pin]:
    """Every ``name==version [; marker]`` of a lock, with the count of hashes that follow it."""
    pins: list[Pin] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("--hash=sha256:"):
            last = pins[-1]
            pins[-1] = Pin(last.name, last.version, last.marker, last.hashes + 1)
        elif match := _PIN.match(line):
            marker = match["marker"]
            pins.append(Pin(canonicalize_name(match["name"]), Version(match["version"]),
                            Marker(marker) if marker else None, 0))
        else:
            assert not line or line.startswith(("#", "--only-binary", " ")), f"{path.name}: not a pin: {line!r}"
    return pins


def here(pins: list[Pin]) -> dict[str, Version]:
    """The release of each package this machine's Python installs from the lock."""
    return {pin.name: pin.version for pin in pins if pin.marker is None or pin.marker.evaluate()}


def wanted(*extras: str) -> list[Requirement]:
    """What pyproject.toml asks for: the build backend, the runtime and the named extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    names = [*project["build-system"]["requires"], *project["project"]["dependencies"]]
    for extra in extras:
        names += project["project"]["optional-dependencies"][extra]
    return [Requirement(name) for name in names]


def unmet(requirements: list[Requirement], pinned: dict[str, Version]) -> list[str]:
    """Each requirement this machine needs whose pinned release is missing or out of its range."""
    wrong = []
    for req in requirements:
        if req.marker is not None and not req.marker.evaluate():
            continue
        version = pinned.get(canonicalize_name(req.name))
        if version is None or not req.specifier.contains(version, prereleases=True):
            wrong.append(f"{req}: {version or 'not in the lock'}")
    return wrong


@pytest.mark.parametrize(("lock", "extras"), [(LOCK, ("test", "bench")), (RUNTIME_LOCK, ())],
                         ids=["lock.txt", "runtime.txt"])
def test_a_lock_pins_a_release_in_range_for_every_requirement(lock: Path, extras: tuple[str, ...]) -> None:
    assert unmet(wanted(*extras), here(read_lock(lock))) == [], f"run `make lock`: {lock.name} is behind pyproject.toml"


def test_the_table_computer_runs_the_releases_ci_tested() -> None:
    """runtime.txt (what a table installs) pins each package at the release lock.txt (what make test runs) does."""
    tested = {(pin.name, pin.marker): pin.version for pin in read_lock(LOCK)}
    differ = [f"{pin.name} {pin.version} (lock.txt: {tested.get((pin.name, pin.marker), 'none')})"
              for pin in read_lock(RUNTIME_LOCK) if tested.get((pin.name, pin.marker)) != pin.version]
    assert differ == []


@pytest.mark.parametrize("lock", [LOCK, RUNTIME_LOCK, TOOLS_LOCK], ids=lambda path: path.name)
def test_every_pin_is_hashed_and_wheels_only(lock: Path) -> None:
    pins = read_lock(lock)
    assert pins and [pin.name for pin in pins if pin.hashes == 0] == []
    assert "--only-binary :all:" in lock.read_text(encoding="utf-8").splitlines()


def test_what_the_venv_runs_is_the_lock() -> None:
    """The interpreter running the tests has exactly the locked releases: a venv left from an older
    lock is made anew by make (`make test-latest` deselects this one: it runs the newest instead)."""
    def installed(name: str) -> Version | None:  # the release an import finds first, as Python would
        try:
            return Version(version(name))
        except PackageNotFoundError:
            return None
    locked = here(read_lock(LOCK))
    assert {name: f"{installed(name)} installed, {locked[name]} locked" for name in locked
            if installed(name) != locked[name]} == {}
