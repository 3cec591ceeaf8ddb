"""``cardbench soak``: random play through the real daemon, shoe after shoe, with the invariants
checked after every round, device unplugs at a configurable rate, and the figures a long run
needs: card latency, event counts, the daemon's memory over the run.

Each shoe is a random order the bench makes (seeded) and stacks in the simulated shuffler, so at
the shoe's end the bench counts the undealt remainder back for reconciliation, as the shuffler
would. Rounds: 1 to 3 boxes, basic strategy. Invariants, each round: every card that left the shoe
is in exactly one place (burn, discard, played, pending, drawn in error: their sum is the shoe's
``cards_out``), and the round's SETTLED lines add up to minus the house result; each shoe
reconciles; at the end the journal's hash chain verifies. An unplugged shoe holds the round; the
soak waits for the shoe and resumes the round as a supervisor would.
"""
from __future__ import annotations

import base64
import html
import io
import os
import random
import shutil
import statistics
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from cardd.api.client import ApiClient, ClientError, CommandRefused
from cardd.bench.runner import BenchRig, StepFailed
from cardd.bench.scenario import Load, Scenario, Shuffle
from cardd.journal.journal import Journal
from core.cards import shoe_composition
from simulators.stack import fisher_yates

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class SoakReport:
    shoes: int = 0
    rounds: int = 0
    latencies_ms: list[float] = field(default_factory=list)  # one per card, in dealing order
    memory_kib: list[tuple[int, int]] = field(default_factory=list)  # (round, daemon VmRSS)
    events: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    unplugs: int = 0
    chain_ok: bool = False
    chain_detail: str = ""
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.violations and self.chain_ok

    def latency_summary(self) -> dict[str, float]:
        xs = sorted(self.latencies_ms)
        if not xs:
            return {}
        return {"median": statistics.median(xs), "p95": xs[int(0.95 * (len(xs) - 1))],
                "p99": xs[int(0.99 * (len(xs) - 1))], "max": xs[-1]}

    def memory_growth_kib(self) -> int:
        """Second half's mean minus the first half's (flat memory: near 0)."""
        values = [kib for _, kib in self.memory_kib]
        if len(values) < 4:
            return 0
        half = len(values) // 2
        return int(statistics.mean(values[half:]) - statistics.mean(values[:half]))


def soak(shoes: int, rules: str = "casino-000", seed: int = 1, unplug_rate: float = 0.0,
         cut_at: int | None = None) -> SoakReport:
    """Play ``shoes`` shoes through a fresh cardd; ``unplug_rate``: the chance per round that the shoe
    is unplugged for a moment after its next card; ``cut_at``: the cut card after this card (short
    shoes for CI; default the rules' penetration)."""
    report = SoakReport()
    rng = random.Random(seed)
    start = time.monotonic()
    directory = Path(tempfile.mkdtemp(prefix="cardbench-soak-", dir="/tmp"))
    os.chmod(directory, 0o755)
    scenario = Scenario(description="soak", rules=rules, step=[])
    try:
        with BenchRig(scenario, ROOT / "rules" / f"{rules}.toml", directory) as rig:
            watcher = _CardWatcher(rig.socket)
            rig.on_card = lambda started: report.latencies_ms.append(1000 * watcher.latency(started))
            rig.on_hold = lambda why: _resume(rig, why)
            if rig.rules.table.lone_player_min_boxes > 1:  # seed 001: a lone player plays two boxes; one more sits
                rig.api().command("take_seat", player="seated-1")
            for _ in range(shoes):
                _play_shoe(rig, rng, report, unplug_rate, cut_at)
                report.shoes += 1
            report.events = Counter(r.reason for r in rig.journal())
            watcher.close()
        with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
            result = journal.verify()
            report.chain_ok, report.chain_detail = result.ok, str(result)
    except (StepFailed, ClientError, RuntimeError) as exc:  # the daemon stuck or gone is a finding too
        report.violations.append(f"shoe {report.shoes + 1}, after {report.rounds} rounds: {exc}")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    report.seconds = time.monotonic() - start
    return report


