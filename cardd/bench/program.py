"""``cardbench``'s command group (the entry point, cardd.bench.cli, imports it): the bench's
command line (click for the commands, rich for the reports).

It shares cardctl's command-line pieces (cardd/cli/common.py): the top group is cardctl's
``Program``; its console, the ending signals and the output files' check are cardctl's too.
"""
from __future__ import annotations

import json
import logging
import math
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import IO

import click
from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)
from rich.table import Table as RichTable
from rich.text import Text

from cardd.bench.floor import TABLES_PER_PROCESS, FloorError, FloorOptions, run as run_floor
from cardd.bench.junit import write_junit
from cardd.bench.randomness import (MINIMUM_SHUFFLES, DeviceOpenError, DeviceShuffleSource, RandomnessError,
                                    ShuffleSource, qualify)
from cardd.bench.replay import ReplayError, check as check_trace, record as record_scenario, trace_files
from cardd.bench.runner import ScenarioResult, run_scenario
from cardd.bench.scenario import ROLES, ScenarioError, scenario_files
from cardd.bench.soak import SoakReport, plot_png, report_html, soak as run_soak, summary_lines
from cardd.bench.pty_transport import simulation_for
from cardd.bench.simulate import (MIN_ROUNDS, SimulationError, Summary, cluster_address, default_jobs, play, rules_for,
                                  run_cluster, run_jobs)
from cardd.bench.strategy import STRATEGIES
from cardd.cli.common import CliError, OutputFile, Program, logs_to_stderr
from cardd.cli.device import device_error, parse_device_url
from core.ctrl_c import end_like_ctrl_c
from cardd.cli.console import ProgramConsole
from cardd.cli.program import CONTEXT
from cardd.cli.shown import shown
from cardd.config import named_rules, rule_names
from core.errors import CarddError
from devices.game.dealer_odds import OUTCOMES, UP_CARDS, dealer_table
from devices.game.rules import HouseRules, load_rules
from drivers.errors import BadURL
from drivers.urls import parse_url
from core.cards import Card


@click.group(cls=Program, context_settings=CONTEXT)  # cardctl's top group and settings: -h, | head
@click.version_option(package_name="cardd", prog_name="cardbench")
def cardbench() -> None:
    """cardbench: Monte Carlo, shuffler randomness qualification (docs/bench.md)."""
    # the table logs every device and shoe transition: warnings only (a bench run reports its own
    # figures), on stderr, never among simulate's JSON lines
    logs_to_stderr(logging.WARNING)
    end_like_ctrl_c()  # a kill stops the scenario's cardd (and its devices) as Ctrl-C does


def _files(paths: tuple[Path, ...], find: Callable[[list[Path]], list[Path]], what: str) -> list[Path]:
    """The files ``find`` names or finds under ``paths`` (scenarios, traces); a usage error when it
    refuses a path or finds none."""
    try:
        files = find(list(paths))
    except (ScenarioError, ReplayError) as exc:
        raise click.UsageError(str(exc)) from None
    if not files:
        raise click.UsageError(f"no {what} under {', '.join(map(str, paths))}")
    return files


def each_in_parallel(jobs: int, work: Callable[[Path], ScenarioResult], files: list[Path],
                     done: Callable[[ScenarioResult], None]) -> None:
    """``work`` on every file, ``jobs`` at a time, ``done`` with each result as it ends. An interrupt
    (Ctrl-C, a kill: :func:`end_like_ctrl_c`) cancels the files not started and waits only for the
    running ones, each of which stops its own cardd on the way out."""
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        try:
            for future in as_completed([pool.submit(work, path) for path in files]):
                done(future.result())
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise


#: a report line's marks, each in its colour
PASS, FAIL, SKIP = ("pass", "green"), ("FAIL", "red"), ("skip", "yellow")


def marked(mark: tuple[str, str], text: object) -> Text:
    """A report line: the mark in its colour, then the run's text (a path, a scenario's message, the
    journal's and the devices' words in it) shown as text (cardd.cli.shown)."""
    return Text.assemble(mark, " ", shown(text))


