"""``make demo``: the real ``cardd --simulate`` through a whole 6-deck shoe, run by a scripted
dealer, players and supervisor that talk to it only through the API, while ``cardctl watch``
shows the table live in this terminal.

cardd.cli.demo is the entry point. What it plays, its summary and its Ctrl-C: docs/cardctl.md,
"The demo".

    python -m cardd.cli.demo [--fast] [--seed N] [--no-watch] [--state-dir DIR]"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from cardd.api.client import ApiClient, ClientError, CommandRefused, StateTimeout
from devices.game.settlement import money
from core.ctrl_c import end_like_ctrl_c, ending_deferred, interrupted_exit_code, stop_child
from cardd.cli.shown import visible
from cardd.journal import Journal
from core.rundirs import keep, make_run_directory

BIN = Path(sys.executable).parent
#: a decision waits this long in the normal demo (so a person can follow it); --fast: none
PACE_S = 0.12
#: the daemon closes a connection sending over 50 requests a second (docs/api.md): stay under it
REQUEST_INTERVAL_S = 1 / 45
#: the seed casino's minimum bet per player (rules/casino-000.toml), in cents
MIN_BET = 1000
CARD_VALUES = {"A": 11, "K": 10, "Q": 10, "J": 10, "T": 10}


def card_value(card: str) -> int:
    rank = card[:-1]
    return CARD_VALUES.get(rank, 0) or int(rank)


def basic_strategy(cards: list[str], total: int, soft: bool, up: int, first_decision: bool) -> list[str]:
    """The player's choices, best first (the table refuses what the rules do not offer)."""
    wanted: list[str] = []
    pair = len(cards) == 2 and card_value(cards[0]) == card_value(cards[1])
    # (basic strategy surrenders against an ace too; this house does not allow it)
    if first_decision and not soft and (total == 16 and up in (9, 10) or total == 15 and up == 10):
        wanted.append("surrender")
    if pair and cards[0][:-1] in ("A", "8") or pair and card_value(cards[0]) == 9 and up not in (7, 10, 11):
        wanted.append("split")
    if len(cards) == 2 and (total == 11 or total == 10 and up < 10 or total == 9 and 3 <= up <= 6
                            or soft and total in (17, 18) and 3 <= up <= 6):
        wanted.append("double")
    if soft:
        hit = total <= 17 or total == 18 and up >= 9
    else:
        hit = total <= 11 or total == 12 and up not in (4, 5, 6) or 13 <= total <= 16 and up >= 7
    return wanted + (["hit", "stand"] if hit else ["stand", "hit"])


@dataclass
class Summary:
    rounds: int = 0
    voided: list[str] = field(default_factory=list)
    #: box -> players' result (cents; a Fraction where a 3:2 on an odd stake leaves half a cent)
    money: dict[int, Fraction] = field(default_factory=lambda: defaultdict(Fraction))
    alarms: list[str] = field(default_factory=list)
    reconciliation: str = ""
    cards_dealt: int = 0
    returned: int = 0
    #: the players' decisions the table accepted, insurance included
    decisions: Counter[str] = field(default_factory=Counter)


