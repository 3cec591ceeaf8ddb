"""cardbench soak: random play through a real cardd with the invariants every round, device faults
and unplugs, the latency histogram, event counts, memory trend, PNG plot and HTML report.

CI: ``--shoes 20`` short shoes (the cut card after 30 cards, about 4 rounds a shoe) with faults
and unplugs at 0.15 each (about 11 s on the shared 2-core machine); and 3 full shoes each of seeds
1, 2 and 3 with a fifth of the rounds faulted and a tenth unplugged (about 20 s; seeds 1 to 20
with CARDD_FULL=1). The bench's rig gives the daemon a log file: an unread stderr pipe would fill
(64 KiB) and block the daemon's loop on its next log line, and this run would stall.
CARDD_FULL=1: 40 full 6-deck shoes (about 2 minutes; the soak's daemon takes every reopened port as
stable, where the default would take the shoe, unplugged about once a second, for a flapping device
and wait 5 s at each unplug: 14 minutes).
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture
from click.testing import CliRunner
from matplotlib.collections import LineCollection
from PIL import Image, PngImagePlugin

from cardd.bench.program import cardbench
from cardd.bench.runner import BenchRig, StepFailed
from cardd.bench.scenario import Scenario
from cardd.bench.soak import (FAULTS, RECONNECT_STABLE_S, TREND_MIN_ROUNDS, UNPLUGS, FaultMark, MemorySample,
                              SoakReport, _Play, cardd_version, expected_nets, plot_figure, soak, summary_lines)
from cardd.config import RULES_DIR
from cardd.journal import Journal
from core.rundirs import MARKER

FULL = bool(os.environ.get("CARDD_FULL"))
SHOES = 40 if FULL else 20


@pytest.mark.soak
@pytest.mark.timeout(1800 if FULL else 300)  # the full size runs for minutes: the suite's 120 s cut it short
def test_soak_passes_with_faults_and_unplugs_and_writes_plot_and_report(tmp_path: Path) -> None:
    png, page = tmp_path / "soak.png", tmp_path / "soak.html"
    size = ["--shoes", str(SHOES)] + ([] if FULL else ["--cut-at", "30"])
    result = CliRunner().invoke(cardbench, ["soak", *size, "--seed", "3", "--unplug-rate", "0.15", "--fault-rate", "0.15",
                                       "--plot", str(png), "--report", str(page)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert out.endswith("PASS") and re.search(r"at the end: ok, \d+ records verified", out), out
    walked = re.search(r"journal chain, walked round by round: (\d+) records", out)
    assert walked is not None and int(walked[1]) > 1000
    assert f"shoe {SHOES}/{SHOES}:" in out and f"RECONCILED {SHOES}," in out  # every shoe counted back
    injected = re.search(r"injected: (.*?); held rounds resumed: (\d+)", out)
    assert injected is not None
    assert {kind for kind, _ in re.findall(r"(\w+) (\d+)", injected[1])} == set(FAULTS) | set(UNPLUGS)
    assert int(injected[2]) > 0
    for reason in ("DEVICE_OFFLINE", "DEVICE_FAULT", "ROUND_HELD", "ROUND_RESUMED", "SETTLED", "CARD_ASSIGNED"):
        assert re.search(rf"\b{reason} \d+", out), reason  # the faults reached the daemon, and play went on
    assert "card latency histogram" in out and ">= 2000 ms" in out
    assert re.search(r"daemon memory: RSS .* MiB at the start, .* MiB at the end; (trend .* KiB per 1000 rounds .*: "
                     r"(flat|NOT flat)|too few rounds to extrapolate)", out)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = page.read_text()
    assert "<h1>cardbench soak: PASS</h1>" in text and "data:image/png;base64," in text
    assert "<h2>Card latency histogram</h2>" in text


#: the soak at a fifth of the rounds faulted and a tenth unplugged, as it stopped: three full six-deck
#: shoes, so a shoe's reboot and unplug fall in one round now and then (seeds 1 and 3 of 4 stopped so)
HARD_SEEDS = range(1, 21) if FULL else (1, 2, 3)
HARD_SHOES = 3


@pytest.mark.soak
@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", HARD_SEEDS)
def test_soak_with_a_fifth_of_rounds_faulted_and_a_tenth_unplugged_passes(seed: int) -> None:
    """cardbench soak --fault-rate 0.2 --unplug-rate 0.1 stopped with seeds 1 and 3: after a reboot and
    an unplug in one round the daemon asked the shoe for its Status on a link it had not resumed, and
    the count, taken before the reads it resent, was a SHOE_COUNT_MISMATCH that refused open_round."""
    result = CliRunner().invoke(cardbench, ["soak", "--shoes", str(HARD_SHOES), "--seed", str(seed),
                                            "--fault-rate", "0.2", "--unplug-rate", "0.1"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert out.endswith("PASS") and f"shoe {HARD_SHOES}/{HARD_SHOES}:" in out, out
    assert f"RECONCILED {HARD_SHOES}," in out and "SHOE_COUNT_MISMATCH" not in out
    assert re.search(r"at the end: ok, \d+ records verified", out), out


def _short_shoe(report: SoakReport, unplug_rate: float, **shoe_faults: Any) -> list[tuple[int, float]]:
    """One short shoe (the cut card after card 30, seed 3) of the soak's play through a rig like the
    soak's, the shoe's ``shoe_faults`` set first; the reopens of the shoe's port the daemon logged,
    as (attempt, delay). What the play raises is raised."""
    directory = Path(tempfile.mkdtemp(prefix="cardbench-soak-test-", dir="/tmp"))  # a socket path under 108 bytes
    play: _Play | None = None
    try:
        with BenchRig(Scenario(description="soak", rules="casino-000", step=[]), RULES_DIR / "casino-000.toml",
                      directory, reconnect_stable_s=RECONNECT_STABLE_S) as rig:
            play = _Play(rig, random.Random(3), report, unplug_rate, 0.0, 30, time.monotonic())
            rig.sim.shoe.set_faults(**shoe_faults)
            play.shoe()
            lines = [json.loads(line) for line in rig.log_path.read_text().splitlines() if line.startswith("{")]
            return [(line["attempt"], line["delay"]) for line in lines
                    if line["event"] == "port_retrying" and line["device"].endswith("/shoe")]
    finally:
        if play is not None:  # the daemon has stopped, so the watcher's connection has ended
            play.watcher.close()
            play.chain.close()
        shutil.rmtree(directory, ignore_errors=True)


def test_a_round_held_longer_than_the_resume_timeout_fails_the_soak_saying_what_it_waited_for(
        mocker: MockerFixture) -> None:
    # the shoe unplugged at its 3rd card (the first round's deal) and away for longer than the test:
    # the soak's wait for the resume gives up with one message, it does not wait on
    mocker.patch("cardd.bench.soak.RESUME_TIMEOUT_S", 1.0)
    report = SoakReport()
    with pytest.raises(StepFailed) as failed:
        _short_shoe(report, 0.0, disconnect_for=600.0, disconnect_at=3)
    message = str(failed.value)
    assert message.startswith("expected the round held (") and "resumed within 1 s (every device usable" in message
    assert message.endswith("got not usable: shoe-reader offline (link down)")
    assert report.resumed == 0


def test_the_soaks_daemon_reopens_a_shoe_unplugged_every_round_at_the_first_backoff_steps() -> None:
    # a shoe unplugged in every round is up less than the daemon's default 5 s between unplugs: a
    # flapping device by that rule, so each reopen waited longer, up to 5 s (the full soak spent 90 %
    # of its time there). The soak's daemon starts the schedule over at every reopen.
    report = SoakReport()
    retries = _short_shoe(report, 1.0)
    assert report.violations == [] and report.rounds >= 3
    assert report.injected["shoe_unplug"] == report.rounds == report.resumed
    # each unplug: the pty is away 0.3 s, so the first reopens find no device; then it is back
    assert [attempt for attempt, _ in retries].count(1) == report.rounds
    assert max(delay for _, delay in retries) <= 0.4, retries


def test_a_shoe_unplugged_and_rebooted_at_the_same_card_is_counted_after_the_reads_it_resends() -> None:
    # back from the unplug the shoe reboots as the daemon's handshake ends: the daemon shakes hands
    # again on the new link, the shoe resends its two reads, then answers the Status. The daemon
    # took the first handshake for done and asked for the Status on the new link before the shoe
    # was resumed: it counted out the two cards whose reads were still to come, a SHOE_COUNT_MISMATCH
    # that refused the next open_round (cardbench soak --fault-rate 0.2 --unplug-rate 0.1, seeds 1, 3)
    report = SoakReport()
    _short_shoe(report, 0.0, disconnect_for=0.3, disconnect_at=4, reboot_at=4)
    assert report.violations == [] and report.rounds >= 3 and report.resumed >= 1


def test_a_failed_soak_keeps_its_folder_with_the_journal_and_the_daemons_log(mocker: MockerFixture) -> None:
    # every round unplugs the shoe for 0.3 s; a resume awaited 0.01 s fails the first of them
    mocker.patch("cardd.bench.soak.RESUME_TIMEOUT_S", 0.01)
    report = soak(1, unplug_rate=1.0, cut_at=30)
    try:
        assert not report.passed and report.violations, report
        kept = report.kept_folder
        assert kept is not None and (kept / "cardd.log").stat().st_size > 0
        assert not (kept / MARKER).exists()  # kept for a person: no later run takes it for one left behind
        with Journal.open(kept / "journal.sqlite3", readonly=True) as journal:
            assert journal.verify().ok and journal.last_seq > 0
        lines = summary_lines(report)
        assert lines[-1] == (f"the run's folder is kept for inspection: {kept} (journal.sqlite3, "
                             "the daemon's log cardd.log)")
        # the report of a stopped run is whole: the shoe it stopped in, and the chain verified at the end
        # (it said "0 shoes, ..." and "at the end: " with nothing after it)
        assert lines[0].startswith(f"0 of 1 shoes played to their end (the run stopped in shoe 1), {report.rounds} "
                                   "rounds, ")
        assert report.chain_ok and re.fullmatch(r"ok, \d+ records verified", report.chain_detail), report.chain_detail
        assert lines[4].endswith(f"at the end: {report.chain_detail}")
    finally:
        if report.kept_folder is not None:
            shutil.rmtree(report.kept_folder)


def test_a_passed_soak_leaves_no_folder_behind() -> None:
    # this process's run folders only (their names start with its pid): other test processes' soaks
    # may be making and removing theirs meanwhile
    mine = f"cardbench-soak-{os.getpid()}-*"
    before = set(Path("/tmp").glob(mine))
    report = soak(1, cut_at=30)
    assert report.passed and report.kept_folder is None, report.violations
    assert set(Path("/tmp").glob(mine)) <= before
    # the chain's verdict in words, not the repr of the journal's VerifyResult
    assert re.fullmatch(r"ok, \d+ records verified", report.chain_detail), report.chain_detail
    assert summary_lines(report)[4].endswith(f"at the end: {report.chain_detail}")


def test_a_violation_fails_the_soak() -> None:
    report = SoakReport(chain_ok=True)
    assert report.passed
    report.violations.append("round 3: the table's piles hold 17 cards, 18 are out")
    assert not report.passed
    assert SoakReport(chain_ok=False).passed is False


def test_the_latency_histogram_counts_each_card_in_its_bucket() -> None:
    report = SoakReport(latencies_ms=[0.4, 1.0, 1.9, 4.0, 4.9, 150.0, 2500.0])
    buckets = dict(report.latency_histogram())
    assert buckets["< 1 ms"] == 1 and buckets["1-2 ms"] == 2 and buckets["2-5 ms"] == 2
    assert buckets["100-200 ms"] == 1 and buckets[">= 2000 ms"] == 1
    assert sum(buckets.values()) == 7
    assert report.latency_summary()["max"] == 2500.0 and report.latency_summary()["p50"] == 4.0


def _memory(values: list[int]) -> list[MemorySample]:
    return [MemorySample(round=10 * (i + 1), seconds=float(i), rss_kib=kib) for i, kib in enumerate(values)]


def test_flat_memory_is_flat_and_a_leak_is_not() -> None:
    flat = SoakReport(memory=_memory([50_000, 50_400, 49_900, 50_100, 50_300, 49_800, 50_200, 50_000, 50_100, 50_000]))
    trend = flat.memory_trend()
    assert trend is not None and trend.flat and abs(trend.fitted_growth_kib) < 500
    # 1 MiB every 10 rounds: 100 KiB a round, 100,000 KiB per 1000 rounds
    leak = SoakReport(memory=_memory([50_000 + 1024 * i for i in range(10)]))
    trend = leak.memory_trend()
    assert trend is not None and not trend.flat
    assert trend.slope_kib_per_1000_rounds == pytest.approx(102_400)
    assert trend.start_kib == 50_000 and trend.end_kib == 50_000 + 9 * 1024
    assert SoakReport(memory=_memory([1, 2, 3])).memory_trend() is None


def test_a_trend_over_too_few_rounds_is_not_extrapolated() -> None:
    """A 3-shoe soak said "+6219 KiB per 1000 rounds ... flat": a slope over its 79 rounds, which the first
    shoes' settling makes and a slow leak hides in. Below TREND_MIN_ROUNDS it gives no trend at all."""
    short = SoakReport(memory=_memory([50_000 + 60 * i for i in range(10)])).memory_trend()  # rounds 20..100 fitted
    assert short is not None and short.rounds_fitted == 80 and not short.enough
    assert short.describe() == ("RSS 48.8 MiB at the start, 49.4 MiB at the end; too few rounds to extrapolate "
                                f"(80 after the warm-up; a trend needs {TREND_MIN_ROUNDS})")
    assert "KiB per 1000 rounds" not in short.describe()
    long = SoakReport(memory=[MemorySample(round=200 * (i + 1), seconds=float(i), rss_kib=50_000) for i in range(10)])
    trend = long.memory_trend()
    assert trend is not None and trend.enough and trend.rounds_fitted == 1600
    assert trend.describe().endswith("trend +0.0 KiB per 1000 rounds (+0.00 MiB over the run): flat")


