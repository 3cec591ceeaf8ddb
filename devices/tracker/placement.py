"""The tracker's placement of cards: where each card that left the shoe goes.

A read from a usable reader is placed: dealing blocked (the shoe not in play), foreign, face up
(a misload: re-deal), a burn card, the live round's next card, or exposed or drawn in error.
Every card ends in exactly one pile (``Table.placed`` counts them).
"""
from __future__ import annotations

from core.cards import ALL_CARDS, Card, Orientation
from devices.errors import CardMismatch
from devices.events import Reason, Role, Severity
from devices.game.inputs import CardDealt, Flag
from devices.tracker.shoe import IN_PLAY as SHOE_IN_PLAY
from devices.tracker.state import TableState
from firmware_bridge.messages import CardRead, UnreadableCard

_CARD_DEALT = {card: CardDealt(card) for card in ALL_CARDS}  # one record per card, not one per read
# enum members read from their class cost a lookup each; these are read for every card
_FACE_UP = Orientation.FACE_UP
_WARNING, _DRAWN_IN_ERROR = Severity.WARNING, Reason.CARD_DRAWN_IN_ERROR
_DRAWN_IN_ERROR_TEXT = (" drawn after the dealer's finished hand: the dealer says whether it was exposed (discard) "
                        "or not (next round's burn card)")

FACE_UP_RULE = "seed 000 section 7: cards dealt face up after a misload: re-deal, game void"


