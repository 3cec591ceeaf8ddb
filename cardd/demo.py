"""`make demo`'s library-level cousin: a shoe's life on simulated devices, through the real host stack.

The simulated devices sit behind real ptys; the deal tracker follows every card without the
daemon, then the faults it catches are shown. What it shows: docs/cardctl.md, "The demo".

    python -m cardd.demo [--rules cardd/rules/casino-000.toml] [--shuffle-seconds 2] [--pace 0.005] [--no-faults]"""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections import Counter
from pathlib import Path
from typing import Callable, TextIO

import structlog

from cardd.config import SIMULATED_RULES
from devices.events import Event, Reason, Role, Severity
from devices.game.hand import card_value, hand_total
from devices.game.round import Action, Round
from devices.errors import RuleViolation
from devices.game.rules import HouseRules, RulesError, load_rules
from devices.game.settlement import Money, units
from devices.tracker.feed import Feed
from devices.tracker.inputs import (
    Act, CloseInsurance, NoMoreBets, OpenRound, PlaceBet, ShoeRemainder, ShuffleStarted, VoidShoe,
)
from devices.tracker.table import Table
from core.cards import Card, Rank
from firmware_bridge.messages import (
    CardRead,
    CutCardSeen,
    DeckCheckResult,
    Message,
    ShuffleComplete,
    ShuffleProgress,
    StartShuffle,
)
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.session import SessionConfig, SessionEvent, SessionEventKind
from simulators.pty_endpoint import PtyEndpoint
from simulators.rig import SimulatedTable

DEALER = "dealer-1"
SUPERVISOR = "supervisor-1"
LOUD = {Reason.SHOE_VERIFIED, Reason.CUT_CARD_OUT, Reason.RECONCILED, Reason.REDEAL, Reason.ROUND_VOID}