def finish(console: Console, results: list[ScenarioResult], elapsed: float, jobs: int, junit: Path | None,
           count_skipped: bool) -> None:
    """The end of a run or a replay: the skipped and failed ones, the totals, the JUnit file, and
    exit 1 on any failure."""
    results.sort(key=lambda r: str(r.path))
    skipped = [r for r in results if r.skipped]
    failed = [r for r in results if not r.passed and not r.skipped]
    for result in skipped:
        console.print(marked(("SKIPPED", "yellow"), result.skipped), soft_wrap=True)
    for result in failed:
        # a message's lines (a replay's differing fields) each its own line, each shown as text
        first, *more = result.message.split("\n")
        console.print(marked(FAIL, first))
        for line in more:
            console.print(shown(line))
    totals = f"{len(results) - len(failed) - len(skipped)} passed, {len(failed)} failed"
    if count_skipped:
        totals += f", {len(skipped)} skipped"
    console.print(f"[bold]{totals}[/] in {elapsed:.1f} s ({jobs} job(s))")
    if junit is not None:
        write_junit(results, junit, elapsed)
    if failed:
        sys.exit(1)

@cardbench.command()
@click.option("--rounds", type=click.IntRange(1), default=10_000, show_default=True)
@click.option("--decks", type=click.IntRange(1, 8), default=6, show_default=True)
@click.option("--boxes", type=click.IntRange(1, 7), default=1, show_default=True)
@click.option("--strategy", type=click.Choice(sorted(STRATEGIES)), default="basic", show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--rules", "rules_name", metavar="NAME|PATH",
              help=f"house rules: a seed casino's name ({', '.join(rule_names())}) or the path of a rules "
                   "file (default: the built-in defaults); --decks overrides its decks")
@click.option("--out", type=OutputFile(),
              help="write the JSON lines here instead of stdout")
@click.option("--no-rounds", is_flag=True, help="only the summary, no JSON line per round")
@click.option("--transport", type=click.Choice(["inprocess", "pty"]), default="inprocess", show_default=True,
              help="inprocess: the deal tracker fed in this process; pty: the simulators behind ptys, "
                   "the serial driver, link and session, the library's feed")
@click.option("--jobs", type=click.IntRange(1), default=None,
              help="processes dealing shoes (in-process transport; default: the CPUs available); "
                   "the output does not depend on it")
@click.option("--cluster", metavar="ADDRESS",
              help="deal the shoes on the workers of the Dask distributed scheduler at ADDRESS "
                   "(tcp://host:8786) instead of --jobs processes: the same output for the same seed")
def simulate(rounds: int, decks: int, boxes: int, strategy: str, seed: int, rules_name: str | None,
             out: Path | None, no_rounds: bool, transport: str, jobs: int | None, cluster: str | None) -> None:
    """Play ROUNDS rounds through the real deal tracker; one JSON line per round, then a summary."""
    try:
        base = load_rules(named_rules(rules_name)) if rules_name else HouseRules.default()
        rules = rules_for(base, decks, boxes)
        if cluster is not None:
            cluster_address(cluster)
    except CarddError as exc:
        raise click.UsageError(str(exc)) from None
    if transport == "pty" and jobs not in (None, 1):
        raise click.UsageError(f"--jobs {jobs}: the pty transport deals in one process (one pair of devices)")
    if cluster is not None and (jobs is not None or transport == "pty"):
        raise click.UsageError(f"--cluster with {'--jobs' if jobs is not None else '--transport pty'}: "
                               "the cluster's workers deal the shoes (in-process transport)")
    sink: IO[str] | None = None
    if not no_rounds:
        sink = out.open("w") if out else sys.stdout
    # the summary goes where the JSON lines do not
    report = ProgramConsole(stderr=sink is sys.stdout)
    # the rounds done and the time left, on a terminal that is not showing the JSON lines
    live = ProgramConsole(stderr=True)
    shown_live = live.is_terminal and not (sink is not None and sink.isatty())
    columns = (TextColumn("rounds"), BarColumn(), MofNCompleteColumn(), TextColumn("left"), TimeRemainingColumn())

    def write(line: str) -> None:
        sink.write(line + "\n")  # type: ignore[union-attr]  # only given when there is a sink

    start = time.monotonic()
    try:
        # (the pty transport plays round by round in this process: no shoes to count)
        with Progress(*columns, console=live, transient=True, disable=not shown_live or transport == "pty") as bar:
            task = bar.add_task("rounds", total=rounds)

            def progress(done: int) -> None:
                bar.update(task, completed=done)

            lines = write if sink is not None else None
            if transport == "pty":
                summary = play(simulation_for(transport, rules, boxes, STRATEGIES[strategy](), seed), rounds,
                               (lambda result: write(result.json_line())) if sink is not None else (lambda result: None))
            elif cluster is not None:
                summary = run_cluster(rules, rounds, boxes, STRATEGIES[strategy](), seed, cluster, lines, progress)
            else:
                summary = run_jobs(rules, rounds, boxes, STRATEGIES[strategy](), seed, jobs or default_jobs(),
                                   lines, progress)
    except SimulationError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        if sink is not None and sink is not sys.stdout:
            sink.close()
    print_summary(report, summary, rules, strategy, time.monotonic() - start)


