"""cardbench soak: random play through a real cardd with the invariants every round, unplugs, and the
PNG plot and HTML report. CI: two short shoes; CARDD_FULL=1: 20 full shoes (the issue's CI size)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardd.bench.cli import main
from cardd.bench.soak import SoakReport

FULL = bool(os.environ.get("CARDD_FULL"))


@pytest.mark.soak
def test_soak_passes_with_unplugs_and_writes_plot_and_report(tmp_path: Path) -> None:
    png, page = tmp_path / "soak.png", tmp_path / "soak.html"
    size = ["--shoes", "20"] if FULL else ["--shoes", "2", "--cut-at", "24"]
    result = CliRunner().invoke(main, ["soak", *size, "--seed", "3", "--unplug-rate", "0.3",
                                       "--plot", str(png), "--report", str(page)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "PASS" in out and "journal chain: VerifyResult(ok=True" in out
    assert "RECONCILED 2" in out or FULL  # each shoe counted back and reconciled
    assert "DEVICE_OFFLINE" in out and "ROUND_RESUMED" in out  # the unplugs happened and were handled
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = page.read_text()
    assert "<h1>cardbench soak: PASS</h1>" in text and "data:image/png;base64," in text


def test_a_violation_fails_the_soak() -> None:
    report = SoakReport(chain_ok=True)
    assert report.passed
    report.violations.append("round 3: 17 cards placed, 18 out")
    assert not report.passed
    assert SoakReport(chain_ok=False).passed is False


def test_memory_growth_compares_the_halves() -> None:
    report = SoakReport(memory_kib=[(5, 1000), (10, 1000), (15, 1400), (20, 1400)])
    assert report.memory_growth_kib() == 400
    assert SoakReport(memory_kib=[(5, 1000)]).memory_growth_kib() == 0
