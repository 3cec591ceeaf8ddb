"""The shoe's life: shuffle -> verification -> loaded -> burn -> rounds -> cut card -> complete
-> reconciliation (cards dealt + the remainder counted back = the verified shoe, card by card).
The host never learns a stack's order. Verification and the next shoe's deferred messages:
docs/architecture.md, "The shoe's life"; the reason codes: docs/deal-tracking.md."""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Callable, Mapping

import structlog
from transitions import Machine

from devices.errors import RemainderError, ShoeStateError
from devices.events import Event, EventSink, Reason, Severity
from devices.machine_table import TableDriven
from devices.game.rules import HouseRules, cut_window
from core.cards import ALL_CARDS, Card, shoe_composition
from firmware_bridge.messages import DeckCheckResult, Message, ShoeLoaded, ShuffleComplete, ShuffleProgress

log = structlog.get_logger(__name__)

SHOE_STATES = (
    "idle", "shuffling", "verifying", "refused", "verified", "burning", "in_play", "last_round",
    "complete", "reconciled", "unreconciled", "void",
)
_ENDED = ["reconciled", "unreconciled", "void"]
FREE = ["idle", "refused", "verified", *_ENDED]  # no shoe in play, none waiting to be reconciled
IN_PLAY = ("burning", "in_play", "last_round")
SHOE_TRANSITIONS: tuple[dict[str, Any], ...] = (
    {"trigger": "start_shuffle", "source": FREE, "dest": "shuffling"},
    {"trigger": "stack_counted", "source": "shuffling", "dest": "verifying"},
    {"trigger": "accept", "source": "verifying", "dest": "verified"},
    {"trigger": "refuse", "source": ["shuffling", "verifying", "verified", *IN_PLAY], "dest": "refused"},
    {"trigger": "hand_shuffle", "source": FREE, "dest": "verified"},
    {"trigger": "load", "source": "verified", "dest": "burning"},
    {"trigger": "burnt", "source": "burning", "dest": "in_play"},
    {"trigger": "change_dealer", "source": "in_play", "dest": "burning"},
    {"trigger": "cut_card_out", "source": ["burning", "in_play"], "dest": "last_round"},
    {"trigger": "finish", "source": ["burning", "in_play", "last_round"], "dest": "complete"},
    {"trigger": "reconcile_ok", "source": "complete", "dest": "reconciled"},
    {"trigger": "reconcile_failed", "source": "complete", "dest": "unreconciled"},
    {"trigger": "void_shoe", "source": [s for s in SHOE_STATES if s not in ("idle", "void")], "dest": "void"},
)
_REASON_FOR_DEST = {
    "verified": Reason.SHOE_VERIFIED, "refused": Reason.SHOE_REFUSED, "last_round": Reason.CUT_CARD_OUT,
    "reconciled": Reason.RECONCILED, "unreconciled": Reason.RECONCILIATION_FAILED, "void": Reason.SHOE_VOID,
}
#: the shoe's states whose arrival is an alarm; "void" is not: only a supervisor voids a shoe
#: (VoidShoe), and his decision is journaled with who (SHOE_VOID, warning), not an alarm for him to clear
_ALARMS = ("refused", "unreconciled")
_WARNINGS = ("void",)


def describe_counts(counts: Mapping[Card, int]) -> str:
    """'AS x1, 7H x2' in card order; '-' when empty."""
    return ", ".join(f"{c} x{n}" for c, n in sorted(counts.items()) if n) or "-"


def compare_counts(expected: Mapping[Card, int], actual: Mapping[Card, int]) -> tuple[dict[Card, int], dict[Card, int]]:
    """(missing, extra) per card between what should be there and what is."""
    missing: dict[Card, int] = {}
    extra: dict[Card, int] = {}
    for c in ALL_CARDS:  # one pass, each count read once (twice a shoe, every card)
        should, has = expected.get(c, 0), actual.get(c, 0)
        if has < should:
            missing[c] = should - has
        elif has > should:
            extra[c] = has - should
    return missing, extra


def remainder_problem(returned: Mapping[Card, int]) -> str | None:
    """Why ``returned`` is no remainder count (a card with a count of 0 or more each), or None: the
    shoe's check at reconciliation, which a client makes too before it sends the count."""
    for card, n in returned.items():  # a key that is not a card would be ignored: an extra card unseen
        if not isinstance(card, Card) or isinstance(n, bool) or not isinstance(n, int) or n < 0:
            name = str(card) if isinstance(card, Card) else repr(card)
            return f"{name}: {n!r} is not a card with a count of 0 or more"
    return None


