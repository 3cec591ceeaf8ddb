"""The deal tracker: one table's devices, shoe and round, and where every card read goes.

:meth:`Table.apply` takes any record of :mod:`devices.tracker.inputs`, dispatches by its type and
returns the events it caused; every card that left the shoe ends in exactly one place, and
:meth:`placed` always equals the shoe's count out. The path of a card read, every reason code and
who may override it: docs/deal-tracking.md."""
from __future__ import annotations

from typing import Any, Callable

from devices.events import Event, Reason, Severity
from devices.errors import RuleViolation, TableError
from devices.game.inputs import Act, CloseInsurance, EvenMoney, Insure, NoMoreBets, PlaceBet, PlacePairsBet, ReduceBet, Resume
from devices.game.round import Round
from devices.game.round_checks import box_owners, check_seats
from devices.tracker.alarms import Alarm, alarms_open
from devices.tracker.device_inputs import DeviceInputs
from devices.tracker.inputs import (
    AskForBox, CardsToBoxWithoutWager, ClearAlarm, DealerChange, DeviceMessage, DrawnInErrorDecision, EnterCard,
    HandShuffled, LeaveSeat, LinkDown, LinkUp, OpenRound, PlacementError, Redeal, ShoeRemainder, ShuffleStarted,
    TableInput, TakeSeat, Tick, VoidShoe, command_name,
)
from devices.tracker.placement import Placement
from devices.tracker.procedures import Procedures
from devices.tracker.shoe import FREE as SHOE_FREE

# The commands a refusal names as the way forward (devices.tracker.inputs.COMMAND_NAMES)
_OPEN_ROUND, _ENTER_CARD, _DRAWN_IN_ERROR_CMD = (command_name(OpenRound), command_name(EnterCard),
                                                 command_name(DrawnInErrorDecision))
_TAKE_SEAT, _CLEAR_ALARM, _SHOE_REMAINDER = command_name(TakeSeat), command_name(ClearAlarm), command_name(ShoeRemainder)
_HAND_SHUFFLED, _VOID_SHOE = command_name(HandShuffled), command_name(VoidShoe)
#: the daemon's device command that has the shuffler shuffle a shoe (cardd.daemon.commands), named
#: where a new shoe is the way forward at a table with a shuffler
_START_SHUFFLE = "start_shuffle"
#: what stands between a shoe that is not in play and the next round, by the shoe's state; {command}
#: names the command that shuffles (at a table with a shuffler)
_SHOE_NOT_IN_PLAY = {
    "idle": "shuffle a shoe{command} and load it first",
    "shuffling": "the shuffler is still shuffling: load the shoe once it is verified",
    "verifying": "the shuffler is still counting the shoe: load it once it is verified",
    "refused": "the shuffler's count refused this shoe: shuffle a new one{command}",
    "verified": "the shoe is verified but not loaded: load it and deal the burn card",
    "complete": f"the shoe is complete: count its remainder back with {_SHOE_REMAINDER}, then shuffle a new "
                "one{command}",
    "reconciled": "the shoe is finished: shuffle a new one{command}",
    "unreconciled": f"the shoe did not reconcile (a supervisor clears its alarm with {_CLEAR_ALARM}): "
                    "shuffle a new one{command}",
    "void": "the shoe is void: shuffle a new one{command}",
}