def _rate(p: float, sd: float | None) -> str:
    return f"{p:.4f} ± {sd:.4f}" if sd is not None else f"{p:.4f} (too few rounds)"


def print_summary(console: Console, summary: Summary, rules: HouseRules, strategy: str, elapsed: float) -> None:
    interval = summary.edge_interval()
    quoted = (f"95 % interval {100 * interval[0]:.3f} % .. {100 * interval[1]:.3f} %" if interval is not None
              else f"interval: too few rounds, fewer than {MIN_ROUNDS}")
    console.print(f"[bold]{summary.rounds:,} rounds[/], {rules.decks} deck(s), strategy {strategy}, "
                  f"rules {rules.name}: house edge {100 * summary.house_edge:.3f} % ({quoted})")
    console.print(f"elapsed {elapsed:.1f} s, {summary.rounds / max(elapsed, 1e-9):,.0f} rounds/s", highlight=False)
    sd = summary.net_sd()
    console.print(f"net per round, per unit of initial bet: mean {float(summary.net) / summary.staked:+.4f}, "
                  + (f"standard deviation {sd:.4f}" if sd is not None else "standard deviation: too few rounds"),
                  highlight=False)
    hands = RichTable(title=f"players' hands ({summary.hands[0]:,}): rate ± standard deviation")
    hands.add_column("hand")
    hands.add_column("hands", justify="right")
    hands.add_column("rate", justify="right")
    for name, count, p, rate_sd in summary.hand_rates():
        hands.add_row(name, f"{count:,}", _rate(p, rate_sd))
    console.print(hands)
    exact = dealer_table(rules.decks, rules.dealer.hits_soft_17)
    grid = RichTable(title=f"dealer's final total per up card, in the {summary.dealer_rounds:,} rounds the dealer "
                           f"played out (not those with every hand bust or surrendered): observed, and exact "
                           f"(no hole card)")
    grid.add_column("up")
    grid.add_column("rounds", justify="right")
    for outcome in OUTCOMES:
        grid.add_column("bj" if outcome == "blackjack" else outcome, justify="right")
    for up in UP_CARDS:
        observed = summary.dealer_observed(up)
        grid.add_row(up, str(sum(summary.dealer[up].values())), *(f"{observed[o]:.4f}" for o in OUTCOMES))
        grid.add_row("", "exact", *(f"{float(exact[up][o]):.4f}" for o in OUTCOMES), style="dim")
    console.print(grid)


#: ``cardbench randomness``: no test failed, but too few shuffles for every test to judge
EXIT_INCONCLUSIVE = 3
#: ``cardbench randomness --device``: a device missing, busy or silent, or one that stopped the run
EXIT_DEVICE = 4


