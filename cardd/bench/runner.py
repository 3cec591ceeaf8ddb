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
import time
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Protocol

from cardd.api.client import ApiClient, ClientError, CommandRefused, StateTimeout
from cardd.api.protocol import LOG_LIMIT_MAX, ApiEvent
from cardd.bench.scenario import (
    Command, Deal, Expect, Load, Play, Remainder, Rounds, Scenario, ScenarioError, SetFaults, Shuffle, Step, Wait,
    load_scenario,
)
from cardd.bench.strategy import STRATEGIES
from cardd.journal import journal_files
from core.ctrl_c import ending_deferred, stop_child
from core.cards import Card, shoe_composition
from core.rundirs import make_run_directory
from devices.game.round_types import Action
from devices.game.rules import load_rules
from simulators.endpoint import Endpoint
from simulators.faults import Faults
from simulators.pty_endpoint import PtyEndpoint
from simulators.rig import SimulatedTable, cut_card_at
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler
from simulators.stack import fisher_yates, full_shoe

#: how long the daemon and its simulated devices may take to come up on a loaded machine
START_TIMEOUT = 30.0
#: the requests a second per connection the rig's own cardd allows (``[api] rate`` and ``burst`` in
#: the config it writes; the default 50 would set the bench's pace, not the daemon)
API_RATE = 1000
#: each client paces itself to 80 % of that
REQUEST_INTERVAL_S = 1.25 / API_RATE
POLL_S = 0.005
#: how long a person at real hardware may take to do what the bench asks (load the shoe, deal a card)
OPERATOR_TIMEOUT = 300.0
#: an expect step looks this long for the records it expects to be journaled (they follow STATE)
EXPECT_JOURNAL_S = 5.0


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
    skipped: str = ""  # why the scenario was not run on the real devices (then passed is False too)


def cardd_command() -> list[str]:
    script = Path(sys.executable).with_name("cardd")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cardd.daemon.main"]


def run_scenario(path: Path, real: dict[str, str] | None = None, say: Callable[[str], None] = print,
                 make_rig: Callable[[Scenario, Path, Path], BenchRig] | None = None,
                 keep_journal: Path | None = None) -> ScenarioResult:
    """Run one scenario file. ``real``: role ("shuffler", "shoe") -> the URL of a real device used
    instead of a simulated one; a scenario that needs what real hardware cannot do is skipped (the
    result says why), and ``say`` asks the person at the hardware to move the cards. ``make_rig``
    (scenario, file, state folder) builds the rig instead (cardbench record passes one that records
    a trace; no real devices then). ``keep_journal``: where the daemon's journal is copied once it
    has stopped (its files, :func:`cardd.journal.journal_files`), whatever the outcome."""
    start = time.monotonic()
    real = real or {}
    try:
        scenario = load_scenario(path)
    except ScenarioError as exc:
        return ScenarioResult(path, False, time.monotonic() - start, str(exc))
    if real:
        by_hand = load_rules(scenario.rules_path(path)).shoe.shuffle == "hand"
        why = needs_simulators(scenario, set(real), by_hand)
        if why:
            return ScenarioResult(path, False, time.monotonic() - start, skipped=f"{path}: {why}")
    directory = make_run_directory("cardbench-", "/tmp")  # removed below; by the next run if this one is killed
    os.chmod(directory, 0o755)
    try:
        with (make_rig(scenario, path, directory) if make_rig is not None
              else BenchRig(scenario, path, directory, real, say)) as rig:
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
        if keep_journal is not None:
            _keep(directory / "journal.sqlite3", keep_journal)
        shutil.rmtree(directory, ignore_errors=True)


def _keep(journal: Path, to: Path) -> None:
    """The stopped daemon's journal, copied to ``to`` (with its WAL and head file where they exist)."""
    for source, target in zip(journal_files(journal), journal_files(to)):
        if source.exists():
            shutil.copyfile(source, target)


