"""Running one scenario through the real daemon and its API.

Each scenario gets a fresh ``cardd`` (a subprocess, its own state folder, journal and socket)
configured with a simulated shuffler and shoe behind real pseudo-terminals that the bench owns: it
stacks them and switches their faults (``cardd --simulate`` keeps its devices to itself, so a
scenario that injects faults or stacks a shoe runs the devices here and passes their pty URLs in
the configuration). The steps talk to the daemon only through :class:`cardd.api.client.ApiClient`;
the bench's hands move the cards (the hand-off into the shoe, the shoe dealing), as a dealer's do.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

from cardd.api.client import ApiClient, ClientError, CommandRefused, StateTimeout
from cardd.api.protocol import LOG_LIMIT_MAX, Event
from cardd.bench.scenario import (
    Command, Deal, Expect, Load, Play, Remainder, Rounds, Scenario, ScenarioError, SetFaults, Shuffle, Step, Wait,
    load_scenario,
)
from cardd.bench.strategy import STRATEGIES
from core.cards import Card, shoe_composition
from devices.game.round_types import Action
from devices.game.rules import load_rules
from simulators.faults import Faults
from simulators.rig import SimulatedTable
from simulators.stack import fisher_yates, full_shoe

#: how long the daemon and its simulated devices may take to come up on a loaded machine
START_TIMEOUT = 30.0
#: the API allows 50 requests a second per connection (cardd/api/server.py): the bench makes at most 40
REQUEST_INTERVAL_S = 1 / 40
POLL_S = 0.005


class StepFailed(Exception):
    """A step whose outcome differs: ``expected`` vs ``got``."""

    def __init__(self, expected: str, got: str) -> None:
        super().__init__(f"expected {expected}, got {got}")
        self.expected, self.got = expected, got


@dataclass
class ScenarioResult:
    path: Path
    passed: bool
    seconds: float
    message: str = ""  # a failure: file, step, expected vs got
    steps: int = 0
    reasons: set[str] = field(default_factory=set)  # every reason code the daemon journaled


def cardd_command() -> list[str]:
    script = Path(sys.executable).with_name("cardd")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cardd.daemon.main"]


def run_scenario(path: Path) -> ScenarioResult:
    start = time.monotonic()
    try:
        scenario = load_scenario(path)
    except ScenarioError as exc:
        return ScenarioResult(path, False, time.monotonic() - start, str(exc))
    directory = Path(tempfile.mkdtemp(prefix="cardbench-", dir="/tmp"))
    os.chmod(directory, 0o755)
    try:
        with BenchRig(scenario, path, directory) as rig:
            for number, step in enumerate(scenario.step, 1):
                try:
                    rig.do(step)
                except StepFailed as exc:
                    return ScenarioResult(path, False, time.monotonic() - start,
                                          f"{path}: step {number} ({_name(step)}): {exc}", number, rig.reasons())
                except (ClientError, TimeoutError, RuntimeError) as exc:
                    return ScenarioResult(path, False, time.monotonic() - start,
                                          f"{path}: step {number} ({_name(step)}): {exc}", number, rig.reasons())
            return ScenarioResult(path, True, time.monotonic() - start, "", len(scenario.step), rig.reasons())
    except (ClientError, RuntimeError, OSError) as exc:
        return ScenarioResult(path, False, time.monotonic() - start, f"{path}: set-up: {exc}")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _name(step: Step) -> str:
    tag = type(step).__struct_config__.tag
    return f"{tag} {step.name}" if isinstance(step, Command) else str(tag)


class BenchRig:
    """The simulated devices, the daemon configured with them, and one API client."""

    def __init__(self, scenario: Scenario, path: Path, directory: Path) -> None:
        self.scenario, self.directory = scenario, directory
        self.rules_path = scenario.rules_path(path)
        self.rules = load_rules(self.rules_path)
        devices = scenario.devices
        self.sim = SimulatedTable.over_ptys(shuffler_faults=Faults.parse(devices.shuffler.faults),
                                            shoe_faults=Faults.parse(devices.shoe.faults))
        # a hand-shuffled table (seed 003) has no counting shuffler: the dealer shuffles, the bench's hands load
        self.by_hand = self.rules.shoe.shuffle == "hand"
        self.proc: subprocess.Popen[bytes] | None = None
        self.stacked: list[Card] | None = None  # the whole order of a stacked shoe (for the remainder)
        self.poll_s = POLL_S  # between reads of STATE while waiting (api() paces the requests themselves)
        #: deals ``n`` cards and returns once they are placed; a caller that watches the events (the
        #: soak) sets it, so a card costs no STATE polls (None: poll STATE for the shoe's cards_out)
        self.deal_placed: Callable[[int], None] | None = None
        #: a held round met while playing: True when it was dealt with (the soak resumes it), False fails
        self.on_hold: Callable[[str], bool] = lambda why: False
        self.client: ApiClient | None = None
        #: a second client for STATE reads (a pit display beside the dealer's console), each under the
        #: API's rate per connection; None: STATE on the one client
        self.display: ApiClient | None = None

    def __enter__(self) -> BenchRig:
        self.sim.start()
        try:
            top = self.scenario.devices.shuffler.stack
            if top is not None:
                self.stacked = stacked_shoe(top, self.rules.decks)
                if not self.by_hand:
                    self.sim.shuffler.call(self.sim.shuffler.device.stack, self.stacked)
            self._start_daemon()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for client in (self.client, self.display):
            if client is not None:
                client.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.sim.stop()

    @property
    def socket(self) -> Path:
        return self.directory / "cardd.sock"

    @property
    def log_path(self) -> Path:
        """The daemon's log (JSON lines)."""
        return self.directory / "cardd.log"

    def _start_daemon(self) -> None:
        d = self.directory
        socket = self.socket
        shuffler = [] if self.by_hand else [f'shuffler = "{self.sim.shuffler.url}"']
        (d / "cardd.toml").write_text("\n".join([
            "[devices]", f'shoe = "{self.sim.shoe.url}"', *shuffler, "",
            "[table]", f'rules = "{self.rules_path}"', "", "[journal]", f'path = "{d / "journal.sqlite3"}"', "",
            "[api]", f'socket = "{socket}"', ""]))
        # the daemon's log goes to a file: a pipe nobody reads fills up (64 KiB: about 16 shoes of device
        # and link lines) and the daemon's next log line then blocks its whole loop
        with self.log_path.open("wb") as log_file:
            self.proc = subprocess.Popen([*cardd_command(), "--config", str(d / "cardd.toml"), "--log-format", "json"],
                                         stdout=subprocess.DEVNULL, stderr=log_file)
        deadline = time.monotonic() + START_TIMEOUT
        while self.client is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"cardd exited with {self.proc.returncode}: "
                                   f"{self.log_path.read_text(errors='replace')[-2000:]}")
            try:
                self.client = ApiClient(socket, pace_s=REQUEST_INTERVAL_S)
            except ClientError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"cardd did not listen on {socket} within {START_TIMEOUT} s") from None
                time.sleep(0.05)
        names = ("shoe-reader",) if self.by_hand else ("shoe-reader", "shuffler")
        self._wait(lambda s: all(s["devices"][n]["link"] == "up" and s["devices"][n]["ident"] for n in names),
                   "the devices linked and identified", START_TIMEOUT)

    # ---- the API --------------------------------------------------------------------------

    def api(self) -> ApiClient:
        """The client (it paces its requests to stay under the API's rate per connection)."""
        assert self.client is not None
        return self.client

    def state(self) -> dict[str, Any]:
        return (self.display or self.api()).state()

    def _wait(self, check: Callable[[dict[str, Any]], bool], expected: str, timeout: float = 10.0,
              show: Callable[[dict[str, Any]], Any] = lambda s: s) -> dict[str, Any]:
        try:
            return self.api().wait_state(check, timeout, self.poll_s)
        except StateTimeout as exc:
            raise StepFailed(f"{expected} within {timeout:g} s", _short(show(exc.state))) from None

    def journal(self) -> list[Event]:
        """Every record journaled so far, page by page."""
        records: list[Event] = []
        since: int | None = None
        while True:
            page = self.api().log(from_seq=since, limit=LOG_LIMIT_MAX)
            records += page.records
            if not page.more or not page.records:
                return records
            since = page.records[-1].seq + 1

    def reasons(self) -> set[str]:
        try:
            return {record.reason for record in self.journal()}
        except ClientError:
            return set()

    # ---- steps ----------------------------------------------------------------------------

    def do(self, step: Step) -> None:
        if isinstance(step, Shuffle):
            self.api().command("hand_shuffled" if self.by_hand else "start_shuffle")
            self._wait(lambda s: s["shoe"]["state"] == step.until, f"the shoe {step.until}",
                       show=lambda s: f"shoe {s['shoe']['state']}")
        elif isinstance(step, Load):
            if self.by_hand:
                self._load_by_hand(step.cut_at)
            else:
                self.sim.hand_off(penetration=self.rules.shoe.penetration, cut_at=step.cut_at)
            states = ("burning", "in_play") if step.until == "loaded" else ("refused",)
            state = self._wait(lambda s: s["shoe"]["state"] in states, f"the shoe {' or '.join(states)}",
                               show=lambda s: f"shoe {s['shoe']['state']}")
            if step.burn and step.until == "loaded":
                for _ in range(state["shoe"]["burn_remaining"]):
                    self._deal(1, wait=True)
                self._wait(lambda s: s["shoe"]["state"] == "in_play", "the burn done",
                           show=lambda s: f"shoe {s['shoe']['state']}")
        elif isinstance(step, Command):
            self._command(step)
        elif isinstance(step, Deal):
            self._deal(step.cards, step.wait)
        elif isinstance(step, Play):
            self.play(step.strategy)
        elif isinstance(step, Rounds):
            self._rounds(step)
        elif isinstance(step, Remainder):
            self._remainder(step)
        elif isinstance(step, SetFaults):
            endpoint = self.sim.shuffler if step.device == "shuffler" else self.sim.shoe
            endpoint.set_faults(**Faults.parse(step.set).active())
        elif isinstance(step, Wait):
            self._wait(lambda s: step.met(_at(s, step.path)), step.wanted(), step.timeout,
                       show=lambda s: f"{step.path} = {_at(s, step.path)!r}")
        elif isinstance(step, Expect):
            self._expect(step)

    def _load_by_hand(self, cut_at: int | None) -> None:
        """The dealer's own shuffle (the scenario's stack on top, if any) goes into the shoe."""
        stack = self.stacked if self.stacked is not None else fisher_yates(full_shoe(self.rules.decks))
        if cut_at is None:
            cut_at = max(1, int(len(stack) * self.rules.shoe.penetration))
        self.sim.shoe.call(self.sim.shoe.device.load, stack, cut_at)

    def _command(self, step: Command) -> None:
        try:
            self.api().command(step.name, **step.args)
        except CommandRefused as exc:
            if step.refused is None:
                raise StepFailed("it done", f"ERROR {exc.code}: {exc}") from None
            if exc.code != step.refused:
                raise StepFailed(f"ERROR {step.refused}", f"ERROR {exc.code}: {exc}") from None
            return
        if step.refused is not None:
            raise StepFailed(f"ERROR {step.refused}", "ACK")

    def _deal(self, cards: int, wait: bool) -> None:
        if wait and self.deal_placed is not None:
            self.deal_placed(cards)
            return
        before = self.state()["shoe"]["cards_out"] if wait else 0
        self.sim.shoe.call(self.sim.shoe.device.deal, cards)
        if wait:
            self._wait(lambda s: s["shoe"]["cards_out"] >= before + cards, f"{cards} more card(s) out",
                       show=lambda s: f"{s['shoe']['cards_out'] - before} more out")

    def play(self, strategy_name: str) -> dict[str, Any]:
        """Play the live round to its end; STATE then."""
        strategy = STRATEGIES[strategy_name]()
        for _ in range(200):
            state = self.state()
            r = state["round"]
            if r is None:
                raise StepFailed("a live round to play", "no round")
            if r["state"] in ("complete", "void"):
                return state
            if r["held"]:
                if not self.on_hold(r["held"]):
                    raise StepFailed("a round to play", f"the round held: {r['held']}")
                continue
            if r["next"] is not None:
                self._deal(1, wait=True)
            elif r["state"] == "insurance":
                self.api().command("close_insurance")
            elif r["turn"] is not None:
                _, box, index = r["turn"]
                hand = next(h for h in r["boxes"][str(box)] if h["hand"] == index)
                cards = [Card.parse(c) for c in hand["cards"]]
                up = Card.parse(r["dealer"]["cards"][0])
                self._act(box, strategy.decide(cards, up))
            else:
                time.sleep(self.poll_s)  # a card on its way
        raise StepFailed("the round complete", _short(self.state()["round"]))

    def _rounds(self, step: Rounds) -> None:
        bet = step.bet or self.rules.table.min_per_player
        for _ in range(step.max_rounds):
            shoe = self.state()["shoe"]["state"]
            if shoe == "complete":
                return
            if shoe not in ("in_play", "last_round"):
                raise StepFailed("a shoe in play", f"shoe {shoe}")
            api = self.api()
            api.command("open_round")
            api.command("place_bet", box=1, player="p1", amount=bet)
            api.command("no_more_bets")
            self.play(step.strategy)
        raise StepFailed(f"the shoe complete within {step.max_rounds} rounds", f"shoe {self.state()['shoe']['state']}")

    def _remainder(self, step: Remainder) -> None:
        if self.stacked is None:
            raise StepFailed("a stacked shoe (the bench counts the remainder from the order it stacked)",
                             "a random shoe")
        dealt = self.sim.shoe.state()["cards_out"]
        returned = Counter(self.stacked[dealt:])
        returned.subtract(Card.parse(c) for c in step.drop)
        self.api().command("shoe_remainder", returned={str(c): n for c, n in returned.items() if n > 0})

    def _act(self, box: int, actions: tuple[Action, ...]) -> None:
        refusals = []
        for action in actions:
            try:
                self.api().command("act", box=box, action=action.value)
                return
            except CommandRefused as exc:
                refusals.append(f"{action.value}: {exc}")  # the rules forbid it here: the strategy's next choice
        raise StepFailed(f"one of {[a.value for a in actions]} allowed at box {box}", "; ".join(refusals))

    def _expect(self, step: Expect) -> None:
        state = self.state()
        for path, value in step.state.items():
            got = _at(state, path)
            if got != value:
                raise StepFailed(f"{path} = {value!r}", f"{path} = {got!r}")
        records = self.journal() if (step.events or step.no_events or step.settlement) else []
        seen = {r.reason for r in records}
        missing = [reason for reason in step.events if reason not in seen]
        if missing:
            raise StepFailed(f"events {missing}", f"none of them; journaled: {sorted(seen)}")
        present = [reason for reason in step.no_events if reason in seen]
        if present:
            raise StepFailed(f"no events {present}", f"{present} journaled")
        if step.alarms is not None:
            open_alarms = sorted(a["reason"] for a in state["alarms"])
            if open_alarms != sorted(step.alarms):
                raise StepFailed(f"open alarms {sorted(step.alarms)}", f"{open_alarms}")
        if step.settlement:
            nets: dict[str, Fraction] = {}
            for r in records:
                if r.reason == "SETTLED" and "player" in r.data:
                    nets[r.data["player"]] = nets.get(r.data["player"], Fraction(0)) + Fraction(r.data["net"])
            for player, cents in step.settlement.items():
                if nets.get(player) != cents:
                    raise StepFailed(f"{player} net {cents}", f"{player} net {_money(nets.get(player))}")


def stacked_shoe(top: list[str], decks: int) -> list[Card]:
    """``top`` first, then the rest of ``decks`` full decks in deck order: a complete shoe that passes
    the deck check, with the scenario's cards where the deal needs them."""
    cards = [Card.parse(c) for c in top]
    rest = Counter(shoe_composition(decks))
    rest.subtract(cards)
    return cards + [card for card in shoe_composition(1) for _ in range(max(0, rest[card]))]


def _at(state: Any, path: str) -> Any:
    """The value at a dotted path of STATE ("round.state", "alarms.0.reason"); None if absent."""
    value = state
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _money(value: Fraction | None) -> str:
    if value is None:
        return "nothing settled"
    return str(value.numerator) if value.denominator == 1 else str(value)


def _short(value: Any, limit: int = 300) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit] + " ..."