def device_url(value: str) -> str:
    """A device URL as the daemon takes it; a bare path (/dev/ttyUSB0) is a serial port's. A URL
    the drivers do not take is a usage error naming it."""
    url = f"serial://{value}" if value.startswith("/") else value
    try:
        parse_device_url(url)
    except BadURL as exc:
        raise click.UsageError(str(exc)) from None
    return url


def _device_orders(shuffler: str, shoe: str, shuffles: int, decks: int,
                   say: Callable[[str], None]) -> tuple[list[list[Card]], list[list[Card]]]:
    """The orders of a real shuffler, read by a real shoe; a device that does not open or stops the
    run is one line and EXIT_DEVICE."""
    try:
        return DeviceShuffleSource(shuffler, shoe, decks, say, sys.stdin.readline).orders(shuffles)
    except DeviceOpenError as exc:
        raise CliError(str(device_error(exc.url, exc.cause)), EXIT_DEVICE) from None
    except RandomnessError as exc:
        raise CliError(str(exc), EXIT_DEVICE) from None


@cardbench.command()
@click.option("--shuffles", type=click.IntRange(2), default=2000, show_default=True)
@click.option("--decks", type=click.IntRange(1, 8), default=1, show_default=True)
@click.option("--fault", type=click.Choice(["none", "riffle_once"]), default="none", show_default=True,
              help="a shuffler fault switch: riffle_once is a single riffle (deliberately biased)")
@click.option("--seed", type=int, default=None, help="seed the simulated shuffler (default: its system random)")
@click.option("--device", "device", metavar="URL", default=None,
              help="a real shuffler (a device URL, or a serial port's path such as /dev/ttyUSB0) instead of the "
                   "simulated one; needs --shoe")
@click.option("--shoe", metavar="URL", default=None,
              help="with --device: the shoe that reads each shuffled order as a person deals it")
@click.option("--json", "as_json", is_flag=True, help="the report as JSON on stdout")
def randomness(shuffles: int, decks: int, fault: str, seed: int | None, device: str | None, shoe: str | None,
               as_json: bool) -> None:
    """Qualify the shuffler: every shuffle dealt through the reader, then chi-squared, runs, correlation.
    Exit 0 PASS, 1 FAIL, 3 INCONCLUSIVE (fewer than 260 shuffles and nothing failed), 4 a device
    missing, busy, silent or stopping the run (--device)."""
    if device is None:
        if shoe is not None:
            raise click.UsageError("--shoe reads a real shuffler's orders: give the shuffler with --device URL")
        source = ShuffleSource(decks, fault=None if fault == "none" else fault, seed=seed)
        report = qualify(source.orders(shuffles), decks)
        tested = f"fault {fault}"
    else:
        if fault != "none" or seed is not None:
            raise click.UsageError("--fault and --seed switch the simulated shuffler: a real one (--device) has neither")
        if shoe is None:
            raise click.UsageError("--device needs --shoe URL: no message of the protocol carries a shuffled order "
                                   "(docs/protocol.md, section 4), so each order is what a shoe reads as the cards "
                                   "are dealt out of it")
        shuffler_url, shoe_url = device_url(device), device_url(shoe)
        # the drivers' reopen warnings: a device that stays away ends the run in one line of its own
        logs_to_stderr(logging.ERROR)

        def say(line: str) -> None:  # to the person at the devices; the report may be JSON on stdout
            click.echo(line, err=as_json)
            (sys.stderr if as_json else sys.stdout).flush()

        orders, loaded = _device_orders(shuffler_url, shoe_url, shuffles, decks, say)
        report = qualify(orders, decks, loaded)
        tested = f"shuffler {shuffler_url}, read by {shoe_url}"
    if as_json:
        click.echo(json.dumps(report.as_json(), indent=2))
    else:
        console = ProgramConsole()
        for test in report.tests:
            mark = "[yellow]n/a[/] " if not test.conclusive else "[green]pass[/]" if test.passed else "[red]FAIL[/]"
            console.print(f"{mark}  {test.name}: {test.detail}")
        colour = {"PASS": "green", "FAIL": "red", "INCONCLUSIVE": "yellow"}[report.verdict]
        console.print(f"[bold {colour}]{report.verdict}[/]", shown(f"({shuffles} shuffles of {decks} deck(s), {tested})")
                      + (f"; a PASS needs at least {MINIMUM_SHUFFLES} shuffles" if report.verdict == "INCONCLUSIVE" else ""))
    if report.verdict != "PASS":
        sys.exit(1 if report.verdict == "FAIL" else EXIT_INCONCLUSIVE)