def _plotted(report: SoakReport) -> tuple[dict[str, list[float]], tuple[float, float], int]:
    """What the figure drew: each fault kind's marks (their x, in cards) on the latency plot, the
    memory axis' limits (MiB), and the lines on the memory plot."""
    fig = plot_figure(report)
    try:
        series, _, memory = fig.axes[:3]
        marks = {str(c.get_gid()).removeprefix("fault:"): [float(seg[0][0]) for seg in c.get_segments()]
                 for c in series.collections if isinstance(c, LineCollection)}
        low, high = memory.get_ylim()
        return marks, (low, high), len(memory.get_lines())
    finally:
        import matplotlib.pyplot as plt
        plt.close(fig)


def test_the_plot_marks_each_fault_at_its_card_and_scales_memory_to_the_data() -> None:
    report = SoakReport(rules="casino-000", shoes_asked=1, shoes=1, rounds=10, latencies_ms=[1.0] * 100,
                        memory=_memory([50_000 + 100 * i for i in range(10)]),
                        faults=[FaultMark("shoe_reboot", 2, 17, 0.5), FaultMark("shoe_unplug", 4, 40, 1.0),
                                FaultMark("shoe_unplug", 9, 85, 2.0)])
    marks, (low, high), lines = _plotted(report)
    assert marks == {"shoe_reboot": [17.0], "shoe_unplug": [40.0, 85.0]}
    # 48.8 .. 49.7 MiB: the axis spans that, not 0 .. 50 (where a few MiB of growth is a flat line)
    assert 48.0 < low < 48.9 and 49.7 < high < 50.5
    assert lines == 1  # the RSS, no trend line over 80 rounds
    long = SoakReport(memory=[MemorySample(round=200 * (i + 1), seconds=float(i), rss_kib=50_000 + i)
                              for i in range(10)], latencies_ms=[1.0])
    assert _plotted(long)[2] == 2  # the RSS and its trend