def needs_simulators(scenario: Scenario, real: set[str], by_hand: bool) -> str | None:
    """Why ``scenario`` cannot run with the ``real`` roles on real hardware (None: it can): a fault
    injected into a real device, a stacked shoe, or cards to move between a real and a simulated one."""
    cannot = "which real hardware cannot be made to do"
    for role in sorted(real):
        faults = getattr(scenario.devices, role).faults
        if faults:
            return f"devices.{role}.faults = {faults!r}: a fault injected into the real {role}, {cannot}"
    if scenario.devices.shuffler.stack is not None:
        return "devices.shuffler.stack: a stacked shoe, which the bench cannot put into real hardware"
    for number, step in enumerate(scenario.step, 1):
        if isinstance(step, SetFaults) and step.device in real:
            return f"step {number} (faults): {step.set!r} injected into the real {step.device}, {cannot}"
        if isinstance(step, Load) and not by_hand and len(real) == 1:
            (role,) = real
            other = "shoe" if role == "shuffler" else "shuffler"
            return f"step {number} (load): the stack cannot move between a real {role} and a simulated {other}"
    return None


class Hands(Protocol):
    """The dealer's hands: what moves cards physically (the host only ever reads them)."""

    #: how long the bench waits for what they were asked to do to show in STATE
    timeout: float

    def hand_off(self, penetration: float, cut_at: int | None) -> None:
        """The shuffled stack from the shuffler into the shoe, the cut card after card ``cut_at``
        (None: at ``penetration`` of the stack)."""

    def load(self, stack: list[Card] | None, decks: int, penetration: float, cut_at: int | None) -> None:
        """A hand-shuffled table: the dealer's own shuffle (``stack``, or any order) into the shoe."""

    def deal(self, cards: int) -> None:
        """The shoe deals ``cards`` cards."""


class SimulatedHands:
    """The bench's own hands on the simulated devices."""

    timeout = 10.0

    def __init__(self, shuffler: Endpoint[SimulatedShuffler] | None, shoe: Endpoint[SimulatedShoe]) -> None:
        self.shuffler, self.shoe = shuffler, shoe

    def hand_off(self, penetration: float, cut_at: int | None) -> None:
        assert self.shuffler is not None, "needs_simulators() skips a hand-off from a real shuffler"
        SimulatedTable(self.shuffler, self.shoe).hand_off(penetration, cut_at)

    def load(self, stack: list[Card] | None, decks: int, penetration: float, cut_at: int | None) -> None:
        cards = stack if stack is not None else fisher_yates(full_shoe(decks))
        self.shoe.call(self.shoe.device.load, cards, cut_card_at(len(cards), penetration, cut_at or None))

    def deal(self, cards: int) -> None:
        self.shoe.call(self.shoe.device.deal, cards)


class OperatorHands:
    """A person at real hardware: each move is asked for in one line (``say``); the bench then waits
    for the devices to report it, as long as a person may need."""

    timeout = OPERATOR_TIMEOUT

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say

    def hand_off(self, penetration: float, cut_at: int | None) -> None:
        self.say(f"hands: put the shuffled stack into the shoe, the cut card {_cut(penetration, cut_at)}")

    def load(self, stack: list[Card] | None, decks: int, penetration: float, cut_at: int | None) -> None:
        self.say(f"hands: shuffle {decks} decks by hand into the shoe, the cut card {_cut(penetration, cut_at)}")

    def deal(self, cards: int) -> None:
        self.say(f"hands: deal {cards} card(s) from the shoe")


def _cut(penetration: float, cut_at: int | None) -> str:
    return f"after card {cut_at}" if cut_at is not None else f"{round(100 * penetration)} % into the stack"


def _name(step: Step) -> str:
    tag = type(step).__struct_config__.tag
    return f"{tag} {step.name}" if isinstance(step, Command) else str(tag)


