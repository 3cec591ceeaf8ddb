"""The STATE view: the table now, as a JSON object for the API.

Built only from what the host knows: the device models, the cards that left the shoe (the
shoe's counts, the piles, the live round), holds and alarms. Nothing still inside the shoe is
known to the host, so no undealt card can appear here; a test compares this view against a
simulated shoe's remaining stack.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any

from devices.game.hand import hand_total
from devices.game.round import Round
from devices.models.device_model import DeviceModel
from devices.tracker.table import Table


def table_state(table: Table, links: dict[str, bool], last_seq: int) -> dict[str, Any]:
    """``links``: device name -> whether its connection is up now."""
    shoe = table.shoe
    size = sum(shoe.expected.values())
    return {
        "seq": last_seq,
        "rules": table.rules.name,
        "devices": {model.NAME: _device(model, links.get(model.NAME, False)) for model in table.devices()},
        "shoe": {
            "state": shoe.state,
            "cards_out": shoe.cards_out,
            "cards_in_shoe": size,
            "penetration": round(shoe.cards_out / size, 4) if size else 0.0,
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
        "holds": dict(table.holds),
        "alarms": [{"id": a.id, "reason": a.reason, "source": a.source, "message": a.message}
                   for a in table.alarms.open.values()],
    }


def _device(model: DeviceModel, link_up: bool) -> dict[str, Any]:
    ident = model.ident
    return {
        "state": model.state,
        "link": "up" if link_up else "down",
        "usable": model.usable,
        "fault": None if model.active_fault is None else model.active_fault.code.name.lower(),
        "ident": None if ident is None else {"model": ident.model, "serial": ident.serial,
                                             "firmware": ident.firmware_version},
    }


def _round(r: Round) -> dict[str, Any]:
    dealer_total, dealer_soft = hand_total(r.dealer_cards)
    return {
        "id": r.round_id,
        "state": r.state,
        "held": r.held,
        "wagers": {str(box): dict(stakes) for box, stakes in r.wagers.items()},
        "boxes": {str(box): [{"hand": h.index, "cards": [str(c) for c in h.cards], "total": h.total, "soft": h.soft,
                              "stakes": dict(h.stakes), "doubled": dict(h.doubled), "stood": h.stood,
                              "surrendered": h.surrendered} for h in hands]
                  for box, hands in r.box_hands.items()},
        "dealer": {"cards": [str(c) for c in r.dealer_cards], "total": dealer_total, "soft": dealer_soft},
        "next": None if (target := r.expected_next()) is None else [target.kind, target.box, target.hand],
        "turn": None if (turn := r.current_hand) is None else [turn.kind, turn.box, turn.hand],
        "flags": [dict(f) for f in r.flags],
        "house_result": None if r.settlement is None else _money(r.settlement.house),
    }


def _money(cents: int | Fraction) -> int | str:
    """Cents: a whole number, or "p/q" where a pay ratio leaves part of a cent (JSON has no fractions)."""
    return cents if isinstance(cents, int) else str(cents)
