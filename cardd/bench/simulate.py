"""The Monte Carlo: rounds played in-process through the real deal tracker (``Table.apply`` with
typed input records, as the daemon applies them); the table settles each round in exact money,
nothing here computes a payout. The shoe's order is the simulated device's (a seeded Fisher-Yates
shuffle); the table learns each card only as it is read. docs/bench.md, "`cardbench simulate`"."""
from __future__ import annotations

import collections
import dataclasses
import itertools
from json.encoder import encode_basestring_ascii
import math
import multiprocessing
import os
import queue
import signal
import random
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from core.ctrl_c import ending_signals
from cardd.bench.strategy import Strategy
from core.cards import Card, Orientation, shoe_composition
from core.errors import CarddError
from devices.game.dealer_odds import OUTCOMES, UP_CARDS
from devices.game.hand import card_value, hand_total
from devices.game.round_types import Action
from devices.errors import RuleViolation
from devices.game.rules import HouseRules
from devices.tracker.inputs import (
    Act, CloseInsurance, DeviceMessage, HandShuffled, LinkUp, NoMoreBets, OpenRound, PlaceBet, ShoeRemainder,
    TableInput, TakeSeat,
)
from devices.tracker.table import Table
from firmware_bridge.messages import (
    CardRead, CutCardSeen, DeckCheckResult, DeviceRole, Ident, ShoeLoaded, ShuffleComplete,
)

DEALER = "dealer-1"
_IN_PLAY = ("in_play", "last_round")  # shoe states a round may open in
MAX_DECKS = 8
_FACE_DOWN = Orientation.FACE_DOWN


class SimulationError(CarddError, ValueError):
    """A simulation that cannot run as asked (deck count, boxes, a shoe too small for the table)."""


def rules_for(rules: HouseRules, decks: int, boxes: int) -> HouseRules:
    """``rules`` with ``decks`` decks (1-8: the Monte Carlo goes beyond the 6 or 8 a rules file allows)."""
    if not 1 <= decks <= MAX_DECKS:
        raise SimulationError(f"--decks {decks}: a shoe holds 1 to {MAX_DECKS} decks")
    if not 1 <= boxes <= rules.table.boxes:
        raise SimulationError(f"--boxes {boxes}: the table {rules.name!r} has boxes 1 to {rules.table.boxes}")
    return dataclasses.replace(rules, shoe=dataclasses.replace(rules.shoe, decks=decks))


@dataclass(slots=True)
class RoundResult:
    """One settled round, as the simulation saw it."""

    number: int
    shoe: int
    up: Card
    dealer: list[Card]
    hands: list[dict[str, Any]]  # box, hand, cards, decisions, stake, net
    lines: list[dict[str, Any]]  # the settlement's lines (Line.as_data)
    staked: int  # the initial bets, cents
    net: int | Fraction  # what the players won (+) or lost (-), cents, exact
    #: the players' hands counted: hands, won, pushed, lost, blackjacks, bust (Summary.HAND_FIGURES)
    tally: tuple[int, int, int, int, int, int] = (0, 0, 0, 0, 0, 0)
    #: some hand neither bust nor surrendered when the dealer's turn came: the dealer's final is a
    #: hand played out to the drawing rule, as the exact table assumes
    dealer_played: bool = True
    dealer_total: int = field(init=False)
    dealer_outcome: str = field(init=False)  # one of devices.game.dealer_odds.OUTCOMES

    def __post_init__(self) -> None:
        total = self.dealer_total = hand_total(self.dealer)[0]
        self.dealer_outcome = "blackjack" if len(self.dealer) == 2 and total == 21 else \
            "bust" if total > 21 else str(total)

    def as_json(self) -> dict[str, Any]:
        return {"round": self.number, "shoe": self.shoe, "up": str(self.up),
                "dealer": [str(c) for c in self.dealer], "dealer_total": self.dealer_total,
                "dealer_outcome": self.dealer_outcome, "hands": self.hands, "settlement": self.lines,
                "staked": self.staked, "net": str(self.net)}

    def json_line(self) -> str:
        """The round's line of ``cardbench simulate`` output: :meth:`as_json` as compact JSON ("round" first,
        no newline), written out field by field (json's encoder took about 6 us a line, walking the
        dicts generically); every string quoted by json's own quoting."""
        hands = ",".join([f'{{"box":{h["box"]},"hand":{h["hand"]},"cards":[{_strings(h["cards"])}],'
                          f'"decisions":[{_strings(h["decisions"])}],"stake":{h["stake"]},"net":{_q(h["net"])}}}'
                          for h in self.hands])
        lines = ",".join([f'{{"player":{_q(ln["player"])},"box":{ln["box"]},'
                          f'"hand":{"null" if ln["hand"] is None else ln["hand"]},"kind":{_q(ln["kind"])},'
                          f'"stake":{ln["stake"]},"net":{_q(ln["net"])},"outcome":{_q(ln["outcome"])}}}'
                          for ln in self.lines])
        return (f'{{"round":{self.number},"shoe":{self.shoe},"up":{_q(str(self.up))},'
                f'"dealer":[{_strings([str(c) for c in self.dealer])}],"dealer_total":{self.dealer_total},'
                f'"dealer_outcome":{_q(self.dealer_outcome)},"hands":[{hands}],"settlement":[{lines}],'
                f'"staked":{self.staked},"net":{_q(str(self.net))}}}')


