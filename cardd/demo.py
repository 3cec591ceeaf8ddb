"""`make demo`: one shoe's life on simulated devices, through the real host stack.

A simulated shuffler and a simulated shoe each sit behind a real pseudo-terminal; the host
opens both with the serial driver, the link and the session, exactly as it would real
devices. The shuffler shuffles and verifies a 6-deck shoe (a count per card, never the
order); the dealer moves the stack into the shoe; the deal tracker follows every card the
shoe reads: the burn, each round (a simple scripted dealer and players), the cut card, and
the end-of-shoe reconciliation, for which the dealer runs the undealt stub through the
reader. Every card is printed as the host reads it, with where it went.

    python -m cardd.demo [--rules rules/casino-003.toml] [--shuffle-seconds 2] [--pace 0.005]
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections import Counter
from pathlib import Path
from typing import TextIO

import structlog

from devices.events import Event, Reason, Severity
from devices.round import Action, RuleViolation
from devices.rules import HouseRules, load_rules
from devices.table import Table
from drivers.serial_port import SerialTransport
from firmware_bridge.cards import Card, Rank
from firmware_bridge.messages import (
    CardRead,
    CutCardSeen,
    DeckCheckResult,
    Message,
    ShoeEmpty,
    ShuffleComplete,
    ShuffleProgress,
    StartShuffle,
)
from firmware_bridge.session import DeviceSession, SessionConfig, SessionEvent
from simulators.rig import SimulatedTable

ROOT = Path(__file__).resolve().parents[1]
DEALER = "dealer-1"
LOUD = {Reason.SHOE_VERIFIED, Reason.SHOE_REFUSED, Reason.CUT_CARD_OUT, Reason.RECONCILED,
        Reason.RECONCILIATION_FAILED, Reason.FACE_UP_CARD, Reason.FOREIGN_CARD, Reason.ROUND_HELD}


class Demo:
    def __init__(self, rules: HouseRules, pace: float, out: TextIO | None = None) -> None:
        self.rules, self.pace, self.out = rules, pace, out or sys.stdout
        self.journal: list[Event] = []
        self.table = Table(rules, self._event)
        self.read_seen = asyncio.Event()
        self.verified = asyncio.Event()
        self.reads: list[CardRead] = []
        self.stub: Counter[Card] = Counter()
        self.counting_stub = False
        self.empty = asyncio.Event()
        self.house_results: list = []

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    # ---- what the devices and the tracker report ----------------------------------------

    def _event(self, event: Event) -> None:
        self.journal.append(event)
        if event.reason in LOUD or event.severity is Severity.ALARM:
            self.say(f"    [{event.reason}] {event.message}")

    def on_shuffler(self, msg: Message) -> None:
        self.table.on_shuffler(msg)
        if isinstance(msg, ShuffleProgress) and msg.percent % 25 == 0:
            self.say(f"  shuffling: {msg.cards_counted} cards counted ({msg.percent}%)")
        elif isinstance(msg, ShuffleComplete):
            kinds = Counter(msg.composition.values())
            self.say(f"  shuffle complete: {msg.card_count} cards; count per card: "
                     + ", ".join(f"{n} kinds x{k}" for k, n in sorted(kinds.items())))
        elif isinstance(msg, DeckCheckResult):
            self.say(f"  deck check: {'ok' if msg.ok else 'FAILED'} for {msg.decks} decks "
                     f"(missing {len(msg.missing)}, extra {len(msg.extra)}, unrecognised {msg.unrecognised})")
            self.verified.set()

    def on_shoe(self, msg: Message) -> None:
        if isinstance(msg, CardRead) and self.counting_stub:
            self.stub[msg.card] += 1
            self.say(f"  #{msg.index:3d} {msg.card}  stub: back to the shuffler")
            self.read_seen.set()
            return
        if isinstance(msg, ShoeEmpty):
            self.empty.set()
        self.table.on_shoe(msg)
        if isinstance(msg, CardRead):
            self.reads.append(msg)
            self.say(f"  #{msg.index:3d} {msg.card}  {self._where(msg.card)}")
            self.read_seen.set()
        elif isinstance(msg, CutCardSeen):
            self.say(f"  -- cut card after card #{msg.index}: this round is the last of the shoe")

    def _where(self, card: Card) -> str:
        r = self.table.round
        if self.table.shoe.state == "burning" or r is None or not r.assignments or r.assignments[-1][0] != card:
            return "burn" if self.table.burn_pile and self.table.burn_pile[-1] == card else "discard"
        target = r.assignments[-1][1]
        if target.kind == "dealer":
            total, soft = _total(r.dealer_cards)
            return f"dealer ({'soft ' if soft else ''}{total})"
        hand = r.box_hands[target.box][target.hand]
        return f"{target} ({'soft ' if hand.soft else ''}{hand.total})"

    # ---- the dealer's side -------------------------------------------------------------

    async def draw(self, shoe: SimulatedTable) -> None:
        """The dealer draws one card; returns once the host has read and tracked it."""
        self.read_seen.clear()
        await asyncio.to_thread(shoe.shoe.call, shoe.shoe.device.deal, 1)
        await asyncio.wait_for(self.read_seen.wait(), 5)
        if self.pace:
            await asyncio.sleep(self.pace)

    async def play_shoe(self, sim: SimulatedTable) -> None:
        while self.table.shoe.state == "burning":
            await self.draw(sim)
        number = 0
        while self.table.shoe.state in ("in_play", "last_round"):
            number += 1
            round_ = self.table.open_round()
            boxes = (1, 3, 5) if number % 2 else (2, 4, 6, 7)
            for box in boxes:
                self.table.place_bet(box, f"player-{box}", self.rules.table.min_per_player * (1 + box % 3))
            self.say(f"round {round_.round_id}: bets on boxes {', '.join(map(str, boxes))}")
            self.table.no_more_bets(DEALER)
            while round_.state not in ("complete", "void"):
                if round_.expected_next() is not None:
                    await self.draw(sim)
                elif round_.state == "insurance":
                    self.table.close_insurance(DEALER)
                else:
                    self._decide(round_)
            house = round_.settlement.house if round_.settlement else 0
            self.house_results.append(house)
            self.say(f"  round {round_.round_id} {round_.state}: house result {_money(house)}")

    def _decide(self, round_) -> None:
        box = round_.current_hand.box
        hand = round_.box_hands[box][round_.current_hand.hand]
        up = min(_value(round_.dealer_cards[0]), 10) if round_.dealer_cards else 10
        for action in _strategy(hand.cards, hand.total, hand.soft, up):
            try:
                self.table.act(box, action, f"player-{box}")
                return
            except RuleViolation:
                continue
        raise RuntimeError(f"no legal action for box {box}")  # the rules always allow STAND

    async def count_stub(self, sim: SimulatedTable) -> None:
        self.counting_stub = True
        left = sim.shoe.call(sim.shoe.device.cards_held)
        self.say(f"shoe complete: the dealer runs the {left} undealt cards through the reader")
        self.empty.clear()
        for _ in range(left):
            await self.draw(sim)
        self.table.shoe_remainder(dict(self.stub), DEALER)


def _value(card: Card) -> int:
    return 11 if card.rank is Rank.ACE else min(int(card.rank), 10)


def _total(cards: list[Card]) -> tuple[int, bool]:
    total, aces = sum(min(int(c.rank), 10) for c in cards), any(c.rank is Rank.ACE for c in cards)
    return (total + 10, True) if aces and total + 10 <= 21 else (total, False)


def _strategy(cards: list[Card], total: int, soft: bool, up: int) -> list[Action]:
    """A plain player: split aces and eights, double 10 and 11 against a small card, hit to 17."""
    first = []
    if len(cards) == 2 and cards[0].rank == cards[1].rank and cards[0].rank in (Rank.ACE, Rank.EIGHT):
        first.append(Action.SPLIT)
    if len(cards) == 2 and total in (10, 11) and up < 10:
        first.append(Action.DOUBLE)
    wants_card = total < 12 or (soft and total < 18) or (total < 17 and up >= 7)
    return first + ([Action.HIT, Action.STAND] if wants_card else [Action.STAND, Action.HIT])


def _money(cents) -> str:
    return f"{float(cents) / 100:+.2f}"


async def run(rules: HouseRules, shuffle_seconds: float, pace: float, out: TextIO | None = None) -> int:
    demo = Demo(rules, pace, out)
    sim = SimulatedTable.over_ptys(shuffle_time_s=shuffle_seconds)
    with sim:
        config = SessionConfig(host_name="cardd-demo")
        sessions = {}
        for name, endpoint, handler in (("shuffler", sim.shuffler, demo.on_shuffler), ("shoe-reader", sim.shoe, demo.on_shoe)):
            session = DeviceSession(SerialTransport(endpoint.url), handler, _link_events(demo, name), config)
            ident = await session.open()
            demo.table.link_up(name)
            (demo.table.on_shuffler if name == "shuffler" else demo.table.on_shoe)(ident)
            demo.say(f"{name}: {ident.model} serial {ident.serial} firmware {ident.firmware_version} "
                     f"on {endpoint.url} (pty {endpoint.tty})")
            sessions[name] = session
        demo.say(f"rules: {rules.name} — {rules.decks} decks, burn {rules.shoe.burn_after_shuffle}")
        demo.table.shuffle_started(DEALER)
        await sessions["shuffler"].send(StartShuffle(rules.decks))
        await asyncio.wait_for(demo.verified.wait(), shuffle_seconds + 10)
        if demo.table.shoe.state != "verified":
            demo.say(f"shoe refused ({demo.table.shoe.state}): dealing blocked")
            return 1
        cards = await asyncio.to_thread(sim.hand_off)
        demo.say(f"the dealer loads {cards} cards into the shoe, cut card at about two thirds")
        await asyncio.sleep(0.05)
        await demo.play_shoe(sim)
        await demo.count_stub(sim)
        stats = sessions["shoe-reader"].stats
        for session in sessions.values():
            await session.close()
    summary(demo, stats)
    return 0 if demo.table.shoe.state == "reconciled" else 1


def _link_events(demo: Demo, name: str):
    def on_event(event: SessionEvent) -> None:
        demo.say(f"  [{name} link] {event.kind}: {event.detail}")
    return on_event


def summary(demo: Demo, stats) -> None:
    t = demo.table
    rounds = t.rounds_started
    house = sum(r for r in demo.house_results)
    dealt = len(demo.reads)
    link = stats.link
    demo.say("")
    demo.say("summary")
    demo.say(f"  shoe: {t.shoe.state}; {dealt} cards read in play ({len(t.burn_pile)} burnt), "
             f"{sum(demo.stub.values())} returned: {dealt + sum(demo.stub.values())} of {52 * demo.rules.decks}")
    demo.say(f"  rounds: {rounds}; house result {_money(house)}; events journaled: {len(demo.journal)}")
    if link is not None:
        rtt = f"{link.rtt_srtt * 1000:.2f} ms" if link.rtt_srtt is not None else "n/a"
        demo.say(f"  shoe link: {link.frames_sent} frames sent, {link.frames_received} received, "
                 f"{link.retransmits} retransmits, {link.framing.crc_errors} CRC errors, smoothed RTT {rtt}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cardd.demo", description=__doc__.splitlines()[0])
    ap.add_argument("--rules", type=Path, default=ROOT / "rules" / "casino-003.toml")
    ap.add_argument("--shuffle-seconds", type=float, default=2.0)
    ap.add_argument("--pace", type=float, default=0.005, help="seconds between cards, for reading along")
    args = ap.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    return asyncio.run(run(load_rules(args.rules), args.shuffle_seconds, args.pace))


if __name__ == "__main__":
    sys.exit(main())