def _play_shoe(rig: BenchRig, rng: random.Random, report: SoakReport, unplug_rate: float,
               cut_at: int | None) -> None:
    decks = rig.rules.decks
    order = [card for card, n in shoe_composition(decks).items() for _ in range(n)]
    order = fisher_yates(order, rng)
    rig.stacked = order
    rig.sim.shuffler.call(rig.sim.shuffler.device.stack, order)
    rig.do(Shuffle())
    rig.do(Load(cut_at=cut_at))
    while rig.state()["shoe"]["state"] in ("in_play", "last_round"):
        if rng.random() < unplug_rate:
            index = rig.sim.shoe.state()["cards_out"]
            rig.sim.shoe.set_faults(disconnect_for=0.3, disconnect_at=index + 1)
            report.unplugs += 1
        rig.api().command("open_round")
        boxes = sorted(rng.sample(range(1, rig.rules.table.boxes + 1), rng.randint(1, 3)))
        for box in boxes:
            rig.api().command("place_bet", box=box, player=f"p{box}", amount=rig.rules.table.min_per_player)
        rig.api().command("no_more_bets")
        rig.play("basic")
        report.rounds += 1
        _check_round(rig, report)
        if report.rounds % 5 == 0 and rig.proc is not None:
            report.memory_kib.append((report.rounds, _rss_kib(rig.proc.pid)))
    dealt = rig.sim.shoe.state()["cards_out"]
    returned = Counter(order[dealt:])
    rig.api().command("shoe_remainder", returned={str(c): n for c, n in returned.items()})
    shoe = rig.state()["shoe"]["state"]
    if shoe != "reconciled":
        report.violations.append(f"shoe {report.shoes + 1}: ended {shoe}, not reconciled")


#: the event that says where a card read went (a burn card, or a card given to a hand)
CARD_REASONS = ("BURN", "CARD_ASSIGNED")


class _CardWatcher:
    """A WATCH connection on its own thread: when each card's event reached a subscriber."""

    def __init__(self, socket: Path) -> None:
        self.client = ApiClient(socket)
        self.arrivals: list[float] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="soak-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self.client.watch():
                if event.reason in CARD_REASONS:
                    with self._lock:
                        self.arrivals.append(time.monotonic())
        except ClientError:
            return  # closed at the end of the soak

    def latency(self, started: float) -> float:
        """From the deal that started at ``started`` to its card's event at the watcher."""
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            with self._lock:
                later = [t for t in self.arrivals[-8:] if t >= started]
            if later:
                return later[0] - started
            time.sleep(0.001)
        return 5.0

    def close(self) -> None:
        self.client.close()
        self._thread.join(timeout=5)


def _resume(rig: BenchRig, why: str) -> bool:
    """A held round: wait for every device usable again, then resume as a supervisor."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state = rig.state()
        if all(d["usable"] for d in state["devices"].values()):
            try:
                rig.api().command("resume")
                return True
            except CommandRefused:
                pass
        time.sleep(0.05)
    return False


def _check_round(rig: BenchRig, report: SoakReport) -> None:
    state = rig.state()
    piles, r = state["piles"], state["round"]
    placed = piles["burn"] + piles["discard"] + piles["played"] + len(piles["pending"]) + len(piles["drawn_in_error"])
    if placed != state["shoe"]["cards_out"]:
        report.violations.append(f"round {r['id']}: {placed} cards placed, {state['shoe']['cards_out']} out")
    if r["state"] == "complete":
        lines = [rec for rec in rig.api().log(round=r["id"], reason="SETTLED").records]
        total = sum((Fraction(rec.data["net"]) for rec in lines), Fraction(0))
        house = Fraction(r["house_result"])
        if total != -house:
            report.violations.append(f"round {r['id']}: SETTLED lines add up to {total}, house result {house}")


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def plot_png(report: SoakReport) -> bytes:
    import matplotlib
    matplotlib.use("Agg")  # no display on a bench computer or in CI
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6))
    top.plot(report.latencies_ms, linewidth=0.6)
    top.set_xlabel("card")
    top.set_ylabel("latency (ms)")
    top.set_title("card latency: the shoe's deal to the card's event at an API watcher")
    if report.memory_kib:
        rounds, kib = zip(*report.memory_kib)
        bottom.plot(rounds, [k / 1024 for k in kib], marker=".")
    bottom.set_xlabel("round")
    bottom.set_ylabel("cardd RSS (MiB)")
    bottom.set_title("daemon memory")
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)
    return out.getvalue()


def report_html(report: SoakReport, png: bytes) -> str:
    lat = report.latency_summary()
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{v}</td></tr>" for k, v in sorted(report.events.items()))
    problems = "".join(f"<li>{html.escape(v)}</li>" for v in report.violations) or "<li>none</li>"
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>cardbench soak</title></head><body>
<h1>cardbench soak: {"PASS" if report.passed else "FAIL"}</h1>
<p>{report.shoes} shoes, {report.rounds} rounds, {len(report.latencies_ms)} cards, {report.unplugs} unplugs,
{report.seconds:.1f} s. Journal chain: {html.escape(report.chain_detail)}.</p>
<p>Card latency (ms): {", ".join(f"{k} {v:.1f}" for k, v in lat.items())}.
Memory growth (second half minus first half): {report.memory_growth_kib()} KiB.</p>
<h2>Invariant violations</h2><ul>{problems}</ul>
<img alt="card latency and daemon memory" src="data:image/png;base64,{base64.b64encode(png).decode()}">
<h2>Events</h2><table><tr><th>reason</th><th>count</th></tr>{rows}</table>
</body></html>
"""