def _devices(values: tuple[str, ...]) -> dict[str, str]:
    """``--device ROLE=URL`` options as role -> URL; one UsageError naming the bad value."""
    real: dict[str, str] = {}
    for value in values:
        role, sep, url = value.partition("=")
        if not sep or role not in ROLES:
            raise click.UsageError(f"--device {value!r}: expected ROLE=URL with ROLE one of {', '.join(ROLES)}")
        if role in real:
            raise click.UsageError(f"--device {value!r}: the {role} is given twice")
        try:
            parse_url(url)
        except BadURL as exc:
            raise click.UsageError(f"--device {value!r}: {exc}") from None
        real[role] = url
    return real


@cardbench.command("run")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--jobs", type=click.IntRange(1, 32), default=1, show_default=True, help="scenarios run in parallel")
@click.option("--junit", type=OutputFile(), help="write a JUnit XML report here")
@click.option("--device", "devices", multiple=True, metavar="ROLE=URL",
              help="a real device instead of the simulated one (shuffler=URL, shoe=URL): scenarios that need "
                   "a fault, a stacked shoe or a simulated unplug are skipped; the cards are moved by hand "
                   "(the bench asks on stdout)")
@click.option("--keep-journals", "keep", type=click.Path(file_okay=False, path_type=Path), default=None,
              metavar="DIR", help="keep each scenario's journal in DIR, as CASINO-SCENARIO.sqlite3 (made if missing)")
def run_command(paths: tuple[Path, ...], jobs: int, junit: Path | None, devices: tuple[str, ...],
                keep: Path | None) -> None:
    """Run scenario files (or folders of them), each in a fresh cardd with its own journal."""
    real = _devices(devices)
    if keep is not None:
        try:
            keep.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise click.UsageError(f"--keep-journals {keep}: {exc.strerror}") from None
    if real and jobs > 1:
        raise click.UsageError(f"--device with --jobs {jobs}: real devices run one scenario at a time (--jobs 1)")
    files = _files(paths, scenario_files, "scenario files (*.toml)")
    console = ProgramConsole(stderr=True)
    results: list[ScenarioResult] = []
    start = time.monotonic()

    def say(line: str) -> None:  # to the person at the real devices
        click.echo(line)
        sys.stdout.flush()

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    # off a terminal no bar is drawn, and rich's stop would leave an empty line there
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task("scenarios", total=len(files))

        def done(result: ScenarioResult) -> None:
            results.append(result)
            progress.advance(task)
            mark = SKIP if result.skipped else PASS if result.passed else FAIL
            progress.console.print(marked(mark, f"{result.path} ({result.seconds:.1f} s)"))

        each_in_parallel(jobs, lambda path: run_scenario(
            path, real, say, keep_journal=None if keep is None else keep / f"{path.parent.name}-{path.stem}.sqlite3"),
            files, done)
    finish(console, results, time.monotonic() - start, jobs, junit, count_skipped=True)


@cardbench.command()
@click.option("--shoes", type=click.IntRange(1), default=20, show_default=True)
@click.option("--rules", type=click.Choice(rule_names()), default="casino-000", show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--unplug-rate", type=click.FloatRange(0, 1), default=0.02, show_default=True,
              help="chance per round that the shoe is unplugged for a moment (per shoe: the shuffler, mid-shuffle)")
@click.option("--fault-rate", type=click.FloatRange(0, 1), default=0.02, show_default=True,
              help="chance per round of a shoe fault (a reboot, a noisy line); per shoe: a shuffler jam")
