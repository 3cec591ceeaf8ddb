"""``cardbench soak``: random play through the real daemon, shoe after shoe, with the invariants
checked after every round, device faults and unplugs at a configurable rate, and the figures a
long run needs (card latency histogram, every event class's count, the daemon's memory trend).
The invariants, the clients it plays as and the figures: docs/bench.md, "`cardbench soak`"."""
from __future__ import annotations

import base64
import html
import importlib.metadata
import io
import math
import os
import random
import shutil
import sqlite3
import statistics
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cardd.api.client import ApiClient, ClientError, CommandRefused
from cardd.bench.runner import REQUEST_INTERVAL_S, BenchRig, StepFailed
from cardd.bench.scenario import Load, Scenario, Shuffle
from cardd.config import RULES_DIR
from cardd.journal.chain import walk
from cardd.journal import Journal
from cardd.journal.records import GENESIS_HASH
from cardd.journal.sqlite_errors import sqlite_problem
from core.cards import Card, Rank, shoe_composition
from core.errors import CarddError
from core.rundirs import keep, make_run_directory
from devices.game.rules import cut_window
from firmware_bridge.messages import CardRead
from simulators.rig import cut_card_at
from simulators.stack import fisher_yates

if TYPE_CHECKING:  # matplotlib is imported when a plot is drawn (a soak without --plot needs none of it)
    from matplotlib.figure import Figure

#: the events that say where a card read went (a burn card, or a card given to a hand)
CARD_REASONS = ("BURN", "CARD_ASSIGNED")
#: the upper edges of the latency histogram's buckets, in ms (the last bucket: everything above)
LATENCY_BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)
#: a run's memory is flat when the fitted trend over the run grows less than this share of its RSS
FLAT_SHARE = 0.05
#: the rounds (after the warm-up) a memory trend is extrapolated from: over fewer, a leak of a few
#: MB per 1,000 rounds stays under FLAT_SHARE and the first shoes' settling passes for a slope (a
#: 3-shoe soak printed "+6219 KiB per 1000 rounds ... flat"); below it the report says "too few
#: rounds to extrapolate" and the plot draws no trend line. About 40 full six-deck shoes.
TREND_MIN_ROUNDS = 1000
#: the first share of the samples is left out of the trend: imports, caches and the journal's
#: page cache settle in the first shoes
WARM_UP_SHARE = 0.1
#: how long a dealt card may take to be placed, an unplug or reboot included
CARD_TIMEOUT_S = 15.0
#: how long a held round may wait for every device to be usable again and its resume accepted
RESUME_TIMEOUT_S = 30.0
#: the soak's daemon takes every reopened device port as stable (``[devices] reconnect_stable_s``):
#: the soak unplugs the shoe about once a second of play, where the default (a port must stay open
#: 5 s) takes it for a flapping device, so from the 7th unplug on every one waited out the 5 s cap
#: and the soak's time was nearly all that wait (a full shoe ~20 s instead of ~2 s)
RECONNECT_STABLE_S = 0.0

#: faults the soak injects, each recovered without a person: (device, what happens)
FAULTS = {
    "shuffler_jam": "the shuffler jams halfway through the shuffle and clears itself after 0.2 s",
    "shoe_reboot": "the shoe reboots right after its next card (the round is held, then resumed)",
    "shoe_line_noise": "for one round the shoe's line flips and drops bytes (1 in 500); the link repairs it",
}
UNPLUGS = {
    "shoe_unplug": "the shoe is unplugged for 0.3 s after its next card (the round is held, then resumed)",
    "shuffler_unplug": "the shuffler is unplugged for 0.3 s while it counts the stack",
}


@dataclass
class MemorySample:
    round: int
    seconds: float  # since the soak started
    rss_kib: int  # the daemon's VmRSS


@dataclass
class MemoryTrend:
    start_kib: int
    end_kib: int
    slope_kib_per_1000_rounds: float  # least squares over the samples after the warm-up
    fitted_growth_kib: float  # the slope over the rounds fitted
    flat: bool
    rounds_fitted: int = 0  # the rounds the line spans

    @property
    def enough(self) -> bool:
        """Fitted over enough rounds to extrapolate (TREND_MIN_ROUNDS)."""
        return self.rounds_fitted >= TREND_MIN_ROUNDS

    def describe(self) -> str:
        rss = f"RSS {self.start_kib / 1024:.1f} MiB at the start, {self.end_kib / 1024:.1f} MiB at the end; "
        if not self.enough:
            return (rss + f"too few rounds to extrapolate ({self.rounds_fitted} after the warm-up; "
                    f"a trend needs {TREND_MIN_ROUNDS})")
        return (rss + f"trend {self.slope_kib_per_1000_rounds:+.1f} KiB per 1000 rounds "
                f"({self.fitted_growth_kib / 1024:+.2f} MiB over the run): {'flat' if self.flat else 'NOT flat'}")


