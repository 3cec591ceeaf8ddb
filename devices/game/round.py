"""One round of blackjack: bets, the initial deal, insurance, the players' hands, the dealer, settlement.

The table's deal tracker drives a :class:`Round`; it is a ``transitions`` state machine
(``ROUND_STATES``, ``ROUND_TRANSITIONS``) and emits an :class:`Event` through the injected sink
for every change. Its API, refusals, overrides and procedures (the re-deal among them):
docs/rules.md, "The round" and "Procedures"."""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable

from devices.events import Event, EventSink, Reason, Role, Severity
from devices.game.hand import Hand, hand_total
from devices.game.inputs import (
    Act, CardDealt, CloseInsurance, CoPlayerChoice, EvenMoney, Flag, Hold, Insure, NoMoreBets, PlaceBet,
    PlacePairsBet, ReconstructAndRedeal, ReconstructInitialDeal, ReduceBet, Resume, RoundInput, Void,
)
from devices.overrides import require_supervisor
from devices.errors import CardMismatch, RoundError, RoundHeld, RuleViolation
from devices.game.round_machine import INITIAL, ROUND_STATES, ROUND_TRANSITIONS, is_live, next_state, triggers_from
from devices.game.round_types import DEALER, Action, Target
from devices.game.round_checks import (
    Problem, check_action, check_bet, check_insurance, check_pairs_bet, check_reduce, reductions_at_maximum,
)
from devices.game.rules import HouseRules
from devices.game.settlement import (Line, Settlement, blackjack_lines, even_money_line, instant_lines, settle,
                                     units)
from core.cards import Card, Rank

__all__ = ["Action", "DEALER", "ROUND_STATES", "ROUND_TRANSITIONS", "Round", "Target"]


_TARGETS: dict[tuple[int, int], Target] = {}

# A refusal says, in the table's words, when an input is taken and where the round is now.
#: when an input is taken, by the one state it is taken in
_WHILE = {"betting": "while bets are open", "insurance": "while insurance is offered",
          "players": "while the players act"}
#: where the round is, by its state
_NOW = {"betting": "bets are still open", "initial_deal": "the initial deal is under way",
        "insurance": "insurance is offered now", "players": "the players act now", "dealer": "the dealer plays now",
        "complete": "the round is over (complete)", "void": "the round is void"}


def _cut_words(stake: int, cut: int) -> str:
    """A co-player's reduction at the box maximum, as both numbers a dealer needs: the cut, and the
    new stake reduce_bet takes (its amount is the new stake, not the cut): ``by 600.00, to 1400.00``."""
    left = stake - cut
    return f"by {units(cut)}, to {units(left)}" + (", withdrawing his bet" if left == 0 else "")


def _target(box: int, hand: int) -> Target:
    """Targets are immutable values; reuse one per place instead of building one per card."""
    t = _TARGETS.get((box, hand))
    if t is None:
        t = _TARGETS[(box, hand)] = Target("box", box, hand)
    return t