class BenchRig:
    """The simulated devices, the daemon configured with them, and one API client."""

    def __init__(self, scenario: Scenario, path: Path, directory: Path, real: dict[str, str] | None = None,
                 say: Callable[[str], None] = print, sim: SimulatedTable | None = None,
                 reconnect_stable_s: float | None = None) -> None:
        """``real``: role -> URL of a real device; ``sim``: other devices than the scenario's
        simulators (cardbench replay's traced ones); ``reconnect_stable_s``: the daemon's
        ``[devices] reconnect_stable_s`` (None: its default)."""
        self.scenario, self.directory = scenario, directory
        self.reconnect_stable_s = reconnect_stable_s
        self.rules_path = scenario.rules_path(path)
        self.rules = load_rules(self.rules_path)
        #: role -> URL of a real device: no simulated one is started for that role
        self.real = dict(real or {})
        devices = scenario.devices
        # a hand-shuffled table (shoe.shuffle = "hand") has no counting shuffler: the dealer shuffles, the bench's hands load
        self.by_hand = self.rules.shoe.shuffle == "hand"
        self.shuffler_sim: Endpoint[SimulatedShuffler] | None = None
        self.shoe_sim: Endpoint[SimulatedShoe] | None = None
        if sim is not None:
            self.shuffler_sim, self.shoe_sim = sim.shuffler, sim.shoe
        if "shuffler" not in self.real and self.shuffler_sim is None:
            self.shuffler_sim = PtyEndpoint(SimulatedShuffler(faults=Faults.parse(devices.shuffler.faults)))
        if "shoe" not in self.real and self.shoe_sim is None:
            self.shoe_sim = PtyEndpoint(SimulatedShoe(faults=Faults.parse(devices.shoe.faults)))
        self.hands: Hands = OperatorHands(say) if self.shoe_sim is None else SimulatedHands(self.shuffler_sim,
                                                                                            self.shoe_sim)
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

    @property
    def sim(self) -> SimulatedTable:
        """Both simulated devices (a run with none of them real, as the soak's)."""
        assert self.shuffler_sim is not None and self.shoe_sim is not None, "a real device in this run"
        return SimulatedTable(self.shuffler_sim, self.shoe_sim)

    def _simulated(self) -> list[Endpoint[Any]]:
        return [ep for ep in (self.shuffler_sim, self.shoe_sim) if ep is not None]

    def url(self, role: str) -> str:
        if role in self.real:
            return self.real[role]
        endpoint = self.shuffler_sim if role == "shuffler" else self.shoe_sim
        assert endpoint is not None
        return endpoint.url

    def __enter__(self) -> BenchRig:
        try:
            for endpoint in self._simulated():
                endpoint.start()
            top = self.scenario.devices.shuffler.stack
            if top is not None:
                self.stacked = stacked_shoe(top, self.rules.decks)
                if self.shuffler_sim is not None and not self.by_hand:
                    self.shuffler_sim.call(self.shuffler_sim.device.stack, self.stacked)
            self._start_daemon()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for client in (self.client, self.display):
            if client is not None:
                client.close()
        stop_child(self.proc, signal.SIGTERM, 30)
        for endpoint in reversed(self._simulated()):
            endpoint.stop()

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
        shuffler = [] if self.by_hand else [f'shuffler = "{self.url("shuffler")}"']
        stable = [] if self.reconnect_stable_s is None else [f"reconnect_stable_s = {self.reconnect_stable_s}"]
        (d / "cardd.toml").write_text("\n".join([
            "[devices]", f'shoe = "{self.url("shoe")}"', *shuffler, *stable, "",
            "[table]", f'rules = "{self.rules_path}"', "", "[journal]", f'path = "{d / "journal.sqlite3"}"', "",
            "[api]", f'socket = "{socket}"', f"rate = {API_RATE}", f"burst = {API_RATE}",
            f"refused_per_minute = {60 * API_RATE}", ""]))
        # the daemon's log goes to a file: a pipe nobody reads fills up (64 KiB: about 16 shoes of device
        # and link lines) and the daemon's next log line then blocks its whole loop
        # (--stop-with-parent: a cardbench killed by SIGKILL, which nothing catches, takes its daemon along)
        with self.log_path.open("wb") as log_file, ending_deferred():  # an interrupt finds it to stop
            self.proc = subprocess.Popen([*cardd_command(), "--config", str(d / "cardd.toml"), "--log-format", "json",
                                          "--stop-with-parent", str(os.getpid())],
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

    def journal(self, since: int | None = None) -> list[ApiEvent]:
        """Every record journaled so far (from seq ``since`` on, when given), page by page."""
        records: list[ApiEvent] = []
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
            penetration = self.rules.shoe.penetration
            if self.by_hand:
                self.hands.load(self.stacked, self.rules.decks, penetration, step.cut_at)
            else:
                self.hands.hand_off(penetration, step.cut_at)
            states = ("burning", "in_play") if step.until == "loaded" else ("refused",)
            state = self._wait(lambda s: s["shoe"]["state"] in states, f"the shoe {' or '.join(states)}",
                               self.hands.timeout, show=lambda s: f"shoe {s['shoe']['state']}")
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
            endpoint: Endpoint[Any] | None = self.shuffler_sim if step.device == "shuffler" else self.shoe_sim
            assert endpoint is not None, "needs_simulators() skips a fault for a real device"
            endpoint.set_faults(**Faults.changes(step.set))  # "x=0" switches x off
        elif isinstance(step, Wait):
            self._wait(lambda s: step.met(_at(s, step.path)), step.wanted(), step.timeout,
                       show=lambda s: f"{step.path} = {_at(s, step.path)!r}")
        elif isinstance(step, Expect):
            self._expect(step)

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
        self.hands.deal(cards)
        if wait:
            self._wait(lambda s: s["shoe"]["cards_out"] >= before + cards, f"{cards} more card(s) out",
                       self.hands.timeout, show=lambda s: f"{s['shoe']['cards_out'] - before} more out")

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
        assert self.shoe_sim is not None, "needs_simulators() skips a stacked shoe on a real shoe"
        dealt = self.shoe_sim.state()["cards_out"]  # what physically left, read or not
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
                raise StepFailed(f"{path} = {value!r}", f"{path} = {got!r}{_absent(state, path)}")
        if step.alarms is not None:
            open_alarms = sorted(a["reason"] for a in state["alarms"])
            if open_alarms != sorted(step.alarms):
                raise StepFailed(f"open alarms {sorted(step.alarms)}", f"{open_alarms}")
        if not (step.events or step.no_events or step.settlement):
            return
        # STATE shows what the table applied; a record joins the journal at its commit, which may
        # come later (after a commit under way on the writer thread: a loaded machine): the events
        # and the money are looked for again until they are there or the step's time is up
        deadline = time.monotonic() + EXPECT_JOURNAL_S
        records: list[ApiEvent] = []
        while True:
            records += self.journal(since=records[-1].seq + 1 if records else None)  # what was committed since
            seen = {r.reason for r in records} - {""}  # a table input's record carries no reason
            present = [reason for reason in step.no_events if reason in seen]
            if present:
                raise StepFailed(f"no events {present}", f"{present} journaled")
            try:
                _expect_records(step, seen, records)
                return
            except StepFailed:
                if time.monotonic() > deadline:
                    raise
            time.sleep(self.poll_s)


def _expect_records(step: Expect, seen: set[str], records: list[ApiEvent]) -> None:
    """The events and the settlement ``step`` expects, in ``records`` (``seen``: their reasons)."""
    missing = [reason for reason in step.events if reason not in seen]
    if missing:
        raise StepFailed(f"events {missing}", f"none of them; journaled: {sorted(seen)}")
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
    return _walk(state, path)[0]


def _absent(state: Any, path: str) -> str:
    """Where a dotted path leaves STATE, when a key is not there (a typo reads as None otherwise):
    "; STATE's round has no 'dealr' (it has: boxes, dealer, ...)"; "" when the path is there."""
    return _walk(state, path)[1]


def _walk(state: Any, path: str) -> tuple[Any, str]:
    """(the value at a dotted path of STATE or None, and where the path left STATE at a dict
    without its key, else ""): one walk for :func:`_at` and :func:`_absent`."""
    value, walked = state, list[str]()
    for part in path.split("."):
        if isinstance(value, dict):
            if part not in value:
                where = "STATE" if not walked else "STATE's " + ".".join(walked)
                return None, f"; {where} has no {part!r} (it has: {', '.join(sorted(map(str, value)))})"
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None, ""  # None or a list too short: the value there is what the expectation compares
        walked.append(part)
    return value, ""


def _money(value: Fraction | None) -> str:
    if value is None:
        return "nothing settled"
    return str(value.numerator) if value.denominator == 1 else str(value)


def _short(value: Any, limit: int = 300) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit] + " ..."
