"""The tracker's overrides and procedures: the supervisor's decisions and the dealer's procedures.

The dealer enters an unreadable card, decides a card drawn in error, changes dealer, starts or
declares a shuffle and counts the remainder back; a supervisor reconstructs, resumes, re-deals,
voids a shoe and clears alarms, each journaled with who (:mod:`devices.overrides`).
"""
from __future__ import annotations

from core.cards import Orientation
from devices.errors import TableError
from devices.events import Reason, Role, Severity
from devices.game.inputs import ReconstructAndRedeal, ReconstructInitialDeal, Resume, Void
from devices.overrides import refuse_override, refuse_unless_supervisor, require_supervisor
from devices.tracker.inputs import (
    CardsToBoxWithoutWager, ClearAlarm, DealerChange, DrawnInErrorDecision, EnterCard, HandShuffled, PlacementError,
    Redeal, ShoeRemainder, ShuffleStarted, VoidShoe, command_name,
)
from devices.tracker.state import TableState
from firmware_bridge.messages import UnreadableCard

_HAND_SHUFFLED, _VOID_SHOE, _REDEAL = command_name(HandShuffled), command_name(VoidShoe), command_name(Redeal)
_RESUME, _PLACEMENT_ERROR, _SHOE_REMAINDER = command_name(Resume), command_name(PlacementError), command_name(ShoeRemainder)
_CARDS_TO_BOX_WITHOUT_WAGER = command_name(CardsToBoxWithoutWager)
#: what to do with the next shoe that took a voided shoe's place, by its state: it is a shoe of its own
_NEXT_SHOE_WAY = {
    "shuffling": "the shuffler is still shuffling it: load it once it is verified",
    "verifying": "the shuffler is still counting it: load it once it is verified",
    "verified": "it is verified, not loaded: load it and deal the burn card",
    "refused": "the shuffler's count refused it: shuffle a new one",
}
_LOADED_ALREADY = "it is loaded already: deal from it"