class Table(DeviceInputs, Placement, Procedures):
    """One table: :meth:`apply` each input record to it, read the events it causes.

    ``clock`` is monotonic seconds (injected: tests move it); a device silent for longer than
    ``stale_after_s`` becomes stale at the next :meth:`tick`. The handlers come in groups by
    kind, each a module of this package: :mod:`~devices.tracker.device_inputs`,
    :mod:`~devices.tracker.placement`, :mod:`~devices.tracker.procedures`; this class keeps the
    dispatch and the round's and seats' inputs. Their state is one (:class:`TableState`).
    """

    def apply(self, inp: TableInput) -> list[Event]:
        """Apply one input; returns the events it caused, in order.

        An input the table cannot take raises (TableError, OverrideRefused, RuleViolation, RoundHeld
        ...) after journaling any refusal; events journaled before the refusal still went to the sink.
        """
        try:
            handler = _HANDLERS[type(inp)]
        except KeyError:
            raise TableError(f"{type(inp).__qualname__} is not a table input (see devices.tracker.inputs)") from None
        caused: list[Event] = []
        self._caused = caused
        try:
            handler(self, inp)
            if self.shoe.deferred and self.shoe.state in SHOE_FREE:  # what held the next shoe may be over now
                self.shoe.next_shoe_released()
        finally:
            self._caused = None
        return caused

    def _open_round(self, inp: OpenRound) -> None:
        """Start betting for the next round."""
        problems = [f"{p} (play waits for it)" for p in self.device_problems()]
        if self.round_live:
            problems.append(f"round {self.round.round_id} is still being played ({self.round.state}): "  # type: ignore[union-attr]
                            "finish it first")
        if self.shoe.burning:  # the cut card may come out during the burn: last_round too
            problems.append(f"{self.shoe.burn_remaining} burn card(s) still to come: deal them first")
        elif self.shoe.state not in ("in_play", "last_round"):
            problems.append(self._shoe_not_in_play())
        if self.drawn_in_error:
            problems.append(f"a card drawn in error waits for the dealer's word: give it with {_DRAWN_IN_ERROR_CMD} "
                            "(exposed or not) first")
        if self.awaiting_entry is not None:
            problems.append(f"unreadable card #{self.awaiting_entry} waits to be entered: enter it with "
                            f"{_ENTER_CARD} first")
        counts = self.alarms.of(Reason.SHOE_COUNT_MISMATCH)
        if counts:  # the shoe's count is in doubt: no card of it is dealt until a supervisor has looked
            problems.append(_look_at_the_shoe("shoe count mismatch", counts, f" (or voids the shoe with {_VOID_SHOE})"))
        foreign = self.alarms.of(Reason.FOREIGN_CARD)
        if foreign:  # an integrity failure stops play; one reason for them all (one line holds it)
            problems.append(_look_at_the_shoe("foreign card", foreign))
        conflicting = self.alarms.of(Reason.CONFLICTING_READ)
        if conflicting:  # so does a read that contradicts an earlier one
            problems.append(_look_at_the_shoe("conflicting read", conflicting))
        if problems:
            raise TableError.of(problems)
        self.rounds_started += 1
        self.round = Round(self.rules, self._journal, round_id=self.rounds_started)
        self.round_log = []
        self.holds.clear()

    def _shoe_not_in_play(self) -> str:
        """Why no round opens on the shoe as it is, and what comes next."""
        state = self.shoe.state
        way = _SHOE_NOT_IN_PLAY.get(state)
        if way is None:
            return f"the shoe is {state}"
        way = way.format(command=f" with {_START_SHUFFLE}" if self.uses_shuffler else "")
        if not self.uses_shuffler and self.shoe.may("hand_shuffle"):  # shuffled by hand: the dealer declares it
            way += f" (a shoe shuffled by hand is declared with {_HAND_SHUFFLED})"
        return f"the shoe is {state}: {way}"

    def _place_bet(self, inp: PlaceBet) -> None:
        self._no_bet_after_a_card(inp.player, f"a bet on box {inp.box}")
        self._to_round(inp)

    def _place_pairs_bet(self, inp: PlacePairsBet) -> None:
        self._no_bet_after_a_card(inp.player, f"a Blackjack Pairs bet on box {inp.box}")
        self._to_round(inp)

    def _reduce_bet(self, inp: ReduceBet) -> None:
        self._no_bet_after_a_card(inp.player, f"reducing a bet on box {inp.box}")
        self._to_round(inp)

    def _refuse(self, rule: str, text: str, who: str | None) -> RuleViolation:
        self._emit(Reason.ACTION_REFUSED, text, Severity.WARNING, who, rule=rule)
        return RuleViolation(rule, text)

    def _no_bet_after_a_card(self, player: str, what: str) -> None:
        """Seed 000 3.5: no bet once a card of the round has left the shoe (one out during betting is
        the next card: a bet placed after seeing it would choose where it goes)."""
        if self.pending and self.round is not None and self.round.state == "betting":
            raise self._refuse("card_out", f"no {what}: card(s) of round {self.round.round_id} already left the "
                               "shoe (no bet once the deal has begun)", player)

    def _no_more_bets(self, inp: NoMoreBets) -> None:
        if self.round is not None and self.round.state == "betting" and self.round.held is None:
            problem = check_seats(self.rules, self.round.wagers, self.seated, self.asking_for_box)
            if problem:
                raise self._refuse(*problem, who=inp.who)
        self._to_round(inp)
        owners = set(box_owners(self.round.wagers).values()) if self.round is not None else set()
        self.asking_for_box = [p for p in self.asking_for_box if p not in owners]  # his request is met
        self._feed()

    def _take_seat(self, inp: TakeSeat) -> None:
        if inp.player in self.seated:
            raise self._refuse("not_seated", f"{inp.player} is already seated", inp.who)
        self.seated.append(inp.player)
        self._emit(Reason.ACTION, f"{inp.player} takes a seat", who=inp.who, action="take_seat", player=inp.player)

    def _leave_seat(self, inp: LeaveSeat) -> None:
        if inp.player not in self.seated:
            raise self._refuse("not_seated", f"{inp.player} is not seated", inp.who)
        self.seated.remove(inp.player)
        if inp.player in self.asking_for_box:
            self.asking_for_box.remove(inp.player)
        self._emit(Reason.ACTION, f"{inp.player} leaves the table", who=inp.who, action="leave_seat",
                   player=inp.player)

    def _ask_for_box(self, inp: AskForBox) -> None:
        if inp.player not in self.seated:
            raise self._refuse("not_seated", f"{inp.player} is not seated: only a seated player asks for a box "
                               f"(seat him with {_TAKE_SEAT} first)", inp.who)
        if inp.player not in self.asking_for_box:
            self.asking_for_box.append(inp.player)
        rule = "boxes are given up on request" if self.rules.table.give_up_boxes else \
            "the house rules ask no one to give a box up"
        self._emit(Reason.ACTION, f"{inp.player} asks for a box ({rule})", who=inp.who, action="ask_for_box",
                   player=inp.player)

    def _insure(self, inp: Insure) -> None:
        self._to_round(inp)

    def _even_money(self, inp: EvenMoney) -> None:
        self._to_round(inp)

    def _close_insurance(self, inp: CloseInsurance) -> None:
        self._to_round(inp)
        self._feed()

    def _act(self, inp: Act) -> None:
        """A player decision; one the rules forbid raises RuleViolation and changes nothing."""
        self._to_round(inp)
        self._feed()