class Round:
    """One round at one table. Not thread-safe: drive it from the table's single event loop."""

    def __init__(self, rules: HouseRules, sink: EventSink, round_id: int = 1) -> None:
        self.rules, self._sink, self.round_id = rules, sink, round_id
        self._prefix = f"round {round_id}: "
        self.wagers: dict[int, dict[str, int]] = {}  # box -> player -> stake, in betting order
        self.pairs_bets: dict[tuple[int, str], int] = {}
        self.insurance: dict[tuple[int, str], int] = {}
        self.even_money_taken: set[tuple[int, str]] = set()
        self.box_hands: dict[int, list[Hand]] = {}
        self.dealer_cards: list[Card] = []
        self.initial_cards: dict[int, list[Card]] = {}
        self.assignments: list[tuple[Card, Target]] = []  # every card taken, in order
        self.flags: list[dict[str, Any]] = []
        self.held: str | None = None
        self.hold_cause: Reason | None = None  # the reason code of ``held``
        self.settlement: Settlement | None = None
        self.paid_at_once: list[Line] = []  # lines won for certain, journaled (SETTLED) the moment they are
        sb = rules.side_bets
        self._instant = sb.seven_seven_seven.enabled or sb.five_card_21.enabled or sb.seven_card_hand.enabled
        self._plan: list[Target] = []  # initial-deal order still to come
        self._order: list[Hand] = []  # every player hand in playing order
        self._turn = 0  # index in _order of the first hand not complete (hands never reopen)
        self._redeal_queue: list[Card] = []
        self.draw_seen = False  # a card has reached a player after the initial deal
        self.state: str = INITIAL  # read only: changed by _go, one of ROUND_STATES
        self.live = True  # betting or being dealt: not yet complete or void (read only)

    def _go(self, trigger: str) -> None:
        """Fire a transition of the round machine (round_machine.NEXT), then journal the new state."""
        self.state = state = next_state(self.state, trigger)
        self.live = is_live(state)
        self._emit(Reason.ROUND_STATE, f"now {state}", state=state)

    def apply(self, op: RoundInput) -> Any:
        """Apply one typed input (:mod:`devices.game.inputs`); returns what its method returns."""
        handler = _APPLY.get(type(op))
        if handler is None:
            raise RoundError(f"{type(op).__qualname__} is not a round input (see devices.game.inputs)")
        return handler(self, op)

    # ----- events -----
    def _emit(self, reason: Reason, message: str, severity: Severity = Severity.INFO,
              who: str | None = None, **data: Any) -> None:
        data["round"] = self.round_id  # data is this call's own kwargs dict: no copy needed
        self._sink(Event(reason, "round", self._prefix + message, severity, data, who))

    def _refuse(self, rule: str, message: str, who: str | None = None) -> RuleViolation:
        self._emit(Reason.ACTION_REFUSED, message, Severity.WARNING, who, rule=rule)
        return RuleViolation(rule, message)

    def _require(self, states: tuple[str, ...], what: str, who: str | None = None) -> None:
        if self.held is not None:
            self._emit(Reason.ACTION_REFUSED, f"{what} refused: round held ({self.held})",
                       Severity.WARNING, who, rule="round_held")
            raise RoundHeld(f"round {self.round_id} is held ({self.held}): nothing is taken until a supervisor "
                            "continues it or declares a re-deal")
        if self.state not in states:
            over = "" if is_live(self.state) or states != ("betting",) else ": bets go on the next round, once it is open"
            raise self._refuse("round_state", f"{what} is taken only {_WHILE[states[0]]}, and {_NOW[self.state]}"
                               f"{over}", who)

    # ----- betting -----
    def place_bet(self, box: int, player: str, amount: int) -> None:
        self._require(("betting",), "a bet", player)
        problem = check_bet(self.rules, self.wagers.get(box, {}), box, player, amount)
        if problem:
            raise self._refuse(*problem, who=player)
        stakes = self.wagers.setdefault(box, {})
        stakes[player] = stakes.get(player, 0) + amount
        self._emit(Reason.ACTION, f"{player} bets {units(amount)} on box {box}", who=player,
                   action="bet", box=box, player=player, amount=amount, owner=next(iter(stakes)) == player)
        self._announce_over_maximum(box)

    def reduce_bet(self, box: int, player: str, amount: int) -> None:
        """A player lowers his own bet before no more bets; 0 withdraws it (and his side wager there)."""
        self._require(("betting",), "reducing a bet", player)
        problem = check_reduce(self.rules, self.wagers.get(box, {}), box, player, amount)
        if problem:
            raise self._refuse(*problem, who=player)
        stakes = self.wagers[box]
        if amount:
            stakes[player] = amount
        else:
            del stakes[player]  # the next player in betting order becomes the owner
            self.pairs_bets.pop((box, player), None)
            if not stakes:
                del self.wagers[box]
        self._emit(Reason.ACTION, f"{player} reduces his bet on box {box} to {units(amount)}", who=player,
                   action="reduce_bet", box=box, player=player, amount=amount)
        self._announce_over_maximum(box)

    def reductions_at_maximum(self, box: int) -> dict[str, int]:
        """Who must reduce by how much at ``box`` (empty when the box is within its maximum)."""
        return reductions_at_maximum(self.rules, self.wagers.get(box, {}))

    def _announce_over_maximum(self, box: int) -> None:
        stakes = self.wagers.get(box, {})
        over = sum(stakes.values()) - self.rules.table.max_per_box
        if over > 0:
            cuts = self.reductions_at_maximum(box)
            self._emit(Reason.BOX_OVER_MAXIMUM, f"box {box} is {units(over)} over the maximum: the owner has priority; "
                       + ", ".join(f"{p} reduces {_cut_words(stakes[p], c)}" for p, c in cuts.items()),
                       Severity.WARNING, box=box, over=over, reduce=cuts)

    def place_pairs_bet(self, box: int, player: str, amount: int) -> None:
        self._require(("betting",), "a Blackjack Pairs bet", player)
        already = self.pairs_bets.get((box, player), 0)
        problem = check_pairs_bet(self.rules, self.wagers.get(box, {}), box, player, amount, already)
        if problem:
            raise self._refuse(*problem, who=player)
        self.pairs_bets[(box, player)] = already + amount
        self._emit(Reason.ACTION, f"{player} bets {units(amount)} on Blackjack Pairs at box {box}", who=player,
                   action="pairs_bet", box=box, player=player, amount=amount)

    def no_more_bets(self, who: str | None = None) -> None:
        self._require(("betting",), "closing the bets", who)
        if not self.wagers:
            raise self._refuse("no_wager", "no box has a wager yet: the bets come first", who)
        for box, stakes in sorted(self.wagers.items()):
            over = sum(stakes.values()) - self.rules.table.max_per_box
            if over > 0:
                cuts = ", ".join(f"{p} {_cut_words(stakes[p], c)}" for p, c in self.reductions_at_maximum(box).items())
                raise self._refuse("box_maximum_reduce", f"box {box} is {units(over)} over the maximum: the "
                                   f"co-players reduce their bets first with reduce_bet ({cuts})", who)
        self._start_initial_deal()
        self._go("bets_closed")

    def _start_initial_deal(self) -> None:
        boxes = sorted(self.wagers)
        self.box_hands = {b: [Hand(b, 0, dict(self.wagers[b]))] for b in boxes}
        self._order, self._turn = [h for b in boxes for h in self.box_hands[b]], 0
        self.dealer_cards, self.initial_cards = [], {b: [] for b in boxes}
        self.insurance, self.even_money_taken, self.draw_seen = {}, set(), False
        self.paid_at_once = []
        self._plan = self._full_plan()

    def _full_plan(self) -> list[Target]:
        """Initial deal: one card to each box with a wager left to right, one to the dealer, a second to each box."""
        first = [_target(b, 0) for b in sorted(self.wagers)]
        return first + [DEALER] + list(first)

    # ----- cards -----
    @property
    def hands(self) -> list[Hand]:
        """Every player hand in playing order: boxes left to right, split hands in order (read only)."""
        return self._order

    def _current(self) -> Hand | None:
        order = self._order
        while self._turn < len(order) and order[self._turn].complete:
            self._turn += 1
        return order[self._turn] if self._turn < len(order) else None

    @property
    def current_hand(self) -> Target | None:
        """The hand whose turn it is (awaiting a card or a decision), while players act."""
        if self.state != "players":
            return None
        h = self._current()
        return None if h is None else _target(h.box, h.index)

    def expected_next(self) -> Target | None:
        if self.held is not None:
            return None
        state = self.state
        if state == "initial_deal":
            return self._plan[0] if self._plan else None
        if state == "players":
            h = self._current()
            return _target(h.box, h.index) if h is not None and h.needs_card else None
        if state == "dealer":
            return DEALER if self._dealer_draws() else None
        return None

    def card_dealt(self, card: Card) -> Target | None:
        if self.held is not None:
            raise RoundHeld(f"round {self.round_id}: card {card} refused: round held ({self.held})")
        state = self.state
        if state == "initial_deal":  # expected_next() written out for the first cards, most of them
            target = self._plan[0] if self._plan else None
        else:
            target = self.expected_next()
        if target is None:
            return None
        if self._redeal_queue:
            if card != self._redeal_queue[0]:
                raise CardMismatch(f"round {self.round_id}: re-deal expected {self._redeal_queue[0]} "
                                   f"back from the shoe, got {card}")
            self._redeal_queue.pop(0)
        self.assignments.append((card, target))
        initial = state == "initial_deal"
        if initial:
            self._plan.pop(0)
        if target is DEALER:
            self.dealer_cards.append(card)
        else:
            self._give(self.box_hands[target.box][target.hand], card, initial)  # type: ignore[index]
        name, where = str(card), target.text
        self._emit(Reason.CARD_ASSIGNED, f"{name} to {where}", card=name, target=where)
        self._advance()
        return target

    def _give(self, hand: Hand, card: Card, initial: bool) -> None:
        hand.add(card)
        hand.awaiting_card = False
        if self._instant:
            self._pay_at_once(instant_lines(self.rules, hand))
        if initial:
            self.initial_cards[hand.box].append(card)
            return
        self.draw_seen = True
        if hand.took_double and len(hand.cards) >= 3:
            hand.stood = True  # a double takes one card
        elif hand.split_aces and len(hand.cards) >= 2:
            limit = self.rules.play.ace_split_limit
            resplit = card.rank is Rank.ACE and (limit is None or self.ace_splits(hand.box) < limit)
            hand.stood = not resplit  # split aces take one card each, unless they may split again

    def _pay_at_once(self, lines: Iterable[Line]) -> None:
        """Lines won for certain before the round ends (bonuses, even money, a blackjack against 2-9)."""
        for line in lines:
            self.paid_at_once.append(line)
            self._emit(Reason.SETTLED, line.describe() + " (paid at once)", paid_at_once=True, **line.as_data())

    def _advance(self) -> None:
        """Move the machine on once the current phase needs nothing more."""
        state = self.state
        if state == "initial_deal":
            if self._plan:
                return
            up = self.dealer_cards[0]
            for hand in self._order:
                if hand.blackjack:
                    self._pay_at_once(blackjack_lines(hand, up))
            if self.dealer_cards[0].rank is Rank.ACE and self.rules.insurance.offered:
                self._go("ace_up")
            else:
                self._after_insurance()
        elif state == "players" and self._current() is None:
            self._go("dealers_turn")
        elif state == "dealer" and not self._dealer_draws():
            self._settle()

    def _after_insurance(self) -> None:
        if self._current() is None:
            self._go("dealers_turn")
        else:
            self._go("players_turn")

    def _dealer_draws(self) -> bool:
        if len(self.dealer_cards) < 2:
            return True
        total, soft = hand_total(self.dealer_cards)
        return total < 17 or (total == 17 and soft and self.rules.dealer.hits_soft_17)

    def _settle(self) -> None:
        self.settlement = settle(self.rules, self.hands, self.dealer_cards, self.insurance,
                                 self.even_money_taken, self.pairs_bets, self.initial_cards, self.paid_at_once)
        for line in self.settlement.lines[len(self.paid_at_once):]:  # the rest were journaled when won
            self._emit(Reason.SETTLED, line.describe(), **line.as_data())
        self._go("dealer_stands")

    def ace_splits(self, box: int) -> int:
        """How many times aces were split at this box (n split-ace hands came from n - 1 splits)."""
        return max(0, sum(1 for h in self.box_hands[box] if h.split_aces) - 1)

    # ----- insurance -----
    def insure(self, box: int, player: str, amount: int) -> None:
        self._require(("insurance",), "insurance", player)
        problem = check_insurance(self.rules, self.box_hands, box, player, amount, self.insurance)
        if problem is None and (box, player) in self.even_money_taken:
            problem = "insurance_or_even_money", f"{player} took even money at box {box}: no insurance too"
        if problem is None and self.rules.insurance.blackjack_insured_as == "even_money" \
                and self.box_hands[box][0].blackjack:
            problem = "even_money_for_blackjack", f"{player} insures a blackjack at box {box}: it is paid " \
                                                  "even money here (take even money)"
        if problem:
            raise self._refuse(*problem, who=player)
        self.insurance[(box, player)] = amount
        self._emit(Reason.ACTION, f"{player} insures box {box} for {units(amount)}", who=player,
                   action="insurance", box=box, player=player, amount=amount)

    def even_money(self, box: int, player: str) -> None:
        self._require(("insurance",), "even money", player)
        hand = self.box_hands.get(box, [None])[0]
        if hand is None or player not in hand.stakes or not hand.blackjack:
            raise self._refuse("even_money_needs_blackjack",
                               f"no even money for {player} at box {box}: only a player with a blackjack on the "
                               "box may take it", player)
        if (box, player) in self.even_money_taken:
            raise self._refuse("even_money_once", f"{player} already took even money at box {box}", player)
        if (box, player) in self.insurance:
            raise self._refuse("insurance_or_even_money", f"{player} insured box {box}: no even money too", player)
        self.even_money_taken.add((box, player))
        self._pay_at_once([even_money_line(hand, player)])
        self._emit(Reason.ACTION, f"{player} takes even money at box {box}: paid "
                   f"{units(hand.stakes[player])} at once", who=player, action="even_money", box=box,
                   player=player, paid=hand.stakes[player])

    def close_insurance(self, who: str | None = None) -> None:
        self._require(("insurance",), "closing insurance", who)
        self._emit(Reason.ACTION, "insurance closed", who=who, action="close_insurance")
        self._after_insurance()

    # ----- player decisions -----
    def act(self, box: int, action: Action, who: str | None = None, amount: int | None = None,
            player: str | None = None, co_players: Iterable[CoPlayerChoice] = ()) -> None:
        """The box owner's decision for the box's current hand (surrender: any unplayed box).

        ``player`` is who decides (the box owner; may be left out on a box with one player);
        ``co_players`` holds each co-player's answer to a double or a split.
        """
        self._require(("players",), f"{action} at box {box}", who)
        if type(action) is not Action:  # Action(member) is an Enum call: about 1 us a decision
            action = Action(action)
        choices = tuple(co_players)
        hand = self._decision_hand(box, action)
        problem = check_action(self.rules, self, hand, box, action, amount, player, choices)
        if problem:
            raise self._refuse(*problem, who=who)
        assert hand is not None  # check_action refuses a missing hand
        moved = _DECISIONS[action](self, hand, amount, choices)
        self._emit(Reason.ACTION, f"{action} at {hand.label()}", who=who, action=str(action),
                   box=box, hand=hand.index, amount=amount, player=player or next(iter(hand.stakes)),
                   co_players=[{"player": c.player, "joins": c.joins, "amount": c.amount, "stays_on": c.stays_on}
                               for c in choices], moved_to_second_hand=moved)
        self._advance()

    def _decision_hand(self, box: int, action: Action) -> Hand | None:
        """The hand a decision at ``box`` means: its hand in turn, else its last finished hand
        (so that a hit on a finished 21 is refused by the rule that forbids it)."""
        hands = self.box_hands.get(box, [])
        if action is Action.SURRENDER:
            return hands[0] if hands else None
        h = self._current() if self.state == "players" else None
        current = h if h is not None and h.box == box else None
        if current is not None and not current.needs_card:
            return current
        done = [h for h in hands if h.complete]
        return done[-1] if done else current

    def _do_hit(self, hand: Hand, amount: int | None, choices: tuple[CoPlayerChoice, ...]) -> list[str]:
        hand.awaiting_card = True
        return []

    def _do_stand(self, hand: Hand, amount: int | None, choices: tuple[CoPlayerChoice, ...]) -> list[str]:
        hand.stood = True
        return []

    def _do_surrender(self, hand: Hand, amount: int | None, choices: tuple[CoPlayerChoice, ...]) -> list[str]:
        hand.surrendered = True  # one hand per box: every stake on it surrenders with the owner's decision
        return []

    def _do_double(self, hand: Hand, amount: int | None, choices: tuple[CoPlayerChoice, ...]) -> list[str]:
        owner = next(iter(hand.stakes))
        hand.doubled = {owner: hand.stakes[owner] if amount is None else amount}
        for c in choices:  # a co-player who declines keeps his stake as it was
            if c.joins:
                hand.doubled[c.player] = hand.stakes[c.player] if c.amount is None else c.amount
        hand.took_double = hand.awaiting_card = True
        return []

    def _do_split(self, hand: Hand, amount: int | None, choices: tuple[CoPlayerChoice, ...]) -> list[str]:
        """The owner and each joining co-player stake again on the second card; a declining co-player
        stays on the first hand, or (play.declined_split_stays_on) moves his stake to the second card
        he chose."""
        hands = self.box_hands[hand.box]
        aces = hand.cards[0].rank is Rank.ACE
        owner = next(iter(hand.stakes))
        answers = {c.player: c for c in choices}
        moved = [p for p, c in answers.items() if not c.joins and c.stays_on == 2]
        stakes = {p: s for p, s in hand.stakes.items() if p == owner or answers[p].joins or p in moved}
        for p in moved:
            del hand.stakes[p]
        new = Hand(hand.box, hand.index + 1, stakes, [hand.take_last()], from_split=True, split_aces=aces,
                   waits_on_21=self.rules.play.double_on_split_21 and not aces)
        hand.from_split, hand.split_aces = True, aces
        hand.waits_on_21 = new.waits_on_21
        hands.insert(hand.index + 1, new)
        for i, h in enumerate(hands):
            h.index = i
        self._order = [h for b in sorted(self.box_hands) for h in self.box_hands[b]]  # the turn stays put
        return moved

    # ----- holds, overrides and the seed procedures -----
    def hold(self, reason: Reason, detail: str) -> None:
        self.held, self.hold_cause = f"{reason}: {detail}", reason
        self._emit(Reason.ROUND_HELD, f"held: {detail}", Severity.ALARM, cause=str(reason), detail=detail)

    def _release(self) -> None:
        """No hold any more, and no cause of one (resume, void, re-deal)."""
        self.held = self.hold_cause = None

    def _supervisor(self, what: str, who: str, role: Role) -> None:
        require_supervisor(self._sink, "round", f"round {self.round_id}: {what}", who, role)

    def resume(self, who: str, role: Role) -> None:
        self._supervisor("resume", who, role)
        was, cause = self.held, self.hold_cause
        self._release()
        if was is not None and cause is Reason.CARDS_TO_BOX_WITHOUT_WAGER and self._redeal_queue:
            # another card came back than the re-deal expected: continuing means taking the cards as they
            # come (else the same card holds the round again at once, alarm after alarm)
            expected, self._redeal_queue = self._redeal_queue, []
            self._emit(Reason.CARDS_TO_BOX_WITHOUT_WAGER, f"re-deal order given up by {who}: the cards are dealt "
                       "as they come out of the shoe", Severity.WARNING, who, expected=[str(c) for c in expected])
        self._emit(Reason.ROUND_RESUMED, f"resumed by {who} (was held: {was})", who=who)

    def void(self, reason: Reason, who: str, role: Role, by_rule: str | None = None) -> None:
        """Round void: nothing is settled, every bet goes back. The table places the cards.

        ``by_rule`` names the house rule that voids the round by itself (a face-up misload);
        without it the void is an override and needs a supervisor.
        """
        if not self.live:
            raise self._refuse("round_state", f"round {self.round_id} is {self.state} already: there is nothing to void",
                               who)
        if by_rule is None:
            self._supervisor("void", who, role)
        self._release()
        # a void the rule decides is an alarm a supervisor looks at; one a supervisor ordered is his
        # logged decision (who, why), not an alarm for him to clear (REQUIREMENTS §2: overrides logged with who)
        severity = Severity.ALARM if by_rule is not None else Severity.WARNING
        self._emit(Reason.ROUND_VOID, f"void ({reason}); all bets returned", severity, who,
                   cause=str(reason), by_rule=by_rule, returned=self._stakes_in_play(),
                   voided_paid_at_once=[line.describe() for line in self.paid_at_once])
        self._go("voided")

    def _stakes_in_play(self) -> dict[str, int]:
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

    def flag(self, reason: Reason, detail: str, who: str | None = None) -> None:
        self.flags.append({"reason": str(reason), "detail": detail, "who": who})
        self._emit(reason, f"flagged: {detail}", Severity.WARNING, who, flagged=True)

    def reconstruct_initial_deal(self, who: str, role: Role,
                                 assignments: list[tuple[Card, Target]] | None = None) -> None:
        """A placement error in the initial deal: the layout is put back as the deal order says.

        ``assignments`` (optional) is the layout the supervisor confirms; it must hold exactly the
        cards dealt so far, each on a box with a wager or the dealer, at most two per box.
        """
        if self.state != "initial_deal":
            raise self._refuse("reconstruct_initial_deal", "a placement error is put right only while the initial "
                               f"deal is under way, and {_NOW[self.state]}", who)
        self._supervisor("reconstruct initial deal", who, role)
        if assignments is not None:
            problem = self._rebuild_initial_layout(assignments)
            if problem:
                raise self._refuse(*problem, who=who)
        self._emit(Reason.PLACEMENT_ERROR, "initial deal reconstructed", Severity.WARNING, who,
                   layout=[(str(c), str(t)) for c, t in self.assignments])

    def reconstruct_and_redeal(self, who: str, role: Role, also: tuple[Card, ...] = ()) -> list[Card]:
        """Cards dealt to a box without a wager: all cards in play are taken back and re-dealt.

        ``also``: cards in play that no hand took yet (exposed in error), in the order they left
        the shoe after the dealt ones; they go back too and are dealt again after them.
        """
        if "redeal" not in triggers_from(self.state):  # the machine says where a re-deal may start
            raise self._refuse("redeal", f"no re-deal while {_NOW[self.state]}: only cards being dealt or played are "
                               "dealt again", who)
        self._supervisor("reconstruct and re-deal", who, role)
        back = [c for c, _ in self.assignments] + self._redeal_queue + list(also)
        withdrawn = [line.describe() for line in self.paid_at_once]  # won again when the same cards come again
        self.assignments = []
        self._release()
        self._start_initial_deal()
        self._redeal_queue = back
        self._emit(Reason.CARDS_TO_BOX_WITHOUT_WAGER, f"{len(back)} cards in play reconstructed, "
                   "to be re-dealt in the same order", Severity.WARNING, who, cards=[str(c) for c in back],
                   withdrawn_paid_at_once=withdrawn)
        self._go("redeal")
        return back

    def _rebuild_initial_layout(self, layout: list[tuple[Card, Target]]) -> Problem:
        """Put the initial-deal cards where the supervisor confirms they belong (same cards, valid places)."""
        dealt = Counter(c for c, _ in self.assignments)
        if Counter(c for c, _ in layout) != dealt:
            return "reconstruct_cards", "the reconstructed layout must hold exactly the cards dealt so far: " \
                                        + " ".join(str(c) for c in sorted(dealt.elements()))
        places = Counter((t.kind, t.box) for _, t in layout)
        for (kind, b), n in places.items():
            if kind not in ("dealer", "box") or kind == "dealer" and n > 1 or kind == "box" and (
                    b not in self.box_hands or n > 2):
                return "reconstruct_places", f"{'dealer' if kind == 'dealer' else f'box {b}'} cannot hold {n} " \
                                             "card(s) in the initial deal (wagered boxes take two, the dealer one)"
        remaining = Counter({k: n for k, n in places.items()})
        plan = []
        for t in self._full_plan():
            key = (t.kind, t.box)
            if remaining[key] > 0:
                remaining[key] -= 1
            else:
                plan.append(t)
        for hands in self.box_hands.values():
            hands[0].reset()
        self.dealer_cards.clear()
        for b in self.initial_cards:
            self.initial_cards[b] = []
        for card, t in layout:
            if t.kind == "dealer":
                self.dealer_cards.append(card)
            else:
                assert t.box is not None  # checked above: a box target names its box
                self.box_hands[t.box][0].add(card)
                self.initial_cards[t.box].append(card)
        self.assignments[:] = [(c, t) for c, t in layout]
        self._plan = plan
        return None