@click.option("--cut-at", type=click.IntRange(1), default=None, help="the cut card after this card (short shoes)")
@click.option("--plot", type=OutputFile(),
              help="PNG: card latency (series with the faults marked, histogram) and daemon memory; "
                   "the run's arguments, version and date in its title and text chunks")
@click.option("--report", type=OutputFile(), help="HTML report with the same figures and every fault's time")
def soak(shoes: int, rules: str, seed: int, unplug_rate: float, fault_rate: float, cut_at: int | None,
         plot: Path | None, report: Path | None) -> None:
    """Random play through a fresh cardd, shoe after shoe, with the invariants checked every round."""
    console = ProgramConsole(soft_wrap=True)  # a figure stays one line on a terminal too (it folds it)

    def progress(done: SoakReport) -> None:
        latest = done.memory[-1].rss_kib // 1024 if done.memory else 0
        console.print(f"shoe {done.shoes}/{shoes}: {done.rounds} rounds, {done.cards} cards, "
                      f"{time.monotonic() - start:.0f} s, cardd RSS {latest} MiB, "
                      f"{len(done.violations)} violation(s)", highlight=False)

    start = time.monotonic()
    result = run_soak(shoes, rules, seed, unplug_rate, fault_rate, cut_at, progress)
    console.print(shown(f"run: {result.run_line()}"), highlight=False)
    for line in summary_lines(result):
        console.print(shown(line))
    histogram = RichTable(title="card latency histogram")
    histogram.add_column("latency")
    histogram.add_column("cards", justify="right")
    histogram.add_column("")
    buckets = result.latency_histogram()
    most = max((n for _, n in buckets), default=0) or 1
    for label, n in buckets:
        histogram.add_row(label, str(n), "#" * math.ceil(40 * n / most))
    console.print(histogram)
    console.print(shown("events: " + ", ".join(f"{k} {v}" for k, v in sorted(result.events.items()))))
    for violation in result.violations:
        console.print(marked(("violation", "red"), violation))
    if plot or report:
        png = plot_png(result)
        if plot:
            plot.write_bytes(png)
        if report:
            report.write_text(report_html(result, png))
    console.print("[bold green]PASS[/]" if result.passed else "[bold red]FAIL[/]")
    if not result.passed:
        sys.exit(1)


@cardbench.command("floor")
@click.option("--tables", type=click.IntRange(1, 100_000), default=10, show_default=True,
              help="simulated tables, each a journal and cardd's own exporter")
@click.option("--broker", "brokers", multiple=True, required=True, metavar="URL",
              help="mqtt://HOST[:PORT] or mqtts://HOST[:PORT]; again for the next node (export.brokers)")
@click.option("--site", default="bench", show_default=True, help="the tables' site (export.site)")
@click.option("--mqtt-version", type=click.Choice(["5", "3.1.1"]), default="5", show_default=True)
@click.option("--username", help="the broker's user; {table} and {site} in it are each table's (floor1.{table})")
@click.option("--password-file", help="the user's password file; {table} and {site} as in --username")
@click.option("--ca-file", help="the CA of the brokers' certificates (mqtts://)")
@click.option("--cert-file", help="a TLS client certificate; {table} and {site} as in --username")
@click.option("--key-file", help="its key; {table} and {site} as in --username")
@click.option("--timeout", "timeout_s", type=click.FloatRange(1.0, 120.0), default=10.0, show_default=True,
              help="seconds without an answer from a broker before the next (export.timeout_s)")
@click.option("--duration", "duration_s", type=click.FloatRange(0.0, min_open=True), default=None,
              help="seconds to run (default: until Ctrl-C)")
@click.option("--backlog-hours", type=click.FloatRange(0.0, 24.0 * 30), default=0.0, show_default=True,
              help="start every table with this many hours of records not yet delivered")
@click.option("--fault-rate", type=click.FloatRange(0, 1), default=0.02, show_default=True,
              help="chance per round of a fault: a card face up (the round void), the shoe offline and back "
                   "(the round held, then resumed)")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--journals", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="keep the tables' journals in this folder (default: a temporary one, removed at the end)")
