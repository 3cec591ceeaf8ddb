"""A table's journal as a real one reads, at a real table's pace, for ``cardbench floor``: shoe
after shoe (the shuffle, the verification, the load and burn, rounds until the cut card, the
reconciliation), each round its bets, cards, players' actions, the dealer's cards and the
settlements, and now and then a fault the scenario library knows (a card face up: the round void
by rule; the shoe offline: the round held, the device back, the supervisor resuming).

The records' reasons, sources, severities, who and data have the shapes the daemon journals
(copied from a ``cardbench soak`` journal, ``cardctl log --json``): what the export filters and
sends is what a real table's would be. The cards are drawn at random, not from a shuffled shoe:
nothing here checks a hand, and the default export filter sends no card anyway.

:meth:`TableStory.steps` yields :class:`Step`: how long after the previous step it comes, the
entries one commit writes, and the table's summary after it (the state topic's side).
"""
from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from cardd.journal import Entry

CARDS = [f"{rank}{suit}" for rank in "A23456789TJQK" for suit in "CDHS"]
DECKS = 6
CARDS_IN_SHOE = 52 * DECKS
#: seconds between two cards (or two actions) at a real table
CARD_GAP_S = (1.0, 3.0)
#: a round from its opening to its settlement
ROUND_S = (30.0, 60.0)
#: a shuffle, from its start to the verified shoe
SHUFFLE_S = (8.0, 20.0)
#: a held round waits this long for the device, then for the supervisor
OFFLINE_S, SUPERVISOR_S = (3.0, 20.0), (5.0, 30.0)
DEALER, SUPERVISOR = "dealer", "supervisor"
SHOE, SHUFFLER = "shoe-reader", "shuffler"
FACE_UP_RULE = "seed 000 section 7: cards dealt face up after a misload: re-deal, game void"
FAULTS = ("face_up", "device_offline")


@dataclass(frozen=True, slots=True)
class Step:
    delay_s: float  # after the previous step
    entries: list[Entry]
    summary: dict[str, Any]  # the table's side of the state topic after it (Exporter.offer_state)


def _event(reason: str, source: str, message: str, data: dict[str, Any], *, severity: str = "info",
           who: str = "", kind: str = "event") -> Entry:
    return Entry(kind, reason, source, severity, who, {**data, "message": message})


def _input(source: str, data: dict[str, Any], who: str = "") -> Entry:
    return Entry("input", "", source, "info", who, {**data, "v": 2})