_q: Callable[[str], str] = encode_basestring_ascii  # json's quoting of a string (ensure_ascii, as json.dumps)


def _strings(items: list[str]) -> str:
    return ",".join([_q(s) for s in items])


#: the fewest rounds whose house-edge interval and standard deviations are quoted (docs/bench.md)
MIN_ROUNDS = 100
#: the fewest hands with an outcome, and without it, for its rate's standard deviation to be quoted
MIN_EVENTS = 5
#: what became of a player's hand, counted per hand (split hands each count)
HAND_FIGURES = ("win", "push", "loss", "blackjack", "bust")


@dataclass
class Summary:
    """Running figures over the rounds: the house edge with its confidence interval, the dealer's finals."""

    rounds: int = 0
    staked: int = 0
    net: int | Fraction = 0
    _mean: float = 0.0  # Welford over each round's net per unit staked
    _m2: float = 0.0
    dealer: dict[str, Counter[str]] = field(default_factory=lambda: {up: Counter() for up in UP_CARDS})

    #: the players' hands by what became of them: (hands counted, won, pushed, lost, blackjack, bust)
    hands: list[int] = field(default_factory=lambda: [0] * 6)
    dealer_rounds: int = 0  # rounds whose dealer played the hand out (the dealer table's rounds)

    def add(self, result: RoundResult) -> None:
        self.count(result.staked, result.net, up_key(result.up), result.dealer_outcome, result.tally,
                   result.dealer_played)

    def count(self, staked: int, net: int | Fraction, up: str, dealer_outcome: str,
              tally: tuple[int, ...] = (0, 0, 0, 0, 0, 0), dealer_played: bool = True) -> None:
        """One round: its initial stakes, the players' net, the dealer's up card (UP_CARDS) and final,
        its hands' tally (RoundResult.tally) and whether the dealer played the hand out."""
        hands = self.hands
        for i, n in enumerate(tally):
            hands[i] += n
        self.rounds += 1
        self.staked += staked
        self.net += net
        x = float(net) / staked
        delta = x - self._mean
        self._mean += delta / self.rounds
        self._m2 += delta * (x - self._mean)
        if dealer_played:
            self.dealer_rounds += 1
            self.dealer[up][dealer_outcome] += 1

    @property
    def enough(self) -> bool:
        """Rounds enough for an interval or a standard deviation to be quoted (MIN_ROUNDS)."""
        return self.rounds >= MIN_ROUNDS

    def net_sd(self) -> float | None:
        """The standard deviation of one round's net per unit of initial bet; None: too few rounds."""
        return math.sqrt(self._m2 / (self.rounds - 1)) if self.enough else None

    def hand_rates(self) -> list[tuple[str, int, float, float | None]]:
        """Each of HAND_FIGURES as (name, hands with it, its rate per hand counted, the rate's standard
        deviation sqrt(p(1 - p) / n)); the deviation None when too few rounds, or fewer than
        MIN_EVENTS hands with the outcome or without it (the normal approximation does not hold)."""
        n = self.hands[0]
        rates: list[tuple[str, int, float, float | None]] = []
        for name, k in zip(HAND_FIGURES, self.hands[1:]):
            p = k / n if n else 0.0
            judged = self.enough and min(k, n - k) >= MIN_EVENTS
            rates.append((name, k, p, math.sqrt(p * (1 - p) / n) if judged else None))
        return rates

    @property
    def house_edge(self) -> float:
        """The house's result per unit of initial bet (positive: the house wins)."""
        return -float(self.net) / self.staked if self.staked else 0.0

    def edge_interval(self, z: float = 1.959964) -> tuple[float, float] | None:
        """A 95 % (z = 1.96) normal interval of the house edge per round's initial stake; None: too
        few rounds to quote one (MIN_ROUNDS)."""
        if not self.enough:
            return None
        half = z * math.sqrt(self._m2 / (self.rounds - 1) / self.rounds)
        return (-self._mean - half, -self._mean + half)

    def dealer_observed(self, up: str) -> dict[str, float]:
        counts = self.dealer[up]
        n = sum(counts.values())
        return {o: counts[o] / n if n else 0.0 for o in OUTCOMES}


