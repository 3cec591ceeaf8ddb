"""The real rules engine (`udevadm test`) on emulated devices (umockdev), inside a private
mount namespace: the rules directory, /etc/group (with a 'cardd' group), /run and /dev are
the sandbox's own, so the machine's configuration is never touched."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

TOOLS = ("umockdev-run", "udevadm", "unshare")
TEST_GID = 4242  # the 'cardd' group inside the sandbox's own /etc/group

# Runs inside `unshare --mount`: private copies of the rules dir, /etc/group (with a cardd
# group so GROUP resolves), /run and /dev (udevadm test creates links there).
SANDBOX = """set -e
T=$1; shift
mount --make-rprivate /
mount --bind "$T/rules" /etc/udev/rules.d
mount --bind "$T/group" /etc/group
mount -t tmpfs tmpfs /run
mount --rbind /dev "$T/hostdev"
mount -t tmpfs tmpfs /dev
for n in null zero random urandom; do touch /dev/$n; mount --bind "$T/hostdev/$n" /dev/$n; done
# umockdev backs emulated ttys with ptys: a private devpts instance
mkdir /dev/pts; mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts; ln -s pts/ptmx /dev/ptmx
exec "$@"
"""

# root gets a plain mount namespace; anyone else a user namespace in which they are root
UNSHARE = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "--map-root-user", "--mount"]


class UdevSandbox:
    """A directory holding the rules files ``rules`` (name -> text) and the sandbox script."""

    def __init__(self, directory: Path, rules: dict[str, str]) -> None:
        missing = [tool for tool in TOOLS if shutil.which(tool) is None]
        if missing:
            pytest.fail(f"missing {', '.join(missing)}: `make test` installs them "
                        "(apt-get install umockdev udev util-linux)")
        self.directory = directory
        (directory / "rules").mkdir()
        (directory / "hostdev").mkdir()
        for name, text in rules.items():
            (directory / "rules" / name).write_text(text)
        group = Path("/etc/group").read_text()
        (directory / "group").write_text(group + f"cardd:x:{TEST_GID}:\n")
        (directory / "sandbox.sh").write_text(SANDBOX)

    def test(self, description: Path, syspath: str) -> str:
        """What `udevadm test syspath` says (stdout and stderr) with ``description`` emulated."""
        proc = subprocess.run(
            [*UNSHARE, "sh", str(self.directory / "sandbox.sh"), str(self.directory),
             "umockdev-run", "--device", str(description), "--", "udevadm", "test", syspath],
            capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"udevadm test failed for {syspath}:\n{proc.stderr}\n{proc.stdout}"
        return proc.stdout + proc.stderr


def properties(output: str) -> dict[str, str]:
    return dict(re.findall(r"^([A-Z_][A-Z0-9_]*)=(.*)$", output, re.M))
