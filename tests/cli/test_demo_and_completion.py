"""``make demo``'s program (``python -m cardd.cli.demo --fast``) through the real daemon, and
cardctl's shell completion."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.cli.cli_rig import CARDCTL, cardctl
from tests.daemon.daemon_rig import remove, state_dir


@pytest.mark.timeout(400)
def test_the_demo_plays_a_whole_shoe_through_the_daemon_and_its_journal_verifies():
    directory = state_dir()
    try:
        done = subprocess.run([sys.executable, "-m", "cardd.cli.demo", "--fast", "--state-dir", str(directory)],
                              capture_output=True, text=True, timeout=380)
        assert done.returncode == 0, done.stderr[-3000:]
        out = done.stdout
        played = re.search(r"rounds played: (\d+), voided: (\d+)", out)
        assert played and int(played.group(1)) >= 10 and int(played.group(2)) >= 1
        assert "FACE_UP_CARD" in out and "SHUFFLER_MALFUNCTION" in out and "shoe-reader offline" in out
        assert re.search(r"reconciliation: .*reconciled", out)
        dealt = re.search(r"cards dealt: (\d+), returned undealt: (\d+)", out)
        assert dealt and int(dealt.group(1)) + int(dealt.group(2)) == 312
        assert re.search(r"box \d -?[\d,]+\.\d\d", out)  # money per box
        assert "chain intact" in out
        decisions = dict(re.findall(r"(hit|stand|double|split|surrender|insurance) (\d+)", out.split("decisions: ")[1]
                                    .splitlines()[0]))
        assert int(decisions["hit"]) > 0 and int(decisions["stand"]) > 0
        verify = cardctl(None, "verify-journal", "--file", str(directory / "journal.sqlite3"), "--json")
        assert verify.code == 0 and verify.json()["ok"] is True
    finally:
        remove(directory)


def test_shell_completion_scripts_and_completions():
    for shell in ("bash", "zsh", "fish"):
        script = subprocess.run([str(CARDCTL)], env={**os.environ, "_CARDCTL_COMPLETE": f"{shell}_source"},
                                capture_output=True, text=True)
        assert script.returncode == 0 and "_CARDCTL_COMPLETE" in script.stdout, shell
    words = subprocess.run([str(CARDCTL)], capture_output=True, text=True,
                           env={**os.environ, "_CARDCTL_COMPLETE": "bash_complete", "COMP_WORDS": "cardctl ro",
                                "COMP_CWORD": "1"})
    assert "round" in words.stdout
