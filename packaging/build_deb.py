"""Build cardd's Debian package, ``cardd_<version>_<arch>.deb``, into a folder (``make deb``): a
staged tree (a venv under /opt/cardd/venv, the programs' links, the unit, udev rules, sysusers,
tmpfiles, conffiles, docs and man pages) built with ``dpkg-deb --build``. The tree and why not
debhelper: docs/dependencies.md.

    python packaging/build_deb.py OUT_DIR      # prints the package's path"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_wheel import ROOT, build_wheel  # noqa: E402
from man_pages import write_man_pages  # noqa: E402

DEB = ROOT / "packaging" / "deb"
PREFIX = Path("/opt/cardd/venv")
#: the Python of Debian 12, the one the venv (and its compiled wheels) is made for
PYTHON = "/usr/bin/python3.11"
PROGRAMS = ("cardd", "cardctl", "cardbench")
#: the wheel's programs a table computer does not run: cardfloor is the floor's service, installed
#: on the floor's server with the wheel's `floor` extra (docs/floor-service.md); its libraries
#: are not in runtime.txt, so its script is left out of the table's package
NOT_PACKAGED = ("cardfloor",)
CONFFILES = ("/etc/cardd/cardd.toml", "/etc/cardd/rules.toml")


def version() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return str(project["project"]["version"])


def architecture() -> str:
    return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout.strip()


def _install(source: Path, target: Path, mode: int = 0o644) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    target.chmod(mode)


def _venv(stage: Path, wheel: Path) -> Path:
    """The venv under ``stage`` + PREFIX, its own paths rewritten to PREFIX; its site-packages."""
    venv = stage / PREFIX.relative_to("/")
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "--disable-pip-version-check",
           "install", "--quiet", "--no-compile"]
    subprocess.run([*pip, "--require-hashes", "-r", str(ROOT / "requirements" / "runtime.txt")], check=True)
    subprocess.run([*pip, "--no-deps", str(wheel)], check=True)
    for path in [*(venv / "bin").iterdir(), venv / "pyvenv.cfg"]:
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if str(venv).encode() in data:
                path.write_bytes(data.replace(str(venv).encode(), str(PREFIX).encode()))
    for program in NOT_PACKAGED:
        (venv / "bin" / program).unlink()
    for cache in list(venv.rglob("__pycache__")):
        shutil.rmtree(cache)
    for direct_url in venv.rglob("direct_url.json"):  # names the build's temporary wheel
        direct_url.unlink()
    (site_packages,) = (venv / "lib").glob("python3.*/site-packages")
    return site_packages


def _installed_size(stage: Path) -> int:
    """KiB, as dpkg counts them: each file's size rounded up to a KiB, one for each other entry."""
    total = 0
    for path in stage.rglob("*"):
        if path.relative_to(stage).parts[0] == "DEBIAN":
            continue
        total += -(-path.lstat().st_size // 1024) if path.is_file() and not path.is_symlink() else 1
    return total


def build_deb(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    name = f"cardd_{version()}_{architecture()}.deb"
    with tempfile.TemporaryDirectory(prefix="cardd-deb-") as scratch:
        stage = Path(scratch) / "root"
        site_packages = _venv(stage, build_wheel(Path(scratch) / "wheel"))
        for program in PROGRAMS:
            (stage / "usr" / "bin").mkdir(parents=True, exist_ok=True)
            (stage / "usr" / "bin" / program).symlink_to(PREFIX / "bin" / program)
        _install(ROOT / "packaging" / "cardd.service", stage / "lib" / "systemd" / "system" / "cardd.service")
        _install(ROOT / "udev" / "99-cardd.rules", stage / "lib" / "udev" / "rules.d" / "99-cardd.rules")
        _install(DEB / "cardd.sysusers", stage / "usr" / "lib" / "sysusers.d" / "cardd.conf")
        _install(DEB / "cardd.tmpfiles", stage / "usr" / "lib" / "tmpfiles.d" / "cardd.conf")
        _install(ROOT / "packaging" / "cardd.toml", stage / "etc" / "cardd" / "cardd.toml", 0o640)
        _install(site_packages / "cardd" / "rules" / "casino-000.toml", stage / "etc" / "cardd" / "rules.toml",
                 0o640)
        shared = stage / "usr" / "share" / "cardd"
        shared.mkdir(parents=True)
        (shared / "rules").symlink_to(Path("/") / site_packages.relative_to(stage) / "cardd" / "rules")
        doc = stage / "usr" / "share" / "doc" / "cardd"
        for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
            _install(page, doc / page.name)
        _install(DEB / "copyright", doc / "copyright")
        write_man_pages(stage / PREFIX.relative_to("/"), stage / "usr" / "share" / "man" / "man1", version())
        for cache in list((stage / PREFIX.relative_to("/")).rglob("__pycache__")):  # what --help compiled
            shutil.rmtree(cache)
        control = stage / "DEBIAN"
        control.mkdir()
        (control / "control").write_text((DEB / "control.in").read_text().format(
            version=version(), arch=architecture(), installed_size=_installed_size(stage)))
        (control / "conffiles").write_text("".join(f"{path}\n" for path in CONFFILES))
        for script in ("postinst", "prerm", "postrm"):
            _install(DEB / script, control / script, 0o755)
        sums = [f"{hashlib.md5(p.read_bytes()).hexdigest()}  {p.relative_to(stage)}\n"
                for p in sorted(stage.rglob("*")) if p.is_file() and not p.is_symlink()
                and p.relative_to(stage).parts[0] != "DEBIAN"]
        (control / "md5sums").write_text("".join(sums))
        for path in stage.rglob("*"):  # umask-independent modes: 0755 folders, files as made
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z6", "--build", str(stage), str(out / name)],
                       check=True, stdout=subprocess.DEVNULL)
    return out / name


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python packaging/build_deb.py OUT_DIR")
    os.umask(0o022)
    try:
        print(build_deb(Path(sys.argv[1]).absolute()))
    except subprocess.CalledProcessError as exc:
        sys.exit(f"build_deb: {exc.cmd[0]} failed with exit {exc.returncode} (its output is above)")