def _look_at_the_shoe(kind: str, alarms: list[Alarm], also: str = "") -> str:
    """Why no round opens while alarms about the shoe's cards are open, and who ends that."""
    return (f"{alarms_open(kind, alarms)}: a supervisor looks at the shoe and clears "
            f"{'it' if len(alarms) == 1 else 'them'} with {_CLEAR_ALARM} first{also}")



# Dispatch by the record's type (never by a name that came from outside).
_HANDLERS: dict[type, Callable[[Table, Any], None]] = {
    DeviceMessage: Table._device_message, LinkUp: Table._link_up, LinkDown: Table._link_down, Tick: Table._tick,
    OpenRound: Table._open_round, PlaceBet: Table._place_bet, ReduceBet: Table._reduce_bet,
    PlacePairsBet: Table._place_pairs_bet, TakeSeat: Table._take_seat, LeaveSeat: Table._leave_seat,
    AskForBox: Table._ask_for_box,
    NoMoreBets: Table._no_more_bets, Insure: Table._insure, EvenMoney: Table._even_money,
    CloseInsurance: Table._close_insurance, Act: Table._act, EnterCard: Table._enter_card,
    DrawnInErrorDecision: Table._drawn_in_error_decision, DealerChange: Table._dealer_change,
    PlacementError: Table._placement_error, CardsToBoxWithoutWager: Table._cards_to_box_without_wager,
    ShuffleStarted: Table._shuffle_started, HandShuffled: Table._hand_shuffled, ShoeRemainder: Table._shoe_remainder,
    Resume: Table._resume, Redeal: Table._redeal, VoidShoe: Table._void_shoe, ClearAlarm: Table._clear_alarm,
}