class TableStory:
    """One table's journal, step by step; ``rng`` decides everything, so a seed replays it."""

    def __init__(self, rng: random.Random, *, fault_rate: float) -> None:
        self.rng, self.fault_rate = rng, fault_rate
        self.now_s = 0.0  # the story's own clock: the sum of the delays so far
        self.round_id = 0
        self.alarm_id = 0
        self.event_index = {SHOE: 0, SHUFFLER: 0}
        self.devices = {SHOE: {"state": "offline", "link": "down"}, SHUFFLER: {"state": "offline", "link": "down"}}
        self.shoe: dict[str, Any] = {"state": "idle", "cards_out": 0, "cards_in_shoe": CARDS_IN_SHOE}
        self.alarms: list[dict[str, Any]] = []
        self.rounds_this_shoe = 0
        self._round_starts: deque[float] = deque()
        self.faults: dict[str, int] = {name: 0 for name in FAULTS}

    # ---- the table's summary ---------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        while self._round_starts and self.now_s - self._round_starts[0] > 3600:
            self._round_starts.popleft()
        return {"devices": {name: dict(view) for name, view in self.devices.items()}, "shoe": dict(self.shoe),
                "rounds_this_shoe": self.rounds_this_shoe, "rounds_this_hour": len(self._round_starts),
                "alarms": [dict(alarm) for alarm in self.alarms]}

    def _step(self, delay_s: float, entries: list[Entry]) -> Step:
        self.now_s += delay_s
        return Step(delay_s, entries, self.summary())

    def _gap(self) -> float:
        return self.rng.uniform(*CARD_GAP_S)

    # ---- the pieces of a record ------------------------------------------------------------------

    def _device_message(self, device: str, code: str, counted: bool = True) -> dict[str, Any]:
        index: int | None = None
        unit = None
        if counted:
            self.event_index[device] += 1
            index = self.event_index[device]
            unit = ["shoe", "OS-1 sim", "SHOE0001"] if device == SHOE else ["shuffler", "CS-6 sim", "SHUF0001"]
        return {"device": device, "event_index": index, "message": code, "type": "DeviceMessage", "unit": unit, "v": 2}

    def _device_state(self, device: str, to: str, trigger: str, reason: str = "DEVICE_STATE",
                      severity: str = "info", **more: Any) -> Entry:
        old = self.devices[device]["state"]
        self.devices[device]["state"] = to
        return _event(reason, device, f"{device}: {old} -> {to} ({trigger})",
                      {"device": device, "from": old, "to": to, "trigger": trigger, **more}, severity=severity)

    def _shoe_state(self, to: str, trigger: str, reason: str = "SHOE_STATE", text: str = "", **more: Any) -> Entry:
        old = self.shoe["state"]
        self.shoe["state"] = to
        return _event(reason, "shoe", f"shoe: {old} -> {to}{text}", {"from": old, "to": to, "trigger": trigger, **more})

    def _card_read(self) -> tuple[str, int, dict[str, Any]]:
        """The next card out of the shoe: it, its index in the shoe, the read as the tracker's input."""
        card = self.rng.choice(CARDS)
        self.shoe["cards_out"] += 1
        index = self.shoe["cards_out"]
        code = f"3000{index & 0xFFFF:04x}{CARDS.index(card):02x}0000{self.event_index[SHOE] & 0xFFFF:04x}"
        return card, index, self._device_message(SHOE, code)

    def _card_to(self, target: str) -> tuple[list[Entry], int]:
        card, index, read = self._card_read()
        return [_event("CARD_ASSIGNED", "round", f"round {self.round_id}: {card} to {target}",
                       {"card": card, "input": read, "round": self.round_id, "target": target})], index

    def _raise(self, reason: str) -> int:
        self.alarm_id += 1
        self.alarms.append({"id": self.alarm_id, "reason": reason})
        return self.alarm_id

    def _clear(self, alarm: int, reason: str, how: str, who: str, round_id: int | None) -> Entry:
        self.alarms = [a for a in self.alarms if a["id"] != alarm]
        data: dict[str, Any] = {"alarm": alarm, "alarm_reason": reason}
        if round_id is not None:
            data["round"] = round_id
        return _event("ALARM_CLEARED", "table", f"alarm {alarm} ({reason}) cleared by {who}: {how}", data, who=who)

    # ---- the story ---------------------------------------------------------------------------------

    def steps(self) -> Iterator[Step]:
        yield self._step(0.0, [_event("DAEMON_START", "cardd", "cardd 0.1.0 started",
                                      {"config": "/etc/cardd/cardd.toml", "release": "cardd 0.1.0",
                                       "rules": "casino-000", "rules_sha256": "0" * 64, "simulated": True},
                                      kind="start")])
        for device, serial in ((SHOE, "SHOE0001"), (SHUFFLER, "SHUF0001")):
            self.devices[device]["link"] = "up"
            yield self._step(0.05, [_input(device, {"device": device, "type": "LinkUp"}),
                                    self._device_state(device, "connecting", "connect"),
                                    self._device_state(device, "idle", "identify", firmware="1.0.0",
                                                       rebooted=False, serial=serial)])
        while True:
            yield from self._shoe()

    def _shoe(self) -> Iterator[Step]:
        rng = self.rng
        self.shoe.update(state="idle", cards_out=0)
        self.rounds_this_shoe = 0
        yield self._step(rng.uniform(2.0, 10.0), [
            _input("api", {"type": "ShuffleStarted", "who": DEALER}, DEALER),
            _event("START_SHUFFLE", "device", f"start_shuffle by {DEALER} (uid 1000)",
                   {"args": {}, "command": "start_shuffle", "result": {"decks": DECKS}, "uid": 1000},
                   who=DEALER, kind="command")])
        yield self._step(0.02, [_input(SHUFFLER, self._device_message(SHUFFLER, "11001f09", counted=False)),
                                self._device_state(SHUFFLER, "shuffling", "start_shuffle"),
                                self._shoe_state("shuffling", "start_shuffle")])
        shuffle_s = rng.uniform(*SHUFFLE_S)
        for n in range(8):
            yield self._step(shuffle_s / 10,
                             [_input(SHUFFLER, self._device_message(SHUFFLER, f"1100{n:02x}{n * 7:02x}", counted=False))])
        yield self._step(shuffle_s / 10, [
            _input(SHUFFLER, self._device_message(SHUFFLER, "1201" + "06" * 52)),
            self._device_state(SHUFFLER, "ready", "finish_shuffle"),
            self._shoe_state("verifying", "stack_counted", text=f": card count {CARDS_IN_SHOE}", card_count=CARDS_IN_SHOE)])
        yield self._step(shuffle_s / 10, [
            _input(SHUFFLER, self._device_message(SHUFFLER, "130106000000")),
            self._shoe_state("verified", "accept", reason="SHOE_VERIFIED",
                             text=f": cards {CARDS_IN_SHOE}, decks {DECKS}, device model CS-6 sim, device serial "
                                  f"SHUF0001, device firmware 1.0.0, operator {DEALER}",
                             cards=CARDS_IN_SHOE, decks=DECKS, device_firmware="1.0.0", device_model="CS-6 sim",
                             device_serial="SHUF0001", operator=DEALER)])
        yield self._step(rng.uniform(3.0, 8.0), [
            _input(SHOE, self._device_message(SHOE, "3300000e91")),
            self._device_state(SHOE, "loaded", "load"),
            self._device_state(SHUFFLER, "idle", "hand_off"),
            self._shoe_state("burning", "load", text=": burn 1", burn=1)])
        card, index, read = self._card_read()
        yield self._step(self._gap(), [
            self._device_state(SHOE, "dealing", "start_dealing", input=read),
            _event("BURN", "shoe", "burn card 1 (0 to go)", {"card": card, "index": index, "remaining": 0}),
            self._shoe_state("in_play", "burnt")])
        cut = rng.randint(200, 250)
        while self.shoe["state"] == "in_play":
            yield from self._round(cut)
        out = self.shoe["cards_out"]
        yield self._step(self._gap(), [self._shoe_state("complete", "round_complete", text=f": cards out {out}",
                                                        cards_out=out)])
        yield self._step(rng.uniform(5.0, 15.0), [
            _input("api", {"returned": CARDS_IN_SHOE - out, "type": "ShoeRemainder", "who": DEALER}, DEALER),
            self._shoe_state("reconciled", "remainder", reason="RECONCILED",
                             text=f": cards out {out}, returned {CARDS_IN_SHOE - out}", cards_out=out,
                             returned=CARDS_IN_SHOE - out)])

    def _round(self, cut: int) -> Iterator[Step]:
        """One round, its steps' delays spread so it lasts ROUND_S; a fault at ``fault_rate``."""
        rng = self.rng
        self.round_id += 1
        r = self.round_id
        boxes = sorted(rng.sample(range(1, 8), rng.choice((1, 2, 2, 3, 3, 4, 5, 7))))
        fault = rng.choice(FAULTS) if rng.random() < self.fault_rate else None
        length = rng.uniform(*ROUND_S)
        # the dealing comes a card's gap a step (about 4 steps a box and 4 more); the betting takes
        # what is left of the round
        bets_s = max(len(boxes) + 1.0, length - (4 * len(boxes) + 4) * sum(CARD_GAP_S) / 2)
        self._round_starts.append(self.now_s)
        self.rounds_this_shoe += 1
        yield self._step(rng.uniform(2.0, 6.0), [_input("api", {"type": "OpenRound"}, "")])
        for box in boxes:
            yield self._step(bets_s / (len(boxes) + 1), self._bet(r, box))
        first = True
        for step in self._play(r, boxes, cut, fault):
            yield self._step(bets_s / (len(boxes) + 1) if first else step.delay_s, step.entries)
            first = False

    def _bet(self, r: int, box: int) -> list[Entry]:
        amount = self.rng.choice((500, 1000, 2500, 5000, 10000))
        player = f"p{box}"
        return [_input("api", {"amount": amount, "box": box, "player": player, "type": "PlaceBet"}),
                _event("ACTION", "round", f"round {r}: {player} bets {amount / 100:.2f} on box {box}",
                       {"action": "bet", "amount": amount, "box": box, "owner": True, "player": player, "round": r},
                       who=player)]

    def _play(self, r: int, boxes: list[int], cut: int, fault: str | None) -> Iterator[Step]:
        """No more bets, the deal, the players, the dealer, the settlement: Steps whose summary is
        filled in by :meth:`_round` (only delays and entries are taken from these)."""
        rng = self.rng
        none: dict[str, Any] = {}
        yield Step(self._gap(), [_input("api", {"type": "NoMoreBets", "who": DEALER}, DEALER),
                                 _event("ROUND_STATE", "round", f"round {r}: now initial_deal",
                                        {"round": r, "state": "initial_deal"})], none)
        targets = [f"box {b} hand 1" for b in boxes] + ["dealer"] + [f"box {b} hand 1" for b in boxes]
        fault_at = rng.randrange(len(targets)) if fault else -1
        for n, target in enumerate(targets):
            entries, index = self._card_to(target)
            entries += self._cut_card(index, cut)
            if n == fault_at and fault == "face_up":
                self.faults["face_up"] += 1
                yield Step(self._gap(), self._face_up(r, boxes, entries[0]), none)
                yield from self._supervisor_clears(r)
                return
            if n == fault_at and fault == "device_offline":
                self.faults["device_offline"] += 1
                yield Step(self._gap(), entries, none)
                yield from self._offline_and_back(r)
                continue
            if n == len(targets) - 1:
                entries.append(_event("ROUND_STATE", "round", f"round {r}: now players", {"round": r, "state": "players"}))
            yield Step(self._gap(), entries, none)
        for box in boxes:
            for _ in range(rng.choice((0, 1, 1, 2))):
                yield Step(self._gap(), self._act(r, box, "hit"), none)
                entries, index = self._card_to(f"box {box} hand 1")
                yield Step(self._gap(), entries + self._cut_card(index, cut), none)
            yield Step(self._gap(), self._act(r, box, "stand"), none)
        dealer_cards = rng.randint(1, 3)
        for n in range(dealer_cards):
            entries, index = self._card_to("dealer")
            entries += self._cut_card(index, cut)
            if n == 0:
                entries.insert(0, _event("ROUND_STATE", "round", f"round {r}: now dealer", {"round": r, "state": "dealer"}))
            if n == dealer_cards - 1:
                entries += self._settle(r, boxes)
            yield Step(self._gap(), entries, none)

    def _cut_card(self, index: int, cut: int) -> list[Entry]:
        if index != cut or self.shoe["state"] != "in_play":
            return []
        return [self._shoe_state("last_round", "cut_card_out", reason="CUT_CARD_OUT",
                                 text=f": index {index}, cards out {index}, allowed 157..260",
                                 allowed="157..260", cards_out=index, index=index)]

    def _act(self, r: int, box: int, action: str) -> list[Entry]:
        return [_input("api", {"action": action, "amount": None, "box": box, "co_players": [], "player": None,
                               "type": "Act", "who": DEALER}, DEALER),
                _event("ACTION", "round", f"round {r}: {action} at box {box} hand 1",
                       {"action": action, "amount": None, "box": box, "co_players": [], "hand": 0,
                        "moved_to_second_hand": [], "player": f"p{box}", "round": r}, who=DEALER)]

    def _settle(self, r: int, boxes: list[int]) -> list[Entry]:
        entries = []
        for box in boxes:
            outcome = self.rng.choice(("win", "lose", "lose", "push", "blackjack"))
            stake = self.rng.choice((500, 1000, 2500, 5000))
            net = {"win": stake, "lose": -stake, "push": 0, "blackjack": stake * 3 // 2}[outcome]
            entries.append(_event("SETTLED", "round",
                                  f"round {r}: p{box} main at box {box} hand 1: {outcome}, stake {stake / 100:.2f}, "
                                  f"net {net / 100:.2f}",
                                  {"box": box, "hand": 0, "kind": "main", "net": str(net), "outcome": outcome,
                                   "player": f"p{box}", "round": r, "stake": stake}))
        entries.append(_event("ROUND_STATE", "round", f"round {r}: now complete", {"round": r, "state": "complete"}))
        return entries

    # ---- the faults, as the tracker journals them --------------------------------------------------

    def _face_up(self, r: int, boxes: list[int], dealt: Entry) -> list[Entry]:
        """The card read face up: a misload, the round void by rule and dealt again (the next round)."""
        card, index, read = dealt.data["card"], self.shoe["cards_out"], dealt.data["input"]
        self._raise("FACE_UP_CARD")
        return [_event("FACE_UP_CARD", "table", f"card #{index} ({card}) came out face up: misload; card to no hand",
                       {"card": card, "index": index, "input": read}, severity="alarm"),
                _event("REDEAL", "table", f"re-deal declared for round {r} ({FACE_UP_RULE})", {}, severity="warning"),
                _event("ROUND_VOID", "round", f"round {r}: void (FACE_UP_CARD); all bets returned",
                       {"by_rule": FACE_UP_RULE, "cause": "FACE_UP_CARD",
                        "returned": {f"{b}:p{b}": 1000 for b in boxes}, "round": r, "voided_paid_at_once": []},
                       severity="alarm", who="table")]

    def _supervisor_clears(self, r: int) -> Iterator[Step]:
        alarm = self.alarms[-1]
        yield Step(self.rng.uniform(*SUPERVISOR_S), [
            _input("api", {"alarm_id": alarm["id"], "role": "supervisor", "type": "ClearAlarm", "who": SUPERVISOR},
                   SUPERVISOR),
            self._clear(alarm["id"], alarm["reason"], "cleared", SUPERVISOR, r)], {})

    def _offline_and_back(self, r: int) -> Iterator[Step]:
        """The shoe's link lost mid-deal: the round held; the device back; the supervisor resumes."""
        self.devices[SHOE]["link"] = "down"
        alarm = self._raise("ROUND_HELD")
        yield Step(self._gap(), [
            _input(SHOE, {"device": SHOE, "type": "LinkDown"}),
            self._device_state(SHOE, "offline", "disconnect", reason="DEVICE_OFFLINE", severity="warning"),
            _event("ROUND_HELD", "round", f"round {r}: held: {SHOE} offline",
                   {"cause": "DEVICE_OFFLINE", "detail": f"{SHOE} offline", "round": r}, severity="alarm")], {})
        self.devices[SHOE]["link"] = "up"
        yield Step(self.rng.uniform(*OFFLINE_S), [
            self._device_state(SHOE, "connecting", "connect"),
            self._device_state(SHOE, "idle", "identify", reason="DEVICE_RECOVERED", firmware="1.0.0",
                               rebooted=False, serial="SHOE0001"),
            _input(SHOE, {"device": SHOE, "type": "LinkUp"})], {})
        yield Step(self.rng.uniform(*SUPERVISOR_S), [
            _input("api", {"role": "supervisor", "type": "Resume", "who": SUPERVISOR}, SUPERVISOR),
            _event("OVERRIDE", "round", f"round {r}: resume by supervisor {SUPERVISOR}",
                   {"override": f"round {r}: resume", "role": "supervisor"}, severity="warning", who=SUPERVISOR),
            _event("ROUND_RESUMED", "round", f"round {r}: resumed by {SUPERVISOR} (was held: DEVICE_OFFLINE: "
                   f"{SHOE} offline)", {"round": r}, who=SUPERVISOR),
            self._clear(alarm, "ROUND_HELD", "the round was resumed", SUPERVISOR, r),
            self._device_state(SHOE, "dealing", "start_dealing")], {})
