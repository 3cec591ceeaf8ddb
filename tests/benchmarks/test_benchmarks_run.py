"""Every benchmark runs to its figures at its smallest size: a benchmark is run by hand, seldom,
so one an API change broke would otherwise be found broken only when its figures are wanted
(benchmarks/card_path.py was, for a day). Nothing here times anything or checks a figure
against its target: each run must end with exit 0 and print the lines its figures are on."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"

#: script -> (its smallest arguments, {what: a pattern its output must hold}); {tmp} is a new directory
RUNS: dict[str, list[tuple[list[str], dict[str, str]]]] = {
    "bench_run.py": [(["--jobs", "1", "--library", "cardd/bench/scenarios/casino-000/card-drawn-in-error.toml"],
                      {"the run": r"cardbench run: 1 scenarios, --jobs 1: [\d.]+ s wall.*exit 0 \(all passed\)"})],
    "bench_simulate.py": [(["--rounds", "20", "--jobs", "1"], {"the rate": r"[\d,]+ rounds/s",
                                                              "the house edge": r"house edge -?[\d.]+ %"})],
    "card_path.py": [(["--shoes", "1"], {"CPU a card": r"card path \(no-round, 1 shoes.*CPU [\d.]+ us a card"}),
                     (["--shoes", "1", "--stream", "rounds"], {"CPU a card": r"card path \(rounds, 1 shoes.*CPU [\d.]+ us a card"})],
    "cli.py": [(["--runs", "2"], {"--version": r"cardctl --version: median \d+ ms of 2 runs.*target 100 ms",
                                   "status": r"cardctl status .*: median \d+ ms of 2 runs.*target 200 ms",
                                   "imports": r"cardctl status: \d+ ms; slowest: \S+ \d+"})],
    # 314 cards one at a time: more than a shoe holds (312), so the latency phases take a second shoe
    "daemon.py": [(["--cards", "314", "--rate-shoes", "1", "--shoes", "1", "--idle-seconds", "0.5"],
                   {"start-up": r"start-up \(empty journal\): \d+ ms",
                    "the floor": r"the floor: .* one every 5 ms: p50 [\d.]+ ms",
                    "1 subscriber": r"subscriber,  1 subscriber\(s\), 314 cards: p50 [\d.]+ ms, p99 [\d.]+ ms",
                    "50 subscribers": r"subscriber, 50 subscriber\(s\), 314 cards: p50 [\d.]+ ms, p99 [\d.]+ ms",
                    "sustained": r"sustained: 312 card reads \(1 shoes\) end to end at [\d,]+ cards/s",
                    "each shoe": r"each shoe's own rate: min [\d,]+, median [\d,]+, max [\d,]+ cards/s",
                    "RSS": r"RSS after shoes: 1: [\d.]+ MB",
                    "idle CPU": r"idle CPU over .*: [\d.]+ % of a core",
                    "restart": r"start-up \(journal of [\d,]+ records\): \d+ ms"})],
    "deal.py": [(["--shoes", "1", "--repeat", "1"], {"the rate": r"cards/s: best [\d,]+"})],
    "export.py": [(["--backlog", "2000", "--cards", "20", "--path-cards", "20", "--shoes", "1", "--idle-seconds", "0.5"],
                   {"drain": r"drain: 2,000 of 2,000 backlog records delivered in [\d.]+ s = [\d,]+ records/s",
                    "RSS": r"RSS with a 2,000-record backlog: [\d.]+ MB",
                    "floor latency": r"floor latency, .* 20 cards at 20 cards/s: p50 [\d.]+ ms, p99 [\d.]+ ms",
                    "SIGSTOP": r"broker running: p50 [\d.]+ ms.*broker SIGSTOP'ed .*p50 [\d.]+ ms, p99 [\d.]+ ms",
                    "CPU a record": r"the export's extra CPU -?[\d.]+ us a record",
                    "idle CPU": r"idle CPU .*: export on [\d.]+ %, off [\d.]+ % of a core"})],
    "floor.py": [(["--part", "tables", "--tables", "3", "--warmup", "1", "--seconds", "2", "--backlog-hours", "0.02"],
                  {"idle": r"3 tables idle: up in \d+ s; .* the tables' CPU [\d.]+ % of a core .*RSS [\d,]+ MB",
                   "at pace": r"3 tables at pace: .*[\d,.]+ records/s committed, [\d,.]+ delivered",
                   "drain": r"3 tables each 0.02 h behind: [\d,]+ records written"}),
                 (["--part", "cardfloor", "--tables", "3", "--warmup", "1", "--seconds", "3", "--backlog-hours", "0.02"],
                  {"latency": r"cardfloor, 3 tables at pace: .* commit-to-archive p50 \d+ ms, p99 \d+ ms.*"
                              r"commit-to-SSE p50 \d+ ms, p99 \d+ ms",
                   "CPU and RSS": r"cardfloor CPU [\d.]+ % of a core, RSS \d+ MB",
                   "disk": r"[\d.]+ MB a table a day",
                   "drain": r"cardfloor, 3 tables each 0.02 h behind: [\d,]+ records archived within \d+ s"}),
                 (["--part", "browsers", "--tables", "3", "--browsers", "1", "--warmup", "2", "--seconds", "8",
                   "--heap-every", "4"],
                  {"latency": r"floor page, 3 tables, 1 browsers .* change-to-painted p50 \d+ ms, p99 \d+ ms",
                   "heap": r"JS heap after GC [\d.]+ MB at the start, [\d.]+ MB after",
                   "CPU": r"cardfloor CPU [\d.]+ % of a core, RSS \d+ MB at the start, \d+ MB at the end \(peak \d+\); Chromium at nice \d+ [\d.]+ %",
                   "load": r"load average [\d.]+-[\d.]+"})],
    "frame_tag.py": [(["--frames", "200"], {"tagged": r"2.0 tagged \(ChaCha20-Poly1305\) +[\d.]+ +[\d.]+ +42",
                                            "AEAD alone": r"AEAD alone: ChaCha20-Poly1305 seal [\d.]+ us, open [\d.]+ us"})],
    "journal.py": [(["--records", "2000", "--path", "{tmp}/journal.db", "--repeat", "2"],
                    {"append": r"append, one record per commit .*: p50 [\d.]+ ms",
                     "query": r"query one round \(.*\): median [\d.]+ ms",
                     "verify": r"verify \(one process\): 2,000 records in [\d.]+ s = [\d,]+ records/s"})],
    "journal_append.py": [(["--batches", "1,16", "--records", "64", "--rounds", "1"],
                           {"the fit": r"fit: [\d.]+ us per commit \+ [\d.]+ us per record"})],
    "link.py": [(["--requests", "20", "--warmup", "5", "--cards", "52", "--modbus-requests", "20"],
                 {"round trip, 1.1 and 2.0": r"STATUS round trip, median +[\d.]+ ms +[\d.]+ ms +[\d.]+ ms",
                  "cards, 1.1 and 2.0": r"card frames/s, sustained +[\d,]+ +[\d,]+ +[\d,]+",
                  "the columns": r"figure +1\.1, connection +1\.1, link +2\.0, link"})],
    "rx_path.py": [(["--shoes", "1"], {"CPU a card": r"1 shoes, 312 cards: host receive path [\d.]+ us CPU a card"})],
    "sim_deal.py": [(["--shoes", "1"], {"CPU a card": r"devices [\d.]+ us CPU a card"})],
}


def test_every_benchmark_has_a_run() -> None:
    scripts = {path.name for path in BENCHMARKS.glob("*.py") if not path.name.startswith("_")}
    assert scripts == set(RUNS), "a benchmark without a run here, or a run of none"


@pytest.mark.parametrize(("script", "args", "expected"),
                         [pytest.param(script, args, expected, id=" ".join([script, *args]))
                          for script, runs in RUNS.items() for args, expected in runs])
def test_benchmark_runs_to_its_figures(script: str, args: list[str], expected: dict[str, str], tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), *(a.format(tmp=tmp_path) for a in args)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{script} ended with {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    missing = [what for what, pattern in expected.items() if not re.search(pattern, done.stdout)]
    assert not missing, f"{script} printed no {', '.join(missing)}:\n{done.stdout[-3000:]}"