class Demo:
    def __init__(self, rules: HouseRules, pace: float, sim: SimulatedTable, out: TextIO | None = None) -> None:
        self.rules, self.pace, self.sim, self.out = rules, pace, sim, out or sys.stdout
        self.journal: list[Event] = []
        self.table = Table(rules, self._event)
        self.feed = Feed(self.table)
        self.connections: dict[str, DeviceConnection] = {}
        self.read_seen = asyncio.Event()
        self.checked = asyncio.Event()
        self.reads: list[CardRead] = []
        self.stub: Counter[Card] = Counter()
        self.counting_stub = False
        self.house: list = []

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    # ---- what the devices and the tracker report ----------------------------------------

    def _event(self, event: Event) -> None:
        self.journal.append(event)
        if event.reason in LOUD or event.severity is Severity.ALARM:
            self.say(f"    [{event.reason}] {event.message}")

    def on_shuffler(self, msg: Message) -> None:
        if isinstance(msg, ShuffleProgress) and msg.percent % 25 == 0:
            self.say(f"  shuffling: {msg.cards_counted} cards counted ({msg.percent}%)")
        elif isinstance(msg, ShuffleComplete):
            kinds = Counter(msg.composition.values())
            self.say(f"  shuffle complete: {msg.card_count} cards; count per card: "
                     + ", ".join(f"{n} kinds x{k}" for k, n in sorted(kinds.items())))
        elif isinstance(msg, DeckCheckResult):
            self.say(f"  deck check: {'ok' if msg.ok else 'FAILED'} for {msg.decks} decks "
                     f"(missing {len(msg.missing)}, extra {len(msg.extra)}, unrecognised {msg.unrecognised})")
        self.feed.message("shuffler", msg)
        if isinstance(msg, DeckCheckResult):
            self.checked.set()

    def on_shoe(self, msg: Message) -> None:
        if isinstance(msg, CardRead) and self.counting_stub:
            self.stub[msg.card] += 1
            self.say(f"  #{msg.index:3d} {msg.card}  stub: back to the shuffler")
        else:
            caused = self.feed.message("shoe-reader", msg)
            if isinstance(msg, CardRead):
                self.reads.append(msg)
                self.say(f"  #{msg.index:3d} {msg.card}  {self._where(caused)}")
            elif isinstance(msg, CutCardSeen):
                self.say(f"  -- cut card after card #{msg.index}: this round is the last of the shoe")
        if isinstance(msg, CardRead):
            self.read_seen.set()

    def _where(self, events: list[Event]) -> str:
        """Where the tracker put the card just read, from the events it journaled for it."""
        reasons = [e.reason for e in events]
        if Reason.CARD_ASSIGNED in reasons:
            round_ = self.table.round
            assert round_ is not None
            target = round_.assignments[-1][1]
            if target.kind == "dealer":
                (total, soft), natural = hand_total(round_.dealer_cards), False
            else:
                assert target.box is not None and target.hand is not None
                hand = round_.box_hands[target.box][target.hand]
                total, soft, natural = hand.total, hand.soft, hand.blackjack
            return f"{target} ({'blackjack' if natural else ('soft ' if soft else '') + str(total)})"
        if Reason.BURN in reasons:
            return "burn"
        problems = [str(e.reason) for e in events if e.severity is not Severity.INFO]
        return f"to no hand ({', '.join(problems)})" if problems else "waiting for the dealer"

    # ---- the dealer's side -------------------------------------------------------------

    async def connect(self) -> None:
        config = SessionConfig(host_name="cardd-demo")
        for name, endpoint, handler in (("shuffler", self.sim.shuffler, self.on_shuffler),
                                        ("shoe-reader", self.sim.shoe, self.on_shoe)):
            connection = DeviceConnection(endpoint.url, handler, self._link_events(name), config)
            ident = await connection.open()  # CONNECTED: the feed brings the device's model up
            pty = f" (pty {endpoint.tty})" if isinstance(endpoint, PtyEndpoint) else ""
            self.say(f"{name}: {ident.model} serial {ident.serial} firmware {ident.firmware_version} "
                     f"on {endpoint.url}{pty}")
            self.connections[name] = connection

    def _link_events(self, name: str) -> Callable[[SessionEvent], None]:
        def on_event(event: SessionEvent) -> None:
            self.feed.connection_event(name, event)
            if event.kind is not SessionEventKind.IDENT:  # the boot id is for the logs
                self.say(f"  [{name} link] {event.kind}: {event.detail}")
        return on_event

    async def shuffle(self, timeout: float) -> bool:
        """The dealer loads the shuffler and starts it; True when the tracker verified the shoe."""
        self.checked.clear()
        self.table.apply(ShuffleStarted(DEALER))
        await self.connections["shuffler"].send(StartShuffle(self.rules.decks))
        await asyncio.wait_for(self.checked.wait(), timeout)
        return self.table.shoe.state == "verified"

    async def load_shoe(self) -> None:
        cards = await asyncio.to_thread(self.sim.hand_off)
        self.say(f"the dealer loads {cards} cards into the shoe, cut card at about two thirds")
        while self.table.shoe.state != "burning":
            await asyncio.sleep(0.005)  # until the shoe's ShoeLoaded has reached the tracker
        while self.table.shoe.state == "burning":
            await self.draw()

    async def draw(self) -> None:
        """The dealer draws one card; returns once the host has read and tracked it."""
        self.read_seen.clear()
        await asyncio.to_thread(self.sim.shoe.call, self.sim.shoe.device.deal, 1)
        await asyncio.wait_for(self.read_seen.wait(), 5)
        if self.pace:
            await asyncio.sleep(self.pace)

    async def play_rounds(self, limit: int | None = None) -> None:
        """Rounds until the shoe is complete (or ``limit`` rounds)."""
        played = 0
        while self.table.shoe.state in ("in_play", "last_round") and played != limit:
            played += 1
            self.table.apply(OpenRound())
            round_ = self.table.round
            assert round_ is not None
            boxes = (1, 3, 5) if round_.round_id % 2 else (2, 4, 6, 7)
            bets = {box: self.rules.table.min_per_player * (1 + box % 3) for box in boxes}
            for box, amount in bets.items():
                self.table.apply(PlaceBet(box, f"player-{box}", amount))
            self.say(f"round {round_.round_id}: bets " + ", ".join(f"box {b} {_money(a, sign=False)}" for b, a in bets.items()))
            self.table.apply(NoMoreBets(DEALER))
            while round_.state not in ("complete", "void"):
                if round_.expected_next() is not None:
                    await self.draw()
                elif round_.state == "insurance":
                    self.table.apply(CloseInsurance(DEALER))
                else:
                    self._decide(round_)
            if round_.settlement is not None and round_.state == "complete":
                self.house.append(round_.settlement.house)
                self.say(f"  round {round_.round_id} complete: house result {_money(round_.settlement.house)}")
            else:
                self.say(f"  round {round_.round_id} {round_.state}: bets returned")

    def _decide(self, round_: Round) -> None:
        turn = round_.current_hand
        assert turn is not None and turn.box is not None and turn.hand is not None  # called while players act
        box = turn.box
        hand = round_.box_hands[box][turn.hand]
        up = card_value(round_.dealer_cards[0])
        for action in _strategy(hand.cards, hand.total, hand.soft, 11 if up == 1 else up):
            try:
                self.table.apply(Act(box, action, f"player-{box}"))
                if action in (Action.DOUBLE, Action.SPLIT, Action.SURRENDER):
                    self.say(f"  box {box} {action.name.lower()}s")
                return
            except RuleViolation:
                continue
        raise RuntimeError(f"no legal action for box {box}")  # the rules always allow STAND

    async def count_stub(self) -> None:
        self.counting_stub = True
        left = self.sim.shoe.call(self.sim.shoe.device.cards_held)
        self.say(f"shoe complete: the dealer runs the {left} undealt cards through the reader")
        for _ in range(left):
            await self.draw()
        self.counting_stub = False
        self.table.apply(ShoeRemainder(dict(self.stub), DEALER))

    def summary(self) -> None:
        returned = sum(self.stub.values())
        session = self.connections["shoe-reader"].session
        link = session.stats.link if session is not None else None
        self.say("")
        self.say("summary")
        self.say(f"  shoe: {self.table.shoe.state}; {len(self.reads)} cards read in play "
                 f"({len(self.table.burn_pile)} burnt), {returned} returned: {len(self.reads) + returned} "
                 f"of {52 * self.rules.decks}")
        self.say(f"  rounds: {self.table.rounds_started}; house result {_money(sum(self.house))}; "
                 f"events journaled: {len(self.journal)}")
        if link is not None:
            rtt = f"{link.rtt_srtt * 1000:.2f} ms" if link.rtt_srtt is not None else "n/a"
            self.say(f"  shoe link: {link.frames_sent} frames sent, {link.frames_received} received, "
                     f"{link.retransmits} retransmits, {link.framing.crc_errors} CRC errors, smoothed RTT {rtt}")