class Placement(TableState):
    """The handlers that place a card read (or entered) on a pile or in the live round."""

    def _on_read(self, msg: CardRead) -> None:
        if self.awaiting_entry is not None:
            self.queued_reads.append(msg)
            return
        if not self.reader.accepts_reads:
            self.shoe.card_out(msg.card)
            self.discard.append(msg.card)
            self._emit(Reason.READ_FROM_STALE_DEVICE, f"card #{msg.index} read while the shoe reader is "
                       f"{self.reader.state}: not assigned, to the discard", Severity.ALARM,
                       card=str(msg.card), index=msg.index)
            self._hold(Reason.READ_FROM_STALE_DEVICE, f"card #{msg.index} from a {self.reader.state} shoe reader")
            return
        self._place(msg.card, msg.orientation, msg.index)

    def _place(self, card: Card, orientation: Orientation, index: int) -> None:
        shoe = self.shoe
        foreign = shoe.card_out(card)
        if shoe.state not in SHOE_IN_PLAY:  # shoe.in_play, read for every card
            self.discard.append(card)
            self._emit(Reason.DEALING_BLOCKED, f"card #{index} left the shoe while the shoe is {self.shoe.state}: "
                       "dealing blocked, card to the discard", Severity.ALARM, card=str(card), index=index)
            return
        if foreign:
            self.discard.append(card)
            self._emit(Reason.FOREIGN_CARD, f"foreign card: {card} seen {self.shoe.out[card]} times, the shoe "
                       f"holds {self.shoe.expected.get(card, 0)}; round held", Severity.ALARM,
                       card=str(card), index=index, seen=self.shoe.out[card])
            self._hold(Reason.FOREIGN_CARD, f"foreign {card} at card #{index}")
            return
        if orientation == _FACE_UP:
            self.discard.append(card)
            self._emit(Reason.FACE_UP_CARD, f"card #{index} ({card}) came out face up: misload; card to no hand",
                       Severity.ALARM, card=str(card), index=index)
            if self.round_live:
                self._emit(Reason.REDEAL, f"re-deal declared for round {self.round.round_id} ({FACE_UP_RULE})",  # type: ignore[union-attr]
                           Severity.WARNING)
                self._void_round(Reason.FACE_UP_CARD, "table", Role.DEALER, by_rule=FACE_UP_RULE)
            return
        if shoe.burn_remaining > 0 and not self.round_live:  # shoe.burning: the shoe is in play here
            self.burn_pile.append(card)
            self.shoe.take_burn(card)
            return
        if self.pending or not self._give(card):  # no hand was waiting for it
            self.pending.append(card)
            self._unexpected(card, index)
        if self.round is not None:  # no round: no step to finish (a card with no round open)
            self._round_step_done()

    def _unexpected(self, card: Card, index: int | None) -> None:
        """``index`` None: a card exposed in error that the round ended without needing."""
        r = self.round
        if r is None or not r.live:  # every card read with no round open (the daemon benchmark's cards)
            self.pending.remove(card)
            self.drawn_in_error.append(card)
            name = str(card)
            what = f"card #{index} ({name})" if index is not None else f"{name}, exposed in error and not needed,"
            self._emit(_DRAWN_IN_ERROR, what + _DRAWN_IN_ERROR_TEXT, _WARNING, card=name, index=index)
        else:
            why = "the round is held" if r.held else f"no card expected while {r.state}"
            self._emit(Reason.CARD_EXPOSED_IN_ERROR, f"card #{index} ({card}) exposed in error ({why}): "
                       "it is used as the next card", _WARNING, card=str(card), index=index)

    def _give(self, card: Card) -> bool:
        """Hand ``card`` to the live round if one of its hands expects a card now."""
        r = self.round
        if r is None or r.held is not None or not r.live:
            return False
        try:
            target = r.card_dealt(card)  # called directly (the hot path); logged as its record below
        except CardMismatch as exc:
            self._emit(Reason.CARDS_TO_BOX_WITHOUT_WAGER, str(exc), Severity.ALARM, card=str(card))
            self._hold(Reason.CARDS_TO_BOX_WITHOUT_WAGER, str(exc))
            return False
        if target is None:
            return False
        self.round_log.append(_CARD_DEALT[card])
        return True

    def _feed(self) -> None:
        """Give waiting cards to the hands that expect them, in the order they left the shoe."""
        while self.pending and self._give(self.pending[0]):
            self.pending.pop(0)
        self._round_step_done()

    def _round_step_done(self) -> None:
        r = self.round
        if r is None or r.state != "complete" or r.round_id == self.closed_round_id:
            return
        self.closed_round_id = r.round_id
        self.played.extend(c for c, _ in r.assignments)
        self.holds.clear()
        leftover, self.pending = self.pending, []
        for card in leftover:  # exposed in error but no hand needed it: after the dealer's finished hand
            self.pending.append(card)
            self._unexpected(card, None)
        self._between_rounds()

    def _between_rounds(self) -> None:
        if self.dealer_change_pending is not None:
            who, self.dealer_change_pending = self.dealer_change_pending, None
            self._dealer_takes_over(who)
        if self.last_round_id is not None and self.round is not None and self.round.round_id >= self.last_round_id:
            self.shoe.finish_shoe(f"cut card: round {self.round.round_id} was the last")

    def _on_unreadable(self, msg: UnreadableCard) -> None:
        if self.awaiting_entry is not None:
            self.queued_reads.append(msg)  # type: ignore[arg-type]
            return
        self.awaiting_entry = msg.index
        self.entry_to_discard = not self.reader.accepts_reads
        if self.entry_to_discard:  # refused like a read from a stale reader; entered only to keep the count
            self._emit(Reason.READ_FROM_STALE_DEVICE, f"unreadable card #{msg.index} from a {self.reader.state} "
                       "shoe reader: not assigned; the dealer enters it for the count, it goes to the discard",
                       Severity.ALARM, index=msg.index)
            self._hold(Reason.READ_FROM_STALE_DEVICE, f"card #{msg.index} from a {self.reader.state} shoe reader")
            return
        text = f"card #{msg.index} could not be read: the dealer enters it"
        if self.round_live:
            self._to_round(Flag(Reason.UNREADABLE_CARD, text))
        else:
            self._emit(Reason.UNREADABLE_CARD, text, Severity.WARNING, index=msg.index)