def up_key(card: Card) -> str:
    value = card_value(card)
    return UP_CARDS[value - 1]


def shoe_rng(seed: int, shoe: int) -> random.Random:
    """The generator that shuffles shoe number ``shoe`` (1, 2, ...) of a run seeded ``seed``."""
    return random.Random(f"{seed}:{shoe}")  # a str seed is hashed with SHA-512: the same in every process


class Simulation:
    """Rounds of ``boxes`` boxes, one player each at the table minimum, played by ``strategy``.

    Shoe ``k`` of a run seeded ``seed`` is shuffled by :func:`shoe_rng` (``seed``, ``k``): its own
    generator, so a process can deal any shoe alone and the rounds do not depend on how a run is
    split between processes (:func:`run_jobs`).
    """

    def __init__(self, rules: HouseRules, boxes: int, strategy: Strategy, seed: int) -> None:
        self.rules, self.boxes, self.strategy, self.seed = rules, boxes, strategy, seed
        self.table = Table(rules, lambda event: None, clock=lambda: 0.0, stale_after_s=1e9)
        self.bet = rules.table.min_per_player
        self.shoes = 0  # the number of the shoe being dealt
        self._stack: list[Card] = []
        self._index = 0
        self._cut_at = 0
        # the bench's inputs are frozen records: one of each, applied round after round
        self._open_round, self._no_more_bets, self._close_insurance = OpenRound(), NoMoreBets(DEALER), CloseInsurance(DEALER)
        self._bets = [PlaceBet(box, f"p{box}", self.bet) for box in range(1, boxes + 1)]
        self._reads: dict[tuple[int, Card], DeviceMessage] = {}  # at most 52 per position in the shoe
        # in-process, an input goes to Table.apply itself (one call less, about 10 a round); a transport
        # that overrides apply keeps its own
        self._apply: Callable[[TableInput], object] = \
            self.table.apply if type(self).apply is Simulation.apply else self.apply
        self._acts = {(box, action): Act(box, action, DEALER, player=f"p{box}")
                      for box in range(1, boxes + 1) for action in Action}
        self._connect()

    def apply(self, record: TableInput) -> None:
        """One input to the table (in-process: right here)."""
        self.table.apply(record)

    def close(self) -> None:
        """Nothing to release in-process."""

    def _connect(self) -> None:
        apply = self.apply
        for name, role in (("shuffler", DeviceRole.SHUFFLER), ("shoe-reader", DeviceRole.SHOE)):
            apply(LinkUp(name))
            apply(DeviceMessage(name, Ident(role, "sim", f"{name}-1", "1.0.0", 1, 0, 1)))
        if self.rules.table.lone_player_min_boxes > 1:  # a lone player must play two boxes: one more sits
            apply(TakeSeat("seated-1", DEALER))

    def _new_shoe(self) -> None:
        apply, rules, decks = self.apply, self.rules, self.rules.decks
        if self._stack:  # the last shoe this table dealt goes back, counted
            apply(ShoeRemainder(dict(Counter(self._stack[self._index:])), DEALER))
        self.shoes += 1
        if rules.shoe.shuffle == "automatic":
            apply(DeviceMessage("shuffler", ShuffleComplete(52 * decks, shoe_composition(decks))))
            apply(DeviceMessage("shuffler", DeckCheckResult(True, decks, (), (), 0)))
        else:
            apply(HandShuffled(DEALER))
        apply(DeviceMessage("shoe-reader", ShoeLoaded(0)))
        stack = [c for c, n in shoe_composition(decks).items() for _ in range(n)]
        # the simulated device's order: the table sees each card only when read
        shoe_rng(self.seed, self.shoes).shuffle(stack)
        self._stack, self._index = stack, 0
        self._cut_at = int(len(stack) * rules.shoe.penetration)
        for _ in range(rules.shoe.burn_after_shuffle):
            self._read()

    def _read(self) -> None:
        if self._index >= len(self._stack):
            raise SimulationError(f"the shoe of {self.rules.decks} deck(s) ran out of cards in a round of "
                                  f"{self.boxes} boxes: use more decks or fewer boxes")
        card = self._stack[self._index]
        self._index += 1
        index = self._index
        read = self._reads.get((index, card))
        if read is None:  # records are frozen: one per (index, card), built the first time a shoe reads it
            read = self._reads[index, card] = DeviceMessage("shoe-reader", CardRead(index, card, _FACE_DOWN, index))
        self._apply(read)
        if index == self._cut_at:
            self.apply(DeviceMessage("shoe-reader", CutCardSeen(index, index)))

    def rounds(self, count: int) -> Iterator[RoundResult]:
        for number in range(1, count + 1):
            yield self.play_round(number)

    def shoe_rounds(self, shoe: int) -> Iterator[RoundResult]:
        """Every round of shoe number ``shoe`` (numbered from 1 within it), dealt on this table next."""
        self.shoes = shoe - 1
        self._new_shoe()
        number = 0
        while True:
            number += 1
            yield self.play_round(number)
            if self.table.shoe.state not in _IN_PLAY:
                return

    def play_round(self, number: int) -> RoundResult:
        table, apply = self.table, self._apply
        if table.shoe.state not in _IN_PLAY:
            self._new_shoe()
        apply(self._open_round)
        for bet in self._bets:
            apply(bet)
        apply(self._no_more_bets)
        r = table.round
        assert r is not None
        decisions: dict[tuple[int, int], list[str]] = {}
        read, decide = self._read, self.strategy.decide
        while r.live:
            if r.expected_next() is not None:
                read()
            elif r.state == "insurance":
                apply(self._close_insurance)  # neither strategy insures
            else:
                target = r.current_hand
                assert target is not None and target.box is not None and target.hand is not None
                hand = r.box_hands[target.box][target.hand]
                for action in decide(hand.cards, r.dealer_cards[0]):
                    try:
                        apply(self._acts[target.box, action])
                    except RuleViolation:
                        continue
                    decisions.setdefault((target.box, target.hand), []).append(action.value)
                    break
                else:
                    raise SimulationError(f"round {number}: every action the strategy offered for "
                                          f"{[str(c) for c in hand.cards]} was refused")
        settlement = r.settlement
        if settlement is None:
            raise SimulationError(f"round {number} ended {r.state} without a settlement")
        by_hand: dict[tuple[int, int | None], int | Fraction] = {}
        for line in settlement.lines:
            key = (line.box, line.hand)
            by_hand[key] = by_hand.get(key, 0) + line.net
        played = r.hands
        hands = [{"box": h.box, "hand": h.index, "cards": [str(c) for c in h.cards],
                  "decisions": decisions.get((h.box, h.index), []), "stake": h.stake_of(f"p{h.box}"),
                  "net": str(by_hand.get((h.box, h.index), 0))} for h in played]
        won = pushed = lost = naturals = busts = 0
        waiting = False  # a hand the dealer's cards decide
        for h in played:
            hand_net = by_hand.get((h.box, h.index), 0)
            won, pushed, lost = won + (hand_net > 0), pushed + (hand_net == 0), lost + (hand_net < 0)
            naturals += h.blackjack
            busts += h.bust
            waiting = waiting or not (h.bust or h.surrendered)
        net = -settlement.house
        return RoundResult(number, self.shoes, r.dealer_cards[0], list(r.dealer_cards), hands,
                           [line.as_data() for line in settlement.lines], self.bet * self.boxes, net,
                           (len(played), won, pushed, lost, naturals, busts), waiting)


