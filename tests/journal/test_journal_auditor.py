"""The auditor's script in docs/journal.md, run as written (no cardd code), agrees with verify()."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from cardd.journal import Journal, JournalCorrupt
from tests.journal.journal_helpers import DAY_NS, FakeClock, fill, tamper

DOC = Path(__file__).resolve().parents[2] / "docs" / "journal.md"


def auditor_script() -> str:
    (script,) = re.findall(r"```python auditor\n(.*?)```", DOC.read_text(), re.S)
    assert len(script.strip().splitlines()) <= 20, "the doc promises an auditor script of at most 20 lines"
    return script


def audit(tmp_path: Path, journal: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "audit.py"
    script.write_text(auditor_script())
    return subprocess.run([sys.executable, "-I", str(script), str(journal)], capture_output=True, text=True,
                          timeout=60)


def first_bad(path: Path) -> tuple[int | None, str | None]:
    """What cardd finds: at open if the check on open sees it, else from verify()."""
    try:
        with Journal.open(path, readonly=True) as j:
            result = j.verify()
    except JournalCorrupt as error:
        return error.seq, error.problem
    return result.first_bad_seq, result.problem


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "j.db"
    with Journal.open(p, create=True) as j:
        fill(j, rounds=30, per_round=10)
    return p


def test_the_auditor_passes_a_good_journal(tmp_path, path):
    done = audit(tmp_path, path)
    assert (done.returncode, done.stdout.strip()) == (0, "OK through seq 300")


@pytest.mark.parametrize("sql, seq", [
    ("UPDATE records SET data = '{}' WHERE seq = 17", 17),
    ("DELETE FROM records WHERE seq = 17", 17),
    ("UPDATE records SET kind = 'event' || char(31) || 'shoe', source = '' WHERE seq = 17", 17),
    ("DELETE FROM records WHERE seq = 300", 300),
])
def test_the_auditor_names_the_same_first_bad_seq_as_verify(tmp_path, path, sql, seq):
    tamper(path, sql)
    done = audit(tmp_path, path)
    assert done.returncode != 0 and f"BAD at seq {seq}" in done.stderr
    assert first_bad(path)[0] == seq


def test_moving_a_field_boundary_changes_the_hash(tmp_path, path):
    """Every body was written with exactly eight separators: a shifted boundary adds one."""
    tamper(path, "UPDATE records SET kind = kind || char(31) || source, source = reason, reason = severity, "
                 "severity = who, who = ifnull(round, ''), round = data, data = '' WHERE seq = 17")
    assert "BAD at seq 17" in audit(tmp_path, path).stderr
    assert first_bad(path) == (17, "its hash does not match its content (edited?)")


def test_the_auditor_passes_a_pruned_journal_and_refuses_a_moved_anchor(tmp_path):
    path = tmp_path / "j.db"
    clock = FakeClock()
    with Journal.open(path, create=True, clock=clock) as j:
        fill(j, rounds=200, per_round=2, clock=clock, step_ns=DAY_NS)
        j.export(tmp_path / "old.jsonl", until=clock.now - 150 * DAY_NS)
        assert j.prune().pruned > 0
        last = j.last_seq
    done = audit(tmp_path, path)
    assert (done.returncode, done.stdout.strip()) == (0, f"OK through seq {last}")
    tamper(path, "DELETE FROM records WHERE seq <= (SELECT seq FROM anchor) + 2",
           "UPDATE anchor SET seq = seq + 2, hash = (SELECT prev FROM records ORDER BY seq LIMIT 1)")
    assert "BAD at seq" in audit(tmp_path, path).stderr