@pytest.mark.soak
@pytest.mark.timeout(300)
def test_the_soaks_report_and_plot_say_how_to_reproduce_the_run_and_when_each_fault_came(tmp_path: Path) -> None:
    png, page = tmp_path / "soak.png", tmp_path / "soak.html"
    args = ["soak", "--shoes", "3", "--cut-at", "30", "--seed", "3", "--fault-rate", "0.3", "--unplug-rate", "0.2",
            "--plot", str(png), "--report", str(page)]
    result = CliRunner().invoke(cardbench, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    run = re.search(r"run: (cardbench soak --shoes 3 --rules casino-000 --seed 3 --fault-rate 0\.3 --unplug-rate 0\.2 "
                    r"--cut-at 30; cardd (\S+), started (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ))", out)
    assert run is not None, out
    assert run[2] == cardd_version() and run[2] != "(not installed)"
    assert "daemon memory: RSS" in out and "too few rounds to extrapolate" in out
    injected = re.search(r"injected: (.*?); held rounds resumed", out)
    assert injected is not None
    counts = {kind: int(n) for kind, n in re.findall(r"(\w+) (\d+)", injected[1])}
    assert sum(counts.values()) >= 3, out

    image = Image.open(png)
    assert isinstance(image, PngImagePlugin.PngImageFile)
    text = image.text  # the PNG's text chunks
    assert text["Description"] == run[1] and text["Creation Time"] == run[3]
    assert (text["Seed"], text["Rules"], text["Fault rate"], text["Unplug rate"]) == ("3", "casino-000", "0.3", "0.2")
    assert text["Faults injected"] == str(sum(counts.values()))

    html = page.read_text()
    assert f'<p id="run">{run[1]}</p>' in html
    table = html.split('<table id="faults">', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr><td>(\w+)</td><td>(\d+)</td><td>(\d+)</td><td>([\d.]+)</td></tr>", table)
    assert {kind: sum(1 for row in rows if row[0] == kind) for kind in counts} == counts
    rounds = [int(row[1]) for row in rows]
    assert rounds == sorted(rounds) and all(1 <= r for r in rounds)
    cards = [int(row[2]) for row in rows]
    assert cards == sorted(cards) and all(1 <= c for c in cards)


def _round(boxes: dict[str, list[dict[str, Any]]], dealer: list[str]) -> dict[str, Any]:
    return {"boxes": boxes, "dealer": {"cards": dealer}}


def _hand(cards: list[str], index: int = 0, stake: int = 1000, doubled: int = 0) -> dict[str, Any]:
    return {"hand": index, "cards": cards, "stakes": {"p1": stake}, "doubled": {"p1": doubled} if doubled else {},
            "surrendered": False}


def test_the_bench_works_each_hands_net_itself() -> None:
    # worked by hand: blackjack 3:2 on 1000 is 1500; a double of 1000 won is +2000; 18 v 18 pushes
    r = _round({"1": [_hand(["AS", "KD"])], "2": [_hand(["5C", "6D", "9H"], doubled=1000)],
                "3": [_hand(["TC", "8S"])]}, ["TH", "8D"])
    assert expected_nets(r) == {("p1", 1, 0): Fraction(1500), ("p1", 2, 0): Fraction(2000), ("p1", 3, 0): 0}
    # a split hand's ace and ten is 21, not blackjack: it beats the dealer's 20 at 1:1
    r = _round({"4": [_hand(["AS", "KD"]), _hand(["AH", "7C"], index=1)]}, ["KH", "QD"])
    assert expected_nets(r) == {("p1", 4, 0): Fraction(1000), ("p1", 4, 1): Fraction(-1000)}
    # no hole card: the dealer's blackjack takes the doubled stake too; a bust lost before; blackjacks push
    r = _round({"1": [_hand(["5C", "6D", "2H"], doubled=1000)], "2": [_hand(["TC", "5S", "9D"])],
                "3": [_hand(["AC", "QS"])]}, ["AD", "KC"])
    assert expected_nets(r) == {("p1", 1, 0): Fraction(-2000), ("p1", 2, 0): Fraction(-1000), ("p1", 3, 0): 0}
    # an odd stake's blackjack leaves half a cent: exact
    r = _round({"1": [_hand(["AC", "JS"], stake=1005)]}, ["9D", "7C", "5H"])
    assert expected_nets(r) == {("p1", 1, 0): Fraction(3015, 2)}


def test_a_cut_card_the_soak_misplaced_is_said_plainly_and_the_tables_warning_checked() -> None:
    """`soak --rules casino-003 --cut-at 20` journaled CUT_CARD_MISPLACED and printed PASS with the warning
    only in the events' counts. Casino 003's sheet has the cut at least one deck (52 cards) from either
    end: the table warns (as for every casino), the soak says so in a line of its own and checks the
    warning came, one a shoe."""
    report = soak(2, rules="casino-003", cut_at=20)
    assert report.passed, report.violations
    assert report.misplaced_cut_shoes == 2 and report.events["CUT_CARD_MISPLACED"] == 2
    assert report.cut_line() == (
        "cut card MISPLACED: after card 20 (--cut-at), outside casino-003's window 157..260, against its rules; "
        "the table warned CUT_CARD_MISPLACED in 2 of 2 shoes, as it must. The verdict does not cover the cut: "
        "the soak misplaced it itself, for short shoes")
    assert report.cut_line() in summary_lines(report)


def test_a_cut_card_within_the_window_has_no_warning_and_says_so() -> None:
    report = soak(1, rules="casino-003", cut_at=157, unplug_rate=0.0, fault_rate=0.0)
    assert report.passed, report.violations
    assert report.cut_line() == ("cut card: after card 157 (--cut-at), within casino-003's window 157..260; "
                                 "CUT_CARD_MISPLACED in 0 of 1 shoes")


def test_a_misplaced_cut_card_the_table_did_not_warn_of_fails_the_soak() -> None:
    report = SoakReport(cut_at=20, cut_window=(157, 260), shoes=0)
    play = _Play.__new__(_Play)  # only the report is used by the check
    play.report = report
    play._check_cut(0)
    assert report.violations == ["shoe 1: the cut card after card 20 is outside the rules' window 157..260, "
                                 "the table said no CUT_CARD_MISPLACED"]
    play._check_cut(1)
    assert len(report.violations) == 1 and report.misplaced_cut_shoes == 1