class Dealer:
    """The scripted dealer, players and supervisor, through one API connection."""

    def __init__(self, client: ApiClient, rng: random.Random, pace: float, say: Callable[[str], None]) -> None:
        self.client, self.rng, self.pace, self.say = client, rng, pace, say
        self.summary = Summary()
        self.misload_round = 3
        self.jam_round = 6
        self.unplug_round = 9

    # ---- small steps -------------------------------------------------------------------

    def ok(self, name: str, **args: Any) -> int:
        seq = self.client.command(name, **args).seq
        assert seq is not None  # a command's ACK names the journal record it made
        return seq

    def state(self) -> dict[str, Any]:
        return self.client.state()

    def log(self, **filters: Any) -> Any:
        return self.client.log(**filters)

    def wait(self, check: Callable[[dict[str, Any]], bool], timeout: float = 30.0) -> dict[str, Any]:
        try:
            return self.client.wait_state(check, timeout)
        except StateTimeout as exc:
            state = exc.state
            raise RuntimeError(f"the table never got there (shoe {state['shoe']}, round {state['round']})") from None

    def deal_one(self) -> dict[str, Any]:
        before = self.state()["shoe"]["cards_out"]
        self.ok("sim_deal", cards=1)
        state = self.wait(lambda s: s["shoe"]["cards_out"] > before or self.trouble(s))
        self.pause()
        return state

    def pause(self) -> None:
        if self.pace:
            time.sleep(self.pace)

    @staticmethod
    def trouble(state: dict[str, Any]) -> bool:
        r = state["round"]
        return bool(state["alarms"]) or (r is not None and r["held"] is not None)

    # ---- the shoe ----------------------------------------------------------------------

    def shuffle_and_load(self) -> None:
        self.wait(lambda s: all(d["link"] == "up" for d in s["devices"].values()))
        self.say("technician: start the shuffler (6 decks)")
        self.ok("start_shuffle")
        self.wait(lambda s: s["shoe"]["state"] == "verified")
        self.say("shoe verified by the shuffler's count; the dealer loads it")
        self.ok("sim_load_shoe")
        state = self.wait(lambda s: s["shoe"]["state"] == "burning")
        for _ in range(state["shoe"]["burn_remaining"]):
            self.deal_one()
        self.wait(lambda s: s["shoe"]["state"] == "in_play")

    def play_shoe(self) -> None:
        while self.state()["shoe"]["state"] in ("in_play", "last_round"):
            self.play_round()

    def reconcile(self) -> None:
        self.wait(lambda s: s["shoe"]["state"] == "complete")
        seq = self.ok("sim_unload_shoe")
        result = self.log(from_seq=seq, to_seq=seq).records[0].data["result"]
        self.summary.returned = sum(result["returned"].values())
        self.ok("shoe_remainder", returned=result["returned"])
        state = self.state()
        self.summary.cards_dealt = state["shoe"]["cards_out"]
        records = self.log(reason="RECONCILED", limit=10).records or \
            self.log(severity="alarm", limit=10000).records[-1:]
        self.summary.reconciliation = records[-1].message if records else f"shoe {state['shoe']['state']}"

    # ---- a round -----------------------------------------------------------------------

    def play_round(self) -> None:
        self.ok("open_round")
        state = self.state()
        round_id = state["round"]["id"]
        boxes = sorted(self.rng.sample(range(1, 8), self.rng.randint(2, 5)))
        owners: dict[int, str] = {}
        for box in boxes:
            owners[box] = f"player-{box}"
            self.ok("place_bet", box=box, player=owners[box], amount=MIN_BET * self.rng.choice((1, 2, 3, 5)))
        co_box = self.rng.choice(boxes)
        self.ok("place_bet", box=co_box, player=f"guest-{co_box}", amount=MIN_BET)  # a co-player behind
        self.ok("no_more_bets")
        self.pause()
        injected = surrender_offered = False
        for _ in range(400):
            state = self.state()
            r = state["round"]
            if self.trouble(state):
                self.supervise(state)
                continue
            if r["state"] in ("complete", "void"):
                break
            if r["next"] is not None:
                if not injected and round_id == self.misload_round:
                    injected = True  # the next card out of the shoe comes face up: a misload
                    self.say(f"round {round_id}: a card is misloaded face up")
                    self.ok("sim_switches", device="shoe", switches=f"face_up_at={state['shoe']['cards_out'] + 1}")
                elif not injected and round_id == self.jam_round and len(r["dealer"]["cards"]) == 1:
                    injected = True
                    self.say(f"round {round_id}: the shuffler jams (loading the next shoe)")
                    self.ok("sim_fault", device="shuffler", code="jam")
                    self.wait(lambda s: bool(s["alarms"]) or s["devices"]["shuffler"]["state"] != "idle", 5)
                    continue
                elif not injected and round_id == self.unplug_round and len(r["dealer"]["cards"]) == 1:
                    injected = True
                    self.say(f"round {round_id}: the shoe's cable is pulled and plugged back in")
                    self.unplug_shoe(state)
                    continue
                self.deal_one()
            elif r["state"] == "insurance":
                self.insurance(r, owners)
            elif r["turn"] is not None:
                if not surrender_offered:
                    surrender_offered = True
                    self.offer_surrender(r, owners)
                    continue
                self.decide(r, owners)
        else:
            raise RuntimeError(f"round {round_id} never finished")
        self.finish_round(round_id)

    def unplug_shoe(self, state: dict[str, Any]) -> None:
        self.ok("sim_switches", device="shoe",
                switches=f"disconnect_for=1.0 disconnect_at={state['shoe']['cards_out'] + 1}")
        self.deal_one()
        self.wait(lambda s: s["devices"]["shoe-reader"]["link"] != "up", 10)
        self.wait(lambda s: s["devices"]["shoe-reader"]["link"] == "up", 20)

    def insurance(self, r: dict[str, Any], owners: dict[int, str]) -> None:
        for box, owner in owners.items():
            stake = r["wagers"].get(str(box), {}).get(owner, 0)
            if stake // 2 < MIN_BET:
                continue  # insurance is half the stake, and at least the table minimum
            # someone takes the shoe's first insurance offer; later ones, now and then
            if stake and (not self.summary.decisions["insurance"] or self.rng.random() < 0.3):
                try:
                    self.ok("insure", box=box, player=owner, amount=stake // 2)
                    self.summary.decisions["insurance"] += 1
                    self.say(f"box {box}: {owner} takes insurance")
                except CommandRefused:
                    pass
        self.ok("close_insurance")

    def offer_surrender(self, r: dict[str, Any], owners: dict[int, str]) -> None:
        """Before the first card is drawn, any unplayed box may surrender: each player whose
        hand basic strategy gives up does so now."""
        up = card_value(r["dealer"]["cards"][0])
        for box, hands in r["boxes"].items():
            hand = hands[0]
            if len(hands) == 1 and len(hand["cards"]) == 2 and not hand["surrendered"] and \
                    basic_strategy(hand["cards"], hand["total"], hand["soft"], up, True)[0] == "surrender":
                try:
                    self.ok("act", box=int(box), action="surrender", player=owners[int(box)])
                except CommandRefused:
                    continue
                self.summary.decisions["surrender"] += 1
                self.say(f"box {box}: {owners[int(box)]} surrenders")

    def decide(self, r: dict[str, Any], owners: dict[int, str]) -> None:
        _, box, hand_index = r["turn"]
        hand = r["boxes"][str(box)][hand_index]
        up = card_value(r["dealer"]["cards"][0])
        # the house's surrender window closes with the first card drawn after the deal
        is_first = all(len(h["cards"]) <= 2 for hands in r["boxes"].values() for h in hands)
        co_players = [p for p in hand["stakes"] if p != owners[box]]
        for action in basic_strategy(hand["cards"], hand["total"], hand["soft"], up, is_first):
            args: dict[str, Any] = {"box": box, "action": action, "player": owners[box]}
            if action in ("double", "split") and co_players:
                args["co_players"] = [{"player": p, "joins": self.rng.random() < 0.5,
                                       **({"stays_on": 1} if action == "split" else {})} for p in co_players]
                for choice in args["co_players"]:
                    if choice["joins"]:
                        choice.pop("stays_on", None)
            try:
                self.ok("act", **args)
            except CommandRefused:
                continue
            self.summary.decisions[action] += 1
            if action not in ("hit", "stand"):
                self.say(f"box {box}: {owners[box]} {action}s")
            self.pause()
            return
        raise RuntimeError(f"no action accepted for box {box}")

    def supervise(self, state: dict[str, Any]) -> None:
        """The supervisor: a faulted device is fixed first (the technician clears a jam), then
        the alarms are cleared and a held round continued, or voided and redealt when the
        rules do not let it go on."""
        fixed = []
        for name, device in state["devices"].items():
            if device["state"] == "fault":
                api_name = "shoe" if name == "shoe-reader" else name
                self.ok("clear_fault", device=api_name, code="jam")
                self.wait(lambda s: s["devices"][name]["state"] != "fault", 10)
                fixed.append(f"{name} fault cleared by the technician")
        for alarm in state["alarms"]:
            self.ok("clear_alarm", alarm_id=alarm["id"])
            how = "; ".join(fixed + ["alarm cleared by the supervisor"])
            self.summary.alarms.append(f"alarm {alarm['id']} {alarm['reason']}: {alarm['message']} -> {how}")
        r = state["round"]
        if r is not None and r["held"] is not None:
            self.wait(lambda s: all(d["link"] == "up" for d in s["devices"].values()), 20)
            try:
                self.ok("resume")
                self.summary.alarms.append(f"round {r['id']} held ({r['held']}) -> continued by the supervisor")
            except CommandRefused as exc:
                self.ok("redeal")
                self.summary.alarms.append(f"round {r['id']} held ({r['held']}) -> voided and redealt ({exc})")
        self.pause()

    def finish_round(self, round_id: int) -> None:
        r = self.state()["round"]
        self.summary.rounds += 1
        if r["state"] == "void":
            self.summary.voided.append(f"round {round_id}")
            self.say(f"round {round_id}: void, bets returned")
            return
        for record in self.log(round=round_id, reason="SETTLED", limit=1000).records:
            self.summary.money[int(record.data["box"])] += Fraction(record.data["net"])  # "p/q" or whole cents
        self.say(f"round {round_id}: complete, house {money(r['house_result'])}")
        self.pause()


# ---- the daemon and the view ---------------------------------------------------------------

def start_daemon(directory: Path) -> subprocess.Popen[str]:
    """``cardd --simulate`` in ``directory``; it stops by itself if the demo is killed (SIGKILL, which
    no cleanup of the demo's sees)."""
    with open(directory / "cardd.log", "w") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen([str(BIN / "cardd"), "--simulate", "--state-dir", str(directory), "--log-format", "json",
                                 "--stop-with-parent", str(os.getpid())],
                                stdout=subprocess.DEVNULL, stderr=log, text=True)


def wait_until_serving(proc: subprocess.Popen[str], directory: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            ApiClient(directory / "cardd.sock", timeout=2).close()
            return
        except ClientError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"demo: cardd --simulate did not start; see {directory / 'cardd.log'}")
            time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cardd.cli.demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--fast", action="store_true", help="no pauses and no live view: seconds, not minutes")
    ap.add_argument("--seed", type=int, default=3, help="the players' random choices")
    ap.add_argument("--no-watch", action="store_true", help="no live view (it needs a terminal anyway)")
    ap.add_argument("--state-dir", type=Path, default=None, help="where the journal goes (default: a new directory)")
    # the tests' fixed point in the summary (see print_summary); not for people, so not in --help
    ap.add_argument("--summary-gate", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    watching = not (args.fast or args.no_watch) and sys.stdout.isatty() and shutil.which("cardctl", path=str(BIN))
    started = time.monotonic()
    directory: Path | None = args.state_dir
    daemon: subprocess.Popen[str] | None = None
    viewer: subprocess.Popen[bytes] | None = None
    # with the live view on the terminal the dealer's commentary would tear its screen: the view
    # shows what the journal records instead, and the commentary is for the plain run
    say: Callable[[str], None] = (lambda text: None) if watching else (lambda text: print(text, flush=True))
    end_like_ctrl_c()
    try:
        try:
            # made here: kept once the shoe is played (the summary names its journal) or on a failure,
            # removed on a Ctrl-C, and by the next run if this one is killed (core.rundirs)
            directory = directory or make_run_directory("cardd-demo-")
            directory.mkdir(parents=True, exist_ok=True)
            socket = directory / "cardd.sock"
            with ending_deferred():  # a Ctrl-C inside the start must find the daemon to stop
                daemon = start_daemon(directory)
            wait_until_serving(daemon, directory)
            if watching:
                with ending_deferred():
                    viewer = subprocess.Popen([str(BIN / "cardctl"), "--socket", str(socket), "watch"])
            client = ApiClient(socket, timeout=30, pace_s=REQUEST_INTERVAL_S)
            dealer = Dealer(client, random.Random(args.seed), 0.0 if args.fast else PACE_S, say)
            dealer.shuffle_and_load()
            dealer.play_shoe()
            dealer.reconcile()
            client.close()
        finally:
            stop_children(viewer, daemon)
        if args.state_dir is None:
            keep(directory)
        print_summary(dealer.summary, time.monotonic() - started, directory, args.summary_gate)
    except KeyboardInterrupt:  # at any moment, the summary included: one line, nothing left behind
        stop_children(viewer, daemon)  # again: the Ctrl-C may have come while they were being stopped
        kept = f"the journal is kept in {directory}"
        if args.state_dir is None:
            if directory is not None:  # (None: the Ctrl-C came before it was made)
                shutil.rmtree(directory, ignore_errors=True)
            kept = f"{directory or 'its directory'} removed"
        print(f"\ndemo: interrupted; the daemon is stopped and {kept}", file=sys.stderr)
        return interrupted_exit_code()
    except BaseException:  # a failure that names the directory (its cardd.log): it stays for the reader
        if args.state_dir is None and directory is not None:
            keep(directory)
        raise
    return 0


def stop_children(viewer: subprocess.Popen[bytes] | None, daemon: subprocess.Popen[str] | None) -> None:
    """The live view, then the daemon (its simulated devices stop with it); either may be gone."""
    stop_child(viewer, signal.SIGINT, 10)
    stop_child(daemon, signal.SIGTERM, 30)


def print_summary(s: Summary, elapsed: float, directory: Path, gate: Path | None) -> None:
    """What the shoe did, and the journal's check. ``gate`` (the tests' --summary-gate, a FIFO):
    once the lines above the journal's check are out, wait there until a writer opens it; the
    tests' fixed point to press Ctrl-C in the middle of the summary."""
    print(f"\ncardd demo: one 6-deck shoe through the real daemon in {elapsed:.1f} s\n")
    print(f"rounds played: {s.rounds}, voided: {len(s.voided)} ({', '.join(s.voided) or 'none'})")
    print(f"cards dealt: {s.cards_dealt}, returned undealt: {s.returned}")
    print("decisions: " + ", ".join(f"{name} {s.decisions[name]}" for name in
                                    ("hit", "stand", "double", "split", "surrender", "insurance")))
    print("players' result per box: " + ", ".join(f"box {b} {money(v)}" for b, v in sorted(s.money.items())))
    print("alarms and holds:")
    for line in s.alarms or ["none"]:  # the journal's and the devices' words: shown as text (cardd.cli.shown)
        print(f"  {visible(line)}")
    print(f"reconciliation: {visible(s.reconciliation)}", flush=True)
    if gate is not None:
        gate.open().close()
    with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
        checked = journal.verify()
    print(f"journal: {directory / 'journal.sqlite3'} ({checked.checked} records, chain "
          f"{'intact' if checked.ok else 'BROKEN at ' + str(checked.first_bad_seq)})")
    print(f"verify it: {BIN / 'cardctl'} verify-journal --file {directory / 'journal.sqlite3'}")

