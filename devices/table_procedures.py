"""The table's procedures: the seed casinos' error procedures (dealer) and the overrides (supervisor).

A mixin of :class:`devices.table.Table`, kept apart so the card path stays short. Dealer
inputs take ``who``; overrides take ``who`` and ``role`` and need the supervisor role
(:func:`devices.procedures.require_supervisor`), every attempt journaled with who made it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from devices.events import Reason, Role, Severity
from devices.procedures import TableError, refuse_override, refuse_unless_supervisor, require_supervisor
from devices.round import Target
from core.cards import Card, Orientation
from firmware_bridge.messages import UnreadableCard

if TYPE_CHECKING:
    from devices.table import Table as _Base
else:
    _Base = object


class TableProcedures(_Base):
    # ---- seed procedures (dealer) -------------------------------------------------------------

    def enter_card(self, card: Card, who: str) -> None:
        """The dealer names the card the shoe could not read; the round stays flagged."""
        if self.awaiting_entry is None:
            raise TableError("no unreadable card waits to be entered")
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

    def resolve_drawn_in_error(self, exposed: bool, who: str) -> None:
        """Seed 002: discarded if the card was exposed, otherwise the next round's burn card."""
        if not self.drawn_in_error:
            raise TableError("no card drawn in error waits for a decision")
        card = self.drawn_in_error.pop(0)
        (self.discard if exposed else self.burn_pile).append(card)
        where = "discarded (exposed)" if exposed else "kept face down as the next round's burn card"
        self._emit(Reason.CARD_DRAWN_IN_ERROR, f"card drawn in error ({card}) {where}", Severity.INFO, who,
                   card=str(card), exposed=exposed)

    def dealer_change(self, who: str) -> None:
        """A new dealer mid-shoe burns one card (after the live round, if one is being dealt)."""
        if self.round_live:
            self.dealer_change_pending = who
            self._emit(Reason.DEALER_CHANGE_BURN, f"dealer change to {who}: one card burns after this round",
                       who=who)
        else:
            self._dealer_takes_over(who)

    def _dealer_takes_over(self, who: str) -> None:
        """The new dealer burns a card if the shoe is in play (not in its last round); otherwise say so."""
        if not self.shoe.dealer_changed(who):
            self._emit(Reason.DEALER_CHANGE_BURN, f"dealer change to {who}: no burn (shoe {self.shoe.state})", who=who)

    def placement_error(self, who: str, role: Role, assignments: list[tuple[Card, Target]] | None = None) -> None:
        """A card placed on the wrong box in the initial deal: the layout is reconstructed."""
        self._call("reconstruct_initial_deal", who, role, assignments=assignments)

    def cards_to_box_without_wager(self, who: str, role: Role) -> None:
        """All cards in play go back on top of the shoe and are dealt again, in the same order."""
        dealt = [c for c, _ in self.round.assignments] if self.round_live else []  # type: ignore[union-attr]
        exposed = tuple(self.pending)  # in play too: back on the shoe after the dealt cards
        self._call("reconstruct_and_redeal", who, role, also=exposed)
        self.pending = []
        for card in dealt + list(exposed):
            self.shoe.card_back(card)  # they will be read again
        self.holds.clear()

    def shuffle_started(self, who: str) -> None:
        """The operator who loaded the shuffler and started the shuffle: named on the verification record."""
        self.shuffle_operator = who

    def hand_shuffled(self, who: str) -> None:
        """A hand-shuffled table only: where a shuffler counts each card, no declaration replaces that count."""
        if self.uses_shuffler:
            raise TableError(f'hand shuffle refused: this table\'s rules say [shoe] shuffle = "automatic" '
                             "(the shuffler counts and verifies every shoe)")
        if not self.shoe.may("hand_shuffle"):
            raise TableError(f"hand shuffle refused: the shoe is {self.shoe.state} (a new shoe starts once "
                             "this one is complete and reconciled, or void)")
        self.shoe.hand_shuffled(who)

    def shoe_remainder(self, returned: dict[Card, int], who: str) -> bool:
        """Reconcile: the undealt remainder, counted per card when it went back to the shuffler."""
        return self.shoe.reconcile(returned, who)

    # ---- overrides (supervisor) ---------------------------------------------------------------

    def resume(self, who: str, role: Role) -> None:
        """Continue a held round: only when every device is back, and only by a supervisor."""
        if not self.round_live or self.round.held is None:  # type: ignore[union-attr]
            raise TableError("no held round to resume")
        refuse_unless_supervisor(self._journal, "table", "resume", who, role)
        problems = self.device_problems()
        if problems:
            refuse_override(self._journal, "table", "resume", who, "; ".join(problems), role)
        self._call("resume", who, role)
        self.holds.clear()
        self._feed()

    def redeal(self, who: str, role: Role) -> None:
        """Declare a re-deal: the live round is void, its cards go to the discard."""
        if not self.round_live:
            raise TableError("no live round to re-deal")
        self._void_round(Reason.REDEAL, who, role)
        self._emit(Reason.REDEAL, f"re-deal declared by {who}", Severity.WARNING, who)

    def _void_round(self, cause: Reason, who: str, role: Role, by_rule: str | None = None) -> None:
        r = self.round
        self._call("void", cause, who, role, by_rule=by_rule)  # logged: a restore must not bring the round back
        self.discard.extend(c for c, _ in r.assignments)  # type: ignore[union-attr]
        self.discard.extend(self.pending)
        self.pending.clear()
        self.holds.clear()
        self._between_rounds()

    def void_shoe(self, who: str, role: Role) -> None:
        if not self.shoe.may("void_shoe"):  # checked first: no override is journaled for a void that cannot happen
            raise TableError(f"no shoe to void: the shoe is {self.shoe.state}")
        require_supervisor(self._journal, "table", "void shoe", who, role)
        if self.round_live:
            self._void_round(Reason.SHOE_VOID, who, role)
        self.shoe.void(who)

    def clear_alarm(self, alarm_id: int, who: str, role: Role) -> None:
        alarm = self.alarms.clear(self._journal, alarm_id, who, role)
        self._emit(Reason.ALARM_CLEARED, f"alarm {alarm_id} ({alarm.reason}) cleared by {who}", who=who,
                   alarm=alarm_id, alarm_reason=alarm.reason)