_Decision = Callable[[Round, Hand, "int | None", tuple[CoPlayerChoice, ...]], list[str]]
_DECISIONS: dict[Action, _Decision] = {
    Action.HIT: Round._do_hit, Action.STAND: Round._do_stand, Action.SURRENDER: Round._do_surrender,
    Action.DOUBLE: Round._do_double, Action.SPLIT: Round._do_split,
}
# Dispatch by the record's type: a round input names no method, so nothing outside picks one.
_APPLY: dict[type, Callable[[Round, Any], Any]] = {
    PlaceBet: lambda r, op: r.place_bet(op.box, op.player, op.amount),
    ReduceBet: lambda r, op: r.reduce_bet(op.box, op.player, op.amount),
    PlacePairsBet: lambda r, op: r.place_pairs_bet(op.box, op.player, op.amount),
    NoMoreBets: lambda r, op: r.no_more_bets(op.who),
    Insure: lambda r, op: r.insure(op.box, op.player, op.amount),
    EvenMoney: lambda r, op: r.even_money(op.box, op.player),
    CloseInsurance: lambda r, op: r.close_insurance(op.who),
    Act: lambda r, op: r.act(op.box, op.action, op.who, amount=op.amount, player=op.player,
                             co_players=op.co_players),
    Resume: lambda r, op: r.resume(op.who, op.role),
    CardDealt: lambda r, op: r.card_dealt(op.card),
    Hold: lambda r, op: r.hold(op.reason, op.detail),
    Flag: lambda r, op: r.flag(op.reason, op.detail, op.who),
    Void: lambda r, op: r.void(op.reason, op.who, op.role, by_rule=op.by_rule),
    ReconstructInitialDeal: lambda r, op: r.reconstruct_initial_deal(
        op.who, op.role, assignments=None if op.assignments is None else list(op.assignments)),
    ReconstructAndRedeal: lambda r, op: r.reconstruct_and_redeal(op.who, op.role, also=op.also),
}
