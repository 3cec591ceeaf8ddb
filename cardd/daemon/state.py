"""The STATE view: the table now, as a JSON object for the API.

Built only from what the host knows: the device models, the cards that left the shoe (the
shoe's counts, the piles, the live round), holds and alarms. Nothing still inside the shoe is
known to the host, so no undealt card can appear here; a test compares this view against a
simulated shoe's remaining stack.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any

from devices.game.hand import Hand, hand_total
from devices.game.round import Round
from devices.game.settlement import Line
from devices.models.device_model import DeviceModel, fault_ends
from devices.models.names import MODEL_NAMES

#: the tracker's name of a device -> its role, the name clear_fault (and cardctl) take
_ROLES = {model: role for role, model in MODEL_NAMES.items()}
from devices.tracker.table import Table


def table_state(table: Table, links: dict[str, bool], last_seq: int) -> dict[str, Any]:
    """``links``: device name -> whether its connection is up now."""
    shoe = table.shoe
    size = sum(shoe.expected.values())
    # cards that left the shoe but wait, uncounted by the shoe, for the dealer to enter the unreadable
    # one before them: they are out all the same
    waiting = (table.awaiting_entry is not None) + len(table.queued_reads)
    cards_out = shoe.cards_out + waiting
    return {
        "seq": last_seq,
        "rules": table.rules.name,
        "devices": {model.NAME: _device(model, links.get(model.NAME, False)) for model in table.devices()},
        "shoe": {
            "state": shoe.state,
            "cards_out": cards_out,
            "cards_in_shoe": size,
            "penetration": round(cards_out / size, 4) if size else 0.0,
            "burn_remaining": shoe.burn_remaining,
            "last_round": table.last_round_id,
            # the next shoe's shuffle reports or load, kept until this shoe ends (and until what holds it is over)
            "next_shoe_waiting": len(shoe.deferred),
            "next_shoe_held": table.next_shoe_waits(),
        },
        "round": None if table.round is None else _round(table.round),
        "rounds_started": table.rounds_started,
        "piles": {"burn": len(table.burn_pile), "discard": len(table.discard), "played": len(table.played),
                  "pending": [str(c) for c in table.pending], "drawn_in_error": [str(c) for c in table.drawn_in_error]},
        "awaiting_entry": table.awaiting_entry,
        "reads_behind_entry": len(table.queued_reads),
        "holds": dict(table.holds),
        "alarms": [{"id": a.id, "reason": a.reason, "source": a.source, "message": a.message}
                   for a in table.alarms.open.values()],
    }


def _device(model: DeviceModel, link_up: bool) -> dict[str, Any]:
    ident, fault = model.ident, model.active_fault
    return {
        "state": model.state,
        "link": "up" if link_up else "down",
        "usable": model.usable,
        "fault": None if fault is None else fault.code.name.lower(),
        "fault_position": None if fault is None else fault.position,
        "fault_detail": None if fault is None else fault.detail,
        # what ends the fault: the device itself, a technician's clear_fault, or only its cause removed
        "fault_ends": None if model.state != "fault" else fault_ends(None if fault is None else fault.code,
                                                                     _ROLES.get(model.NAME)),
        "ident": None if ident is None else {"model": ident.model, "serial": ident.serial,
                                             "firmware": ident.firmware_version},
    }


def _hand(h: Hand, lines: list[Line]) -> dict[str, Any]:
    return {"hand": h.index, "cards": [str(c) for c in h.cards], "total": h.total, "soft": h.soft,
            "stakes": dict(h.stakes), "doubled": dict(h.doubled), "stood": h.stood, "surrendered": h.surrendered,
            "bust": h.bust, "blackjack": h.blackjack,
            # once settled: each player's result on this hand (main bet, surrender, even money)
            "results": [_line(line) for line in lines if line.box == h.box and line.hand == h.index]}


def _line(line: Line) -> dict[str, Any]:
    return {"player": line.player, "kind": line.kind, "outcome": line.outcome, "stake": line.stake,
            "net": _money(line.net)}


def _round(r: Round) -> dict[str, Any]:
    dealer_total, dealer_soft = hand_total(r.dealer_cards)
    lines = [] if r.settlement is None else list(r.settlement.lines)
    return {
        "id": r.round_id,
        "state": r.state,
        "held": r.held,
        "wagers": {str(box): dict(stakes) for box, stakes in r.wagers.items()},
        "boxes": {str(box): [_hand(h, lines) for h in hands] for box, hands in r.box_hands.items()},
        "dealer": {"cards": [str(c) for c in r.dealer_cards], "total": dealer_total, "soft": dealer_soft,
                   "bust": dealer_total > 21,
                   "blackjack": len(r.dealer_cards) == 2 and dealer_total == 21},
        "next": None if (target := r.expected_next()) is None else [target.kind, target.box, target.hand],
        "turn": None if (turn := r.current_hand) is None else [turn.kind, turn.box, turn.hand],
        "flags": [dict(f) for f in r.flags],
        "house_result": None if r.settlement is None else _money(r.settlement.house),
        # once settled: the bets of a box rather than a hand (insurance, pairs, bonuses), and each player's net
        "box_results": [_line(line) for line in lines if line.hand is None],
        "player_results": None if r.settlement is None else _per_player(r.settlement.per_player(), lines),
    }


def _per_player(nets: dict[str, Any], lines: list[Line]) -> dict[str, int | str]:
    """Each player's net, in the order of the boxes (a blackjack is settled first, at once)."""
    by_box = sorted(lines, key=lambda line: (line.box, -1 if line.hand is None else line.hand))
    return {player: _money(nets[player]) for player in dict.fromkeys(line.player for line in by_box)}


def _money(cents: int | Fraction) -> int | str:
    """Cents: a whole number, or "p/q" where a pay ratio leaves part of a cent (JSON has no fractions)."""
    return cents if isinstance(cents, int) else str(cents)