def run(rules: HouseRules, rounds: int, boxes: int, strategy: Strategy, seed: int,
        each: Callable[[RoundResult], None] = lambda result: None) -> Summary:
    """Play ``rounds`` rounds in-process and return their summary; ``each`` sees every round."""
    return play(Simulation(rules, boxes, strategy, seed), rounds, each)


def play(simulation: Simulation, rounds: int, each: Callable[[RoundResult], None] = lambda result: None) -> Summary:
    """Play ``rounds`` rounds of ``simulation`` (any transport), closing it at the end."""
    summary = Summary()
    try:
        if rounds < 1:
            raise SimulationError(f"--rounds {rounds}: at least one round")
        for result in simulation.rounds(rounds):
            summary.add(result)
            each(result)
    finally:
        simulation.close()
    return summary


# ---- several processes, or a cluster ---------------------------------------------------------

#: what a worker sends per shoe: each round's line after its "round" field, stakes, net, up card,
#: final, hands' tally and whether the dealer played the hand out (Summary.count's arguments)
_ShoeRounds = list[tuple[str, int, "int | Fraction", str, str, tuple[int, ...], bool]]
_LINE_HEAD = '{"round":'
_AHEAD = 4  # shoes a worker may deal before the writer took them (bounds the work thrown away at the end)


