"""Holds, overrides and the seed casinos' table procedures on a round (a mixin of Round).

Every override needs the supervisor role and is journaled with who asked (devices.procedures).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from devices.events import Reason, Role, Severity
from devices.procedures import require_supervisor
from devices.round_machine import LIVE_STATES, MACHINE
from devices.round_rules import rebuild_initial_layout
from core.cards import Card

if TYPE_CHECKING:
    from devices.round import Round, Target


class RoundProcedures:
    """hold/resume/void, flags, and the two reconstructions the seeds prescribe."""

    def hold(self: "Round", reason: Reason, detail: str) -> None:
        self.held, self._hold_cause = f"{reason}: {detail}", reason
        self._emit(Reason.ROUND_HELD, f"held: {detail}", Severity.ALARM, cause=str(reason), detail=detail)

    def _supervisor(self: "Round", what: str, who: str, role: Role) -> None:
        require_supervisor(self._sink, "round", f"round {self.round_id}: {what}", who, role)

    def resume(self: "Round", who: str, role: Role) -> None:
        self._supervisor("resume", who, role)
        was, self.held = self.held, None
        if was is not None and self._hold_cause is Reason.CARDS_TO_BOX_WITHOUT_WAGER and self._redeal_queue:
            # another card came back than the re-deal expected: continuing means taking the cards as they
            # come (else the same card holds the round again at once, alarm after alarm)
            expected, self._redeal_queue = self._redeal_queue, []
            self._emit(Reason.CARDS_TO_BOX_WITHOUT_WAGER, f"re-deal order given up by {who}: the cards are dealt "
                       "as they come out of the shoe", Severity.WARNING, who, expected=[str(c) for c in expected])
        self._hold_cause = None
        self._emit(Reason.ROUND_RESUMED, f"resumed by {who} (was held: {was})", who=who)

    def void(self: "Round", reason: Reason, who: str, role: Role, by_rule: str | None = None) -> None:
        """Round void: nothing is settled, every bet goes back. The table places the cards.

        ``by_rule`` names the house rule that voids the round by itself (a face-up misload,
        seed 000 section 7); without it the void is an override and needs a supervisor.
        """
        if self.state not in LIVE_STATES:
            raise self._refuse("round_state", f"void not possible once the round is {self.state}", who)
        if by_rule is None:
            self._supervisor("void", who, role)
        self.held = None
        self._emit(Reason.ROUND_VOID, f"void ({reason}); all bets returned", Severity.ALARM, who,
                   cause=str(reason), by_rule=by_rule, returned=self._stakes_in_play(),
                   voided_paid_at_once=[line.describe() for line in self.paid_at_once])
        self._go("voided")

    def _stakes_in_play(self: "Round") -> dict[str, int]:
        """Every stake a void gives back: "box:player" (with what splits and doubles added),
        "box:player:pairs" and "box:player:insurance"."""
        out: dict[str, int] = {}
        for b, stakes in self.wagers.items():
            hands = self.box_hands.get(b)
            for p, s in stakes.items():
                out[f"{b}:{p}"] = sum(h.stake_of(p) for h in hands) if hands else s
        out |= {f"{b}:{p}:pairs": a for (b, p), a in self.pairs_bets.items()}
        out |= {f"{b}:{p}:insurance": a for (b, p), a in self.insurance.items()}
        return out

    def flag(self: "Round", reason: Reason, detail: str, who: str | None = None) -> None:
        self.flags.append({"reason": str(reason), "detail": detail, "who": who})
        self._emit(reason, f"flagged: {detail}", Severity.WARNING, who, flagged=True)

    def reconstruct_initial_deal(self: "Round", who: str, role: Role,
                                 assignments: list[tuple[Card, Target]] | None = None) -> None:
        """A placement error in the initial deal: the layout is put back as the deal order says.

        ``assignments`` (optional) is the layout the supervisor confirms; it must hold exactly the
        cards dealt so far, each on a box with a wager or the dealer, at most two per box.
        """
        if self.state != "initial_deal":
            raise self._refuse("reconstruct_initial_deal", "reconstruction is only for the initial deal "
                               f"(the round is {self.state})", who)
        self._supervisor("reconstruct initial deal", who, role)
        if assignments is not None:
            problem = rebuild_initial_layout(self, assignments)
            if problem:
                raise self._refuse(*problem, who=who)
        self._emit(Reason.PLACEMENT_ERROR, "initial deal reconstructed", Severity.WARNING, who,
                   layout=[(str(c), str(t)) for c, t in self.assignments])

    def reconstruct_and_redeal(self: "Round", who: str, role: Role, also: tuple[Card, ...] = ()) -> list[Card]:
        """Cards dealt to a box without a wager: all cards in play are taken back and re-dealt.

        ``also``: cards in play that no hand took yet (exposed in error), in the order they left
        the shoe after the dealt ones; they go back too and are dealt again after them.
        """
        if "redeal" not in MACHINE.get_triggers(self.state):  # the machine says where a re-deal may start
            raise self._refuse("redeal", f"re-deal not possible while {self.state}", who)
        self._supervisor("reconstruct and re-deal", who, role)
        back = [c for c, _ in self.assignments] + self._redeal_queue + list(also)
        withdrawn = [line.describe() for line in self.paid_at_once]  # won again when the same cards come again
        self.assignments, self.held = [], None
        self._start_initial_deal()
        self._redeal_queue = back
        self._emit(Reason.CARDS_TO_BOX_WITHOUT_WAGER, f"{len(back)} cards in play reconstructed, "
                   "to be re-dealt in the same order", Severity.WARNING, who, cards=[str(c) for c in back],
                   withdrawn_paid_at_once=withdrawn)
        self._go("redeal")
        return back