@dataclass(frozen=True)
class FaultMark:
    """One injected fault or unplug (FAULTS, UNPLUGS): where in the run it was set."""
    kind: str
    round: int  # the round it falls in (a shuffler's: the first round of the shoe it shuffles)
    card: int  # the run's next card in dealing order when it was set (the latency plot's x, from 0)
    seconds: float  # since the soak started


@dataclass
class SoakReport:
    shoes: int = 0  # played to their end
    shoes_asked: int = 0  # what the run was to play (0: not said)
    rounds: int = 0
    latencies_ms: list[float] = field(default_factory=list)  # one per card, in dealing order
    memory: list[MemorySample] = field(default_factory=list)
    events: Counter[str] = field(default_factory=Counter)  # every record the watcher saw, by reason (or kind)
    injected: Counter[str] = field(default_factory=Counter)  # FAULTS and UNPLUGS, by name
    resumed: int = 0  # held rounds the soak resumed as a supervisor
    violations: list[str] = field(default_factory=list)
    chain_checked: int = 0  # records whose hash the rounds' checks walked
    chain_ok: bool = False
    chain_detail: str = ""
    seconds: float = 0.0
    #: a failed soak's folder (the journal, the daemon's log cardd.log), kept for inspection;
    #: a passed soak's is removed
    kept_folder: Path | None = None
    rules: str = ""
    #: where the soak put the cut card (after this card) and the rules' window for it
    cut_at: int = 0
    cut_window: tuple[int, int] = (0, 0)
    cut_by_option: bool = False  # --cut-at, not the rules' penetration
    misplaced_cut_shoes: int = 0  # shoes whose CUT_CARD_MISPLACED the table raised
    #: what reproduces the run: the seed and rates it was given, cardd's version, when it started
    seed: int = 0
    unplug_rate: float = 0.0
    fault_rate: float = 0.0
    version: str = ""
    started: str = ""  # UTC, ISO 8601
    faults: list[FaultMark] = field(default_factory=list)  # in the order injected

    def run_line(self) -> str:
        """What the run was, to reproduce it: the command's arguments, cardd's version, the date."""
        cut = f" --cut-at {self.cut_at}" if self.cut_by_option else ""
        return (f"cardbench soak --shoes {self.shoes_asked} --rules {self.rules} --seed {self.seed} "
                f"--fault-rate {self.fault_rate:g} --unplug-rate {self.unplug_rate:g}{cut}; "
                f"cardd {self.version}, started {self.started}")

    def cut_line(self) -> str:
        """Where the cut card was and what the table said of it, in words (an empty run: nothing)."""
        if not self.shoes:
            return ""
        lo, hi = self.cut_window
        where = f"after card {self.cut_at}" + (" (--cut-at)" if self.cut_by_option else " (the rules' penetration)")
        if lo <= self.cut_at <= hi:
            return (f"cut card: {where}, within {self.rules}'s window {lo}..{hi}; "
                    f"CUT_CARD_MISPLACED in {self.misplaced_cut_shoes} of {self.shoes} shoes")
        return (f"cut card MISPLACED: {where}, outside {self.rules}'s window {lo}..{hi}, against its rules; "
                f"the table warned CUT_CARD_MISPLACED in {self.misplaced_cut_shoes} of {self.shoes} shoes, as it "
                "must. The verdict does not cover the cut: the soak misplaced it itself, for short shoes")

    @property
    def passed(self) -> bool:
        return not self.violations and self.chain_ok

    @property
    def cards(self) -> int:
        return len(self.latencies_ms)

    def latency_summary(self) -> dict[str, float]:
        xs = sorted(self.latencies_ms)
        if not xs:
            return {}
        return {"p50": statistics.median(xs), "p90": _quantile(xs, 0.90), "p99": _quantile(xs, 0.99),
                "p99.9": _quantile(xs, 0.999), "max": xs[-1]}

    def latency_histogram(self) -> list[tuple[str, int]]:
        """(bucket, cards): ``< 1 ms``, ``1-2 ms``, ... ``>= 2000 ms``."""
        counts = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        for ms in self.latencies_ms:
            counts[next((i for i, edge in enumerate(LATENCY_BUCKETS_MS) if ms < edge), len(LATENCY_BUCKETS_MS))] += 1
        edges = (0, *LATENCY_BUCKETS_MS)
        labels = [f"< {LATENCY_BUCKETS_MS[0]} ms"]
        labels += [f"{lo}-{hi} ms" for lo, hi in zip(edges[1:], LATENCY_BUCKETS_MS[1:])]
        labels.append(f">= {LATENCY_BUCKETS_MS[-1]} ms")
        return list(zip(labels, counts))

    def memory_trend(self) -> MemoryTrend | None:
        """The daemon's RSS: a least-squares line over the rounds (after the warm-up); flat when
        the line grows less than FLAT_SHARE of the RSS over the rounds it fits."""
        if len(self.memory) < 4:
            return None
        fit = self.memory[int(len(self.memory) * WARM_UP_SHARE):]
        xs, ys = [float(s.round) for s in fit], [float(s.rss_kib) for s in fit]
        mx, my = statistics.mean(xs), statistics.mean(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
        growth = slope * (xs[-1] - xs[0])
        return MemoryTrend(self.memory[0].rss_kib, self.memory[-1].rss_kib, 1000 * slope, growth,
                           growth < FLAT_SHARE * my, int(xs[-1] - xs[0]))


def _quantile(xs: list[float], q: float) -> float:
    return xs[min(len(xs) - 1, math.ceil(q * len(xs)) - 1)]


def soak(shoes: int, rules: str = "casino-000", seed: int = 1, unplug_rate: float = 0.0, fault_rate: float = 0.0,
         cut_at: int | None = None, progress: Callable[[SoakReport], None] = lambda report: None) -> SoakReport:
    """Play ``shoes`` shoes through a fresh cardd. ``unplug_rate`` and ``fault_rate``: the chance per
    round (per shoe for the shuffler's) of an unplug or a device fault (UNPLUGS, FAULTS);
    ``cut_at``: the cut card after this card (short shoes; default the rules' penetration);
    ``progress`` is called after every shoe."""
    report = SoakReport(rules=rules, shoes_asked=shoes, seed=seed, unplug_rate=unplug_rate, fault_rate=fault_rate,
                        version=cardd_version(), cut_at=cut_at or 0, cut_by_option=cut_at is not None,
                        started=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    rng = random.Random(seed)
    start = time.monotonic()
    directory = make_run_directory("cardbench-soak-", "/tmp")  # removed below; by the next run if this one is killed
    os.chmod(directory, 0o755)
    scenario = Scenario(description="soak", rules=rules, step=[])
    play: _Play | None = None
    try:
        try:
            with BenchRig(scenario, RULES_DIR / f"{rules}.toml", directory,
                          reconnect_stable_s=RECONNECT_STABLE_S) as rig:
                play = _Play(rig, rng, report, unplug_rate, fault_rate, cut_at, start)
                if rig.rules.table.lone_player_min_boxes > 1:  # a lone player must play two boxes: one more sits
                    rig.api().command("take_seat", player="seated-1")
                for _ in range(shoes):
                    play.shoe()
                    report.shoes += 1
                    progress(report)
                unplugs = sum(report.injected[kind] for kind in UNPLUGS)
                offline = play.watcher.counts_now()["DEVICE_OFFLINE"]
                if offline < unplugs:
                    report.violations.append(f"{unplugs} unplugs injected, the daemon saw {offline} (DEVICE_OFFLINE)")
        except (StepFailed, ClientError, RuntimeError) as exc:  # the daemon stuck or gone is a finding too
            report.violations.append(f"shoe {report.shoes + 1}, after {report.rounds} rounds: {exc}")
        _verify_chain(report, directory / "journal.sqlite3")  # the daemon has stopped: a failed run's too
    finally:
        if play is not None:  # the daemon has stopped, so the watcher's connection has ended
            report.events = play.watcher.counts_now()
            play.watcher.close()
            play.chain.close()
        if report.passed:
            shutil.rmtree(directory, ignore_errors=True)
        else:  # what the daemon journaled and logged is the only trace of a failure seen once in 2,000 shoes
            report.kept_folder = directory
            keep(directory)
    report.seconds = time.monotonic() - start
    return report


def cardd_version() -> str:
    """The installed cardd's version (pyproject's), or "not installed" for a bare checkout."""
    try:
        return importlib.metadata.version("cardd")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def _verify_chain(report: SoakReport, path: Path) -> None:
    """The whole journal's chain (Journal.verify), in words, for the report."""
    try:
        with Journal.open(path, readonly=True) as journal:
            result = journal.verify()
    except CarddError as exc:  # no journal (the daemon never started) or one that does not open
        report.chain_ok, report.chain_detail = False, f"not verified: {exc}"
        return
    report.chain_ok = result.ok
    report.chain_detail = (f"ok, {result.checked} records verified" if result.ok else
                           f"broken at record {result.first_bad_seq}: {result.problem}")


class _Play:
    """One soak's play: the shoes, the rounds, the faults, the checks."""

    def __init__(self, rig: BenchRig, rng: random.Random, report: SoakReport, unplug_rate: float,
                 fault_rate: float, cut_at: int | None, start: float) -> None:
        self.rig, self.rng, self.report = rig, rng, report
        self.unplug_rate, self.fault_rate, self.cut_at, self.start = unplug_rate, fault_rate, cut_at, start
        self.reads = _ReadProbe(rig)
        self.watcher = _Watcher(rig.socket)
        self.dealt = 0  # cards the bench had the shoe deal
        self.matched = 0  # reads matched with their placement event so far
        self.unmatched_reads: deque[tuple[str, float]] = deque()
        self.unmatched_placements: deque[tuple[str, float]] = deque()
        rig.deal_placed = self._deal_placed
        # the chain as far as it was checked: each round walks on from here over the new records
        self.chain = sqlite3.connect(f"file:{rig.directory / 'journal.sqlite3'}?mode=ro", uri=True,
                                     isolation_level=None, check_same_thread=False)
        self.chain_seq, self.chain_hash = 0, GENESIS_HASH
        rig.display = ApiClient(rig.socket, pace_s=REQUEST_INTERVAL_S)
        rig.on_hold = self._resume
        cards = 52 * rig.rules.decks  # where the shoe puts the cut card (simulators.rig.hand_off)
        report.cut_at = cut_card_at(cards, rig.rules.shoe.penetration, cut_at or None)
        report.cut_window, report.cut_by_option = cut_window(rig.rules, cards), cut_at is not None

    # ---- a shoe and its rounds ----------------------------------------------------------

    def shoe(self) -> None:
        rig, rng = self.rig, self.rng
        order = fisher_yates([card for card, n in shoe_composition(rig.rules.decks).items() for _ in range(n)], rng)
        rig.stacked = order
        rig.sim.shuffler.call(rig.sim.shuffler.device.stack, order)
        shuffler_faults = self._shuffler_faults()
        rig.do(Shuffle())
        if shuffler_faults:
            rig.sim.shuffler.set_faults(jam=None, disconnect_for=None, disconnect_at=None)
        self.reads.new_shoe()
        misplaced_before = self.watcher.counts_now()["CUT_CARD_MISPLACED"]
        rig.do(Load(cut_at=self.cut_at))
        self._match_reads("the burn")
        shoe_state = rig.state()["shoe"]["state"]
        while shoe_state in ("in_play", "last_round"):
            shoe_state = self._round()
        self._check_cut(self.watcher.counts_now()["CUT_CARD_MISPLACED"] - misplaced_before)
        dealt = rig.sim.shoe.state()["cards_out"]
        rig.api().command("shoe_remainder", returned={str(c): n for c, n in Counter(order[dealt:]).items()})
        state = rig.state()
        shoe_state = state["shoe"]["state"]
        if shoe_state != "reconciled":
            self.report.violations.append(f"shoe {self.report.shoes + 1}: ended {shoe_state}, not reconciled")
            # the table holds the next shoe until a supervisor has accounted for the cards and cleared
            # the alarm: the soak has noted the violation, and goes on as that supervisor would
            for alarm in state["alarms"]:
                if alarm["reason"] == "RECONCILIATION_FAILED":
                    rig.api().command("clear_alarm", alarm_id=alarm["id"])

    def _check_cut(self, warnings: int) -> None:
        """The shoe's CUT_CARD_MISPLACED warnings (seen by the watcher before its last round ended):
        one where the cut card was outside the rules' window, none inside it."""
        report = self.report
        lo, hi = report.cut_window
        misplaced = not lo <= report.cut_at <= hi
        report.misplaced_cut_shoes += min(warnings, 1)
        if warnings != misplaced:
            said = f"{warnings} CUT_CARD_MISPLACED" if warnings else "no CUT_CARD_MISPLACED"
            report.violations.append(f"shoe {report.shoes + 1}: the cut card after card {report.cut_at} is "
                                     f"{'outside' if misplaced else 'within'} the rules' window {lo}..{hi}, "
                                     f"the table said {said}")

    def _round(self) -> str:
        """One round from open to settled, checked; the shoe's state after it."""
        rig, rng, rules = self.rig, self.rng, self.rig.rules
        shoe_faults = self._shoe_faults()
        api = rig.api()
        api.command("open_round")
        boxes = sorted(rng.sample(range(1, rules.table.boxes + 1), rng.randint(1, 3)))
        for box in boxes:
            api.command("place_bet", box=box, player=f"p{box}", amount=rules.table.min_per_player)
        api.command("no_more_bets")
        self._deal_placed(2 * len(boxes) + 1)  # the initial deal at once: two cards a box, the dealer's one
        state = rig.play("basic")
        if shoe_faults:  # one round each: off again before the next card could set them off
            rig.sim.shoe.set_faults(reboot_at=None, disconnect_for=None, disconnect_at=None, bit_flip_rate=0.0,
                                    drop_rate=0.0)
        self.report.rounds += 1
        self._check_round(state)
        pid = rig.proc.pid if rig.proc is not None else 0
        self.report.memory.append(MemorySample(self.report.rounds, time.monotonic() - self.start, _rss_kib(pid)))
        return str(state["shoe"]["state"])

    def _shuffler_faults(self) -> bool:
        """Maybe a jam or an unplug for this shoe's shuffle (True: one is set)."""
        set_one = False
        if self.rng.random() < self.fault_rate:
            self.rig.sim.shuffler.set_faults(jam=0.2)
            self._injected("shuffler_jam")
            set_one = True
        if self.rng.random() < self.unplug_rate:
            at = self.rng.randint(1, 52 * self.rig.rules.decks)  # cards counted
            self.rig.sim.shuffler.set_faults(disconnect_for=0.3, disconnect_at=at)
            self._injected("shuffler_unplug")
            set_one = True
        return set_one

    def _injected(self, kind: str) -> None:
        """Count a fault or unplug just set, and mark where it falls (the next card read)."""
        report = self.report
        report.injected[kind] += 1
        report.faults.append(FaultMark(kind, report.rounds + 1, self.reads.count(), time.monotonic() - self.start))

    def _shoe_faults(self) -> bool:
        """Maybe a fault or an unplug of the shoe during this round (True: one is set)."""
        shoe = self.rig.sim.shoe
        next_card = shoe.state()["cards_out"] + 1
        set_one = False
        if self.rng.random() < self.fault_rate:
            kind = self.rng.choice(["shoe_reboot", "shoe_line_noise"])
            if kind == "shoe_reboot":
                shoe.set_faults(reboot_at=next_card)
            else:
                shoe.set_faults(bit_flip_rate=0.002, drop_rate=0.002, seed=self.rng.randrange(1 << 30))
            self._injected(kind)
            set_one = True
        if self.rng.random() < self.unplug_rate:
            shoe.set_faults(disconnect_for=0.3, disconnect_at=next_card)
            self._injected("shoe_unplug")
            set_one = True
        return set_one

    # ---- cards ------------------------------------------------------------------------

    def _deal_placed(self, n: int) -> None:
        """Deal ``n`` cards and wait until the watcher saw them placed. A card still on its way (the
        shoe unplugged, the round held and resumed) is awaited instead of dealing another."""
        if self.watcher.placed() >= self.dealt:
            self.dealt += n
            self.rig.sim.shoe.call(self.rig.sim.shoe.device.deal, n)
        want = self.dealt
        if not self.watcher.wait_placed(want, CARD_TIMEOUT_S, stop_if_held=True):
            raise StepFailed(f"{want - self.matched} card(s) placed within {CARD_TIMEOUT_S:g} s",
                             f"{self.watcher.placed() - self.matched} placed")
        self._match_reads("a deal")

    def _match_reads(self, where: str) -> None:
        """Each read not matched yet against its placement event: the same card, once; its latency."""
        reads, placements = self.unmatched_reads, self.unmatched_placements
        reads += self.reads.take()
        placements += self.watcher.take_placements()
        while reads and placements:
            (card, emitted), (placed, arrived) = reads.popleft(), placements.popleft()
            if card != placed:
                self.report.violations.append(f"round {self.report.rounds + 1}, {where}: read {card}, "
                                              f"but {placed} was placed (card {self.matched + 1} of the run)")
            self.report.latencies_ms.append(1000 * (arrived - emitted))
            self.matched += 1

    def _resume(self, why: str) -> bool:
        """A held round: wait for every device usable again, then resume as a supervisor. Not
        within RESUME_TIMEOUT_S: StepFailed naming the hold and what was still missing (the soak
        ends with it as a violation)."""
        deadline = time.monotonic() + RESUME_TIMEOUT_S
        while True:
            devices = self.rig.state()["devices"]
            unusable = [f"{name} {device['state']} (link {device['link']})"
                        for name, device in sorted(devices.items()) if not device["usable"]]
            if unusable:
                missing = "not usable: " + ", ".join(unusable)
            else:
                try:
                    self.rig.api().command("resume")
                    self.report.resumed += 1
                    return True
                except CommandRefused as exc:
                    missing = f"resume refused: ERROR {exc.code}: {exc}"
            if time.monotonic() >= deadline:
                raise StepFailed(f"the round held ({why}) resumed within {RESUME_TIMEOUT_S:g} s "
                                 "(every device usable, then resume accepted)", missing)
            time.sleep(0.05)

    # ---- the invariants ------------------------------------------------------------------

    def _check_round(self, state: dict[str, Any]) -> None:
        r = state["round"]
        where = f"round {r['id']}"
        violations = self.report.violations
        piles, out = state["piles"], state["shoe"]["cards_out"]
        placed = piles["burn"] + piles["discard"] + piles["played"] + len(piles["pending"]) + len(piles["drawn_in_error"])
        if placed != out:
            violations.append(f"{where}: the table's piles hold {placed} cards, {out} are out")
        if not self.watcher.wait_round_end(r["id"], CARD_TIMEOUT_S):
            violations.append(f"{where}: no ROUND_STATE {r['state']} at the watcher within {CARD_TIMEOUT_S:g} s")
            return
        self._match_reads(where)
        if self.matched != self.reads.count():
            violations.append(f"{where}: the shoe read {self.reads.count()} cards this run, {self.matched} were placed")
        on_table = Counter([c for hands in r["boxes"].values() for h in hands for c in h["cards"]] + r["dealer"]["cards"])
        assigned = Counter(self.watcher.round_cards(r["id"]))
        if on_table != assigned:
            violations.append(f"{where}: cards on the table {dict(on_table)} are not the cards assigned {dict(assigned)}")
        self._check_chain(where)
        if r["state"] != "complete":
            return
        lines = self.watcher.settled(r["id"])
        total = sum((Fraction(line["net"]) for line in lines), Fraction(0))
        if total != -Fraction(r["house_result"]):
            violations.append(f"{where}: SETTLED lines add up to {total}, the house result is {r['house_result']}")
        main = {(line["player"], line["box"], line["hand"]): Fraction(line["net"])
                for line in lines if line["kind"] in ("main", "surrender")}
        expected = expected_nets(r)
        if main != expected:
            wrong = sorted(str(k) for k in set(main) | set(expected) if main.get(k) != expected.get(k))
            violations.append(f"{where}: settled {_nets(main)}, worked by the bench {_nets(expected)} (differ: {wrong})")


    def _check_chain(self, where: str) -> None:
        """The journal's hash chain over the records written since the last round (the journal's
        own walk, from the last record checked), read from the file the daemon writes."""
        try:
            result = walk(self.chain, self.chain_seq, self.chain_hash)
        except sqlite3.Error as exc:
            self.report.violations.append(f"{where}: the journal cannot be read: {sqlite_problem(exc)}")
            return
        if result.broken is not None:
            self.report.violations.append(f"{where}: the journal's chain breaks at seq {result.broken.seq}: "
                                          f"{result.broken.problem}")
        self.chain_seq, self.chain_hash = result.last_seq, result.last_hash
        self.report.chain_checked += result.checked


def expected_nets(r: dict[str, Any]) -> dict[tuple[str, int, int], Fraction]:
    """Each hand's main-bet net per player, worked from the round's cards in STATE (no insurance or
    side bets: the soak places none). Independent of devices/game's settlement on purpose."""
    dealer = [Card.parse(c) for c in r["dealer"]["cards"]]
    dealer_total, dealer_bj = _total(dealer), len(dealer) == 2 and _total(dealer) == 21
    nets: dict[tuple[str, int, int], Fraction] = {}
    for box, hands in r["boxes"].items():
        for h in hands:
            cards = [Card.parse(c) for c in h["cards"]]
            total = _total(cards)
            blackjack = len(hands) == 1 and len(cards) == 2 and total == 21  # a split hand's 21 is not
            if h["surrendered"]:
                times = Fraction(-1, 2)
            elif total > 21:
                times = Fraction(-1)
            elif dealer_bj:
                times = Fraction(0) if blackjack else Fraction(-1)  # no hole card: doubled stakes lost too
            elif blackjack:
                times = Fraction(3, 2)
            elif dealer_total > 21 or total > dealer_total:
                times = Fraction(1)
            else:
                times = Fraction(0) if total == dealer_total else Fraction(-1)
            for player, stake in h["stakes"].items():
                nets[(player, int(box), h["hand"])] = times * (stake + h["doubled"].get(player, 0))
    return nets


def _total(cards: list[Card]) -> int:
    hard = sum(min(int(c.rank), 10) for c in cards)
    return hard + 10 if any(c.rank is Rank.ACE for c in cards) and hard <= 11 else hard


def _nets(nets: dict[tuple[str, int, int], Fraction]) -> str:
    return ", ".join(f"{p} box {b} hand {h + 1}: {n}" for (p, b, h), n in sorted(nets.items()))


class _ReadProbe:
    """When the simulated shoe emitted each CardRead (wrapping the simulator's ``emit``), in order; a
    read emitted again after a reboot or reconnection keeps its first time."""

    def __init__(self, rig: BenchRig) -> None:
        self._reads: list[tuple[str, float]] = []  # not taken yet
        self._count = 0
        self._indexes: set[int] = set()  # this shoe's
        self._lock = threading.Lock()
        device = rig.sim.shoe.device
        emit = device.emit

        def probe(msg: Any) -> None:
            if isinstance(msg, CardRead):
                with self._lock:
                    if msg.index not in self._indexes:
                        self._indexes.add(msg.index)
                        self._reads.append((str(msg.card), time.monotonic()))
                        self._count += 1
            emit(msg)

        device.emit = probe  # type: ignore[method-assign]  # the one place the soak looks inside the simulator

    def new_shoe(self) -> None:
        with self._lock:
            self._indexes.clear()

    def count(self) -> int:
        """Cards read over the run."""
        with self._lock:
            return self._count

    def take(self) -> list[tuple[str, float]]:
        """The reads (card, when emitted) since the last take."""
        with self._lock:
            reads, self._reads = self._reads, []
            return reads


class _Watcher:
    """A WATCH connection on its own thread: every event counted, the cards placed (with when each
    arrived), each round's SETTLED lines and end."""

    def __init__(self, socket: Path) -> None:
        self.client = ApiClient(socket)
        self._counts: Counter[str] = Counter()
        self._placements: list[tuple[str, float]] = []  # not taken yet
        self._placed = 0
        self._round_cards: dict[int, list[str]] = {}
        self._settled: dict[int, list[dict[str, Any]]] = {}
        self._ended: set[int] = set()
        self._holds = 0
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="soak-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self.client.watch():
                now = time.monotonic()
                with self._changed:
                    self._counts[event.reason or event.kind] += 1
                    data = event.data
                    if event.reason in CARD_REASONS:
                        self._placements.append((data["card"], now))
                        self._placed += 1
                        if event.reason == "CARD_ASSIGNED":
                            self._round_cards.setdefault(data["round"], []).append(data["card"])
                    elif event.reason == "SETTLED":
                        self._settled.setdefault(data["round"], []).append(data)
                    elif event.reason == "ROUND_STATE" and data.get("state") in ("complete", "void"):
                        self._ended.add(data["round"])
                    elif event.reason == "ROUND_HELD":
                        self._holds += 1
                    self._changed.notify_all()
        except ClientError:
            return  # closed at the end of the soak

    def placed(self) -> int:
        """Cards placed over the run."""
        with self._changed:
            return self._placed

    def wait_placed(self, n: int, timeout: float, stop_if_held: bool = False) -> bool:
        """Until ``n`` cards are placed (True), a round is held meanwhile (True: the caller resumes
        it and deals on), or ``timeout`` (False)."""
        with self._changed:
            holds = self._holds
            return self._changed.wait_for(lambda: self._placed >= n or (stop_if_held and self._holds > holds), timeout)

    def wait_round_end(self, round_id: int, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: round_id in self._ended, timeout)

    def take_placements(self) -> list[tuple[str, float]]:
        """The cards placed (card, when its event arrived) since the last take."""
        with self._changed:
            placements, self._placements = self._placements, []
            return placements

    def round_cards(self, round_id: int) -> list[str]:
        with self._changed:
            return list(self._round_cards.pop(round_id, []))

    def settled(self, round_id: int) -> list[dict[str, Any]]:
        with self._changed:
            return list(self._settled.pop(round_id, []))

    def counts_now(self) -> Counter[str]:
        with self._changed:
            return Counter(self._counts)

    def close(self) -> None:
        """Once the daemon has ended the connection (a join first: closing the stream while the
        thread reads it would wait for the read's timeout)."""
        self._thread.join(timeout=5)
        self.client.close()


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


#: each injected kind's colour on the latency plot
FAULT_COLOURS = {"shoe_unplug": "tab:red", "shoe_reboot": "tab:purple", "shoe_line_noise": "tab:orange",
                 "shuffler_jam": "tab:green", "shuffler_unplug": "tab:brown"}


def plot_figure(report: SoakReport) -> Figure:
    """Card latency over the run with every injected fault marked (a line at the card it was set
    before, one colour a kind), its histogram, and the daemon's memory on an axis scaled to it, with
    its trend line when there are enough rounds (TREND_MIN_ROUNDS); the run's arguments, version and
    date in the title."""
    import matplotlib
    matplotlib.use("Agg")  # no display on a bench computer or in CI
    import matplotlib.pyplot as plt

    fig, (series, histogram, memory) = plt.subplots(3, 1, figsize=(10, 10.5))
    fig.suptitle(report.run_line(), fontsize=9)
    series.plot(report.latencies_ms, ".", markersize=1.5, alpha=0.5, color="tab:blue")
    series.set_yscale("log")
    marks = series.get_xaxis_transform()  # x in cards, y from the axis' bottom (0) to its top (1)
    for kind, colour in FAULT_COLOURS.items():
        cards = [mark.card for mark in report.faults if mark.kind == kind]
        if cards:
            series.vlines(cards, 0, 1, transform=marks, colors=colour, linewidth=0.8,
                          alpha=0.7 if len(report.faults) < 200 else 0.3,  # thousands over a long run: a shade
                          label=f"{kind} ({len(cards)})", gid=f"fault:{kind}")
    if report.faults:
        series.legend(loc="upper right", fontsize=7, title="faults injected", title_fontsize=7)
    series.set_xlabel("card (dealing order over the run)")
    series.set_ylabel("latency (ms)")
    series.set_title("card latency: the shoe emitting CardRead to its event at an API watcher")
    labels, counts = zip(*report.latency_histogram())
    histogram.bar(range(len(counts)), counts)
    histogram.set_xticks(range(len(counts)), labels, rotation=30, fontsize=8)
    histogram.set_yscale("log")
    histogram.set_ylim(bottom=0.5)  # a bucket of one card still shows
    histogram.set_ylabel("cards")
    lat = report.latency_summary()
    histogram.set_title("card latency histogram: " + ", ".join(f"{k} {v:.1f} ms" for k, v in lat.items()))
    title = f"daemon memory over {report.shoes} shoes, {report.rounds} rounds"
    if report.memory:
        rounds = [s.round for s in report.memory]
        mib = [s.rss_kib / 1024 for s in report.memory]
        memory.plot(rounds, mib, linewidth=0.8, label="cardd VmRSS")
        trend = report.memory_trend()
        if trend is not None and trend.enough:
            fit = report.memory[int(len(report.memory) * WARM_UP_SHARE):]
            y0 = statistics.mean(s.rss_kib for s in fit) - trend.slope_kib_per_1000_rounds / 1000 * statistics.mean(
                s.round for s in fit)
            ends = [fit[0].round, fit[-1].round]
            memory.plot(ends, [(y0 + trend.slope_kib_per_1000_rounds / 1000 * x) / 1024 for x in ends], "--",
                        label=f"trend {trend.slope_kib_per_1000_rounds:+.1f} KiB / 1000 rounds")
        else:
            title += f": too few rounds to extrapolate (fewer than {TREND_MIN_ROUNDS})"
        memory.legend(loc="lower right")
        # the axis spans the data (a margin of a tenth, at least 0.25 MiB each side): from zero, a
        # few MiB of growth over 50 MiB was a flat line whatever it did
        low, high = min(mib), max(mib)
        margin = max((high - low) / 10, 0.25)
        memory.set_ylim(low - margin, high + margin)
    memory.set_xlabel("round")
    memory.set_ylabel("cardd RSS (MiB)")
    memory.set_title(title)
    fig.tight_layout()
    return fig


def png_metadata(report: SoakReport) -> dict[str, str]:
    """The PNG's text chunks: what reproduces the run, readable with any PNG tool."""
    return {"Title": f"cardbench soak: {'PASS' if report.passed else 'FAIL'}", "Description": report.run_line(),
            "Software": f"cardbench (cardd {report.version})", "Creation Time": report.started,
            "Seed": str(report.seed), "Rules": report.rules, "Fault rate": f"{report.fault_rate:g}",
            "Unplug rate": f"{report.unplug_rate:g}", "Faults injected": str(len(report.faults))}


def plot_png(report: SoakReport) -> bytes:
    """:func:`plot_figure` as a PNG with :func:`png_metadata` in its text chunks."""
    import matplotlib.pyplot as plt

    fig = plot_figure(report)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=90, metadata=png_metadata(report))
    plt.close(fig)
    return out.getvalue()


def summary_lines(report: SoakReport) -> list[str]:
    """The figures, one per line (the CLI prints them, the HTML report shows them)."""
    lat = report.latency_summary()
    trend = report.memory_trend()
    injected = ", ".join(f"{k} {v}" for k, v in sorted(report.injected.items())) or "none"
    shoes = f"{report.shoes} shoes"
    if report.shoes < report.shoes_asked:  # the run stopped: in which shoe, of how many
        shoes = (f"{report.shoes} of {report.shoes_asked} shoes played to their end (the run stopped in shoe "
                 f"{report.shoes + 1})")
    return [
        f"{shoes}, {report.rounds} rounds, {report.cards} cards in {report.seconds:.1f} s",
        f"injected: {injected}; held rounds resumed: {report.resumed}",
        "card latency (ms): " + ", ".join(f"{k} {v:.1f}" for k, v in lat.items()),
        "daemon memory: " + (trend.describe() if trend else "too few samples"),
        f"journal chain, walked round by round: {report.chain_checked} records; at the end: {report.chain_detail}",
    ] + [line for line in (report.cut_line(),) if line] + ([] if report.kept_folder is None else
         [f"the run's folder is kept for inspection: {report.kept_folder} (journal.sqlite3, the daemon's log cardd.log)"])


def fault_rows(report: SoakReport) -> list[tuple[str, int, int, float]]:
    """Each injected fault as (kind, round, card, seconds): the report's table of fault times."""
    return [(m.kind, m.round, m.card + 1, m.seconds) for m in report.faults]


def report_html(report: SoakReport, png: bytes) -> str:
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{v}</td></tr>" for k, v in sorted(report.events.items()))
    faults = "".join(f"<tr><td>{html.escape(kind)}</td><td>{rnd}</td><td>{card}</td><td>{at:.3f}</td></tr>"
                     for kind, rnd, card, at in fault_rows(report))
    buckets = "".join(f"<tr><td>{html.escape(k)}</td><td>{v}</td></tr>" for k, v in report.latency_histogram())
    problems = "".join(f"<li>{html.escape(v)}</li>" for v in report.violations) or "<li>none</li>"
    figures = "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(report))
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>cardbench soak</title></head><body>
<h1>cardbench soak: {"PASS" if report.passed else "FAIL"}</h1>
<p id="run">{html.escape(report.run_line())}</p>
<ul>{figures}</ul>
<h2>Invariant violations</h2><ul>{problems}</ul>
<img alt="card latency and daemon memory" src="data:image/png;base64,{base64.b64encode(png).decode()}">
<h2>Card latency histogram</h2><table><tr><th>latency</th><th>cards</th></tr>{buckets}</table>
<h2>Events</h2><table><tr><th>reason</th><th>count</th></tr>{rows}</table>
<h2>Faults injected</h2><table id="faults"><tr><th>fault</th><th>round</th><th>card</th><th>seconds in</th></tr>{faults}</table>
</body></html>
"""