def default_jobs() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0))


def deal_shoe(simulation: Simulation, shoe: int, lines: bool) -> _ShoeRounds:
    """Every round of shoe number ``shoe`` on ``simulation``'s table, as a worker sends them."""
    out: _ShoeRounds = []
    for result in simulation.shoe_rounds(shoe):
        text = ""
        if lines:
            text = result.json_line()
            assert text.startswith(_LINE_HEAD)  # the round number is the writer's: cut it off
            text = text[text.index(",") + 1:]
        out.append((text, result.staked, result.net, up_key(result.up), result.dealer_outcome, result.tally,
                    result.dealer_played))
    return out


def write_shoes(shoes: Iterator[_ShoeRounds], rounds: int, line: Callable[[str], None] | None,
                progress: Callable[[int], None]) -> Summary:
    """The writer of a run dealt elsewhere: ``shoes`` gives shoes 1, 2, ... in order (from whichever
    process or machine dealt each); their rounds are numbered, written to ``line`` and added up
    until there are ``rounds``; ``progress`` hears the rounds done after each shoe."""
    summary = Summary()
    count = summary.count
    for shoe in shoes:
        for tail, staked, net, up, outcome, tally, played in shoe:
            count(staked, net, up, outcome, tally, played)
            if line is not None:
                line(f'{{"round":{summary.rounds},{tail}')
            if summary.rounds == rounds:
                progress(rounds)
                return summary
        progress(summary.rounds)
    raise SimulationError(f"the shoes ended after {summary.rounds} of {rounds} rounds")  # pragma: no cover