class Procedures(TableState):
    """The handlers of the dealer's procedures and the supervisor's overrides."""

    def _enter_card(self, inp: EnterCard) -> None:
        """The dealer names the card the shoe could not read; the round stays flagged."""
        card, who = inp.card, inp.who
        if self.awaiting_entry is None:
            raise TableError("no unreadable card waits to be entered: the dealer enters a card only when the shoe "
                             "could not read it")
        index, self.awaiting_entry = self.awaiting_entry, None
        to_discard, self.entry_to_discard = self.entry_to_discard, False
        self._emit(Reason.CARD_ENTERED_BY_DEALER, f"card #{index} entered by the dealer as {card}"
                   + (" (from a shoe reader not usable: to the discard)" if to_discard else ""), Severity.WARNING,
                   who, card=str(card), index=index, to_discard=to_discard)
        if to_discard:
            self.shoe.card_out(card)
            self.discard.append(card)
        else:
            self._place(card, Orientation.FACE_DOWN, index)
        queued, self.queued_reads = self.queued_reads, []
        for msg in queued:
            self._on_unreadable(msg) if isinstance(msg, UnreadableCard) else self._on_read(msg)

    def _drawn_in_error_decision(self, inp: DrawnInErrorDecision) -> None:
        """Seed 002: discarded if the card was exposed, otherwise the next round's burn card."""
        exposed, who = inp.exposed, inp.who
        if not self.drawn_in_error:
            raise TableError("no card drawn in error waits for a decision")
        card = self.drawn_in_error.pop(0)
        (self.discard if exposed else self.burn_pile).append(card)
        where = "discarded (exposed)" if exposed else "kept face down as the next round's burn card"
        self._emit(Reason.CARD_DRAWN_IN_ERROR, f"card drawn in error ({card}) {where}", Severity.INFO, who,
                   card=str(card), exposed=exposed)

    def _dealer_change(self, inp: DealerChange) -> None:
        """A new dealer mid-shoe burns ``shoe.burn_on_dealer_change`` cards (seed 003: one) after the live round."""
        who = inp.who
        if not self.rules.shoe.burn_on_dealer_change:
            self._emit(Reason.DEALER_CHANGE_BURN, f"dealer change to {who}: no burn (the house rules burn none "
                       "on a dealer change)", who=who)
        elif self.round_live:
            self.dealer_change_pending = who
            self._emit(Reason.DEALER_CHANGE_BURN, f"dealer change to {who}: one card burns after this round",
                       who=who)
        else:
            self._dealer_takes_over(who)

    def _dealer_takes_over(self, who: str) -> None:
        """The new dealer burns a card if the shoe is in play (not in its last round); otherwise say so."""
        if not self.shoe.dealer_changed(who):
            self._emit(Reason.DEALER_CHANGE_BURN, f"dealer change to {who}: no burn (shoe {self.shoe.state})", who=who)

    def _placement_error(self, inp: PlacementError) -> None:
        """A card placed on the wrong box in the initial deal: the layout is reconstructed."""
        # the role first, refused in the command's name (the round's own check names its round)
        refuse_unless_supervisor(self._journal, "table", _PLACEMENT_ERROR, inp.who, inp.role)
        layout = None if inp.assignments is None else tuple(inp.assignments)
        self._to_round(ReconstructInitialDeal(inp.who, inp.role, layout))

    def _cards_to_box_without_wager(self, inp: CardsToBoxWithoutWager) -> None:
        """All cards in play go back on top of the shoe and are dealt again, in the same order."""
        refuse_unless_supervisor(self._journal, "table", _CARDS_TO_BOX_WITHOUT_WAGER, inp.who, inp.role)
        dealt = [c for c, _ in self.round.assignments] if self.round_live else []  # type: ignore[union-attr]
        exposed = tuple(self.pending)  # in play too: back on the shoe after the dealt cards
        self._to_round(ReconstructAndRedeal(inp.who, inp.role, also=exposed))
        self.pending = []
        for card in dealt + list(exposed):
            self.shoe.card_back(card)  # they will be read again
        if self.cards_put_back is not None:
            self.cards_put_back += len(dealt) + len(exposed)  # the shoe reader holds them again
        self._holds_decided(inp.who, "reconstructed and re-dealt")

    def _shuffle_started(self, inp: ShuffleStarted) -> None:
        """The operator who loaded the shuffler and started the shuffle: named on the verification record."""
        refused = self.machine_shuffle_refused() or self.next_shoe_waits()
        if refused is not None:
            raise TableError(refused)
        self.shuffle_operator = inp.who

    def machine_shuffle_refused(self) -> str | None:
        """Why a machine shuffle may not start here (the daemon's ``start_shuffle`` asks before it
        tells the shuffler); None at a table whose rules have the shuffler shuffle."""
        if self.uses_shuffler:
            return None
        return (f'this table\'s rules ({self.rules.name}) say [shoe] shuffle = "hand": the dealer shuffles the cards '
                f"by hand, not a machine: shuffle them by hand and declare the shoe with {_HAND_SHUFFLED}")

    def _hand_shuffled(self, inp: HandShuffled) -> None:
        """A hand-shuffled table only: where a shuffler counts each card, no declaration replaces that count."""
        if self.uses_shuffler:
            raise TableError('this table\'s rules say [shoe] shuffle = "automatic": the shuffler shuffles, counts '
                             "and verifies every shoe, no hand shuffle replaces it")
        waits = self.next_shoe_waits()
        if waits is not None:
            raise TableError(waits)
        if not self.shoe.may("hand_shuffle"):
            raise TableError(f"the shoe is {self.shoe.state}: a new shoe starts once this one is complete and "
                             f"reconciled ({_SHOE_REMAINDER}), or void ({_VOID_SHOE})")
        self.shoe.hand_shuffled(inp.who)

    def _shoe_remainder(self, inp: ShoeRemainder) -> None:
        """Reconcile: the undealt remainder, counted per card when it went back to the shuffler."""
        self.shoe.reconcile(inp.returned, inp.who)

    def _resume(self, inp: Resume) -> None:
        """Continue a held round: only when every device is back, and only by a supervisor."""
        who, role = inp.who, inp.role
        if not self.round_live or self.round.held is None:  # type: ignore[union-attr]
            raise TableError("no held round to resume: only a held round waits for a supervisor")
        refuse_unless_supervisor(self._journal, "table", _RESUME, who, role)
        problems = self.device_problems()
        if problems:
            refuse_override(self._journal, "table", _RESUME, who, f"{'; '.join(problems)}: continue once every "
                            f"device is back, or void the round with {_REDEAL}", role)
        self._to_round(inp)
        self._holds_decided(who, "resumed")
        self._feed()

    def _redeal(self, inp: Redeal) -> None:
        """Declare a re-deal: the live round is void, its cards go to the discard."""
        who, role = inp.who, inp.role
        if not self.round_live:
            raise TableError("no round is being played: there is nothing to re-deal")
        refuse_unless_supervisor(self._journal, "table", _REDEAL, who, role)
        self._void_round(Reason.REDEAL, who, role)
        self._emit(Reason.REDEAL, f"re-deal declared by {who}", Severity.WARNING, who)

    def _void_round(self, cause: Reason, who: str, role: Role, by_rule: str | None = None) -> None:
        r = self.round
        self._to_round(Void(cause, who, role, by_rule))  # logged: a restore must not bring the round back
        self.discard.extend(c for c, _ in r.assignments)  # type: ignore[union-attr]
        self.discard.extend(self.pending)
        self.pending.clear()
        if by_rule is None:  # a supervisor's void (a re-deal, a void shoe) decides the round's holds
            self._holds_decided(who, "voided")
        self.holds.clear()
        self._between_rounds()

    def _void_shoe(self, inp: VoidShoe) -> None:
        who, role = inp.who, inp.role
        # checked first: no override is journaled for a void that cannot happen, or that may mean another shoe
        if not self.shoe.may("void_shoe"):
            raise TableError(f"no shoe to void: the shoe is {self.shoe.state}")  # idle or void already
        self._check_which_shoe(inp.next_shoe)
        require_supervisor(self._journal, "table", "void shoe", who, role, _VOID_SHOE)
        if self.round_live:
            self._void_round(Reason.SHOE_VOID, who, role)
        for alarm in self.alarms.settle(Reason.SHOE_COUNT_MISMATCH):  # the shoe in doubt is over: its count with it
            self._emit(Reason.ALARM_CLEARED, f"alarm {alarm.id} ({alarm.reason}) cleared by {who}: the shoe is voided",
                       who=who, alarm=alarm.id, alarm_reason=alarm.reason)
        self.shoe.void(who)
        if self.shoe.after_void is not None:  # the void let the next shoe in: said, with what a second void means
            self._emit(Reason.NEXT_SHOE_TAKES_OVER, f"the next shoe, shuffled while the voided one was in play, takes "
                       f"its place {self._next_shoe_now()}", who=who, state=self.shoe.state,
                       cards_out=self.shoe.cards_out)

    def _check_which_shoe(self, next_shoe: bool) -> None:
        """A void of the next shoe that took the place of the shoe voided last must say it means that
        one (``next_shoe``), and only such a void may: a plain void again may be the last one repeated."""
        took_place = self.shoe.after_void is not None
        if took_place and not next_shoe:
            raise TableError(f"the shoe voided last is void already; the shoe now is the next one, shuffled while "
                             f"that one was in play {self._next_shoe_now()}")
        if not took_place and next_shoe:
            raise TableError(f"no next shoe took a voided shoe's place: the shoe is {self.shoe.state}, "
                             f"{self.shoe.cards_out} card(s) out; void it with {_VOID_SHOE} alone")

    def _next_shoe_now(self) -> str:
        """The shoe that took a voided shoe's place: its state and cards, what to do with it, and how to
        void it ("(verified, 312 cards counted, 0 out): it is verified, ...; to void it too, say so: ...")."""
        shoe = self.shoe
        if shoe.state in ("verifying", "verified", "refused") and shoe.counted is not None:
            now = f"{shoe.state}, {shoe.stack_cards} cards counted, {shoe.cards_out} out"
        else:
            now = f"{shoe.state}, {shoe.cards_out} card(s) out"
        return (f"({now}): {_NEXT_SHOE_WAY.get(shoe.state, _LOADED_ALREADY)}; to void it too, say so: "
                f"{_VOID_SHOE} next_shoe=true")

    def _holds_decided(self, who: str, how: str) -> None:
        """A supervisor decided the live round (resumed, voided, re-dealt it): its holds are over,
        and so are the alarms they raised (ROUND_HELD), closed in that supervisor's name."""
        self.holds.clear()
        assert self.round is not None  # every caller decided a round
        for alarm in self.alarms.settle(Reason.ROUND_HELD, self.round.round_id):
            self._emit(Reason.ALARM_CLEARED, f"alarm {alarm.id} ({alarm.reason}) cleared by {who}: the round "
                       f"was {how}", who=who, alarm=alarm.id, alarm_reason=alarm.reason, round=alarm.round)

    def _clear_alarm(self, inp: ClearAlarm) -> None:
        alarm_id, who, role = inp.alarm_id, inp.who, inp.role
        alarm = self.alarms.clear(self._journal, alarm_id, who, role)
        self._emit(Reason.ALARM_CLEARED, f"alarm {alarm_id} ({alarm.reason}) cleared by {who}", who=who,
                   alarm=alarm_id, alarm_reason=alarm.reason)