class Shoe(TableDriven):
    """One shoe at a time, from its shuffle to its reconciliation."""

    state: str  # set by the Machine, then by the table read from it

    if TYPE_CHECKING:  # one method per trigger, bound to the model (TableDriven); declared for the type checker
        def trigger(self, name: str) -> bool: ...
        def start_shuffle(self) -> bool: ...
        def refuse(self) -> bool: ...
        def burnt(self) -> bool: ...

    def __init__(self, rules: HouseRules, sink: EventSink, on_load: Callable[[], None] | None = None,
                 next_shoe_waits: Callable[[], bool] = lambda: False) -> None:
        self.rules = rules
        self._on_load = on_load  # a new shoe starts: the table empties its piles
        self._next_shoe_waits = next_shoe_waits  # the table's word: an ended shoe's alarm still holds the next
        self.decks = rules.decks
        self._sink = sink
        self.expected: dict[Card, int] = shoe_composition(self.decks)
        self.counted: dict[Card, int] | None = None  # the shuffler's count of this stack
        self.verifier: dict[str, str] = {}  # the counting device (model, serial, firmware) and operator
        self.out: Counter[Card] = Counter()  # cards that left the shoe, per card
        self.cards_out = 0
        self.burn_remaining = 0
        self.deferred: list[Message] = []
        #: who voided the shoe this one took the place of: its reports had waited for that shoe's end and
        #: came in with the void; None once it is loaded or another shoe starts (a void of it must say so)
        self.after_void: str | None = None
        self._note: dict[str, Any] = {}
        self.machine = Machine(
            model=self, states=list(SHOE_STATES), transitions=[dict(t) for t in SHOE_TRANSITIONS],
            initial="idle", auto_transitions=False, queued=True, send_event=True,
            after_state_change="_after_change",
        )  # the declaration (the diagram is drawn from it); changes run on the table read from it
        self._run_on_table(self.machine)

    # ---- queries --------------------------------------------------------------------------

    @property
    def in_play(self) -> bool:
        return self.state in IN_PLAY

    def _next_shoe_held(self) -> bool:
        """No shoe is in play, and the next may not start yet: a failed reconciliation's alarm is open,
        or a round dealt from this shoe (refused mid-round) is still on the table."""
        return self.state in FREE and self._next_shoe_waits()

    # ---- shuffler side --------------------------------------------------------------------

    def on_shuffler_message(self, msg: Message) -> None:
        if isinstance(msg, (ShuffleProgress, ShuffleComplete, DeckCheckResult)) and \
                (self.state in (*IN_PLAY, "complete") or self._next_shoe_held()):
            self.deferred.append(msg)  # the next shoe's shuffle
            return
        if isinstance(msg, (ShuffleProgress, ShuffleComplete)) and self.state == "verifying":
            # the stack was counted and waits for its deck check: a report of a shuffle now is out of order
            self._emit(Reason.OUT_OF_ORDER_REPORT, Severity.ALARM,
                       f"{type(msg).__name__} from the shuffler while the shoe is {self.state} (counted, waiting "
                       "for its deck check): out of order, ignored", {"message": type(msg).__name__,
                                                                    "state": self.state})
            return
        if isinstance(msg, (ShuffleProgress, ShuffleComplete)) and self.state != "shuffling":
            self._new_shoe()
            self.start_shuffle()  # an instant shuffle reports no progress first
        if isinstance(msg, ShuffleComplete):
            self.counted = dict(msg.composition)
            self._fire("stack_counted", card_count=msg.card_count)
        elif isinstance(msg, DeckCheckResult):
            self._on_deck_check(msg)

    def _on_deck_check(self, msg: DeckCheckResult) -> None:
        if self.state != "verifying":
            self._emit(Reason.SHOE_REFUSED, Severity.ALARM,
                       f"deck check arrived without a counted shuffle (shoe state {self.state}); shoe refused",
                       {"state": self.state})
            if self.state in ("shuffling", "verified"):
                self.refuse()
            return
        problems = self._verification_problems(msg)
        if problems:
            self._fire("refuse", problems="; ".join(problems), decks=self.decks, **self.verifier)
        else:
            self._fire("accept", cards=sum(self.expected.values()), decks=self.decks, **self.verifier)

    def _verification_problems(self, check: DeckCheckResult) -> list[str]:
        counted = self.counted or {}
        missing, extra = compare_counts(self.expected, counted)
        # The device's own findings count too: trust neither side alone.
        for card, n in check.missing:
            missing[card] = max(missing.get(card, 0), n)
        for card, n in check.extra:
            extra[card] = max(extra.get(card, 0), n)
        problems = []
        if missing:
            problems.append(f"missing: {describe_counts(missing)}")
        if extra:
            problems.append(f"extra: {describe_counts(extra)}")
        if check.unrecognised:
            problems.append(f"unrecognised: {check.unrecognised} card(s)")
        if check.decks != self.decks:
            problems.append(f"checked as {check.decks} decks, the rules say {self.decks}")
        if not check.ok and not problems:
            problems.append("the shuffler's deck check failed")
        return problems

    def hand_shuffled(self, who: str) -> None:
        """A hand-shuffled shoe (no counting shuffler): assumed full decks, reconciled at the end."""
        self.counted = None
        if self.may("hand_shuffle"):
            self._new_shoe()
        self._fire("hand_shuffle", who=who, decks=self.decks)

    def _new_shoe(self) -> None:
        """A new shoe starts (its shuffle, or its load): it has no card out yet. The last shoe's count
        (kept until now: its reconciliation reads it) goes, and the table's piles with it, which
        are counted against it."""
        self.out.clear()
        self.cards_out = 0
        self.after_void = None
        if self._on_load is not None:
            self._on_load()

    # ---- shoe side ------------------------------------------------------------------------

    def shoe_loaded(self, msg: ShoeLoaded) -> bool:
        """The stack went into the shoe. False (with an alarm) when it may not be dealt."""
        if self.state == "complete" or self._next_shoe_held():
            self.deferred.append(msg)  # the next shoe: wait for this one's reconciliation (and its alarm's clearing)
            return True
        if self.state in IN_PLAY:  # reloaded mid-shoe: what is in it now was never verified
            self._fire("refuse", problems=f"shoe loaded again while {self.state} ({self.cards_out} cards out): "
                       "its cards were not verified", cards_out=self.cards_out)
            return False
        if self.state != "verified":
            self._emit(Reason.SHOE_REFUSED, Severity.ALARM,
                       f"shoe loaded without a verified shuffle (shoe state {self.state}); dealing blocked",
                       {"state": self.state})
            return False
        self._new_shoe()
        self.burn_remaining = self.rules.shoe.burn_after_shuffle
        self._fire("load", burn=self.burn_remaining)
        return True

    def card_out(self, card: Card) -> bool:
        """Count a card that left the shoe (read, or entered by the dealer).

        True when it has now left more often than the shoe holds it: a foreign card.
        """
        n = self.out.get(card, 0) + 1
        self.out[card] = n
        self.cards_out += 1
        return n > self.expected.get(card, 0)

    def card_back(self, card: Card) -> None:
        """A card put back on top of the shoe by a reconstruction; it will be read again."""
        self.out[card] -= 1
        self.cards_out -= 1

    @property
    def burning(self) -> bool:
        """Burn cards still to come; the cut card may come out during the burn, which still completes."""
        return self.burn_remaining > 0 and self.state in IN_PLAY

    def take_burn(self, card: Card) -> None:
        self.burn_remaining -= 1
        self._emit(Reason.BURN, Severity.INFO, f"burn card {self.cards_out} ({self.burn_remaining} to go)",
                   {"card": str(card), "index": self.cards_out, "remaining": self.burn_remaining})
        if self.burn_remaining == 0 and self.state == "burning":
            self.burnt()

    def dealer_changed(self, who: str) -> bool:
        """A new dealer mid-shoe burns one card before the next round. False if not now."""
        n = self.rules.shoe.burn_on_dealer_change
        if not n or self.state != "in_play":
            return False
        self.burn_remaining = n
        self._fire("change_dealer", who=who, burn=n, reason=Reason.DEALER_CHANGE_BURN)
        return True

    @property
    def stack_cards(self) -> int:
        """How many cards the verified stack holds: the shuffler's count (a hand shuffle: the decks)."""
        return sum((self.counted or self.expected).values())

    def cut_window(self) -> tuple[int, int]:
        """How many cards may leave before the cut card (:func:`devices.game.rules.cut_window`)."""
        return cut_window(self.rules, self.stack_cards)

    def cut_card_seen(self, index: int) -> None:
        if self.state not in ("burning", "in_play"):
            return
        lo, hi = self.cut_window()
        self._fire("cut_card_out", index=index, cards_out=self.cards_out, allowed=f"{lo}..{hi}")
        if not lo <= self.cards_out <= hi:  # a bad cut or placement: the supervisor decides (void_shoe)
            self._emit(Reason.CUT_CARD_MISPLACED, Severity.WARNING,
                       f"cut card came out after {self.cards_out} cards; the rules put it after {lo}..{hi} "
                       f"(penetration {self.rules.shoe.penetration}, at least {self.rules.shoe.min_cut_decks} "
                       "deck(s) from either end)", {"cards_out": self.cards_out, "lo": lo, "hi": hi, "index": index})

    def finish_shoe(self, why: str) -> None:
        if self.may("finish"):
            self._fire("finish", why=why, cards_out=self.cards_out)

    # ---- end of the shoe ------------------------------------------------------------------

    def reconcile(self, returned: Mapping[Card, int], who: str | None = None) -> bool:
        """Cards dealt + ``returned`` (the undealt remainder, counted) must equal the shoe."""
        if self.state != "complete":
            raise ShoeStateError(f"the shoe is {self.state}: its remainder is counted once the shoe is complete "
                                 "(after the cut card's last round)")
        problem = remainder_problem(returned)
        if problem is not None:
            raise RemainderError(problem)
        total = Counter(self.out)
        total.update({c: n for c, n in returned.items() if n})
        missing, extra = compare_counts(self.counted or self.expected, total)
        data = {"cards_out": self.cards_out, "returned": sum(returned.values())}
        if missing or extra:
            problems = "; ".join(p for p in (missing and f"missing: {describe_counts(missing)}",
                                             extra and f"extra: {describe_counts(extra)}") if p)
            self._fire("reconcile_failed", who=who, problems=problems, **data)
        else:
            self._fire("reconcile_ok", who=who, **data)
        self._replay_deferred()
        return not (missing or extra)

    def void(self, who: str) -> None:
        """Void the shoe; the next shoe's reports that waited for its end come in now, and the shoe
        they start takes its place (:attr:`after_void` names who voided the one it replaced)."""
        self._fire("void_shoe", who=who, cards_out=self.cards_out)
        self.after_void = None
        self._replay_deferred()
        if self.state != "void":
            self.after_void = who

    def next_shoe_released(self) -> None:
        """The table cleared what held the next shoe: the messages that waited for it are taken now."""
        self._replay_deferred()

    def _replay_deferred(self) -> None:
        if self._next_shoe_held():  # they wait for what holds the next shoe (an alarm, a round on the table)
            return
        pending, self.deferred = self.deferred, []
        for msg in pending:
            if isinstance(msg, ShoeLoaded):
                self.shoe_loaded(msg)
            else:
                self.on_shuffler_message(msg)

    # ---- state <-> events -----------------------------------------------------------------

    def _fire(self, trigger: str, **note: Any) -> None:
        self._note = note
        try:
            self.trigger(trigger)
        finally:
            self._note = {}

    def _changed(self, src: str, dst: str, trigger: str) -> None:
        note = dict(self._note)
        reason = note.pop("reason", None) or _REASON_FOR_DEST.get(dst, Reason.SHOE_STATE)
        who = note.pop("who", None)
        text = f"shoe: {src} -> {dst}"
        if "problems" in note:
            text += f": {note['problems']}" + ("; dealing blocked" if dst == "refused" else "")
        elif note:  # the facts a supervisor reads on the screen: cards, decks, counting device, who
            text += ": " + ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in note.items())
        severity = Severity.ALARM if dst in _ALARMS else Severity.WARNING if dst in _WARNINGS else Severity.INFO
        data = {"from": src, "to": dst, "trigger": trigger, **note}
        log.info("shoe_state", **{k: str(v) for k, v in data.items()})
        self._sink(Event(reason, "shoe", text, severity, data, who))

    def _emit(self, reason: Reason, severity: Severity, text: str, data: dict[str, Any]) -> None:
        self._sink(Event(reason, "shoe", text, severity, data))

    # ---- persistence ----------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Plain data: what left the shoe so far (never anything still inside it)."""
        return {
            "state": self.state, "cards_out": self.cards_out, "burn_remaining": self.burn_remaining,
            "after_void": self.after_void,
            "out": {str(c): n for c, n in self.out.items() if n},
            "counted": None if self.counted is None else {str(c): n for c, n in self.counted.items() if n},
        }

    def restore(self, snap: Mapping[str, Any]) -> None:
        self.machine.set_state(snap["state"])
        self.cards_out = snap["cards_out"]
        self.burn_remaining = snap["burn_remaining"]
        self.after_void = snap.get("after_void")
        self.out = Counter({Card.parse(c): n for c, n in snap["out"].items()})
        counted = snap["counted"]
        self.counted = None if counted is None else {c: 0 for c in ALL_CARDS} | {Card.parse(c): n for c, n in counted.items()}