def run_jobs(rules: HouseRules, rounds: int, boxes: int, strategy: Strategy, seed: int, jobs: int,
             line: Callable[[str], None] | None = None,
             progress: Callable[[int], None] = lambda done: None) -> Summary:
    """``rounds`` in-process rounds dealt by ``jobs`` processes; ``line`` gets each round's JSON line, in order.

    Worker ``j`` (0-based) deals shoes j + 1, j + 1 + jobs, ... on its own table, each shoe with its
    own generator (:func:`shoe_rng`), so every shoe's rounds are what one process dealing every shoe
    gives: the output does not depend on ``jobs``. This process takes the shoes in order, numbers
    the rounds, writes them and adds up the summary (:func:`write_shoes`); the workers stop once it
    has ``rounds``. ``jobs`` 1 plays in this process.
    """
    if rounds < 1:
        raise SimulationError(f"--rounds {rounds}: at least one round")
    if jobs < 1:
        raise SimulationError(f"--jobs {jobs}: at least one")
    if jobs == 1:
        simulation = Simulation(rules, boxes, strategy, seed)
        return write_shoes((deal_shoe(simulation, shoe, line is not None) for shoe in itertools.count(1)),
                           rounds, line, progress)
    context = multiprocessing.get_context("fork")  # the workers inherit the rules and the strategy
    queues = [context.Queue(_AHEAD) for _ in range(jobs)]
    workers = [context.Process(target=_deal_shoes, args=(rules, boxes, strategy, seed, j + 1, jobs, queues[j],
                                                          line is not None), daemon=True)
               for j in range(jobs)]
    try:
        # forked with the ending signals blocked: a worker sets its own handlers (not the parent's
        # KeyboardInterrupt) before one can reach it
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, ending_signals())
        try:
            for worker in workers:
                worker.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        in_order = (_take(queues[(shoe - 1) % jobs], workers[(shoe - 1) % jobs]) for shoe in itertools.count(1))
        return write_shoes(in_order, rounds, line, progress)
    finally:
        for worker in workers:
            if worker.pid is not None:  # started
                worker.terminate()
        for worker in workers:
            if worker.pid is not None:
                worker.join()


def _take(shoes: "multiprocessing.Queue[_ShoeRounds | str]", worker: multiprocessing.process.BaseProcess) -> _ShoeRounds:
    """The next shoe from ``worker``; its error (a str) raised here."""
    while True:
        try:
            got = shoes.get(timeout=1.0)
        except queue.Empty:
            if not worker.is_alive():
                raise SimulationError(f"a simulation process ended (exit code {worker.exitcode}) "
                                      "before dealing its shoes") from None
            continue
        if isinstance(got, str):
            raise SimulationError(got)
        return got


def _deal_shoes(rules: HouseRules, boxes: int, strategy: Strategy, seed: int, first: int, step: int,
                shoes: "multiprocessing.Queue[_ShoeRounds | str]", lines: bool) -> None:
    """A worker: shoes first, first + step, ... until terminated; a SimulationError is sent as its text."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it ends the workers itself
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # how it ends them (the parent's own SIGTERM raises)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # nohup's stays: the run outlives the terminal
        signal.signal(signal.SIGHUP, signal.SIG_DFL)  # a closed terminal ends a worker whatever its parent does
    signal.pthread_sigmask(signal.SIG_UNBLOCK, ending_signals())
    try:
        simulation = Simulation(rules, boxes, strategy, seed)
        shoe = first
        while True:
            shoes.put(deal_shoe(simulation, shoe, lines))
            shoe += step
    except CarddError as exc:
        shoes.put(str(exc))


# A cluster: the same shoes, each with its own generator, dealt by a Dask distributed scheduler's
# workers in chunks of consecutive shoes; this process takes the chunks in order and writes them
# through the same writer (write_shoes), so the output is --jobs' for the same seed.

#: seconds a --cluster address has to answer
CLUSTER_CONNECT_S = 10
_CHUNKS_AHEAD = 2  # chunks in flight per worker thread: one dealing, one waiting for it
_MAX_CHUNK = 64  # shoes per task, at most (a few seconds of one worker's time)


def _chunk_shoes(rules: HouseRules, rounds: int, boxes: int, threads: int) -> int:
    """Shoes per cluster task: enough that a task's work outweighs its scheduling, few enough that
    every worker has some of a short run. The output does not depend on it."""
    cards_per_round = 2.7 * (boxes + 1)  # about: two cards and some draws per hand and the dealer's
    shoes = rounds * cards_per_round / (52 * rules.decks * rules.shoe.penetration)
    return max(1, min(_MAX_CHUNK, math.ceil(shoes / (threads * _CHUNKS_AHEAD))))


def deal_chunk(rules: HouseRules, boxes: int, strategy: Strategy, seed: int, first: int, count: int,
               lines: bool, version: str) -> list[_ShoeRounds]:
    """A cluster task: shoes first .. first + count - 1 on a table of its own. ``version``: the
    writer's cardd; a worker running another would deal other rounds for the same seed."""
    here = cardd_version()
    if here != version:
        raise SimulationError(f"a cluster worker runs cardd {here}, this cardbench {version}: "
                              "install the same cardd on every worker")
    simulation = Simulation(rules, boxes, strategy, seed)
    return [deal_shoe(simulation, shoe, lines) for shoe in range(first, first + count)]