def _strategy(cards: list[Card], total: int, soft: bool, up: int) -> list[Action]:
    """A plain player: split aces and eights, double 10 and 11 against a small card, hit to 17."""
    first = []
    if len(cards) == 2 and cards[0].rank == cards[1].rank and cards[0].rank in (Rank.ACE, Rank.EIGHT):
        first.append(Action.SPLIT)
    if len(cards) == 2 and total in (10, 11) and up < 10:
        first.append(Action.DOUBLE)
    wants_card = total < 12 or (soft and total < 18) or (total < 17 and up >= 7)
    return first + ([Action.HIT, Action.STAND] if wants_card else [Action.STAND, Action.HIT])


def _money(cents: Money, sign: bool = True) -> str:
    """Units for the demo's lines, signed where a result (+ the house wins) is shown."""
    return ("+" if sign and cents >= 0 else "") + units(cents, grouping=True)


async def run(rules: HouseRules, shuffle_seconds: float, pace: float, out: TextIO | None = None,
              faults: bool = True) -> int:
    """Play the demo; 0 when the shoe reconciled and (with ``faults``) every fault was caught."""
    with SimulatedTable.over_ptys(shuffle_time_s=shuffle_seconds) as sim:
        demo = Demo(rules, pace, sim, out)
        await demo.connect()
        demo.say(f"rules: {rules.name}: {rules.decks} decks, burn {rules.shoe.burn_after_shuffle} after a shuffle; "
                 "no hole card: the dealer's second card comes after the players' hands")
        demo.say("\n== 1. a shoe's life ==")
        if not await demo.shuffle(shuffle_seconds + 10):
            demo.say(f"shoe refused ({demo.table.shoe.state}): dealing blocked")
            return 1
        await demo.load_shoe()
        await demo.play_rounds()
        await demo.count_stub()
        demo.summary()
        ok = demo.table.shoe.state == "reconciled"
        if faults:
            ok = await _faults(demo, shuffle_seconds) and ok
        for connection in demo.connections.values():
            await connection.close()
    return 0 if ok else 1