@click.option("--tables-per-process", "per_process", type=click.IntRange(1), default=TABLES_PER_PROCESS,
              show_default=True, help="tables a worker process holds")
@click.option("--every", "every_s", type=click.FloatRange(1.0), default=60.0, show_default=True,
              help="seconds between the lines of figures")
@click.option("--idle", is_flag=True, help="the tables connect and journal nothing more: the export's idle cost")
def floor_command(tables: int, brokers: tuple[str, ...], site: str, mqtt_version: str, username: str | None,
                  password_file: str | None, ca_file: str | None, cert_file: str | None, key_file: str | None,
                  timeout_s: float, duration_s: float | None, backlog_hours: float, fault_rate: float, seed: int,
                  journals: Path | None, per_process: int, every_s: float, idle: bool) -> None:
    """TABLES simulated tables publishing their journals to a broker through cardd's own export, at a
    real table's pace; a line of figures every minute."""
    console = ProgramConsole(soft_wrap=True)
    options = FloorOptions(tables=tables, brokers=list(brokers), site=site, mqtt_version=mqtt_version,
                           username=username, password_file=password_file, ca_file=ca_file, cert_file=cert_file,
                           key_file=key_file, timeout_s=timeout_s, duration_s=duration_s,
                           backlog_hours=backlog_hours, fault_rate=fault_rate, seed=seed,
                           journals=None if journals is None else journals.absolute(), per_process=per_process,
                           every_s=every_s, idle=idle)

    def say(line: str) -> None:
        console.print(shown(line), highlight=False)

    try:
        run_floor(options, say)
    except FloorError as exc:
        raise CliError(str(exc)) from None


@cardbench.command("record")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="the folder the traces and their golden files go to")
@click.option("--force", is_flag=True, help="overwrite traces that exist")
def record_command(paths: tuple[Path, ...], out: Path, force: bool) -> None:
    """Run scenario files (or folders) recording each as OUT/<casino>-<name>.trace, replay it, write its .golden."""
    files = _files(paths, scenario_files, "scenario files (*.toml)")
    out.mkdir(parents=True, exist_ok=True)
    console = ProgramConsole(stderr=True, soft_wrap=True)
    failed = 0
    for path in files:
        name = f"{path.parent.name}-{path.stem}"
        if (out / f"{name}.trace").exists() and not force:
            raise click.UsageError(f"{out / name}.trace exists: --force overwrites it")
        try:
            done = record_scenario(path, out, name)
        except (ReplayError, CarddError) as exc:
            console.print(marked(FAIL, f"{path}: {exc}"))
            failed += 1
            continue
        if done.trace is None:
            console.print(marked(FAIL, done.message))
            failed += 1
            continue
        console.print(marked(("recorded", "green"), f"{path} -> {done.trace} (+ .golden)"))
        for note in done.notes:
            console.print(marked(("note", "yellow"), note))
    if failed:
        sys.exit(1)


@cardbench.command("replay")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--update-golden", is_flag=True, help="rewrite each golden file from the replay (after review)")
@click.option("--jobs", type=click.IntRange(1, 32), default=1, show_default=True, help="traces replayed in parallel")
@click.option("--junit", type=OutputFile(), help="write a JUnit XML report here")
def replay_command(paths: tuple[Path, ...], update_golden: bool, jobs: int, junit: Path | None) -> None:
    """Replay traces (or folders of *.trace) into a fresh cardd each; compare the journal with NAME.golden."""
    files = _files(paths, trace_files, "traces (*.trace)")
    console = ProgramConsole(stderr=True, soft_wrap=True)
    start = time.monotonic()
    results: list[ScenarioResult] = []

    def done(result: ScenarioResult) -> None:
        results.append(result)
        mark = (("updated", "green") if update_golden else PASS) if result.passed else FAIL
        console.print(marked(mark, f"{result.path} ({result.seconds:.1f} s)"))

    each_in_parallel(jobs, lambda path: check_trace(path, update_golden), files, done)
    finish(console, results, time.monotonic() - start, jobs, junit, count_skipped=False)