def cardd_version() -> str:
    from importlib.metadata import version
    return version("cardd")


#: a scheduler's address as ``dask scheduler`` prints it (tcp:// or tls://, a host, a port)
_ADDRESS = re.compile(r"(tcp|tls)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):\d{1,5}")


def cluster_address(text: str) -> str:
    """``text`` when it is a scheduler's address; SimulationError (the option's words) when not."""
    if _ADDRESS.fullmatch(text) is None:
        raise SimulationError(f"--cluster {text!r}: not a scheduler's address: expected tcp://HOST:PORT "
                              "(or tls://), as dask scheduler prints it")
    return text


def run_cluster(rules: HouseRules, rounds: int, boxes: int, strategy: Strategy, seed: int, address: str,
                line: Callable[[str], None] | None = None,
                progress: Callable[[int], None] = lambda done: None) -> Summary:
    """``rounds`` rounds dealt on the Dask distributed scheduler at ``address`` (tcp://host:port),
    written and summed here in shoe order: the same lines and summary as :func:`run_jobs`."""
    if rounds < 1:
        raise SimulationError(f"--rounds {rounds}: at least one round")
    cluster_address(address)
    try:
        import distributed
    except ImportError:
        raise SimulationError("--cluster needs Dask distributed: install cardd with its bench extra "
                              "(pip install 'cardd[bench]')") from None
    import logging
    logging.getLogger("distributed").setLevel(logging.CRITICAL)  # its failures reach the user as ours
    try:
        client = distributed.Client(address, timeout=CLUSTER_CONNECT_S, set_as_default=False)
    except Exception as exc:  # OSError (refused, timed out), ValueError (an address it cannot parse), ...
        raise SimulationError(f"--cluster {address}: no Dask scheduler answered "
                              f"within {CLUSTER_CONNECT_S} s ({type(exc).__name__})") from None
    pending: collections.deque[Any] = collections.deque()  # the chunks' futures, in shoe order
    try:
        threads = sum(client.nthreads().values())
        if threads == 0:
            raise SimulationError(f"--cluster {address}: the scheduler has no workers")
        chunk = _chunk_shoes(rules, rounds, boxes, threads)
        version, lines = cardd_version(), line is not None
        next_shoe = 1

        def submit() -> None:
            nonlocal next_shoe
            pending.append(client.submit(deal_chunk, rules, boxes, strategy, seed, next_shoe, chunk, lines,
                                         version, pure=False))
            next_shoe += chunk

        for _ in range(threads * _CHUNKS_AHEAD):
            submit()

        def in_order() -> Iterator[_ShoeRounds]:
            while True:
                future = pending.popleft()
                submit()
                try:
                    shoes: list[_ShoeRounds] = future.result()
                except CarddError as exc:
                    raise SimulationError(str(exc)) from None
                except Exception as exc:
                    raise SimulationError(f"--cluster {address}: a task failed ({type(exc).__name__}: "
                                          f"{exc})") from None
                yield from shoes

        return write_shoes(in_order(), rounds, line, progress)
    finally:
        client.cancel(list(pending))
        client.close()