async def _faults(demo: Demo, shuffle_seconds: float) -> bool:
    sim, table = demo.sim, demo.table
    demo.say("\n== 2. the shuffler counts 312 cards, but the ace of spades is missing and a 7 of hearts "
             "from another shoe is in its place ==")
    sim.shuffler.set_faults(missing=(Card.parse("AS"),), extra=(Card.parse("7H"),))
    refused = not await demo.shuffle(shuffle_seconds + 10) and table.shoe.state == "refused"
    demo.say(f"  the shoe is {table.shoe.state}: dealing blocked, the cards leave the table")
    sim.shuffler.call(sim.shuffler.device.unload)
    sim.shuffler.set_faults(missing=(), extra=())

    face_up_at = demo.rules.shoe.burn_after_shuffle + 5
    demo.say(f"\n== 3. a fresh shoe, with card #{face_up_at} loaded face up ==")
    sim.shoe.set_faults(face_up_at=face_up_at)
    if not await demo.shuffle(shuffle_seconds + 10):
        return False
    await demo.load_shoe()
    await demo.play_rounds(limit=2)
    voided = [e for e in demo.journal if e.reason is Reason.ROUND_VOID]
    demo.say(f"  the face-up card voided {len(voided)} round; play went on with the next round")
    table.apply(VoidShoe(SUPERVISOR, Role.SUPERVISOR))
    demo.say(f"  the supervisor voids the rest of the demo shoe: {table.shoe.state}")
    return refused and len(voided) == 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cardd.demo", description=__doc__.splitlines()[0])
    ap.add_argument("--rules", type=Path, default=SIMULATED_RULES,
                    help="a house-rules file for a table with an automatic shuffler (docs/rules.md)")
    ap.add_argument("--shuffle-seconds", type=float, default=2.0)
    ap.add_argument("--pace", type=float, default=0.005, help="seconds between cards, for reading along")
    ap.add_argument("--no-faults", action="store_true", help="only the shoe's life, not the faults it catches")
    args = ap.parse_args(argv)
    try:
        rules = load_rules(args.rules)
    except RulesError as exc:
        print(f"cardd demo: {exc}", file=sys.stderr)
        return 2
    if rules.shoe.shuffle != "automatic":
        print(f"cardd demo: {args.rules}: shoe.shuffle is {rules.shoe.shuffle!r}; the demo needs a table with an "
              "automatic shuffler (shuffle = \"automatic\")", file=sys.stderr)
        return 2
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    return asyncio.run(run(rules, args.shuffle_seconds, args.pace, faults=not args.no_faults))


if __name__ == "__main__":
    sys.exit(main())