@cardbench.command()
@click.argument("url")
@click.option("--protocol", type=click.Choice(["auto", "1.1", "2.0"]), default="auto", show_default=True,
              help="the device's protocol (auto: the one whose RESET it answers)")
@click.option("--host-key", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="2.0: the PEM private key of the host the device was enrolled with (default: a new key, "
                   "so the enrolled-host checks fail on a real device)")
@click.option("--device-key", metavar="HEX",
              help="2.0: the device's enrolled public key, 64 hex digits (default: enrolment not checked)")
@click.option("--serial", metavar="SERIAL", help="2.0, with --device-key: the serial it was enrolled under")
@click.option("--only", multiple=True, metavar="ID", help="run only this requirement (again for more)")
@click.option("--junit", type=OutputFile(), help="write the JUnit XML report here")
def conformance(url: str, protocol: str, host_key: Path | None, device_key: str | None, serial: str | None,
                only: tuple[str, ...], junit: Path | None) -> None:
    """Check a device (a device URL, or sim://shoe, sim://shuffler) against docs/protocol.md:
    every requirement by its section, PASS/FAIL with the bytes that failed. Exit 0 when none
    failed, 1 when one did, 3 a device that would not open."""
    from cardd.bench.conformance import DeviceUnderTest, Outcome, passed, requirements, run, simulator_under_test
    from cardd.bench.conformance import summary, write_junit as write_conformance_junit
    from firmware_bridge.firmware import read_private_key_file
    from firmware_bridge.handshake2 import raw_public_key

    known = {r.id for r in requirements()}
    unknown = sorted(set(only) - known)
    if unknown:
        raise click.UsageError(f"no requirement {', '.join(unknown)}; requirements: {', '.join(known)}")
    try:
        identity = read_private_key_file(host_key) if host_key is not None else None
    except CarddError as exc:
        raise click.UsageError(f"--host-key {host_key}: {exc}") from None
    enrolled = None
    if device_key is not None:
        try:
            enrolled = bytes.fromhex(device_key)
        except ValueError:
            enrolled = b""
        if len(enrolled) != 32:
            raise click.UsageError(f"--device-key {device_key[:16]}...: expected 64 hex digits")
    try:
        parsed = parse_device_url(device_url(url))
    except BadURL as exc:
        raise click.UsageError(str(exc)) from None
    logs_to_stderr(logging.ERROR)
    if parsed.scheme == "sim":
        from simulators.sim_url import endpoint_for
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        identity = identity or Ed25519PrivateKey.generate()
        if parsed.params.get("protocol") == "2.0" and "host_key" not in parsed.params:
            # the simulated device is enrolled with this run's host, as a technician would enrol it
            key = raw_public_key(identity.public_key()).hex()
            parsed = parse_device_url(f"{parsed.text}{'&' if parsed.params else '?'}host_key={key}")
        try:
            endpoint = endpoint_for(parsed)
        except (BadURL, RuntimeError) as exc:
            raise click.UsageError(str(exc)) from None
        dut = simulator_under_test(endpoint, parsed.text, identity)
    else:
        dut = DeviceUnderTest(parsed.text, device_key=enrolled, enrolled_serial=serial)
        if identity is not None:
            dut.host_identity = identity
    if protocol != "auto":
        dut.protocol = protocol
    console = ProgramConsole()
    try:
        results, seconds = run(dut, set(only) if only else None)
    except CarddError as exc:
        raise device_error(url, exc) from None
    colours = {Outcome.PASS: "green", Outcome.FAIL: "red", Outcome.BLOCKED: "yellow", Outcome.NOT_APPLICABLE: "dim"}
    console.print(shown(f"cardbench conformance {url}: protocol {dut.protocol}"))
    for result in results:
        for line in result.lines():  # each its own line, the device's words in it shown as text
            console.print(shown(line, colours[result.outcome]), soft_wrap=True)
    console.print(f"[bold]{summary(results)}[/] in {seconds:.1f} s")
    if junit is not None:
        write_conformance_junit(results, junit, seconds, url)
    if not passed(results):
        sys.exit(1)
