"""A clean Debian 12 root for the package's test: debootstrap's minbase plus what cardd's package
depends on (so ``apt install ./cardd_*.deb`` fetches nothing), made once and kept as a tarball in
the cache folder, keyed on the suite, the variant, the package list and the mirror; each test
unpacks a fresh copy. The first run needs Debian's mirror and takes about 3 minutes; later ones
unpack in a few seconds.

Commands run in the root through ``unshare --mount`` (its own mount namespace: /proc, a private
devpts and its ptmx are mounted there and vanish with the command) and ``chroot``.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

SUITE = "bookworm"
VARIANT = "minbase"
MIRROR = "http://deb.debian.org/debian"
#: the package's Depends and Recommends (packaging/deb/control.in), present before it is installed
#: (Debian 12's python3 is python3.11)
INCLUDE = ("python3", "libusb-1.0-0", "systemd", "udev")
#: what every command in the root gets first: /proc, and pseudo-terminals of its own (the simulators')
MOUNTS = ("mount -t proc proc /proc && mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts && "
          "mount --bind /dev/pts/ptmx /dev/ptmx")


def cache_folder() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cardd" / "debian-roots"


def tarball() -> Path:
    """The cached root's tarball, made with debootstrap when it is not there yet."""
    key = hashlib.sha256(repr((SUITE, VARIANT, INCLUDE, MIRROR)).encode()).hexdigest()[:16]
    path = cache_folder() / f"{SUITE}-{VARIANT}-{key}.tar"
    if path.exists():
        return path
    assert shutil.which("debootstrap") is not None, "no debootstrap: `make sysdeps` installs it (make test does)"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="debootstrap-", dir=path.parent) as scratch:
        root = Path(scratch) / "root"
        # in a mount namespace of its own, so the /proc and /sys it mounts in the root go with it,
        # even when it is killed (a timeout): left mounted, the scratch folder could not be removed
        done = subprocess.run(["unshare", "--mount", "--propagation", "private", "--fork", "--kill-child",
                               "debootstrap", f"--variant={VARIANT}", f"--include={','.join(INCLUDE)}", SUITE,
                               str(root), MIRROR], capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, f"debootstrap: {done.stdout[-3000:]}{done.stderr[-2000:]}"
        for deb in (root / "var" / "cache" / "apt" / "archives").glob("*.deb"):  # debootstrap's downloads
            deb.unlink()
        partial = path.with_suffix(".partial")
        subprocess.run(["tar", "-C", str(root), "-cf", str(partial), "."], check=True, timeout=600)
        partial.rename(path)  # whole or not at all: a run cut short leaves no half tarball
    return path


def unpack(into: Path) -> Path:
    """A fresh copy of the clean root in ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-C", str(into), "-xf", str(tarball())], check=True, timeout=600)
    return into


def in_root(root: Path, script: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``script`` (sh) run as root in ``root``, its output captured."""
    return subprocess.run(["unshare", "--mount", "--fork", "chroot", str(root), "/bin/sh", "-c",
                           f"{MOUNTS} && {script}"], capture_output=True, text=True, timeout=timeout,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"})


def start_in_root(root: Path, cardd: str, log: Path) -> subprocess.Popen[bytes]:
    """The command line ``cardd`` (cardd and its options) started in ``root`` and left running, its
    output into ``log``: exec'd by the shell unshare forks, so unshare's one child is cardd, which
    stops with it (``--stop-with-parent``)."""
    with log.open("wb") as out:
        return subprocess.Popen(["unshare", "--mount", "--fork", "chroot", str(root), "/bin/sh", "-c",
                                 f'{MOUNTS} && exec {cardd} --stop-with-parent "$PPID"'], stdout=out,
                                stderr=subprocess.STDOUT, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"})


def stop_in_root(started: subprocess.Popen[bytes]) -> int:
    """SIGTERM to the cardd :func:`start_in_root` started (unshare's child); its exit code."""
    if started.poll() is None:
        for child in Path(f"/proc/{started.pid}/task/{started.pid}/children").read_text().split():
            os.kill(int(child), signal.SIGTERM)
    return started.wait(timeout=30)
